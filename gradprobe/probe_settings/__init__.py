"""What defines a probe run: :class:`ProbeConfig`, composed of one frozen dataclass per stage, and its
one coercer :meth:`ProbeConfig.from_dict`.

Torch-free, so that the command line reads its defaults and choices from here without loading torch
(``gradprobe.probe.config`` and ``gradprobe.probe.run`` re-export every name). Validation happens once,
when a stage is built, so every stage of :mod:`gradprobe.probe.run` reads checked values; a bad value
names its field and command-line flag.

Stages (attribute of :class:`ProbeConfig` -> class): ``model`` :class:`ModelSettings`, ``task``
:class:`TaskSettings`, ``batch`` :class:`BatchSettings`, ``reference`` :class:`ReferenceSettings`,
``update`` :class:`UpdateSettings`, ``budget`` :class:`BudgetSettings`, ``sampling``
:class:`gradprobe.config.SamplingConfig`, ``mc`` :class:`gradprobe.config.MCConfig`, ``run``
:class:`RunSettings` (the stage classes live in :mod:`gradprobe.probe_settings.stages`); plus ``rewards``,
the registered reward names probed, and ``guidance``: None, or the off-context guidance
(:class:`gradprobe.rollout.guidance.GuidanceConfig`) of the guided arm whose update is probed
(:mod:`gradprobe.probe.guided`).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import MCConfig, SamplingConfig
from ..token_counts import parse_token_count
from .stages import (DEFAULT_MC, DEFAULT_TASK, GUIDANCE_FLAG, MAX_COMPLETIONS, MAX_GROUP, MAX_POOL, MAX_SEED,
                     BatchSettings, BudgetSettings, ModelSettings, ReferenceSettings, RunSettings, TaskSettings,
                     UpdateSettings, check_batch_seeds, check_probe_batches, check_size, guidance_dict,
                     guidance_setting)

__all__ = ["ProbeConfig", "DEFAULT_TASK", "DEFAULT_MC", "ModelSettings", "TaskSettings", "BatchSettings",
           "ReferenceSettings", "UpdateSettings", "BudgetSettings", "RunSettings", "STAGES", "SETTINGS", "RECORDED",
           "GUIDANCE_FLAG", "guidance_setting", "setting_names", "config_dict", "FORECASTERS", "check_forecaster",
           "MAX_SEED", "check_batch_seeds", "MAX_POOL", "MAX_GROUP", "MAX_COMPLETIONS", "check_probe_batches",
           "check_size"]

#: ``forecaster=`` of :func:`gradprobe.probe` and ``--forecaster``: ``auto`` (the forecaster that validated best)
#: or one of the forecasters by name
FORECASTERS = ("auto", "probe", "cost_only", "signal_proxy")
#: an MCConfig field -> (its flag, what it counts): each must be >= 1 (as a plan's ``[mc]``); ``continuations`` at
#: most :data:`MAX_GROUP` too (:func:`_check_mc`)
_MC_FIELDS = {"continuations": ("--continuations", "K, Monte-Carlo continuations drawn from every step boundary"),
              "max_steps": ("--max-steps", "steps a completion is split into at most")}


#: stage attribute of :class:`ProbeConfig` -> its class
STAGES = {"model": ModelSettings, "task": TaskSettings, "batch": BatchSettings, "reference": ReferenceSettings,
          "update": UpdateSettings, "budget": BudgetSettings, "sampling": SamplingConfig, "mc": MCConfig,
          "run": RunSettings}

#: flat setting name -> (stage, field), in the order of ``probe.json["config"]`` (the names of the flat
#: ProbeConfig before issue 15, of ``gradprobe.probe(**settings)`` and of a plan's ``[probe]`` table)
SETTINGS = {
    "model": ("model", "name"), "task": ("task", "spec"), "rewards": (None, "rewards"),
    "prompts": ("batch", "prompts"), "group": ("batch", "group"), "reference": ("reference", "kind"),
    "heldout_prompts": ("reference", "heldout_prompts"), "heldout_group": ("reference", "heldout_group"),
    "precondition": ("reference", "precondition"), "lr": ("update", "lr"), "loss_type": ("update", "loss_type"),
    "loss_types": ("update", "loss_types"), "budget_tokens": ("budget", "tokens"),
    "budget_seconds": ("budget", "seconds"), "sampling": ("sampling", None), "mc": ("mc", None),
    "seed": ("batch", "seed"), "device": ("model", "device"), "dtype": ("model", "dtype"),
    "cosine": ("reference", "cosine"), "n_bootstrap": ("run", "n_bootstrap"),
    "micro_batch_size": ("update", "micro_batch_size"),
    "second_moment_minibatches": ("reference", "second_moment_minibatches"), "progress": ("run", "progress"),
    "reference_check_rows": ("reference", "reference_check_rows"), "skip_malformed": ("task", "skip_malformed"),
    "update_prompts": ("update", "update_prompts"), "update_group": ("update", "update_group"),
    "threads": ("model", "threads"), "guidance": (None, "guidance"),
}
#: keys a saved ``probe.json["config"]`` holds that are records of the run, not settings (read and dropped)
RECORDED = ("probe_batches",)
#: a SamplingConfig or MCConfig field given flat (``max_new_tokens``, ``continuations``) -> its stage
_NESTED_FLAT = {f.name: stage for stage in ("sampling", "mc") for f in dataclasses.fields(STAGES[stage])}


#: stage -> field -> its annotation (a string: ``int``, ``float | None``, ...), for :func:`_checked`
_FIELD_TYPES = {stage: {f.name: str(f.type) for f in dataclasses.fields(cls)} for stage, cls in STAGES.items()}


def _checked(stage: str, name: str, value, label: str):
    """``value`` for field ``stage.name`` when its type fits the annotation (a whole float as an int, a path as a
    str); raises ValueError naming ``label`` otherwise. Annotations other than int, float, bool, str pass."""
    kind = _FIELD_TYPES.get(stage, {}).get(name, "")
    base, optional = kind.removesuffix(" | None"), kind.endswith(" | None")
    if (stage, name) == ("budget", "tokens") and isinstance(value, str):  # "250k", as --budget-tokens takes it
        try:
            return parse_token_count(value)
        except ValueError as e:
            raise ValueError(f"{label}: {e}") from None
    if value is None and optional:
        return value
    is_bool = isinstance(value, bool) or (type(value).__module__ == "numpy"
                                          and type(value).__name__ in ("bool_", "bool"))
    real = isinstance(value, numbers.Real) and not is_bool
    if base == "int":
        if real and (isinstance(value, numbers.Integral) or float(value).is_integer()):  # 10**400: no float
            return int(value)
        want = "an integer"
    elif base == "float":
        if real:
            return float(value)
        want = "a number"
    elif base == "bool":
        if is_bool:
            return bool(value)
        want = "true or false"
    elif base == "str":
        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
        want = "a string"
    else:
        return value
    none = " or None" if optional else ""
    raise ValueError(f"{label} must be {want}{none}, got {value!r} ({type(value).__name__})")


def check_forecaster(value) -> str:
    """``value`` when it is one of :data:`FORECASTERS`, checked before any compute.

    Raises
    ------
    ValueError
        ``forecaster (--forecaster) 'x' must be one of auto, probe, cost_only, signal_proxy``.
    """
    if not isinstance(value, str) or value not in FORECASTERS:
        raise ValueError(f"forecaster (--forecaster) {value!r} must be one of {', '.join(FORECASTERS)}")
    return value


def _check_mc(mc: MCConfig) -> None:
    """Refuse MC settings below 1 (:data:`_MC_FIELDS`), naming the setting and its flag, and K continuations above
    :data:`MAX_GROUP` (the K continuations of a step boundary are a group of completions of its prefix, all
    sampled in one call and held in memory), before any compute."""
    for name, (flag, what) in _MC_FIELDS.items():
        value = getattr(mc, name)
        if isinstance(value, numbers.Real) and value < 1:
            raise ValueError(f"{name} ({flag}) must be >= 1 ({what}), got {value}")
    if isinstance(mc.continuations, numbers.Real):
        check_size(mc.continuations, "continuations", "--continuations", MAX_GROUP, "continuations per step boundary",
                   "the continuations of every step boundary of every completion are sampled in one call and held in "
                   "memory, and the limit is that of a group (--group), 64 times the largest GRPO group of the "
                   "published recipes", "2-8 is the usual number")


def setting_names() -> list[str]:
    """Every flat setting name :meth:`ProbeConfig.from_dict` accepts: :data:`SETTINGS` in order, then the
    :class:`~gradprobe.config.SamplingConfig` and :class:`~gradprobe.config.MCConfig` field names."""
    return [*SETTINGS, *_NESTED_FLAT]


@dataclass(frozen=True)
class ProbeConfig:
    """Everything that defines a probe run, one frozen dataclass per stage (module docstring).

    Build it from flat settings or a saved config with :meth:`from_dict` (the one coercer), change it
    with :meth:`with_settings`, save it with :meth:`to_dict`.

    ``probe.json["config"]`` stays FLAT (:meth:`to_dict`: one key per setting, the names of
    :data:`SETTINGS`; ``sampling`` and ``mc`` as dicts; tuples as lists; the ``probe_batches`` record
    added), as written before the config was composed plus one last key, ``guidance`` (None, or
    ``{fraction, prefix, cap}``; a saved config without it loads with None): the shipped ``data/**/probe.json``,
    calibration datasets, study analyses, user notebooks and the README read those keys, and one flat
    vocabulary is also that of ``gradprobe.probe(**settings)`` and a plan's ``[probe]`` table.
    :meth:`from_dict` reads it, the nested layout of :meth:`to_nested` and any mix of the two.

    The defaults are the default job (``gradprobe probe`` with no options, under a minute on 2 CPU
    cores): the shipped ``tiny`` tier on its frontier task :data:`DEFAULT_TASK`, rewards ``outcome``,
    ``mc_value`` and ``hybrid_0.5``, a 16 x 8 probe batch, an 8 x 16 held-out reference and K = 2 MC
    continuations per step boundary, predicting the tier's training (``plans/tiny.toml``: lr 1e-4, a
    budget of 250k generated tokens).
    """

    model: ModelSettings = field(default_factory=ModelSettings)
    task: TaskSettings = field(default_factory=TaskSettings)
    rewards: tuple[str, ...] = ("outcome", "mc_value", "hybrid_0.5")
    batch: BatchSettings = field(default_factory=BatchSettings)
    reference: ReferenceSettings = field(default_factory=ReferenceSettings)
    update: UpdateSettings = field(default_factory=UpdateSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    mc: MCConfig = field(default_factory=lambda: DEFAULT_MC)
    run: RunSettings = field(default_factory=RunSettings)
    guidance: object = None  # GuidanceConfig or None (stages.guidance_setting); torch-free annotation

    def __post_init__(self):
        for name, cls in STAGES.items():
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"ProbeConfig.{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}"
                                f"; build a config from flat settings with ProbeConfig.from_dict")
        _check_mc(self.mc)
        object.__setattr__(self, "rewards", tuple(self.rewards))
        object.__setattr__(self, "guidance", guidance_setting(self.guidance))

    @classmethod
    def from_dict(cls, settings: Mapping, base: ProbeConfig | None = None) -> ProbeConfig:
        """The one coercer: a config from ``base`` (default :class:`ProbeConfig()`) and ``settings``.

        ``settings`` may be (a) nested, stage name -> a dict of that stage's fields (:meth:`to_nested`) or
        a stage object; (b) a saved flat ``probe.json["config"]`` (:meth:`to_dict`, any version: missing
        keys take the defaults, ``probe_batches`` is a record and is dropped); (c) flat keyword settings as
        ``gradprobe.probe(**settings)`` takes them: the names of :data:`SETTINGS` plus any
        :class:`~gradprobe.config.SamplingConfig` or :class:`~gradprobe.config.MCConfig` field
        (``max_new_tokens``, ``continuations``). A key that names a stage (``model``, ``task``,
        ``reference``, ``sampling``, ``mc``...) is a stage when its value is a dict or a stage object, else
        the flat setting. Stages apply first, flat settings over them. ``rewards`` may be a comma-separated
        string.

        Raises
        ------
        ValueError
            ``unknown probe setting(s) ...; valid: ...`` (every valid name listed), a value of the wrong type
            (``prompts must be an integer, got '4' (str)``: integers, numbers, true/false and strings are
            checked; a whole float such as ``16.0`` is taken as 16), or the stage's own message for a bad value
            (naming the field and its flag; ``continuations (--continuations) must be >= 1 ...`` for an MC
            setting below 1), a size above its limit included (``prompts (--prompts) = 1,000,000,000 is more than
            1,000,000 prompts: ...``: :data:`MAX_POOL` prompts, :data:`MAX_GROUP` completions per prompt or
            continuations, :data:`MAX_COMPLETIONS` completions a batch), refused before any model loads.
        """
        base = base if base is not None else cls()
        stages = {name: getattr(base, name) for name in STAGES}
        nested = {k: v for k, v in settings.items()
                  if k in STAGES and (isinstance(v, Mapping) or dataclasses.is_dataclass(v))}
        flat = {k: v for k, v in settings.items() if k not in nested and k not in RECORDED}
        unknown = sorted(set(flat) - set(SETTINGS) - set(_NESTED_FLAT))
        if unknown:
            valid = sorted({*setting_names(), *STAGES})
            raise ValueError(f"unknown probe setting(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
        for k, v in nested.items():
            fields = [x.name for x in dataclasses.fields(STAGES[k])]
            if isinstance(v, Mapping) and set(v) - set(fields):
                extra = ', '.join(f'{k}.{x}' for x in sorted(set(v) - set(fields)))
                raise ValueError(f"unknown probe setting(s) {extra}; valid in {k}: {', '.join(fields)}")
        for k, v in nested.items():
            if isinstance(v, Mapping):
                v = {name: _checked(k, name, x, f"{k}.{name}") for name, x in v.items()}
            stages[k] = dataclasses.replace(stages[k], **v) if isinstance(v, Mapping) else v
        changes: dict[str, dict] = {}
        rewards, guidance = base.rewards, base.guidance
        for k, v in flat.items():
            if k == "rewards":
                rewards = tuple(r.strip() for r in v.split(",") if r.strip()) if isinstance(v, str) else tuple(v)
            elif k == "guidance":
                guidance = guidance_setting(v)
            elif k in _NESTED_FLAT:
                changes.setdefault(_NESTED_FLAT[k], {})[k] = _checked(_NESTED_FLAT[k], k, v, k)
            else:
                stage, name = SETTINGS[k]
                changes.setdefault(stage, {})[name] = v if name is None else _checked(stage, name, v, k)
        for stage, values in changes.items():
            stages[stage] = dataclasses.replace(stages[stage], **values)
        return cls(rewards=rewards, guidance=guidance, **stages)

    def with_settings(self, **settings) -> ProbeConfig:
        """A copy with ``settings`` changed (flat names or stages, as :meth:`from_dict` reads them):
        ``config.with_settings(seed=config.batch.seed + 1)``."""
        return type(self).from_dict(settings, base=self)

    def to_dict(self) -> dict:
        """``probe.json["config"]``: the flat layout (class docstring), every setting of :data:`SETTINGS`
        in its order; ``sampling`` and ``mc`` as dicts, tuples as lists."""
        out = {}
        for key, (stage, name) in SETTINGS.items():
            if key == "guidance":
                out[key] = guidance_dict(self.guidance)
            elif stage is None:
                out[key] = list(self.rewards)
            elif name is None:
                out[key] = dataclasses.asdict(getattr(self, stage))
            else:
                value = getattr(getattr(self, stage), name)
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def to_nested(self) -> dict:
        """Stage name -> that stage's fields (and ``rewards``): the nested layout :meth:`from_dict` also reads."""
        out = {name: dataclasses.asdict(getattr(self, name)) for name in STAGES}
        out["update"]["loss_types"] = list(self.update.loss_types)
        return {"rewards": list(self.rewards), **out, "guidance": guidance_dict(self.guidance)}


def config_dict(config: ProbeConfig) -> dict:
    """``config`` as ``probe.json["config"]`` (:meth:`ProbeConfig.to_dict`)."""
    return config.to_dict()
