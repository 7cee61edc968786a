"""The plan of a matched-compute study: one TOML file, validated once, frozen by its sha256.

A plan names the model, task, held-out set, arms, seeds, budgets, eval schedule and the
hypotheses with their test (DESIGN.md, "Matched-compute training"). :func:`load_plan`
reads it with :mod:`tomllib`, refuses every key it does not know (the error names the key's
full path and lists the valid keys), checks that every arm's reward is registered and that
every budget buys at least one update, and records the sha256 of the file's bytes.
:meth:`Plan.arm` resolves one arm (plan defaults + the arm's overrides) into the
:class:`RunConfig` of one training run.

Layout (every section optional except ``[model]``, ``[task]``, ``[budget]`` and the arms)::

    name = "tiny"                 # optional label
    seeds = [0, 1, 2, 3]
    [model]     name, dtype, device
    [task]      name, pool (training-pool size), [task.config] (the task's own keys)
    [heldout]   prompts, seed (data seed of the held-out set AND the training pool, so
                held-out questions are deduplicated against the pool)
    [sampling]  SamplingConfig fields
    [mc]        MCConfig fields
    [train]     TrainConfig fields
    [budget]    generated_tokens, device_seconds, flops, updates (at least one)
    [eval]      every_tokens, at_updates, at_fractions, greedy, sampled, samples, sampled_at
    [probe]     prompts, group, heldout_prompts, heldout_group, continuations (the gradient
                probe run beside the study; not part of any training run's config)
    [arms.NAME] reward, lr_scale, description, any [train] key, [arms.NAME.mc],
                prompt selection: selection ("half" | "random" | "dynamic"), candidates_multiplier,
                prior_strength, decay, feature_batch_size (gradprobe.difficulty.select)
                off-context guidance: guidance = {fraction, prefix, cap} (gradprobe.rollout.guided)
    [power]     min_effect, pilot, power, alpha, alternative (``gradprobe study --power PLAN``)
    [[hypotheses]] name, statement, test, arms, at, budget, metric, alpha, min_effect, alternative
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import MCConfig, SamplingConfig

BUDGET_KINDS = ("generated_tokens", "device_seconds", "flops", "updates")
BUDGET_FLAGS = {"generated_tokens": "--budget-tokens", "device_seconds": "--budget-seconds",
                "flops": "--budget-flops", "updates": "--updates"}
"""The ``gradprobe train`` flag that shortens each budget kind (:func:`shorten_budget`)."""
AXES = ("updates", "generated_tokens", "flops", "device_seconds")
"""The compute axes a run records (``runs.csv`` columns ``update``, ``generated_tokens``, ``flops``,
``device_seconds``): one vocabulary for hypotheses' ``at``, eval schedules and the analysis."""
TESTS = ("sign_flip", "paired_t", "paired_bootstrap")  # paired_bootstrap: the earlier name, read as sign_flip
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


@dataclass(frozen=True)
class Plan:
    """A validated plan (see the module docstring); ``sha256`` is of the file's bytes."""

    path: str
    sha256: str
    name: str
    description: str
    model: ModelSpec
    task: TaskSpec
    heldout: HeldoutSpec
    sampling: SamplingConfig
    mc: MCConfig
    train: TrainConfig
    budget: BudgetSpec
    eval: EvalSpec
    arms: dict[str, ArmSpec]
    seeds: tuple[int, ...]
    hypotheses: tuple[Hypothesis, ...] = ()
    probe: ProbeSpec = field(default_factory=ProbeSpec)
    power: PowerSpec | None = None

    @property
    def arm_names(self) -> list[str]:
        return list(self.arms)

    def runs(self) -> list[tuple[str, int]]:
        """Every (arm, seed) of the study, arm-major."""
        return [(a, s) for a in self.arms for s in self.seeds]

    def arm(self, name: str, seed: int | None = None) -> RunConfig:
        """The resolved :class:`RunConfig` of arm ``name`` (seed default: the first of ``seeds``).

        Raises
        ------
        PlanError
            Unknown arm (the message lists the plan's arms).
        """
        if name not in self.arms:
            raise PlanError(f"plan {self.path} has no arm {name!r}; its arms: {', '.join(self.arms)}")
        return _resolve(self, self.arms[name], self.seeds[0] if seed is None else int(seed))

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))


def replicate_plan(plan: Plan, *, seed_offset: int) -> Plan:
    """The same plan on fresh seeds and a fresh held-out set (``gradprobe study --replicate DIR``).

    Parameters
    ----------
    plan : Plan
        The original study's frozen plan.
    seed_offset : int
        Added to every seed and to ``[heldout] seed`` (the data seed of the held-out set and
        the training pool); no new seed may be one of the original seeds.

    Returns
    -------
    Plan
        Seeds ``s + seed_offset``, held-out seed ``heldout.seed + seed_offset``, name
        ``NAME_rep{seed_offset}``, ``sha256`` = SHA-256 of ``"{original sha256}:replicate:{seed_offset}"``
        (a replicate is a new study; the original plan's file is unchanged).

    Raises
    ------
    PlanError
        ``seed_offset`` not a positive integer, or a shifted seed that is one of the original seeds
        (the message names the smallest offset that works).
    """
    if isinstance(seed_offset, bool) or not isinstance(seed_offset, int) or seed_offset < 1:
        raise PlanError(f"seed_offset must be an integer >= 1, got {seed_offset!r}")
    seeds = tuple(s + seed_offset for s in plan.seeds)
    if set(seeds) & set(plan.seeds):
        least = max(plan.seeds) - min(plan.seeds) + 1
        raise PlanError(f"seed_offset {seed_offset} reuses seeds {sorted(set(seeds) & set(plan.seeds))} of the "
                        f"original study; a replicate needs fresh seeds: use seed_offset >= {least}")
    sha = hashlib.sha256(f"{plan.sha256}:replicate:{seed_offset}".encode()).hexdigest()
    heldout = dataclasses.replace(plan.heldout, seed=plan.heldout.seed + seed_offset)
    return dataclasses.replace(plan, seeds=seeds, heldout=heldout, sha256=sha, name=f"{plan.name}_rep{seed_offset}")


# ----------------------------------------------------------------------------- parsing

_SECTIONS = {"model": ModelSpec, "task": TaskSpec, "heldout": HeldoutSpec, "sampling": SamplingConfig,
             "mc": MCConfig, "train": TrainConfig, "budget": BudgetSpec, "eval": EvalSpec}
_TOP_LEVEL = ("name", "description", "seeds", *_SECTIONS, "probe", "power", "arms", "hypotheses")
_REQUIRED = ("model", "task", "budget", "arms")
_ARM_OWN = ("reward", "lr_scale", "description", "mc")


def _fields(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a table"}.get(
        tp, str(tp).replace("typing.", ""))


def _coerce(value, tp, where: str):
    """``value`` as type ``tp`` (int, float, str, bool, dict, tuple[...], X | None)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(value, args[0], where)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise PlanError(f"{where} must be a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise PlanError(f"{where} must be a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    ok = {int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          str: isinstance(value, str), bool: isinstance(value, bool), dict: isinstance(value, dict)}.get(tp)
    if ok is None:
        raise TypeError(f"plan schema: unsupported type {tp} at {where}")
    if not ok:
        raise PlanError(f"{where} must be {_type_name(tp)}, got {value!r}")
    return float(value) if tp is float else value


def _check_keys(table: dict, valid, where: str, extra_note: str = "") -> None:
    for key in table:
        if key not in valid:
            label = f"{where}.{key}" if where else key
            section = f"[{where}]" if where else "the top level"
            raise PlanError(f"unknown key {label!r}; valid keys in {section}: {', '.join(valid)}{extra_note}")


def _build(cls, table: dict, where: str):
    """Instance of dataclass ``cls`` from a TOML table, every key checked and coerced."""
    if not isinstance(table, dict):
        raise PlanError(f"[{where}] must be a table, got {table!r}")
    hints = _fields(cls)
    _check_keys(table, list(hints), where)
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in table.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in kwargs
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        raise PlanError(f"[{where}] needs the key(s) {', '.join(missing)}") from e
    except ValueError as e:
        raise PlanError(f"[{where}]: {e}") from e


def _positive(value, where: str, *, allow_zero: bool = False) -> None:
    if value is not None and not (value > 0 or (allow_zero and value == 0)):
        raise PlanError(f"{where} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _check_train(t: TrainConfig, where: str) -> None:
    from ..grpo.losses import LOSS_TYPES

    for k in ("prompts_per_update", "lr", "micro_batch_size", "checkpoint_every", "eps", "iterations"):
        _positive(getattr(t, k), f"{where}.{k}")
    if t.group < 2:
        raise PlanError(f"{where}.group must be >= 2 (group-relative advantages need two completions), got {t.group}")
    for k in ("weight_decay", "max_grad_norm", "warmup", "clip_low", "clip_high", "stats_every"):
        _positive(getattr(t, k), f"{where}.{k}", allow_zero=True)
    if t.loss_type not in LOSS_TYPES:
        raise PlanError(f"{where}.loss_type {t.loss_type!r} is not one of {', '.join(sorted(LOSS_TYPES))}")
    if t.optimizer not in OPTIMIZERS:
        raise PlanError(f"{where}.optimizer {t.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    if not all(0 <= b < 1 for b in t.betas):
        raise PlanError(f"{where}.betas must lie in [0, 1), got {list(t.betas)}")


def _parse_arm(name: str, table: dict, base: TrainConfig, mc: MCConfig) -> ArmSpec:
    from ..rewards import UnknownRewardError, get_reward

    where = f"arms.{name}"
    if not isinstance(table, dict):
        raise PlanError(f"[{where}] must be a table, got {table!r}")
    train_keys = _fields(TrainConfig)
    from ..difficulty.config import SELECTION_KEYS, parse_selection

    for key in table:
        if key not in _ARM_OWN and key not in train_keys and key not in SELECTION_KEYS and key != "guidance":
            raise PlanError(f"unknown key {where + '.' + key!r}; valid keys in [{where}]: "
                            f"{', '.join(_ARM_OWN)}, or any [train] key: {', '.join(train_keys)}; "
                            f"prompt selection: {', '.join(SELECTION_KEYS)}; off-context guidance: guidance")
    if "reward" not in table:
        raise PlanError(f"[{where}] needs a reward (a registered reward name, e.g. outcome)")
    reward = _coerce(table["reward"], str, f"{where}.reward")
    try:
        get_reward(reward)
    except UnknownRewardError as e:
        raise PlanError(f"{where}.reward: {e}") from None
    train = {k: _coerce(v, train_keys[k], f"{where}.{k}") for k, v in table.items() if k in train_keys}
    _check_train(dataclasses.replace(base, **train), where)
    mc_over = table.get("mc", {})
    if not isinstance(mc_over, dict):
        raise PlanError(f"{where}.mc must be a table of [mc] keys, got {mc_over!r}")
    _build(MCConfig, {**dataclasses.asdict(mc), **mc_over}, f"{where}.mc")  # validates keys and values
    mc_over = {k: _coerce(v, _fields(MCConfig)[k], f"{where}.mc.{k}") for k, v in mc_over.items()}
    lr_scale = _coerce(table.get("lr_scale", 1.0), float, f"{where}.lr_scale")
    _positive(lr_scale, f"{where}.lr_scale")
    try:
        selection = parse_selection(table) or {}
    except ValueError as e:
        raise PlanError(f"[{where}] selection: {e}") from None
    return ArmSpec(name=name, reward=reward, lr_scale=lr_scale,
                   description=_coerce(table.get("description", ""), str, f"{where}.description"),
                   train=train, mc=mc_over, selection=selection, guidance=_parse_guidance(table, where, selection))


def _parse_guidance(table: dict, where: str, selection: dict) -> dict:
    """The arm's ``guidance`` table (:func:`gradprobe.rollout.guided.parse_guidance`), {} when absent."""
    from ..rollout.guided import GuidanceError, parse_guidance

    try:
        guidance = parse_guidance(table.get("guidance"), f"{where}.guidance") or {}
    except GuidanceError as e:
        raise PlanError(str(e)) from None
    if guidance and selection:
        raise PlanError(f"[{where}] sets both guidance and selection; one arm tests one intervention: "
                        f"split it into two arms")
    return guidance


def _check_guided_task(arms: dict[str, ArmSpec], task: TaskSpec) -> None:
    """Refuse a guided arm whose task kind has no reference solution
    (:data:`gradprobe.rollout.guided.REFERENCE_SOLUTIONS`)."""
    from ..tasks.solutions import REFERENCE_SOLUTIONS, has_reference_solution

    for arm in arms.values():
        if arm.guidance and not has_reference_solution(task.name):
            raise PlanError(f"arms.{arm.name}.guidance: task {task.name!r} has no reference solution to take hints "
                            f"from; guidance works with tasks {', '.join(sorted(REFERENCE_SOLUTIONS))}; remove "
                            f"guidance from the arm or use such a task")


def _parse_hypothesis(i: int, table: dict, arms: dict, budget: BudgetSpec, ev: EvalSpec | None = None) -> Hypothesis:
    where = f"hypotheses[{i}]"
    h = _build(Hypothesis, table, where)
    if h.test not in TESTS:
        raise PlanError(f"{where}.test {h.test!r} is not one of {', '.join(TESTS)}")
    if len(h.arms) != 2:
        raise PlanError(f"{where}.arms must name two arms [treatment, control], got {list(h.arms)}")
    for a in h.arms:
        if a not in arms and a != INITIAL:
            raise PlanError(f"{where}.arms: no arm {a!r}; valid: {', '.join([*arms, INITIAL])}")
    if h.at not in AXES:
        raise PlanError(f"{where}.at {h.at!r} is not an axis the runs record; use one of {', '.join(AXES)}")
    if h.budget is None and getattr(budget, h.at) is None:
        raise PlanError(f"{where}: at = {h.at!r} but [budget] sets no {h.at}; give {where}.budget")
    if h.budget is not None and not h.budget > 0:
        raise PlanError(f"{where}.budget must be > 0 (a point on the {h.at} axis after training started), "
                        f"got {h.budget}")
    if ev is not None:
        _check_promised(where, h, budget, ev)
    if h.metric not in METRICS:
        raise PlanError(f"{where}.metric {h.metric!r} is not one of {', '.join(METRICS)}")
    if h.alternative not in ALTERNATIVES:
        raise PlanError(f"{where}.alternative {h.alternative!r} is not one of {', '.join(ALTERNATIVES)}")
    if not 0 < h.alpha < 1:
        raise PlanError(f"{where}.alpha must be in (0, 1), got {h.alpha}")
    return h


def _check_promised(where: str, h: Hypothesis, budget: BudgetSpec, ev: EvalSpec) -> None:
    """Refuse a hypothesis whose point has no promised eval (:meth:`EvalSpec.promised_points`)."""
    point = float(h.budget if h.budget is not None else getattr(budget, h.at))
    points = ev.promised_points(budget).get(h.at, [0.0])
    if any(abs(p - point) <= 1e-9 * max(1.0, point) for p in points):
        return
    limit = getattr(budget, h.at)
    if h.at == "updates":
        fix = f"add {point:g} to [eval] at_updates"
    elif limit is not None:
        fix = f"add the fraction {point / float(limit):.6g} to [eval] at_fractions"
    else:
        fix = f"set [budget] {h.at} (at_fractions are fractions of it) or compare at a promised point"
    raise PlanError(f"{where}: the eval schedule promises no eval at {h.at} = {point:g} (promised: "
                    f"{', '.join(f'{p:g}' for p in points)}); {fix}")


def _check_eval(ev: EvalSpec) -> None:
    if any(u < 0 for u in ev.at_updates) or len(set(ev.at_updates)) != len(ev.at_updates):
        raise PlanError(f"eval.at_updates must be distinct update counts >= 0, got {list(ev.at_updates)}")
    if any(not 0 < f <= 1 for f in ev.at_fractions) or len(set(ev.at_fractions)) != len(ev.at_fractions):
        raise PlanError(f"eval.at_fractions must be distinct fractions of the budget in (0, 1], "
                        f"got {list(ev.at_fractions)} (e.g. [0.1, 0.25, 0.5, 1.0])")
    if ev.sampled_at not in SAMPLED_AT:
        raise PlanError(f"eval.sampled_at {ev.sampled_at!r} is not one of {', '.join(SAMPLED_AT)}")


def _check_budget(budget: BudgetSpec, arms: dict[str, ArmSpec], base: TrainConfig) -> None:
    given = budget.given()
    if not given:
        raise PlanError(f"[budget] sets no budget; give at least one of {', '.join(BUDGET_KINDS)}")
    for k in ("device_seconds", "flops"):
        _positive(getattr(budget, k), f"budget.{k}")
    if budget.updates is not None and budget.updates < 1:
        raise PlanError(f"budget.updates = {budget.updates} is smaller than one update; minimum: 1")
    if budget.generated_tokens is not None:
        for arm in arms.values():
            t = dataclasses.replace(base, **arm.train)
            minimum = t.prompts_per_update * t.group
            if budget.generated_tokens < minimum:
                raise PlanError(
                    f"budget.generated_tokens = {budget.generated_tokens} is smaller than one update of arm "
                    f"{arm.name!r}: B * G = {t.prompts_per_update} * {t.group} completions of at least one token "
                    f"each; minimum: {minimum} (a realistic budget is many updates of B * G * mean length)")


def parse_plan(text: str, *, path: str = "<string>", sha256: str | None = None, check_schedule: bool = True) -> Plan:
    """A :class:`Plan` from TOML text (see :func:`load_plan`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"plan {path} is not valid TOML: {e}") from None
    _check_keys(data, _TOP_LEVEL, "")
    for key in _REQUIRED:
        if key not in data:
            raise PlanError(f"plan {path} has no [{key}] section (required: {', '.join(_REQUIRED)})")
    sec = {k: _build(cls, data.get(k, {}), k) for k, cls in _SECTIONS.items()}
    task = sec["task"]
    _positive(task.pool, "task.pool")
    _positive(sec["heldout"].prompts, "heldout.prompts")
    ev = sec["eval"]
    _positive(ev.every_tokens, "eval.every_tokens", allow_zero=True)
    _positive(ev.samples, "eval.samples")
    _check_eval(ev)
    _check_train(sec["train"], "train")
    probe = _build(ProbeSpec, data.get("probe", {}), "probe")
    for k in ("prompts", "heldout_prompts", "continuations"):
        _positive(getattr(probe, k), f"probe.{k}")
    for k in ("group", "heldout_group"):
        if getattr(probe, k) < 2:
            raise PlanError(f"probe.{k} must be >= 2 (group-relative advantages need two completions), "
                            f"got {getattr(probe, k)}")
    if not isinstance(data["arms"], dict) or not data["arms"]:
        raise PlanError("[arms] must hold at least one [arms.NAME] table with a reward")
    arms = {n: _parse_arm(n, t, sec["train"], sec["mc"]) for n, t in data["arms"].items()}
    _check_guided_task(arms, task)
    if INITIAL in arms:
        raise PlanError(f"arm name {INITIAL!r} is reserved (the policy before training)")
    _check_budget(sec["budget"], arms, sec["train"])
    seeds = _coerce(data.get("seeds", [0]), tuple[int, ...], "seeds")
    _check_seeds(seeds)
    hyps = data.get("hypotheses", [])
    if not isinstance(hyps, list):
        raise PlanError("hypotheses must be an array of tables: [[hypotheses]]")
    hypotheses = tuple(_parse_hypothesis(i, h, arms, sec["budget"], ev if check_schedule else None)
                       for i, h in enumerate(hyps))
    power = _parse_power(data["power"]) if "power" in data else None
    return Plan(path=str(path), sha256=sha256 or hashlib.sha256(text.encode()).hexdigest(),
                name=_coerce(data.get("name", Path(path).stem), str, "name"),
                description=_coerce(data.get("description", ""), str, "description"),
                arms=arms, seeds=seeds, hypotheses=hypotheses, probe=probe, power=power, **sec)


def _check_seeds(seeds: tuple[int, ...], key: str = "seeds") -> None:
    if not seeds:
        raise PlanError(f"{key} must be a non-empty list of distinct integers >= 0, e.g. [0, 1, 2, 3]")
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise PlanError(f"{key} must be distinct: {', '.join(map(str, dup))} is listed more than once, got "
                        f"{list(seeds)}; each seed is one run per arm, so list each once")
    neg = [s for s in seeds if s < 0]
    if neg:
        raise PlanError(f"{key} must be integers >= 0 (they seed numpy and torch generators), got "
                        f"{', '.join(map(str, neg))}; use e.g. {list(range(len(seeds)))}")


def _parse_power(table) -> PowerSpec:
    p = _build(PowerSpec, table, "power")
    _positive(p.min_effect, "power.min_effect")
    if not 0 < p.power < 1:
        raise PlanError(f"power.power must be in (0, 1), e.g. 0.8, got {p.power}")
    if not 0 < p.alpha < 1:
        raise PlanError(f"power.alpha must be in (0, 1), e.g. 0.05, got {p.alpha}")
    if p.alternative not in POWER_ALTERNATIVES:
        raise PlanError(f"power.alternative {p.alternative!r} is not one of {', '.join(POWER_ALTERNATIVES)}")
    return p


def load_plan(path: str | Path, *, check_schedule: bool = True) -> Plan:
    """Read and validate a plan file.

    Parameters
    ----------
    path : str or Path
        A TOML file (see the module docstring for the layout).
    check_schedule : bool
        Refuse a hypothesis whose point has no promised eval (:meth:`EvalSpec.promised_points`).
        False only to analyse a study frozen before that check (its analysis then refuses the
        values it cannot read within a promised interval instead).

    Returns
    -------
    Plan
        ``sha256`` = SHA-256 of the file's bytes (any edit, even a comment, changes it).

    Raises
    ------
    PlanError
        Missing file, invalid TOML, an unknown key (full path + the valid keys), a value of
        the wrong type or range, an unregistered reward (the registered ones are listed), a
        hypothesis naming an unknown arm or a point without a promised eval, negative or
        repeated seeds, or a budget smaller than one update (the minimum is named).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise PlanError(f"cannot read plan {str(p)!r}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlanError(f"plan {p} is not UTF-8: {e}") from None
    return parse_plan(text, path=str(p), sha256=hashlib.sha256(raw).hexdigest(), check_schedule=check_schedule)


def _resolve(plan: Plan, arm: ArmSpec, seed: int) -> RunConfig:
    train = dataclasses.replace(plan.train, **arm.train)
    train = dataclasses.replace(train, lr=train.lr * arm.lr_scale)
    mc = dataclasses.replace(plan.mc, **arm.mc)
    return RunConfig(arm=arm.name, reward=arm.reward, seed=seed, model=plan.model, task=plan.task,
                     heldout=plan.heldout, sampling=plan.sampling, mc=mc, train=train, budget=plan.budget,
                     eval=plan.eval, lr_scale=arm.lr_scale, plan_sha256=plan.sha256, plan_name=plan.name,
                     selection=dict(arm.selection) or None, guidance=dict(arm.guidance) or None)


def shorten_budget(run: RunConfig, overrides: dict[str, float | None]) -> RunConfig:
    """``run`` with some budgets lowered from the command line (``gradprobe train --updates 1`` ...).

    Each given override replaces the plan's budget of its kind (or adds that kind where the plan
    sets none); the plan's other budgets still apply, and the run stops at whichever is spent first,
    as with a plan's ``[budget]`` (DESIGN.md, "Matched-compute training"). Eval fractions
    (``[eval] at_fractions``) are then fractions of the shortened budgets. What was overridden is
    recorded in :attr:`RunConfig.budget_override` (so in ``config.json`` and ``summary.json``):
    ``{"flags": {"--updates": 1}, "plan_budget": {...the plan's [budget]...}}``; a run folder made
    without the override (or with another one) is refused rather than resumed.

    Parameters
    ----------
    run : RunConfig
        From :meth:`Plan.arm`.
    overrides : dict
        Budget kind (:data:`BUDGET_KINDS`) -> new limit, None = not overridden. Units:
        ``generated_tokens`` charged generated tokens (int), ``device_seconds`` device-seconds,
        ``flops`` FLOPs, ``updates`` updates (int).

    Returns
    -------
    RunConfig
        ``run`` itself when no override is given.

    Raises
    ------
    PlanError
        Naming the flag (:data:`BUDGET_FLAGS`): a value that is not a finite number > 0 (a whole
        number for tokens and updates); a value above the plan's own budget of that kind (the
        flags only shorten a run: lengthen it in the plan); a token budget below one update's
        minimum (B x G completions of one token each); or ``--updates N`` that the token budget
        can never let the run reach (N updates cost at least N x B x G tokens), which would make
        the one flag meaningless next to the other.
    """
    unknown = sorted(set(overrides) - set(BUDGET_KINDS))
    if unknown:
        raise PlanError(f"unknown budget kind(s) {', '.join(unknown)}; valid: {', '.join(BUDGET_KINDS)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return run
    plan_budget = run.budget.given()
    for kind, value in given.items():
        flag = BUDGET_FLAGS[kind]
        whole = kind in ("generated_tokens", "updates")
        kind_of = "a whole number" if whole else "a finite number"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlanError(f"{flag} must be {kind_of} > 0, got {value!r}")
        if not (value > 0 and value < float("inf")) or (whole and value != int(value)):
            raise PlanError(f"{flag} must be {kind_of} > 0 (a budget the run can spend), got {value:g}")
        if kind in plan_budget and value > plan_budget[kind]:
            raise PlanError(f"{flag} {value:,g} is more than the plan's budget.{kind} = {plan_budget[kind]:,g}: "
                            f"the command-line budgets only shorten a run; to lengthen it, raise [budget] "
                            f"{kind} in the plan (a new plan, so its runs are not compared with the old ones)")
    minimum = run.train.prompts_per_update * run.train.group  # completions of at least one token each
    tokens = given.get("generated_tokens")
    if tokens is not None and tokens < minimum:
        raise PlanError(f"--budget-tokens {tokens:,g} is smaller than one update of arm {run.arm!r}: B * G = "
                        f"{run.train.prompts_per_update} * {run.train.group} completions of at least one token "
                        f"each; minimum: {minimum}")
    updates = given.get("updates")
    token_limit = given.get("generated_tokens", plan_budget.get("generated_tokens"))
    if updates is not None and token_limit is not None and updates * minimum > token_limit:
        source = ("--budget-tokens" if "generated_tokens" in given else "the plan's budget.generated_tokens")
        raise PlanError(f"--updates {int(updates)} conflicts with {source} = {token_limit:,g}: {int(updates)} updates "
                        f"of arm {run.arm!r} cost at least {int(updates)} * {minimum} = {int(updates) * minimum:,} "
                        f"tokens (B * G completions of one token or more), so the run always stops on tokens "
                        f"first; give --updates at most {int(token_limit // minimum)} or only one of the two")
    kinds = {k: (int(v) if k in ("generated_tokens", "updates") else float(v)) for k, v in given.items()}
    budget = dataclasses.replace(run.budget, **kinds)
    record = {"flags": {BUDGET_FLAGS[k]: v for k, v in kinds.items()}, "plan_budget": plan_budget}
    return dataclasses.replace(run, budget=budget, budget_override=record)


def run_config_from_dict(d: dict) -> RunConfig:
    """Inverse of :meth:`RunConfig.to_dict` (reads ``config.json``'s ``run``)."""
    d = dict(d)
    for k, cls in _SECTIONS.items():
        d[k] = cls(**{f: tuple(v) if isinstance(v, list) else v for f, v in d[k].items()})
    return RunConfig(**d)
