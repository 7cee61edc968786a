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
``greso``    GRESO pre-rollout filtering (Zheng et al. 2025, "Act Only When It Pays: Efficient
             Reinforcement Learning for LLM Reasoning via Selective Rollouts", arXiv 2506.02177,
             sec. 4 "probabilistic pre-rollout prompt filtering" with its self-adjusting exploration
             probability; the rule below follows their released code, ``verl/trainer/ttis/
             presampling_selector.py`` ``DataProfiler.filter_examples_all_probabilistic`` and the
             p_easy / p_hard update in ``verl/trainer/ppo/ray_trainer.py``): before rollout, each of
             the m x B candidates whose last z groups were all correct (all wrong) is skipped with
             probability 1 - max(p_easy^z, floor) (1 - max(p_hard^z, floor)); the rest are rolled out
             B at a time and filtered as ``dynamic`` does (GRESO runs on top of dynamic sampling).
             Every rolled-out group updates its prompt's streaks, and after the update p_easy
             (p_hard) moves by ``greso_step`` down when the update's share of all-correct (all-wrong)
             groups reached its target, up otherwise (:class:`GresoFilter`).

Costs, all charged to the run's ledger (DESIGN.md, "The compute ledger") so the comparison with plain
GRPO stays matched: the feature pass reads m x B prompts (``selection`` tokens, ``flops["selection"]``,
``device_seconds["selection"]`` together with the fit and the prediction); ``dynamic``'s dropped
groups' completion tokens are ``selection`` tokens with their generation FLOPs in
``flops["selection"]`` and their share (by tokens) of the generation wall time in
``device_seconds["selection"]``; the kept groups are ordinary ``rollout`` tokens. ``greso`` charges
like ``dynamic`` (its dropped groups as ``selection`` tokens, FLOPs and seconds) plus the wall time of
its skip decisions, history and p update as ``device_seconds["selection"]``; a skipped candidate
costs nothing else (it is never rolled out, which is GRESO's saving). The training loop
counts ``flops["selection"]`` and ``device_seconds["selection"]`` in its FLOPs and device-seconds
budgets.

No signal, no selection: while the estimator has no outcomes yet (the first update), or every observed
outcome is equal (always solved / never solved), ``half`` falls back to ``random`` choice among the
candidates instead of ranking noise; the record says ``"fallback": "random"`` on every such update, and
the degenerate case (the estimator's :class:`~gradprobe.difficulty.estimator.DegenerateOutcomesWarning`)
is also logged as a warning once per run.

The candidate stream is :func:`gradprobe.streams.pool_indices` (per-seed epoch permutations) at
m x B prompts per update, a pure function of the update index, so resuming needs only the
estimator's state (:meth:`PromptSelector.state_dict`); ``greso``'s skip draws come from a generator
seeded by (run seed, update), and its streaks and p_easy / p_hard are in the state.
"""

from __future__ import annotations

import logging
import math
import time
import warnings

import numpy as np
import torch

from ..streams import pool_indices
from .config import SELECTION_KEYS, SELECTION_RULES, SelectionConfig, parse_selection
from .estimator import DegenerateOutcomesWarning, DifficultyEstimator, check_unique_ids, rank_half, verdict
from .features import DEFAULT_METADATA_KEYS, prompt_features

log = logging.getLogger(__name__)

__all__ = ["SELECTION_RULES", "SELECTION_KEYS", "SelectionConfig", "parse_selection", "PromptSelector",
           "make_selector", "group_outcomes", "group_kind", "GresoFilter"]

#: Outcome kinds of a group (:func:`group_kind`); the first two are the flat (zero-variance) ones.
GROUP_KINDS = ("all_correct", "all_wrong", "mixed")

def group_outcomes(scores: torch.Tensor, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(successes, attempts) per group from row scores (N,) = (B * G,); NaN rows are not attempts.

    A completion is a success iff its score is 1.0 (the verifier's exact match)."""
    s = scores.detach().cpu().to(torch.float64).view(-1, group_size)
    finite = torch.isfinite(s)
    return (((s == 1.0) & finite).sum(1).numpy().astype(np.float64), finite.sum(1).numpy().astype(np.float64))


def _informative(scores_row: torch.Tensor) -> bool:
    r = scores_row[torch.isfinite(scores_row)]
    return bool(r.numel() >= 2 and r.max() != r.min())


def group_kind(scores) -> str:
    """``"mixed"`` (informative: >= 2 finite scores, not all equal), else ``"all_correct"`` (every
    finite score is 1.0, at least one) or ``"all_wrong"`` (a flat group without a success, including one
    without any finite score).

    Parameters
    ----------
    scores : sequence of float, length G
        One group's verifier scores (NaN = no reward).
    """
    r = np.asarray(scores, dtype=np.float64).reshape(-1)
    r = r[np.isfinite(r)]
    if r.size >= 2 and r.max() != r.min():
        return "mixed"
    return "all_correct" if r.size and bool(np.all(r == 1.0)) else "all_wrong"


class GresoFilter:
    """GRESO's pre-rollout filter (Zheng et al. 2025, arXiv 2506.02177, sec. 4; their released code,
    ``DataProfiler.easy_probabilistic_skip`` / ``hard_probabilistic_skip`` and the exploration update in
    ``RayPPOTrainer.fit``), without any model: only each prompt's history of group outcomes.

    State: per prompt id, the streaks (z_easy, z_hard) = the number of its most recent rolled-out
    groups, in a row, that were all correct (all wrong); a mixed group resets both, an all-correct
    group resets z_hard and vice versa. The exploration probabilities p_easy, p_hard.

    Skip rule (before rollout), for a candidate with streaks (z_e, z_h)::

        P(skip) = 1 - max(p_easy^z_e, floor)   if z_e > 0
                  1 - max(p_hard^z_h, floor)   if z_h > 0
                  0                            otherwise (never attempted or last group mixed)

    and the candidate is skipped iff u < P(skip) for its uniform draw u in [0, 1). p = 0 with
    floor = 0 skips every prompt with a streak; p = 1 skips none.

    Exploration update (after the update's rollouts, from epoch 1 of the candidate stream on, as
    GRESO's ``epoch > 0``): with c, w the shares of all-correct, all-wrong groups among the
    update's rolled-out groups and T = ``greso_target_flat``::

        p_easy <- max(p_easy - step, p_min)  if c >= T / 3      else min(p_easy + step, p_max)
        p_hard <- max(p_hard - step, p_min)  if w >= 2 T / 3    else min(p_hard + step, p_max)

    (too many flat groups: explore less, i.e. skip more; GRESO's code puts 2/3 of the target on
    all-wrong prompts, "more exploration on hard examples"). GRESO's own thresholds classify a
    group by its mean reward (>= 0.98 all correct, <= 0.11 all wrong); here by :func:`group_kind`.

    Parameters
    ----------
    config : SelectionConfig
        Its ``greso_*`` fields.
    """

    def __init__(self, config: SelectionConfig):
        self.config = config
        self.p_easy = float(config.greso_explore_easy)
        self.p_hard = float(config.greso_explore_hard)
        self._streaks: dict[str, list[int]] = {}  # id -> [z_easy, z_hard]
        self._seen: list[list[int]] = []  # every rolled-out group: [z_easy, z_hard, kind index] (prediction AUC)

    def streaks(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(z_easy, z_hard) of each prompt, each int64 of shape (M,) (0 for a never-seen prompt)."""
        z = np.array([self._streaks.get(i, (0, 0)) for i in ids], dtype=np.int64).reshape(-1, 2)
        return z[:, 0], z[:, 1]

    def skip_probability(self, ids) -> tuple[np.ndarray, list[str | None]]:
        """P(skip) of each prompt, float64 (M,), and the flat kind it is predicted to repeat
        (``"all_correct"``, ``"all_wrong"`` or None without a streak); the class docstring's rule."""
        ze, zh = self.streaks(ids)
        floor = self.config.greso_explore_floor
        p = np.zeros(len(ids))
        kind: list[str | None] = [None] * len(ids)
        for i in range(len(ids)):
            if ze[i] > 0:
                p[i], kind[i] = 1.0 - max(self.p_easy ** int(ze[i]), floor), "all_correct"
            elif zh[i] > 0:
                p[i], kind[i] = 1.0 - max(self.p_hard ** int(zh[i]), floor), "all_wrong"
        return p, kind

    def decide(self, ids, uniforms) -> tuple[np.ndarray, list[str | None]]:
        """Skip flags, bool (M,): u_i < P(skip)_i; and the predicted kinds (:meth:`skip_probability`).

        Parameters
        ----------
        ids : sequence of str, length M
        uniforms : array-like of float in [0, 1), shape (M,)

        Raises
        ------
        ValueError
            ``uniforms`` of another length than ``ids``.
        """
        u = np.asarray(uniforms, dtype=np.float64).reshape(-1)
        if u.size != len(ids):
            raise ValueError(f"decide: {len(ids)} ids but {u.size} uniforms")
        p, kind = self.skip_probability(ids)
        return u < p, kind

    def observe(self, ids, kinds) -> None:
        """Record rolled-out groups (in order) and update each prompt's streaks.

        Parameters
        ----------
        ids : sequence of str, length N
        kinds : sequence of str, length N
            :func:`group_kind` of each group.

        Raises
        ------
        ValueError
            Mismatched lengths or an unknown kind.
        """
        if len(ids) != len(kinds):
            raise ValueError(f"observe: {len(ids)} ids but {len(kinds)} kinds")
        for pid, k in zip(ids, kinds):
            if k not in GROUP_KINDS:
                raise ValueError(f"observe: kind {k!r} is not one of {', '.join(GROUP_KINDS)}")
            ze, zh = self._streaks.get(pid, (0, 0))
            self._seen.append([int(ze), int(zh), GROUP_KINDS.index(k)])
            self._streaks[pid] = [ze + 1, 0] if k == "all_correct" else [0, zh + 1] if k == "all_wrong" else [0, 0]

    def adapt(self, share_all_correct: float, share_all_wrong: float) -> None:
        """GRESO's exploration update (class docstring) from the update's flat shares in [0, 1]."""
        c = self.config
        lo, hi, step, target = c.greso_explore_min, c.greso_explore_max, c.greso_step, c.greso_target_flat
        self.p_easy = max(self.p_easy - step, lo) if share_all_correct >= target / 3 else min(self.p_easy + step, hi)
        self.p_hard = max(self.p_hard - step, lo) if share_all_wrong >= 2 * target / 3 else min(self.p_hard + step, hi)

    def prediction_auc(self, last: int | None = None) -> dict:
        """AUC of the rule's prediction (the streak) for the realized kind of rolled-out groups.

        Scores: z_easy for ``all_correct``, z_hard for ``all_wrong``, z_easy + z_hard for ``flat``
        (P(skip) is increasing in z for p < 1, so this is the AUC of the skip probability without the
        ties the floor and p = 1 add). Only rolled-out groups have an outcome: skipped candidates,
        the ones with the longest streaks, are missing, so the AUC is conditional on rollout.

        Parameters
        ----------
        last : int, optional
            Only the last ``last`` recorded groups (None: the whole run).

        Returns
        -------
        dict
            ``all_correct``, ``all_wrong``, ``flat``: each the
            :func:`~gradprobe.difficulty.evaluate.binary_auc` dict (``auc`` None with a ``reason``
            when one class only).
        """
        from .evaluate import binary_auc

        seen = self._seen if last is None else self._seen[len(self._seen) - last:] if last else []
        a = np.array(seen, dtype=np.int64).reshape(-1, 3)
        ze, zh, k = a[:, 0], a[:, 1], a[:, 2]
        return {"all_correct": binary_auc(k == 0, ze), "all_wrong": binary_auc(k == 1, zh),
                "flat": binary_auc(k <= 1, ze + zh)}

    def state_dict(self) -> dict:
        """Plain containers (a ``weights_only`` checkpoint loads them): p_easy, p_hard, streaks, history."""
        return {"p_easy": self.p_easy, "p_hard": self.p_hard,
                "streaks": {k: list(v) for k, v in self._streaks.items()}, "seen": [list(r) for r in self._seen]}

    def load_state_dict(self, state: dict) -> None:
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self._streaks = {k: [int(v[0]), int(v[1])] for k, v in state["streaks"].items()}
        self._seen = [[int(x) for x in r] for r in state["seen"]]


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
        self.greso = GresoFilter(config) if config.rule == "greso" else None

    def candidates(self, update: int) -> list[int]:
        """Pool indices of update ``update``'s m x B candidates (distinct; at most the pool size)."""
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
            ``dynamic`` and ``greso`` add their group counts; ``greso`` also ``skipped``
            (``skipped_all_correct``, ``skipped_all_wrong``: by the streak that predicted it),
            ``realized_flat_share`` (and per kind) over the rolled-out groups, ``explore_easy`` /
            ``explore_hard`` used and ``*_next`` after the update, and ``prediction_auc`` (this
            update's rolled-out groups) and ``prediction_auc_run`` (all so far).
        """
        before = (ledger.generated_tokens["selection"], ledger.flops.get("selection", 0.0),
                  ledger.device_seconds.get("selection", 0.0))
        if self.config.rule == "dynamic":
            batch, record = self._dynamic(update, ledger)
        elif self.config.rule == "greso":
            batch, record = self._greso(update, ledger)
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

    def _sample_groups(self, problems, desc: str) -> tuple[list, float]:
        """Roll out G completions of each problem and score them (nothing charged yet).

        Returns the entries (problem, prompt ids, samples, scores, tokens, estimated seconds = the
        chunk's wall time split by tokens) and the chunk's wall time in seconds."""
        from ..rollout import score_completions
        from ..tasks.prompts import encode_prompt

        tok = self.policy.tokenizer
        prompt_ids = [list(encode_prompt(tok, p.question)) for p in problems]
        start = time.perf_counter()
        samples = self.sampler.sample(prompt_ids, num_samples=self.group, sampling=self.sampling, desc=desc)
        secs = time.perf_counter() - start
        texts = tok.batch_decode([x.token_ids for x in samples], skip_special_tokens=True)
        scores, _ = score_completions(self.task, texts, [p for p in problems for _ in range(self.group)])
        chunk_tokens = sum(len(x.token_ids) for x in samples)
        entries = []
        for i, p in enumerate(problems):
            sm = samples[i * self.group:(i + 1) * self.group]
            sc = scores[i * self.group:(i + 1) * self.group]
            toks = sum(len(x.token_ids) for x in sm)
            share = toks / chunk_tokens if chunk_tokens else 1 / len(problems)
            entries.append((p, prompt_ids[i], sm, sc, toks, secs * share))
        return entries, secs

    def _charge_and_build(self, kept, dropped, seconds_total: float, ledger):
        """Charge kept groups as training generation and dropped ones as selection; the batch of the kept."""
        from ..ledger import forward_flops_per_token
        from ..rollout import build_batch

        # generation seconds split by tokens: kept groups are training generation, dropped ones the selection's cost
        ledger.add_seconds("generation", sum(e[5] for e in kept))
        ledger.add_seconds("selection", sum(e[5] for e in dropped))
        for p, ids, sm, sc, toks, _ in dropped:
            ctx = len(ids) + toks / max(len(sm), 1) / 2
            ledger.add_generated("selection", toks)
            ledger.add_flops("selection", toks * forward_flops_per_token(self.policy.model, ctx))
        batch = build_batch(self.policy.tokenizer, [e[0] for e in kept], [e[1] for e in kept],
                            [x for e in kept for x in e[2]], group_size=self.group,
                            temperature=self.sampling.temperature, scores=[x for e in kept for x in e[3]])
        batch.metadata.update(sampler=type(self.sampler).__name__, generation_seconds=seconds_total,
                              max_new_tokens=self.sampling.max_new_tokens, category="rollout")
        ledger.add_generated("rollout", batch.generated_tokens)
        return batch

    def _dynamic(self, update: int, ledger):
        cand = self.candidates(update)
        kept, dropped = [], []  # (problem, prompt ids, samples, scores, tokens, estimated seconds)
        drawn = 0
        seconds_total = 0.0
        for lo in range(0, len(cand), self.b):
            if len(kept) >= self.b:
                break
            chunk = [self.pool[i] for i in cand[lo: lo + self.b]]
            entries, secs = self._sample_groups(chunk, "dynamic")
            for entry in entries:
                if _informative(torch.tensor(entry[3], dtype=torch.float64)) and len(kept) < self.b:
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
        batch = self._charge_and_build(kept, dropped, seconds_total, ledger)
        all_scores = np.array([x for e in kept + dropped for x in e[3]], dtype=np.float64)
        finite = all_scores[np.isfinite(all_scores)]
        record = {"rule": "dynamic", "candidates": drawn, "drawn_groups": drawn, "kept_informative": self.b - filled,
                  "filled": filled, "dropped_groups": len(dropped),
                  "drawn_mean_success": float(np.mean(finite == 1.0)) if finite.size else None,
                  "candidates_mean_p_hat": None, "fail_more_often": None,
                  "verdict": "dynamic sampling uses observed rewards, no p_hat", "selected_mean_p_hat": None,
                  "fallback": None}
        return batch, record

    def _greso(self, update: int, ledger):
        """GRESO (:class:`GresoFilter`): skip predicted-flat candidates, then dynamic sampling on the rest.

        Candidates are walked in stream order; the non-skipped ones are rolled out B at a time until B
        informative groups are kept (informative groups beyond B and flat ones are dropped, charged as
        ``selection``). Short of B: the earliest dropped groups fill in (``filled``), and if every
        non-skipped candidate was rolled out and fewer than B groups exist, the earliest skipped
        candidates are rolled out and kept (``unskipped``), so every update trains on B groups."""
        g = self.greso
        cand = self.candidates(update)
        ids = [self.pool[i].id for i in cand]
        start = time.perf_counter()
        rng = np.random.default_rng([self.seed, update, 0x62E50])
        explore = (g.p_easy, g.p_hard)
        skip, predicted = g.decide(ids, rng.random(len(ids)))
        ledger.add_seconds("selection", time.perf_counter() - start)
        queue = [i for i in range(len(cand)) if not skip[i]]
        kept, dropped, rolled = [], [], []  # rolled: (candidate position, entry) in rollout order
        seconds_total = 0.0
        for lo in range(0, len(queue), self.b):
            if len(kept) >= self.b:
                break
            pos = queue[lo: lo + self.b]
            entries, secs = self._sample_groups([self.pool[cand[i]] for i in pos], "greso")
            seconds_total += secs
            for i, entry in zip(pos, entries):
                rolled.append((i, entry))
                if _informative(torch.tensor(entry[3], dtype=torch.float64)) and len(kept) < self.b:
                    kept.append(entry)
                else:
                    dropped.append(entry)
        filled = 0
        while len(kept) < self.b and dropped:
            kept.append(dropped.pop(0))
            filled += 1
        unskipped = 0
        if len(kept) < self.b:  # too few candidates survived the filter to make B groups at all
            pos = [i for i in range(len(cand)) if skip[i]][: self.b - len(kept)]
            entries, secs = self._sample_groups([self.pool[cand[i]] for i in pos], "greso")
            seconds_total += secs
            rolled += list(zip(pos, entries))
            kept += entries
            unskipped = len(pos)
        if filled or unskipped:
            log.info("greso, update %d: %d of %d candidates skipped; %d dropped groups filled in, %d skipped "
                     "candidates rolled out to make %d groups", update, int(skip.sum()), len(cand), filled,
                     unskipped, self.b)
        batch = self._charge_and_build(kept, dropped, seconds_total, ledger)
        start = time.perf_counter()
        kinds = [group_kind(e[3]) for _, e in rolled]
        g.observe([ids[i] for i, _ in rolled], kinds)
        shares = {k: kinds.count(k) / len(kinds) for k in GROUP_KINDS}
        epoch = update * self.config.candidates_multiplier * self.b // len(self.pool)
        if epoch > 0:
            g.adapt(shares["all_correct"], shares["all_wrong"])
        ledger.add_seconds("selection", time.perf_counter() - start)
        # measurement only (not part of the rule, not charged): how well the streaks predicted flat groups
        all_scores = np.array([x for _, e in rolled for x in e[3]], dtype=np.float64)
        finite = all_scores[np.isfinite(all_scores)]
        record = {"rule": "greso", "candidates": len(cand), "skipped": int(skip.sum()),
                  "skipped_all_correct": sum(bool(s) and k == "all_correct" for s, k in zip(skip, predicted)),
                  "skipped_all_wrong": sum(bool(s) and k == "all_wrong" for s, k in zip(skip, predicted)),
                  "predicted_flat": sum(k is not None for k in predicted),
                  "drawn_groups": len(rolled),
                  "kept_informative": sum(_informative(torch.tensor(e[3], dtype=torch.float64)) for e in kept),
                  "filled": filled, "unskipped": unskipped, "dropped_groups": len(dropped),
                  "realized_flat_share": shares["all_correct"] + shares["all_wrong"],
                  "realized_all_correct_share": shares["all_correct"], "realized_all_wrong_share": shares["all_wrong"],
                  "explore_easy": explore[0], "explore_hard": explore[1],
                  "explore_easy_next": g.p_easy, "explore_hard_next": g.p_hard, "adapted": epoch > 0,
                  "prediction_auc": g.prediction_auc(last=len(rolled)), "prediction_auc_run": g.prediction_auc(),
                  "drawn_mean_success": float(np.mean(finite == 1.0)) if finite.size else None,
                  "candidates_mean_p_hat": None, "fail_more_often": None,
                  "verdict": "GRESO skips on each prompt's history of zero-variance groups, no p_hat",
                  "selected_mean_p_hat": None, "fallback": None}
        return batch, record

    def state_dict(self) -> dict:
        """Settings, estimator and (``greso``) the filter's streaks and exploration probabilities."""
        return {"config": self.config.to_dict(), "estimator": self.estimator.state_dict(), "warned": self._warned,
                **({"greso": self.greso.state_dict()} if self.greso is not None else {})}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`.

        Raises
        ------
        ValueError
            The checkpoint's selection settings differ from the run's, or a ``greso`` checkpoint
            lacks the filter's state.
        """
        if state["config"] != self.config.to_dict():
            raise ValueError(f"checkpoint selector config {state['config']} differs from the run's {self.config.to_dict()}")
        if self.greso is not None and "greso" not in state:
            raise ValueError("checkpoint selector state has no 'greso' entry (streaks, p_easy, p_hard) for a greso run")
        self.estimator.load_state_dict(state["estimator"])
        self._warned = bool(state.get("warned", False))
        if self.greso is not None:
            self.greso.load_state_dict(state["greso"])


def make_selector(selection: dict | None, **kwargs) -> PromptSelector | None:
    """A :class:`PromptSelector` from a run's ``selection`` dict (:func:`parse_selection`), or None."""
    if not selection:
        return None
    return PromptSelector(SelectionConfig(**selection), **kwargs)
