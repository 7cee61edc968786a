"""Prompt selection inside a training run: the ``selection`` key of a plan's arm.

Rules (:data:`SELECTION_RULES`, the names of the registry
:data:`~gradprobe.difficulty.config.SELECTION_RULE_CLASSES`): each a
:class:`~gradprobe.difficulty.select_common.SelectionRule` that the :class:`PromptSelector` looks up
once by name and that returns the update's scored rollout batch of B groups and a record for the
metrics line:

``plain``    the plain prompt stream of an arm without ``selection``: the next B prompts of the pool's
             per-seed order, rolled out by the run's collection (plain or guided); no candidate is
             dropped, nothing is charged to ``selection``, no record, no state (the metrics line and
             the checkpoint are those of a run without a selector).
``half     (the ``select_half`` arm of DESIGN.md) draw m x B candidates (m =
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

Modules: :mod:`~gradprobe.difficulty.select_plain`, :mod:`~gradprobe.difficulty.select_estimated`
(``half``, ``random``),
:mod:`~gradprobe.difficulty.select_dynamic`, :mod:`~gradprobe.difficulty.select_greso` with the filter in
:mod:`~gradprobe.difficulty.greso`, and the shared rollout steps in
:mod:`~gradprobe.difficulty.select_common`.

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

import importlib
import warnings

from ..streams import pool_indices
from .config import PLAIN, SELECTION_KEYS, SELECTION_RULE_CLASSES, SELECTION_RULES, SelectionConfig, parse_selection
from ..rollout import collect_rollouts
from .estimator import DifficultyEstimator, check_unique_ids
from .features import DEFAULT_METADATA_KEYS
from .greso import GROUP_KINDS, GresoFilter, group_kind
from .select_common import SelectionRule, group_outcomes

__all__ = ["SELECTION_RULES", "SELECTION_KEYS", "SelectionConfig", "parse_selection", "PromptSelector",
           "make_selector", "rule_class", "group_outcomes", "group_kind", "GresoFilter", "GROUP_KINDS",
           "SelectionPoolWarning"]


def rule_class(name: str) -> type[SelectionRule]:
    """The :class:`SelectionRule` subclass registered as ``name`` in
    :data:`~gradprobe.difficulty.config.SELECTION_RULE_CLASSES`.

    Raises
    ------
    ValueError
        ``name`` is not a registered rule; the message lists the valid ones.
    """
    if name not in SELECTION_RULE_CLASSES:
        raise ValueError(f"selection {name!r} is not one of {', '.join(SELECTION_RULE_CLASSES)}")
    module, cls = SELECTION_RULE_CLASSES[name].split(":")
    return getattr(importlib.import_module(module), cls)


class SelectionPoolWarning(UserWarning):
    """A selection rule asks for more candidates per update (m x B) than the prompt pool holds: each update draws
    the whole pool, so the arm's effective multiplier is smaller than its plan's."""

class PromptSelector:
    """Chooses (and rolls out) each update's B prompts by a :class:`SelectionConfig` rule.

    Holds what every rule reads (policy, task, pool, sampler, sampling, ``group`` = G, ``b`` = B,
    seed, ``collect``, the difficulty estimator) and the rule object, looked up once by ``config.rule``
    (:func:`rule_class`). Under ``plain`` (a rule that draws no candidates) there is no estimator
    (``estimator`` is None), the pool is not checked here and the selector has no state.

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
    collect : callable
        The run's rollout collection, :func:`gradprobe.rollout.collect_rollouts` or the guided one
        (``plain`` rolls out with it).

    Raises
    ------
    ValueError
        An empty pool, a pool smaller than B (rules that draw candidates), B < 1, or an unregistered rule.
    DuplicatePromptError
        Repeated prompt ids in the pool.
    """

    def __init__(self, config: SelectionConfig, *, policy, task, pool, sampler, sampling, group_size: int,
                 prompts_per_update: int, seed: int, metadata_keys=DEFAULT_METADATA_KEYS, collect=collect_rollouts):
        if prompts_per_update < 1:
            raise ValueError(f"prompts_per_update must be >= 1, got {prompts_per_update}")
        rule = rule_class(config.rule)
        self.config, self.policy, self.task, self.pool = config, policy, task, list(pool)
        self.sampler, self.sampling, self.group, self.b = sampler, sampling, group_size, prompts_per_update
        self.seed, self.metadata_keys, self.collect, self.estimator = seed, tuple(metadata_keys), collect, None
        self._warned = False
        if rule.draws_candidates:
            self._check_pool()
            self.estimator = DifficultyEstimator(config.estimator_config())
            import sklearn.linear_model  # noqa: F401  (import once here, not inside the first charged fit)
        self.rule: SelectionRule = rule(self)

    def _check_pool(self) -> None:
        pool, prompts_per_update = self.pool, self.b
        if not pool:
            raise ValueError("prompt selection needs a non-empty pool (task.pool = 0?)")
        if len(pool) < prompts_per_update:
            raise ValueError(f"the pool has {len(pool)} prompts, fewer than prompts_per_update = {prompts_per_update}; "
                             f"raise task.pool or lower prompts_per_update")
        check_unique_ids([p.id for p in pool])
        wanted = self.config.candidates_multiplier * prompts_per_update
        if wanted > len(pool):  # candidates() draws at most the pool: the arm would run another m than its plan's
            warnings.warn(f"selection candidates_multiplier = {self.config.candidates_multiplier} asks for m x B = "
                          f"{wanted} candidates per update, more than the pool's {len(pool)} prompts: every update "
                          f"draws all {len(pool)} (m = {len(pool) / prompts_per_update:.3g} in effect); raise "
                          "task.pool or lower candidates_multiplier", SelectionPoolWarning, stacklevel=2)

    @property
    def greso(self) -> GresoFilter | None:
        """The ``greso`` rule's filter (None under any other rule)."""
        return getattr(self.rule, "filter", None)

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
            update's rolled-out groups) and ``prediction_auc_run`` (all so far). None under ``plain``.
        """
        if not self.rule.draws_candidates:
            return self.rule.next_batch(update, ledger)
        before = (ledger.generated_tokens["selection"], ledger.flops.get("selection", 0.0),
                  ledger.device_seconds.get("selection", 0.0))
        batch, record = self.rule.next_batch(update, ledger)
        record["selection_tokens"] = ledger.generated_tokens["selection"] - before[0]
        record["selection_flops"] = ledger.flops.get("selection", 0.0) - before[1]
        record["selection_seconds"] = ledger.device_seconds.get("selection", 0.0) - before[2]
        return batch, record

    def state_dict(self) -> dict | None:
        """Settings, estimator and the rule's own state (``greso``: the filter's streaks and exploration
        probabilities); None under ``plain``."""
        if not self.rule.draws_candidates:
            return None
        return {"config": self.config.to_dict(), "estimator": self.estimator.state_dict(), "warned": self._warned,
                **self.rule.state_dict()}

    def load_state_dict(self, state: dict | None) -> None:
        """Continue from :meth:`state_dict` (None: a run on the plain prompt stream).

        Raises
        ------
        ValueError
            The checkpoint's selection settings differ from the run's (one of them without selection
            included), or a ``greso`` checkpoint lacks the filter's state.
        """
        if (state is None) == self.rule.draws_candidates:
            theirs = "no selection" if state is None else f"selection {state['config']}"
            ours = self.config.to_dict() if self.rule.draws_candidates else "none"
            raise ValueError(f"the checkpoint was written with {theirs}, but the run's selection is {ours}; "
                             f"resume with the plan the run started with, or start it in a new folder")
        if state is None:
            return
        if state["config"] != self.config.to_dict():
            raise ValueError(f"checkpoint selector config {state['config']} differs from the run's "
                             f"{self.config.to_dict()}")
        self.rule.load_state_dict(state)
        self.estimator.load_state_dict(state["estimator"])
        self._warned = bool(state.get("warned", False))


def make_selector(selection: dict | None, **kwargs) -> PromptSelector:
    """A :class:`PromptSelector` from a run's ``selection`` dict (:func:`parse_selection`); no
    ``selection`` (None or {}) is the ``plain`` rule, the plain prompt stream. ``kwargs``: those of
    :class:`PromptSelector`."""
    return PromptSelector(SelectionConfig(**selection) if selection else SelectionConfig(rule=PLAIN), **kwargs)
