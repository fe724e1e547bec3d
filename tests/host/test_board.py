"""``specmem board`` (``host/board.py``) without a board: beat packing by hand, the first-difference
report, and the command over a pseudo-terminal answered by a fake board in a thread (a silent
one: a timeout; one whose core outputs zeros: the first differing token and field; one that
answers with the golden model: the command's happy path and its OUT.npz). The real bridge and
core are driven by the same code in ``tests/sim/test_board.py``; the bitstream build is the slow
test at the end."""

from __future__ import annotations

import json
import os
import select
import threading

import numpy as np
import pytest

from specmem.board import (BITSTREAM_NAME, MANIFEST_NAME, BoardMismatch, check_against_model, pack_beats,
                           unpack_beats)
from specmem.cli import main

D, K, PRESET = 8, 2, "legacy-int8"


def test_pack_and_unpack_by_hand():
    # k = 2 lanes of 8 bits: element 2b is the low byte of beat b, element 2b + 1 the high byte
    assert pack_beats(np.array([1, 2, -1, -128]), 2, 8) == [0x0201, 0x80FF]
    np.testing.assert_array_equal(unpack_beats([0x0201, 0x80FF], 2, 8), [1, 2, -1, -128])
    assert pack_beats(np.array([-2, 3]), 1, 16) == [0xFFFE, 0x0003]
    np.testing.assert_array_equal(unpack_beats([0x7FFF8000], 2, 16), [-32768, 32767])


def _hw(y):
    T = len(y)
    return {"y_raw": np.array(y), "last": np.array([[False, True]] * T), "tokens": T, "saturations": 0,
            "orth_count": 0, "framing_errors": 0, "count": 1, "orth_flag": 0, "busy": 0}


def test_first_difference_is_named():
    want = _hw([[1, 2, 3, 4], [5, 6, 7, 8]])
    check_against_model(_hw([[1, 2, 3, 4], [5, 6, 7, 8]]), want)
    with pytest.raises(BoardMismatch, match=r"token 1, field y\[2\]: the board says 9, the fixed-point model 7"):
        check_against_model(_hw([[1, 2, 3, 4], [5, 6, 9, 0]]), want)
    bad = _hw([[1, 2, 3, 4], [5, 6, 7, 8]])
    bad["last"][0] = [True, True]
    with pytest.raises(BoardMismatch, match="token 0, field tlast of output beat 0"):
        check_against_model(bad, want)
    bad = _hw([[1, 2, 3, 4], [5, 6, 7, 8]])
    bad["saturations"] = 3
    with pytest.raises(BoardMismatch, match="after the stream, field saturations: the board says 3"):
        check_against_model(bad, want)


# ---------------------------------------------------------------------------------------------
# the command against fake boards on a pseudo-terminal

def _manifest(folder, d=D, k=K):
    """A build folder as 'specmem board build' leaves it, without the slow part (no bitstream)."""
    from specmem.rtl.board import BoardTop

    from specmem.sim.build import _silence

    top = BoardTop(d, k, PRESET, divisor=217)
    m = {**top.manifest(), "baud": 115200}
    _silence(top)  # built for its manifest only
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, MANIFEST_NAME), "w") as fh:
        json.dump(m, fh, default=str)
    return m


class FakeBoard(threading.Thread):
    """The bridge's protocol on the master side of a pty, registers of a d=8, k=2 legacy-int8 build
    written out by hand. ``core``: ``"silent"`` (never answers), ``"zeros"`` (every output beat 0),
    ``"golden"`` (outputs and counters from the golden model on the tokens received so far)."""

    REGS = {0x00: 0x534D454D, 0x08: (K << 16) | D, 0x0C: 1 | (1 << 8) | (1 << 16) | (4 << 24)}

    def __init__(self, core: str):
        super().__init__(daemon=True)
        self.core = core
        self.master, slave = os.openpty()
        self.port = os.ttyname(slave)
        self.slave = slave
        self.stop = threading.Event()
        self.beats: list[int] = []
        self.out: list[tuple[int, int]] = []   # (flags, tdata) of output beats waiting

    def _read(self, n):
        data = b""
        while len(data) < n:
            if self.stop.is_set():
                raise EOFError
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                data += os.read(self.master, n - len(data))
        return data

    def _golden(self):
        from specmem.golden.fixed.annihilation import annihilation_fixed

        X = unpack_beats(self.beats, K, 8).reshape(-1, D)
        return X, annihilation_fixed(np.ldexp(X.astype(np.float64), -5), K, PRESET, trace=False)

    def run(self):
        try:
            while True:
                op = self._read(1)[0]
                if self.core == "silent":
                    continue
                if op == 0x00:
                    reply = bytes([0xB5, 1, 2, 4])
                elif op in (0x10, 0x11):
                    self.beats.append(int.from_bytes(self._read(2), "little"))
                    if op == 0x11:
                        X, ref = self._golden()
                        y = ref["y_raw"][-1] if self.core == "golden" else np.zeros(D, dtype=np.int64)
                        for b in range(D // K):
                            word = sum((int(y[b * K + lane]) & 0xFFFF) << (16 * lane) for lane in range(K))
                            self.out.append((1 | (2 if b == D // K - 1 else 0), word))
                    reply = b"\x00"
                elif op == 0x20:
                    flags, word = self.out.pop(0) if self.out else (0, 0)
                    reply = bytes([flags]) + word.to_bytes(4, "little")
                elif op == 0x30:
                    addr = self._read(1)[0]
                    value = self.REGS.get(addr, 0)
                    if self.core == "golden" and addr >= 0x20 and self.beats:
                        X, ref = self._golden()
                        value = {0x20: int(ref["count"]) << 2 | int(np.any(ref["orth"])) << 1,
                                 0x40: len(X), 0x44: sum(int(v) for n, v in ref["sat"].items() if n != "x"),
                                 0x48: int(np.sum(ref["orth"]))}.get(addr, 0)
                    reply = b"\x00" + value.to_bytes(4, "little")
                elif op == 0x31:
                    addr = self._read(5)[0]
                    if addr == 0x10:               # CTRL.soft_reset
                        self.beats, self.out = [], []
                    reply = b"\x00"
                else:
                    reply = b"\xEE"
                os.write(self.master, reply)
        except (EOFError, OSError):
            pass

    def close(self):
        self.stop.set()
        self.join(timeout=2)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def board(request):
    fake = FakeBoard(request.param)
    fake.start()
    yield fake
    fake.close()


def _inputs(tmp_path, T=6):
    path = tmp_path / "x.npz"
    assert main(["vectors", "--algo", "annihilation", "--T", str(T), "--d", str(D), "--seed", "4",
                 "--out", str(path)]) == 0
    return path


def _golden_y(path):
    from specmem.golden.fixed.annihilation import annihilation_fixed

    with np.load(path) as f:
        return annihilation_fixed(f["x"], K, PRESET, trace=False)


@pytest.mark.parametrize("board", ["golden"], indirect=True)
def test_run_writes_the_outputs(tmp_path, capsys, board):
    _manifest(tmp_path / "build")
    inp, out = _inputs(tmp_path), tmp_path / "o.npz"
    capsys.readouterr()
    assert main(["board", "run", "--port", board.port, "--in", str(inp), "--out", str(out),
                 "--build", str(tmp_path / "build")]) == 0
    assert "outputs and counters equal the fixed-point model bit for bit" in capsys.readouterr().out
    ref = _golden_y(inp)
    with np.load(out) as f:
        np.testing.assert_array_equal(f["y_raw"], ref["y_raw"])
        assert int(f["tokens"]) == 6 and int(f["count"]) == int(ref["count"])


@pytest.mark.parametrize("board", ["zeros"], indirect=True)
def test_wrong_outputs_name_token_and_field(tmp_path, capsys, board):
    _manifest(tmp_path / "build")
    inp, out = _inputs(tmp_path), tmp_path / "o.npz"
    capsys.readouterr()
    assert main(["board", "run", "--port", board.port, "--in", str(inp), "--out", str(out),
                 "--build", str(tmp_path / "build")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    y = _golden_y(inp)["y_raw"]
    t = next(t for t in range(len(y)) if np.any(y[t]))       # the first token whose y is not all zero
    i = int(np.flatnonzero(y[t])[0])
    assert t >= K  # warm-up tokens output zeros, so the fake board's zeros agree with them
    assert err == [f"specmem: error: board: token {t}, field y[{i}]: the board says 0, the fixed-point model "
                   f"{int(y[t, i])}"]
    assert not out.exists()


@pytest.mark.parametrize("board", ["silent"], indirect=True)
def test_silent_port_times_out(tmp_path, capsys, board):
    _manifest(tmp_path / "build")
    inp = _inputs(tmp_path)
    capsys.readouterr()
    assert main(["board", "run", "--port", board.port, "--in", str(inp), "--out", str(tmp_path / "o.npz"),
                 "--build", str(tmp_path / "build"), "--timeout", "0.2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specmem: error: port {board.port}: no answer within 0.2 s"), err
    assert "PING" in err[0]


@pytest.mark.parametrize("board", ["golden"], indirect=True)
def test_other_bitstream_is_refused(tmp_path, capsys, board):
    """The manifest says k = 4, the board (registers) k = 2."""
    _manifest(tmp_path / "build", k=4)
    inp = _inputs(tmp_path)
    capsys.readouterr()
    assert main(["board", "run", "--port", board.port, "--in", str(inp), "--out", str(tmp_path / "o.npz"),
                 "--build", str(tmp_path / "build")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specmem: error: bitstream:"), err


@pytest.mark.slow
def test_board_build_makes_a_bitstream(tmp_path, capsys):
    """The real flow (Yosys, nextpnr-ecp5, ecppack from the yowasp wheels): minutes."""
    out = tmp_path / "board"
    assert main(["board", "build", "--d", "8", "--k", "2", "--out", str(out)]) == 0
    bit = out / BITSTREAM_NAME
    assert bit.is_file() and bit.stat().st_size > 10_000
    m = json.loads((out / MANIFEST_NAME).read_text())
    assert m["parameters"]["d"] == 8 and m["parameters"]["k"] == 2 and m["board"] == "ULX3S-85F"
    # nextpnr closed timing on the PLL clock (it stops the flow otherwise; here read back)
    assert m["build"]["luts"] > 0 and m["build"]["fmax_mhz"] >= m["clock_hz"] / 1e6 == 12.5
    assert "openFPGALoader -b ulx3s" in capsys.readouterr().out


@pytest.mark.parametrize("mhz", [12.5, 10.0])
def test_pll_settings_make_the_clock(mhz):
    """ecppll's EHXPLLL settings, checked with the ECP5 PLL's equations (feedback from CLKOP):
    f_out = 25 MHz / CLKI_DIV * CLKFB_DIV, VCO = f_out * CLKOP_DIV within 400..800 MHz."""
    from specmem.board import pll_config

    pll = pll_config(mhz)
    p = pll["params"]
    f_out = 25.0 / p["CLKI_DIV"] * p["CLKFB_DIV"]
    assert f_out == pytest.approx(mhz) and pll["mhz"] == pytest.approx(mhz)
    assert 400 <= f_out * p["CLKOP_DIV"] <= 800 and p["FEEDBK_PATH"] == "CLKOP"
    assert pll["attrs"]["FREQUENCY_PIN_CLKI"] == "25"


def test_board_plan_pins_and_pll():
    """The ULX3S-85F build plan (no tools run): the FTDI UART on M1 (in) and L4 (out), the 25 MHz
    oscillator on G2 constrained for nextpnr, the LEDs, the PLL in the netlist, the 85F device."""
    from specmem.board import pll_config
    from specmem.rtl.board_ulx3s import ULX3SBoard, platform

    plan = platform().build(ULX3SBoard(D, K, PRESET, divisor=109, pll=pll_config(12.5)), name="b", do_build=False)
    lpf = plan.files["b.lpf"]
    for comp, site in (("uart_0__rx__io", "M1"), ("uart_0__tx__io", "L4"), ("clk25_0__io", "G2"),
                       ("led_0__io", "B2"), ("led_7__io", "H3")):
        assert f'LOCATE COMP "{comp}" SITE "{site}";' in lpf
    assert 'FREQUENCY PORT "clk25_0__io" 25000000.0 HZ;' in lpf
    assert "EHXPLLL" in plan.files["b.il"]
    assert "--85k --package CABGA381 --speed 6" in plan.files["build_b.sh"]
