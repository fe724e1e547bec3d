"""cocotb tests of the scaled cores in Verilator: linear attention (``rtl/linear_attention_scaled.py``
against ``golden/fixed/scaled/linear_attention.linear_attention_scaled``), DeltaNet and Gated
DeltaNet (``rtl/deltanet_scaled.py`` against ``golden/fixed/scaled/deltanet.deltanet_scaled``) and
VLA (``rtl/vla_scaled.py`` against ``golden/fixed/scaled/vla.vla_scaled``), bit
for bit: every output beat and exponent, the state read out by a flush (mantissas and row
exponents; gated: ``S``'s row exponents and ``gamma``'s mantissa; linear: also ``z``; VLA: also
``A``'s off-diagonal rows and its diagonal), the saturation counts and the token counter; random idle input
cycles and random output backpressure, with stretches longer than a token, a reset in the middle of
a stream, and the pass-to-pass cycles at full rate. Gated streams mix decays near 1 with exact 1s,
powers of two and tiny ones (2^-100 .. 2^-700), so ``gamma``'s exponent runs past the core's 12 bits.

A token goes in as ``3 d/k`` beats (``k``'s, ``v``'s, ``q``'s; VLA ``4 d/k`` with ``u``'s; each
vector's exponent with every beat of it, the scalars with the token's last beat), random idle cycles between any two beats; a
flush is one beat. The ports are flat Verilog vectors (``i_data`` is ``k`` signed ``M``-bit
fields, LSB first); the handshake is sampled right after each rising edge, as in ``sim/stream.py``.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from specmem.sim.axis import CLOCK_PERIOD_NS
from specmem.sim.tbcase import Record, load_case

CASE = load_case()
MANIFEST = CASE.get("manifest", {})
RECORD = Record()


def _pack(values, width):
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & ((1 << width) - 1)) << (i * width)
    return word


def _unpack(word, width, n):
    out = []
    for i in range(n):
        v = (word >> (i * width)) & ((1 << width) - 1)
        out.append(v - (1 << width) if v >> (width - 1) else v)
    return out


def _signed(v, width):
    v = int(v) & ((1 << width) - 1)
    return v - (1 << width) if v >> (width - 1) else v


class Env:
    def __init__(self, dut, seed):
        p = MANIFEST["parameters"]
        self.d, self.k, self.M, self.Ws, self.Wo, self.EW = (int(p[n]) for n in ("d", "k", "M", "Ws", "Wo", "exp_width"))
        self.P = int(p.get("P", 0))
        self.preset = MANIFEST["design"]["preset"]
        self.gated = bool(p.get("gated", False))
        self.H = int(p.get("heads", 1))  # token slot t H + h is head h's token t
        self.linear = p.get("algo") == "linear"
        self.vla = p.get("algo") == "vla"
        self.rule = {n: p[n] for n in ("lambda0", "refresh_period", "eta", "u_scale")} if self.vla else {}
        self.Wd = int(p.get("Wd", 0))
        self.eps = float(p["eps"])
        self.dut, self.rng = dut, random.Random(seed)
        self.t0 = time.perf_counter()
        self.seed = seed
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        dut.i_valid.value = 0
        dut.i_flush.value = 0
        dut.o_ready.value = 0

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    def tokens(self, T, scale=1.0):
        from specmem.golden.fixed.scaled.bfp import quantize_block

        g = np.random.default_rng(self.seed)
        k, v, q = (g.standard_normal((T, self.d)) * scale for _ in range(3))
        beta = g.uniform(0.05, 1.0, T)
        u = g.standard_normal((T, self.d)) * scale if self.vla else np.zeros((T, self.d))
        if self.gated:
            from specmem.golden.fixed.formats import PRESETS
            from specmem.golden.fixed.scaled.deltanet import scalar_in

            gate = g.uniform(0.5, 1.0, T)
            pick = g.integers(0, 5, T)
            gate = np.where(pick == 1, np.ldexp(gate, -g.integers(100, 700, T)), gate)
            gate = np.where(pick == 2, 1.0, gate)
            gate = np.where(pick == 3, np.ldexp(1.0, -g.integers(0, 4, T)), gate)
            Gm, Gf = scalar_in(PRESETS[self.preset].scalar_unit(), gate)
        else:
            gate, Gm, Gf = None, np.zeros(T, dtype=int), np.zeros(T, dtype=int)
        K, fk = quantize_block(k, self.M)
        V, fv = quantize_block(v, self.M)
        Q, fq = quantize_block(q, self.M)
        Bt, fb = quantize_block(beta[:, None], self.M)
        U, fu = quantize_block(u, self.M)
        floats = (k, v, q, u) if self.vla else (k, v, q, beta, gate)
        return floats, [(K[t], int(fk[t]), V[t], int(fv[t]), Q[t], int(fq[t]), int(Bt[t, 0]),
                         int(fb[t]), int(Gm[t]), int(Gf[t]), U[t], int(fu[t])) for t in range(T)]

    async def stream(self, toks, *, idle=0.0, stall=0.0, burst=0, abort_after=None):
        """Send ``toks`` then a flush; collect outputs and the state. ``abort_after``: stop feeding
        after that many tokens and return early (for the reset test)."""
        dut, d, k = self.dut, self.d, self.k
        outs, fracs, state, sfr = [], [], [], []
        self.read_gamma, self.read_z, self.read_a, self.read_ad = [], [], [], []
        self.out_cycles = []  # the cycle of each output's last beat
        cur, hold, cycle = [], 0, 0
        slots = list(toks) + ([] if abort_after is not None else [None] * self.H)  # a flush per head
        beats = []  # (token, None for a flush or (lanes, exponent), last beat of its token)
        for t, tok in enumerate(slots):
            if tok is None:
                beats.append((t, None, True))
                continue
            vecs = ((tok[0], tok[1]), (tok[2], tok[3]), (tok[4], tok[5]))  # k, v, q
            if self.vla:
                vecs += ((tok[10], tok[11]),)  # u
            for n, (X, f) in enumerate(vecs):
                for b in range(d // k):
                    beats.append((t, (X[b * k:(b + 1) * k], f), n == len(vecs) - 1 and b == d // k - 1))
        bi, j, sending = 0, 0, False  # next beat, tokens taken, a beat on the bus
        want_state = abort_after is None
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            # what the edge saw
            if sending and int(dut.i_ready.value):
                sending = False
                j += int(beats[bi][2])
                bi += 1
            if int(dut.o_valid.value) and int(dut.o_ready.value):
                first, last = int(dut.o_first.value), int(dut.o_last.value)
                if first != (len(cur) == 0):
                    raise AssertionError(f"o_first wrong at output {len(outs)}")
                cur += _unpack(int(dut.o_data.value), self.Wo, k)
                if last != (len(cur) == d):
                    raise AssertionError(f"o_last wrong at output {len(outs)}")
                if last:
                    self.out_cycles.append(cycle)
                    outs.append(cur)
                    fracs.append(_signed(dut.o_frac.value, self.EW))
                    cur = []
            if int(dut.s_valid.value):
                if int(dut.s_first.value):
                    state.append([])
                    sfr.append(_signed(dut.s_frac.value, self.EW))
                    if self.gated and (len(state) - 1) % d == 0:  # a read-out's first row
                        self.read_gamma.append((_signed(dut.s_gamma.value, self.P), _signed(dut.s_gamma_f.value, 32)))
                state[-1] += _unpack(int(dut.s_data.value), self.Ws, k)
            if self.vla and int(dut.a_valid.value):
                if int(dut.a_first.value):
                    self.read_a.append(([], _signed(dut.a_frac.value, self.EW)))
                self.read_a[-1][0].extend(_unpack(int(dut.a_data.value), self.Ws, k))
            if self.vla and int(dut.ad_valid.value):
                if int(dut.ad_first.value):
                    self.read_ad.append(([], _signed(dut.ad_frac.value, self.EW)))
                self.read_ad[-1][0].extend(_unpack(int(dut.ad_data.value), self.Wd, k))
            if self.linear and int(dut.z_valid.value):
                if int(dut.z_first.value):
                    self.read_z.append(([], _signed(dut.z_frac.value, self.EW)))
                self.read_z[-1][0].extend(_unpack(int(dut.z_data.value), 32, k))
            n_tok = len(toks) if abort_after is None else abort_after
            if len(outs) >= n_tok and (not want_state or (len(state) == self.H * d and len(state[-1]) == d and (
                    not self.vla or (len(self.read_a) == d and len(self.read_a[-1][0]) == d)))):
                break
            if abort_after is not None and j >= abort_after and not sending:
                break
            if cycle > (len(toks) + 2) * (MANIFEST["cycles_per_token"] + 3 * burst + 400) + 2000:
                raise AssertionError(f"stream stalled after {len(outs)} outputs, cycle {cycle}")
            # drive the next cycle
            if not sending and bi < len(beats) and not (abort_after is not None and j >= abort_after):
                if self.rng.random() >= idle:
                    t, beat, _ = beats[bi]
                    tok = slots[t]
                    dut.i_flush.value = int(beat is None)
                    if beat is not None:
                        dut.i_data.value = _pack(beat[0], self.M)
                        dut.i_frac.value = beat[1] & ((1 << self.EW) - 1)
                        b, fb, gm, gf = tok[6:10]
                        if not (self.linear or self.vla):
                            dut.i_beta.value = b & ((1 << self.M) - 1)
                            dut.i_fbeta.value = fb & ((1 << self.EW) - 1)
                        if self.gated:
                            dut.i_g.value = gm & ((1 << self.P) - 1)
                            dut.i_fg.value = gf & ((1 << self.EW) - 1)
                    dut.i_valid.value = 1
                    sending = True
                else:
                    dut.i_valid.value = 0
            elif not sending:
                dut.i_valid.value = 0
            if burst and hold == 0 and self.rng.random() < 0.01:
                hold = burst
            hold = max(hold - 1, 0)
            dut.o_ready.value = int(self.rng.random() >= stall and hold == 0)
        dut.i_valid.value = 0
        self.cycles = cycle
        return outs, fracs, state, sfr

    def check(self, floats, outs, fracs, state, sfr, name):
        t0 = time.perf_counter()
        if self.linear:
            from specmem.golden.fixed.scaled.linear_attention import linear_attention_scaled

            want = linear_attention_scaled(*floats[:3], eps=self.eps, preset=self.preset)
        elif self.vla:
            from specmem.golden.fixed.scaled.vla import vla_scaled

            want = vla_scaled(*floats, eps=self.eps, preset=self.preset, **self.rule)
        elif self.H == 1:
            from specmem.golden.fixed.scaled.deltanet import deltanet_scaled

            want = deltanet_scaled(*floats, preset=self.preset, eps=self.eps)
        else:  # one model per head; its tokens are every H-th slot, its state the h-th read-out
            from specmem.golden.fixed.scaled.deltanet import deltanet_scaled

            H = self.H
            if len(floats[0]) % H:
                raise ValueError(f"tokens: a multiple of the {H} heads (each head's state read by its flush)")
            per = [deltanet_scaled(*(x if x is None else x[h::H] for x in floats), preset=self.preset, eps=self.eps)
                   for h in range(H)]
            inter = lambda key: np.stack([per[h][key][t] for t in range(len(floats[0]) // H) for h in range(H)])
            want = {"o_raw": inter("o_raw"), "o_frac": inter("o_frac"),
                    "s_raw": np.concatenate([w["s_raw"] for w in per]),
                    "s_frac": np.concatenate([w["s_frac"] + (w["gamma_f"] if self.gated else 0) for w in per]),
                    "sat": {"s": sum(w["sat"]["s"] for w in per)}, "per_head": per}
        model_s = time.perf_counter() - t0
        per = want.get("per_head", [want])
        if self.H == 1 and self.gated:
            want["s_frac"] = want["s_frac"] + want["gamma_f"]  # S's row exponents, as the core gives them
        s_frac = want["s_frac"]
        errors = []
        first = None
        exp = want["o_raw"].tolist()
        if outs != exp:
            if len(outs) == len(exp):
                t = next(t for t, (a, b) in enumerate(zip(outs, exp)) if a != b)
                i = next(i for i, (a, b) in enumerate(zip(outs[t], exp[t])) if a != b)
                first = {"token": t, "element": i, "beat": i // self.k, "lane": i % self.k, "expected": exp[t][i],
                         "observed": outs[t][i], "cycle": None}
                errors.append(f"o_raw differs (first at token {t}, element {i})")
            else:
                errors.append(f"o_raw: {len(outs)} of {len(exp)} outputs")
        if fracs != want["o_frac"].tolist():
            errors.append("o_frac differs")
        if state != want["s_raw"].tolist() or sfr != s_frac.tolist():
            errors.append("final state differs")
        if self.linear and self.read_z[-1:] != [(want["z_raw"].tolist(), int(want["z_frac"]))]:
            errors.append("z read out differs")
        if self.vla:
            if ([r[0] for r in self.read_a] != want["a_raw"].tolist()
                    or [r[1] for r in self.read_a] != want["a_frac"].tolist()):
                errors.append("A's off-diagonal part read out differs")
            if self.read_ad[-1:] != [(want["a_diag_raw"].tolist(), int(want["a_diag_frac"]))]:
                errors.append("A's diagonal read out differs")
            if int(self.dut.sat_a.value) != want["sat"]["a"]:
                errors.append(f"A's saturations {int(self.dut.sat_a.value)}, model {want['sat']['a']}")
        gammas = [(int(w["gamma_m"]), int(w["gamma_f"])) for w in per] if self.gated else []
        if self.gated and self.read_gamma != gammas:
            errors.append(f"gamma read out {self.read_gamma}, model {gammas}")
        sat = int(self.dut.sat.value)
        if sat != want["sat"]["s"]:
            errors.append(f"saturations {sat}, model {want['sat']['s']}")
        tokens = int(self.dut.tokens.value)
        if tokens != len(exp):  # the core counts the tokens it took since its reset (flushes not)
            errors.append(f"token counter {tokens}, tokens {len(exp)}")
        if int(self.dut.err.value):
            errors.append("err set")
        extra = {"gamma_f": max(g[1] for g in gammas)} if self.gated else {}  # the largest of the heads'
        mism = sum(a != b for a, b in zip(outs, exp)) + abs(len(outs) - len(exp))
        RECORD.save(name, {"tokens": len(outs), "token_counter": tokens, "saturations": sat, "errors": errors,
                           "tokens_compared": len(exp), "mismatched_tokens": mism, "first_mismatch": first,
                           "cycles": getattr(self, "cycles", 0), "wall_s": time.perf_counter() - self.t0,
                           "model_s": model_s, **extra})
        assert not errors, errors


@cocotb.test()
async def random_stream(dut):
    """Tokens with random idle cycles, random backpressure and stretches without o_ready longer
    than a token (``idle``, ``stall`` from the case, 0.3 each by default; no stretches at
    ``stall`` 0); the state read out by the flush. ``specmem sim``'s run."""
    env = Env(dut, CASE.get("seed", 0))
    await env.reset()
    floats, toks = env.tokens(int(CASE.get("tokens", 24)))
    got = await env.stream(toks, idle=float(CASE.get("idle", 0.3)), stall=float(CASE.get("stall", 0.3)),
                           burst=2 * MANIFEST["cycles_per_token"] if CASE.get("stall", 0.3) else 0)
    env.check(floats, *got, "random_stream")


@cocotb.test()
async def reset_mid_stream(dut):
    """A stream cut by a reset after a few tokens (outputs in flight dropped), then a whole stream
    from the start: bit-exact as if the first had never been."""
    env = Env(dut, CASE.get("seed", 0) + 100)
    await env.reset()
    _, toks = env.tokens(6)
    await env.stream(toks, abort_after=4)
    await ClockCycles(dut.clk, int(env.rng.random() * 50))
    await env.reset()
    floats, toks = env.tokens(8)
    got = await env.stream(toks, stall=0.2)
    env.check(floats, *got, "reset_mid_stream")


@cocotb.test()
async def full_rate(dut):
    """Input always valid, output always ready: bit-exact, and the output beats of consecutive
    tokens ``cycles_per_token`` apart (the manifest's count)."""
    env = Env(dut, CASE.get("seed", 0) + 200)
    await env.reset()
    floats, toks = env.tokens(6)
    dut.o_ready.value = 1
    got = await env.stream(toks)
    env.check(floats, *got, "full_rate")
    gaps = np.diff(env.out_cycles).tolist()
    RECORD.save("full_rate_gaps", {"gaps": gaps, "cycles_per_token": MANIFEST["cycles_per_token"]})
    assert gaps[1:] == [MANIFEST["cycles_per_token"]] * (len(gaps) - 1), gaps


@cocotb.test()
async def streams(dut):
    """The back-end's run (``specmem run --backend verilator --format int8``): each stream of
    ``streams_file`` (``.npz``: ``n``, and per stream ``i`` the raw ``K<i>``, ``fk<i>``, ``V<i>``,
    ``fv<i>``, ``Q<i>``, ``fq<i>``, ``beta<i>``, ``fbeta<i>``, gated also ``G<i>``, ``fg<i>``; VLA
    ``U<i>``, ``fu<i>`` and no ``beta``) after a
    reset, then a flush (linear attention: no ``beta``); the outputs ``o<i>``, ``o_frac<i>``, the state
    ``s<i>``, ``s_frac<i>`` (gated: ``gamma<i>`` = mantissa, exponent; linear: ``z<i>``, ``z_frac<i>``;
    VLA: ``a<i>``, ``a_frac<i>``, ``ad<i>``, ``ad_frac<i>``)
    and ``status<i>`` (tokens, saturations, err; VLA also A's saturations) go to
    ``outputs_file``; the back-end compares every bit with the model."""
    data = np.load(CASE["streams_file"])
    env = Env(dut, 0)
    idle, stall = float(CASE.get("idle", 0.0)), float(CASE.get("stall", 0.0))
    out = {}
    for i in range(int(data["n"])):
        await env.reset()
        cols = [data[f"{n}{i}"] for n in ("K", "fk", "V", "fv", "Q", "fq")]
        T = len(cols[0])
        cols += ([np.zeros(T, dtype=int)] * 2 if env.linear or env.vla else [data[f"beta{i}"], data[f"fbeta{i}"]])
        G, fg = (data[f"G{i}"], data[f"fg{i}"]) if env.gated else (np.zeros(T, dtype=int), np.zeros(T, dtype=int))
        U, fu = (data[f"U{i}"], data[f"fu{i}"]) if env.vla else (np.zeros((T, env.d), dtype=int), np.zeros(T, dtype=int))
        toks = [(cols[0][t], int(cols[1][t]), cols[2][t], int(cols[3][t]), cols[4][t], int(cols[5][t]),
                 int(cols[6][t]), int(cols[7][t]), int(G[t]), int(fg[t]), U[t], int(fu[t])) for t in range(T)]
        outs, fracs, state, sfr = await env.stream(toks, idle=idle, stall=stall)
        out[f"o{i}"] = np.array(outs, dtype=np.int64).reshape(len(outs), env.d)
        out[f"o_frac{i}"] = np.array(fracs, dtype=np.int64)
        out[f"s{i}"] = np.array(state, dtype=np.int64).reshape(env.d, env.d)
        out[f"s_frac{i}"] = np.array(sfr, dtype=np.int64)
        if env.gated:
            out[f"gamma{i}"] = np.array(env.read_gamma[0], dtype=np.int64)
        if env.linear:
            out[f"z{i}"] = np.array(env.read_z[-1][0], dtype=np.int64)
            out[f"z_frac{i}"] = np.int64(env.read_z[-1][1])
        if env.vla:
            out[f"a{i}"] = np.array([r[0] for r in env.read_a], dtype=np.int64).reshape(env.d, env.d)
            out[f"a_frac{i}"] = np.array([r[1] for r in env.read_a], dtype=np.int64)
            out[f"ad{i}"] = np.array(env.read_ad[-1][0], dtype=np.int64)
            out[f"ad_frac{i}"] = np.int64(env.read_ad[-1][1])
        out[f"status{i}"] = np.array([int(dut.tokens.value), int(dut.sat.value), int(dut.err.value)]
                                     + ([int(dut.sat_a.value)] if env.vla else []), dtype=np.int64)
    np.savez(CASE["outputs_file"], **out)
