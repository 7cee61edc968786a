"""``gradprobe probe --trl-config FILE``: read a TRL ``GRPOConfig`` (YAML or JSON) as probe options.

A researcher who trains with TRL's ``GRPOTrainer`` already wrote down the update they run; this
module maps the fields of that file that define the *first update from a generation batch* onto
``gradprobe probe``'s options, refuses the settings the probe cannot honour (naming the field and
the fix) and lists the rest as not used. Flags given explicitly on the command line win over the
file; ``probe.json`` records, under ``trl_config``, which fields came from the file.

Mapping (:data:`FIELD_FLAGS`, :data:`LOSS_TYPES`, :data:`SCALE_REWARDS`):

=========================  =======================  ==============================================
GRPOConfig field           probe option             note
=========================  =======================  ==============================================
``loss_type``              ``--loss-type``          grpo, dapo, dr_grpo as is; ``bnpo`` and
                                                    ``cispo`` as dapo (see below); sapo, luspo,
                                                    vespo refused
``scale_rewards``          ``--rewards``            the ``outcome`` reward becomes its registered
                                                    variant: group -> outcome, batch ->
                                                    outcome_batch, none -> outcome_dr
``num_generations``        ``--group``              G of the probe batch (and of the update)
``max_completion_length``  ``--max-new-tokens``     also dr_grpo's constant normaliser
``learning_rate``          ``--lr``                 the peak learning rate
``temperature``, ``top_p`` ``--temperature``,
                           ``--top-p``
``seed``                   ``--seed``
``optim``                  ``--precondition``       Adam family -> adam, sgd -> none
``per_device_train_batch_  ``--update-prompts``     prompts per optimizer step =
size`` x ``gradient_                                per_device_train_batch_size x
accumulation_steps``                                gradient_accumulation_steps / num_generations
                                                    (one process)
``beta``                   (none needed)            honoured exactly, see below
=========================  =======================  ==============================================

Why these are exact at the probed policy (TRL 1.16, ``GRPOTrainer._compute_loss``):

- The probe predicts the first optimizer step on a freshly generated batch, where the importance
  ratio r = pi_theta / pi_old is exactly 1. PPO clipping (``epsilon``, ``epsilon_high``,
  ``delta``) is inactive there. CISPO's weight is ``min(r, epsilon_high).detach()`` with dapo's
  normaliser (``_compute_loss``: ``torch.clamp(coef_1, max=self.epsilon_high)``; TRL's
  ``epsilon_high`` defaults to ``epsilon``, 0.2), so at r = 1 its gradient is
  c = min(1, epsilon_high) times dapo's. With ``epsilon_high >= 1`` (ScaleRL's recommended 5.0)
  that is dapo's gradient. With c < 1 an Adam-family step is still dapo's (Adam divides a
  constant gradient scale out, up to its eps), while an SGD step is c times dapo's: the probe's
  learning rate is then multiplied by c, and a note says so.
- ``bnpo`` divides by the active tokens of each local micro-batch; on the probe's one batch this
  is dapo's token mean. It is exact when a micro-batch is the whole generation batch
  (``gradient_accumulation_steps`` 1, one process), otherwise equal up to the micro-batches'
  differing token counts (recorded as a note).
- KL term ``beta``: TRL adds beta * k3 per token, k3 = exp(l_ref - l) - (l_ref - l) - 1 with
  l = log pi_theta(y_t), l_ref the reference model's (Schulman 2020, "Approximating KL
  divergence"). Its gradient is beta * (1 - exp(l_ref - l)) * grad l, which is exactly zero where
  pi_theta = pi_ref. TRL's reference model is the initial policy, so at the initial policy the
  predicted update (which has no KL term) is exact for every beta. At a later checkpoint with
  beta != 0 the probe omits beta * grad KL; a note in ``probe.json`` says so.

Refused unless at TRL's default (the probe's update has no such term): ``num_iterations`` != 1,
``importance_sampling_level`` != token, ``top_entropy_quantile`` < 1, ``entropy_coef`` != 0,
``use_adaptive_entropy``, ``mask_truncated_completions``, ``off_policy_mask_threshold``,
``top_k``, ``min_p``, ``repetition_penalty``, ``generation_kwargs``. Fields that do not change
the predicted update (logging, saving, hardware, vLLM, the schedule) are listed under
``trl_config.ignored``; those that change it slightly (``max_grad_norm``, warm-up, weight decay)
get a note. Fields of TRL's ``ScriptArguments`` and ``ModelConfig`` (``dataset_name``,
``model_name_or_path``...), which ``trl grpo --config`` files mix in, are known and ignored.

Reading and validating the file against TRL is :mod:`gradprobe.integrations.trl_config_file`
(:func:`read_trl_config`, :class:`TrlConfigError`, re-exported here); this module maps its fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass, field

from ..config import preconditioner
from ..probe_settings import MAX_SEED, ReferenceSettings
from .trl_config_file import FLOAT_FIELDS, MACHINE_FIELDS  # noqa: F401 - importable from here, as before the split
from .trl_config_file import TrlConfigError, _default, _grpo_fields, read_trl_config

__all__ = ["TrlConfigError", "TrlProbeSettings", "read_trl_config", "apply_trl_config", "mark_explicit_flags",
           "FIELD_FLAGS", "LOSS_TYPES", "SCALE_REWARDS"]

#: GRPOConfig field -> (``argparse`` dest of ``gradprobe probe``, its flag), for the one-to-one fields.
FIELD_FLAGS = {
    "loss_type": ("loss_type", "--loss-type"),
    "num_generations": ("group", "--group"),
    "max_completion_length": ("max_new_tokens", "--max-new-tokens"),
    "learning_rate": ("lr", "--lr"),
    "temperature": ("temperature", "--temperature"),
    "top_p": ("top_p", "--top-p"),
    "seed": ("seed", "--seed"),
    "optim": ("precondition", "--precondition"),
}
#: TRL ``loss_type`` -> the probe's ``--loss-type`` (module docstring: why bnpo and cispo are dapo).
LOSS_TYPES = {"grpo": "grpo", "dapo": "dapo", "dr_grpo": "dr_grpo", "bnpo": "dapo", "cispo": "dapo"}
#: TRL ``scale_rewards`` -> the registered outcome reward with that advantage scale.
SCALE_REWARDS = {"group": "outcome", "batch": "outcome_batch", "none": "outcome_dr", True: "outcome",
                 False: "outcome_dr"}
#: Fields the probe cannot honour unless they hold TRL's default: field -> what the probe lacks.
REFUSED_UNLESS_DEFAULT = {
    "num_iterations": "the probe predicts one on-policy update per generation batch",
    "importance_sampling_level": "the probe's loss is token-level (GSPO's sequence-level ratio is not modelled)",
    "top_entropy_quantile": "the probe keeps every completion token in the loss",
    "entropy_coef": "the probe's update has no entropy bonus",
    "use_adaptive_entropy": "the probe's update has no entropy bonus",
    "mask_truncated_completions": "the probe keeps truncated completions in the loss",
    "off_policy_mask_threshold": "the probe's batch is on-policy (no off-policy mask)",
    "top_k": "the probe's command line samples without top-k",
    "min_p": "the probe's sampler has no min-p",
    "repetition_penalty": "the probe's sampler has no repetition penalty",
    "generation_kwargs": "the probe's sampler takes temperature, top_p and max_completion_length only",
}
#: Fields that change the real update slightly but are not in the prediction: field -> note.
NOTED = {
    "max_grad_norm": "gradient clipping is not in the prediction (the probe predicts the unclipped step)",
    "warmup_ratio": "the gain is predicted at the peak learning_rate, not the warm-up's first rate",
    "warmup_steps": "the gain is predicted at the peak learning_rate, not the warm-up's first rate",
    "lr_scheduler_type": "the gain is predicted at the peak learning_rate",
    "weight_decay": "decoupled weight decay is not in the prediction",
    "reward_weights": "the probe scores each reward named in --rewards separately",
    "epsilon": "PPO clipping is inactive at importance ratio 1 (the first update on a generation batch)",
    "epsilon_high": "PPO clipping is inactive at importance ratio 1 (the first update on a generation batch)",
    "delta": "PPO clipping is inactive at importance ratio 1 (the first update on a generation batch)",
}
#: Fields that set the prompts per optimizer step (``--update-prompts``).
BATCH_FIELDS = ("per_device_train_batch_size", "gradient_accumulation_steps", "generation_batch_size",
                "steps_per_generation")


@dataclass
class TrlProbeSettings:
    """What a TRL config file contributed to one ``gradprobe probe`` run (``probe.json["trl_config"]``).

    Attributes
    ----------
    path : str
    fields : dict
        The file's fields as read (TRL names).
    mapped : dict[str, dict]
        Per mapped field: ``value`` (the file's), ``flag``, ``probe_value`` (what the probe uses when
        applied) and ``applied`` (False where an explicit flag won; then ``overridden_by``).
    notes : list[str]
        Approximations and exactness arguments (bnpo, beta, clipping, warm-up...).
    ignored : list[str]
        Fields that do not change the predicted update.
    reference_reward : str
        The outcome reward the forecast compares against (``outcome`` unless scale_rewards chose a variant).
    """

    path: str
    fields: dict
    mapped: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    ignored: list = field(default_factory=list)
    reference_reward: str = "outcome"

    def record(self) -> dict:
        """The JSON-serialisable block written to ``probe.json`` under ``trl_config``."""
        return {"path": self.path, "fields": _jsonable(self.fields), "mapped": _jsonable(self.mapped),
                "from_file": sorted(k for k, v in self.mapped.items() if v["applied"]),
                "overridden_by_flags": {k: v["overridden_by"] for k, v in self.mapped.items() if not v["applied"]},
                "notes": list(self.notes), "ignored": sorted(self.ignored), "reference_reward": self.reference_reward}


def _jsonable(x):
    return json.loads(json.dumps(x, default=str))


def _optim_to_precondition(value) -> str | None:
    name = str(getattr(value, "value", value)).lower()
    if "adam" in name:
        return "adam"
    if name.startswith("sgd"):
        return "none"
    return None


@dataclass
class _FieldMapping:
    """One file's fields being mapped onto probe options: the file (``fields`` as read, ``cfg`` after
    TRL's normalisation), the flags given explicitly, and what the mapping has decided so far
    (``settings``; ``updates``: argparse dest -> value, applied only once every field is accepted)."""

    path: str
    fields: dict
    cfg: dict
    explicit: set
    settings: TrlProbeSettings
    updates: dict = field(default_factory=dict)

    def refuse(self, name: str, why: str, fix: str):
        raise TrlConfigError(f"--trl-config {self.path}: field {name!r} = {self.fields[name]!r}: {why}; {fix}")

    def take(self, name: str, dest: str, flag: str, probe_value) -> None:
        """Record field ``name`` as mapped to ``flag``; queue ``probe_value`` unless the flag was given."""
        won = dest in self.explicit
        self.settings.mapped[name] = {"value": self.fields[name], "flag": flag, "probe_value": probe_value,
                                      "applied": not won, "overridden_by": flag if won else None}
        if not won:
            self.updates[dest] = probe_value

    def one_to_one(self, name: str) -> None:
        """A field of :data:`FIELD_FLAGS`: loss_type via :data:`LOSS_TYPES`, optim via the preconditioner."""
        dest, flag = FIELD_FLAGS[name]
        value = self.cfg[name]
        if name == "loss_type":
            if value not in LOSS_TYPES and dest not in self.explicit:
                self.refuse(name, f"the probe supports loss_type {', '.join(LOSS_TYPES)} (bnpo and cispo as dapo)",
                            f"use one of them in the file, or pass {flag} to probe with another normaliser")
            value = LOSS_TYPES.get(value, value)
            if self.fields[name] == "bnpo" and self.cfg.get("gradient_accumulation_steps", 1) != 1:
                self.settings.notes.append("loss_type bnpo is probed as dapo: exact when a micro-batch is the whole "
                                           "generation batch; with gradient_accumulation_steps > 1 equal up to the "
                                           "micro-batches' differing token counts")
        elif name == "optim":
            value = _optim_to_precondition(value)
            if value is None and dest not in self.explicit:
                self.refuse(name, "the probe predicts an Adam-family step (--precondition adam) or SGD (none)",
                            "use an adamw_* or sgd optimizer in the file, or pass --precondition adam|none")
        elif isinstance(value, float) and name in ("learning_rate", "temperature", "top_p") \
                and not math.isfinite(value):
            self.refuse(name, "not a finite number", "write a finite number")
        elif name == "seed" and isinstance(value, int) and not isinstance(value, bool) \
                and not 0 <= value <= MAX_SEED and dest not in self.explicit:  # as --seed checks it
            self.refuse(name, "the probe's seed must be in [0, 2**63 - 1] (it seeds numpy and torch)",
                        "write a seed in that range, or pass --seed")
        elif name == "learning_rate" and isinstance(value, (int, float)) and not value > 0 \
                and dest not in self.explicit:
            self.refuse(name, "a learning rate must be > 0", "write TRL's learning_rate (a number > 0), or pass --lr")
        self.take(name, dest, flag, value)

    def scale_rewards(self, name: str, rewards: str) -> None:
        """``scale_rewards``: the ``outcome`` entry of ``--rewards`` becomes its :data:`SCALE_REWARDS` variant."""
        variant = SCALE_REWARDS.get(self.cfg[name])
        if variant is None and "rewards" not in self.explicit:
            self.refuse(name, "the probe supports scale_rewards group, batch or none",
                        "use one of them, or pass --rewards naming the outcome variant yourself")
        probed = ",".join(variant if r.strip() == "outcome" else r.strip() for r in str(rewards).split(","))
        self.take(name, "rewards", "--rewards", probed)
        if self.settings.mapped[name]["applied"]:
            self.settings.reference_reward = variant
            self.settings.notes.append(f"scale_rewards {self.cfg[name]!r}: the outcome reward is probed as "
                                       f"{variant!r}; the dense rewards' outcome part keeps group scaling")

    def beta(self, name: str) -> None:
        """``beta``: honoured exactly at the initial policy (module docstring); a note when nonzero."""
        beta = float(self.fields[name])
        self.settings.mapped[name] = {"value": beta, "flag": None, "probe_value": None, "applied": True,
                                      "overridden_by": None}
        if beta != 0.0:
            self.settings.notes.append(
                f"beta {beta:g}: TRL's KL term beta * k3 has gradient beta * (1 - exp(l_ref - l)) * grad l, zero "
                "where the policy equals the reference model (TRL's reference is the initial policy), so the "
                "prediction is exact at the initial policy; at a later checkpoint it omits beta * grad KL")

    def at_default(self, name: str, known: dict) -> None:
        """A field of :data:`REFUSED_UNLESS_DEFAULT`: refused unless it holds TRL's default."""
        default = _default(known[name]) if name in known else dataclasses.MISSING
        value = self.fields[name]
        if value != default and not (value in (None, {}) and default in (None, {})):
            self.refuse(name, REFUSED_UNLESS_DEFAULT[name],
                        f"remove it or set it to TRL's default {default!r} to probe this setup")

    def update_prompts(self) -> None:
        """:data:`BATCH_FIELDS` -> ``--update-prompts`` = per_device_train_batch_size x
        gradient_accumulation_steps / num_generations (whole groups, else TrlConfigError)."""
        fields, cfg = self.fields, self.cfg
        per_step = int(cfg["per_device_train_batch_size"]) * int(cfg["gradient_accumulation_steps"])
        group = int(cfg["num_generations"])
        if per_step % group:
            names = ", ".join(f for f in ("per_device_train_batch_size", "gradient_accumulation_steps") if f in fields)
            raise TrlConfigError(f"--trl-config {self.path}: fields {names or 'per_device_train_batch_size'}: "
                                 f"{per_step} completions per optimizer step are not whole groups of "
                                 f"num_generations {group}; make per_device_train_batch_size x "
                                 "gradient_accumulation_steps a multiple of num_generations")
        name = "per_device_train_batch_size" if "per_device_train_batch_size" in fields else \
            next(f for f in BATCH_FIELDS if f in fields)
        dest = "update_prompts"
        won = dest in self.explicit
        self.settings.mapped[name] = {
            "value": fields[name], "flag": "--update-prompts", "probe_value": per_step // group, "applied": not won,
            "overridden_by": "--update-prompts" if won else None,
            "from": "per_device_train_batch_size x gradient_accumulation_steps / num_generations"}
        if not won:
            self.updates[dest] = per_step // group


def apply_trl_config(args: argparse.Namespace, *, explicit: set[str] | None = None) -> TrlProbeSettings:
    """Fill ``gradprobe probe``'s parsed options from ``args.trl_config``; explicit flags win.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``gradprobe probe`` options; ``args.trl_config`` the file. Modified in place: every
        mapped option not given explicitly takes the file's value.
    explicit : set[str], optional
        ``argparse`` dests given on the command line (default: ``args._explicit_flags``, which
        :func:`mark_explicit_flags` records).

    Returns
    -------
    TrlProbeSettings

    Raises
    ------
    TrlConfigError
        Everything :func:`read_trl_config` raises; an unsupported ``loss_type``, ``scale_rewards``
        or ``optim``; a field of :data:`REFUSED_UNLESS_DEFAULT` away from TRL's default; a batch
        whose samples per optimizer step are not whole groups. Each message names the file, the
        field and the fix. ``args`` is left unchanged when it raises.
    """
    path = str(args.trl_config)
    explicit = set(getattr(args, "_explicit_flags", ()) if explicit is None else explicit)
    fields, cfg = read_trl_config(path)
    known = _grpo_fields()
    m = _FieldMapping(path=path, fields=fields, cfg=cfg, explicit=explicit,
                      settings=TrlProbeSettings(path=path, fields=fields))
    for name in fields:  # in the file's order: the notes keep it
        if name in FIELD_FLAGS:
            m.one_to_one(name)
        elif name == "scale_rewards":
            m.scale_rewards(name, args.rewards)
        elif name == "beta":
            m.beta(name)
        elif name in REFUSED_UNLESS_DEFAULT:
            m.at_default(name, known)
        elif name in NOTED:
            m.settings.notes.append(f"{name} = {fields[name]!r}: {NOTED[name]}")
        elif name not in BATCH_FIELDS:
            m.settings.ignored.append(name)
    if any(f in fields for f in BATCH_FIELDS):
        m.update_prompts()
    if fields.get("loss_type") == "cispo" and "loss_type" not in explicit:
        _cispo_cap(cfg, args, m.updates, m.settings)
    for dest, value in m.updates.items():  # nothing changes unless every field was accepted
        setattr(args, dest, value)
    return m.settings


def _cispo_cap(cfg, args, updates: dict, settings: TrlProbeSettings) -> None:
    """CISPO probed as dapo: its weight at importance ratio 1 is c = min(1, epsilon_high) (module
    docstring); an SGD step is c x dapo's, so the probe's learning rate is multiplied by c."""
    high = cfg.get("epsilon_high")
    cap = float(high if high is not None else cfg.get("epsilon", 0.2))
    c = min(1.0, cap)
    what = (f"loss_type cispo is probed as dapo: at importance ratio 1 (the first update on a generation batch) "
            f"TRL's weight min(r, epsilon_high) is min(1, {cap:g}) = {c:g}, with dapo's normaliser")
    if c >= 1.0:
        settings.notes.append(what + ", so the gradients are equal")
    elif not preconditioner(updates.get("precondition", getattr(args, "precondition", ReferenceSettings.precondition))
                            ).second_moment:  # SGD: the cap scales the step
        lr = float(updates.get("lr", args.lr)) * c
        updates["lr"] = lr
        settings.notes.append(what + f": the SGD step is {c:g} x dapo's, so the probe's learning rate is "
                                     f"multiplied by {c:g} (now {lr:g}); ScaleRL recommends epsilon_high = 5.0")
    else:
        settings.notes.append(what + f": the gradient is {c:g} x dapo's, which an Adam step divides out (up to "
                                     "its eps), so the predicted step is dapo's; ScaleRL recommends epsilon_high = 5.0")


def mark_explicit_flags(parser: argparse.ArgumentParser, attr: str = "_explicit_flags") -> None:
    """Make ``parser`` record which options the command line gave explicitly.

    argparse calls an action only for options present on the command line (defaults are set
    directly), so each option's action class is replaced by a subclass that adds its ``dest`` to
    ``namespace.<attr>`` (a frozenset) before doing its work. A flag given with its default value
    still counts as explicit, which comparing values with defaults could not tell.
    """
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        base = type(action)

        def __call__(self, parser, namespace, values, option_string=None, _base=base):
            setattr(namespace, attr, frozenset(getattr(namespace, attr, frozenset())) | {self.dest})
            return _base.__call__(self, parser, namespace, values, option_string)

        action.__class__ = type(f"Explicit{base.__name__}", (base,), {"__call__": __call__})
