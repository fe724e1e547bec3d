"""Mutation check: deliberately broken variants of the generated Verilog, and proof that the
testbench catches each of them.

The RTL is not touched: every mutant is a text edit of the Verilog that Amaranth generated for
the top. All mutants go into one build as a *mutant schema* (Untch et al.): each edited statement
becomes ``(specmem_mutant == N) ? <mutated> : <original>``, with ``specmem_mutant`` a register
that an ``initial`` block reads from the ``+SPECMEM_MUTANT=<N>`` plusarg (0, the default, is the
unmodified design). One Verilator build then serves every mutant (a build per mutant would cost a
build per mutant); each run selects one. The run with ``N = 0`` must pass, each other run must fail.

Operators (each names its site by signal names of the generated Verilog, so a renamed signal
makes the mutation fail loudly instead of silently testing nothing):

* :func:`tie`: a continuous ``assign`` drives a constant (or another expression) instead;
* :func:`rewrite`: the right-hand side of the one ``assign`` that matches a pattern is rewritten;
* :func:`port`: an instance port connection is replaced;
* :func:`bypass`: a pipeline register is removed: its readers in continuous assigns see its
  next-state value (the data arrives a cycle early, its ``valid`` does not);
* :func:`next_state`: a register's clocked update is rewritten;
* :func:`either`: the first of several sites that exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

__all__ = ["Mutant", "MUTANTS", "RULE_MUTANTS", "V2_MUTANTS", "SCALED_MUTANTS", "apply_schema", "MutationError", "tie",
           "rewrite", "port", "bypass", "next_state", "either"]

SELECT = "specmem_mutant"
_ATTR = re.compile(r"\(\*.*?\*\)\s*")


class MutationError(ValueError):
    """A mutation site was not found (or not unique) in the generated Verilog."""


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str                      # the defect, in words
    module: str                    # Verilog module (without the leading backslash)
    apply: Callable[[list[str], str, "Mutant"], int]  # edits the module's lines; returns edits made
    ci: bool = True                # part of the small set run by default
    expect: str = ""               # which check should catch it


def _ident(name: str) -> str:
    """A regex for a Verilog identifier (plain or escaped) as a whole token."""
    if name.startswith("\\"):
        return re.escape(name) + r"(?=\s)"
    return r"(?<![\w$\\])" + re.escape(name) + r"(?![\w$])"


def _clean(expr: str) -> str:
    """Attribute-free, with a trailing space: an escaped identifier (``\\$74``) ends only at
    whitespace, so every expression pasted before a ``)`` or ``;`` keeps one."""
    return _ATTR.sub("", expr).strip() + " "


def _cond(n: int) -> str:
    return f"({SELECT} == 8'd{n})"


def tie(signal: str, value: str):
    """``assign <signal> = RHS;`` becomes ``... = sel ? (value) : (RHS);``."""
    pat = re.compile(r"^(\s*assign\s+" + _ident(signal) + r"\s*=\s*)(.*);\s*$")

    def apply(lines, n, m):
        hits = [i for i, ln in enumerate(lines) if pat.match(ln)]
        if len(hits) != 1:
            raise MutationError(f"{m.name}: 'assign {signal} = ...' found {len(hits)} times in {m.module}")
        i = hits[0]
        g = pat.match(lines[i])
        lines[i] = f"{g.group(1)}{_cond(n)} ? ({value} ) : ({_clean(g.group(2))});"
        return 1
    return apply


def rewrite(rhs_pattern: str, fn: Callable[[re.Match], str]):
    """The one ``assign X = RHS;`` whose attribute-free RHS matches ``rhs_pattern`` (a regex,
    full match) gets ``sel ? fn(match) : RHS``."""
    rx = re.compile(rhs_pattern)
    pat = re.compile(r"^(\s*assign\s+\S+\s*=\s*)(.*);\s*$")

    def apply(lines, n, m):
        hits = []
        for i, ln in enumerate(lines):
            g = pat.match(ln)
            if g and rx.fullmatch(_clean(g.group(2)).strip()):
                hits.append(i)
        if len(hits) != 1:
            raise MutationError(f"{m.name}: an assign matching {rhs_pattern!r} found {len(hits)} times in {m.module}")
        i = hits[0]
        g = pat.match(lines[i])
        rhs = _clean(g.group(2))
        lines[i] = f"{g.group(1)}{_cond(n)} ? ({fn(rx.fullmatch(rhs.strip()))} ) : ({rhs});"
        return 1
    return apply


def port(name: str, value: str):
    """An instance connection ``.name(expr)`` becomes ``.name(sel ? (value) : (expr))``."""
    pat = re.compile(r"^(\s*\." + re.escape(name) + r"\()(.*)(\)\s*,?\s*)$")

    def apply(lines, n, m):
        hits = [i for i, ln in enumerate(lines) if pat.match(ln)]
        if len(hits) != 1:
            raise MutationError(f"{m.name}: port connection .{name}(...) found {len(hits)} times in {m.module}")
        i = hits[0]
        g = pat.match(lines[i])
        lines[i] = f"{g.group(1)}{_cond(n)} ? ({value} ) : ({g.group(2)} ){g.group(3)}"
        return 1
    return apply


def _next_of(lines, reg: str, m) -> tuple[int, str]:
    pat = re.compile(r"^(\s*)" + _ident(reg) + r"\s*<=\s*(.*?)\s*;\s*$")
    hits = [(i, pat.match(ln)) for i, ln in enumerate(lines) if pat.match(ln)]
    if len(hits) != 1:
        raise MutationError(f"{m.name}: clocked update '{reg} <= ...' found {len(hits)} times in {m.module}")
    return hits[0][0], hits[0][1].group(2) + " "


def bypass(reg: str):
    """Remove pipeline register ``reg``: continuous assigns that read it read its next value."""
    tok = re.compile(_ident(reg))

    def apply(lines, n, m):
        _, nxt = _next_of(lines, reg, m)
        count = 0
        for i, ln in enumerate(lines):
            if ln.lstrip().startswith("assign ") and "=" in ln:
                lhs, rhs = ln.split("=", 1)
                if tok.search(rhs):
                    lines[i] = lhs + "=" + tok.sub(lambda _: f"({_cond(n)} ? {nxt}: {reg} )", rhs)
                    count += 1
        if not count:
            raise MutationError(f"{m.name}: no continuous assign reads {reg} in {m.module}")
        return count
    return apply


def next_state(reg: str, fn: Callable[[str, str], str]):
    """``reg <= NEXT;`` becomes ``reg <= sel ? fn(NEXT, reg) : NEXT;``."""

    def apply(lines, n, m):
        i, nxt = _next_of(lines, reg, m)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = f"{indent}{reg} <= {_cond(n)} ? ({fn(nxt, reg)} ) : {nxt};"
        return 1
    return apply


def either(*ops):
    """The first of ``ops`` whose site exists (a design whose signal names differ between versions,
    e.g. core v2's per-head registers ``ptr0`` where the one-memory core has ``ptr``); when none
    applies, the last one's :class:`MutationError`."""

    def apply(lines, n, m):
        err = None
        for op in ops:
            trial = list(lines)
            try:
                count = op(trial, n, m)
            except MutationError as exc:
                err = exc
                continue
            lines[:] = trial
            return count
        raise err
    return apply


CORE = "specmem_annihilation.core"
MUTANTS: list[Mutant] = [
    Mutant("round_floor", "one rounding step changed: the narrowing of U into the multiplier format "
           "(lane 0) truncates (floor) instead of rounding half to even", CORE,
           tie("s1_um0_r", "$signed(s1_um0_r_q)"), expect="bit-exact scoreboard"),
    Mutant("round_half_up", "one rounding step changed subtly: ties of the narrowing r = round(U_i a) "
           "round up instead of to even (the 'and q is odd' term dropped)", CORE,
           rewrite(r"(\S+)\s*&\s*g0_r_r_q\[0\]", lambda g: g.group(1)), expect="bit-exact scoreboard"),
    Mutant("r_wraps", "r = U a wraps instead of saturating (the saturation of the G-pass narrowing removed)",
           CORE, rewrite(r"g0_r_hi\s*\?\s*\S+\s*:\s*(\S+)", lambda g: "g0_r_r"),
           expect="scoreboard on the saturating stream"),
    Mutant("e1_tree_register_removed", "one pipeline register removed: the adder-tree register of "
           "engine E1 (its data arrives a cycle before its valid)",
           f"{CORE}.e1", bypass("tree2_0"), expect="bit-exact scoreboard"),
    Mutant("input_ready_ignored", "s_axis ready ignored: the token buffer accepts beats while full",
           CORE, tie("x_in__ready", "1'h1"), expect="scoreboard (buffered tokens overwritten)"),
    Mutant("output_ready_ignored", "m_axis ready ignored: the output FIFO pops whether or not the sink took the beat",
           CORE, port("r_en", "1'h1"), expect="scoreboard / missing outputs under backpressure"),
    Mutant("tlast_every_beat", "m_axis tlast on every beat", "specmem_annihilation",
           tie("m_axis_tlast", "1'h1"), expect="framing check of the output monitor"),
    Mutant("saturations_not_counted", "the saturation counter never increments", CORE,
           tie("sat_inc", "0"), expect="status counters vs the model"),
    Mutant("orth_not_counted", "orthogonal tokens are not counted", CORE,
           next_state("orth_count", lambda nxt, reg: reg), expect="status counters vs the model"),
    Mutant("row_pass_one_cycle_longer", "one extra cycle per row pass (the tail counter loads one more): "
           "the outputs stay right, only the timing changes", CORE,
           next_state("tail", lambda nxt, reg: f"({reg} == 0 && {nxt}!= 0) ? {nxt}+ 1 : {nxt}"),
           expect="cycles per token vs the manifest"),
]


#: mutants of the attention-rule tops (``sim/tb_rules.py``), per design kind
RULE_MUTANTS: dict[str, list[Mutant]] = {
    "vla": [
        Mutant("a_write_floor", "one rounding step changed: the rank-one write A -= round(w_i w_j) of lane 0 "
               "truncates (its rounding bit dropped) instead of rounding half to even", "specmem_vla.core",
               tie("wa0_rb", "1'h0"), expect="bit-exact scoreboard / final state A"),
        Mutant("refreshes_not_counted", "the refresh counter never increments", "specmem_vla.core",
               next_state("refreshes", lambda nxt, reg: reg), expect="status counters vs the model"),
    ],
    "linear": [
        Mutant("s_write_floor", "one rounding step changed: the rank-one write S += round(v_i kf_j) of lane 0 "
               "truncates (floor) instead of rounding half to even", "specmem_linear.core",
               tie("ws0", "$signed(ws0_q)"), expect="bit-exact scoreboard / final state S"),
        Mutant("saturations_not_counted", "the saturation counter never increments", "specmem_linear.core",
               next_state("saturations", lambda nxt, reg: reg), expect="status counters vs the model"),
    ],
    "deltanet": [
        Mutant("beta_e_floor", "one rounding step changed: be = narrow(beta e) truncates (floor) instead of "
               "rounding half to even", "specmem_deltanet.core",
               tie("be_q_r", "$signed(be_q_r_q)"), expect="bit-exact scoreboard"),
        Mutant("saturations_not_counted", "the saturation counter never increments", "specmem_deltanet.core",
               next_state("saturations", lambda nxt, reg: reg), expect="status counters vs the model"),
    ],
    "gated-deltanet": [
        Mutant("decay_write_floor", "one rounding step of the decay changed: the decayed state round(g S) of lane "
               "0's write truncates (floor) instead of rounding half to even (invisible at g = 1, where g S has "
               "no fraction bits)", "specmem_gated_deltanet.core",
               tie("wg0", "$signed(wg0_q)"), expect="bit-exact scoreboard / final state S"),
        Mutant("saturations_not_counted", "the saturation counter never increments", "specmem_gated_deltanet.core",
               next_state("saturations", lambda nxt, reg: reg), expect="status counters vs the model"),
    ],
}


def _module_span(lines: list[str], module: str) -> tuple[int, int]:
    """The lines of ``module``; a name ending in ``$*`` matches Amaranth's numbered duplicates
    (``sh_prod$200``: a submodule named like a signal of its parent)."""
    name = re.escape(module[:-2]) + r"\$\d+" if module.endswith("$*") else re.escape(module)
    head = re.compile(r"^module\s+\\?" + name + r"\s*\(")
    starts = [i for i, ln in enumerate(lines) if head.match(ln)]
    if len(starts) != 1:
        raise MutationError(f"module {module} found {len(starts)} times")
    s = starts[0]
    e = next(i for i in range(s, len(lines)) if lines[i].startswith("endmodule"))
    return s, e


def apply_schema(text: str, mutants: list[Mutant] = MUTANTS) -> tuple[str, dict[str, int]]:
    """The Verilog with every mutant inserted, and ``{name: N}`` (the ``+SPECMEM_MUTANT`` value
    that selects it; numbered from 1 in list order)."""
    lines = text.splitlines()
    ids = {}
    touched = set()
    for n, m in enumerate(mutants, start=1):
        s, e = _module_span(lines, m.module)
        body = lines[s:e]
        m.apply(body, n, m)
        lines[s:e] = body
        ids[m.name] = n
        touched.add(m.module)
    for module in touched:
        s, _ = _module_span(lines, module)
        hdr = s
        while not lines[hdr].rstrip().endswith(");"):
            hdr += 1
        lines[hdr + 1:hdr + 1] = [
            f"  reg [7:0] {SELECT};",
            "  initial begin",
            f'    if (!$value$plusargs("SPECMEM_MUTANT=%d", {SELECT})) {SELECT} = 8\'d0;',
            "  end",
        ]
    return "\n".join(lines) + "\n", ids



def _scaled_schema(top: str, passes: tuple[str, ...] = ("pass_",)) -> list[Mutant]:
    """The defects every scaled core can have (``rtl/delta_pass.py``'s pass, ``rtl/beats.py``'s
    handshakes, the status counters, a stream block's register), named in the top ``top``."""
    ctl, p = f"{top}.ctl", f"{top}.{passes[0]}"
    return [
        Mutant("state_write_round_floor", "one rounding step changed: the state write's product term of lane 0, "
               "rounded to the row's new exponent, drops its rounding bit (floor instead of half to even)",
               f"{p}.write.sh_prod$*", next_state("s3_rb0", lambda nxt, reg: "1'h0"),
               expect="bit-exact scoreboard / final state"),
        Mutant("tokens_not_counted", "the token counter never increments", ctl,
               next_state("tokens", lambda nxt, reg: reg), expect="status counters vs the model"),
        Mutant("input_ready_ignored", "i_ready stays high: the token's beats are taken while its registers are "
               "still in use", ctl, next_state("in_ready_r", lambda nxt, reg: "1'h1"),
               expect="scoreboard (tokens overwritten)"),
        Mutant("output_ready_ignored", "o_ready ignored: the output buffer advances whether or not the sink took "
               "the beat", top, port("o_ready", "1'h1"), expect="scoreboard / missing outputs under backpressure"),
        Mutant("output_register_removed", "one pipeline register removed: lane 0's input register of the output "
               "alignment's first rounding shift (its data a cycle before its valid)", f"{top}.align_o.shift0",
               bypass("s0_x0"), expect="bit-exact scoreboard"),
        Mutant("pass_one_cycle_longer", f"the {passes[0]} preparation counter loads one more: every pass starts a "
               "cycle later; the outputs stay right, only the timing changes", p,
               next_state("prep", lambda nxt, reg: f"({reg} == 0 && {nxt}!= 0) ? {nxt}+ 1 : {nxt}"),
               expect="cycles per token vs the manifest (full_rate)"),
    ]


#: mutants of the scaled (int8) cores (``sim/tb_scaled.py``), per rule: the shared schema and
#: one or two of the rule's own
SCALED_MUTANTS: dict[str, list[Mutant]] = {
    "deltanet": _scaled_schema("specmem_deltanet_scaled") + [
        Mutant("e_round_floor", "one rounding step changed: e = v - S kn, normalised to its block exponent, "
               "truncates lane 0 (floor instead of half to even)", "specmem_deltanet_scaled.align_e.norm",
               next_state("s6_sq0", lambda nxt, reg: "1'h0"), expect="bit-exact scoreboard"),
    ],
    "gated-deltanet": _scaled_schema("specmem_gated_deltanet_scaled") + [
        Mutant("decay_stale", "the front end's next gamma is never loaded: every token decays by the gamma "
               "after reset", "specmem_gated_deltanet_scaled.ctl", next_state("nx_gam", lambda nxt, reg: reg),
               expect="bit-exact scoreboard / gamma read-out"),
    ],
    "linear": _scaled_schema("specmem_linear_scaled") + [
        Mutant("z_readout_lane_stuck", "lane 0 of z's flush read-out is never loaded (the register keeps the "
               "beat before; at k = 1 the port's own register)", "specmem_linear_scaled.ctl",
               either(next_state("z_rd_data0", lambda nxt, reg: reg), next_state("z_data", lambda nxt, reg: reg)),
               expect="z read-out vs the model"),
    ],
    "vla": _scaled_schema("specmem_vla_scaled", ("pass_s", "pass_a")) + [
        Mutant("a_write_round_floor", "one rounding step of A's write changed: lane 0's product term drops its "
               "rounding bit", "specmem_vla_scaled.pass_a.write.sh_prod$*",
               next_state("s3_rb0", lambda nxt, reg: "1'h0"), expect="bit-exact scoreboard / A read-out"),
        Mutant("refreshes_not_counted", "the refresh counter never advances: A is never reset to lambda0 I",
               "specmem_vla_scaled.ctl", next_state("refresh_count", lambda nxt, reg: reg),
               expect="bit-exact scoreboard on a refresh-crossing stream"),
        Mutant("ad_readout_lane_stuck", "lane 0 of A's diagonal read-out is never loaded", "specmem_vla_scaled.ctl",
               next_state("ad_rd_data0", lambda nxt, reg: reg), expect="A's diagonal read-out vs the model"),
    ],
}

#: mutants of the annihilation core v2's top (``specmem_annihilation`` at int18/int16/int8; the
#: same testbench, ``sim/tb_top.py``): one per kind of defect the new design can have
V2_MUTANTS: list[Mutant] = [
    Mutant("y_round_floor", "one rounding step changed: y = round(r_i rsqrt(n^2)) truncates (its rounding bit "
           "dropped) instead of rounding half to even", CORE + ".yrs", next_state("s3_rb0", lambda nxt, reg: "1'h0"),
           expect="bit-exact scoreboard"),
    Mutant("pointer_stuck", "the round-robin eviction pointer never advances (ties among evictions always "
           "start from column 0)", CORE,
           either(next_state("ptr", lambda nxt, reg: reg), next_state("ptr0", lambda nxt, reg: reg)),
           expect="scoreboard / final state on the round-robin ties"),
    Mutant("a_pass_skipped", "stale per-token control: the chain runs on the accumulators of a pass that did "
           "not see the token (the A pass for a token that arrived late is skipped)", CORE,
           either(next_state("acc_valid", lambda nxt, reg: "1'h1"), next_state("acc_valid0", lambda nxt, reg: "1'h1")),
           expect="scoreboard on isolated full tokens (warm_up_and_latency)"),
    Mutant("orth_not_counted", "evictions are not counted", CORE,
           next_state("orth_count", lambda nxt, reg: reg), expect="status counters vs the model"),
    Mutant("input_ready_ignored", "s_axis ready ignored: the token buffer accepts beats while full", CORE,
           tie("x_in__ready", "1'h1"), expect="scoreboard (buffered tokens overwritten)"),
    Mutant("output_ready_ignored", "m_axis ready ignored: the output FIFO pops whether or not the sink took the "
           "beat", CORE, port("r_en", "1'h1"), expect="scoreboard / missing outputs under backpressure"),
]
