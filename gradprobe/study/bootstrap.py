"""Two-way bootstrap over seeds x held-out items of a mean paired difference (accuracy points).

Owen 2007, "The pigeonhole bootstrap", Ann. Appl. Stat. 1(2): seeds and items are resampled
independently, with replacement, and the mean paired difference is recomputed on the resampled
items of the resampled seeds; percentile interval (Efron & Tibshirani 1993, ch. 13). It adds the
sampling error of the held-out set, which a seeds-only interval (:func:`gradprobe.study.stats.paired_t`)
treats as fixed. Re-exported by :mod:`gradprobe.study.stats`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["N_RESAMPLES", "BOOTSTRAP_SEED", "two_way_indices", "two_way_bootstrap"]

N_RESAMPLES = 4000
BOOTSTRAP_SEED = 0
_CHUNK = 256  # resamples drawn at once by the two-way bootstrap


def two_way_indices(n_seeds: int, n_items: int, *, n_resamples: int, seed: int):
    """Yield (seed indices (c, n_seeds), item indices (c, n_items)) in chunks of <= 256 resamples.

    One ``numpy.random.default_rng(seed)``; per chunk the seed indices are drawn first, then the
    item indices (what a slow reference must repeat to get the same resamples).
    """
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, _CHUNK):
        c = min(_CHUNK, n_resamples - start)
        yield rng.integers(0, n_seeds, size=(c, n_seeds)), rng.integers(0, n_items, size=(c, n_items))


def two_way_bootstrap(treatment, control, *, level: float = 0.95, n_resamples: int = N_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> dict:
    """Mean paired difference and its seeds x items bootstrap interval (module docstring).

    Parameters
    ----------
    treatment, control : array, shape (seeds, items)
        Per-item correctness (0/1, or a fraction: mean over samples, or interpolated between
        two evals) of each seed's run; row s of both is the same seed, column i the same item.
    level : float
        Coverage of the percentile interval.
    n_resamples, seed : int
        Resamples and the seed of :func:`two_way_indices`.

    Returns
    -------
    dict
        ``estimate`` (points), ``ci`` [lo, hi] (points; None with one seed), ``level``,
        ``seeds``, ``items``, ``disagreement`` (mean |t - c| over seeds and items: the share of
        items on which the two policies differ, for 0/1 results), ``boot`` (ndarray, shape
        (n_resamples,), points: resample r is
        ``100 * mean(D[s_r][:, i_r])`` with D = treatment - control).

    Raises
    ------
    ValueError
        Shapes differ or are not 2-d, or no items.
    """
    t, c = np.asarray(treatment, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if t.shape != c.shape or t.ndim != 2 or t.size == 0:
        raise ValueError(f"treatment and control must be (seeds, items) arrays of one shape, got {t.shape}, {c.shape}")
    d = 100.0 * (t - c)
    n_s, n_i = d.shape
    out = {"estimate": float(d.mean()), "ci": None, "level": level, "seeds": n_s, "items": n_i,
           "disagreement": float(np.abs(t - c).mean()), "boot": None}
    if n_s < 2:
        return out
    boot = np.empty(n_resamples)
    pos = 0
    for si, ii in two_way_indices(n_s, n_i, n_resamples=n_resamples, seed=seed):
        c_ = si.shape[0]
        ws = np.zeros((c_, n_s))
        np.add.at(ws, (np.repeat(np.arange(c_), n_s), si.ravel()), 1.0)  # seed counts per resample
        wi = np.zeros((c_, n_i))
        np.add.at(wi, (np.repeat(np.arange(c_), n_i), ii.ravel()), 1.0)  # item counts
        boot[pos:pos + c_] = np.einsum("rs,rs->r", ws, wi @ d.T) / (n_s * n_i)
        pos += c_
    a = (1.0 - level) / 2
    out.update(ci=[float(v) for v in np.quantile(boot, [a, 1.0 - a])], boot=boot)
    return out
