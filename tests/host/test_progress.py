"""Progress lines: rate and ETA on a terminal, nothing in a pipe or under CI."""

import io
import re
import time

import pytest

from specmem.progress import Heartbeat, Progress, progress_enabled, progress_every, stage


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


def test_heartbeat_lines_carry_elapsed_estimate_and_status():
    out = _Tty()
    hb = Heartbeat("build", 0.05, expect_s=100.0, note="last build: 1:40", status=lambda: "routing", stream=out)
    with hb:
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines and hb.lines == len(lines)
    assert all(re.search(r"build: 0:0\d elapsed, about 1:[34]\d left \(last build: 1:40\); routing$", ln) for ln in lines)


def test_heartbeat_stays_silent_while_the_step_logs_and_quotes_its_last_line():
    out, said = _Tty(), []
    with Heartbeat("report", 0.2, stream=out) as hb:
        say = hb.relay(said.append)
        for i in range(6):  # a line every 0.05 s: signs of life, no heartbeat
            say(f"step {i} done")
            time.sleep(0.05)
        assert out.getvalue() == ""
        time.sleep(0.4)  # now silent for longer than the interval
    assert said == [f"step {i} done" for i in range(6)]
    assert "since: step 5 done" in out.getvalue().splitlines()[0]


def test_heartbeat_quiet_off_a_terminal(monkeypatch):
    for name in ("CI", "SPECMEM_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()  # a pipe
    with Heartbeat("x", 0.01, stream=out):
        time.sleep(0.1)
    assert out.getvalue() == ""


def test_stage_says_start_and_elapsed(monkeypatch):
    monkeypatch.setenv("SPECMEM_PROGRESS", "0")
    said = []
    with stage("yosys synth_ecp5", said.append):
        pass
    assert said == ["yosys synth_ecp5", "yosys synth_ecp5: done in 0:00"]


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0.5")
    assert progress_every(10.0) == 0.5 and Progress(3, "x").every == 0.5 and Heartbeat("x").every == 0.5
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "soon")
    assert progress_every(10.0) == 10.0


def test_sim_heartbeat_reports_elapsed_and_eta(monkeypatch, capsys):
    from specmem.sim.commands import _heartbeat

    monkeypatch.setenv("SPECMEM_PROGRESS", "1")
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0.05")
    with _heartbeat("sim", 1000, rate=100.0):
        time.sleep(0.2)
    err = capsys.readouterr().err.splitlines()
    assert err and all(re.search(r"sim: 1000 tokens: 0:0\d elapsed, about 0:(09|10) left "
                                 r"\(last run here: 100 tokens/s\)$", line) for line in err)
    monkeypatch.setenv("SPECMEM_PROGRESS", "0")
    with _heartbeat("sim", 1000, rate=None):
        time.sleep(0.12)
    assert capsys.readouterr().err == ""
