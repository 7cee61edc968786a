"""The stages of a probe run's configuration (torch-free): one frozen dataclass per stage, each validated
when built (a bad value names its field and command-line flag), and the guidance setting's coercer.

:class:`gradprobe.probe_settings.ProbeConfig` is composed of them; every name is re-exported there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ..config import LOSS_TYPE_NAMES, MAX_GROUP, MAX_LR, MAX_POOL, MAX_SEED, MCConfig, preconditioner, reference_kind
from ..tiers import TINY_FRONTIER_TASK

__all__ = ["DEFAULT_TASK", "DEFAULT_MC", "ModelSettings", "TaskSettings", "BatchSettings", "ReferenceSettings",
           "UpdateSettings", "BudgetSettings", "RunSettings", "GUIDANCE_FLAG", "guidance_setting", "guidance_dict",
           "split_loss_types", "MAX_SEED", "check_batch_seeds", "MAX_POOL", "MAX_GROUP", "MAX_COMPLETIONS",
           "check_probe_batches", "check_size"]

#: The most completions one probe batch samples (``--prompts`` x ``--group``, ``--heldout-prompts`` x
#: ``--heldout-group``): every completion is sampled in one call and held in memory (its prompt's and its own token
#: ids, its rewards) before any gradient; a usual batch is 16-256 prompts x 8-16 completions, a few thousand.
MAX_COMPLETIONS = 10_000_000


def _shown_seed(seed: int) -> str:
    """A seed as a refusal shows it: as written up to 80 digits, else its first 40 and its size (``str`` of an
    integer over 4300 digits raises)."""
    if seed.bit_length() > 256:
        return f"an integer of about {int(seed.bit_length() * math.log10(2)) + 1} digits"
    return str(seed)


def _shown_count(n) -> str:
    """A size as a refusal shows it: with thousands separators (``1,000,000``), or its size in digits when longer
    than 256 bits (``format`` of an integer over 4300 digits raises)."""
    if isinstance(n, int) and n.bit_length() > 256:
        return f"an integer of about {int(n.bit_length() * math.log10(2)) + 1} digits"
    return f"{n:,}"


def check_size(value, name: str, flag: str, limit: int, unit: str, why: str, usual: str) -> None:
    """Refuse a size setting above ``limit``, before anything is sampled or loaded.

    Raises
    ------
    ValueError
        ``{name} ({flag}) = VALUE is more than LIMIT {unit}: {why}; give {flag} at most LIMIT ({usual})``.
    """
    if value > limit:
        raise ValueError(f"{name} ({flag}) = {_shown_count(value)} is more than {limit:,} {unit}: {why}; give {flag} "
                         f"at most {limit:,} ({usual})")


def _check_completions(prompts: int, group: int, names: tuple[str, str], flags: tuple[str, str]) -> None:
    """Refuse ``prompts`` x ``group`` completions over :data:`MAX_COMPLETIONS` (ValueError naming both settings)."""
    if prompts * group > MAX_COMPLETIONS:
        raise ValueError(f"{names[0]} ({flags[0]}) x {names[1]} ({flags[1]}) = {_shown_count(prompts)} x "
                         f"{_shown_count(group)} is {_shown_count(prompts * group)} completions, more than "
                         f"{MAX_COMPLETIONS:,}: every completion of the batch is sampled in one call and held in "
                         f"memory before any gradient; give fewer {flags[0]} or a smaller {flags[1]} (a probe batch is "
                         f"usually 16-256 prompts x 8-16 completions)")


def check_probe_batches(batches: int, prompts: int | None = None) -> None:
    """Refuse, before any compute, more probe batches than :data:`MAX_POOL` training prompts hold: batch k draws its
    own ``prompts`` distinct training prompts (:func:`gradprobe.probe.batches.run_probe_batches`), so ``batches`` x
    ``prompts`` prompts are built in memory before the first batch, and a plan's ``[task] pool`` or
    ``rank-prompts --pool`` takes at most :data:`MAX_POOL`. ``prompts`` None (not known to the caller): the
    batches alone are bounded by :data:`MAX_POOL`.

    Raises
    ------
    ValueError
        ``batches`` (x ``prompts``) above :data:`MAX_POOL`: the message names ``--probe-batches`` (and
        ``--prompts``), the limit and the largest number of batches that works.
    """
    if prompts is None:
        check_size(batches, "probe_batches", "--probe-batches", MAX_POOL, "batches", "each batch draws its own "
                   "--prompts distinct training prompts, all built in memory before the first batch, as a prompt "
                   "pool of at most that many (MAX_POOL)", "1-10 is the usual number; the interval narrows as "
                   "1/sqrt(N)")
    elif batches * prompts > MAX_POOL:
        raise ValueError(f"probe_batches (--probe-batches) x prompts (--prompts) = {_shown_count(batches)} x "
                         f"{_shown_count(prompts)} is {_shown_count(batches * prompts)} distinct training prompts, "
                         f"more than {MAX_POOL:,}: each batch draws its own prompts, all built in memory before the "
                         f"first batch, as a prompt pool of at most that many (MAX_POOL); give --probe-batches at most "
                         f"{max(1, MAX_POOL // prompts):,} with these --prompts (1-10 is the usual number)")


def check_batch_seeds(seed: int, batches: int, prompts: int | None = None) -> None:
    """Refuse, before any compute, probe batches whose seeds leave [0, :data:`MAX_SEED`]: batch k of ``batches`` is
    sampled with ``seed + k`` (:func:`gradprobe.probe.batches.run_probe_batches`, and per policy
    :func:`gradprobe.probe.checkpoints.run_probe_checkpoints`), so the last one is ``seed + batches - 1``; and more
    batches (of ``prompts`` prompts each, when given) than :data:`MAX_POOL` prompts (:func:`check_probe_batches`).

    Raises
    ------
    ValueError
        Too many batches (:func:`check_probe_batches`); ``seed + batches - 1`` above :data:`MAX_SEED`: the message
        names both settings and the largest seed that works with that many batches.
    """
    check_probe_batches(batches, prompts)
    if seed + batches - 1 > MAX_SEED:
        raise ValueError(f"seed (--seed) {_shown_seed(seed)} with {batches} probe batches (--probe-batches): batch k "
                         f"is sampled with seed + k, up to {_shown_seed(seed + batches - 1)}, above 2**63 - 1 (what "
                         f"numpy and torch take); give a seed <= {MAX_SEED - batches + 1}, or fewer batches")

#: The default job's task: the shipped tiny tier's frontier (:data:`gradprobe.tiers.TINY_FRONTIER_TASK`,
#: chain sums of 3-4 one-digit terms), where its groups have mixed rewards.
DEFAULT_TASK = "chain_sum:" + ",".join(f"{k}={v}" for k, v in TINY_FRONTIER_TASK.items())
#: The default job's MC settings: K = 2 continuations per step boundary (the command line reads it here).
DEFAULT_MC = MCConfig(continuations=2)


def _loss_type_names(*names: str) -> tuple[str, ...]:
    """The loss types ``names`` are checked against: the built-in names :data:`gradprobe.config.LOSS_TYPE_NAMES`
    (torch-free; tests/test_cli_choices.py keeps them equal to the registry's built-ins) when they hold every
    one of ``names``, so building a configuration loads no torch; else the live registry
    (:data:`gradprobe.grpo.loss_types.LOSSES`, torch-bound, imported only then), which also holds the loss
    types :func:`gradprobe.grpo.losses.register_loss_type` added at run time."""
    if all(n in LOSS_TYPE_NAMES for n in names):
        return LOSS_TYPE_NAMES
    from ..grpo.loss_types import LOSSES  # torch: deferred (module docstring)

    return tuple(LOSSES)


def split_loss_types(text: str, what: str = "loss_types (--loss-types)",
                     fix: str = "(e.g. bnpo,cispo), or omit the option for none", error=ValueError) -> tuple[str, ...]:
    """The loss types of a comma-separated ``text`` (``"bnpo, cispo"`` -> ``("bnpo", "cispo")``; empty or blank:
    none), for ``--loss-types`` and a plan's ``[probe] loss_types``.

    Raises
    ------
    ValueError (or ``error``)
        An empty item (``","``, ``"bnpo,"``, ``"bnpo,,cispo"``: a typo or an unset shell variable, not "no loss
        type"): ``{what} 'TEXT' has an empty item; give loss types separated by single commas {fix}``.
    """
    items = tuple(x.strip() for x in text.split(",")) if text.strip() else ()
    if "" in items:
        raise error(f"{what} {text!r} has an empty item; give loss types separated by single commas {fix}")
    return items


@dataclass(frozen=True)
class ModelSettings:
    """The policy probed: ``name`` for :func:`gradprobe.models.load_policy` (``tiny``, an alias, a folder,
    a ``.gguf`` file or a hub id), its ``device`` and ``dtype``, and ``threads``: torch CPU threads during
    the probe (the caller's setting is restored afterwards). None: 1 for a model under
    :data:`~gradprobe.probe.run.SMALL_MODEL_PARAMETERS` parameters unless ``OMP_WAIT_POLICY=PASSIVE`` (as
    the ``gradprobe`` command sets), else torch's own (:func:`~gradprobe.probe.run.probe_threads`).

    Not :class:`gradprobe.training.specs.ModelSpec`: the probe has ``threads`` and no gradient
    checkpointing (it runs one forward-mode pass, no training backward over long completions).

    Raises ValueError: ``threads`` < 1; ``float16`` on the CPU (non-finite alignments: float32 or bfloat16 there).
    """

    name: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None

    def __post_init__(self):
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads (--threads) must be >= 1 (or None: automatic), got {self.threads}")
        if self.dtype == "float16" and str(self.device).startswith("cpu"):
            raise ValueError("dtype float16 (--dtype) on device cpu: half precision on the CPU gives non-finite "
                             "alignments in the probe; use float32 (the default) or bfloat16 on the CPU, float16 on "
                             "a GPU (--device cuda)")


@dataclass(frozen=True)
class TaskSettings:
    """The task: ``spec`` for :func:`gradprobe.tasks.load_task`; ``skip_malformed`` (GSM8K, ``jsonl:`` and
    ``hf:`` tasks only): skip (count and warn about) malformed rows instead of raising
    :class:`~gradprobe.tasks.DatasetFormatError`; the count is ``skipped_rows`` in ``probe.json``."""

    spec: str = DEFAULT_TASK
    skip_malformed: bool = False


#: why a probe batch's prompts are bounded by MAX_POOL (named in the refusal)
_POOL_WHY = ("every prompt of the batch is built in memory before anything is sampled, and no prompt pool is larger "
             "(a plan's [task] pool and rank-prompts --pool take at most that many, MAX_POOL)")
#: why a group is bounded by MAX_GROUP, and its usual size (named in the refusal)
_GROUP_WHY = ("each completion is sampled and held in memory before any gradient, and the limit is 64 times the "
              "largest GRPO group of the published recipes (DeepSeekMath's 64)")
_GROUP_USUAL = "8-16 is the usual size"


@dataclass(frozen=True)
class BatchSettings:
    """The probe batch: ``prompts`` B training prompts x ``group`` G completions, sampled with ``seed``.

    Raises ValueError: B < 1 or above :data:`MAX_POOL` (a probe batch larger than a prompt pool), G < 2
    (group-relative advantages need two completions) or above :data:`MAX_GROUP`, B x G above :data:`MAX_COMPLETIONS`,
    seed outside [0, 2**63 - 1] (what numpy's and torch's generators take, as ``--seed`` checks it).
    """

    prompts: int = 16
    group: int = 8
    seed: int = 0

    def __post_init__(self):
        if self.prompts < 1:
            raise ValueError(f"prompts (--prompts) must be >= 1, got {self.prompts}")
        check_size(self.prompts, "prompts", "--prompts", MAX_POOL, "prompts", _POOL_WHY, "16-256 is the usual size")
        if self.group < 2:
            raise ValueError(f"group (--group) must be >= 2 (group-relative advantages need two completions), "
                             f"got {self.group}")
        check_size(self.group, "group", "--group", MAX_GROUP, "completions per prompt", _GROUP_WHY, _GROUP_USUAL)
        _check_completions(self.prompts, self.group, ("prompts", "group"), ("--prompts", "--group"))
        if not 0 <= self.seed <= MAX_SEED:  # numpy's and torch's generators: any path to a probe (a TRL config too)
            raise ValueError(f"seed (--seed) must be in [0, 2**63 - 1] (it seeds numpy and torch), got "
                             f"{_shown_seed(self.seed)}")


@dataclass(frozen=True)
class ReferenceSettings:
    """The reference update v and the direction u = P v the alignment is taken along.

    Attributes
    ----------
    kind : str
        ``heldout`` or ``direction:PATH`` (a ``.safetensors`` parameter-space vector); a key of
        :data:`gradprobe.config.REFERENCE_KINDS` (:attr:`variant`). A leading ``~`` or ``~user`` of PATH is that
        home folder, as in a shell (which leaves the ``~`` of ``--reference=direction:~/v.safetensors`` as it is):
        the setting holds the expanded path, which ``probe.json`` records.
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

    Raises ValueError: an unknown kind or preconditioner, heldout sizes out of range (prompts in [1,
    :data:`MAX_POOL`], group in [2, :data:`MAX_GROUP`], prompts x group at most :data:`MAX_COMPLETIONS`), negative
    check rows.
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
        check_size(self.heldout_group, "heldout_group", "--heldout-group", MAX_GROUP, "completions per prompt",
                   _GROUP_WHY, _GROUP_USUAL)
        variant = reference_kind(self.kind)
        if variant.takes_path:  # direction:~/v.safetensors: the file under the home folder, not a folder named ~
            object.__setattr__(self, "kind", f"{variant.name}:{os.path.expanduser(variant.path(self.kind))}")
        preconditioner(self.precondition)
        if self.heldout_prompts < 1:
            raise ValueError(f"heldout_prompts (--heldout-prompts) must be >= 1, got {self.heldout_prompts}")
        check_size(self.heldout_prompts, "heldout_prompts", "--heldout-prompts", MAX_POOL, "prompts", _POOL_WHY,
                   "8-64 is the usual size")
        _check_completions(self.heldout_prompts, self.heldout_group, ("heldout_prompts", "heldout_group"),
                           ("--heldout-prompts", "--heldout-group"))
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
        Extra loss types (``--loss-types``; a comma-separated string is split, an empty item refused, an empty
        string is none): every reward is also estimated under each, giving entries keyed ``REWARD@LOSS_TYPE``
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

    Raises ValueError: a loss type not registered, a repeated loss type, a non-positive lr or one above
    :data:`gradprobe.config.MAX_LR`, sizes out of range.
    """

    lr: float = 1e-4
    loss_type: str = "grpo"
    loss_types: tuple[str, ...] = ()
    update_prompts: int | None = None
    update_group: int | None = None
    micro_batch_size: int = 8

    def __post_init__(self):
        if isinstance(self.loss_types, str):  # "bnpo,cispo" (a plan's [probe] table, a caller) -> a tuple
            object.__setattr__(self, "loss_types", split_loss_types(self.loss_types))
        object.__setattr__(self, "loss_types", tuple(self.loss_types))
        losses = _loss_type_names(self.loss_type, *self.loss_types)
        if self.loss_type not in losses:
            raise ValueError(f"loss_type (--loss-type) {self.loss_type!r} is not one of {', '.join(sorted(losses))}")
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
        if not 0 < self.lr < math.inf:
            raise ValueError(f"lr (--lr) must be a finite number > 0, got {self.lr}")
        if self.lr > MAX_LR:  # as a plan's lr (gradprobe.training.plan_checks.check_lr)
            raise ValueError(f"lr (--lr) must be at most {MAX_LR:g} (an AdamW step moves each weight by about lr, so "
                             f"one update would replace the policy by noise and no first-order forecast holds), got "
                             f"{self.lr!r}; RL fine-tuning uses about 1e-6 to 1e-4 (the shipped plans 1e-4)")
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size (--micro-batch-size) must be >= 1, got {self.micro_batch_size}")

    @property
    def all_loss_types(self) -> tuple[str, ...]:
        """``loss_type`` then ``loss_types``: every loss type an entry is estimated under."""
        return (self.loss_type, *self.loss_types)


@dataclass(frozen=True)
class BudgetSettings:
    """The budget of the extrapolation: ``tokens`` generated tokens and, if any, ``seconds`` device-seconds.

    Raises ValueError: tokens < 1, seconds not finite and > 0.
    """

    tokens: int = 250_000
    seconds: float | None = None

    def __post_init__(self):
        if self.tokens < 1:
            raise ValueError(f"budget_tokens (--budget-tokens) must be >= 1, got {self.tokens}")
        if self.seconds is not None and not 0 < self.seconds < math.inf:
            raise ValueError(f"budget_seconds (--budget-seconds) must be a finite number of device-seconds > 0, got "
                             f"{self.seconds}")


@dataclass(frozen=True)
class RunSettings:
    """How the run reports: ``n_bootstrap`` resamples over prompts for the probe table's intervals (0: none there;
    the forecast's intervals come from its own draws, ``forecast_rewards``' ``n_draws``), ``progress`` bars and
    stage messages on stderr.

    Raises ValueError: ``n_bootstrap`` negative or 1-9 (a 95% percentile interval of so few resamples is not one).
    """

    n_bootstrap: int = 1000
    progress: bool = True

    def __post_init__(self):
        if self.n_bootstrap < 0 or 0 < self.n_bootstrap < MIN_BOOTSTRAP:
            raise ValueError(f"n_bootstrap (--bootstrap) must be 0 (no intervals in the probe table; the forecast's "
                             f"come from its own draws) or at least {MIN_BOOTSTRAP} resamples (default 1000: a 95% "
                             f"percentile interval needs enough resamples in each 2.5% tail), got "
                             f"{self.n_bootstrap}")


#: the fewest bootstrap resamples a probe accepts besides 0 (no intervals)
MIN_BOOTSTRAP = 10


#: the command-line flag of the ``guidance`` setting, named in its error messages
GUIDANCE_FLAG = "--guidance fraction=F,prefix=P[,cap=C]"


def _guidance_pairs(text: str) -> dict:
    """``"fraction=0.25,prefix=0.5,cap=2"`` -> {"fraction": 0.25, ...}; "" or "none" -> {} (no guidance).

    Raises GuidanceError: a part that is not KEY=NUMBER, or a key given twice (named)."""
    from ..rollout.guidance import GuidanceError  # torch (gradprobe.rollout's package): deferred, module docstring

    out: dict = {}
    if text.strip().lower() in ("", "none"):
        return out
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, value = (x.strip() for x in part.partition("="))
        if eq and key in out:
            raise GuidanceError(f"guidance ({GUIDANCE_FLAG}): key {key!r} is given twice ({text!r}); give each key "
                                "once, e.g. --guidance fraction=0.25,prefix=0.5")
        try:
            if not eq:
                raise ValueError
            out[key] = float(value)
        except ValueError:
            raise GuidanceError(f"guidance ({GUIDANCE_FLAG}): {part!r} is not KEY=NUMBER, e.g. "
                                "--guidance fraction=0.25,prefix=0.5") from None
    return out


def guidance_setting(value):
    """The ``guidance`` setting of a probe: off-context guidance of the probed update, or None.

    Parameters
    ----------
    value : None, GuidanceConfig, dict or str
        None (or {} / "" / "none"): no guidance (the default). A
        :class:`gradprobe.rollout.guidance.GuidanceConfig`; a dict like an arm's ``guidance`` table
        (``{"fraction": 0.25, "prefix": 0.5}``, ``cap`` optional, default 2); or the command line's
        ``"fraction=0.25,prefix=0.5[,cap=2]"``.

    Returns
    -------
    GuidanceConfig or None

    Raises
    ------
    GuidanceError (a ValueError)
        A value that is none of these, an unknown key (the valid ones listed), a share outside [0, 1]
        or ``cap <= 0``; the message names the key (``guidance.fraction``) and the flag ``--guidance``.
    """
    if value is None:  # the default: nothing imported (a config without guidance loads no torch)
        return None
    from ..rollout.guidance import GuidanceConfig, GuidanceError, parse_guidance  # torch: deferred

    if isinstance(value, GuidanceConfig):
        return value
    if isinstance(value, str):
        value = _guidance_pairs(value)
    if isinstance(value, Mapping) and not value:
        return None
    try:
        parsed = parse_guidance(dict(value) if isinstance(value, Mapping) else value, "guidance")
    except GuidanceError as e:
        raise GuidanceError(f"{e} ({GUIDANCE_FLAG})") from None
    return GuidanceConfig(**parsed)


def guidance_dict(guidance) -> dict | None:
    """``probe.json["config"]["guidance"]``: the settings as a dict (fraction, prefix, cap), None without."""
    return None if guidance is None else asdict(guidance)
