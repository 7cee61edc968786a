"""The compute of ``gradprobe rank-prompts`` (:func:`gradprobe.difficulty.rank.rank_prompts`): features of
the pool, probe samples of the fit prompts, the estimator's fit and p_hat, the ranked table, and its
atomic write. Imports torch (through the features) and pandas, so :mod:`gradprobe.difficulty.rank`
imports this module only when a ranking runs.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..outputs import output_error, write_json_atomic
from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, rank_half
from .evaluate import sample_outcomes
from .features import prompt_features

__all__ = ["RankedPool", "fit_and_rank", "write_ranking"]


class RankedPool(NamedTuple):
    """What :func:`fit_and_rank` computed."""

    table: pd.DataFrame      # one row per pool prompt, nearest 1/2 first (rank_prompts' Returns)
    p_hat: np.ndarray        # (N,) predicted success of each pool prompt, in pool order
    no_signal: bool          # the logistic model saw only equal outcomes (estimator degenerate)
    caught: list             # DegenerateOutcomesWarning records of the fit
    n_fit: int               # probed prompts
    probe_success: float | None  # mean outcome of the probe samples (None without a finite one)


def fit_and_rank(prepared, settings, ledger) -> RankedPool:
    """Rank ``prepared.pool`` by |p_hat - 1/2| (the steps of :mod:`gradprobe.difficulty.rank`).

    Parameters
    ----------
    prepared : gradprobe.difficulty.rank.PreparedPool
    settings : gradprobe.difficulty.rank.RankSettings
    ledger : Ledger
        Charged with the feature pass and the probe samples as ``selection``.
    """
    policy, problems = prepared.policy, prepared.pool
    ids = [p.id for p in problems]
    feats = prompt_features(policy, problems, metadata_keys=prepared.metadata_keys,
                            batch_size=settings.feature_batch_size, ledger=ledger)  # (N, F)
    n_fit = min(settings.fit_prompts, len(problems))
    fit = np.sort(np.random.default_rng([settings.seed, 0xF17]).permutation(len(problems))[:n_fit])
    y = sample_outcomes(policy, prepared.task, [problems[i] for i in fit], samples=settings.probe_samples,
                        sampling=prepared.sampling, seed=settings.seed, ledger=ledger, category="selection",
                        progress=not settings.no_progress,
                        desc=f"rank-prompts: sampling {settings.probe_samples} x {n_fit} prompts")  # (n_fit, k)
    ok = np.isfinite(y)
    est = DifficultyEstimator(prepared.estimator)
    est.observe([ids[i] for i in fit], feats[fit], np.where(ok, y, 0).sum(1), ok.sum(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateOutcomesWarning)
        est.fit()
    p_model = est.predict_model(feats)  # (N,)
    p_hat = est.p_hat(ids, feats)  # (N,)
    order = rank_half(ids, p_hat)
    succ = np.zeros(len(problems))
    att = np.zeros(len(problems))
    succ[fit], att[fit] = np.where(ok, y, 0).sum(1), ok.sum(1)
    table = pd.DataFrame({"rank": np.arange(1, len(problems) + 1), "prompt_id": [ids[i] for i in order],
                          "p_hat": p_hat[order], "distance": np.abs(p_hat[order] - 0.5),
                          "attempts": att[order].astype(int), "successes": succ[order].astype(int),
                          "p_model": p_model[order]})
    data_ids = [(problems[i].metadata or {}).get("id") for i in order]
    if any(v is not None for v in data_ids):  # the data's own id column (jsonl:/hf: tasks), to find each prompt
        table.insert(2, "data_id", pd.array(data_ids, dtype=object))
    return RankedPool(table, p_hat, bool(est.degenerate_), caught, int(n_fit),
                      float(y[ok].mean()) if ok.any() else None)


def write_ranking(folder: Path, table: pd.DataFrame, document: dict) -> None:
    """``ranking.csv`` (the table) and ``rank.json`` (``document``) in ``folder``, each under a temporary
    name first: no half-written file under a final name. ``rank.json`` is written last; when that write
    does not finish (an error, or Ctrl-C: any exception) the new ``ranking.csv`` is removed, and so is an
    earlier ``rank.json``, which no longer describes it: a table is never left beside a ``rank.json``
    that is not its own, whoever calls this (the CLI or :func:`gradprobe.rank_prompts` with ``out=``).

    Raises
    ------
    OSError
        A file cannot be written (the message names it); the temporary file is removed.
    ValueError
        ``document`` holds a NaN or infinite float (``ranking.csv`` is removed, as above).
    """
    csv, part, doc = folder / "ranking.csv", folder / "ranking.csv.tmp", folder / "rank.json"
    try:
        table.to_csv(part, index=False)
        part.replace(csv)
    except BaseException as e:  # Ctrl-C too: no temporary file left; the earlier pair is untouched
        part.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise output_error("writing", csv, e) from e
        raise
    try:
        write_json_atomic(doc, document)
    except BaseException:  # the new table must not stand beside an earlier (or no) rank.json
        csv.unlink(missing_ok=True)
        doc.unlink(missing_ok=True)
        raise
