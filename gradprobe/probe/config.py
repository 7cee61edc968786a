"""What defines a probe run: :class:`ProbeConfig` (saved in ``probe.json["config"]``) and its defaults.

The defaults are the default job (``gradprobe probe`` with no options): the shipped ``tiny`` tier on its
frontier task :data:`DEFAULT_TASK`. Validation happens once, when a config is built, so every stage of
:mod:`gradprobe.probe.run` reads checked values; a bad value names its field and command-line flag.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..config import PRECONDITIONERS, REFERENCES, MCConfig, SamplingConfig
from ..grpo.losses import LOSS_TYPES
from ..tiers import TINY_FRONTIER_TASK

__all__ = ["ProbeConfig", "DEFAULT_TASK", "REFERENCES", "PRECONDITIONERS", "config_dict"]

#: The default job's task: the shipped tiny tier's frontier (:data:`gradprobe.tiers.TINY_FRONTIER_TASK`,
#: chain sums of 3-4 one-digit terms), where its groups have mixed rewards.
DEFAULT_TASK = "chain_sum:" + ",".join(f"{k}={v}" for k, v in TINY_FRONTIER_TASK.items())


@dataclass(frozen=True)
class ProbeConfig:
    """Everything that defines a probe run (saved in ``probe.json``).

    Attributes
    ----------
    model, task : str
        See :func:`gradprobe.models.load_policy` and :func:`gradprobe.tasks.load_task`.
    rewards : tuple[str, ...]
        Registered reward names (:data:`gradprobe.rewards.REWARDS`).
    prompts, group : int
        B and G of the probe batch.
    reference : str
        ``heldout`` or ``direction:PATH`` (a ``.safetensors`` parameter-space vector).
    heldout_prompts, heldout_group : int
        Size of the held-out batch of the ``heldout`` reference (G >= 2; default 16).
    precondition : {"adam", "none"}
        ``adam``: u = P v with P = diag(1 / (sqrt(s) + eps)), s the mean squared minibatch
        GRPO (outcome) gradient of the probe batch weighted by the loss type's token weights, so the
        prediction is for an Adam step (one P per token-weight family of ``loss_type`` and ``loss_types``);
        ``none``: SGD, u = v.
    lr : float
        Learning rate of the update whose gain is predicted.
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        The loss of the predicted update (:data:`gradprobe.grpo.losses.LOSS_TYPES`). It also sets the
        cost yardstick's update and, with ``precondition="adam"``, the token weights of the second
        moment s, so the direction u = P v is this loss's.
    loss_types : tuple[str, ...]
        Extra loss types (``--loss-types``): every reward is also estimated under each, giving entries
        keyed ``REWARD@LOSS_TYPE`` (:func:`gradprobe.probe_keys.entry_key`; e.g. ``outcome@bnpo``) with
        the same fields as the entry ``REWARD``; such an entry equals a separate probe with ``loss_type``
        = that loss type on the same batch and seed. Under ``precondition="none"`` all loss types share
        the one alignment pass (a few multiply-adds per token each). Under ``adam`` each token-weight
        family (:func:`~gradprobe.probe.direction.weight_family`: grpo/gspo, dapo/bnpo/cispo, dr_grpo) gets
        its own second moment, P and alignment pass, as each loss-type arm's Adam in training has its own
        second moment: one
        more second moment (K backwards) and one more jvp pass per family besides ``loss_type``'s
        (``costs.extra_alignment_passes``). Each entry records its ``alignment_family`` and
        ``alignment_pass``. Tokens and seconds per update are the reward's (the yardstick update is
        ``loss_type``'s). Must not repeat ``loss_type`` or itself.
    budget_tokens : int
        Generated-token budget of the extrapolation (tokens).
    budget_seconds : float or None
        Device-seconds budget of the extrapolation, if any.
    update_prompts, update_group : int or None
        B and G of the training update whose gain is predicted, when it differs from the probe
        batch (None: the probe batch's). The expected per-update gain does not depend on the batch
        size (the update follows the batch-mean gradient), but its generated tokens and seconds do:
        ``tokens_per_update`` and ``seconds_per_update`` are the probe batch's scaled by
        (update_prompts x update_group) / (prompts x group), and so is the extrapolation to the budget.
    skip_malformed : bool
        GSM8K, ``jsonl:`` and ``hf:`` tasks only: skip (count and warn about) malformed rows instead of raising
        :class:`~gradprobe.tasks.DatasetFormatError`; the count is ``skipped_rows`` in ``probe.json``.
    threads : int or None
        torch CPU threads during the probe (the caller's setting is restored afterwards). None: 1 for
        a model under :data:`~gradprobe.probe.run.SMALL_MODEL_PARAMETERS` parameters unless
        ``OMP_WAIT_POLICY=PASSIVE`` (as the ``gradprobe`` command sets), else torch's own setting
        (:func:`~gradprobe.probe.run.probe_threads`).

    The defaults are the default job (``gradprobe probe`` with no options, under a minute on 2 CPU
    cores): the shipped ``tiny`` tier on its frontier task :data:`DEFAULT_TASK`, rewards ``outcome``,
    ``mc_value`` and ``hybrid_0.5``, a 16 x 8 probe batch, an 8 x 16 held-out reference and K = 2 MC
    continuations per step boundary, predicting the tier's training (``plans/tiny.toml``: lr 1e-4, a
    budget of 250k generated tokens).
    """

    model: str = "tiny"
    task: str = DEFAULT_TASK
    rewards: tuple[str, ...] = ("outcome", "mc_value", "hybrid_0.5")
    prompts: int = 16
    group: int = 8
    reference: str = "heldout"
    heldout_prompts: int = 8
    heldout_group: int = 16
    precondition: str = "adam"
    lr: float = 1e-4
    loss_type: str = "grpo"
    loss_types: tuple[str, ...] = ()
    budget_tokens: int = 250_000
    budget_seconds: float | None = None
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    mc: MCConfig = field(default_factory=lambda: MCConfig(continuations=2))
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    cosine: bool = False
    n_bootstrap: int = 1000
    micro_batch_size: int = 8
    second_moment_minibatches: int = 4
    progress: bool = True
    reference_check_rows: int = 0
    skip_malformed: bool = False
    update_prompts: int | None = None
    update_group: int | None = None
    threads: int | None = None

    def __post_init__(self):
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type (--loss-type) {self.loss_type!r} is not one of {', '.join(sorted(LOSS_TYPES))}")
        if isinstance(self.loss_types, str):  # "bnpo,cispo" (a plan's [probe] table, a caller) -> a tuple
            object.__setattr__(self, "loss_types", tuple(x.strip() for x in self.loss_types.split(",") if x.strip()))
        object.__setattr__(self, "loss_types", tuple(self.loss_types))
        unknown = [x for x in self.loss_types if x not in LOSS_TYPES]
        if unknown:
            raise ValueError(f"loss_types (--loss-types) {', '.join(map(repr, unknown))}: not a loss type; choose from "
                             f"{', '.join(sorted(LOSS_TYPES))} (gradprobe.grpo.losses.LOSS_TYPES)")
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
        if self.prompts < 1:
            raise ValueError(f"prompts (--prompts) must be >= 1, got {self.prompts}")
        if self.group < 2:
            raise ValueError(f"group (--group) must be >= 2 (group-relative advantages need two completions), got {self.group}")
        if self.heldout_group < 2:
            raise ValueError(f"heldout_group (--heldout-group) must be >= 2 (RLOO baseline), got {self.heldout_group}")
        if not (self.reference == "heldout" or self.reference.startswith("direction:")):
            raise ValueError(f"reference {self.reference!r} must be one of {REFERENCES}")
        if self.precondition not in PRECONDITIONERS:
            raise ValueError(f"precondition {self.precondition!r} must be one of {PRECONDITIONERS}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.budget_tokens < 1:
            raise ValueError(f"budget_tokens (--budget-tokens) must be >= 1, got {self.budget_tokens}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ValueError(f"budget_seconds (--budget-seconds) must be > 0, got {self.budget_seconds}")
        if self.heldout_prompts < 1:
            raise ValueError(f"heldout_prompts (--heldout-prompts) must be >= 1, got {self.heldout_prompts}")
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size (--micro-batch-size) must be >= 1, got {self.micro_batch_size}")
        if self.seed < 0:
            raise ValueError(f"seed (--seed) must be >= 0, got {self.seed}")
        if self.reference_check_rows < 0:
            raise ValueError(f"reference_check_rows must be >= 0 (0 = off), got {self.reference_check_rows}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads (--threads) must be >= 1 (or None: automatic), got {self.threads}")


def config_dict(config: ProbeConfig) -> dict:
    """``config`` as ``probe.json["config"]``: every field, nested configs as dicts, tuples as lists."""
    d = asdict(config)
    d["rewards"] = list(config.rewards)
    d["loss_types"] = list(config.loss_types)
    return d
