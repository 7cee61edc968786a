"""How often the study analysis's read rule (:func:`gradprobe.forecast.read_rule.read_point`) errs on an axis whose
update cost varies (generated tokens: completion lengths vary from update to update).

    python benchmarks/read_rule_errors.py [RUNS]

The rule interpolates between two evals only when they lie at most the promised gap plus one update's cost apart,
taking that cost as the mean cost of the updates between the two evals (runs.csv holds evals only, not each update's
cost). A run evaluates at the first update at or after each promised point, so its evals may lie apart by the gap
plus the cost of the update that crossed the point, which may be more than the mean; and a lost eval may leave two
evals less than that apart. Simulated here: RUNS runs (default 200) of 400 updates, each update's cost drawn uniform
in mean * [1 - v, 1 + v] (mean 300 tokens, v the spread printed), an eval at the first update at or after every
multiple of 1000 tokens. Printed per spread:

- wrongly refused: of the reads between two neighbouring evals of a run that lost no eval (read halfway between
  promised points), the fraction the rule refuses (``gap_exceeded``): seeds left out of a comparison for nothing;
- wrongly read: with one promised eval dropped per run (at random), of the reads whose two evals lie around the
  dropped eval, the fraction the rule reads anyway (a value read across a lost eval).

Each rate with its exact (Clopper-Pearson) 95% binomial interval over the simulated reads (``scipy.stats.binomtest``):
the simulation's own sampling error, not a measurement of real runs.
"""

import sys

import numpy as np
from scipy.stats import binomtest

from gradprobe.forecast.read_rule import promised_gap, read_point

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
GAP, MEAN, UPDATES = 1000.0, 300.0, 400


def one_run(rng, spread: float):
    """(eval coordinates (tokens), eval update counts, promised points) of one simulated run."""
    cost = rng.uniform(MEAN * (1 - spread), MEAN * (1 + spread), size=UPDATES)
    x = np.concatenate([[0.0], np.cumsum(cost)])
    points = np.arange(GAP, x[-1] - GAP, GAP)
    idx = sorted({0, *(int(np.searchsorted(x, p)) for p in points)})
    return x[idx], np.asarray(idx, dtype=float), points


def rates(spread: float, seed: int = 0) -> tuple[float, float, int, int]:
    """(wrongly refused, wrongly read, reads behind each) at one spread of the update cost."""
    rng = np.random.default_rng(seed)
    refused = total = read_lost = total_lost = 0
    for _ in range(RUNS):
        ex, eu, points = one_run(rng, spread)
        pts = list(points)
        for at in points[1:-1] + 0.5 * GAP:
            total += 1
            refused += read_point(ex, eu, at, gap=promised_gap(pts, at))["status"] == "gap_exceeded"
        drop = int(rng.integers(2, ex.size - 2))  # one promised eval lost (not update 0, not the last two)
        kx, ku = np.delete(ex, drop), np.delete(eu, drop)
        for at in np.linspace(ex[drop - 1], ex[drop + 1], 9)[1:-1]:
            if abs(at - ex[drop]) < 1e-9:
                continue
            total_lost += 1
            r = read_point(kx, ku, at, gap=promised_gap(pts, at))
            read_lost += r["status"] == "interpolated"
    return refused / total, read_lost / total_lost, total, total_lost


print(f"read rule on a generated-tokens axis: {RUNS} runs x {UPDATES} updates, mean update cost {MEAN:g} tokens, "
      f"promised gap {GAP:g} tokens")
print("rates with exact (Clopper-Pearson) 95% binomial intervals over the simulated reads")


def _rate(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="exact")
    return f"{k / n:.2%} [{ci.low:.2%}, {ci.high:.2%}]"


print(f"{'cost spread':>12} {'wrongly refused':>24} {'wrongly read':>22}")
for v in (0.0, 0.1, 0.25, 0.5):
    bad_refuse, bad_read, n1, n2 = rates(v)
    k1, k2 = round(bad_refuse * n1), round(bad_read * n2)
    print(f"{f'+-{v:.0%}':>12} {_rate(k1, n1):>24} {_rate(k2, n2):>22}   ({n1} reads, {n2} across a lost eval)")
