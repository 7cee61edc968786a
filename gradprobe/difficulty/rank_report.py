"""What ``gradprobe rank-prompts`` records (``rank.json``) and prints (:func:`gradprobe.difficulty.rank.rank_prompts`),
and the model's identity in words (shared with ``difficulty-eval``).

Every estimate printed carries its 90% interval (:mod:`gradprobe.difficulty.intervals`,
:mod:`gradprobe.difficulty.fit_quality`); counts (tokens, FLOPs, seconds) are measured, not estimated.
"""

from __future__ import annotations

from ..outputs import versions
from ..tasks.dataset import repeated_data_ids as _repeats
from .estimator import verdict

__all__ = ["SMALL_FIT_PROMPTS", "document", "report", "repeated_data_ids", "weights_text"]

#: Below this many probed prompts the ranking still runs but adds a note that p_model is rough.
SMALL_FIT_PROMPTS = 32


def weights_text(name: str, weights: dict | None) -> str:
    """The model in words for a console line: its name and the weights it loaded, as a training run records them
    (``weights``: :func:`gradprobe.training.run_folder.model_weights_identity`'s ``{source, path, files, method,
    digest}``, the digest cut to 12 hex digits; None: no weight file identifies it, a model generated from the seed
    such as ``tiny-qwen2``, or a caller that did not identify it)."""
    if weights is None:
        return f"{name} (no weight file identifies it: a model generated from the seed, or not identified)"
    files, digest, path = weights.get("files") or [], (weights.get("digest") or "")[:12], weights.get("path")
    if weights.get("source") == "hub":
        return f"{name} = the hub id {path} (its weights not read from files here: no digest)"
    what = f"{weights.get('method')} {digest}"
    if weights.get("source") == "tier":
        return f"{name} = the {weights.get('build', '?')} build {path} ({', '.join(files)} {what})"
    return f"{name} = {path} ({', '.join(files) if len(files) <= 2 else f'{len(files)} weight files'} {what})"


def repeated_data_ids(pool: list) -> list[dict]:
    """rank.json's ``repeated_data_ids``: each ``data_id`` that several ranked prompts share, as ``{"data_id": the
    data's id (a string or an integer, as in the data; the text ranking.csv writes when the prompts hold it as
    different types, 17 and "17", which ranking.csv writes alike), "count": prompts holding it, "prompt_ids": those
    prompts' ids, in pool order}``, in the order the ids first occur in the pool; [] when no two ranked prompts share
    one (or the data has no ``id`` column). Only the ranked pool counts: a repeat whose other rows are not in the pool
    cannot be confused in ranking.csv. The loader's warning on stderr names every repeat of the data file
    (:func:`gradprobe.tasks.dataset.repeated_data_ids`); this keeps the pool's in the output file."""
    return [{"data_id": i, "count": len(ps), "prompt_ids": [p.id for p in ps]} for i, ps in _repeats(pool)]


def document(record: dict, prepared, ranked, ledger, weights: dict | None) -> dict:
    """rank.json's content (:func:`gradprobe.difficulty.rank.rank_prompts`' Returns, ``.attrs``) for the ranking
    ``ranked`` of ``prepared``'s pool (a :class:`gradprobe.difficulty.rank_pool.RankedPool`), ``record`` its settings,
    ``ledger`` its costs, ``weights`` the model's identity (:func:`weights_text`).

    Keys: ``command``, ``settings``, ``model_weights`` (``weights``), ``skipped_rows``, ``repeated_data_ids``
    (:func:`repeated_data_ids`), ``verdict`` (the rule "the candidates are predicted to fail more often than not",
    mean p_hat < 1/2, with its ``text`` and ``mean_p_hat_interval``), ``no_signal``, ``warning``, ``notes``,
    ``fit_prompts``, ``probe_success``, ``intervals`` (level, methods, bootstrap resamples and seed:
    :mod:`gradprobe.difficulty.intervals`), ``fit_quality`` (the held-out Brier score,
    :mod:`gradprobe.difficulty.fit_quality`), ``selection_tokens`` (``generated_or_read`` = ``sampled`` +
    ``read_by_feature_pass``: the ledger's ``generated_tokens["selection"]`` counts the tokens a selection rule
    generated or read, DESIGN.md), ``ledger`` (selection tokens, FLOPs, device-seconds), ``versions``.

    ``notes`` cautions (printed as ``note:`` lines): a logistic model fitted on fewer than :data:`SMALL_FIT_PROMPTS`
    probed prompts, and ``probe_samples`` 1: each probed prompt's outcome is one Bernoulli draw (0 or 1), the
    logistic model is fitted to those draws and each prompt's Beta-Bernoulli posterior
    (:mod:`gradprobe.difficulty.estimator`) adds its own draw to that prior, so p_hat follows the draw (trial 5: p_model
    0.84-0.88 after one success, 0.10-0.23 after one failure) and no probed prompt is placed near 1/2."""
    notes = []
    if ranked.n_fit < SMALL_FIT_PROMPTS and not ranked.no_signal:
        notes.append(f"the logistic model is fitted on only {ranked.n_fit} probed prompts; its p_model for "
                     f"unprobed prompts is rough (use --fit-prompts >= {SMALL_FIT_PROMPTS} and a pool at least "
                     f"that large)")
    if int(record["probe_samples"]) == 1:
        notes.append(f"each of the {ranked.n_fit} probed prompts was sampled once (--probe-samples 1), so its "
                     "estimate rests on one Bernoulli draw (success 0 or 1): p_hat of a probed prompt follows that "
                     "one outcome and the ranking cannot place a prompt near 1/2 (one draw cannot tell a prompt solved "
                     "half the time from one always or never solved); use --probe-samples 4 or more (the default 4)")
    caught, read = ranked.caught, ranked.feature_tokens
    counted = ledger.generated_tokens["selection"]
    return {"command": "rank-prompts", "settings": record, "model_weights": weights,
            "skipped_rows": int(getattr(prepared.task, "skipped", 0)),
            "repeated_data_ids": repeated_data_ids(prepared.pool),
            "verdict": {**verdict(ranked.p_hat), "mean_p_hat_interval": ranked.intervals["mean_p_hat_interval"]},
            "no_signal": ranked.no_signal, "warning": str(caught[0].message) if caught else None, "notes": notes,
            "fit_prompts": ranked.n_fit, "probe_success": ranked.probe_success, "intervals": ranked.intervals,
            "fit_quality": ranked.fit_quality,
            "selection_tokens": {"generated_or_read": counted, "sampled": counted - read, "read_by_feature_pass": read,
                                 "counted_in": "ledger.generated_tokens.selection: the tokens a selection rule "
                                               "generated or read (DESIGN.md, 'The compute ledger')"},
            "ledger": ledger.to_dict(), "versions": versions()}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _iv(pair) -> str:
    return "[n/a]" if pair is None else f"[{_fmt(pair[0])}, {_fmt(pair[1])}]"


def _fit_line(q: dict) -> str:
    """The held-out fit quality in words (:func:`gradprobe.difficulty.fit_quality.heldout_fit_quality`)."""
    if q["brier"] is None:
        return f"held-out fit: not scored: {q['reason']}"
    return (f"held-out fit ({q['folds']}-fold CV over the {q['prompts']} probed prompts, {q['completions']} "
            f"completions): Brier {_fmt(q['brier'])} {_iv(q['brier_interval'])} vs base rate "
            f"{_fmt(q['base_rate_brier'])} {_iv(q['base_rate_brier_interval'])}; model - base rate "
            f"{q['difference']:+.3f} {_iv(q['difference_interval'])} ({q['level']:.0%} bootstrap intervals over "
            f"prompts, {q['resamples']} resamples)")


def _nearest_line(row, level: float) -> str:
    """The prompt nearest 1/2 with its intervals (a row of ranking.csv's table)."""
    seen = (f"observed {int(row.successes)}/{int(row.attempts)} successes, Jeffreys {_iv([row.rate_lo, row.rate_hi])}"
            if row.attempts > 0 else "not probed")
    return (f"nearest 1/2: {row.prompt_id}: p_hat {_fmt(row.p_hat)} {_iv([row.p_lo, row.p_hi])}, p_model "
            f"{_fmt(row.p_model)} {_iv([row.p_model_lo, row.p_model_hi])}, {seen} ({level:.0%} intervals)")


def report(say, table, doc: dict, ledger, folder) -> None:
    """The summary lines of ``gradprobe rank-prompts``: the model, notes, the verdict with its interval, the held-out
    fit, the prompt nearest 1/2 with its intervals, the selection cost, the files."""
    iv = doc["intervals"]
    say(f"model: {weights_text(doc['settings']['model'], doc['model_weights'])}")
    for note in doc["notes"]:
        say(f"note: {note}")
    say(f"verdict: {doc['verdict']['text']} over the {len(table)} pool prompts; mean p_hat {iv['level']:.0%} "
        f"interval {_iv(iv['mean_p_hat_interval'])} ({iv['resamples']} bootstrap refits of the model)")
    say(_fit_line(doc["fit_quality"]))
    say(_nearest_line(table.iloc[0], iv["level"]))
    tok = doc["selection_tokens"]
    say(f"selection cost: {tok['generated_or_read']:,} tokens generated or read ({tok['sampled']:,} sampled, "
        f"{tok['read_by_feature_pass']:,} prompt tokens read by the feature forward), "
        f"{ledger.flops.get('selection', 0):.3g} FLOPs, {ledger.device_seconds.get('selection', 0):.1f} s")
    if folder is not None:
        say(f"wrote {folder / 'ranking.csv'} and {folder / 'rank.json'}")
