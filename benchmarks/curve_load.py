"""What pooling evals at the same update count saves when a large reference-curve CSV loads
(:func:`gradprobe.forecast.curve_fit._pooled`).

    python benchmarks/curve_load.py [SEEDS] [UPDATE_COUNTS]

Writes a CSV of SEEDS x UPDATE_COUNTS evals (default 200 x 1000 = 200,000 rows: seeds of a ScaleRL sigmoid plus
N(0, 2^2) eval noise, update counts 10, 20, ..., none at update 0, so R0 is fitted too and the fit runs its 24
starts on four parameters) to a temporary folder and loads it with :meth:`ReferenceCurve.from_csv` (the main fit and
its seed-bootstrap refits) twice in one process: pooled (as gradprobe loads it) and unpooled (``_pooled`` switched
off: the fit over every row). Prints the CPU-clock seconds of each load, their ratio, and how far the two fits'
parameters lie apart.
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gradprobe.forecast import ReferenceCurve
from gradprobe.forecast import curve_fit
from gradprobe.forecast.curve_fit import scalerl_sigmoid

seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
levels = 10.0 * np.arange(1, (int(sys.argv[2]) if len(sys.argv) > 2 else 1000) + 1)


def write_csv(path: Path) -> None:
    rng = np.random.default_rng(0)
    n = np.tile(levels, seeds)
    y = np.clip(scalerl_sigmoid(n, R0=20.0, A=70.0, n_mid=800.0, B=1.3) + rng.normal(0.0, 2.0, n.size), 0.0, 100.0)
    s = np.repeat(np.arange(seeds), levels.size)
    lines = "\n".join(f"{a},{int(u)},{v:.4f}" for a, u, v in zip(s, n, y))
    path.write_text("seed,update,accuracy\n" + lines + "\n")


def load(path: Path, pooled: bool) -> tuple[float, ReferenceCurve]:
    real = curve_fit._pooled
    if not pooled:
        curve_fit._pooled = lambda n, y: None  # every row fitted as it is
    try:
        t = time.process_time()
        curve = ReferenceCurve.from_csv(path)
        return time.process_time() - t, curve
    finally:
        curve_fit._pooled = real


with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "curve.csv"
    write_csv(path)
    t_pooled, fast = load(path, pooled=True)
    t_rows, slow = load(path, pooled=False)
rel = max(abs(fast.params[k] - slow.params[k]) / abs(slow.params[k]) for k in slow.params)
print(f"{seeds * levels.size:,} rows ({seeds} seeds x {levels.size} update counts), {len(fast.replicates)} "
      f"seed-bootstrap replicates: load pooled {t_pooled:.2f} s, unpooled {t_rows:.2f} s CPU "
      f"({t_rows / t_pooled:.1f}x faster pooled)")
print(f"largest relative parameter difference {rel:.2g}; rmse {fast.rmse:.6f} vs {slow.rmse:.6f} points; "
      f"status {'equal' if fast.status == slow.status else 'DIFFERENT'}")
