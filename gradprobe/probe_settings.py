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
:class:`RunSettings`; plus ``rewards``, the registered reward names probed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from .config import MCConfig, SamplingConfig, preconditioner, reference_kind
from .tiers import TINY_FRONTIER_TASK

__all__ = ["ProbeConfig", "DEFAULT_TASK", "DEFAULT_MC", "ModelSettings", "TaskSettings", "BatchSettings",
           "ReferenceSettings", "UpdateSettings", "BudgetSettings", "RunSettings", "STAGES", "SETTINGS", "RECORDED",
           "setting_names", "config_dict"]

#: The default job's task: the shipped tiny tier's frontier (:data:`gradprobe.tiers.TINY_FRONTIER_TASK`,
#: chain sums of 3-4 one-digit terms), where its groups have mixed rewards.
DEFAULT_TASK = "chain_sum:" + ",".join(f"{k}={v}" for k, v in TINY_FRONTIER_TASK.items())
#: The default job's MC settings: K = 2 continuations per step boundary (the command line reads it here).
DEFAULT_MC = MCConfig(continuations=2)


def _loss_type_names():
    """The live loss-type registry (:data:`gradprobe.grpo.loss_types.LOSSES`, torch-bound: imported when a
    loss type is checked, so that the command line reads the defaults here without torch)."""
    from .grpo.loss_types import LOSSES  # torch: deferred (module docstring)

    return LOSSES


@dataclass(frozen=True)
class ModelSettings:
    """The policy probed: ``name`` for :func:`gradprobe.models.load_policy` (``tiny``, an alias, a folder,
    a ``.gguf`` file or a hub id), its ``device`` and ``dtype``, and ``threads``: torch CPU threads during
    the probe (the caller's setting is restored afterwards). None: 1 for a model under
    :data:`~gradprobe.probe.run.SMALL_MODEL_PARAMETERS` parameters unless ``OMP_WAIT_POLICY=PASSIVE`` (as
    the ``gradprobe`` command sets), else torch's own (:func:`~gradprobe.probe.run.probe_threads`).

    Not :class:`gradprobe.training.specs.ModelSpec`: the probe has ``threads`` and no gradient
    checkpointing (it runs one forward-mode pass, no training backward over long completions).

    Raises ValueError: ``threads`` < 1.
    """

    name: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None

    def __post_init__(self):
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads (--threads) must be >= 1 (or None: automatic), got {self.threads}")


@dataclass(frozen=True)
class TaskSettings:
    """The task: ``spec`` for :func:`gradprobe.tasks.load_task`; ``skip_malformed`` (GSM8K, ``jsonl:`` and
    ``hf:`` tasks only): skip (count and warn about) malformed rows instead of raising
    :class:`~gradprobe.tasks.DatasetFormatError`; the count is ``skipped_rows`` in ``probe.json``."""

    spec: str = DEFAULT_TASK
    skip_malformed: bool = False


@dataclass(frozen=True)
class BatchSettings:
    """The probe batch: ``prompts`` B training prompts x ``group`` G completions, sampled with ``seed``.

    Raises ValueError: B < 1, G < 2 (group-relative advantages need two completions), seed < 0.
    """

    prompts: int = 16
    group: int = 8
    seed: int = 0

    def __post_init__(self):
        if self.prompts < 1:
            raise ValueError(f"prompts (--prompts) must be >= 1, got {self.prompts}")
        if self.group < 2:
            raise ValueError(f"group (--group) must be >= 2 (group-relative advantages need two completions), got {self.group}")
        if self.seed < 0:
            raise ValueError(f"seed (--seed) must be >= 0, got {self.seed}")


@dataclass(frozen=True)
class ReferenceSettings:
    """The reference update v and the direction u = P v the alignment is taken along.

    Attributes
    ----------
    kind : str
        ``heldout`` or ``direction:PATH`` (a ``.safetensors`` parameter-space vector); a key of
        :data:`gradprobe.config.REFERENCE_KINDS` (:attr:`variant`).
    heldout_prompts, heldout_group : int
        Size of the held-out batch of the ``heldout`` reference (G >= 2, the RLOO baseline).
    precondition : {"adam", "none"}
        A key of :data:`gradprobe.config.PRECONDITIONER_KINDS` (:attr:`preconditioner`). ``adam``: u = P v
        with P = diag(1 / (sqrt(s) + eps)), s the mean squared minibatch GRPO (outcome) gradient of the
        probe batch weighted by the loss type's token weights, so the prediction is for an Adam step (one
        P per token-weight family of ``loss_type`` and ``loss_types``); ``none``: SGD, u = v.
    second_moment_minibatches : int
        K, the minibatches (backwards) of s.
    reference_check_rows : int
        Rows of the alignment pass recomputed against a higher-precision copy (0 = off).
    cosine : bool
        Also compute cos(g_R, v) (one backward per reward).

    Raises ValueError: an unknown kind or preconditioner, heldout sizes out of range, negative check rows.
    """

    kind: str = "heldout"
    heldout_prompts: int = 8
    heldout_group: int = 16
    precondition: str = "adam"
    second_moment_minibatches: int = 4
    reference_check_rows: int = 0
    cosine: bool = False

    def __post_init__(self):
        if self.heldout_group < 2:
            raise ValueError(f"heldout_group (--heldout-group) must be >= 2 (RLOO baseline), got {self.heldout_group}")
        reference_kind(self.kind)
        preconditioner(self.precondition)
        if self.heldout_prompts < 1:
            raise ValueError(f"heldout_prompts (--heldout-prompts) must be >= 1, got {self.heldout_prompts}")
        if self.reference_check_rows < 0:
            raise ValueError(f"reference_check_rows must be >= 0 (0 = off), got {self.reference_check_rows}")

    @property
    def variant(self):
        """The :class:`gradprobe.config.Reference` of :attr:`kind`."""
        return reference_kind(self.kind)

    @property
    def preconditioner(self):
        """The :class:`gradprobe.config.Preconditioner` of :attr:`precondition`."""
        return preconditioner(self.precondition)


@dataclass(frozen=True)
class UpdateSettings:
    """The training update whose gain is predicted.

    Attributes
    ----------
    lr : float
        Its learning rate.
    loss_type : str
        Its loss (:data:`gradprobe.grpo.losses.LOSS_TYPES`). It also sets the cost yardstick's update and,
        with ``precondition="adam"``, the token weights of the second moment s.
    loss_types : tuple[str, ...]
        Extra loss types (``--loss-types``; a comma-separated string is split): every reward is also
        estimated under each, giving entries keyed ``REWARD@LOSS_TYPE``
        (:func:`gradprobe.probe_keys.entry_key`) with the fields of the entry ``REWARD``. Under ``none`` all
        loss types share the one alignment pass; under ``adam`` each token-weight family
        (:func:`~gradprobe.probe.direction.weight_family`: grpo/gspo, dapo/bnpo/cispo, dr_grpo) gets its own
        second moment, P and alignment pass (``costs.extra_alignment_passes``). Must not repeat
        ``loss_type`` or itself.
    update_prompts, update_group : int or None
        B and G of the update when it differs from the probe batch (None: the probe batch's). The
        expected per-update gain does not depend on them, its tokens and seconds do: they are the probe
        batch's scaled by (update_prompts x update_group) / (prompts x group), and so is the extrapolation.
    micro_batch_size : int
        Rows per forward/backward (memory; results do not depend on it).

    Raises ValueError: a loss type not registered, a repeated loss type, a non-positive lr, sizes out of range.
    """

    lr: float = 1e-4
    loss_type: str = "grpo"
    loss_types: tuple[str, ...] = ()
    update_prompts: int | None = None
    update_group: int | None = None
    micro_batch_size: int = 8

    def __post_init__(self):
        losses = _loss_type_names()
        if self.loss_type not in losses:
            raise ValueError(f"loss_type (--loss-type) {self.loss_type!r} is not one of {', '.join(sorted(losses))}")
        if isinstance(self.loss_types, str):  # "bnpo,cispo" (a plan's [probe] table, a caller) -> a tuple
            object.__setattr__(self, "loss_types", tuple(x.strip() for x in self.loss_types.split(",") if x.strip()))
        object.__setattr__(self, "loss_types", tuple(self.loss_types))
        unknown = [x for x in self.loss_types if x not in losses]
        if unknown:
            raise ValueError(f"loss_types (--loss-types) {', '.join(map(repr, unknown))}: not a loss type; choose from "
                             f"{', '.join(sorted(losses))} (gradprobe.grpo.losses.LOSS_TYPES)")
        if self.loss_type in self.loss_types:
            raise ValueError(f"loss_types (--loss-types) repeats the probe's own loss_type {self.loss_type!r}: its "
                             "entries are the plain REWARD keys already; list only the extra loss types")
        dup = sorted({x for x in self.loss_types if self.loss_types.count(x) > 1})
        if dup:
            raise ValueError(f"loss_types (--loss-types) lists {', '.join(dup)} more than once; list each once")
        if self.update_prompts is not None and self.update_prompts < 1:
            raise ValueError(f"update_prompts (--update-prompts) must be >= 1, got {self.update_prompts}")
        if self.update_group is not None and self.update_group < 2:
            raise ValueError(f"update_group (--update-group) must be >= 2 (a GRPO group of one completion has zero "
                             f"advantage), got {self.update_group}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size (--micro-batch-size) must be >= 1, got {self.micro_batch_size}")

    @property
    def all_loss_types(self) -> tuple[str, ...]:
        """``loss_type`` then ``loss_types``: every loss type an entry is estimated under."""
        return (self.loss_type, *self.loss_types)


@dataclass(frozen=True)
class BudgetSettings:
    """The budget of the extrapolation: ``tokens`` generated tokens and, if any, ``seconds`` device-seconds.

    Raises ValueError: tokens < 1, seconds <= 0.
    """

    tokens: int = 250_000
    seconds: float | None = None

    def __post_init__(self):
        if self.tokens < 1:
            raise ValueError(f"budget_tokens (--budget-tokens) must be >= 1, got {self.tokens}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"budget_seconds (--budget-seconds) must be > 0, got {self.seconds}")


@dataclass(frozen=True)
class RunSettings:
    """How the run reports: ``n_bootstrap`` resamples over prompts for the intervals, ``progress`` bars and
    stage messages on stderr."""

    n_bootstrap: int = 1000
    progress: bool = True


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
    "threads": ("model", "threads"),
}
#: keys a saved ``probe.json["config"]`` holds that are records of the run, not settings (read and dropped)
RECORDED = ("probe_batches",)
#: a SamplingConfig or MCConfig field given flat (``max_new_tokens``, ``continuations``) -> its stage
_NESTED_FLAT = {f.name: stage for stage in ("sampling", "mc") for f in dataclasses.fields(STAGES[stage])}


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
    added), byte for byte as written before the config was composed: the shipped ``data/**/probe.json``,
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

    def __post_init__(self):
        for name, cls in STAGES.items():
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"ProbeConfig.{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}"
                                f"; build a config from flat settings with ProbeConfig.from_dict")
        object.__setattr__(self, "rewards", tuple(self.rewards))

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
            ``unknown probe setting(s) ...; valid: ...`` (every valid name listed), or the stage's own
            message for a bad value (naming the field and its flag).
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
                raise ValueError(f"unknown probe setting(s) {', '.join(f'{k}.{x}' for x in sorted(set(v) - set(fields)))}"
                                 f"; valid in {k}: {', '.join(fields)}")
        for k, v in nested.items():
            stages[k] = dataclasses.replace(stages[k], **v) if isinstance(v, Mapping) else v
        changes: dict[str, dict] = {}
        rewards = base.rewards
        for k, v in flat.items():
            if k == "rewards":
                rewards = tuple(r.strip() for r in v.split(",") if r.strip()) if isinstance(v, str) else tuple(v)
            elif k in _NESTED_FLAT:
                changes.setdefault(_NESTED_FLAT[k], {})[k] = v
            else:
                stage, name = SETTINGS[k]
                changes.setdefault(stage, {})[name] = v
        for stage, values in changes.items():
            stages[stage] = dataclasses.replace(stages[stage], **values)
        return cls(rewards=rewards, **stages)

    def with_settings(self, **settings) -> ProbeConfig:
        """A copy with ``settings`` changed (flat names or stages, as :meth:`from_dict` reads them):
        ``config.with_settings(seed=config.batch.seed + 1)``."""
        return type(self).from_dict(settings, base=self)

    def to_dict(self) -> dict:
        """``probe.json["config"]``: the flat layout (class docstring), every setting of :data:`SETTINGS`
        in its order; ``sampling`` and ``mc`` as dicts, tuples as lists."""
        out = {}
        for key, (stage, name) in SETTINGS.items():
            if stage is None:
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
        return {"rewards": list(self.rewards), **out}


def config_dict(config: ProbeConfig) -> dict:
    """``config`` as ``probe.json["config"]`` (:meth:`ProbeConfig.to_dict`)."""
    return config.to_dict()
