"""The tables of a plan as frozen dataclasses: one per section, the arm, the hypothesis, and the
resolved :class:`RunConfig` of one training run (DESIGN.md, "Matched-compute training").

Torch-free: a plan is read and checked without torch. Reading a TOML table into these classes is
:mod:`gradprobe.training.coerce`; the checks of values across sections are
:mod:`gradprobe.training.plan_checks` and :mod:`gradprobe.training.budget`; the plan file itself is
:mod:`gradprobe.training.plan` (which re-exports every name here).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from ..config import MCConfig, SamplingConfig

__all__ = ["BUDGET_KINDS", "BUDGET_FLAGS", "AXES", "TEST_NAMES", "TEST_ALIASES", "TESTS", "POWER_ALTERNATIVES",
           "METRICS", "ALTERNATIVES", "OPTIMIZERS", "SAMPLED_AT", "INITIAL", "SECTIONS", "PlanError", "ModelSpec",
           "TaskSpec", "HeldoutSpec", "TrainConfig", "BudgetSpec", "EvalSpec", "ProbeSpec", "ArmSpec", "Hypothesis",
           "RunConfig", "PowerSpec", "run_config_from_dict"]

BUDGET_KINDS = ("generated_tokens", "device_seconds", "flops", "updates")
BUDGET_FLAGS = {"generated_tokens": "--budget-tokens", "device_seconds": "--budget-seconds",
                "flops": "--budget-flops", "updates": "--updates"}
"""The ``gradprobe train`` flag that shortens each budget kind (:func:`gradprobe.training.budget.shorten_budget`)."""
AXES = ("updates", "generated_tokens", "flops", "device_seconds")
"""The compute axes a run records (``runs.csv`` columns ``update``, ``generated_tokens``, ``flops``,
``device_seconds``): one vocabulary for hypotheses' ``at``, eval schedules and the analysis."""
TEST_NAMES = ("sign_flip", "paired_t")
"""The hypothesis tests a plan may name: the keys of :data:`gradprobe.study.hypothesis_tests.HYPOTHESIS_TESTS`
(kept here, torch-free and below the study, for the plan checks; a test keeps the two equal)."""
TEST_ALIASES = {"paired_bootstrap": "sign_flip"}
"""Earlier test names -> the test they are read as (each test's ``aliases`` there)."""
TESTS = (*TEST_NAMES, *TEST_ALIASES)
"""Every ``test = "..."`` a plan may write: :data:`TEST_NAMES` then :data:`TEST_ALIASES`."""
POWER_ALTERNATIVES = ("two-sided", "larger", "smaller")
METRICS = ("greedy_accuracy", "sampled_accuracy")
ALTERNATIVES = ("greater", "less", "two-sided")
OPTIMIZERS = ("adamw",)
SAMPLED_AT = ("all", "ends")
INITIAL = "initial"  # pseudo-arm of a hypothesis: the policy before any update (eval at update 0)


class PlanError(ValueError):
    """A plan file cannot be used; the message names the key (full path) and the valid choices."""


@dataclass(frozen=True)
class ModelSpec:
    """``[model]``: what :func:`gradprobe.models.load_policy` loads.

    ``name`` is an alias (``tiny`` = the warm-started tier of :mod:`gradprobe.tiers`,
    ``tiny-qwen2``, ``smollm2-135m``...), a folder, a ``.gguf`` file or a hub id.
    ``gradient_checkpointing``: recompute each layer's activations in the backward pass
    instead of storing them (``model.gradient_checkpointing_enable()``; Chen et al. 2016),
    for bf16 training of 0.5B-1.5B models with long completions: activation memory drops
    from O(layers) to O(1) per token for about one extra forward per update; results
    do not change.
    """

    name: str
    dtype: str = "float32"
    device: str = "cpu"
    gradient_checkpointing: bool = False


@dataclass(frozen=True)
class TaskSpec:
    """``[task]``: ``name`` for :func:`gradprobe.tasks.load_task`, ``config`` its keyword
    arguments (validated by the task when a run loads it), ``pool`` the number of training
    prompts updates draw from (each epoch in a fresh order per seed)."""

    name: str
    pool: int = 4096
    config: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HeldoutSpec:
    """``[heldout]``: ``prompts`` held-out problems (the same for every arm and seed) and the
    data ``seed`` of both the held-out set and the training pool."""

    prompts: int = 1000
    seed: int = 0


@dataclass(frozen=True)
class TrainConfig:
    """``[train]``: settings of every update (an arm may override any of them).

    Attributes
    ----------
    prompts_per_update, group : int
        B and G: an update samples B prompts x G completions.
    lr : float
        Peak learning rate (an arm's ``lr_scale`` multiplies it).
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        See :mod:`gradprobe.grpo.losses` (``LOSS_TYPES``, the list this is validated against).
    optimizer : {"adamw"}
    weight_decay : float
    betas : (float, float)
    eps : float
    max_grad_norm : float
        Global clip (0 = off).
    micro_batch_size : int
        Rows per forward/backward; results do not depend on it.
    warmup : int
        Updates of linear learning-rate warmup (0 = constant from the first update).
    clip_low, clip_high : float
        PPO ratio clip.
    checkpoint_every : int
        K: a checkpoint every K updates and at the end (does not change results).
    iterations : int
        mu: optimizer steps taken on each rollout batch (TRL ``GRPOConfig.num_iterations``, verl
        ``ppo_epochs``; GRPO, Shao et al. 2024, Algorithm 1). With mu = 1 every step is on-policy: the
        importance ratio is 1 and the loss types differ only in how they normalise (gspo's gradient is
        grpo's, cispo's and bnpo's are dapo's). With mu > 1 the log-probabilities of the policy that
        sampled the batch (pi_old, one extra no-grad forward, charged to training) enter every step
        after the first, where the clip and each loss type's importance weight act. One update is one
        batch: budgets, evals and warmup count batches; training FLOPs count mu steps.
    stats_every : int
        KL to the initial policy and entropy (``kl_init``, ``entropy`` in ``metrics.jsonl``) every
        K updates (1 = every update; 0 = never, and no copy of the initial model is kept). Each costs
        one no-grad forward of the initial model, about a third of an update's forward + backward
        (measured on the tiny tier: 0.245 s against a 1.22 s update); it does not change training.
        Updates without them log ``null``.
    save_weights_at : tuple of int
        Updates after which the policy's weights are kept in ``RUN/weights/update-UUUUUU.safetensors``
        (weights only, a few MB on the tiny tier; the resume checkpoints keep only the latest), so that
        ``gradprobe probe --checkpoints RUN`` can probe a reference run along its trajectory
        (:func:`gradprobe.probe.checkpoints.checkpoint_weights`). Updates the budget never reaches write
        nothing (the run then ends with one warning naming them; a plan whose ``[budget] updates`` is
        below one of them is refused when read); empty (the default) keeps none. Does not change results.
    """

    prompts_per_update: int = 16
    group: int = 8
    lr: float = 1e-4
    loss_type: str = "grpo"
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float = 1.0
    micro_batch_size: int = 16
    warmup: int = 0
    clip_low: float = 0.2
    clip_high: float = 0.2
    checkpoint_every: int = 25
    iterations: int = 1
    stats_every: int = 1
    save_weights_at: tuple[int, ...] = ()


@dataclass(frozen=True)
class BudgetSpec:
    """``[budget]``: a run stops before the first update that would start with any budget
    spent. ``generated_tokens`` counts charged tokens (rollout + continuation + selection,
    never eval); ``device_seconds`` the ledger's training seconds (generation + update);
    ``flops`` generation + training FLOPs (deterministic, unlike seconds); ``updates`` a
    count of updates."""

    generated_tokens: int | None = None
    device_seconds: float | None = None
    flops: float | None = None
    updates: int | None = None

    def given(self) -> dict[str, float]:
        """The budgets that are set, by kind."""
        return {k: getattr(self, k) for k in BUDGET_KINDS if getattr(self, k) is not None}


@dataclass(frozen=True)
class EvalSpec:
    """``[eval]``: when a run measures held-out accuracy, and how.

    A run evaluates at update 0, at every update in ``at_updates``, at the first update at or
    after each fraction in ``at_fractions`` of each budget the plan sets (generated tokens,
    FLOPs, device-seconds, updates), every ``every_tokens`` charged generated tokens (0 = off),
    and at the end. So the schedule promises, on every axis, evals no further apart than the
    listed points (plus the one update a run needs to cross a point): the analysis reads no
    matched value across a wider gap (:func:`gradprobe.study.reading.promised_gap`).

    Attributes
    ----------
    every_tokens : int
        Charged generated tokens between evals (0 = none besides the listed points).
    at_updates : tuple of int
        Update counts to evaluate at (e.g. ``[2, 5, 10, 20, 40]``, log-spaced early).
    at_fractions : tuple of float
        Fractions in (0, 1] of each set budget to evaluate at (e.g. ``[0.1, 0.25, 0.5, 1.0]``).
    greedy, sampled : bool
        Argmax decoding; ``samples`` completions per prompt at the training sampling settings.
    samples : int
        Sampled completions per held-out prompt.
    sampled_at : str
        ``"all"`` (every eval) or ``"ends"`` (sampled accuracy only at update 0 and at the end,
        which makes the intermediate evals about half as expensive).
    """

    every_tokens: int = 0
    at_updates: tuple[int, ...] = ()
    at_fractions: tuple[float, ...] = ()
    greedy: bool = True
    sampled: bool = True
    samples: int = 1
    sampled_at: str = "all"

    def promised_points(self, budget: "BudgetSpec") -> dict[str, list[float]]:
        """The eval points the schedule promises on each axis, sorted (0 and the budget included).

        Parameters
        ----------
        budget : BudgetSpec
            The plan's budgets (fractions are of these).

        Returns
        -------
        dict
            ``{axis: [points]}`` for the axes in :data:`BUDGET_KINDS`: ``updates`` always
            (0 and ``at_updates``, plus fractions of an update budget), every other axis only
            when it has promised points besides 0 (a set budget, or ``every_tokens``).
        """
        out: dict[str, list[float]] = {}
        for kind in BUDGET_KINDS:
            limit = getattr(budget, kind)
            pts = {0.0}
            if kind == "updates":
                pts |= {float(u) for u in self.at_updates}
            if limit is not None:
                pts |= {f * float(limit) for f in self.at_fractions} | {float(limit)}
            if kind == "generated_tokens" and self.every_tokens:
                top = float(limit) if limit is not None else None
                if top is not None:
                    pts |= {float(k * self.every_tokens) for k in range(1, int(top // self.every_tokens) + 1)}
            if kind == "updates" or len(pts) > 1:
                out[kind] = sorted(pts)
        return out


@dataclass(frozen=True)
class ProbeSpec:
    """``[probe]``: settings of the per-token gradient probe a study runs on the initial policy
    (DESIGN.md, "Probe"); independent of the learning rate, so one probe serves every arm.

    Attributes
    ----------
    prompts, group : int
        Training prompts of the probe batch and completions per prompt (rollouts).
    heldout_prompts, heldout_group : int
        Held-out prompts the alignment is measured on, and completions per held-out prompt.
    continuations : int
        K, Monte Carlo continuations per step boundary for the MC rewards.
    """

    prompts: int = 16
    group: int = 8
    heldout_prompts: int = 16
    heldout_group: int = 16
    continuations: int = 4


@dataclass(frozen=True)
class ArmSpec:
    """``[arms.NAME]``: a registered ``reward``, ``lr_scale`` (grpo_2xlr: 2.0), and overrides
    of ``[train]`` keys (``train``) and of ``[mc]`` keys (``mc``). ``selection``: the prompt
    selection settings (:func:`gradprobe.difficulty.config.parse_selection`; empty = the plain
    prompt stream). ``guidance``: off-context guidance settings (:class:`gradprobe.rollout.guided.GuidanceConfig`
    fields; empty = none)."""

    name: str
    reward: str
    lr_scale: float = 1.0
    description: str = ""
    train: dict = field(default_factory=dict)
    mc: dict = field(default_factory=dict)
    selection: dict = field(default_factory=dict)
    guidance: dict = field(default_factory=dict)  # off-context guidance (gradprobe.rollout.guided); empty = none


@dataclass(frozen=True)
class Hypothesis:
    """``[[hypotheses]]``: a preregistered comparison.

    ``arms`` = (treatment, control); a control of ``"initial"`` is the policy before any
    update. ``at``: the compute axis of the comparison (an :data:`AXES` entry);
    ``budget``: the point on it (default: the plan's budget of that kind); the eval schedule
    must promise an eval there (:meth:`EvalSpec.promised_points`). ``metric`` in
    :data:`METRICS` (fractions in [0, 1]); ``min_effect`` in accuracy points; ``test`` in
    :data:`TESTS`: ``sign_flip`` (``paired_bootstrap`` is its earlier name), the exact
    sign-flip test over seeds (its floor is 2^-seeds: it cannot reject at 0.05 with fewer than
    5 seeds), or ``paired_t``, the paired Student-t test (normal per-seed differences assumed;
    the exact sign-flip p is reported beside it); both with a Student-t interval and
    Holm-corrected across the plan's hypotheses at level ``alpha`` (:mod:`gradprobe.study.stats`).
    """

    name: str
    statement: str
    test: str
    arms: tuple[str, ...]
    at: str = "generated_tokens"
    budget: float | None = None
    metric: str = "greedy_accuracy"
    alpha: float = 0.05
    min_effect: float = 0.0
    alternative: str = "greater"


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines ONE training run (saved as ``config.json``'s ``run``).

    ``train.lr`` is already the arm's effective learning rate (plan or arm ``lr`` times
    ``lr_scale``).
    """

    arm: str
    reward: str
    seed: int
    model: ModelSpec
    task: TaskSpec
    heldout: HeldoutSpec
    sampling: SamplingConfig
    mc: MCConfig
    train: TrainConfig
    budget: BudgetSpec
    eval: EvalSpec
    lr_scale: float = 1.0
    plan_sha256: str = ""
    plan_name: str = ""
    selection: dict | None = None  # prompt selection (gradprobe.difficulty.select); None = plain stream
    guidance: dict | None = None  # off-context guidance (gradprobe.rollout.guided.GuidanceConfig); None = none
    budget_override: dict | None = None  # the run was shortened from the command line (shorten_budget); None = plan's

    def to_dict(self) -> dict:
        """JSON-ready dict (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


@dataclass(frozen=True)
class PowerSpec:
    """``[power]``: the smallest effect the study must detect, and where its variance comes from.

    Attributes
    ----------
    min_effect : float
        Smallest paired difference (accuracy points, > 0) to detect.
    pilot : str
        A finished study folder whose per-seed differences (and per-item results) give the
        variance; relative paths are tried against the plan file's folder, then the working
        directory. Empty: give it with ``gradprobe study --power PLAN --pilot DIR``.
    power, alpha : float
        Target power (default 0.8) and level (default 0.05) of a paired t-test over seeds
        (``statsmodels.stats.power.TTestPower``).
    alternative : {"two-sided", "larger", "smaller"}
    """

    min_effect: float
    pilot: str = ""
    power: float = 0.8
    alpha: float = 0.05
    alternative: str = "two-sided"



#: The sections of a plan that hold one dataclass each, section name -> class (a run's config holds them all).
SECTIONS = {"model": ModelSpec, "task": TaskSpec, "heldout": HeldoutSpec, "sampling": SamplingConfig,
            "mc": MCConfig, "train": TrainConfig, "budget": BudgetSpec, "eval": EvalSpec}


def run_config_from_dict(d: dict) -> RunConfig:
    """Inverse of :meth:`RunConfig.to_dict` (reads ``config.json``'s ``run``)."""
    d = dict(d)
    for k, cls in SECTIONS.items():
        d[k] = cls(**{f: tuple(v) if isinstance(v, list) else v for f, v in d[k].items()})
    return RunConfig(**d)
