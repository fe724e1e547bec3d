"""Benchmark helpers: the log-log slope fit used for the O(dk) claim."""

import numpy as np

from specmem.bench import loglog_slope


def test_loglog_slope_recovers_power_law():
    xs = np.array([64, 128, 256, 1024])
    assert abs(loglog_slope(xs, 3.0 * xs**1.0) - 1.0) < 1e-12
    assert abs(loglog_slope(xs, 0.5 * xs**2.0) - 2.0) < 1e-12
