"""The domain of a calibration: which studies, models, tasks, budgets and arms it was fitted on.

A calibration learned on one model and task says little about another (issue 12, item 3), so the
calibration file records its domain and :func:`check_domain` warns when a probe falls outside it.
The number is still computed; the caller marks it ``outside_domain``. The domain also records the
arms of its studies, the rewards they trained and their loss types, and :func:`check_rewards` warns
for a probed reward that was never one of them (a user's new reward): the calibration's intervals
were validated on other rewards, so that reward's entry is marked ``outside_domain`` too.

Identities are compared on *resolved* configurations, never on how they were spelled:

- a **task** is its name plus its full configuration, defaults filled in: ``chain_sum`` written
  with an inline config (``"chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"``) and
  the plan form (``[task] name = "chain_sum"`` with ``[task.config]``) resolve to the same key
  (issue 14: comparing the spellings made the "may not transfer" note fire on the study's own
  task). Resolution goes through :func:`gradprobe.tasks.load_task` (which validates and merges
  the inline config) and the defaults of the reasoning-gym dataset's config class. The key is
  written in load_task's own inline syntax, ``name:key=value,...`` with JSON values, keys sorted,
  so it can be passed back to ``--task``. The size of the training pool is not part of a task;
- a **model** is its name as the plan or ``--model`` gives it (an alias such as ``tiny``, a hub id
  or a folder, folders made absolute); its dtype is recorded but not compared;
- a **study** is its folder name plus the SHA-256 of its frozen plan (``study.json``), so two
  folders of the same name with different plans are different studies.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path
from gradprobe.forecast.validated_arms import DEFAULT_LOSS_TYPE, entry_coverage
from gradprobe.tasks import load_task


log = logging.getLogger(__name__)

BUDGET_KINDS = ("tokens", "time", "updates")
"""The budget kinds a calibration can be fitted at (:attr:`Domain.budget_kind`; calib's rows are at ``tokens``)."""

_RG_RESERVED = ("seed", "size")  # reasoning-gym config fields set per call, not part of the task


def resolve_task(spec: str, config: dict | None = None) -> dict:
    """A task's resolved configuration.

    Parameters
    ----------
    spec : str
        As given to :func:`gradprobe.tasks.load_task`: ``"chain_sum"``, ``"chain_sum:min_terms=3"``,
        ``"gsm8k"``, ``"gsm8k:PATH"``.
    config : dict, optional
        Further keyword config (a plan's ``[task.config]``); overrides the inline config.

    Returns
    -------
    dict
        ``name`` (str), ``config`` (dict: every field of the dataset's config, defaults filled in, for
        reasoning-gym tasks; the given keys for GSM8K), ``key`` (:func:`task_key`), ``resolved``
        (False when the task could not be loaded here, e.g. reasoning-gym missing: then ``config``
        holds only the given keys and tasks are compared as written).
    """
    spec = str(spec).strip()
    config = dict(config or {})
    config.pop("train_size", None)  # the pool size, not the task
    if spec == "gsm8k" or spec.startswith("gsm8k:"):
        name = spec if spec == "gsm8k" else "gsm8k:" + str(Path(spec[len("gsm8k:"):].strip()).resolve())
        out = {"name": name, "config": dict(sorted(config.items())), "resolved": True}
        return dict(out, key=task_key(out))
    try:
        task = load_task(spec, **config)
        name, given = task.name, dict(task.config)
        full = _rg_defaults(name)
        full.update(given)
        out = {"name": name, "config": _jsonable(dict(sorted(full.items()))), "resolved": True}
    except Exception as e:  # noqa: BLE001  (any failure to load: compare as written, and say so)
        log.warning("task %r could not be resolved here (%s); it is compared as written", spec, str(e)[:160])
        name, _, inline = spec.partition(":")
        given = _parse_inline(inline)
        given.update(config)
        out = {"name": name.strip(), "config": _jsonable(dict(sorted(given.items()))), "resolved": False}
    return dict(out, key=task_key(out))


def task_key(task: dict) -> str:
    """``name:key=value,...`` (JSON values, keys sorted): the text two tasks are compared by."""
    cfg = task.get("config") or {}
    if not cfg:
        return task["name"]
    return task["name"] + ":" + ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(cfg.items()))


def resolve_model(name: str, *, dtype: str | None = None) -> dict:
    """A model's identity: ``name`` (folders and ``.gguf`` files made absolute), ``dtype`` (recorded
    only), ``key`` (= the name; what models are compared by)."""
    name = str(name).strip()
    p = Path(name)
    if (p.suffix == ".gguf" or p.exists()) and not p.is_absolute():
        name = str(p.resolve())
    return {"name": name, "dtype": dtype, "key": name}


def study_identity(study_dir: str | Path, plan_sha256: str) -> dict:
    """``name`` (folder name), ``plan_sha256``, ``key`` = ``name@sha[:12]`` (the study column of the rows)."""
    name = Path(study_dir).resolve().name
    return {"name": name, "plan_sha256": plan_sha256, "key": f"{name}@{plan_sha256[:12]}"}


@dataclasses.dataclass
class Domain:
    """What a calibration was fitted on.

    Attributes
    ----------
    studies : list of dict
        ``name``, ``plan_sha256``, ``key`` of each study (:func:`study_identity`).
    models : list of dict
        Resolved models (:func:`resolve_model`).
    tasks : list of dict
        Resolved tasks (:func:`resolve_task`); ``config`` None in a version-1 file, which recorded
        task names only (then tasks are compared by name, and :func:`check_domain` says so).
    budget_kind : str
        ``tokens`` (generated tokens; the forecasters' budget), ``time`` or ``updates`` (:data:`BUDGET_KINDS`).
    budget_range : [float, float]
        Smallest and largest budget of the training rows (generated tokens for ``tokens``).
    arms : list of str
        The arms' names as their study plans give them (``mc_value``, ``bnpo``, ``select_half``).
    forecaster : str
        The corrected forecaster column (``forecast_probe``...; ``predicted_gain`` in version-1 files).
    rewards : list of str or None
        The rewards the arms trained (arm ``bnpo`` trains reward ``outcome`` under loss type ``bnpo``;
        :mod:`calib.dataset`'s ``reward`` column). None in files fitted before they were recorded: then
        :func:`check_rewards` compares probed rewards with the arm names, and says so.
    loss_types : list of str or None
        The loss types the arms trained with (``loss_type`` column); None when not recorded.
    """

    studies: list
    models: list
    tasks: list
    budget_kind: str
    budget_range: list
    arms: list
    forecaster: str
    rewards: list | None = None
    loss_types: list | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Domain":
        """Raises KeyError (a missing required field) or TypeError. ``rewards`` and ``loss_types`` may be
        missing (files written before they were recorded). The fields' values are not checked here:
        :func:`calib.file_check.read_domain` checks a calibration file's block first."""
        return cls(**{f.name: d[f.name] if f.default is dataclasses.MISSING else d.get(f.name, f.default)
                      for f in dataclasses.fields(cls)})


def domain_of_rows(rows, *, forecaster: str, budget_kind: str = "tokens") -> Domain:
    """The :class:`Domain` of calibration rows (:func:`calib.dataset.build_rows`)."""
    studies = {s: {"name": s.split("@")[0], "plan_sha256": sha, "key": s}
               for s, sha in zip(rows["study"], rows["plan_sha256"])}
    models = {m: json.loads(c) for m, c in zip(rows["model"], rows["model_config"])}
    tasks = {t: json.loads(c) for t, c in zip(rows["task"], rows["task_config"])}
    values = rows["budget_value"].astype(float)
    return Domain(studies=[studies[k] for k in sorted(studies)], models=[models[k] for k in sorted(models)],
                  tasks=[tasks[k] for k in sorted(tasks)], budget_kind=budget_kind,
                  budget_range=[float(values.min()), float(values.max())], arms=sorted(set(rows["arm"])),
                  forecaster=forecaster, rewards=_recorded(rows, "reward"), loss_types=_recorded(rows, "loss_type"))


def _recorded(rows, column: str) -> list | None:
    """The distinct values of ``column``, sorted; None when the rows lack it or any row has none."""
    if column not in rows.columns or rows[column].isna().any():
        return None
    return sorted({str(v) for v in rows[column]})


def probe_identity(result: dict, *, task: dict | None = None) -> dict:
    """The model, task and budgets of a probe result (``probe.json``): ``model`` and ``task`` resolved,
    ``budgets`` {kind: value} for the kinds the probe has a value for (``tokens`` always, ``time``
    when it was given ``--budget-seconds``). ``task`` overrides the probe's own (a study's probe
    records only the task's name: :func:`calib.apply.load_probe` passes the plan's)."""
    cfg = result.get("config") or {}
    budgets = {}
    if cfg.get("budget_tokens") is not None:
        budgets["tokens"] = float(cfg["budget_tokens"])
    if cfg.get("budget_seconds") is not None:
        budgets["time"] = float(cfg["budget_seconds"])
    return {"model": resolve_model(cfg.get("model", "?"), dtype=cfg.get("dtype")),
            "task": task or resolve_task(cfg.get("task", "?")), "budgets": budgets}


class CalibrationDomainWarning(UserWarning):
    """Python warning of ``calib.apply`` (:func:`calib.apply.apply_calibration`) when probed rewards are
    outside the calibration's domain: it names them and the arms the calibration was fitted on. Filter it
    with :mod:`warnings` (e.g. ``warnings.simplefilter("ignore", CalibrationDomainWarning)``)."""


class DomainWarning(str):
    """A warning of :func:`check_domain`, :func:`check_rewards` or :func:`check_in_sample` (a str), with ``field``
    (model, task, budget_kind, budget_value, reward, loss_type, study), ``outside`` (False for a note that is not a
    departure from the domain) and ``reward`` (the probe entry a reward warning is about; None for the others)."""

    def __new__(cls, message: str, *, field: str, outside: bool = True, reward: str | None = None):
        obj = super().__new__(cls, message)
        obj.field, obj.outside, obj.reward = field, outside, reward
        return obj

    def __getnewargs_ex__(self):  # copy/pickle (pandas deep-copies a DataFrame's attrs, which hold these)
        return (str(self),), {"field": self.field, "outside": self.outside, "reward": self.reward}


def check_domain(calibration, probe_result: dict, *, task: dict | None = None) -> list[DomainWarning]:
    """Warnings for a probe outside the calibration's domain (empty: inside).

    Parameters
    ----------
    calibration : calib.model.Calibration
    probe_result : dict
        ``probe.json`` (its ``config``: ``model``, ``task``, ``budget_tokens``, ``budget_seconds``).
    task : dict, optional
        The probe's resolved task when ``probe.json`` does not say it in full (see
        :func:`probe_identity`).

    Returns
    -------
    list of DomainWarning (str)
        One message per field outside the domain: the model, the task (resolved configuration), the
        budget kind (the probe has no budget of the calibration's kind), the budget value (outside
        half the smallest to twice the largest fitted budget: an extrapolation). The calibrated
        number is still computed; the caller marks it ``outside_domain``. A budget inside that band but outside
        the fitted range gets a note (``outside`` False, :func:`tolerance_note`): it is not marked, but extrapolated.
    """
    dom = calibration.domain
    me = probe_identity(probe_result, task=task)
    warnings = []
    models = [m["key"] for m in dom.models]
    if me["model"]["key"] not in models:
        warnings.append(DomainWarning(
            f"model {me['model']['key']!r} is outside the calibration's domain (models {models}): the calibration was "
            "not fitted on it and may not transfer (`calib report` over studies of several models measures how well "
            "it does)", field="model"))
    warnings += _task_warnings(dom, me["task"])
    kind = dom.budget_kind
    if kind not in me["budgets"]:
        warnings.append(DomainWarning(f"budget kind {kind!r} is outside the probe: the calibration was fitted at a "
                                      f"{kind} budget and the probe has none (its budgets: {sorted(me['budgets'])})",
                                      field="budget_kind"))
    else:
        lo, hi = dom.budget_range
        value = me["budgets"][kind]
        if not (lo / 2 <= value <= 2 * hi) or not math.isfinite(value):
            warnings.append(DomainWarning(f"{kind} budget {value:g} is outside the calibration's domain "
                                          f"({lo:g}-{hi:g}; accepted {lo / 2:g}-{2 * hi:g}): the calibrated gain is "
                                          "an extrapolation", field="budget_value"))
        elif not lo <= value <= hi:
            warnings.append(tolerance_note(kind, value, lo, hi))
    return warnings


def budget_text(kind: str, value: float) -> str:
    """A budget as the notes write it: tokens in k or M (``250k``, ``1.5M``), seconds with ``s``, else ``%g``."""
    if kind == "tokens" and value >= 1e6:
        return f"{value / 1e6:g}M"
    if kind == "tokens" and value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}" + (" s" if kind == "time" else "")


def tolerance_note(kind: str, value: float, lo: float, hi: float) -> DomainWarning:
    """The note of :func:`check_domain` for a budget ``value`` of kind ``kind`` outside the fitted range [``lo``,
    ``hi``] (the training rows' budgets) but within the accepted half-to-twice band (``lo / 2`` to ``2 * hi``): the
    calibrated gain is still given, unmarked, but it is extrapolated in budget. A :class:`DomainWarning` of field
    ``budget_value`` with ``outside`` False (a note, not a departure from the domain)."""
    v, a, b, least, most = (budget_text(kind, x) for x in (value, lo, hi, lo / 2, 2 * hi))
    return DomainWarning(f"{kind} budget {v} is outside the fitted {a}-{b} but within the 0.5x-2x tolerance "
                         f"({least}-{most}): extrapolated, so the calibrated gain and interval were not fitted or "
                         "validated at this budget", field="budget_value", outside=False)


def check_in_sample(calibration, study: dict | None) -> DomainWarning | None:
    """The warning for a probe of a study the calibration was fitted on, else None.

    Parameters
    ----------
    calibration : calib.model.Calibration
    study : dict or None
        The probe's study (:func:`calib.probe_input.probe_study`: ``name``, ``plan_sha256``, ``key``); None for a
        probe outside a study.

    Returns
    -------
    DomainWarning or None
        Field ``study``, ``outside`` False (the probe is inside the domain; the warning is about what its numbers
        mean): the study matches one of ``calibration.domain.studies`` by its frozen plan's SHA-256 (a copy of the
        study under another folder name is the same study) or by its key (``name@sha[:12]``). Its calibrated gains
        and intervals are then in-sample: the calibration saw this study's realized gains.
    """
    if not study:
        return None
    for s in calibration.domain.studies:
        same_plan = bool(s.get("plan_sha256")) and s.get("plan_sha256") == study.get("plan_sha256")
        if same_plan or s.get("key") == study["key"]:
            also = "" if s.get("key") == study["key"] else f", recorded as {s.get('key')}"
            return DomainWarning(
                f"in-sample: the calibration was fitted on the runs of this probe's study ({study['key']}{also}), so "
                "its calibrated gains and intervals here are in-sample (optimistic), not a test of the calibration; "
                "for a held-out check see `calib report`'s leave-one-study-out errors", field="study", outside=False)
    return None


def _task_warnings(dom: Domain, task: dict) -> list[DomainWarning]:
    if any(t.get("config") is None for t in dom.tasks):  # a version-1 file: names only
        names = sorted({t["name"] for t in dom.tasks})
        note = ("the calibration file (version 1) records task names only, so the task is compared by name; refit it "
                "with `calib fit` to record resolved task configurations")
        if task["name"] not in names:
            return [DomainWarning(f"task {task['key']!r} is outside the calibration's domain (tasks {names}); {note}",
                                  field="task")]
        return [DomainWarning(note, field="task", outside=False)]
    keys = [t["key"] for t in dom.tasks]
    if task["key"] in keys:
        return []
    return [DomainWarning(f"task {task['key']!r} is outside the calibration's domain (tasks {keys}, compared by "
                          "resolved configuration): the calibration was not fitted on it and may not transfer",
                          field="task")]


def check_rewards(calibration, probe_result: dict, *, reference_reward: str = "outcome") -> list[DomainWarning]:
    """Warnings for probed rewards that were not among the arms of the calibration's studies (empty: all were).

    The rule is :func:`gradprobe.forecast.validated_arms.entry_coverage`'s: each ``probe.json`` entry
    (``REWARD`` or ``REWARD@LOSS_TYPE``, :mod:`gradprobe.probe_keys`) must train a reward that one of
    the calibration's arms trained (``calibration.domain.rewards``: arm ``grpo_2xlr`` trains
    ``outcome``), and, where the domain records the arms' loss types, a loss type one of them trained
    with. ``outcome`` under the probe's own loss type is GRPO itself (gain 0 by definition): never flagged.

    Parameters
    ----------
    calibration : calib.model.Calibration
    probe_result : dict
        ``probe.json`` (its ``rewards`` names and ``config.loss_type``).
    reference_reward : str

    Returns
    -------
    list of DomainWarning (str)
        One per entry outside the domain (``field`` "reward" or "loss_type", ``reward`` the entry key),
        naming the entry, the calibration's arms and what it means: the conformal intervals were
        validated on other rewards; the calibrated number is still computed and the caller marks that
        entry ``outside_domain``. Notes (``outside`` False) when the domain does not record its arms'
        rewards (a file fitted before they were recorded: rewards are compared with the arm names) or
        loss types (entries of another loss type are then not checked on it).
    """
    dom = calibration.domain
    loss = str((probe_result.get("config") or {}).get("loss_type") or DEFAULT_LOSS_TYPE)
    names = [str(r["name"]) for r in probe_result.get("rewards", [])]
    rewards = dom.arms if dom.rewards is None else dom.rewards
    out = []
    covs = [entry_coverage(n, probe_loss_type=loss, rewards=rewards, loss_types=dom.loss_types,
                           reference_reward=reference_reward) for n in names]
    others = [c for c in covs if not c.is_reference]
    if dom.rewards is None and others:
        out.append(DomainWarning("the calibration file does not record the rewards its arms trained (it was fitted "
                                 "before they were recorded), so probed rewards are compared with its arm names "
                                 f"{dom.arms}; refit it with `calib fit` to record them", field="reward",
                                 outside=False))
    arms = f"arms {dom.arms}" + ("" if dom.rewards is None else f", which trained rewards {dom.rewards}")
    meaning = ("the calibration's intervals were validated on other rewards and may not hold for it; its calibrated "
               "gain is still computed, from the forecaster's number, and marked outside_domain")
    for c in others:
        if not c.reward_known:
            out.append(DomainWarning(_unknown_reward(c.key, c.reward, dom, arms) + f"; {meaning}", field="reward",
                                     reward=c.key))
        elif c.loss_type_known is False:
            out.append(DomainWarning(f"reward {c.key!r} trains with loss type {c.loss_type!r}, outside the "
                                     f"calibration's domain (its arms trained with loss types {dom.loss_types}); "
                                     f"{meaning}",
                                     field="loss_type", reward=c.key))
    off = [c.key for c in others if c.loss_type != DEFAULT_LOSS_TYPE]  # arms fitted before loss types: grpo's
    if dom.loss_types is None and off:
        out.append(DomainWarning(f"the calibration's domain does not record the loss types its arms trained with, so "
                                 f"the loss types of {off} are not checked against it; refit it with `calib fit` on "
                                 "rows that record them", field="loss_type", outside=False))
    return out


def _unknown_reward(key: str, reward: str, dom: Domain, arms: str) -> str:
    """The opening of :func:`check_rewards`' warning for entry ``key`` (reward ``reward``), which no arm of the
    domain trained. When an arm bears the reward's name although ``domain.rewards`` lacks it (an arm may train
    another reward, but the file's ``rewards`` may also have been edited, which data rows without a ``reward``
    column cannot show: :func:`calib.file_check.check_domain_matches_data`), the warning says both, not that the
    reward "was never an arm" beside an arm list that names it."""
    head = f"reward {key!r} is outside the calibration's domain: "
    if dom.rewards is None or reward not in dom.arms:
        return head + f"it was never an arm of the calibration's studies ({arms})"
    return head + (f"by its domain.rewards no arm of the calibration's studies trained it ({arms}), though one of its "
                   f"arms is named {reward!r}; if that arm trained {reward!r}, the file's domain.rewards was edited: "
                   "refit it with `calib fit` (or pass --calibration default)")


def _rg_defaults(name: str) -> dict:
    """Default config of a reasoning-gym dataset (its config dataclass), reserved fields left out."""
    from reasoning_gym.factory import DATASETS

    cls = DATASETS[name][1]
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in _RG_RESERVED:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def _jsonable(d: dict) -> dict:
    """The config as it reads back from JSON (tuples -> lists), so a file and a fresh resolve compare equal."""
    return json.loads(json.dumps(d, default=str))


def _parse_inline(text: str) -> dict:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        k, _, v = item.partition("=")
        try:
            out[k.strip()] = json.loads(v)
        except ValueError:
            out[k.strip()] = v.strip()
    return out
