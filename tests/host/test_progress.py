"""Progress lines: rate and ETA on a terminal, nothing in a pipe or under CI."""

import io

import pytest

from specmem.progress import Progress, progress_enabled


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_lines_carry_count_rate_and_eta():
    clock, out = _Clock(), io.StringIO()
    with Progress(100, "work", unit="runs", every=2.0, stream=out, enabled=True, clock=clock) as p:
        for _ in range(100):
            clock.t += 0.1  # 10 runs/s
            p.update()
    lines = out.getvalue().splitlines()
    # a line every 2 s of a 10 s job (none at the very end), then the total
    assert len(lines) == 5, lines
    assert "work: 20/100 runs (20%), 10 runs/s, ETA 0:08" in lines[0]
    assert "work: 100/100 runs in 0:10" in lines[-1]


def test_quiet_when_disabled_or_fast():
    clock, out = _Clock(), io.StringIO()
    with Progress(10, "x", stream=out, enabled=False, clock=clock) as p:
        for _ in range(10):
            clock.t += 5
            p.update()
    with Progress(10, "fast", stream=out, enabled=True, clock=clock) as p:
        p.update(10)  # done before the first interval: no line, not even the total
    assert out.getvalue() == ""


@pytest.mark.parametrize("env,tty,want", [
    ({}, True, True),
    ({}, False, False),
    ({"CI": "true"}, True, False),
    ({"CI": "true", "SPECMEM_PROGRESS": "1"}, False, True),
    ({"SPECMEM_PROGRESS": "0"}, True, False),
])
def test_enabled_only_on_a_terminal_outside_ci(monkeypatch, env, tty, want):
    for name in ("CI", "SPECMEM_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert progress_enabled(_Tty() if tty else io.StringIO()) is want


def test_sim_heartbeat_reports_elapsed_and_eta(monkeypatch, capsys):
    import time

    from specmem.sim.commands import _Heartbeat

    monkeypatch.setenv("SPECMEM_PROGRESS", "1")
    with _Heartbeat("sim", 1000, rate=100.0, every=0.05):
        time.sleep(0.2)
    out = capsys.readouterr().out.splitlines()
    assert out and all("sim: 1000 tokens" in line and "s left (last run here: 100 tokens/s)" in line for line in out)
    monkeypatch.setenv("SPECMEM_PROGRESS", "0")
    with _Heartbeat("sim", 1000, rate=None, every=0.05):
        time.sleep(0.12)
    assert capsys.readouterr().out == ""
