"""MQAR (multi-query associative recall): our data generator, a small model per rule, training and evaluation.

The VLA paper's task (seed ``003_…`` §5.2, Fig. 1, appendix B): ``n`` key-value pairs, a
separator, then the ``n`` keys again in shuffled order; at each query position the model must
output the key's value (loss and exact-match accuracy only there). ``T = 3n + 1`` for the
capacity curve; a longer ``T`` pads with a filler token between the pairs and the separator
(long-context runs). Model (paper's Table 3/6): token and learned position embeddings,
``L = 2`` blocks of pre-norm mixer + GELU MLP (``d = 128``, ``H = 4``, ``d_h = 32``, FFN 256),
a final norm and a head tied to the embedding; AdamW (lr 3e-4, betas 0.9/0.999, weight decay
0.01), 10 % warmup then cosine decay, gradient clip 1.0, batch 64, fresh random batches each
step, evaluation on 15 held-out batches of 64. ``specmem mqar`` runs sweeps (one JSON and one
checkpoint per run, resumable), the fixed-point evaluation of trained models (``int8``; with
``--verilator N`` also N sequences through the Verilated RTL, compared bit for bit with the
fixed-point model: :func:`eval_verilator`) and the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from specmem.golden.common import SpecmemInputError

__all__ = ["MQARConfig", "make_batch", "build_model", "train_run", "time_steps", "run_sweep", "eval_formats", "QUICK",
           "eval_verilator", "verilator_unsupported", "VERILATOR_PRESET", "VERILATOR_LANES",
           "add_mqar_arguments", "cmd_mqar", "DEFAULT_OUT"]

DEFAULT_OUT = "out/mqar"
EVAL_SEED_OFFSET = 1_000_003  # held-out batches come from another stream than any training seed


@dataclass(frozen=True)
class MQARConfig:
    """One training run; defaults are the paper's shapes (appendix B, Table 6)."""

    rule: str = "vla"
    n_pairs: int = 8
    seq_len: int | None = None  # None: 3 n + 1
    seed: int = 42
    steps: int = 2000
    batch: int = 64
    d_model: int = 128
    num_heads: int = 4
    n_layers: int = 2
    ffn: int = 256
    n_keys: int = 128
    n_values: int = 128
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup: float = 0.1
    clip: float = 1.0
    eval_batches: int = 15
    log_every: int = 50
    chunk_size: int = 64
    #: kernel of a causal depthwise convolution before each mixer (0: none, the paper's description;
    #: fla's layers and Zoology's models use 4); it lets layer 1 see the previous token
    short_conv: int = 0

    @property
    def T(self) -> int:
        return 3 * self.n_pairs + 1 if self.seq_len is None else self.seq_len

    @property
    def vocab(self) -> int:
        return self.n_keys + self.n_values + 2  # keys, values, separator, filler

    def name(self) -> str:
        sc = f"_sc{self.short_conv}" if self.short_conv else ""
        return f"{self.rule}_n{self.n_pairs}_T{self.T}_s{self.seed}_st{self.steps}{sc}"

    def check(self) -> "MQARConfig":
        from specmem.nn import RULES

        if self.rule not in RULES:
            raise SpecmemInputError(f"rule: must be one of {', '.join(RULES)}, got {self.rule!r}")
        for n in ("n_pairs", "steps", "batch", "d_model", "num_heads", "n_layers", "ffn", "n_keys", "n_values",
                  "eval_batches", "log_every", "chunk_size"):
            if getattr(self, n) < 1:
                raise SpecmemInputError(f"{n}: must be >= 1, got {getattr(self, n)}")
        if self.short_conv < 0:
            raise SpecmemInputError(f"short_conv: a kernel size >= 0 (0: none), got {self.short_conv}")
        if self.n_pairs > self.n_keys:
            raise SpecmemInputError(f"n_pairs: {self.n_pairs} distinct keys need n_keys >= n_pairs ({self.n_keys})")
        if self.T < 3 * self.n_pairs + 1:
            raise SpecmemInputError(f"seq_len: {self.T} is shorter than 3 n_pairs + 1 = {3 * self.n_pairs + 1}")
        if self.d_model % self.num_heads:
            raise SpecmemInputError(f"num_heads: {self.num_heads} does not divide d_model {self.d_model}")
        return self


#: the CI configuration: seconds on one CPU core, recall of 4 pairs over 16 values (chance 1/16)
QUICK = MQARConfig(rule="vla", n_pairs=4, seed=0, steps=150, batch=32, d_model=64, num_heads=2, ffn=128,
                   n_keys=16, n_values=16, lr=3e-3, eval_batches=4, log_every=25, chunk_size=16)


def make_batch(rng: np.random.Generator, batch: int, n_pairs: int, seq_len: int, n_keys: int, n_values: int):
    """One MQAR batch: ``tokens`` ``[B, T]`` (int64) and ``targets`` ``[B, T]`` (-100 except at queries).

    Token ids: keys ``0..n_keys-1``, values ``n_keys..n_keys+n_values-1``, then the separator
    and the filler. Keys within a sequence are distinct; values are drawn with replacement.
    Layout: ``k1 v1 … kn vn [filler…] SEP k_σ(1) … k_σ(n)``; the target at ``k_σ(i)`` is its value.
    """
    n = n_pairs
    if seq_len < 3 * n + 1:
        raise SpecmemInputError(f"seq_len: {seq_len} is shorter than 3 n_pairs + 1 = {3 * n + 1}")
    sep, fill = n_keys + n_values, n_keys + n_values + 1
    keys = np.argsort(rng.random((batch, n_keys)), axis=1)[:, :n]
    vals = n_keys + rng.integers(0, n_values, size=(batch, n))
    perm = np.argsort(rng.random((batch, n)), axis=1)
    tokens = np.full((batch, seq_len), fill, dtype=np.int64)
    tokens[:, 0:2 * n:2] = keys
    tokens[:, 1:2 * n:2] = vals
    q0 = seq_len - n
    tokens[:, q0 - 1] = sep
    tokens[:, q0:] = np.take_along_axis(keys, perm, axis=1)
    targets = np.full((batch, seq_len), -100, dtype=np.int64)
    targets[:, q0:] = np.take_along_axis(vals, perm, axis=1)
    return tokens, targets


def build_model(cfg: MQARConfig):
    """The paper's small model: embeddings, ``n_layers`` pre-norm blocks (mixer of ``cfg.rule`` + MLP), tied head."""
    import torch
    from torch import nn

    from specmem.nn import make_layer

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(cfg.d_model)
            self.mixer = make_layer(cfg.rule, cfg.d_model, cfg.num_heads,
                                    **({} if cfg.rule == "softmax" else {"chunk_size": cfg.chunk_size}))
            self.conv = (nn.Conv1d(cfg.d_model, cfg.d_model, cfg.short_conv, groups=cfg.d_model,
                                   padding=cfg.short_conv - 1) if cfg.short_conv else None)
            self.norm2 = nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.ffn), nn.GELU(), nn.Linear(cfg.ffn, cfg.d_model))

        def forward(self, x):
            h = self.norm1(x)
            if self.conv is not None:  # causal: keep the first T outputs of the left-padded convolution
                h = self.conv(h.transpose(1, 2))[..., :h.shape[1]].transpose(1, 2)
            x = x + self.mixer(h)[0]
            return x + self.mlp(self.norm2(x))

    class MQARModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(cfg.vocab, cfg.d_model)
            self.pos = nn.Embedding(cfg.T, cfg.d_model)
            nn.init.normal_(self.emb.weight, std=0.02)
            nn.init.normal_(self.pos.weight, std=0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layers))
            self.norm = nn.LayerNorm(cfg.d_model)

        def forward(self, tokens):
            x = self.emb(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
            for b in self.blocks:
                x = b(x)
            return self.norm(x) @ self.emb.weight.T

        def set_memory(self, memory: str) -> None:
            """Swap every mixer's memory step (``torch``, ``float64``, ``float32``, ``golden``, a preset)."""
            for b in self.blocks:
                b.mixer.memory = memory

    return MQARModel()


def _lr_factor(step: int, cfg: MQARConfig) -> float:
    warm = max(1, int(round(cfg.warmup * cfg.steps)))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, cfg.steps - warm)))


def _eval_set(cfg: MQARConfig, n_batches: int | None = None):
    rng = np.random.default_rng(cfg.seed + EVAL_SEED_OFFSET)
    return [make_batch(rng, cfg.batch, cfg.n_pairs, cfg.T, cfg.n_keys, cfg.n_values)
            for _ in range(cfg.eval_batches if n_batches is None else n_batches)]


def evaluate(model, batches, device="cpu") -> dict:
    """Exact-match accuracy and mean cross-entropy at query positions over ``batches``."""
    import torch
    import torch.nn.functional as F

    hit = tot = 0
    loss = 0.0
    model.eval()
    with torch.no_grad():
        for tok, tgt in batches:
            tok, tgt = torch.from_numpy(tok).to(device), torch.from_numpy(tgt).to(device)
            logits = model(tok).float()
            m = tgt >= 0
            loss += float(F.cross_entropy(logits[m], tgt[m], reduction="sum"))
            hit += int((logits.argmax(-1)[m] == tgt[m]).sum())
            tot += int(m.sum())
    model.train()
    return {"acc": hit / tot, "loss": loss / tot, "n_queries": tot}


def train_run(cfg: MQARConfig, device: str = "cpu", progress=None, checkpoint: str | None = None) -> dict:
    """Train one model; return the run record (config, curve, eval accuracy, timing)."""
    import torch
    import torch.nn.functional as F

    cfg.check()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = build_model(cfg).to(device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "emb" not in n and "pos" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "emb" not in n and "pos" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, cfg))
    eval_batches = _eval_set(cfg)
    curve = []
    t0 = time.perf_counter()
    run_loss = run_hit = run_n = 0.0
    for step in range(cfg.steps):
        tok, tgt = make_batch(rng, cfg.batch, cfg.n_pairs, cfg.T, cfg.n_keys, cfg.n_values)
        tok, tgt = torch.from_numpy(tok).to(device), torch.from_numpy(tgt).to(device)
        logits = model(tok)
        m = tgt >= 0
        loss = F.cross_entropy(logits[m].float(), tgt[m])
        if not torch.isfinite(loss):
            raise SpecmemInputError(f"training diverged: loss {float(loss)} at step {step} ({cfg.name()})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        sched.step()
        run_loss += loss.item()
        run_hit += float((logits.detach().argmax(-1)[m] == tgt[m]).float().mean())
        run_n += 1
        if (step + 1) % cfg.log_every == 0 or step == 0 or step + 1 == cfg.steps:
            curve.append({"step": step + 1, "loss": run_loss / run_n, "train_acc": run_hit / run_n,
                          "elapsed_s": time.perf_counter() - t0})
            if progress:
                progress(f"{cfg.name()}: step {step + 1}/{cfg.steps} loss {run_loss / run_n:.3f} "
                         f"acc {run_hit / run_n:.3f} ({(step + 1) / (time.perf_counter() - t0):.2f} steps/s)")
            run_loss = run_hit = run_n = 0.0
    train_s = time.perf_counter() - t0
    ev = evaluate(model, eval_batches, device)
    if checkpoint:
        _save_checkpoint({"config": asdict(cfg), "state_dict": model.state_dict()}, checkpoint)
    return {"config": asdict(cfg), "name": cfg.name(), "device": device, "device_name": _device_name(device),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "train_s": train_s,
            "steps_per_s": cfg.steps / train_s, "eval": ev, "chance": 1.0 / cfg.n_values, "curve": curve,
            "initial_loss": curve[0]["loss"], "final_loss": curve[-1]["loss"]}


def time_steps(cfg: MQARConfig, device: str = "cpu", steps: int = 10, warmup: int = 2) -> dict:
    """Training steps per second of ``cfg``'s model (forward, backward, AdamW), after ``warmup`` untimed steps."""
    import torch
    import torch.nn.functional as F

    cfg.check()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    t0 = None
    for i in range(warmup + steps):
        if i == warmup:
            if str(device).startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        tok, tgt = (torch.from_numpy(a).to(device) for a in make_batch(rng, cfg.batch, cfg.n_pairs, cfg.T,
                                                                        cfg.n_keys, cfg.n_values))
        logits = model(tok)
        m = tgt >= 0
        loss = F.cross_entropy(logits[m].float(), tgt[m])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"rule": cfg.rule, "n_pairs": cfg.n_pairs, "T": cfg.T, "batch": cfg.batch, "device": device,
            "device_name": _device_name(device), "threads": torch.get_num_threads(), "steps": steps,
            "steps_per_s": steps / dt}


def _device_name(device: str) -> str:
    import platform

    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def _write_json(path: str, rec: dict) -> None:
    """A run record, complete or absent (a temporary file beside it, then a rename)."""
    from specmem.exchange import write_atomic

    write_atomic(path, json.dumps(rec, indent=1))


def _save_checkpoint(obj: dict, path: str) -> None:
    """``torch.save`` through a temporary file beside ``path`` and a rename: a killed run leaves no partial ``.pt``."""
    import torch

    from specmem.exchange import _tmp_beside

    tmp = _tmp_beside(path, ".tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def sweep_configs(rules, n_pairs, seq_lens, seeds, steps, base: MQARConfig = MQARConfig()) -> list[MQARConfig]:
    """Every (rule, n, T, seed) combination; ``seq_lens`` entries are ints or None (``3n + 1``); too-short T skipped."""
    out = []
    for seed in seeds:
        for T in seq_lens:
            for n in n_pairs:
                if T is not None and T < 3 * n + 1:
                    continue
                for rule in rules:
                    out.append(replace(base, rule=rule, n_pairs=n, seq_len=T, seed=seed, steps=steps).check())
    return out


def run_sweep(configs, out_dir: str, device: str = "cpu", progress=None) -> list[dict]:
    """Train every config whose JSON is not yet in ``out_dir`` (resumable); return all records."""
    os.makedirs(out_dir, exist_ok=True)
    recs = []
    for i, cfg in enumerate(configs):
        path = os.path.join(out_dir, cfg.name() + ".json")
        if os.path.exists(path):
            with open(path) as f:
                recs.append(json.load(f))
            if progress:
                progress(f"[{i + 1}/{len(configs)}] {cfg.name()}: done already, acc {recs[-1]['eval']['acc']:.3f}")
            continue
        if progress:
            progress(f"[{i + 1}/{len(configs)}] {cfg.name()}: training on {device}")
        rec = train_run(cfg, device, progress, checkpoint=os.path.join(out_dir, cfg.name() + ".pt"))
        _write_json(path, rec)
        recs.append(rec)
        if progress:
            progress(f"[{i + 1}/{len(configs)}] {cfg.name()}: eval acc {rec['eval']['acc']:.3f} "
                     f"(chance {rec['chance']:.3f}), {rec['steps_per_s']:.2f} steps/s, {rec['train_s']:.0f} s")
    return recs


def eval_formats(checkpoint: str, n_seqs: int = 64, formats=None, progress=None) -> dict:
    """Accuracy of one trained model on its first ``n_seqs`` held-out sequences with each memory step.

    Memory steps: ``float64`` and ``float32`` (the PyTorch ops), ``golden`` (NumPy float64) and each
    fixed-point preset that covers the rule (``formats`` to restrict). Every mixer layer is swapped.
    """
    import torch

    from specmem.nn import fixed_formats_for

    ck = torch.load(checkpoint, map_location="cpu", weights_only=False)
    cfg = MQARConfig(**ck["config"])
    model = build_model(cfg).double()
    model.load_state_dict(ck["state_dict"])
    rule = "vla" if cfg.rule == "vla_eq8" else cfg.rule
    tok, tgt = (np.concatenate(a) for a in zip(*_eval_set(cfg, math.ceil(n_seqs / cfg.batch))))
    batch = [(tok[:n_seqs], tgt[:n_seqs])]
    fmts = fixed_formats_for(rule) if formats is None else [f for f in formats if f in fixed_formats_for(rule)]
    names = ["float64", "float32"] + (["golden"] + fmts if cfg.rule != "softmax" else [])
    res = {}
    ref_pred = None
    for name in names:
        model.set_memory(name)
        t0 = time.perf_counter()
        with torch.no_grad():
            logits = model(torch.from_numpy(batch[0][0]))
        m = torch.from_numpy(batch[0][1]) >= 0
        pred = logits.argmax(-1)[m]
        acc = float((pred == torch.from_numpy(batch[0][1])[m]).float().mean())
        if ref_pred is None:
            ref_pred = pred
        sat = {}
        for b in model.blocks:
            for k, v in getattr(b.mixer, "last_saturation", {}).items():
                sat[k] = sat.get(k, 0) + v
            if hasattr(b.mixer, "last_saturation"):
                del b.mixer.last_saturation
        res[name] = {"acc": acc, "agree_float64": float((pred == ref_pred).float().mean()),
                     "seconds": time.perf_counter() - t0, "saturated": sat}
        if progress:
            progress(f"{cfg.name()}: memory {name}: acc {acc:.3f} ({res[name]['seconds']:.1f} s)")
    return {"name": cfg.name(), "config": asdict(cfg), "n_seqs": int(min(n_seqs, len(tok))),
            "n_queries": int(min(n_seqs, len(tok)) * cfg.n_pairs), "formats": res}


#: the Verilator comparison's defaults: the RTL preset and the design's lane count k (must divide d_h)
VERILATOR_PRESET = "legacy-int8"
VERILATOR_LANES = 4
#: the result arrays compared bit for bit (where the rule has them): the output stream, its exponents (VLA),
#: the final states read back from the simulated RAMs, and the outputs as floats
VERILATOR_COMPARED = ("o", "o_raw", "o_frac", "s_raw", "a_raw", "z_raw")


def verilator_unsupported(cfg: MQARConfig, lanes: int = VERILATOR_LANES) -> str | None:
    """Why ``cfg``'s model cannot run its memory on the Verilator backend (one line), or None when it can."""
    from specmem.nn.layers import VERILATOR_ALGO

    rule = "vla" if cfg.rule == "vla_eq8" else cfg.rule
    if cfg.rule == "softmax":
        return "softmax: no recurrent memory step (attention over the whole prefix), no RTL core"
    if rule not in VERILATOR_ALGO:
        return f"{cfg.rule}: no RTL core with a Verilator backend ({', '.join(VERILATOR_ALGO)} have one)"
    d = cfg.d_model // cfg.num_heads
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 2 or d % lanes:
        return (f"{cfg.rule}: head dimension d_h = {d} (d_model {cfg.d_model} / {cfg.num_heads} heads) does not fit "
                f"an RTL core with k = {lanes} lanes (k >= 2 must divide d)")
    return None


def eval_verilator(checkpoint: str, n_seqs: int = 4, preset: str = VERILATOR_PRESET, lanes: int = VERILATOR_LANES,
                   reference: str | None = None, progress=None) -> dict:
    """Every mixer layer's memory on the Verilated RTL for the first ``n_seqs`` held-out sequences.

    The model runs twice on the same sequences: with the bit-exact fixed-point memory in ``reference``
    (default ``preset``, the fixed-point model the hardware implements) and with the Verilator backend
    in ``preset`` (design ``d = d_h``, ``k = lanes``; every (sequence, head) of a layer a stream, after a
    reset). Per layer, :data:`VERILATOR_COMPARED` are compared bit for bit, per stream. Returns
    ``{preset, reference, lanes, d, sequences, layers, heads, streams, tokens, equal, mismatches (streams
    differing), mismatched_values, compared, per_layer, acc_fixed, acc_verilator, predictions_equal,
    seconds (the simulations), seconds_fixed, setup_seconds (the design's build, or finding it cached, and a
    one-token run)}``, or ``{preset, lanes, sequences, unsupported: why}`` for a model without an
    RTL core that fits. A simulation whose testbench fails (its scoreboard model disagreeing with the
    hardware) counts as not equal, with the error in ``error``.
    """
    import torch

    from specmem.backend_verilator import VerilatorBackendError
    from specmem.nn.layers import VERILATOR_PREFIX

    ck = torch.load(checkpoint, map_location="cpu", weights_only=False)
    cfg = MQARConfig(**ck["config"])
    reference = preset if reference is None else reference
    base = {"preset": preset, "reference": reference, "lanes": lanes, "sequences": int(n_seqs)}
    why = verilator_unsupported(cfg, lanes)
    if why is not None:
        if progress:
            progress(f"{cfg.name()}: verilator: not run: {why}")
        return {**base, "unsupported": why}
    from specmem.rtl.presets import check_rtl_preset

    check_rtl_preset(preset, SpecmemInputError, "verilator_preset")
    model = build_model(cfg).double()
    model.load_state_dict(ck["state_dict"])
    tok, tgt = (np.concatenate(a) for a in zip(*_eval_set(cfg, math.ceil(n_seqs / cfg.batch))))
    tok, tgt = torch.from_numpy(tok[:n_seqs]), torch.from_numpy(tgt[:n_seqs])
    n = int(tok.shape[0])
    mask = tgt >= 0
    mixers = [b.mixer for b in model.blocks]
    for m in mixers:
        m.keep_memory_io = True
        m.verilator_options = {"lanes": lanes}

    def run(memory):
        model.set_memory(memory)
        t0 = time.perf_counter()
        with torch.no_grad():
            pred = model(tok).argmax(-1)[mask]
        io = [m.last_memory_io for m in mixers]
        for m in mixers:
            del m.last_memory_io
        return pred, io, time.perf_counter() - t0

    pred_f, io_f, sec_f = run(reference)
    H, d, L = cfg.num_heads, cfg.d_model // cfg.num_heads, len(mixers)
    res = {**base, "d": d, "layers": L, "heads": H, "streams": n * H * L, "tokens": n * H * L * cfg.T}
    if progress:
        progress(f"{cfg.name()}: verilator: {res['streams']} streams ({n} sequences x {H} heads x {L} layers, "
                 f"T = {cfg.T}) on the {preset} RTL, d = {d}, k = {lanes}")
    try:
        # the design's build (or the cached build's check) and a one-token run first, outside the timing
        t0 = time.perf_counter()
        model.set_memory(VERILATOR_PREFIX + preset)
        with torch.no_grad():
            model(tok[:1, :1])
        res["setup_seconds"] = time.perf_counter() - t0
        pred_v, io_v, sec_v = run(VERILATOR_PREFIX + preset)
    except VerilatorBackendError as exc:
        res.update(equal=False, mismatches=None, error=str(exc)[:2000])
        if progress:
            progress(f"{cfg.name()}: verilator: FAILED: {str(exc)[:300]}")
        return res
    per_layer, total, values, compared = [], 0, 0, []
    for li, (f, v) in enumerate(zip(io_f, io_v)):
        keys = [k for k in VERILATOR_COMPARED if k in f["result"] and k in v["result"]]
        compared += [k for k in keys if k not in compared]
        differ = np.zeros((n, H), dtype=bool)
        nval = 0
        for k in keys:
            a, b = np.asarray(f["result"][k]), np.asarray(v["result"][k])
            if a.shape != b.shape:
                differ[:] = True
                nval += max(a.size, b.size)
                continue
            ne = a != b
            nval += int(ne.sum())
            differ |= ne.reshape(n, H, -1).any(-1)
        inputs_equal = all(np.array_equal(f["inputs"][k], v["inputs"][k]) for k in f["inputs"])
        per_layer.append({"layer": li, "streams": n * H, "mismatches": int(differ.sum()),
                          "mismatched_values": nval, "inputs_equal": inputs_equal})
        total += int(differ.sum())
        values += nval
    acc_f = float((pred_f == tgt[mask]).float().mean())
    acc_v = float((pred_v == tgt[mask]).float().mean())
    res.update(equal=total == 0, mismatches=total, mismatched_values=values, compared=compared, per_layer=per_layer,
               acc_fixed=acc_f, acc_verilator=acc_v, predictions_equal=bool(torch.equal(pred_f, pred_v)),
               n_queries=int(mask.sum()), seconds=sec_v, seconds_fixed=sec_f)
    if progress:
        verdict = "bit-exact" if total == 0 else f"{total} of {res['streams']} streams differ"
        progress(f"{cfg.name()}: verilator {preset} vs fixed {reference}: {verdict} ({', '.join(compared)}); "
                 f"accuracy {acc_v:.3f} vs {acc_f:.3f}, {sec_v:.1f} s")
    return res


# ------------------------------------------------------------------------------------------
# command line


def _int_list(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def _seq_list(s: str) -> list[int | None]:
    out = []
    for x in s.split(","):
        if x == "auto":
            out.append(None)
        else:
            try:
                out.append(int(x))
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected 'auto' or integers, got {x!r}") from None
    return out


def add_mqar_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``specmem mqar`` options (the CLI imports torch only when the command runs)."""
    p.add_argument("action", nargs="?", default="train", choices=("train", "int8", "report", "speed"),
                   help="train (default): the sweep; int8: fixed-point accuracy of trained models; "
                        "report: write docs/mqar.md from results folders; speed: training steps/s per rule "
                        "and n_pairs (10 timed steps) -> OUT/speed-<device>.json")
    p.add_argument("--quick", action="store_true", help="the CI configuration (seconds on a CPU)")
    p.add_argument("--rules", default="vla,deltanet", help="comma-separated rules (vla, vla_eq8, deltanet, "
                                                            "gated_deltanet, linear, softmax)")
    p.add_argument("--n-pairs", type=_int_list, default=[8, 16, 24, 32, 48])
    p.add_argument("--seq-len", type=_seq_list, default=[None], help="comma-separated; 'auto' is 3 n + 1")
    p.add_argument("--seeds", type=_int_list, default=[42])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the paper's 3e-4)")
    p.add_argument("--short-conv", type=int, default=None,
                   help="causal depthwise convolution of this kernel before each mixer (default 0: none)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", default=None, help=f"results folder (default {DEFAULT_OUT}); report: comma-separated "
                                                "folders, an absent one read from the record (default: the "
                                                "record's own folders)")
    p.add_argument("--sample", type=int, default=64, help="int8: held-out sequences per model (default 64)")
    p.add_argument("--verilator", type=int, default=0, metavar="N",
                   help="int8: also run every mixer layer's memory on the Verilated RTL for N held-out sequences "
                        "(per head, one stream each) and compare it bit for bit with the fixed-point model in "
                        "the same preset; the result goes under 'verilator' in the evaluation JSON (default 0: no)")
    p.add_argument("--verilator-preset", default=VERILATOR_PRESET,
                   help=f"int8 --verilator: the RTL preset (legacy-int8, legacy-int16, legacy-wide; "
                        f"default {VERILATOR_PRESET})")
    p.add_argument("--verilator-lanes", type=int, default=VERILATOR_LANES,
                   help=f"int8 --verilator: the design's lane count k, dividing d_h (default {VERILATOR_LANES})")
    p.add_argument("--only", default=None, metavar="GLOB",
                   help="int8: only the checkpoints whose name matches this pattern (fnmatch, e.g. 'deltanet_*')")
    p.add_argument("--doc", default="docs/mqar.md", help="report: the markdown file to write")
    p.add_argument("--notes", default=None, help="report: a markdown file of prose to put under the title")
    p.add_argument("--record", default="", help="report: the compact record of the runs (default "
                                                 "<doc dir>/mqar/runs.json): rewritten from the folders, read "
                                                 "for the folders that are absent")
    return p


def cmd_mqar(args) -> int:
    """Entry point of ``specmem mqar``."""
    import torch

    from specmem.cli import _progress

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SpecmemInputError("device: cuda requested but torch sees no CUDA device")
    if args.action == "report":
        from specmem.mqar_report import write_report

        notes = None
        if args.notes:
            if not os.path.exists(args.notes):
                raise SpecmemInputError(f"notes: no such file {args.notes}")
            with open(args.notes) as f:
                notes = f.read()
        write_report(args.out, args.doc, progress=_progress, notes=notes, record=args.record)
        return 0
    if args.out is None:  # the CLI's output check saw no --out: check the default here
        from specmem.exchange import check_out_dir

        args.out = DEFAULT_OUT
        check_out_dir("out", args.out)
    if args.action == "int8":
        os.makedirs(args.out, exist_ok=True)
        # a checkpoint counts once its run record exists (the record is written after it, atomically)
        cks = sorted(f for f in os.listdir(args.out)
                     if f.endswith(".pt") and os.path.exists(os.path.join(args.out, f[:-3] + ".json")))
        if args.only:
            import fnmatch

            cks = [f for f in cks if fnmatch.fnmatch(f[:-3], args.only)]
        if not cks:
            raise SpecmemInputError(f"out: no trained checkpoints (*.pt) in {args.out}"
                                    + (f" matching {args.only!r}" if args.only else ""))
        if args.verilator < 0:
            raise SpecmemInputError(f"verilator: a number of sequences >= 0, got {args.verilator}")
        if args.verilator:
            from specmem.rtl.presets import check_rtl_preset

            check_rtl_preset(args.verilator_preset, SpecmemInputError, "verilator_preset")
        for f in cks:
            path = os.path.join(args.out, f[:-3] + f".int8-{args.sample}.json")
            ev = None
            if os.path.exists(path):
                with open(path) as fh:
                    ev = json.load(fh)
                vl = ev.get("verilator", {})
                # a stored "unsupported" is checked again (cheap: no simulation while it still holds), since
                # the rule may have gained its RTL path after the record was written
                if not args.verilator or ("unsupported" not in vl and vl.get("preset") == args.verilator_preset
                                          and vl.get("lanes") == args.verilator_lanes
                                          and vl.get("sequences") == args.verilator):
                    _progress(f"{f}: fixed-point evaluation done already")
                    continue
            if ev is None:
                ev = eval_formats(os.path.join(args.out, f), args.sample, progress=_progress)
            if args.verilator:
                ev["verilator"] = eval_verilator(os.path.join(args.out, f), args.verilator, args.verilator_preset,
                                                 args.verilator_lanes, progress=_progress)
            _write_json(path, ev)
        return 0
    rules = [r for r in args.rules.split(",") if r]
    if args.action == "speed":
        os.makedirs(args.out, exist_ok=True)
        recs = []
        for n in args.n_pairs:
            for r in rules:
                recs.append(time_steps(MQARConfig(rule=r, n_pairs=n), args.device))
                _progress(f"speed: {r} n={n} T={recs[-1]['T']}: {recs[-1]['steps_per_s']:.2f} steps/s")
        _write_json(os.path.join(args.out, f"speed-{args.device.replace(':', '')}.json"), {"runs": recs})
        return 0
    if args.quick:
        base = QUICK if args.lr is None else replace(QUICK, lr=args.lr)
        base = base if args.short_conv is None else replace(base, short_conv=args.short_conv)
        cfgs = [replace(base, rule=r).check() for r in rules]
    else:
        base = MQARConfig() if args.lr is None else MQARConfig(lr=args.lr)
        base = base if args.short_conv is None else replace(base, short_conv=args.short_conv)
        cfgs = sweep_configs(rules, args.n_pairs, args.seq_len, args.seeds, args.steps, base)
    if not cfgs:
        raise SpecmemInputError("nothing to run: every (n_pairs, seq_len) combination has seq_len < 3 n + 1")
    _progress(f"specmem mqar: {len(cfgs)} run(s) -> {args.out} on {args.device} ({torch.get_num_threads()} threads)")
    recs = run_sweep(cfgs, args.out, args.device, progress=_progress)
    for r in recs:
        print(f"{r['name']}: acc {r['eval']['acc']:.3f} loss {r['initial_loss']:.3f} -> {r['final_loss']:.3f} "
              f"{r['steps_per_s']:.2f} steps/s")
    return 0
