"""Arithmetic-operation counts of NumPy code, by running it on counting arrays.

The claims ledger decides "O(dk) per step" from these counts rather than from wall-clock
time: a count depends only on the code and the shapes, never on machine load. Every
element-wise multiply, add/subtract, divide and square root is counted once per output
element; ``einsum``, ``matmul`` and ``sum`` count their multiplies and adds; selection,
indexing and comparisons are not arithmetic and are counted apart. A NumPy function the
counter does not know raises, so nothing is silently left out of a count.
"""

from __future__ import annotations

from collections import Counter
from math import prod

import numpy as np

__all__ = ["OpCounter", "count_ops"]

_MUL = {np.multiply, np.matmul}
_ADD = {np.add, np.subtract}
_DIV = {np.true_divide, np.reciprocal}
_SQRT = {np.sqrt}
# element-wise but not arithmetic in the cost model: sign flips, magnitudes, comparisons, logic
_OTHER = {np.negative, np.absolute, np.greater, np.greater_equal, np.less, np.less_equal, np.equal,
          np.not_equal, np.logical_and, np.logical_or, np.logical_not, np.bitwise_and, np.bitwise_or,
          np.invert, np.maximum, np.minimum, np.isfinite, np.remainder, np.floor_divide}
# NumPy functions that move or select data without arithmetic
_NO_ARITH = {np.where, np.argmax, np.argmin, np.take_along_axis, np.max, np.min, np.amax, np.amin, np.any,
             np.all, np.eye, np.zeros_like, np.ones_like, np.broadcast_to, np.swapaxes, np.reshape, np.copy,
             np.concatenate, np.stack, np.diagonal, np.squeeze, np.expand_dims, np.transpose}


class OpCounter:
    """Tallies of ``mul``, ``add``, ``div``, ``sqrt`` (arithmetic) and ``other`` (non-arithmetic)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    @property
    def arithmetic(self) -> int:
        """Multiplies + adds/subtracts + divides + square roots."""
        return sum(self.counts[n] for n in ("mul", "add", "div", "sqrt"))

    def wrap(self, a) -> "_Counted":
        """``a`` as a counting array reporting to this counter."""
        c = np.asarray(a).view(_Counted)
        c._counter = self
        return c


def _raw(a):
    if isinstance(a, _Counted):
        return a.view(np.ndarray)
    if isinstance(a, (list, tuple)):
        return type(a)(_raw(x) for x in a)
    return a


def _counter_of(objs) -> OpCounter | None:
    for o in objs:
        if isinstance(o, _Counted) and o._counter is not None:
            return o._counter
        if isinstance(o, (list, tuple)):
            c = _counter_of(o)
            if c is not None:
                return c
    return None


def _einsum_ops(subscripts: str, operands) -> tuple[int, int]:
    """Multiplies and adds of a plain (no ellipsis) ``einsum``: one multiply per extra operand per
    term of the full index space, one add per term beyond the output's size."""
    if "..." in subscripts or "->" not in subscripts:
        raise NotImplementedError(f"opcount: einsum {subscripts!r} (only explicit '->' without '...')")
    lhs, out = subscripts.replace(" ", "").split("->")
    dims: dict[str, int] = {}
    for spec, op in zip(lhs.split(","), operands):
        for ch, n in zip(spec, np.shape(op)):
            dims[ch] = n
    terms = prod(dims.values())
    return (len(operands) - 1) * terms, terms - prod(dims[ch] for ch in out)


class _Counted(np.ndarray):
    """An ndarray that reports the arithmetic done on it to its :class:`OpCounter`."""

    _counter: OpCounter | None = None

    def __array_finalize__(self, obj):
        self._counter = getattr(obj, "_counter", None)

    def _wrap(self, res, counter):
        if isinstance(res, tuple):
            return tuple(self._wrap(r, counter) for r in res)
        if isinstance(res, np.ndarray) or np.isscalar(res) or isinstance(res, np.generic):
            out = np.asarray(res).view(_Counted)
            out._counter = counter
            return out
        return res

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        counter = _counter_of(inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_raw(o) for o in kwargs["out"])
        raw = [_raw(i) for i in inputs]
        res = getattr(ufunc, method)(*raw, **kwargs)
        if counter is not None:
            c = counter.counts
            if method == "__call__":
                size = max(np.size(r) for r in (res if isinstance(res, tuple) else (res,)))
                if ufunc is np.matmul:
                    inner = np.shape(raw[0])[-1]
                    c["mul"] += size * inner
                    c["add"] += size * (inner - 1)
                elif ufunc in _MUL:
                    c["mul"] += size
                elif ufunc in _ADD:
                    c["add"] += size
                elif ufunc in _DIV:
                    c["div"] += size
                elif ufunc in _SQRT:
                    c["sqrt"] += size
                elif ufunc in _OTHER:
                    c["other"] += size
                else:
                    raise NotImplementedError(f"opcount: ufunc {ufunc.__name__} is not classified")
            elif method == "reduce":
                n = np.size(raw[0]) - np.size(res)
                c["add" if ufunc is np.add else "mul" if ufunc is np.multiply else "other"] += n
            else:
                raise NotImplementedError(f"opcount: ufunc method {method}")
        return self._wrap(res, counter)

    def __array_function__(self, func, types, args, kwargs):
        counter = _counter_of(args) or _counter_of(list(kwargs.values()))
        raw_args, raw_kwargs = _raw(list(args)), {k: _raw(v) for k, v in kwargs.items()}
        if func is np.einsum:
            mul, add = _einsum_ops(raw_args[0], raw_args[1:])
            res = np.einsum(*raw_args, **raw_kwargs)
            if counter is not None:
                counter.counts["mul"] += mul
                counter.counts["add"] += add
        elif func is np.sum:
            res = np.sum(*raw_args, **raw_kwargs)
            if counter is not None:
                counter.counts["add"] += np.size(raw_args[0]) - np.size(res)
        elif func is np.trace:
            res = np.trace(*raw_args, **raw_kwargs)
            if counter is not None:
                counter.counts["add"] += np.size(np.diagonal(*raw_args, **raw_kwargs)) - np.size(res)
        elif func in _NO_ARITH:
            res = func(*raw_args, **raw_kwargs)
        else:
            raise NotImplementedError(f"opcount: numpy.{func.__name__} is not classified")
        return self._wrap(res, counter)


def count_ops(fn, *arrays, **kwargs) -> tuple[OpCounter, object]:
    """Run ``fn(*arrays, **kwargs)`` with every array argument counting; return the counter and
    the result. Only arithmetic that flows from the array arguments is seen."""
    counter = OpCounter()
    wrapped = [counter.wrap(a) if isinstance(a, np.ndarray) else a for a in arrays]
    res = fn(*wrapped, **kwargs)
    return counter, res
