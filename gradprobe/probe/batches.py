"""Several probe batches on disjoint training prompts with ONE reference direction (``--probe-batches N``).

The efficiency ratio rho_R = <g_R, u> / <g_outcome, u> of one probe batch is noisy (its
signal-to-noise on the tiny study's 16 x 8 batch was 0.6-1.0 for the inner products), and its
bootstrap interval narrows roughly as 1 / sqrt(N) with N batches. :func:`run_probe_batches` runs
:func:`gradprobe.probe.run.run_probe` N times on the same policy:

- batch k probes training prompts k*B .. (k+1)*B - 1 of one draw of N*B distinct prompts (distinct
  question texts; ``task.problems("train", ..., seed=config.batch.seed)``), with ``seed = config.batch.seed + k``
  for its rollouts and continuations;
- the reference direction (the held-out RLOO gradient, or ``direction:PATH``) is computed once, by
  batch 0, and reused by the others (:class:`ReferenceDirection`): its cost is paid once, and every
  batch measures the same u, so their inner products average;
- the policy and task are loaded once.

The combined ``probe.json`` (in ``out``) has the pooled per-reward entries (``inner_product`` the mean
over batches, its bootstrap interval resampling groups within each batch, ``per_group`` the
concatenation of the batches' contributions divided by N so they sum to the mean, ``tokens_per_update``
the mean), the summed ledger and costs, and ``batches``: each batch's per-reward figures
(``inner_product``, ``per_group``, ``signal_proxy_per_group``, ``tokens_per_update``...), which the
forecaster (:func:`gradprobe.forecast.forecast_rewards`) reads. Each batch's own files
(``probe.json``, ``alignment.safetensors``, ``tokens.jsonl``) are in ``out/batch_K``. With N = 1 this
is exactly ``run_probe`` (files in ``out``).

With one shared reference draw the held-out reference's own sampling noise is not in the interval;
the forecast says so.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..forecast.proxies import stratified_counts
from ..forecast.result import no_signal_reason
from ..models import load_policy
from ..outputs import prepare_output_dir, removed_if_left_empty
from ..probe_settings import check_batch_seeds
from ..tasks import load_task
from . import run as probe_run  # probe_run.run_probe is looked up per call: a test may stand in for it
from .guided import check_guided_task, pool_guidance
from .output import write_probe_json
from .result import add_same_loss_ratios

__all__ = ["ReferenceDirection", "run_probe_batches", "combine_batches", "pooled_batch_summary"]


@dataclass
class ReferenceDirection:
    """A reference update computed once per policy and reused across probe batches.

    Attributes
    ----------
    vector : dict[str, Tensor] or None
        v (parameter name -> tensor); None until the first :func:`~gradprobe.probe.run.run_probe`
        that receives this holder computes it.
    info : dict
        That run's ``reference`` block (kind, held-out prompts and accuracy, ...).
    """

    vector: dict | None = None
    info: dict = field(default_factory=dict)


class _TrainSlice:
    """A task whose training prompts are a fixed list (one batch's slice); everything else is the task's."""

    def __init__(self, task, problems: list):
        self._task = task
        self._problems = list(problems)

    def problems(self, split, n, *, seed=0):
        if split == "train":
            if n != len(self._problems):
                raise ValueError(f"probe batch slice holds {len(self._problems)} training prompts, asked for {n}")
            return list(self._problems)
        return self._task.problems(split, n, seed=seed)

    def __getattr__(self, name):
        return getattr(self._task, name)


def loaded_task_and_policy(config, task=None, policy=None) -> tuple:
    """``(task, policy)``: the ones given, else loaded once from ``config`` (``load_task`` of its task spec,
    malformed rows skipped when it says so; ``load_policy`` of its model, dtype, device and seed)."""
    task = task or load_task(config.task.spec, **({"skip_malformed": True} if config.task.skip_malformed else {}))
    policy = policy or load_policy(config.model.name, dtype=config.model.dtype, device=config.model.device,
                                   seed=config.batch.seed)
    return task, policy


def _distinct_train_prompts(task, n: int, seed: int) -> list:
    """n training problems with distinct question texts (first occurrences of a draw of n, 2n or 4n)."""
    for factor in (1, 2, 4):
        try:
            pool = task.problems("train", n * factor, seed=seed)
        except ValueError as err:
            if factor == 1 and type(err) is not ValueError:  # a malformed row, a bad option: its own error
                raise
            if factor == 1:  # the split itself is smaller than the probe batches' prompts: say which flags ask
                raise ValueError(f"{err} (the {n} asked for are --probe-batches x --prompts: each probe batch draws "
                                 "its own prompts)") from err
            break
        seen, out = set(), []
        for p in pool:
            if p.question not in seen:
                seen.add(p.question)
                out.append(p)
        if len(out) >= n:
            return out[:n]
    raise ValueError(f"the task's training split has fewer than {n} distinct prompts for --probe-batches x --prompts; "
                     "use fewer --probe-batches or --prompts")


def run_probe_batches(config, *, batches: int = 1, out: str | Path | None = None, policy=None, task=None,
                      extra_rewards: dict | None = None, sampler=None) -> dict:
    """Run ``batches`` probe batches on disjoint training prompts with one shared reference direction.

    Parameters
    ----------
    config : gradprobe.probe.run.ProbeConfig
        Every batch's configuration (``prompts`` x ``group`` per batch).
    batches : int
        N >= 1. More batches narrow the interval of the efficiency ratio (about 1 / sqrt(N)); each
        costs its rollouts, continuations and one alignment pass, the reference is computed once.
    out : path, optional
        Output folder: the combined ``probe.json`` and, with N > 1, ``batch_K/`` per batch.
    policy, task, extra_rewards, sampler
        As :func:`gradprobe.probe.run.run_probe` (loaded once when not given).

    Returns
    -------
    dict
        With N = 1 the result of ``run_probe``; with N > 1 the combined result (module docstring):
        ``config`` gains ``probe_batches``; ``batches`` lists each batch's figures.

    Raises
    ------
    ValueError
        ``batches < 1``, too few distinct training prompts, and everything ``run_probe`` raises.
    OSError
        ``out`` cannot be written (checked before any compute).
    """
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches (--probe-batches) must be an integer >= 1, got {batches!r}")
    check_batch_seeds(config.batch.seed, batches, config.batch.prompts)  # seeds and batches x prompts: checked first
    if batches == 1:
        result = probe_run.run_probe(config, out=out, policy=policy, task=task, extra_rewards=extra_rewards,
                                     sampler=sampler)
        result["reference"]["draw"] = 0
        return result
    check_guided_task(config, task)  # a guided probe needs reference solutions: refused before anything loads
    with removed_if_left_empty(out):
        if out is not None:
            prepare_output_dir(Path(out))
        task, policy = loaded_task_and_policy(config, task, policy)
        b = config.batch.prompts
        pool = _distinct_train_prompts(task, batches * b, config.batch.seed)
        holder = ReferenceDirection()
        results = []
        for k in range(batches):
            cfg_k = config.with_settings(seed=config.batch.seed + k)
            sub = None if out is None else Path(out) / f"batch_{k}"
            res = probe_run.run_probe(cfg_k, out=sub, policy=policy, task=_TrainSlice(task, pool[k * b:(k + 1) * b]),
                                      extra_rewards=extra_rewards, sampler=sampler, reference_direction=holder)
            res["reference"]["draw"] = 0
            res["prompt_ids"] = [p.id for p in pool[k * b:(k + 1) * b]]
            results.append(res)
        combined = combine_batches(results, config)
        if out is not None:
            write_probe_json(out, combined)  # named in a probe's record first (claim_probe_file)
        return combined


def combine_batches(results: list[dict], config) -> dict:
    """Pool per-batch probe results (same policy, same reference direction) into one result.

    Parameters
    ----------
    results : list of dict, length N
        ``run_probe`` results of the batches, the same rewards in each.
    config : ProbeConfig
        The base configuration (recorded, with ``probe_batches`` = N).

    Returns
    -------
    dict
        See the module docstring. Pooled entry fields: ``inner_product`` (mean over batches),
        ``interval`` / ``snr`` (stratified bootstrap over groups, ``config.run.n_bootstrap`` replicates),
        ``predicted_gain_per_update`` = 100 lr ``inner_product``, ``tokens_per_update`` (mean),
        ``predicted_gain_at_budget`` (and ``_at_time_budget``), ``signal_proxy`` (mean), ``cosine``
        (mean when every batch has one), ``guidance`` (a guided probe's, pooled:
        :func:`gradprobe.probe.guided.pool_guidance`); the remaining fields are batch 0's. ``batch``: the batches'
        summaries pooled (:func:`pooled_batch_summary`: counts summed, rates completion-weighted).

    Raises
    ------
    ValueError
        Batches that probed different rewards.
    """
    k = len(results)
    names = [r["name"] for r in results[0]["rewards"]]
    for j, res in enumerate(results[1:], 1):
        if [r["name"] for r in res["rewards"]] != names:
            raise ValueError(f"probe batch {j} probed {[r['name'] for r in res['rewards']]}, batch 0 {names}")
    out = copy.deepcopy(results[0])
    out["config"] = dict(config.to_dict(), probe_batches=k)
    by_name = [{r["name"]: r for r in res["rewards"]} for res in results]
    sizes = [len(b[names[0]]["per_group"]) for b in by_name]
    n_boot = max(int(config.run.n_bootstrap), 0)
    counts = stratified_counts(sizes, n_boot, config.batch.seed) if n_boot > 1 else None
    entries = [_pooled_entry(entry, [b[name] for b in by_name], config, counts) for name, entry in
               zip(names, out["rewards"])]
    out["rewards"] = entries
    add_same_loss_ratios(entries, config.update.loss_type)  # of the pooled inner products (batch 0's were copied)
    out["ledger"] = _sum_ledgers([r["ledger"] for r in results])
    out["costs"] = _sum_costs([r["costs"] for r in results])
    out["warnings"] = list(dict.fromkeys(w for r in results for w in r.get("warnings", [])))
    out["reference"] = dict(results[0]["reference"], reused_by_batches=k - 1)
    out["batch"] = pooled_batch_summary([r["batch"] for r in results])
    out["batches"] = [{
        "seed": r["config"]["seed"], "prompt_ids": r.get("prompt_ids"), "reference": {
            "draw": r["reference"].get("draw", 0), "reused": bool(r["reference"].get("reused", False))},
        "ledger": r["ledger"], "batch": r["batch"],
        "rewards": [{key: e.get(key) for key in ("name", "inner_product", "interval", "snr", "per_group",
                                                 "predicted_gain_per_update", "tokens_per_update", "signal_proxy",
                                                 "signal_proxy_per_group", "generated_tokens", "seconds_per_update")}
                    for e in r["rewards"]],
    } for r in results]
    return out


def _pooled_entry(entry: dict, per_batch: list[dict], config, counts) -> dict:
    """One reward's pooled entry (:func:`combine_batches`), updated in place from its N batches' entries.

    ``counts``: the stratified bootstrap's resampling counts per batch (each (n_bootstrap, groups of that
    batch); :func:`gradprobe.forecast.proxies.stratified_counts`), or None for no interval.
    """
    k, lr = len(per_batch), float(config.update.lr)
    per = [np.asarray(b["per_group"], dtype=np.float64) for b in per_batch]
    ip = float(np.mean([p.sum() for p in per]))
    tokens = float(np.mean([b["tokens_per_update"] for b in per_batch]))
    gain = 100.0 * lr * ip
    scale = float(config.budget.tokens) / tokens
    entry.update(inner_product=ip, per_group=[float(x) for p in per for x in p / k], num_groups=int(sum(map(len, per))),
                 tokens_per_update=int(round(tokens)), predicted_gain_per_update=gain,
                 predicted_gain_at_budget=scale * gain, probe_batches=k)
    if counts is not None:
        # replicate of the mean over batches: each batch's groups resampled within the batch
        boot = sum(c @ p for c, p in zip(counts, per)) / k
        lo, hi = np.percentile(boot, [2.5, 97.5])
        sd = float(boot.std(ddof=1))
        entry["interval"] = [float(lo) + 0.0, float(hi) + 0.0]
        entry["snr"] = abs(ip) / sd if sd > 0 else (0.0 if ip == 0 else math.inf)
        giv = sorted((100.0 * lr * float(lo), 100.0 * lr * float(hi)))
        entry["gain_interval_per_update"] = giv
        entry["gain_interval_at_budget"] = [scale * giv[0], scale * giv[1]]
    secs = [b.get("seconds_per_update") for b in per_batch]
    if all(s is not None for s in secs):
        entry["seconds_per_update"] = float(np.mean(secs))
        if config.budget.seconds is not None:
            entry["predicted_gain_at_time_budget"] = config.budget.seconds / entry["seconds_per_update"] * gain
    cos = [b.get("cosine") for b in per_batch]
    entry["cosine"] = float(np.mean(cos)) if all(c is not None for c in cos) else None
    sp = [b.get("signal_proxy") for b in per_batch]
    if all(s is not None for s in sp):
        entry["signal_proxy"] = float(np.mean(sp))
        entry["signal_proxy_per_group"] = [float(x) / k for b in per_batch for x in b["signal_proxy_per_group"]]
    entry["valid_completions"] = int(sum(b.get("valid_completions", 0) for b in per_batch))
    entry["no_signal_reason"] = no_signal_reason(per_batch, pooled=entry, batches=k)  # flat on every batch
    entry["no_signal"] = entry["no_signal_reason"] is not None
    if entry.get("guidance") is not None:  # a guided probe: its batches' guided rows, hint tokens and weights
        entry["guidance"] = pool_guidance([b["guidance"] for b in per_batch],
                                          rows=[len(p) * int(config.batch.group) for p in per])
    return entry


def pooled_batch_summary(summaries: list[dict]) -> dict:
    """``probe.json["batch"]`` of pooled batches: batch 0's ``prompts`` and ``group`` (each batch's B x G) and
    ``update_scale``; ``probe_batches``; ``prompts_total``, ``completions``, ``generated_tokens``, ``score_errors``
    and ``empty_completions`` summed; ``mean_completion_tokens``, ``mean_reward`` (fraction), ``truncation_rate``
    and ``format_rate`` the completion-weighted means of the batches' (NaN values left out); ``skipped_rows``
    the largest (every batch reads the same task)."""
    def total(key):
        return int(sum(int(s.get(key) or 0) for s in summaries))

    out = dict(summaries[0], probe_batches=len(summaries), prompts_total=total("prompts"),
               **{key: total(key) for key in ("completions", "generated_tokens", "score_errors", "empty_completions")})
    weights = [float(s.get("completions") or 0) for s in summaries]
    for key in ("mean_completion_tokens", "mean_reward", "truncation_rate", "format_rate"):
        pairs = [(w, float(s[key])) for w, s in zip(weights, summaries)
                 if isinstance(s.get(key), (int, float)) and math.isfinite(s[key]) and w > 0]
        out[key] = sum(w * v for w, v in pairs) / sum(w for w, _ in pairs) if pairs else math.nan
    out["skipped_rows"] = max(int(s.get("skipped_rows") or 0) for s in summaries)
    return out


def _sum_ledgers(ledgers: list[dict]) -> dict:
    out: dict = {}
    for led in ledgers:
        for key, val in led.items():
            if isinstance(val, dict):
                d = out.setdefault(key, {})
                for k2, v2 in val.items():
                    d[k2] = d.get(k2, 0) + (v2 or 0)
            elif isinstance(val, (int, float)):
                out[key] = out.get(key, 0) + val
    return out


def _sum_costs(costs: list[dict]) -> dict:
    out: dict = {}
    for c in costs:
        for key, val in c.items():
            if not key.startswith("alignment_to_update") and isinstance(val, (int, float)):
                out[key] = out.get(key, 0.0) + val
    upd = out.get("update_forward_backward_seconds")
    out["alignment_to_update_ratio"] = out.get("alignment_pass_seconds", 0.0) / upd if upd else None
    cpu = out.get("update_forward_backward_cpu_seconds")
    out["alignment_to_update_cpu_ratio"] = out.get("alignment_pass_cpu_seconds", 0.0) / cpu if cpu else None
    out["probe_batches"] = len(costs)
    return out
