"""The plan of a matched-compute study: one TOML file, validated once, frozen by its sha256.

A plan names the model, task, held-out set, arms, seeds, budgets, eval schedule and the
hypotheses with their test (DESIGN.md, "Matched-compute training"). :func:`load_plan`
reads it with :mod:`tomllib`, refuses every key it does not know (the error names the key's
full path and lists the valid keys), checks that every arm's reward is registered and that
every budget buys at least one update (and every other value's range), and records the sha256 of the file's bytes.
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
                prompt selection: selection ("half" | "random" | "dynamic" | "greso", the registry
                gradprobe.difficulty.config.SELECTION_RULE_CLASSES), candidates_multiplier,
                prior_strength, decay, feature_batch_size (gradprobe.difficulty.select)
                off-context guidance: guidance = {fraction, prefix, cap} (gradprobe.rollout.guided)
    [power]     min_effect, pilot, power, alpha, alternative (``gradprobe study --power PLAN``)
    [[hypotheses]] name, statement, test, arms, at, budget, metric, alpha, min_effect, alternative

Modules (this one re-exports their public names, so ``from gradprobe.training.plan import X`` works
for every X): :mod:`~gradprobe.training.specs` (the dataclasses and vocabularies),
:mod:`~gradprobe.training.plan_toml` (the file's text -> TOML data), :mod:`~gradprobe.training.coerce` (TOML table ->
dataclass), :mod:`~gradprobe.training.plan_checks` (checks across sections), :mod:`~gradprobe.training.budget` (budget
checks, ``shorten_budget``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..config import MCConfig, SamplingConfig
from ..layout import CONFIG_JSON
from ..outputs import as_made, home_path
from .budget import check_budget, reach_silenced, shorten_budget
from .coerce import build_section, check_keys, check_positive, coerce, echo_value
from .plan_checks import (check_arm_name, check_data_seed, check_eval, check_guided_task, check_heldout_size,
                          check_hypotheses, check_mc, check_pool, check_probe, check_reference_arm, check_seeds,
                          check_train, parse_arm, parse_hypothesis, parse_power)
from .plan_toml import read_plan_toml
from .run_folder import recorded_budget_flags, records_run
from .specs import (ALTERNATIVES, AXES, BUDGET_FLAGS, BUDGET_KINDS, INITIAL, METRICS, OPTIMIZERS, POWER_ALTERNATIVES,
                    SAMPLED_AT, SECTIONS, TESTS, ArmSpec, BudgetSpec, EvalSpec, HeldoutSpec, Hypothesis, ModelSpec,
                    PlanError, PowerSpec, ProbeSpec, RunConfig, TaskSpec, TrainConfig, run_config_from_dict)

__all__ = ["ALTERNATIVES", "AXES", "BUDGET_FLAGS", "BUDGET_KINDS", "INITIAL", "METRICS", "OPTIMIZERS",
           "POWER_ALTERNATIVES", "SAMPLED_AT", "TESTS", "ArmSpec", "BudgetSpec", "EvalSpec", "HeldoutSpec",
           "Hypothesis", "MCConfig", "ModelSpec", "Plan", "PlanError", "PowerSpec", "ProbeSpec", "RunConfig",
           "SamplingConfig", "TaskSpec", "TrainConfig", "check_plan_budget", "load_plan", "parse_plan",
           "replicate_plan", "run_config_from_dict", "shorten_budget", "run_in_folder"]

_TOP_LEVEL = ("name", "description", "seeds", *SECTIONS, "probe", "power", "arms", "hypotheses")
_REQUIRED = ("model", "task", "budget", "arms")


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
            raise PlanError(f"plan {self.path} has no arm {echo_value(name)}; its arms: {', '.join(self.arms)}")
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
        raise PlanError(f"seed_offset must be an integer >= 1, got {echo_value(seed_offset)}")
    seeds = tuple(s + seed_offset for s in plan.seeds)
    if set(seeds) & set(plan.seeds):
        least = max(plan.seeds) - min(plan.seeds) + 1
        raise PlanError(f"seed_offset {seed_offset} reuses seeds {sorted(set(seeds) & set(plan.seeds))} of the "
                        f"original study; a replicate needs fresh seeds: use seed_offset >= {least}")
    sha = hashlib.sha256(f"{plan.sha256}:replicate:{seed_offset}".encode()).hexdigest()
    heldout = dataclasses.replace(plan.heldout, seed=plan.heldout.seed + seed_offset)
    return dataclasses.replace(plan, seeds=seeds, heldout=heldout, sha256=sha, name=f"{plan.name}_rep{seed_offset}")


#: ``[model] dtype`` values: the keys of :data:`gradprobe.models.DTYPES` (named here so plans load without torch).
MODEL_DTYPES = ("float32", "float64", "bfloat16", "float16")


def check_model(model: ModelSpec) -> None:
    """Refuse a ``[model] dtype`` the runs cannot load with, and float16 on the CPU, before a study starts.

    Raises
    ------
    PlanError
        Naming the key, the value and the valid values or the fix.
    """
    if model.dtype not in MODEL_DTYPES:
        raise PlanError(f"[model] dtype = {echo_value(model.dtype)} is not one of {', '.join(MODEL_DTYPES)}; float32 "
                        "is the default (bfloat16 on a GPU)")
    if model.dtype == "float16" and str(model.device).startswith("cpu"):
        raise PlanError('[model] dtype = "float16" on device "cpu": half precision on the CPU gives non-finite '
                        "alignments in the study's probe (gradprobe probe refuses it too); use float32 (the default) "
                        "or bfloat16 on the CPU, float16 on a GPU")


def parse_plan(text: str, *, path: str = "<string>", sha256: str | None = None, check_schedule: bool = True,
               check_reach: bool | None = None, check_reference: bool = False) -> Plan:
    """A :class:`Plan` from TOML text (see :func:`load_plan`)."""
    data = read_plan_toml(text, path)
    check_keys(data, _TOP_LEVEL, "")
    for key in _REQUIRED:
        if key not in data:
            inside = [t for t, v in data.items() if isinstance(v, dict) and key in v]
            hint = (f"; the key {key!r} sits inside [{inside[0]}]: a key written after a [table] header belongs to "
                    f"that table, so write [{key}]" + (" as [arms.NAME] tables" if key == "arms" else " as a table")
                    + " of its own") if inside else ""
            raise PlanError(f"plan {path} has no [{key}] section (required: {', '.join(_REQUIRED)}){hint}")
    sec = {k: build_section(cls, data.get(k, {}), k) for k, cls in SECTIONS.items()}
    check_model(sec["model"])
    task = sec["task"]
    check_positive(task.pool, "task.pool")
    check_positive(sec["heldout"].prompts, "heldout.prompts")
    check_heldout_size(sec["heldout"].prompts)
    check_data_seed(sec["heldout"].seed)
    ev = sec["eval"]
    check_positive(ev.every_tokens, "eval.every_tokens", allow_zero=True)
    check_positive(ev.samples, "eval.samples")
    check_eval(ev)
    check_train(sec["train"], "train")
    check_mc(sec["mc"], "mc")
    probe = build_section(ProbeSpec, data.get("probe", {}), "probe")
    check_probe(probe)
    if not isinstance(data["arms"], dict) or not data["arms"]:
        got = f" (got {type(data['arms']).__name__} arms = ...)" if not isinstance(data["arms"], dict) else ""
        raise PlanError(f"[arms] must hold at least one [arms.NAME] table with a reward{got}, e.g. [arms.grpo] "
                        f"reward = \"outcome\"")
    for n in data["arms"]:
        check_arm_name(n)
    arms = {n: parse_arm(n, t, sec["train"], sec["mc"]) for n, t in data["arms"].items()}
    if check_reference:
        for arm in arms.values():
            check_reference_arm(arm, sec["train"])
    check_guided_task(arms, task)
    check_pool(task.pool, arms, sec["train"])
    if INITIAL in arms:
        raise PlanError(f"arm name {INITIAL!r} is reserved (the policy before training)")
    check_budget(sec["budget"], arms, sec["train"], max_new_tokens=sec["sampling"].max_new_tokens,
                 check_reach=check_schedule if check_reach is None else check_reach, path=path, sha256=sha256)
    seeds = coerce(data.get("seeds", [0]), tuple[int, ...], "seeds")
    check_seeds(seeds)
    hyps = data.get("hypotheses", [])
    if not isinstance(hyps, list):
        raise PlanError("hypotheses must be an array of tables: [[hypotheses]]")
    hypotheses = tuple(parse_hypothesis(i, h, arms, sec["budget"], ev if check_schedule else None)
                       for i, h in enumerate(hyps))
    check_hypotheses(hypotheses)
    power = parse_power(data["power"]) if "power" in data else None
    return Plan(path=str(path), sha256=sha256 or hashlib.sha256(text.encode()).hexdigest(),
                name=coerce(data.get("name", Path(path).stem), str, "name"),
                description=coerce(data.get("description", ""), str, "description"),
                arms=arms, seeds=seeds, hypotheses=hypotheses, probe=probe, power=power, **sec)


def load_plan(path: str | Path, *, check_schedule: bool = True, check_reach: bool | None = None,
              check_reference: bool = False) -> Plan:
    """Read and validate a plan file.

    Parameters
    ----------
    path : str or Path
        A TOML file (see the module docstring for the layout); a leading ``~`` or ``~user`` is that home folder, as
        in a shell (``Plan.path`` holds the expanded path).
    check_schedule : bool
        Refuse a hypothesis whose point has no promised eval (:meth:`EvalSpec.promised_points`).
        False only to analyse a study frozen before that check (its analysis then refuses the
        values it cannot read within a promised interval instead).
    check_reach : bool or None
        Refuse a ``[budget] generated_tokens`` out of reach of ``[budget] updates``
        (:func:`~gradprobe.training.budget.check_budget`); False warns instead (a plan frozen into a study, or a run,
        made before that check: resumed, analysed or loaded as it was run), with an
        :class:`~gradprobe.training.budget.OutOfReachWarning` naming ``path`` at the caller's line, once per plan
        within a :func:`~gradprobe.training.budget.reach_warned_once` block. None: as ``check_schedule``.
    check_reference : bool
        Refuse an ``[arms.grpo]`` that is not plain outcome GRPO
        (:func:`~gradprobe.training.plan_checks.check_reference_arm`): True for the plan of a new study (its
        analysis measures every gain against ``grpo``: :func:`gradprobe.study.freeze.load_study_plan`) and for
        ``gradprobe study --power``; False (the default) for a single run (``gradprobe train``, where ``grpo`` is only
        an arm's name) and for a plan a study froze before that check (read, analysed and resumed as it was run).

    Returns
    -------
    Plan
        ``sha256`` = SHA-256 of the file's bytes (any edit, even a comment, changes it).

    Raises
    ------
    PlanError
        Missing file, invalid TOML, an integer longer than Python reads
        (over 4300 digits: its key, line, first 40 digits and length,
        :func:`~gradprobe.training.plan_toml.read_plan_toml`), an unknown key (full path + the
        valid keys), a value of the wrong type or range (a text value longer than 80 characters shown by its first 40
        and its length), an unregistered reward (the registered ones are listed), a hypothesis naming an unknown arm
        or a point without a promised eval, negative or repeated seeds, a budget smaller than one update (the minimum
        is named), ``[mc]`` or an arm's ``mc`` out of range (``mc.continuations`` >= 1...), a ``[task] pool`` smaller
        than ``prompts_per_update``, ``save_weights_at`` updates past ``[budget] updates``, an ``[arms.grpo]`` (the
        reference of every gain) that is not plain outcome GRPO
        (:func:`~gradprobe.training.plan_checks.check_reference_arm`; with ``check_reference``), or a
        ``[sampling] temperature`` below :data:`~gradprobe.config.MIN_TEMPERATURE` or ``top_k`` above
        :data:`~gradprobe.config.MAX_TOP_K`.
    TypeError
        ``path`` is not a path (str or os.PathLike), e.g. None or a dict of the plan's content.
    """
    if not isinstance(path, (str, os.PathLike)):  # worded as gradprobe.outputs.api_out's check of a path
        raise TypeError(f"path must be a path (str or os.PathLike) of a plan TOML file, got {echo_value(path)} "
                        f"({type(path).__name__})")
    p = home_path(path)  # a leading ~ or ~user is that home folder, as in a shell (and pandas)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise PlanError(f"cannot read plan {str(p)!r}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark some editors write is no TOML (sha256: of the bytes)
    except UnicodeDecodeError as e:
        raise PlanError(f"plan {p} is not UTF-8: {e}") from None
    return parse_plan(text, path=str(p), sha256=hashlib.sha256(raw).hexdigest(), check_schedule=check_schedule,
                      check_reach=check_reach, check_reference=check_reference)


def check_plan_budget(plan: Plan, *, check_reach: bool, resumed_run: bool = False) -> None:
    """:func:`~gradprobe.training.budget.check_budget` of the read ``plan``'s ``[budget]``, arms, ``[train]`` and
    ``max_new_tokens``, as :func:`parse_plan` checks it while reading (``check_reach``, ``resumed_run``: as there).

    Raises
    ------
    PlanError
        As :func:`~gradprobe.training.budget.check_budget` raises it."""
    check_budget(plan.budget, plan.arms, plan.train, max_new_tokens=plan.sampling.max_new_tokens,
                 check_reach=check_reach, path=plan.path, sha256=plan.sha256, resumed_run=resumed_run)


def run_in_folder(plan, out, resolve) -> RunConfig:
    """The run that ``gradprobe train`` and :func:`gradprobe.train` train in the run folder ``out``: ``resolve(PLAN,
    resumed_flags)`` of ``plan``, under a new run's budget checks unless ``out`` holds that very run.

    A new run's checks refuse a plan's ``[budget] generated_tokens`` out of reach of its ``[budget] updates``
    (:func:`~gradprobe.training.budget.check_budget`) and budget flags out of reach of each other
    (:func:`~gradprobe.training.budget.shorten_budget`). A run started before those were refused resumes under them:
    where ``out``'s ``config.json`` records the run this call makes (:func:`~gradprobe.training.run_folder.records_run`:
    the configuration a resume compares, so the resume goes on), they are warned about instead
    (:class:`~gradprobe.training.budget.OutOfReachWarning`: the plan, naming its file, and the flags). In any other
    folder (no ``config.json``, a damaged one, a user's own file, another run's) the refusal stands, before the resume
    would refuse the folder for another reason.

    Parameters
    ----------
    plan : path, Plan or RunConfig
        A plan file (read here: :func:`load_plan`), or an object passed to ``resolve`` as it is.
    out : path
        The run folder.
    resolve : callable
        ``resolve(plan, resumed_flags) -> RunConfig``: the plan's arm at the seed, with the device and the shortened
        budget of the command; ``resumed_flags`` goes to ``shorten_budget`` (None: a new run's checks; else the flags
        ``config.json`` records, :func:`~gradprobe.training.run_folder.recorded_budget_flags`).

    Raises
    ------
    PlanError, ValueError, TypeError
        As :func:`load_plan` and ``resolve`` raise them for a new run (an out-of-reach budget refused, naming it and
        the fix), unless ``out`` holds this very run.
    """
    def read(check_reach: bool):
        return load_plan(plan, check_reach=check_reach) if isinstance(plan, (str, os.PathLike)) else plan

    try:
        return resolve(read(True), None)
    except PlanError as refused:
        if not (as_made(out) / CONFIG_JSON).is_file():  # new7/../R1 reaches R1 once mkdir -p makes new7
            raise
        flags = recorded_budget_flags(out)
        with reach_silenced():  # tried without its warnings: given below only if the run is resumed
            try:
                loaded = read(False)
                resumed = resolve(loaded, flags)
            except (PlanError, ValueError, TypeError):  # refused for another reason too: the new run's refusal
                raise refused from None
        if not records_run(out, resumed):
            raise
    if loaded is not plan:  # read here: the resumed run's own plan out of reach is warned about, naming its file
        check_plan_budget(loaded, check_reach=False, resumed_run=True)
    return resolve(loaded, flags)  # and its own flags out of reach


def _resolve(plan: Plan, arm: ArmSpec, seed: int) -> RunConfig:
    """Arm ``arm`` of ``plan`` at ``seed``: plan defaults + the arm's overrides, lr times ``lr_scale``."""
    train = dataclasses.replace(plan.train, **arm.train)
    train = dataclasses.replace(train, lr=train.lr * arm.lr_scale)
    mc = dataclasses.replace(plan.mc, **arm.mc)
    return RunConfig(arm=arm.name, reward=arm.reward, seed=seed, model=plan.model, task=plan.task,
                     heldout=plan.heldout, sampling=plan.sampling, mc=mc, train=train, budget=plan.budget,
                     eval=plan.eval, lr_scale=arm.lr_scale, plan_sha256=plan.sha256, plan_name=plan.name,
                     selection=dict(arm.selection) or None, guidance=dict(arm.guidance) or None)
