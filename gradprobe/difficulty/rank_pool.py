"""The compute of ``gradprobe rank-prompts`` (:func:`gradprobe.difficulty.rank.rank_prompts`): features of
the pool (streamed in chunks, :mod:`gradprobe.difficulty.pool_stream`), probe samples of the fit prompts, the
estimator's fit, p_hat and its intervals (:mod:`gradprobe.difficulty.intervals`), the held-out fit quality
(:mod:`gradprobe.difficulty.fit_quality`), the ranked table, and its atomic write. Imports torch (through the
features) and pandas, so :mod:`gradprobe.difficulty.rank` imports this module only when a ranking runs.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..outputs import write_bytes_atomic, write_json_atomic
from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, rank_half
from .evaluate import sample_outcomes
from .features import check_prompt_lengths
from .folder import refuse_looping_outputs
from .fit_quality import heldout_fit_quality
from .intervals import DRAWS, LEVEL, bootstrap_fit, chunk_intervals, jeffreys_interval, percentile_interval
from .metadata import check_metadata_keys
from .pool_stream import CHUNK, encode_pool, pool_features

__all__ = ["RankedPool", "fit_and_rank", "write_ranking"]


class RankedPool(NamedTuple):
    """What :func:`fit_and_rank` computed."""

    table: pd.DataFrame      # one row per pool prompt, nearest 1/2 first (rank_prompts' Returns)
    p_hat: np.ndarray        # (N,) predicted success of each pool prompt, in pool order
    no_signal: bool          # the logistic model saw only equal outcomes (estimator degenerate)
    caught: list             # DegenerateOutcomesWarning records of the fit
    n_fit: int               # probed prompts
    probe_success: float | None  # mean outcome of the probe samples (None without a finite one)
    intervals: dict          # rank.json's "intervals": level, methods, resamples, the mean p_hat's interval
    fit_quality: dict        # held-out fit quality (gradprobe.difficulty.fit_quality.heldout_fit_quality)
    feature_tokens: int      # prompt tokens the feature forward read, every pool prompt once (in generated_tokens
                             # ["selection"], which counts what a selection rule generated or read)


def fit_and_rank(prepared, settings, ledger) -> RankedPool:
    """Rank ``prepared.pool`` by |p_hat - 1/2| (the steps of :mod:`gradprobe.difficulty.rank`), each p_hat with its
    intervals (:mod:`gradprobe.difficulty.intervals`), in this order: the pool encoded and packed
    (:mod:`gradprobe.difficulty.pool_stream`; every prompt's length checked against the model's context and the
    metadata keys checked before any forward), the features of the ``fit_prompts`` seeded prompts, their probe
    samples, the fit, its bootstrap refits and held-out quality, then the features of the pool chunk by chunk
    (never held whole), each chunk predicted and dropped.

    Parameters
    ----------
    prepared : gradprobe.difficulty.rank.PreparedPool
    settings : gradprobe.difficulty.rank.RankSettings
    ledger : Ledger
        Charged with the feature pass (prompt tokens read, counted in ``generated_tokens["selection"]``, which
        counts what a selection rule generated or read) and the probe samples as ``selection``.

    Raises
    ------
    ValueError
        A prompt longer than the model's context (:class:`gradprobe.rollout.PromptTooLongError`) or a bad metadata
        key, before any forward.
    """
    policy, problems, progress = prepared.policy, prepared.pool, not settings.no_progress
    ids = [p.id for p in problems]
    packed = encode_pool(policy.tokenizer, problems, progress=progress,
                         desc=f"rank-prompts: encoding {len(problems):,} prompts")
    check_prompt_lengths(policy.model, packed, problems)  # the whole pool, before any forward
    check_metadata_keys(problems, prepared.metadata_keys)  # warned once, for the whole pool
    n_fit = min(settings.fit_prompts, len(problems))
    fit = np.sort(np.random.default_rng([settings.seed, 0xF17]).permutation(len(problems))[:n_fit])
    feats_fit = _features(prepared, packed, fit, settings, ledger, f"rank-prompts: features of {n_fit:,} fit prompts")
    y = sample_outcomes(policy, prepared.task, [problems[i] for i in fit], samples=settings.probe_samples,
                        sampling=prepared.sampling, seed=settings.seed, ledger=ledger, category="selection",
                        progress=progress,
                        desc=f"rank-prompts: sampling {settings.probe_samples} x {n_fit} prompts")  # (n_fit, k)
    ok = np.isfinite(y)
    s_fit, a_fit = np.where(ok, y, 0).sum(1), ok.sum(1)
    est = DifficultyEstimator(prepared.estimator)
    est.observe([ids[i] for i in fit], feats_fit, s_fit, a_fit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateOutcomesWarning)
        est.fit()
    boot = bootstrap_fit(prepared.estimator, feats_fit, s_fit, a_fit, resamples=settings.resamples, seed=settings.seed)
    quality = heldout_fit_quality(prepared.estimator, feats_fit, s_fit, a_fit, seed=settings.seed)
    cols, mean_sums = _predict_pool(prepared, packed, est, boot, dict(zip(fit.tolist(), feats_fit)), settings, ledger)
    succ, att = np.zeros(len(problems)), np.zeros(len(problems))
    succ[fit], att[fit] = s_fit, a_fit
    cols["rate_lo"], cols["rate_hi"] = jeffreys_interval(succ, att)
    table = _table(problems, ids, cols, succ, att)
    intervals = _intervals_record(cols["p_hat"], mean_sums, boot, settings.seed)
    return RankedPool(table, cols["p_hat"], bool(est.degenerate_), caught, int(n_fit),
                      float(y[ok].mean()) if ok.any() else None, intervals, quality, packed.total)


def _features(prepared, packed, rows, settings, ledger, desc: str) -> np.ndarray:
    """Features of the pool prompts ``rows`` with a tqdm bar labelled ``desc`` (hidden by ``no_progress``)."""
    with tqdm(total=len(rows), desc=desc, unit="prompt", disable=settings.no_progress, leave=False) as bar:
        return pool_features(prepared.policy, prepared.pool, packed, rows, metadata_keys=prepared.metadata_keys,
                             batch_size=settings.feature_batch_size, ledger=ledger, on_batch=bar.update)


def _predict_pool(prepared, packed, est, boot, cached: dict, settings, ledger) -> tuple[dict, np.ndarray]:
    """p_hat, p_model and their intervals (:func:`gradprobe.difficulty.intervals.chunk_intervals`) of every pool
    prompt, in pool order, ``(N,)`` each, and the refits' sums of posterior means ``(B,)``; the features of each
    chunk of :data:`~gradprobe.difficulty.pool_stream.CHUNK` prompts are computed (``cached``: those of the fit
    prompts, by pool index) and dropped."""
    n, n0 = len(prepared.pool), prepared.estimator.prior_strength
    names = ("p_hat", "p_model", "p_lo", "p_hi", "p_model_lo", "p_model_hi")
    cols = {k: np.zeros(n) for k in names}
    mean_sums = np.zeros(boot.offsets.shape[0])
    with tqdm(total=n - len(cached), desc=f"rank-prompts: features of {n - len(cached):,} pool prompts",
              unit="prompt", disable=settings.no_progress, leave=False) as bar:
        for lo in range(0, n, CHUNK):
            rows = np.arange(lo, min(lo + CHUNK, n))
            todo = [i for i in rows.tolist() if i not in cached]
            new = dict(zip(todo, pool_features(
                prepared.policy, prepared.pool, packed, todo, metadata_keys=prepared.metadata_keys,
                batch_size=settings.feature_batch_size, ledger=ledger, on_batch=bar.update))) if todo else {}
            x = np.stack([cached[i] if i in cached else new[i] for i in rows.tolist()])
            chunk_ids = [prepared.pool[i].id for i in rows.tolist()]
            cols["p_model"][rows] = est.predict_model(x)
            a, b = est.posterior(chunk_ids, cols["p_model"][rows])
            cols["p_hat"][rows] = a / (a + b)
            s, f = est.counts(chunk_ids)
            got = chunk_intervals(boot, x, s, f, prior_strength=n0,
                                  rng=np.random.default_rng([settings.seed, 0x1A7, lo // CHUNK]))
            for k in names[2:]:
                cols[k][rows] = got[k]
            mean_sums += got["mean_sums"]
    return cols, mean_sums


def _table(problems, ids, cols: dict, succ, att) -> pd.DataFrame:
    """ranking.csv's table (rank_prompts' Returns), nearest 1/2 first."""
    order = rank_half(ids, cols["p_hat"])
    p = {k: v[order] for k, v in cols.items()}
    table = pd.DataFrame({"rank": np.arange(1, len(problems) + 1), "prompt_id": [ids[i] for i in order],
                          "p_hat": p["p_hat"], "p_lo": p["p_lo"], "p_hi": p["p_hi"],
                          "distance": np.abs(p["p_hat"] - 0.5), "attempts": att[order].astype(int),
                          "successes": succ[order].astype(int), "rate_lo": p["rate_lo"], "rate_hi": p["rate_hi"],
                          "p_model": p["p_model"], "p_model_lo": p["p_model_lo"], "p_model_hi": p["p_model_hi"]})
    data_ids = [(problems[i].metadata or {}).get("id") for i in order]
    if any(v is not None for v in data_ids):  # the data's own id column (jsonl:/hf: tasks), to find each prompt
        table.insert(2, "data_id", pd.array(data_ids, dtype=object))
    return table


def _intervals_record(p_hat, mean_sums, boot, seed: int) -> dict:
    """rank.json's ``intervals``: the level, each interval's method, the bootstrap's size and seed, and the
    interval of the pool's mean p_hat (the verdict's figure)."""
    lo, hi = percentile_interval(mean_sums / len(p_hat), LEVEL)
    return {"level": LEVEL, "resamples": int(boot.offsets.shape[0]), "draws_per_resample": DRAWS, "seed": seed,
            "constant_refits": boot.constant, "mean_p_hat": float(np.mean(p_hat)),
            "mean_p_hat_interval": [float(lo), float(hi)],
            "p_model_lo/p_model_hi": "percentile interval of p_model over bootstrap refits of the logistic model "
                                     "(probed prompts resampled with their outcomes)",
            "p_lo/p_hi": "quantiles of the estimator's Beta(n0 p_model + S, n0 (1 - p_model) + F) mixed over the "
                         "refits (the prior of an unprobed prompt, the posterior of a probed one)",
            "rate_lo/rate_hi": "Jeffreys interval of the probed prompt's observed success rate (Brown, Cai & "
                               "DasGupta 2001); empty for an unprobed prompt"}


def write_ranking(folder: Path, table: pd.DataFrame, document: dict) -> None:
    """``ranking.csv`` (the table) and ``rank.json`` (``document``) in ``folder``, each under a temporary
    name first: no half-written file under a final name. ``rank.json`` is written last; when that write
    does not finish (an error, or Ctrl-C: any exception) the new ``ranking.csv`` is removed, and so is an
    earlier ``rank.json``, which no longer describes it: a table is never left beside a ``rank.json``
    that is not its own, whoever calls this (the CLI or :func:`gradprobe.rank_prompts` with ``out=``).

    Raises
    ------
    OSError
        A file cannot be written (the message names it); the temporary file is removed. errno ELOOP: a file it
        writes (``ranking.csv``, ``rank.json``) is a symbolic link in a loop, refused before
        anything is written (:func:`gradprobe.difficulty.folder.refuse_looping_outputs`), the link kept.
    ValueError
        ``document`` holds a NaN or infinite float (``ranking.csv`` is removed, as above).
    """
    csv, part, doc = folder / "ranking.csv", folder / "ranking.csv.tmp", folder / "rank.json"
    refuse_looping_outputs(folder, "rank-prompts")  # not replaced by a file, nor removed by the cleanup below
    try:  # the atomic writer: its temporary name is opened without following a stale link (open_temporary)
        write_bytes_atomic(csv, table.to_csv(index=False).encode("utf-8"))
    except BaseException:  # Ctrl-C too: no temporary file left; the earlier pair is untouched
        part.unlink(missing_ok=True)
        raise
    try:
        write_json_atomic(doc, document)
    except BaseException:  # the new table must not stand beside an earlier (or no) rank.json
        csv.unlink(missing_ok=True)
        doc.unlink(missing_ok=True)
        raise
