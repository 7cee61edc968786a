"""Prompt selection inside a training run: the ``selection`` key of a plan's arm.

Rules (:data:`SELECTION_RULES`), each a :class:`PromptSelector` that returns the update's scored
rollout batch of B groups and a record for the metrics line:

``half``     (the ``select_half`` arm of DESIGN.md) draw m x B candidates (m =
             ``candidates_multiplier``, default 4) from the run's prompt stream, compute their
             features under the current policy, refit the estimator on the outcomes seen so far,
             predict p_hat, and train on the B nearest 1/2 (:func:`~gradprobe.difficulty.estimator.rank_half`).
             The selected prompts' outcomes update the estimator online.
``random``   the cost-matched placebo of ``half``: the same candidates, features, fit and
             predictions (same charges), but B candidates drawn uniformly at random.
``dynamic``  DAPO dynamic sampling (Yu et al. 2025, "DAPO", sec. 3.2 "Dynamic Sampling", eq. 11):
             sample groups of B prompts at a time from the candidate stream and drop every group
             whose rewards are all equal (zero advantage), until B informative groups are kept. At
             most m x B prompts are drawn per update; if fewer than B informative groups turned up
             the batch is filled with the earliest dropped groups (logged, ``filled`` in the record)
             so every update trains on B groups.

Costs, all charged to the run's ledger (DESIGN.md, "The compute ledger") so the comparison with plain
GRPO stays matched: the feature pass reads m x B prompts (``selection`` tokens, ``flops["selection"]``,
``device_seconds["selection"]`` together with the fit and the prediction); ``dynamic``'s dropped
groups' completion tokens are ``selection`` tokens with their generation FLOPs in
``flops["selection"]`` and their share (by tokens) of the generation wall time in
``device_seconds["selection"]``; the kept groups are ordinary ``rollout`` tokens. The training loop
counts ``flops["selection"]`` and ``device_seconds["selection"]`` in its FLOPs and device-seconds
budgets.

No signal, no selection: while the estimator has no outcomes yet (the first update), or every observed
outcome is equal (always solved / never solved), ``half`` falls back to ``random`` choice among the
candidates instead of ranking noise; the record says ``"fallback": "random"`` on every such update, and
the degenerate case (the estimator's :class:`~gradprobe.difficulty.estimator.DegenerateOutcomesWarning`)
is also logged as a warning once per run.

The candidate stream is :func:`gradprobe.training.run.pool_indices` (per-seed epoch permutations) at
m x B prompts per update, a pure function of the update index, so resuming needs only the
estimator's state (:meth:`PromptSelector.state_dict`).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import asdict

import numpy as np
import torch

from .config import SELECTION_KEYS, SELECTION_RULES, SelectionConfig, parse_selection
from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, check_unique_ids, rank_half, verdict
from .features import DEFAULT_METADATA_KEYS, prompt_features

log = logging.getLogger(__name__)

__all__ = ["SELECTION_RULES", "SELECTION_KEYS", "SelectionConfig", "parse_selection", "PromptSelector",
           "make_selector", "group_outcomes"]

def group_outcomes(scores: torch.Tensor, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(successes, attempts) per group from row scores (N,) = (B * G,); NaN rows are not attempts.

    A completion is a success iff its score is 1.0 (the verifier's exact match)."""
    s = scores.detach().cpu().to(torch.float64).view(-1, group_size)
    finite = torch.isfinite(s)
    return (((s == 1.0) & finite).sum(1).numpy().astype(np.float64), finite.sum(1).numpy().astype(np.float64))


def _informative(scores_row: torch.Tensor) -> bool:
    r = scores_row[torch.isfinite(scores_row)]
    return bool(r.numel() >= 2 and r.max() != r.min())


class PromptSelector:
    """Chooses (and rolls out) each update's B prompts by a :class:`SelectionConfig` rule.

    Parameters
    ----------
    config : SelectionConfig
    policy : gradprobe.models.Policy
    task : Task
    pool : list[Problem]
        The training pool (unique ids).
    sampler : Sampler
        The run's sampler (its call counter is part of the run's checkpoint).
    sampling : SamplingConfig
    group_size : int
        G.
    prompts_per_update : int
        B.
    seed : int
        Run seed: the candidate stream and the random choices.
    metadata_keys : sequence of str

    Raises
    ------
    ValueError
        An empty pool, a pool smaller than B, or B < 1.
    DuplicatePromptError
        Repeated prompt ids in the pool.
    """

    def __init__(self, config: SelectionConfig, *, policy, task, pool, sampler, sampling, group_size: int,
                 prompts_per_update: int, seed: int, metadata_keys=DEFAULT_METADATA_KEYS):
        if prompts_per_update < 1:
            raise ValueError(f"prompts_per_update must be >= 1, got {prompts_per_update}")
        if not pool:
            raise ValueError("prompt selection needs a non-empty pool (task.pool = 0?)")
        if len(pool) < prompts_per_update:
            raise ValueError(f"the pool has {len(pool)} prompts, fewer than prompts_per_update = {prompts_per_update}; "
                             f"raise task.pool or lower prompts_per_update")
        check_unique_ids([p.id for p in pool])
        self.config, self.policy, self.task, self.pool = config, policy, task, list(pool)
        self.sampler, self.sampling, self.group, self.b, self.seed = sampler, sampling, group_size, prompts_per_update, seed
        self.metadata_keys = tuple(metadata_keys)
        self.estimator = DifficultyEstimator(config.estimator_config())
        import sklearn.linear_model  # noqa: F401  (import once here, not inside the first charged fit)
        self._warned = False

    def candidates(self, update: int) -> list[int]:
        """Pool indices of update ``update``'s m x B candidates (distinct; at most the pool size)."""
        from ..training.run import pool_indices

        n = min(self.config.candidates_multiplier * self.b, len(self.pool))
        idx = pool_indices(update, self.config.candidates_multiplier * self.b, len(self.pool), self.seed)
        return list(dict.fromkeys(idx))[:n]

    def next_batch(self, update: int, ledger) -> tuple:
        """Select, roll out and score update ``update``'s B groups.

        Parameters
        ----------
        update : int
            0-based update index.
        ledger : Ledger
            Charged as described in the module docstring.

        Returns
        -------
        batch : RolloutBatch
            B groups of G scored rollouts (``rollout`` tokens charged).
        record : dict
            For the metrics line: ``rule``, ``candidates``, ``candidates_mean_p_hat``, ``fail_more_often``
            (the rule's verdict over the candidates), ``selected_mean_p_hat``, ``fallback``, and the
            update's selection cost ``selection_tokens``, ``selection_flops``, ``selection_seconds``.
        """
        before = (ledger.generated_tokens["selection"], ledger.flops.get("selection", 0.0),
                  ledger.device_seconds.get("selection", 0.0))
        if self.config.rule == "dynamic":
            batch, record = self._dynamic(update, ledger)
        else:
            batch, record = self._estimated(update, ledger)
        record["selection_tokens"] = ledger.generated_tokens["selection"] - before[0]
        record["selection_flops"] = ledger.flops.get("selection", 0.0) - before[1]
        record["selection_seconds"] = ledger.device_seconds.get("selection", 0.0) - before[2]
        return batch, record

    def _estimated(self, update: int, ledger):
        from ..rollout import collect_rollouts

        cand = self.candidates(update)
        problems = [self.pool[i] for i in cand]
        ids = [p.id for p in problems]
        feats = prompt_features(self.policy, problems, metadata_keys=self.metadata_keys,
                                batch_size=self.config.feature_batch_size, ledger=ledger)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DegenerateOutcomesWarning)
            self.estimator.fit()
        p_hat = self.estimator.p_hat(ids, feats)
        no_signal = self.estimator.n_observed_ == 0 or self.estimator.degenerate_
        rng = np.random.default_rng([self.seed, update, 0x5E1EC7])
        fallback = None
        if self.config.rule == "half" and not no_signal:
            chosen = rank_half(ids, p_hat)[: self.b]
        else:
            chosen = sorted(rng.choice(len(cand), size=self.b, replace=False).tolist())
            if self.config.rule == "half":
                fallback = "random"
                if caught and not self._warned:  # all observed outcomes equal: say so once per run
                    log.warning("select_half: %s; selecting at random among the candidates until outcomes differ",
                                caught[0].message)
                    self._warned = True
        ledger.add_seconds("selection", time.perf_counter() - start)
        v = verdict(p_hat)
        batch = collect_rollouts(self.policy, self.task, [problems[i] for i in chosen], group_size=self.group,
                                 sampler=self.sampler, sampling=self.sampling, ledger=ledger, category="rollout")
        start = time.perf_counter()
        s, n = group_outcomes(batch.scores, self.group)
        self.estimator.observe([ids[i] for i in chosen], feats[chosen], s, n)
        self.estimator.step()
        ledger.add_seconds("selection", time.perf_counter() - start)
        record = {"rule": self.config.rule, "candidates": len(cand), "candidates_mean_p_hat": v["mean_p_hat"],
                  "fail_more_often": v["fail_more_often"], "verdict": v["text"],
                  "selected_mean_p_hat": float(np.mean(p_hat[chosen])),
                  "selected_mean_success": float(s.sum() / n.sum()) if n.sum() else None,
                  "fallback": fallback, "estimator_degenerate": bool(self.estimator.degenerate_)}
        return batch, record

    def _dynamic(self, update: int, ledger):
        from ..ledger import forward_flops_per_token
        from ..rollout import build_batch, score_completions
        from ..tasks.prompts import encode_prompt

        tok = self.policy.tokenizer
        cand = self.candidates(update)
        kept, dropped = [], []  # (problem, prompt ids, samples, scores, tokens, estimated seconds)
        drawn = 0
        seconds_total = 0.0
        for lo in range(0, len(cand), self.b):
            if len(kept) >= self.b:
                break
            chunk = [self.pool[i] for i in cand[lo: lo + self.b]]
            prompt_ids = [list(encode_prompt(tok, p.question)) for p in chunk]
            start = time.perf_counter()
            samples = self.sampler.sample(prompt_ids, num_samples=self.group, sampling=self.sampling, desc="dynamic")
            secs = time.perf_counter() - start
            texts = tok.batch_decode([x.token_ids for x in samples], skip_special_tokens=True)
            scores, _ = score_completions(self.task, texts, [p for p in chunk for _ in range(self.group)])
            chunk_tokens = sum(len(x.token_ids) for x in samples)
            for i, p in enumerate(chunk):
                sm = samples[i * self.group:(i + 1) * self.group]
                sc = scores[i * self.group:(i + 1) * self.group]
                toks = sum(len(x.token_ids) for x in sm)
                share = toks / chunk_tokens if chunk_tokens else 1 / len(chunk)
                entry = (p, prompt_ids[i], sm, sc, toks, secs * share)
                if _informative(torch.tensor(sc, dtype=torch.float64)) and len(kept) < self.b:
                    kept.append(entry)
                else:
                    dropped.append(entry)
            drawn += len(chunk)
            seconds_total += secs
        filled = 0
        while len(kept) < self.b and dropped:
            kept.append(dropped.pop(0))  # no informative group left within m x B: train on zero-advantage ones
            filled += 1
        if filled:
            log.info("dynamic sampling, update %d: %d of %d groups informative after %d prompts; %d filled with "
                     "zero-advantage groups", update, self.b - filled, self.b, drawn, filled)
        # generation seconds split by tokens: kept groups are training generation, dropped ones the selection's cost
        ledger.add_seconds("generation", sum(e[5] for e in kept))
        ledger.add_seconds("selection", sum(e[5] for e in dropped))
        for p, ids, sm, sc, toks, _ in dropped:
            ctx = len(ids) + toks / max(len(sm), 1) / 2
            ledger.add_generated("selection", toks)
            ledger.add_flops("selection", toks * forward_flops_per_token(self.policy.model, ctx))
        problems = [e[0] for e in kept]
        samples = [x for e in kept for x in e[2]]
        scores = [x for e in kept for x in e[3]]
        batch = build_batch(tok, problems, [e[1] for e in kept], samples, group_size=self.group,
                            temperature=self.sampling.temperature, scores=scores)
        batch.metadata.update(sampler=type(self.sampler).__name__, generation_seconds=seconds_total,
                              max_new_tokens=self.sampling.max_new_tokens, category="rollout")
        ledger.add_generated("rollout", batch.generated_tokens)
        all_scores = np.array([x for e in kept + dropped for x in e[3]], dtype=np.float64)
        finite = all_scores[np.isfinite(all_scores)]
        record = {"rule": "dynamic", "candidates": drawn, "drawn_groups": drawn, "kept_informative": self.b - filled,
                  "filled": filled, "dropped_groups": len(dropped),
                  "drawn_mean_success": float(np.mean(finite == 1.0)) if finite.size else None,
                  "candidates_mean_p_hat": None, "fail_more_often": None,
                  "verdict": "dynamic sampling uses observed rewards, no p_hat", "selected_mean_p_hat": None,
                  "fallback": None}
        return batch, record

    def state_dict(self) -> dict:
        return {"config": asdict(self.config), "estimator": self.estimator.state_dict(), "warned": self._warned}

    def load_state_dict(self, state: dict) -> None:
        if state["config"] != asdict(self.config):
            raise ValueError(f"checkpoint selector config {state['config']} differs from the run's {asdict(self.config)}")
        self.estimator.load_state_dict(state["estimator"])
        self._warned = bool(state.get("warned", False))


def make_selector(selection: dict | None, **kwargs) -> PromptSelector | None:
    """A :class:`PromptSelector` from a run's ``selection`` dict (:func:`parse_selection`), or None."""
    if not selection:
        return None
    return PromptSelector(SelectionConfig(**selection), **kwargs)
