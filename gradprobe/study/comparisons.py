"""Paired comparison of two arms' reads at one matched point: Student t over seeds and, with per-item
results, the two-way bootstrap over seeds x held-out items (accuracy points; :mod:`gradprobe.study.stats`).
Used by the analysis, its hypotheses and the learning-rate sweep (:mod:`gradprobe.study.analysis`)."""

from __future__ import annotations

import numpy as np

from . import stats
from .reading import items_at

__all__ = ["compare"]

N_RESAMPLES, BOOTSTRAP_SEED = stats.N_RESAMPLES, stats.BOOTSTRAP_SEED


def compare(t_reads: dict, c_reads: dict, *, t_arm: str, c_arm: str, index=None, mode: str = "greedy",
            level: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Paired comparison of two arms' reads (seed -> read dict): t over seeds, two-way over items.

    Returns
    -------
    dict
        ``differences`` (seed -> points), ``t`` (:func:`~gradprobe.study.stats.paired_t` or None
        without a read pair), ``two_way`` (:func:`~gradprobe.study.stats.two_way_bootstrap`
        without ``boot``, or None) and ``two_way_reason`` (why not, or None).
    """
    seeds = sorted(s for s in set(t_reads) & set(c_reads)
                   if t_reads[s]["value"] is not None and c_reads[s]["value"] is not None)
    diffs = {s: t_reads[s]["value"] - c_reads[s]["value"] for s in seeds}
    out = {"differences": diffs, "t": stats.paired_t(list(diffs.values()), level=level) if seeds else None,
           "two_way": None, "two_way_reason": None if index is not None else "the study saved no per-item results"}
    if index is not None and seeds:
        tm = [items_at(index, t_arm, s, t_reads[s], mode) for s in seeds]
        cm = [items_at(index, c_arm, s, c_reads[s], mode) for s in seeds]
        if any(v is None for v in tm + cm):
            out["two_way_reason"] = f"no per-item {mode} results at some of the evals read"
        else:
            tw = stats.two_way_bootstrap(np.stack(tm), np.stack(cm), level=level, n_resamples=n_resamples, seed=seed)
            tw.pop("boot")
            out["two_way"] = tw
    return out


def _by_seed(reads: dict, arm: str) -> dict:
    """The reads of one arm, keyed by seed: ``{(arm, seed): read}`` -> ``{seed: read}``."""
    return {s: r for (a, s), r in reads.items() if a == arm}
