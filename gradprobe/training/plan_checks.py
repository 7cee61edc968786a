"""The checks of a plan's values across its sections: the update settings, the arms (registered
reward, prompt selection, off-context guidance), the hypotheses (arms, axis, a promised eval at their
point), the eval schedule, the seeds and ``[power]``. Each refusal is a
:class:`~gradprobe.training.specs.PlanError` naming the key's full path and the valid choices.

Torch-free at import: the registries that need torch (loss types, rewards, guided rollouts) are
imported inside the check that reads them, so that :func:`gradprobe.load_plan` stays torch-free.
Budget checks: :mod:`gradprobe.training.budget`.
"""

from __future__ import annotations

import dataclasses
import math

from ..config import MAX_GROUP, MAX_LR, MAX_POOL, MAX_SEED, MCConfig
from ..difficulty.config import SELECTION_KEYS, parse_selection
from ..tasks.solutions import REFERENCE_SOLUTIONS, has_reference_solution
from .coerce import build_section, check_positive, coerce, echo_value, fields_of
from .specs import (ALTERNATIVES, AXES, INITIAL, METRICS, OPTIMIZERS, POWER_ALTERNATIVES, SAMPLED_AT, TESTS, ArmSpec,
                    BudgetSpec, EvalSpec, Hypothesis, PlanError, PowerSpec, ProbeSpec, TaskSpec, TrainConfig)

__all__ = ["check_train", "check_mc", "check_pool", "parse_arm", "check_guided_task", "parse_hypothesis", "check_eval",
           "check_probe", "check_seeds", "check_data_seed", "check_lr", "check_arm_name", "check_hypotheses",
           "parse_power", "MAX_LR", "MAX_SEED", "MAX_HELDOUT_PROMPTS", "check_heldout_size", "REFERENCE_ARM",
           "REFERENCE_REWARDS", "check_reference_arm"]

#: The arm every gain is measured against (``gradprobe.study.analysis.CONTROL_ARM``, which a test keeps equal; the
#: calibration marks its rows as the reference): DESIGN.md's plain outcome-reward GRPO, refused otherwise
#: (:func:`check_reference_arm`).
REFERENCE_ARM = "grpo"
#: The rewards :data:`REFERENCE_ARM` may have: GRPO's outcome advantage (DESIGN.md: "Arms: ``grpo`` (outcome)") in
#: the three scalings TRL's ``scale_rewards`` selects (group std, batch std, none: Dr. GRPO), which
#: :mod:`gradprobe.integrations.trl_config` maps to these names.
REFERENCE_REWARDS = ("outcome", "outcome_batch", "outcome_dr")

ARM_OWN = ("reward", "lr_scale", "description", "mc")
"""Keys of ``[arms.NAME]`` besides ``[train]`` keys, prompt selection and ``guidance``."""

#: The most held-out prompts a plan may evaluate (``[heldout] prompts``): the set is generated and held in memory
#: before the first update, and every eval generates ``[eval] samples`` completions for each (100,000 on the tiny
#: tier printed nothing for minutes before its first eval); the shipped studies use 1,000-4,000, GSM8K's test split
#: 1,319, MATH's 5,000.
MAX_HELDOUT_PROMPTS = 20_000


def check_train(t: TrainConfig, where: str) -> None:
    """Refuse ``[train]`` settings (or an arm's resolved ones) out of range: sizes and rates > 0, group >= 2
    (group-relative advantages), a loss type of :data:`gradprobe.grpo.losses.LOSS_TYPES`, a known optimizer,
    betas in [0, 1), ``save_weights_at`` distinct updates >= 1.

    Raises
    ------
    PlanError
        Naming ``where.key`` and the valid range or choices.
    """
    from ..grpo.losses import LOSS_TYPES

    for k in ("prompts_per_update", "lr", "micro_batch_size", "checkpoint_every", "eps", "iterations"):
        check_positive(getattr(t, k), f"{where}.{k}")
    for k in ("lr", "eps", "weight_decay"):
        if not math.isfinite(getattr(t, k)):
            raise PlanError(f"{where}.{k} must be a finite number, got {echo_value(getattr(t, k))}")
    check_lr(t.lr, f"{where}.lr")
    if not 2 <= t.group <= MAX_GROUP:  # group-relative advantages need two; MAX_GROUP: gradprobe.config
        raise PlanError(f"{where}.group must be in [2, {MAX_GROUP}] (group-relative advantages need two completions; "
                        f"GRPO recipes use 8-64, and every completion of an update is held in memory), got "
                        f"{echo_value(t.group)}")
    for k in ("weight_decay", "max_grad_norm", "warmup", "clip_low", "clip_high", "stats_every"):
        check_positive(getattr(t, k), f"{where}.{k}", allow_zero=True)
    if t.loss_type not in LOSS_TYPES:
        raise PlanError(f"{where}.loss_type {echo_value(t.loss_type)} is not one of {', '.join(sorted(LOSS_TYPES))}")
    if t.optimizer not in OPTIMIZERS:
        raise PlanError(f"{where}.optimizer {echo_value(t.optimizer)} is not one of {', '.join(OPTIMIZERS)}")
    bad = [u for u in t.save_weights_at if u < 1]
    if bad:
        raise PlanError(f"{where}.save_weights_at lists updates after which weights are kept, each >= 1; got {bad} "
                        "(the initial policy is the plan's [model], no copy needed)")
    dup = sorted({u for u in t.save_weights_at if t.save_weights_at.count(u) > 1})
    if dup:
        raise PlanError(f"{where}.save_weights_at must list distinct updates: {', '.join(map(str, dup))} is listed "
                        f"more than once, got {list(t.save_weights_at)}; list each update once (one file each)")
    if not all(0 <= b < 1 for b in t.betas):
        raise PlanError(f"{where}.betas must lie in [0, 1), got {list(t.betas)}")




def check_lr(lr: float, where: str) -> None:
    """Refuse a learning rate (``[train] lr``, an arm's ``lr``, or either times ``lr_scale``) above :data:`MAX_LR`.

    Raises
    ------
    PlanError
        Naming ``where``, the value and the bound.
    """
    if lr > MAX_LR:
        raise PlanError(f"{where} must be at most {MAX_LR:g} (an AdamW step moves each weight by about lr, so one "
                        f"update would replace the policy by noise), got {lr!r}; RL fine-tuning uses about 1e-6 to "
                        f"1e-4 (the shipped plans 1e-4)")


MAX_ARM_NAME_BYTES = 200
"""The longest arm name, in UTF-8 bytes (:func:`check_arm_name`): under the 255 bytes of a folder name."""


def check_arm_name(name: str) -> None:
    """Refuse an arm name that cannot name a folder of its own under the study's ``runs/``: empty or blank,
    ``.`` or ``..``, holding a path separator or a control character (``[arms."../x"]`` would write its
    runs outside the study), or longer than :data:`MAX_ARM_NAME_BYTES` bytes in UTF-8 (a folder name is at most 255
    bytes on common file systems; the arm's name also heads its run folder's files and tables).

    Raises
    ------
    PlanError
        Naming the arm and the characters allowed, or its length and the limit.
    """
    if (not name.strip() or name in (".", "..") or any(c in name for c in "/\\")
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise PlanError(f"arm name {echo_value(name)} cannot name the arm's folder (runs/ARM/seedN): use letters, "
                        f"digits and '_', '-', '.', e.g. [arms.grpo_2xlr], with no '/', '\\', control character, and "
                        f"not empty, '.' or '..'")
    if len(name.encode("utf-8")) > MAX_ARM_NAME_BYTES:
        raise PlanError(f"arm name {echo_value(name)} is {len(name.encode('utf-8')):,} bytes long (UTF-8); an arm "
                        f"names its folder (runs/ARM/seedN), and gradprobe takes at most {MAX_ARM_NAME_BYTES} bytes "
                        "(a folder name is at most 255 on common file systems): give the arm a shorter name")


MC_MINIMUM = {"continuations": (1, "Monte-Carlo continuations drawn from every step boundary"),
               "max_steps": (1, "steps a completion is split into at most")}
"""``[mc]`` key -> (smallest valid value, what it counts): the one range of every :class:`MCConfig` key."""


def check_mc(mc: MCConfig, where: str = "mc") -> None:
    """Refuse :class:`~gradprobe.config.MCConfig` values out of range (:data:`MC_MINIMUM`): ``continuations``
    and ``max_steps`` >= 1. The plan's ``[mc]`` (``where`` ``"mc"``) and an arm's resolved ``mc``
    (``"arms.NAME.mc"``) are checked when the plan is read, so an mc_value run cannot fail on them after
    other runs trained.

    Raises
    ------
    PlanError
        Naming ``where.key``, the valid range and the value.
    """
    for key, (low, what) in MC_MINIMUM.items():
        value = getattr(mc, key)
        if value < low:
            raise PlanError(f"{where}.{key} must be >= {low} ({what}), got {value}; set {where}.{key} = "
                            f"{getattr(MCConfig, key)} (the default) or another integer >= {low}")


def check_pool(pool: int, arms: dict[str, ArmSpec], base: TrainConfig) -> None:
    """Refuse a training pool (``[task] pool``) smaller than one update's prompts (``[train]`` or an arm's
    ``prompts_per_update``): the plain prompt stream (:func:`gradprobe.streams.pool_indices`) would put the
    same prompt in one update more than once (its groups then count twice), and prompt selection refuses
    such a pool only when its run starts.

    A pool over :data:`MAX_POOL` prompts is refused too: every prompt of the pool is drawn before training (a
    procedurally generated task generates each one), so ``pool = 1e30`` would never start.

    Raises
    ------
    PlanError
        Naming ``task.pool``, the ``prompts_per_update`` key (``train.`` or ``arms.NAME.``) and the fix; or the
        pool's size and :data:`MAX_POOL`.
    """
    if pool > MAX_POOL:
        raise PlanError(f"task.pool = {echo_value(pool)} is more than {MAX_POOL:,} prompts: every prompt of the pool "
                        "is drawn before training starts (a generated task generates each), so a pool this large would "
                        f"not start; give [task] pool at most {MAX_POOL:,} (a few thousand is the usual size)")
    sources = [("train", base.prompts_per_update)] + [
        (f"arms.{a.name}", a.train["prompts_per_update"]) for a in arms.values() if "prompts_per_update" in a.train]
    for where, b in sources:
        if pool < b:
            raise PlanError(f"task.pool = {pool} is smaller than {where}.prompts_per_update = {b}: an update takes "
                            f"{b} distinct prompts of the pool, so a smaller pool repeats prompts within one update; "
                            f"raise [task] pool to at least {b} or lower {where}.prompts_per_update to at most {pool}")


def parse_arm(name: str, table: dict, base: TrainConfig, mc: MCConfig) -> ArmSpec:
    """The :class:`ArmSpec` of ``[arms.NAME]``, its overrides checked against ``base`` (``[train]``) and ``mc``.

    Raises
    ------
    PlanError
        An unknown key (the valid ones listed), no reward or an unregistered one (the registered ones
        listed), a bad override, bad prompt-selection or guidance settings, both selection and guidance.
    """
    from ..rewards import UnknownRewardError, get_reward, is_plugin_name

    where = f"arms.{name}"
    if not isinstance(table, dict):
        raise PlanError(f"[{where}] must be a table, got {echo_value(table)}")
    train_keys = fields_of(TrainConfig)
    for key in table:
        if key not in ARM_OWN and key not in train_keys and key not in SELECTION_KEYS and key != "guidance":
            raise PlanError(f"unknown key {echo_value(where + '.' + key)}; valid keys in [{where}]: "
                            f"{', '.join(ARM_OWN)}, or any [train] key: {', '.join(train_keys)}; "
                            f"prompt selection: {', '.join(SELECTION_KEYS)}; off-context guidance: guidance")
    if "reward" not in table:
        raise PlanError(f"[{where}] needs a reward (a registered reward name, e.g. outcome)")
    reward = coerce(table["reward"], str, f"{where}.reward")
    try:  # a reward by import path is imported when a run starts (train's and the study's preflight), not when
        # a plan is read: reading or analysing a study needs no reward code
        if not is_plugin_name(reward):
            get_reward(reward)
    except UnknownRewardError as e:
        raise PlanError(f"{where}.reward: {str(e).replace(repr(reward), echo_value(reward))}") from None  # shortened
    train = {k: coerce(v, train_keys[k], f"{where}.{k}") for k, v in table.items() if k in train_keys}
    check_train(dataclasses.replace(base, **train), where)
    mc_over = table.get("mc", {})
    if not isinstance(mc_over, dict):
        raise PlanError(f"{where}.mc must be a table of [mc] keys, got {echo_value(mc_over)}")
    resolved = build_section(MCConfig, {**dataclasses.asdict(mc), **mc_over}, f"{where}.mc")  # keys and types
    check_mc(resolved, f"{where}.mc")
    mc_over = {k: coerce(v, fields_of(MCConfig)[k], f"{where}.mc.{k}") for k, v in mc_over.items()}
    lr_scale = coerce(table.get("lr_scale", 1.0), float, f"{where}.lr_scale")
    check_positive(lr_scale, f"{where}.lr_scale")
    if not math.isfinite(lr_scale):
        raise PlanError(f"{where}.lr_scale must be a finite number, got {echo_value(lr_scale)}")
    check_lr(train.get("lr", base.lr) * lr_scale, f"{where}.lr times {where}.lr_scale ({lr_scale:g})")
    try:
        selection = parse_selection(table) or {}
    except ValueError as e:
        raise PlanError(f"[{where}] selection: {e}") from None
    arm = ArmSpec(name=name, reward=reward, lr_scale=lr_scale,
                  description=coerce(table.get("description", ""), str, f"{where}.description"),
                  train=train, mc=mc_over, selection=selection, guidance=_parse_guidance(table, where, selection))
    return arm


def check_reference_arm(arm: ArmSpec, base: TrainConfig) -> None:
    """Refuse an arm named :data:`REFERENCE_ARM` (``grpo``) that is not plain outcome GRPO: the analysis compares
    every arm against the arm of that name and the calibration takes its rows as the reference (DESIGN.md: the
    ``grpo`` arm is outcome GRPO, "Forecast gain vs grpo", "realized gain vs GRPO"), so a ``grpo`` arm with another
    reward (any but :data:`REFERENCE_REWARDS`), an ``lr_scale`` other than 1 or a learning rate other than
    ``[train] lr`` (``base.lr``), a prompt-selection rule or off-context guidance would silently turn every "gain vs
    grpo" into a gain against another intervention. Settings every arm shares (other ``[train]`` keys such as
    ``loss_type``, an ``[arms.grpo.mc]`` table that an outcome reward does not read) stay allowed. Other arms: no
    check. Called for a new study's plan (:func:`gradprobe.training.plan.parse_plan`'s ``check_reference``), not for
    a single run's (``gradprobe train``: no gain is measured) or one a study froze before this check, which is read,
    analysed and resumed as it was run.

    Raises
    ------
    PlanError
        Naming ``arms.grpo.KEY``, its value and the fix: rename the arm (e.g. ``[arms.grpo_2xlr]``) and add a plain
        ``[arms.grpo]`` with ``reward = "outcome"``, or make ``[arms.grpo]`` plain.
    """
    if arm.name != REFERENCE_ARM:
        return
    where = f"arms.{REFERENCE_ARM}"
    bad = [f"{where}.{key} = {shown}" for key, shown, differs in (
        ("reward", echo_value(arm.reward), arm.reward not in REFERENCE_REWARDS),
        ("lr_scale", repr(arm.lr_scale), arm.lr_scale != 1.0),
        ("lr", repr(arm.train.get("lr", base.lr)), arm.train.get("lr", base.lr) != base.lr),
        ("selection", echo_value(arm.selection.get("rule")), bool(arm.selection)),
        ("guidance", echo_value(arm.guidance), bool(arm.guidance))) if differs]
    if bad:
        raise PlanError(f"{'; '.join(bad)}: the arm named {REFERENCE_ARM!r} is the reference every gain is measured "
                        f"against (plain GRPO: reward = {' or '.join(map(repr, REFERENCE_REWARDS))}, lr_scale = 1, "
                        f"[train] lr, no selection, no guidance), so this would compare every arm with another "
                        f"intervention; rename this arm (e.g. [arms.{REFERENCE_ARM}_variant]) and add a plain "
                        f"[arms.{REFERENCE_ARM}] with reward = {REFERENCE_REWARDS[0]!r}, or make "
                        f"[arms.{REFERENCE_ARM}] plain")


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


def check_guided_task(arms: dict[str, ArmSpec], task: TaskSpec) -> None:
    """Refuse a guided arm whose task kind has no reference solution
    (:data:`gradprobe.rollout.guided.REFERENCE_SOLUTIONS`)."""
    for arm in arms.values():
        if arm.guidance and not has_reference_solution(task.name):
            raise PlanError(f"arms.{arm.name}.guidance: task {echo_value(task.name)} has no reference solution to take "
                            f"hints from; guidance works with tasks {', '.join(sorted(REFERENCE_SOLUTIONS))}; remove "
                            f"guidance from the arm or use such a task")


def parse_hypothesis(i: int, table: dict, arms: dict, budget: BudgetSpec, ev: EvalSpec | None = None) -> Hypothesis:
    """The :class:`Hypothesis` of ``[[hypotheses]]`` number ``i`` (0-based), checked against the plan's
    ``arms`` (or ``"initial"``), the axes, the ``budget`` and, when ``ev`` is given, the eval schedule
    (an eval must be promised at its point, :meth:`EvalSpec.promised_points`).

    Raises
    ------
    PlanError
        Naming ``hypotheses[i].key``; for an unpromised point, the ``[eval]`` entry that would promise it.
    """
    where = f"hypotheses[{i}]"
    h = build_section(Hypothesis, table, where)
    if h.test not in TESTS:
        raise PlanError(f"{where}.test {echo_value(h.test)} is not one of {', '.join(TESTS)}")
    if len(h.arms) != 2:
        raise PlanError(f"{where}.arms must name two arms [treatment, control], got {list(h.arms)}")
    if h.arms[0] == h.arms[1]:
        raise PlanError(f"{where}.arms names {echo_value(h.arms[0])} twice: a hypothesis compares two different arms "
                        f"[treatment, control], e.g. [\"mc_value\", \"grpo\"]")
    for a in h.arms:
        if a not in arms and a != INITIAL:
            raise PlanError(f"{where}.arms: no arm {echo_value(a)}; valid: {', '.join([*arms, INITIAL])}")
    if h.at not in AXES:
        raise PlanError(f"{where}.at {echo_value(h.at)} is not an axis the runs record; use one of {', '.join(AXES)}")
    if h.budget is None and getattr(budget, h.at) is None:
        raise PlanError(f"{where}: at = {h.at!r} but [budget] sets no {h.at}; give {where}.budget")
    if h.budget is not None and not h.budget > 0:
        raise PlanError(f"{where}.budget must be > 0 (a point on the {h.at} axis after training started), "
                        f"got {h.budget}")
    if ev is not None:
        _check_promised(where, h, budget, ev)
    if h.metric not in METRICS:
        raise PlanError(f"{where}.metric {echo_value(h.metric)} is not one of {', '.join(METRICS)}")
    if h.alternative not in ALTERNATIVES:
        raise PlanError(f"{where}.alternative {echo_value(h.alternative)} is not one of {', '.join(ALTERNATIVES)}")
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


def check_hypotheses(hypotheses) -> None:
    """Refuse two ``[[hypotheses]]`` with one name: the report and ``analysis.json`` key each by its name.

    Raises
    ------
    PlanError
        Naming the repeated name and both positions.
    """
    first: dict[str, int] = {}
    for i, h in enumerate(hypotheses):
        if h.name in first:
            raise PlanError(f"hypotheses[{first[h.name]}] and hypotheses[{i}] are both named {echo_value(h.name)}: the "
                            f"report and analysis.json key each hypothesis by its name; give each a name of its own")
        first[h.name] = i


def check_eval(ev: EvalSpec) -> None:
    """Refuse an ``[eval]`` schedule with repeated or negative ``at_updates``, fractions outside (0, 1],
    or an unknown ``sampled_at``.

    Raises
    ------
    PlanError
        Naming the key and an example of a valid value.
    """
    if any(u < 0 for u in ev.at_updates) or len(set(ev.at_updates)) != len(ev.at_updates):
        raise PlanError(f"eval.at_updates must be distinct update counts >= 0, got {list(ev.at_updates)}")
    if any(not 0 < f <= 1 for f in ev.at_fractions) or len(set(ev.at_fractions)) != len(ev.at_fractions):
        raise PlanError(f"eval.at_fractions must be distinct fractions of the budget in (0, 1], "
                        f"got {list(ev.at_fractions)} (e.g. [0.1, 0.25, 0.5, 1.0])")
    if ev.sampled_at not in SAMPLED_AT:
        raise PlanError(f"eval.sampled_at {echo_value(ev.sampled_at)} is not one of {', '.join(SAMPLED_AT)}")
    if not ev.greedy and not ev.sampled:
        raise PlanError("eval.greedy and eval.sampled are both false, so no eval would score any run and the study "
                        "could not be analysed; set at least one true (greedy = true is the default)")


def check_seeds(seeds: tuple[int, ...], key: str = "seeds") -> None:
    """Refuse an empty or repeated seed list, or a seed outside [0, 2**63 - 1] (``key`` names it in the message).

    Raises
    ------
    PlanError
        Naming the repeated or negative seeds and a valid list.
    """
    if not seeds:
        raise PlanError(f"{key} must be a non-empty list of distinct integers >= 0, e.g. [0, 1, 2, 3]")
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise PlanError(f"{key} must be distinct: {', '.join(map(str, dup))} is listed more than once, got "
                        f"{list(seeds)}; each seed is one run per arm, so list each once")
    neg = [s for s in seeds if not 0 <= s <= MAX_SEED]
    if neg:
        raise PlanError(f"{key} must be integers in [0, 2**63 - 1] (they seed numpy and torch generators), got "
                        f"{', '.join(map(str, neg))}; use e.g. {list(range(len(seeds)))}")


def check_heldout_size(prompts: int) -> None:
    """Refuse ``[heldout] prompts`` above :data:`MAX_HELDOUT_PROMPTS` before anything is generated (a typo such as
    100000000 held the process for minutes, growing to gigabytes, and printed nothing).

    Raises
    ------
    PlanError
        Naming ``heldout.prompts``, the value, the limit and why.
    """
    if prompts > MAX_HELDOUT_PROMPTS:
        raise PlanError(f"heldout.prompts = {prompts:,} is above {MAX_HELDOUT_PROMPTS:,}: the held-out set is "
                        "generated and held in memory before the first update, and every eval generates [eval] samples "
                        "completions for each of its prompts; the shipped studies use 1,000-4,000 (a typo? give at "
                        f"most {MAX_HELDOUT_PROMPTS:,})")


def check_data_seed(seed: int) -> None:
    """Refuse a ``[heldout] seed`` (the data seed of the held-out set and the training pool) outside
    [0, 2**63 - 1] when the plan is read, not when the data is first drawn.

    Raises
    ------
    PlanError
        Naming ``heldout.seed`` and the range.
    """
    if not 0 <= seed <= MAX_SEED:
        raise PlanError(f"heldout.seed must be an integer in [0, 2**63 - 1] (the data seed of the held-out set and "
                        f"the training pool), got {seed}; e.g. seed = 0")


def parse_power(table) -> PowerSpec:
    """The :class:`PowerSpec` of ``[power]``: ``min_effect`` > 0, ``power`` and ``alpha`` in (0, 1), a known
    ``alternative``.

    Raises
    ------
    PlanError
        Naming ``power.key``.
    """
    p = build_section(PowerSpec, table, "power")
    check_positive(p.min_effect, "power.min_effect")
    if not 0 < p.power < 1:
        raise PlanError(f"power.power must be in (0, 1), e.g. 0.8, got {p.power}")
    if not 0 < p.alpha < 1:
        raise PlanError(f"power.alpha must be in (0, 1), e.g. 0.05, got {p.alpha}")
    if p.alternative not in POWER_ALTERNATIVES:
        raise PlanError(f"power.alternative {echo_value(p.alternative)} is not one of {', '.join(POWER_ALTERNATIVES)}")
    return p


def check_probe(probe: ProbeSpec) -> None:
    """Refuse ``[probe]`` sizes below one prompt or a group below two completions, and sizes above what a probe takes
    (:data:`~gradprobe.config.MAX_POOL` prompts, :data:`~gradprobe.config.MAX_GROUP` completions per prompt or
    continuations; :class:`gradprobe.probe_settings.stages.BatchSettings` refuses the same at the study's probe),
    when the plan loads, before a study folder is made.

    Raises
    ------
    PlanError
        Naming the key (``probe.group``...), the value and the bound.
    """
    for k in ("prompts", "heldout_prompts", "continuations"):
        check_positive(getattr(probe, k), f"probe.{k}")
        bound = MAX_GROUP if k == "continuations" else MAX_POOL
        if getattr(probe, k) > bound:
            raise PlanError(f"probe.{k} must be at most {bound:,} (every one is sampled and held in memory before any "
                            f"gradient), got {echo_value(getattr(probe, k))}")
    for k in ("group", "heldout_group"):
        if not 2 <= getattr(probe, k) <= MAX_GROUP:
            raise PlanError(f"probe.{k} must be in [2, {MAX_GROUP}] (group-relative advantages need two completions; "
                            f"GRPO recipes use 8-64), got {echo_value(getattr(probe, k))}")
