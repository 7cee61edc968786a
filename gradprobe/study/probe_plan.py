"""A study plan translated into its probe: the :class:`~gradprobe.probe.run.ProbeConfig` settings of the
study's probe of every arm's reward on the initial policy, the settings of the guided arms' own probes
(:func:`guided_probes`: one per distinct ``guidance`` of the arms, in ``probe/guided/<arm>``), and
``arms.json`` (arm -> its probe entry, and a guided arm's probe folder).

The probe's config (:mod:`gradprobe.probe_settings`) is torch-free, so the study runner stays importable
without torch (``gradprobe.Study`` is a lazy, torch-free public name; checking a loss type loads the
loss registry, and the torch work happens in the worker that runs the probe).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..layout import GUIDED_LEFT_OUT, GUIDED_PROBES, PROBE_JSON
from ..probe_keys import entry_key
from ..probe_settings import SETTINGS, ProbeConfig
from ..probe_settings.stages import split_loss_types
from ..training.plan import Plan, PlanError

__all__ = ["PROBE_DEFAULTS", "probe_settings", "check_probe_settings", "guided_probes", "pending_probes",
           "arms_table", "recorded_left_out"]

# probe settings when the plan has no [probe] table: ProbeConfig defaults scaled for a study
PROBE_DEFAULTS = {"prompts": 16, "group": 8, "heldout_prompts": 16, "heldout_group": 16}


def probe_settings(plan: Plan, overrides: dict | None = None) -> dict:
    """Flat settings of the study's probe (:meth:`gradprobe.probe.run.ProbeConfig.from_dict` reads them).

    Order of precedence: ``overrides`` > the plan's ``[probe]`` table (``plan.probe`` when the
    plan format has it, else ``plan.raw["probe"]``) > :data:`PROBE_DEFAULTS` > values from the
    plan (model, task name, rewards, ``[train]`` lr and loss type, token/seconds budgets,
    ``[sampling]``, ``[mc]``, micro-batch size, and the ``[train]`` batch as ``update_prompts`` /
    ``update_group``, so tokens per update are the training update's even when the ``[probe]``
    batch is smaller). The probe's ``lr`` is the plan's ``[train]``
    lr: arms that differ only by ``lr_scale`` share one reward entry (``calib`` scales it).

    Loss types: the probe's ``loss_type`` is the plan's ``[train]`` one (or ``[probe]``'s); the other
    loss types of the arms (``[arms.NAME] loss_type``) become ``loss_types`` (after any the ``[probe]``
    table lists), so every arm's (reward, loss type) pair has an entry, keyed as :func:`arms_table`
    records (:func:`gradprobe.probe_keys.entry_key`); one alignment pass serves them all.

    Guided arms (``[arms.NAME] guidance``) get their reward's entry of this unguided probe too, and a
    probe of their own update (:func:`guided_probes`: these settings with the arm's ``guidance``); a
    ``[probe] guidance`` key is refused, since the one probe serves every arm.

    Raises
    ------
    PlanError
        A ``[probe]`` key that :class:`ProbeConfig` does not have (the valid keys are listed), or ``guidance``.
    """
    settings = _plan_defaults(plan)
    valid = list(SETTINGS)  # the flat settings (ProbeConfig.from_dict); sampling and mc via their tables
    for key, value in {**_probe_table(plan), **(overrides or {})}.items():
        if key == "continuations":  # [probe] continuations = K: the probe's MC continuations per step boundary
            settings["mc"] = dataclasses.replace(settings["mc"], continuations=int(value))
            continue
        if key == "guidance":  # one probe serves every arm: guidance would apply to the unguided arms' entries too
            raise PlanError("[probe] guidance: the study's probe is shared by every arm, so guidance there would "
                            "make the unguided arms' entries guided too; set guidance on the arm ([arms.NAME] "
                            "guidance) and probe that arm alone with `gradprobe probe --guidance "
                            "fraction=F,prefix=P`")
        if key not in valid:
            raise PlanError(f"unknown key 'probe.{key}'; valid keys in [probe]: continuations, "
                            f"{', '.join(k for k in valid if k != 'guidance')}")
        settings[key] = value
    settings["rewards"] = tuple(settings["rewards"])
    given = settings.get("loss_types") or ()
    given = split_loss_types(given, "[probe] loss_types", "(e.g. \"bnpo,cispo\") or a list ([\"bnpo\", \"cispo\"]), "
                             "or leave it out for none", PlanError) if isinstance(given, str) else tuple(given)
    arm_losses = [_arm_loss_type(plan, a) for a in plan.arms.values()]
    settings["loss_types"] = tuple(x for x in dict.fromkeys((*given, *arm_losses)) if x != settings["loss_type"])
    return settings


def check_probe_settings(plan: Plan, overrides: dict | None = None) -> None:
    """Build the study probe's :class:`~gradprobe.probe.run.ProbeConfig` once, before any run.

    Raises
    ------
    PlanError
        ``[probe]: <why>``: a ``[probe]`` key or value the probe refuses (the config's own message).
    """
    try:
        ProbeConfig.from_dict(probe_settings(plan, overrides))
    except (TypeError, ValueError) as e:
        raise PlanError(f"[probe]: {e}") from None


def _plan_defaults(plan: Plan) -> dict:
    """The probe settings the plan implies before its ``[probe]`` table (see :func:`probe_settings`)."""
    rewards = tuple(dict.fromkeys(a.reward for a in plan.arms.values()))
    return {"model": plan.model.name, "task": plan.task.name, "rewards": rewards, "lr": plan.train.lr,
            "loss_type": plan.train.loss_type, "budget_tokens": int(plan.budget.generated_tokens or 1_000_000),
            "budget_seconds": plan.budget.device_seconds, "sampling": plan.sampling, "mc": plan.mc,
            "device": plan.model.device, "dtype": plan.model.dtype,
            "micro_batch_size": plan.train.micro_batch_size, "progress": False,
            "update_prompts": plan.train.prompts_per_update, "update_group": plan.train.group, **PROBE_DEFAULTS}


def _probe_table(plan: Plan) -> dict:
    """The plan's ``[probe]`` table as a dict: ``plan.probe`` when the plan format has it, else
    ``plan.raw["probe"]``."""
    table = getattr(plan, "probe", None)
    if table is None:
        table = (getattr(plan, "raw", None) or {}).get("probe")
    if table is not None and dataclasses.is_dataclass(table):
        table = dataclasses.asdict(table)
    return dict(table or {})


def _arm_loss_type(plan: Plan, arm) -> str:
    """The loss type an arm trains with: its ``[arms.NAME] loss_type``, else the plan's ``[train]`` one."""
    return str((arm.train or {}).get("loss_type", plan.train.loss_type))


def guided_probes(plan: Plan, overrides: dict | None = None) -> dict[str, dict]:
    """The probes of the study's guided arms: one per distinct ``guidance`` among the arms.

    Each is the study probe's :func:`probe_settings` (same ``overrides``, seed, batch and held-out settings)
    with ``guidance`` = that config, ``rewards`` = the rewards of the arms that train with it, and
    ``loss_types`` cut to those arms' loss types (a guided arm's entry is keyed as in the shared probe,
    :func:`gradprobe.probe_keys.entry_key` against the same ``loss_type``). Its folder is
    ``probe/guided/<arm>``, ``<arm>`` the first of those arms in plan order.

    Returns
    -------
    dict[str, dict]
        Folder relative to ``probe/`` (``"guided/<arm>"``) -> ``{"arms": [names], "settings": {...}}``
        (:meth:`~gradprobe.probe.run.ProbeConfig.from_dict` reads ``settings``); empty without guided arms.

    Raises
    ------
    PlanError
        A ``[probe]`` key :class:`~gradprobe.probe.run.ProbeConfig` does not have (:func:`probe_settings`).
    """
    groups: dict[tuple, list[str]] = {}
    for name, a in plan.arms.items():
        if a.guidance:
            groups.setdefault(tuple(sorted(a.guidance.items())), []).append(name)
    if not groups:
        return {}
    base = probe_settings(plan, overrides)
    out = {}
    for key, names in groups.items():
        settings = dict(base, guidance=dict(key), rewards=tuple(dict.fromkeys(plan.arms[n].reward for n in names)))
        needed = {_arm_loss_type(plan, plan.arms[n]) for n in names}
        settings["loss_types"] = tuple(x for x in base.get("loss_types", ()) if x in needed)
        out[f"{GUIDED_PROBES}/{names[0]}"] = {"arms": names, "settings": settings}
    return out


def pending_probes(plan: Plan, probe_folder: Path, overrides: dict | None = None) -> list[str]:
    """The study's probes not done yet: their folders relative to ``probe_folder`` (``STUDY/probe``) whose
    ``probe.json`` does not exist, ``""`` (the shared probe) first, then the ``"guided/<arm>"`` folders of
    :func:`guided_probes` in plan order. Empty when every probe is done.

    A guided probe whose every reward failed on its batch wrote no ``probe.json`` but its record,
    :data:`~gradprobe.layout.GUIDED_LEFT_OUT`: it is done too, as the shared probe is done with the rewards it
    left out (a rerun would fail the same way: the study refuses an edited plug-in reward file while runs of it
    remain). A guided folder with neither file (never probed, or a study from before that record) is pending.

    Raises
    ------
    PlanError
        A ``[probe]`` key :class:`~gradprobe.probe.run.ProbeConfig` does not have (:func:`probe_settings`).
    """
    folder = Path(probe_folder)
    guided = [f for f in guided_probes(plan, overrides) if not (folder / f / GUIDED_LEFT_OUT).exists()]
    return [f for f in ("", *guided) if not (folder / f / PROBE_JSON).exists()]


def recorded_left_out(plan: Plan, probe_folder: Path, overrides: dict | None = None) -> list[dict]:
    """The ``left_out`` records of the study's guided probes whose every reward failed (their
    :data:`~gradprobe.layout.GUIDED_LEFT_OUT` in ``probe_folder``), in plan order, each marked
    ``every_reward_failed``: what the study says of them when ``study.json``'s probe record lacks them (a study
    stopped between the probe's record and its report). A record that cannot be read (missing, not UTF-8 JSON, no
    list of records) gives none: it is the forecast that refuses a damaged one, naming the fix.

    Raises
    ------
    PlanError
        As :func:`pending_probes` raises it.
    """
    from ..forecast.study import failed_guided_probe  # the one reader of the record (pandas: when called)

    out = []
    for f in guided_probes(plan, overrides):
        try:
            record = failed_guided_probe(Path(probe_folder).parent, f)
        except ValueError:  # damaged: the forecast refuses it, naming the fix
            continue
        out += record["left_out"] if record else []
    return out


def arms_table(plan: Plan, overrides: dict | None = None) -> dict:
    """``arms.json``: arm -> {"reward", "loss_type", "probe_entry", "lr_scale", "description"[, "probe_dir"]}.

    ``loss_type`` is the loss the arm trains with; ``probe_entry`` the key of its (reward, loss type)
    in the study probe's ``probe.json`` (:func:`gradprobe.probe_keys.entry_key` against the probe's
    ``loss_type``, from :func:`probe_settings` with the same ``overrides``): ``outcome`` for grpo,
    ``outcome@bnpo`` for an arm with reward outcome and ``loss_type = "bnpo"`` under a grpo plan.
    Readers take ``probe_entry`` and fall back to ``reward`` for an ``arms.json`` written before it
    (:func:`gradprobe.probe_keys.arm_entry`). A guided arm also has ``probe_dir``: the folder of its own
    probe relative to ``probe/`` (``"guided/<arm>"``, :func:`guided_probes`), whose ``probe.json`` has
    the same ``probe_entry`` key; an arm without it (every arm of an older ``arms.json``) reads the shared
    ``probe/probe.json``.

    Raises
    ------
    PlanError
        A ``[probe]`` key :class:`~gradprobe.probe.run.ProbeConfig` does not have (:func:`probe_settings`).
    """
    probe_loss = probe_settings(plan, overrides)["loss_type"]
    folders = {arm: folder for folder, g in guided_probes(plan, overrides).items() for arm in g["arms"]}
    out = {}
    for name, a in plan.arms.items():
        lt = _arm_loss_type(plan, a)
        out[name] = {"reward": a.reward, "loss_type": lt, "probe_entry": entry_key(a.reward, lt, probe_loss),
                     "lr_scale": a.lr_scale, "description": a.description}
        if name in folders:
            out[name]["probe_dir"] = folders[name]
    return out
