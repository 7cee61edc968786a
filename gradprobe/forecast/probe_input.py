"""What a forecast reads from a probe result: its batches, the budget, the arms and each update's cost.

The checks here turn a malformed request into a ``ValueError`` naming the field and the fix before any
Monte Carlo work (:func:`~gradprobe.forecast.budget_forecast.forecast_rewards`). A probe entry's recorded
summaries are checked against its per-group lists (:func:`check_entry_summaries`): a hand-edited ``per_group``
(the forecast's rho is read from it) no longer moves a forecast silently. A multi-batch probe's pooled entries are
checked against its batches (:func:`check_pooled_entries`): the forecast reads the batches, the probe's table and
report the pooled entries, so an edit of either is refused. A probe.json as the probe wrote it is also checked
against its own records (:func:`check_entry_inputs`, which :func:`gradprobe.load_probe` runs): each entry's
``tokens_per_update`` against its batch's generated tokens, its ``lr`` and budgets against ``config``'s.

Each refusal names the file read (``source``, else ``probe.json``) and the fix derived from its folder
(:func:`file_and_fix`), or the caller's (``fix=``: calib's for a result passed to it as a dict, whose refusals then
say the result, not a file, was edited).

Not checked: an entry's ``snr`` (and ``interval``): the probe computes snr = |inner_product| / sd, sd the standard
deviation of a bootstrap over groups (:func:`gradprobe.probe.estimate` ``_reward_estimate``,
:func:`gradprobe.probe.batches.combine_batches`) whose replicates (numpy's random stream, and for most loss types
per-group token denominators) the file does not hold, so no recorded field gives it exactly; an edited ``snr``
shows in the probe's table as written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..config import MAX_LR
from ..layout import RETRAIN_CLAUSE, rerun_advice, restore_advice
from ..ledger import CHARGED
from ..outputs import PER_UPDATE_FIELDS, is_json_number, json_float, json_number_text, json_short, per_update_problem

__all__ = ["probe_batches_of", "pooled_entries", "check_request", "check_batches", "budget_of", "arms_of", "update_costs",
           "update_batches", "check_entry_numbers", "check_entry_summaries", "check_pooled_entries",
           "check_entry_inputs", "check_entries", "file_and_fix", "TRAIN_FORWARDS", "PER_UPDATE_FIELDS", "PROBE_FIX"]

TRAIN_FORWARDS = 3.0  # forward + backward of a trained token, in forwards (gradprobe.ledger)

#: a probe entry's fields read as numbers (each element of a list one): a number, null or "inf"/"-inf"
#: (:func:`gradprobe.outputs.json_float`), never true/false or other text
_NUMBER_FIELDS = ("per_group", "signal_proxy_per_group", "predicted_gain_per_update", "predicted_gain_at_budget", "snr")
#: a probe entry's intervals, [low, high] (null without a bootstrap): each end a number as :data:`_NUMBER_FIELDS`
_INTERVAL_FIELDS = ("interval", "gain_interval_per_update", "gain_interval_at_budget")
#: the probe's settings a probe entry and ``config`` record, where not null: what the probe accepts
#: (:class:`gradprobe.probe_settings.stages.UpdateSettings` ``lr``, ``BudgetSettings``), never a boolean or text
_SETTINGS = {"lr": f"a finite number > 0 and at most {MAX_LR:g} (the probe's --lr)",
             "budget_tokens": "a finite number >= 1 of generated tokens (the probe's --budget-tokens)",
             "budget_seconds": "a finite number > 0 of device-seconds (the probe's --budget-seconds)"}
#: what a list's sum is in the probe's formulas (:func:`check_entry_numbers` refuses a list whose sum overflows)
_LIST_SUMS = {"per_group": "sum(per_group) is inner_product",
              "signal_proxy_per_group": "sum(signal_proxy_per_group) gives signal_proxy"}
#: a recorded summary matches its per-group lists within _SUMMARY_REL x (the sum of its terms' magnitudes) +
#: _SUMMARY_ABS in a file as the probe writes it: the writer's numpy sums differ from math.fsum by a few ulps of that,
#: and JSON round-trips floats exactly (repr), so only an edit of the file (or damage) trips it; a file whose numbers
#: were re-saved at d >= _MIN_DIGITS significant digits gets _ROUNDED_REL x 10^(1-d) instead (:func:`_tolerance`)
_SUMMARY_REL, _SUMMARY_ABS = 1e-9, 1e-300
_ROUNDED_REL, _MIN_DIGITS = 5.0, 6
#: a file whose numbers were re-saved at D decimal places is read for D >= _MIN_DECIMALS (:func:`_tolerance`)
_MIN_DECIMALS = 4
#: how to write a probe.json again (the probe's own folder, or a study's probe)
PROBE_FIX = ("re-run the probe (`gradprobe probe --out DIR`); for a study's probe, delete STUDY/probe/probe.json "
             "and resume the study with `gradprobe study STUDY/plan.toml --out STUDY` (finished runs are kept); for "
             f"a study without runs/ (a shipped study keeps only its tables), where resuming {RETRAIN_CLAUSE}, "
             "restore STUDY/probe/probe.json from a copy of the study")


def probe_batches_of(probe, source=None, *, fix: str | None = None) -> list[dict]:
    """The probe batches of a probe result: a ``probe.json`` dict (with ``batches`` when
    :func:`gradprobe.probe.batches.run_probe_batches` made it), or a list of per-batch results.

    Every entry's numbers are checked (:func:`check_entry_numbers`), and its recorded summaries against its
    per-group lists (:func:`check_entry_summaries`: ``group`` is the batch's ``batch.group``, else
    ``config.group``; a batch of a multi-batch probe records no ``lr``, so its gain is checked at ``config.lr``,
    the one every batch used, :func:`gradprobe.probe.batches.combine_batches`); ``source`` (the file the dict was
    read from, e.g. ``STUDY/probe/probe.json``) names the file in the message, else ``probe.json``. ``fix``: the
    fix every refusal names, the caller's (e.g. calib's for a result passed to it as a dict); default None: derived
    from ``source``'s folder (:func:`file_and_fix`). Given without ``source``, a refusal of damage speaks of the
    result the caller holds, not of a file (:func:`_words`).

    Returns
    -------
    list of dict
        Each: ``rewards`` (name -> entry), ``reference`` (dict), ``config`` (dict), ``ledger`` (dict),
        ``batch`` (dict), ``draw`` (reference draw id), ``trl_config`` (the ``--trl-config`` record of the batch or of
        the whole probe, None without one).

    Raises
    ------
    ValueError
        Anything else (the message says what is expected), or an entry's number field that holds no number, e.g.
        ``rewards[1].tokens_per_update: true`` (:func:`check_entry_numbers`: the file, field and fix named), or a
        recorded summary that its per-group lists contradict, e.g. ``rewards[1].inner_product`` after ``per_group``
        was edited (:func:`check_entry_summaries`: the file, reward, field, both values and the fix named), or, in
        a multi-batch ``probe.json``, a pooled entry its batches contradict, e.g. ``rewards[1].inner_product``
        after every batch's ``per_group`` and sums were tripled (:func:`check_pooled_entries`), or a ``batches``
        field that is no non-empty list where it is present or where ``config.probe_batches`` (else an entry's
        ``probe_batches``) records more than one batch (e.g. ``batches: []`` at ``probe_batches`` 2: the pooled
        entries would be read as one unchecked batch; :func:`_check_batches_field`). A ``per_group`` whose values'
        sum overflows a float (1e308, 1e308) is refused by :func:`check_entry_numbers`, never an OverflowError.
    """
    return _batches_of(probe, source, fix=fix)


def _batches_of(probe, source, pooled_sizes: dict | None = None, *, fix: str | None = None) -> list[dict]:
    """:func:`probe_batches_of`; ``pooled_sizes`` (entry name -> its batches' group counts, from
    :func:`_group_counts`) lets :func:`check_entry_summaries` check a pooled entry's ``signal_proxy``; ``fix``: the
    caller's, passed on to every check (default None: derived from ``source``, :func:`file_and_fix`)."""
    if isinstance(probe, dict) and pooled_sizes is None:  # (the pooled entries are read with batches=None)
        _check_batches_field(probe, source, fix=fix)
    batched = isinstance(probe, dict) and isinstance(probe.get("batches"), list) and bool(probe["batches"])
    if isinstance(probe, (list, tuple)):
        items = list(probe)
    elif batched:
        _check_batch_objects(probe["batches"], source, fix=fix)
        items = [dict(b, config=b.get("config") or probe.get("config")) for b in probe["batches"]]
    elif isinstance(probe, dict):
        items = [probe]
    else:
        raise ValueError(f"probe must be a probe result (probe.json dict) or a list of them, got {type(probe).__name__}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "rewards" not in item:
            raise ValueError(f"probe batch {i} has no 'rewards'; pass probe.json dicts (gradprobe probe / run_probe)")
        rewards = item["rewards"]
        prefix = f"batches[{i}]." if len(items) > 1 or batched else ""
        check_entries(rewards, prefix, source, fix=fix)
        entries = {r["name"]: r for r in rewards} if isinstance(rewards, list) else \
            {k: dict(v, name=v.get("name", k)) for k, v in rewards.items()}
        config = item.get("config") if isinstance(item.get("config"), dict) else {}
        summary = item.get("batch") if isinstance(item.get("batch"), dict) else {}
        group = summary.get("group") if summary.get("group") is not None else config.get("group")
        for key, entry in (enumerate(rewards) if isinstance(rewards, list) else rewards.items()):
            where, name = f"{prefix}rewards[{key if isinstance(rewards, list) else repr(key)}]", entry.get("name", key)
            check_entry_numbers(entry, where, source, fix=fix)
            check_entry_summaries(entry, where, source, group=group, lr=config.get("lr") if batched else None,
                                  batch_sizes=(pooled_sizes or {}).get(name) if isinstance(name, str) else None,
                                  pooled=pooled_sizes is not None, fix=fix)
        ref = item.get("reference") or {}
        draw = ref.get("draw", ref.get("norm", i))
        trl = item.get("trl_config") or (probe.get("trl_config") if isinstance(probe, dict) else None)
        out.append({"rewards": entries, "reference": ref, "config": item.get("config") or {},
                    "ledger": item.get("ledger") or {}, "batch": item.get("batch") or {}, "draw": draw,
                    "trl_config": trl})
    if batched:  # the pooled entries (the probe's table and report) against the batches (the forecast's)
        check_pooled_entries(probe, source, fix=fix)
    return out


def _check_batches_field(probe: dict, source, *, fix: str | None = None) -> None:
    """Refuse a probe.json dict whose ``batches`` field is not a non-empty list while it holds one, or while its
    ``config.probe_batches`` (else a reward entry's ``probe_batches``) records more than one batch: the pooled
    entries would be read as one batch, unchecked against the batches the forecast reads (``combine_batches``
    writes ``batches``, one object per batch, with ``probe_batches`` = N in ``config`` and every pooled entry). A
    recorded ``probe_batches`` that is no count >= 1 is refused too, where ``batches`` is no list of batches. One line:
    the file (``source``, else ``probe.json``), the field, its value and the fix (``fix``, the caller's, when
    given)."""
    batches = probe.get("batches")
    if isinstance(batches, list) and batches:
        return
    config = probe.get("config") if isinstance(probe.get("config"), dict) else {}
    field, stated = "config.probe_batches", config.get("probe_batches")
    rewards = probe.get("rewards")
    if stated is None and isinstance(rewards, list):
        field, stated = next(((f"rewards[{j}].probe_batches", e["probe_batches"]) for j, e in enumerate(rewards)
                              if isinstance(e, dict) and e.get("probe_batches") is not None), (field, None))
    n, (file, advice) = _count(stated), _file_and_lazy_fix(source, edited=True, fix=fix)
    holder = _words(source, fix=fix)[0]
    held = "no batches field" if "batches" not in probe else f"batches {json_short(batches)}"
    tail = f"{_edited(source, fix=fix)}, so a forecast from it would not be the probe's"
    if stated is not None and (n is None or n < 1):
        raise ValueError(f"{file} field {field} is {json_short(stated)}, and {holder} holds {held}: probe_batches is "
                         f"the number of batches the probe pooled, a whole number >= 1; {tail}; {advice}")
    if n is not None and n > 1:
        raise ValueError(f"{file} field {field} is {n}, but {holder} holds 0 batches ({held}; "
                         "gradprobe.probe.batches.combine_batches writes the list of its batch objects, which the "
                         f"forecast reads): {tail}; {advice}")
    if "batches" in probe:
        raise ValueError(f"{file} field batches is {json_short(batches)}: a multi-batch probe.json holds the list of "
                         f"its batch objects there (a single-batch one no batches field); {tail}; {advice}")


def _check_batch_objects(batches: list, source, *, fix: str | None = None) -> None:
    """Refuse a ``batches`` list of a probe.json holding something that is no batch object (an object with a
    ``rewards`` field, as :func:`gradprobe.probe.batches.run_probe_batches` writes each): one line naming the file
    (``source``, else ``probe.json``), the field (e.g. ``batches[1]``), its value and the fix (``fix``, the
    caller's, when given)."""
    file, advice = _file_and_lazy_fix(source, edited=True, fix=fix)
    for k, b in enumerate(batches):
        if not (isinstance(b, dict) and "rewards" in b):
            what = f"is {json_short(b)}, not an object" if not isinstance(b, dict) else "has no 'rewards'"
            raise ValueError(f"{file} field batches[{k}] {what}: each batch of a multi-batch probe.json is an object "
                             f"holding its reward entries ('rewards', as gradprobe.probe.batches.run_probe_batches "
                             f"writes it); {_edited(source, fix=fix)}; {advice}")


def file_and_fix(source, edited: bool = False, *, fix: str | None = None) -> tuple[str, str]:
    """How a message names the probe.json ``source`` and its one fix, derived from the folder here so that no
    caller rewrites a message.

    Parameters
    ----------
    source : str, Path or None
        The probe.json read (a path; only its text and its folder are used, the file need not exist), or None for a
        probe result held in memory.
    edited : bool
        True where the file was edited or damaged after the probe wrote it: the fix then restores it or writes it
        again.
    fix : str, optional
        The caller's fix (e.g. calib's for a result passed to it as a dict, which has no folder to derive one from):
        returned as it is, whatever ``edited``. Default None: derived as below.

    Returns
    -------
    (file, fix) : tuple[str, str]
        ``file``: ``str(source)``, else ``"probe.json"``. ``fix``: to write the file again
        (:func:`gradprobe.layout.rerun_advice` of its folder: ``gradprobe probe --out``, or the study's advice for a
        study's probe; :data:`PROBE_FIX` without a file), or, when ``edited``, to restore it or write it again
        (:func:`gradprobe.layout.restore_advice`: for the probe of a study without ``runs/``, only restoring it from
        a copy of the study; ``"restore the file, or " + PROBE_FIX`` without a file); or ``fix`` when given.

    Raises
    ------
    Nothing: it reads no file; it only asks :mod:`gradprobe.layout` which files exist around the folder (whether it
    is a study's probe folder, whether the study keeps ``runs/``).
    """
    if fix is not None:
        return ("probe.json" if source is None else str(source)), fix
    if source is None:
        return "probe.json", f"restore the file, or {PROBE_FIX}" if edited else PROBE_FIX
    folder = Path(source).parent
    return str(source), restore_advice(folder) if edited else rerun_advice(folder)


class _Fix:
    """:func:`file_and_fix`'s fix, made when a message formats it (``f"...; {fix}"``): it asks
    :mod:`gradprobe.layout` about the folder (resolving paths), which a check that passes has no need of."""

    __slots__ = ("_source", "_edited", "_text")

    def __init__(self, source, edited: bool):
        self._source, self._edited, self._text = source, edited, None

    def __str__(self) -> str:
        if self._text is None:
            self._text = file_and_fix(self._source, self._edited)[1]
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _file_and_lazy_fix(source, edited: bool = False, *, fix: str | None = None) -> tuple[str, str | _Fix]:
    """(file, fix) as :func:`file_and_fix` gives them, the fix made only when a message uses it (:class:`_Fix`): for
    the checks that name them before they know whether they refuse. ``fix``: the caller's, returned as it is."""
    if fix is not None:  # the caller's fix: nothing to derive
        return file_and_fix(source, edited, fix=fix)
    return ("probe.json" if source is None else str(source)), _Fix(source, edited)


def _words(source, *, fix: str | None = None) -> tuple[str, str]:
    """(what a refusal of damage says was damaged, what the probe did to it): ``("the file", "wrote")``, or for a
    probe result a caller holds in memory and names its own fix for (``fix`` without ``source``: no file was
    read) ``("the result", "made")``."""
    if source is None and fix is not None:
        return "the result", "made"
    return "the file", "wrote"


def _edited(source, *, fix: str | None = None) -> str:
    """The clause of a refusal of damage: ``the file was edited or damaged after the probe wrote it`` (for a result a
    caller holds, ``fix`` without ``source``: ``the result ... made it``, :func:`_words`)."""
    holder, made = _words(source, fix=fix)
    return f"{holder} was edited or damaged after the probe {made} it"


def check_entries(rewards, prefix: str, source, *, fix: str | None = None) -> None:
    """Refuse a probe batch's ``rewards`` field that the forecast could not read by name, before any number is read.

    Accepted: a list of reward objects (dicts), each with a text ``name``, or an object mapping name -> reward object
    (whose ``name`` falls back to its key), with no name given twice (the probe refuses a reward given twice,
    ``gradprobe.probe.run``; the forecast would read one of them by its name, silently).

    Parameters
    ----------
    rewards : list[dict] or dict[str, dict]
        The ``rewards`` field of a probe.json (or of one of its ``batches``), as read from JSON.
    prefix : str
        Where that field is in the file, prepended to the field named in a refusal: ``""`` for a single-batch
        probe.json, ``"batches[1]."`` for a batch of a multi-batch one.
    source : str, Path or None
        The probe.json read (None: a probe result held in memory); the refusal names it and derives its fix from its
        folder (:func:`file_and_fix`).
    fix : str, optional
        The fix the refusal names, the caller's (default None: derived from ``source``, :func:`file_and_fix`).

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``batches[1].rewards[0].name`` or
        ``rewards``; both places of a name given twice), its value and the fix: write the file again for a field
        that is no list of reward objects or a name that is no text; restore it or write it again for a name given
        twice (the file was edited or damaged after the probe wrote it).
    """
    file, advice = _file_and_lazy_fix(source, fix=fix)
    if isinstance(rewards, dict):
        bad = next((f"{prefix}rewards[{k!r}] is {json_short(v)}, not an object" for k, v in rewards.items()
                    if not isinstance(v, dict)), None)
    elif isinstance(rewards, list):
        bad = next((f"{prefix}rewards[{j}] is {json_short(r)}, not an object" if not isinstance(r, dict) else
                    f"{prefix}rewards[{j}].name is {json_short(r.get('name'))}, not text"
                    for j, r in enumerate(rewards) if not (isinstance(r, dict) and isinstance(r.get("name"), str))),
                   None)
    else:
        bad = f"{prefix}rewards is {json_short(rewards)}, not a list of reward objects"
    if bad:
        raise ValueError(f"{file} field {bad}; {advice}")
    _check_unique_names(rewards, prefix, source, fix=fix)


def _check_unique_names(rewards, prefix: str, source, *, fix: str | None = None) -> None:
    """:func:`check_entries`' refusal of two reward entries of one name in ``rewards`` (a list of reward objects,
    or name -> entry, whose ``name`` falls back to its key): one line naming both places, the name and the fix
    (``fix``, the caller's, when given)."""
    keyed = enumerate(rewards) if isinstance(rewards, list) else rewards.items()
    seen: dict = {}
    for key, entry in keyed:
        name = entry.get("name", key)
        where = f"{prefix}rewards[{key if isinstance(key, int) else repr(key)}].name"
        if not isinstance(name, str):  # (a name -> entry object's: the forecast reads its key)
            continue
        if name in seen:
            file, advice = file_and_fix(source, edited=True, fix=fix)
            raise ValueError(f"{file} field {where} is {json_short(name)}, as is {seen[name]}: each reward entry has "
                             "its own name (the probe refuses a reward given twice), and the forecast would read "
                             f"one of the two by its name; {_edited(source, fix=fix)}; {advice}")
        seen[name] = where


def check_entry_numbers(entry: dict, where: str, source=None, *, fix: str | None = None) -> None:
    """Refuse a probe entry (``where``: its place in probe.json, e.g. ``rewards[1]``) whose number fields hold no
    usable number, before a forecast or a calibration row reads them: Python would read ``true`` as 1 token per
    update (a forecast flips sign silently), ``false``/``0`` divide by zero, text breaks numpy.

    - :data:`PER_UPDATE_FIELDS` (``tokens_per_update``, ``seconds_per_update``), where present and not null: a
      finite number > 0 (never a boolean, text, NaN, inf or an integer too large for a float);
    - ``per_group``, ``signal_proxy_per_group`` (each element), ``predicted_gain_per_update``,
      ``predicted_gain_at_budget`` and ``snr``: a number, null or ``"inf"``/``"-inf"``
      (:func:`gradprobe.outputs.json_float`), never true/false or other text; a list's elements finite, and their
      magnitudes summing to a finite float (values near 1e308 overflow ``sum(per_group)``: damage);
    - ``interval``, ``gain_interval_per_update``, ``gain_interval_at_budget``, where not null: [low, high], two
      such numbers;
    - ``lr``, ``budget_tokens``, ``budget_seconds``, where not null: what the probe accepts (:data:`_SETTINGS`: lr
      a finite number in (0, ``MAX_LR``], budget_tokens >= 1, budget_seconds > 0).

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].tokens_per_update``),
        its value, what is accepted and the fix (:data:`PROBE_FIX`; ``fix``, the caller's, when given).
    """
    if not isinstance(entry, dict):
        return
    file, advice = _file_and_lazy_fix(source, fix=fix)
    for key in PER_UPDATE_FIELDS:
        problem = per_update_problem(key, entry.get(key))
        if problem:
            raise ValueError(f"{file} field {where}.{key} {problem}; {advice}")
    for key in (k for k in _NUMBER_FIELDS if entry.get(k) is not None):
        _check_number_field(entry[key], f"{where}.{key}", key in _LIST_SUMS, _LIST_SUMS.get(key), source, fix=fix)
    for key in (k for k in _INTERVAL_FIELDS if entry.get(k) is not None):
        value = entry[key]
        if not (isinstance(value, (list, tuple)) or getattr(value, "shape", None) == (2,)) or len(value) != 2:
            raise ValueError(f"{file} field {where}.{key} is {json_short(value)}: it must be [low, high], two "
                             f"numbers (null without a bootstrap); {advice}")
        for j, x in enumerate(value):
            _check_number_field(x, f"{where}.{key}[{j}]", False, None, source, fix=fix)
    for key in _SETTINGS:
        problem = _setting_problem(key, entry.get(key))
        if problem:
            raise ValueError(f"{file} field {where}.{key} {problem}; {advice}")


def _check_number_field(value, field: str, many: bool, total: str | None, source, *, fix: str | None = None) -> None:
    """:func:`check_entry_numbers` of one field ``value`` (a list of finite numbers whose magnitudes sum to a finite
    float when ``many``; ``total`` says what its sum is), named ``field`` in the message, with the file ``source``
    and its fix (``fix``, the caller's, else :func:`file_and_fix`'s, derived on the refusal only: it looks at the
    folder)."""
    if many and getattr(value, "dtype", None) is not None and value.dtype.kind in "fiu":
        return  # an in-memory array of numbers (a probe.json holds lists)
    if many and not isinstance(value, (list, tuple)):
        _refuse_number(source, field, f"is {json_short(value)}: it must be a list of numbers", fix=fix)
    read = []
    for j, x in enumerate(value if many else [value]):
        name = f"{field}[{j}]" if many else field
        try:
            read.append(json_float(x))
        except ValueError as e:
            _refuse_number(source, name, f"is {json_short(x)}: {e}", fix=fix)
        if many and not math.isfinite(read[-1]):  # a group's alignment is always a number: NaN/inf would turn rho
            _refuse_number(source, name, f"is {json_short(x)}: a group's alignment is a finite number (the probe "
                                         "writes one per group)", fix=fix)
    if many and not math.isfinite(_fsum(abs(x) for x in read)):
        j = max(range(len(read)), key=lambda i: abs(read[i]))
        _refuse_number(source, field, f"holds values so large that their sum overflows a float ({field}[{j}] is "
                                      f"{json_short(value[j])}; {total}): {_edited(source, fix=fix)}", edited=True,
                       fix=fix)


def _refuse_number(source, field: str, why: str, edited: bool = False, *, fix: str | None = None) -> None:
    """Raise :func:`_check_number_field`'s one-line ValueError: the file (``source``), ``field``, ``why`` and the fix
    (``fix``, the caller's, else :func:`file_and_fix`'s; ``edited``: restore the file, or write it again)."""
    file, advice = file_and_fix(source, edited, fix=fix)
    raise ValueError(f"{file} field {field} {why}; {advice}") from None


def _fsum(values) -> float:
    """``math.fsum(values)``, or inf where the exact sum overflows a float (OverflowError)."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def _mean(values: list[float], n: int) -> float:
    """``math.fsum(values) / n``; where that sum overflows a float (values near 1e308), the sum of each value / n."""
    try:
        return math.fsum(values) / n
    except OverflowError:
        return _fsum(v / n for v in values)


def _setting_problem(key: str, value) -> str | None:
    """What is wrong with ``value`` of the probe setting ``key`` (:data:`_SETTINGS`: ``lr``, ``budget_tokens``,
    ``budget_seconds``) as a predicate, e.g. ``'is "abc": it must be a finite number > 0 ...'``; None when null
    (not recorded) or what the probe accepts."""
    if value is None:
        return None
    if is_json_number(value, finite=True) and value >= (1 if key == "budget_tokens" else 0) and value > 0 and (
            key != "lr" or value <= MAX_LR):
        return None
    why = " (a boolean is never read as 1 or 0)" if isinstance(value, bool) else ""
    return f"is {json_number_text(value, json_short(value))}{why}: it must be {_SETTINGS[key]}"


def check_entry_summaries(entry: dict, where: str, source=None, *, group=None, lr=None, batch_sizes=None,
                          pooled: bool = False, budgets: dict | None = None, fix: str | None = None) -> None:
    """Refuse a probe entry (``where``: its place in probe.json, e.g. ``rewards[1]``) whose recorded summaries its
    per-group lists contradict: a hand edit of ``per_group`` (which the forecast's rho reads) or of a summary.
    Call it after :func:`check_entry_numbers` (the lists hold finite numbers).

    The summaries the probe writes as exact functions of the lists (B = ``len(per_group)`` groups):

    - ``num_groups`` = B, and ``len(signal_proxy_per_group)`` = B (one per group, :mod:`gradprobe.probe.estimate`
      ``estimate_rewards``: ``"num_groups": b``; :func:`gradprobe.probe.result.signal_proxy`);
    - ``inner_product`` = sum(``per_group``) (``estimate = per_group.sum(-1)`` in ``estimate_rewards``; a pooled
      entry's is the batches' mean and its ``per_group`` their concatenation / N, which sums to it:
      :func:`gradprobe.probe.batches.combine_batches`);
    - ``predicted_gain_per_update`` = 100 x lr x sum(``per_group``), accuracy points (``gain = 100.0 * lr * est``,
      ``_reward_estimate``), lr the entry's ``lr``, else ``lr`` (the probe's ``config.lr``, for a batch entry of a
      multi-batch probe, which records none);
    - ``signal_proxy`` = sum(``signal_proxy_per_group``) / (G B), verl's (1/N) sum A^2 W over the N = G B
      completions (:func:`gradprobe.probe.result.reward_entries`), G = ``group``; for a pooled entry of N batches
      (``probe_batches``) the mean of the batches' proxies, sum_k sum(its part of the list) / (G B_k), its part
      the next B_k (``batch_sizes``) of the list; not checked without ``batch_sizes`` or ``group``;
    - in an entry of one batch (not ``pooled``, no ``probe_batches`` > 1): ``predicted_gain_at_budget`` =
      ``budget_tokens`` / ``tokens_per_update`` x 100 x lr x sum(``per_group``) (``scale = meta["budget_tokens"] /
      tokens``, ``_reward_estimate``; the entry's own ``budget_tokens``, else ``budgets["budget_tokens"]``: the
      probe's ``config``'s, which it copies), and ``predicted_gain_at_time_budget`` = ``budget_seconds`` /
      ``seconds_per_update`` x that gain (``budget_seconds`` likewise); a pooled entry's are checked against its
      batches (:func:`check_pooled_entries`, whose rule this is, with the batches' mean cost).

    ``interval`` and ``snr`` come from a bootstrap over groups whose denominators (tokens per group, for most loss
    types) the file does not hold: not checked. A field the entry does not record (or records as null: an older
    probe.json) is not checked. A count (``num_groups``, ``group``, ``probe_batches``) re-saved as a float with no
    fraction (``4.0``) is read as the integer (:func:`_count`). Tolerance (:func:`_tolerance`): ``rel`` x the sum of
    the terms' magnitudes plus ``step`` x (the sum of the weights with which the rounded terms enter the formula, +
    1 for the recorded value): ``rel`` 1e-9 in a file as the probe writes it (JSON round-trips a float exactly),
    5 x 10^(1-d) in one whose numbers were re-saved at d >= 6 significant digits; ``step`` 0.5 x 10^-D for a file
    whose numbers were rounded to D >= 4 decimal places (pandas' ``to_json``, ``round(x, D)``), negligible in a file
    as the probe writes it. An edit below that goes unseen; one ``per_group`` value doubled (of 16 groups of like
    size: 1/16 of the magnitudes) is refused.

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].inner_product``), the
        reward, the recorded value and the one its lists give, the formula, and the fix (restore the file, or
        write it again: :func:`file_and_fix` with ``edited``; ``fix``, the caller's, when given).
    """
    if not isinstance(entry, dict):
        return
    per, proxy = _floats(entry.get("per_group")), _floats(entry.get("signal_proxy_per_group"))
    tol = _tolerance([*(per or ()), *(proxy or ()), *(entry.get(k) for k in (
        "inner_product", "predicted_gain_per_update", "signal_proxy", "predicted_gain_at_budget", "seconds_per_update",
        "predicted_gain_at_time_budget"))], (entry.get("lr"), lr, entry.get("budget_tokens"),
                                             entry.get("budget_seconds")))
    if per is not None:
        n = entry.get("num_groups")
        if n is not None and _count(n) != len(per):
            _refuse(entry, where, source, "num_groups", json_short(n), f"{len(per)}, the groups its per_group holds",
                    "num_groups = len(per_group)", fix=fix)
        if proxy is not None and len(proxy) != len(per):
            _refuse(entry, where, source, "signal_proxy_per_group", f"a list of {len(proxy)} groups", f"{len(per)}, "
                    "the groups its per_group holds", "one signal_proxy_per_group value per group of per_group",
                    fix=fix)
        terms = _fsum(abs(x) for x in per)
        _check_sum(entry, where, source, "inner_product", _fsum(per), tol.allowed(terms, len(per)),
                   "inner_product = sum(per_group)", fix=fix)
        rate = entry.get("lr") if entry.get("lr") is not None else lr
        if is_json_number(rate, finite=True):
            scale = 100.0 * float(rate)
            _check_sum(entry, where, source, "predicted_gain_per_update", scale * _fsum(per),
                       tol.allowed(abs(scale) * terms, abs(scale) * len(per)),
                       f"predicted_gain_per_update = 100 x lr x sum(per_group), lr = {rate!r}", fix=fix)
            if not (pooled or (_count(entry.get("probe_batches")) or 1) > 1):
                _check_budget_gains(entry, where, source, (scale * _fsum(per), abs(scale) * terms,
                                                           abs(scale) * len(per)), tol, budgets or {}, fix=fix)
    _check_signal_proxy(entry, where, source, proxy, _count(group), batch_sizes, tol, fix=fix)


def _check_signal_proxy(entry: dict, where: str, source, proxy: list | None, g: int | None, batch_sizes,
                        tol: _Tolerance, *, fix: str | None = None) -> None:
    """:func:`check_entry_summaries`' ``signal_proxy`` rule (``proxy``: the entry's ``signal_proxy_per_group`` as
    floats, ``g`` the group size); not checked without either, or a pooled entry's parts."""
    if proxy is None or g is None or g <= 0:
        return
    parts = _proxy_parts(proxy, entry.get("probe_batches"), batch_sizes)
    if parts is not None:
        shown = ("signal_proxy = sum(signal_proxy_per_group) / (group x groups)" if len(parts) == 1 else
                 f"signal_proxy = the mean over its {len(parts)} batches of sum(signal_proxy_per_group) / (group x "
                 "groups)")
        parts = [p for p in parts if p]
        _check_sum(entry, where, source, "signal_proxy", _fsum(_fsum(p) / (g * len(p)) for p in parts),
                   tol.allowed(_fsum(_fsum(map(abs, p)) / (g * len(p)) for p in parts), len(parts) / g),
                   f"{shown}, group = {g}", fix=fix)


def _check_budget_gains(entry: dict, where: str, source, gain: tuple, tol: _Tolerance, budgets: dict, *,
                        fix: str | None = None) -> None:
    """Refuse a one-batch ``entry``'s ``predicted_gain_at_budget`` / ``predicted_gain_at_time_budget`` (where recorded)
    that is not its budget / its cost per update x ``gain`` = (100 lr sum(per_group), its terms' magnitudes, their
    weights): :func:`_at_budget_rule` with the entry's own ``budget_tokens`` / ``budget_seconds`` (else ``budgets``')
    and cost."""
    for key, budget_key, cost_key in (("predicted_gain_at_budget", "budget_tokens", "tokens_per_update"),
                                      ("predicted_gain_at_time_budget", "budget_seconds", "seconds_per_update")):
        budget = entry.get(budget_key) if entry.get(budget_key) is not None else budgets.get(budget_key)
        rule = _at_budget_rule(key, gain, _number(entry.get(cost_key)), cost_key, budget, budget_key, tol)
        if rule is not None:
            bad = _mismatch(entry, key, rule[1], rule[2])
            if bad is not None:
                _refuse(entry, where, source, key, bad, repr(rule[1]), rule[3],
                        basis=f"{where}'s per-group lists, lr and {cost_key}", fix=fix)


def _at_budget_rule(key: str, gain: tuple, cost: float, cost_text: str, budget, budget_key: str,
                    tol: _Tolerance) -> tuple | None:
    """(``key``, expected, allowed difference, rule) of a gain at a budget, ``budget`` / ``cost`` x gain, where
    ``gain`` = (the gain per update, its terms' magnitudes, their weights) and ``cost`` the tokens or seconds per
    update (``cost_text`` says which); None without a finite ``budget``, a finite gain or a cost > 0. The allowed
    difference is :meth:`_Tolerance.allowed` of the gain's terms x budget / cost, plus the cost's own rounding by its
    derivative |budget x gain| / cost^2 (as :func:`gradprobe.probe.estimate` and
    :func:`gradprobe.probe.batches.combine_batches` write it: ``scale = budget / tokens``, ``scale * gain``)."""
    value, magnitude, weight = gain
    if not (is_json_number(budget, finite=True) and math.isfinite(value) and math.isfinite(cost) and cost > 0):
        return None
    scale = abs(budget / cost)
    return (key, budget / cost * value, tol.allowed(scale * magnitude, scale * weight + scale * abs(value) / cost),
            f"{key} = {budget_key} / {cost_text} x predicted_gain_per_update, {budget_key} = {budget!r}")


def _count(value) -> int | None:
    """A count of probe.json (groups, a group's size, batches) as an integer: an int, or a float with no fraction
    (``2.0``: a file whose integers were re-saved as floats, e.g. by a tool that reads every JSON number as a
    double); None for anything else (a fraction, a boolean, text, null, NaN or inf)."""
    if not is_json_number(value, finite=True):
        return None
    if is_json_number(value, integer=True):
        return int(value)
    x = float(value)
    return int(x) if x.is_integer() else None


def _floats(values) -> list[float] | None:
    """A per-group list as floats (:func:`gradprobe.outputs.json_float`), None when not recorded (null) or not a
    list or array of finite numbers (:func:`check_entry_numbers` refuses those)."""
    if values is None:
        return None
    try:
        out = [json_float(x) for x in (values.ravel().tolist() if hasattr(values, "ravel") else values)]
    except (TypeError, ValueError):
        return None
    return out if all(math.isfinite(x) for x in out) else None


def _proxy_parts(proxy: list[float], batches, batch_sizes) -> list[list[float]] | None:
    """``signal_proxy_per_group`` cut into its batches' parts: itself for one batch (no ``probe_batches`` > 1);
    for a pooled entry the next ``batch_sizes[k]`` values per batch, None when those are unknown or do not add up."""
    batches = _count(batches)
    if not (batches is not None and batches > 1):
        return [proxy]
    if not (isinstance(batch_sizes, list) and len(batch_sizes) == batches and sum(batch_sizes) == len(proxy)):
        return None
    ends = np.cumsum([0] + list(batch_sizes))
    return [proxy[a:b] for a, b in zip(ends[:-1], ends[1:])]


def _float_text(value) -> str | None:
    """``repr`` of a float's magnitude as JSON writes it (the shortest text that reads back as it, e.g.
    ``1.2345678e-05``); None for 0, a non-finite float, an int or anything that is no float."""
    try:
        x = json_float(value) if isinstance(value, float) or hasattr(value, "item") else math.nan
    except ValueError:
        return None
    return repr(abs(x)) if math.isfinite(x) and x != 0 else None


def _digits(value) -> int:
    """Significant digits of a float as JSON writes it (:func:`_float_text`), e.g. 8 for ``0.0012345678`` or
    ``1.2345678e-05``; 0 for 0, a non-finite float or anything that is no float."""
    text = _float_text(value)
    return len(text.split("e")[0].replace(".", "").strip("0")) if text else 0


def _decimals(value) -> int | None:
    """Digits after the decimal point of a float as JSON writes it (:func:`_float_text`), in plain notation:
    ``0.0307710953`` holds 10, ``1.25e-05`` (0.0000125) 7, ``363.1`` 1, ``2.0`` 0; None for 0 (which may be a small
    value rounded to 0), a non-finite float, an int or anything that is no float."""
    text = _float_text(value)
    if text is None:
        return None
    mantissa, _, exponent = text.partition("e")
    return max(0, len(mantissa.partition(".")[2].rstrip("0")) - int(exponent or 0))


class _Tolerance(NamedTuple):
    """How far a recorded summary may lie from the value its terms give (:func:`_tolerance`): ``rel`` (relative
    to the terms' magnitudes: significant-digit rounding) and ``step`` (0.5 x 10^-D, the most by which rounding to D
    decimal places moves one number, zero included)."""

    rel: float
    step: float

    def allowed(self, magnitude: float, weight: float) -> float:
        """``rel`` x ``magnitude`` (the sum of the terms' magnitudes, each times its factor in the formula) +
        ``step`` x (``weight`` + 1): ``weight`` the sum of the factors' magnitudes with which the rounded terms
        enter the formula (B for a sum of B terms, 1 for a mean), the + 1 the recorded value's own rounding."""
        return self.rel * magnitude + self.step * (weight + 1.0)


def _tolerance(numbers, settings=()) -> _Tolerance:
    """The tolerance of a summary check over the measured ``numbers`` it compares (the terms and the recorded
    values) and the ``settings`` of its formula (lr): the largest error that rounding alone can make.

    Significant digits, ``rel``:

    - A file as the probe writes it holds every float exactly (JSON writes ``repr``, 15-17 significant digits for
      a measured value): 1e-9 (:data:`_SUMMARY_REL`), far above the ulps by which numpy's sums differ from
      ``math.fsum``.
    - A file re-saved with its floats rounded to d significant digits (``float(f"{x:.8g}")`` before ``json.dump``;
      d = the most digits any of ``numbers`` and ``settings`` holds, :func:`_digits`, at least 6) moves each number
      x by at most eps |x|, eps = 0.5 x 10^(1-d). A sum of B rounded terms then differs from the sum of the exact
      ones by at most eps x (the sum of the B terms' magnitudes), i.e. at most B x eps x the largest term; the
      recorded summary is rounded too (eps x its magnitude, at most the terms'), and each other number of a formula
      (lr, the tokens per update, a budget) moves it by eps of itself: at most 4 rounded quantities, 4 eps x
      (1 + eps)^4 of the terms' magnitudes (a pooled list value and its batch's: 2 eps of the value). ``rel`` is
      5 x 10^(1-d) = 10 eps (:data:`_ROUNDED_REL`): 5e-7 at 8 digits, 5e-6 at 7, 5e-5 at 6.

    Decimal places, ``step``: a file re-saved with its floats rounded to D places after the point (pandas'
    ``to_json`` and ``ujson_dumps``, 10 by default; ``round(x, D)``) moves each number by at most 0.5 x 10^-D
    whatever its size, and a small value (the no-signal reward's proxies) may become 0. D is estimated as the most
    decimals any non-zero float of ``numbers`` holds in plain notation (:func:`_decimals`; at least
    :data:`_MIN_DECIMALS`): a number rounded to D places holds at most D, and all of them end in a 0 there only by
    chance (1 in 10 each), so the estimate is below the file's D (a looser ``step``, never a tighter one) only by
    that chance. A full-precision file writes 15 to 17 significant digits per measured value, so D is at least the
    decimals of its smallest non-zero number x and ``step`` at most 5e-15 x: far below ``rel`` x the terms'
    magnitudes, its check stays as tight as before. A sum of B terms (each times its factor w) moves by at most
    ``step`` x sum(|w|), the recorded value by ``step``: the check allows ``step`` x (sum(|w|) + 1)
    (:meth:`_Tolerance.allowed`). ``settings`` (lr: 1e-4, 3e-6) do not set D: their few digits
    survive a rounding that keeps them; one that does not (lr 3e-6 at 4 places is 0) changes the forecast too and
    is refused as damage. Both parts are added, so a file rounded either way (or both) is read.

    What goes unseen: an edit that moves a compared value by less than ``rel`` x its terms' magnitudes + ``step`` x
    (the weights + 1): at 6 digits, for 16 groups of like size, a ``per_group`` value moved by less than about 8e-4
    of itself; at 4 decimals, a sum of 16 ``per_group`` values moved by less than 8.5e-4 (absolute), a pooled list
    value by less than about 7.5e-5. One value doubled, or a summary moved by 10% of its terms' magnitudes, is
    refused at either rounding when the values are well above 10^-D. A file rounded to fewer than 6 digits and
    fewer than 4 decimals (or whose numbers are all whole) gets the 6-digit and 4-decimal tolerance, which its
    rounding may exceed: it is then refused as damaged.
    """
    d = max(map(_digits, [*numbers, *settings]), default=0)
    places = max((p for p in map(_decimals, numbers) if p is not None), default=_MIN_DECIMALS)
    return _Tolerance(max(_SUMMARY_REL, _ROUNDED_REL * 10.0 ** (1 - max(d, _MIN_DIGITS))),
                      0.5 * 10.0 ** -max(places, _MIN_DECIMALS))


def _check_sum(entry: dict, where: str, source, key: str, expected: float, allowed: float, formula: str, *,
               fix: str | None = None) -> None:
    """Refuse ``entry[key]`` (where recorded, not null) unless it is ``expected`` within ``allowed``
    (:meth:`_Tolerance.allowed`) + 1e-300; a recorded value that is no number is refused too."""
    bad = _mismatch(entry, key, expected, allowed)
    if bad is not None:
        _refuse(entry, where, source, key, bad, repr(expected), formula, fix=fix)


def _mismatch(entry: dict, key: str, expected: float, allowed: float) -> str | None:
    """How a message shows ``entry[key]`` when it is recorded (not null) and is not ``expected`` within ``allowed``
    + 1e-300 (a recorded value that is no number never is, nor any value where ``expected`` is not finite: a
    formula that overflows, e.g. at an lr near 1e308, is no probe's), else None."""
    value = entry.get(key)
    if value is None:
        return None
    try:
        recorded = json_float(value)
    except ValueError:
        recorded = math.nan
    close = math.isfinite(expected) and abs(recorded - expected) <= allowed + _SUMMARY_ABS
    return None if close else json_number_text(value, json_short(value))


def _refuse(entry: dict, where: str, source, key: str, recorded: str, expected: str, formula: str,
            basis: str | None = None, *, fix: str | None = None) -> None:
    """The ValueError of :func:`check_entry_summaries`: file, field, reward, both values, formula (from ``basis``,
    e.g. ``rewards[1]'s per-group lists``, the default) and fix (``fix``, the caller's, when given)."""
    file, advice = file_and_fix(source, edited=True, fix=fix)
    reward = f" (reward {entry['name']!r})" if isinstance(entry.get("name"), str) else ""
    basis = f"{where}'s per-group lists" if basis is None else basis
    raise ValueError(f"{file} field {where}.{key}{reward} is {recorded}, but {basis} give "
                     f"{expected} ({formula}, as the probe writes it): {_edited(source, fix=fix)}, so a forecast "
                     f"from it would not be the probe's; {advice}")


def check_entry_inputs(probe, source=None, *, fix: str | None = None) -> None:
    """Refuse a ``probe.json`` dict (as the probe wrote it: :func:`gradprobe.load_probe` calls this) whose reward
    entries contradict the settings and token counts the same file records, before a forecast or the table reads
    them:

    - every entry's number fields (the top-level entries and each ``batches[k]``'s: :func:`check_entry_numbers`,
      e.g. ``tokens_per_update: "4477"``), first, so that a value that is no number is refused as such, never
      compared with what the records give;
    - ``config.lr``, ``config.budget_tokens`` and ``config.budget_seconds`` where not null: what the probe accepts
      (:data:`_SETTINGS`; the forecast reads ``config.budget_tokens`` as its budget, :func:`budget_of`);
    - an entry's ``lr``, ``budget_tokens``, ``budget_seconds`` = ``config``'s, where both are recorded (the probe
      writes its ``--lr`` and budgets into ``config`` and every entry: ``estimate_rewards``'s ``meta``; a pooled
      entry copies batch 0's); within 1e-9 of it (a re-save rounds both alike); an entry of a single-batch file
      that records none (or null) has its gains checked at ``config``'s (:func:`check_entry_summaries` with
      ``lr`` and ``budgets``);
    - ``tokens_per_update`` of an entry of one batch (the top-level entries of a single-batch file, each
      ``batches[k]``'s entries of a multi-batch one; a pooled entry is its batches' mean,
      :func:`check_pooled_entries`) = max(1, round((G + C) x s)) as
      :func:`gradprobe.probe.result.per_update_costs` computes it: G the batch's generated tokens (``batch`` /
      ``batches[k].batch`` ``.generated_tokens``), C the entry's ``generated_tokens`` of the kinds training charges
      (:data:`gradprobe.ledger.CHARGED`: rollout, continuation, selection; a gradprobe before them charged every
      kind, also read), s = (``update_prompts`` or ``prompts``) x (``update_group`` or ``group``) / (``prompts`` x
      ``group``) of ``config``, else the batch's ``update_scale``. Checked where G and the entry's
      ``generated_tokens`` are recorded; within 0.5 (the rounding) + 1e-9 x the value, + 0.5 x 10^-D x (G + C) for an
      ``update_scale`` re-saved at D decimals (:func:`_tolerance`). An entry's ``generated_tokens`` value or a
      batch's ``generated_tokens`` that is no count >= 0 is refused.

    A dict put together in memory (a guided arm's entry merged into a study's probe,
    :func:`gradprobe.forecast.study.merge_guided_entries`, keeps its own probe's batch) is not checked here.
    ``fix``: the fix every refusal names, the caller's (e.g. calib's for a result passed to it as a dict); default
    None: derived from ``source``'s folder (:func:`file_and_fix`); given without ``source``, a refusal of damage
    speaks of the result, not of a file (:func:`_words`).

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].tokens_per_update``), the
        reward, the recorded value and the one the file's records give, the rule and the fix (restore the file, or
        write it again: :func:`file_and_fix` with ``edited``); or a ``batches`` field its ``probe_batches``
        contradicts (:func:`probe_batches_of`).
    """
    if not isinstance(probe, dict):
        return
    _check_batches_field(probe, source, fix=fix)
    config = probe.get("config") if isinstance(probe.get("config"), dict) else {}
    file, advice = _file_and_lazy_fix(source, fix=fix)
    batches = probe.get("batches")
    items = ([(f"batches[{k}].", b) for k, b in enumerate(batches) if isinstance(b, dict)] if batches else
             [("", probe)])
    for prefix, item in [*([("", probe)] if batches else []), *items]:  # numbers first, as load_probe's check_costs
        for where, entry in _places(item.get("rewards"), prefix):
            check_entry_numbers(entry, where, source, fix=fix)
    for key in _SETTINGS:  # "2500000", true, "inf": the forecast's budget would read them (budget_of)
        problem = _setting_problem(key, config.get(key))
        if problem:
            raise ValueError(f"{file} field config.{key} {problem}; {advice}")
    for prefix, item in items:  # tokens first: a gain at the budget is read off them
        summary = item.get("batch") if isinstance(item.get("batch"), dict) else {}
        generated = summary.get("generated_tokens")
        if generated is not None and not _is_count(generated):
            raise ValueError(f"{file} field {prefix}batch.generated_tokens is {json_short(generated)}: it must be a "
                             f"count of tokens >= 0 (the probe batch's generated tokens); {advice}")
        scale = _update_scale(config, summary)
        for where, entry in _places(item.get("rewards"), prefix):
            _check_entry_tokens(entry, where, source, _count(generated), scale, f"{prefix}batch", fix=fix)
    settings = {k: config.get(k) for k in _SETTINGS}
    for where, entry in _places(probe.get("rewards"), ""):
        _check_entry_settings(entry, where, source, config, fix=fix)
        if not batches:  # an entry recording no lr or budget was made at config's (_reward_estimate's meta)
            check_entry_summaries(entry, where, source, lr=settings["lr"], budgets=settings, fix=fix)


def _places(rewards, prefix: str) -> list[tuple[str, dict]]:
    """(place, entry) of the reward objects of a ``rewards`` field (a list, or name -> entry), e.g.
    ``("batches[0].rewards[1]", {...})``; what is no object is left out (:func:`check_entries` names it)."""
    pairs = enumerate(rewards) if isinstance(rewards, list) else rewards.items() if isinstance(rewards, dict) else ()
    return [(f"{prefix}rewards[{k if isinstance(k, int) else repr(k)}]", e) for k, e in pairs if isinstance(e, dict)]


def _is_count(value) -> bool:
    """Whether ``value`` is a count >= 0 (:func:`_count`: an integer, or a float with no fraction)."""
    n = _count(value)
    return n is not None and n >= 0


def _check_entry_settings(entry: dict, where: str, source, config: dict, *, fix: str | None = None) -> None:
    """:func:`check_entry_inputs`: refuse an entry's ``lr`` / ``budget_tokens`` / ``budget_seconds`` that differs
    from ``config``'s, where both are recorded and usable (:func:`check_entry_numbers` refuses one that is not)."""
    for key in _SETTINGS:
        own, stated = entry.get(key), config.get(key)
        if own is None or stated is None or _setting_problem(key, own) or _setting_problem(key, stated):
            continue
        if abs(float(own) - float(stated)) > 1e-9 * abs(float(stated)):
            file, advice = file_and_fix(source, edited=True, fix=fix)
            reward = f" (reward {entry['name']!r})" if isinstance(entry.get("name"), str) else ""
            raise ValueError(f"{file} field {where}.{key}{reward} is {json_short(own)}, but config.{key} is "
                             f"{json_short(stated)} (the probe writes its {key} into config and into every entry, "
                             f"as estimate_rewards records it): {_edited(source, fix=fix)}, so a forecast from it "
                             f"would not be the probe's; {advice}")


def _update_scale(config: dict, summary: dict) -> tuple[float, bool] | None:
    """(s, exact) of :func:`gradprobe.probe.result.per_update_costs`: (``update_prompts`` or ``prompts``) x
    (``update_group`` or ``group``) / (``prompts`` x ``group``) from ``config``'s counts (exact), else the batch
    ``summary``'s recorded ``update_scale`` (a float a re-save may have rounded); None when neither is recorded."""
    prompts, group = _count(config.get("prompts")), _count(config.get("group"))
    if prompts and group:
        up = _count(config.get("update_prompts")) if config.get("update_prompts") is not None else prompts
        ug = _count(config.get("update_group")) if config.get("update_group") is not None else group
        if up and ug:
            return up * ug / (prompts * group), True
    recorded = summary.get("update_scale")
    if is_json_number(recorded, finite=True) and recorded > 0:
        return float(recorded), False
    return None


def _check_entry_tokens(entry: dict, where: str, source, generated: int | None, scale: tuple | None,
                        summary_field: str, *, fix: str | None = None) -> None:
    """:func:`check_entry_inputs`'s ``tokens_per_update`` rule for one entry of one batch (``generated``: its
    batch's generated tokens, ``scale``: :func:`_update_scale`)."""
    made, recorded = entry.get("generated_tokens"), entry.get("tokens_per_update")
    if generated is None or scale is None or not isinstance(made, dict) or recorded is None or (
            _count(entry.get("probe_batches")) or 1) > 1 or per_update_problem("tokens_per_update", recorded):
        return  # (a value that is no number: check_entry_numbers' to refuse, never "is "4477", but ... give 4477")
    file, advice = _file_and_lazy_fix(source, fix=fix)
    for kind, n in made.items():
        if not _is_count(n):
            raise ValueError(f"{file} field {where}.generated_tokens.{kind} is {json_short(n)}: it must be a count "
                             f"of tokens >= 0 (the tokens the reward generated of that kind); {advice}")
    charged = sum(_count(n) for kind, n in made.items() if kind in CHARGED)
    sums = list(dict.fromkeys((charged, sum(_count(n) for n in made.values()))))  # a gradprobe before CHARGED: all
    (s, exact), value = scale, _number(recorded)
    tol = _tolerance([*(_floats(entry.get("per_group")) or ()), entry.get("inner_product"),
                      entry.get("predicted_gain_per_update"), None if exact else s])
    if any(abs(value - x) <= 0.5 + tol.rel * x + (0.0 if exact else tol.step * (generated + c))
           for c in sums for x in [max(1.0, (generated + c) * s)]):
        return
    kinds = " + ".join(f"{n} {kind}" for kind, n in made.items() if kind in CHARGED and _count(n)) or "0"
    ratio = ("config's (update_prompts or prompts) x (update_group or group) / (prompts x group)" if exact else
             f"{summary_field}.update_scale")
    _refuse(entry, where, source, "tokens_per_update", json_number_text(recorded, json_short(recorded)),
            str(max(1, round((generated + charged) * s))),
            f"tokens_per_update = round((batch.generated_tokens + its generated_tokens of the kinds training charges: "
            f"{', '.join(CHARGED)}) x s) = round(({generated} + {kinds}) x {s!r}), s = {ratio}: "
            "gradprobe.probe.result.per_update_costs",
            basis=f"{summary_field}.generated_tokens and {where}.generated_tokens", fix=fix)


def pooled_entries(probe, source=None, *, fix: str | None = None) -> dict:
    """The pooled entries of a multi-batch ``probe.json``: its top-level ``rewards`` (pooled over its
    ``batches`` by :func:`gradprobe.probe.batches.run_probe_batches`), name -> entry as
    :func:`probe_batches_of` reads them; ``{}`` for a single-batch result, a list of batches, or a result
    without top-level ``rewards``. ``source`` (the file the dict was read from) names the file in a message, ``fix``
    (the caller's, else derived from it: :func:`file_and_fix`) the fix.

    Raises
    ------
    ValueError
        As :func:`probe_batches_of` for the pooled entries (their ``signal_proxy`` checked with the batches' group
        counts, :func:`check_entry_summaries`), or a pooled entry its batches contradict
        (:func:`check_pooled_entries`).
    """
    return check_pooled_entries(probe, source, fix=fix)


def check_pooled_entries(probe, source=None, *, fix: str | None = None) -> dict:
    """Refuse a multi-batch ``probe.json`` whose pooled entries (its top-level ``rewards``) its ``batches``
    contradict, so that an edit of either is seen: the forecast reads the batches (:func:`probe_batches_of`: rho from
    their ``per_group``, costs from their ``tokens_per_update``, the signal proxy from theirs), the probe's table and
    report (and the forecast's no-signal check, :func:`pooled_entries`) the pooled entries. Each entry is checked
    on its own first (:func:`check_entry_summaries`; each batch's by :func:`probe_batches_of`).

    The pooled entry of N = ``len(batches)`` batches as :func:`gradprobe.probe.batches.combine_batches`
    (``_pooled_entry``) writes it from its reward's entry in each batch (``batches[k].rewards[j]``, same ``name``):

    - ``probe_batches`` = N (and ``config.probe_batches`` = N);
    - ``num_groups`` = the sum of the batches' ``len(per_group)``;
    - ``per_group`` = the batches' ``per_group`` one after another, each value divided by N;
    - ``inner_product`` = the mean of the batches' ``inner_product`` (sum(``per_group``) of a batch recording none);
    - ``predicted_gain_per_update`` = 100 x lr x that mean (accuracy points; lr, ``budget_tokens`` and
      ``budget_seconds`` the entry's, batch 0's copy of ``config``'s, else ``config``'s);
    - ``tokens_per_update`` = the mean of the batches' ``tokens_per_update`` rounded to a token (within 0.5), and
      ``predicted_gain_at_budget`` = ``budget_tokens`` / (that mean, unrounded) x the gain;
    - where every batch records a ``signal_proxy``: ``signal_proxy`` = their mean, ``signal_proxy_per_group`` =
      their ``signal_proxy_per_group`` one after another, each divided by N;
    - where every batch records ``seconds_per_update``: their mean, and with ``budget_seconds``,
      ``predicted_gain_at_time_budget`` = ``budget_seconds`` / that mean x the gain.

    Not checked: ``interval``, ``snr`` and the gain intervals (a bootstrap whose replicates come from numpy's random
    stream, not the file), ``cosine``, ``valid_completions`` and ``reward_stats`` (the batches do not record them),
    the fields copied from batch 0, and an edit that changes the pooled entry and every batch alike. A pooled entry
    is checked where ``config.probe_batches`` or the entry's ``probe_batches`` or ``inner_product`` is recorded
    (``combine_batches`` writes all three; a result put together by hand in memory without them is not). A count
    re-saved as a float with no fraction (``probe_batches`` 2.0) is read as the integer (:func:`_count`).
    Tolerance: :func:`_tolerance` of every number compared (its relative part x the terms' magnitudes, or x |value|
    for one list value; its decimal-place part x the terms' weights + 1): in a file as the probe writes it a list
    value is exactly its batch's / N.

    Returns
    -------
    dict
        Name -> pooled entry, as :func:`pooled_entries`; ``{}`` for a result without ``batches`` or top-level
        ``rewards``.

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].inner_product``), the
        reward, the recorded value and the one its batches give, the rule (:func:`gradprobe.probe.batches.
        combine_batches`'s) and the fix (restore the file, or write it again; ``fix``, the caller's, when given);
        also a pooled entry of a reward some batch lacks, or a ``config.probe_batches`` that is not the number of
        batches.
    """
    if not (isinstance(probe, dict) and isinstance(probe.get("batches"), list) and probe["batches"]
            and probe.get("rewards")):
        return {}
    batches = probe["batches"]
    pooled = _batches_of(dict(probe, batches=None), source, _group_counts(batches), fix=fix)[0]["rewards"]
    config = probe.get("config") if isinstance(probe.get("config"), dict) else {}
    stated, file, advice = config.get("probe_batches"), *_file_and_lazy_fix(source, edited=True, fix=fix)
    holder, made = _words(source, fix=fix)
    if stated is not None and _count(stated) != len(batches):  # 2.0: a re-save's integral float, read as 2
        raise ValueError(f"{file} field config.probe_batches is {json_short(stated)}, but {holder} holds "
                         f"{len(batches)} batch(es) (its batches list; gradprobe.probe.batches.combine_batches records "
                         f"probe_batches = the batches it pools): a batch was added or removed after the probe {made} "
                         f"{holder}, so a forecast from it would not be the probe's; {advice}")
    tables = [{name: (f"rewards[{j}]" if isinstance(b["rewards"], list) else f"rewards[{name!r}]", e)
               for j, (name, e) in enumerate(_entry_items(b.get("rewards")))} if isinstance(b, dict) else {}
              for b in batches]
    keyed = enumerate(probe["rewards"]) if isinstance(probe["rewards"], list) else probe["rewards"].items()
    for key, entry in keyed:
        if not isinstance(entry, dict) or (stated is None and entry.get("probe_batches") is None
                                           and entry.get("inner_product") is None):
            continue  # not written by combine_batches
        where, name = f"rewards[{key if isinstance(key, int) else repr(key)}]", entry.get("name", key)
        lacking = next((k for k, t in enumerate(tables) if name not in t), None)
        if lacking is not None:
            raise ValueError(f"{file} field {where} is the pooled entry of reward {name!r}, but batches[{lacking}] "
                             "has no entry of it (gradprobe.probe.batches.combine_batches pools the reward's entry of "
                             f"every batch): {_edited(source, fix=fix)}; {advice}")
        settings = {k: entry.get(k) if entry.get(k) is not None else config.get(k)
                    for k in ("lr", "budget_tokens", "budget_seconds")}  # the entry's (batch 0's), else config's
        _check_pooled_entry(entry, where, source, [t[name] for t in tables], settings, fix=fix)
    return pooled


def _check_pooled_entry(entry: dict, where: str, source, parts: list[tuple], config: dict, *,
                        fix: str | None = None) -> None:
    """:func:`check_pooled_entries` of one pooled ``entry`` against ``parts``, (its place in batch k, e.g.
    ``rewards[1]``; the batch's entry) per batch; ``config``: ``lr``, ``budget_tokens`` and ``budget_seconds``;
    ``fix``: the caller's, when given."""
    n, es = len(parts), [e for _, e in parts]
    places = {p for p, _ in parts}
    pattern = f"batches[k].{places.pop()}" if len(places) == 1 else "batches[k]'s entry of the reward"
    if entry.get("probe_batches") is not None and _count(entry["probe_batches"]) != n:
        _refuse_pooled(entry, where, source, "probe_batches", json_short(entry["probe_batches"]), repr(n),
                       "probe_batches = N, the batches it pools", fix=fix)
    pers = [_floats(e.get("per_group")) for e in es]
    if any(p is None for p in pers):
        return  # a batch without per_group: the forecast refuses it (check_batches)
    proxies = [_floats(e.get("signal_proxy_per_group")) for e in es]
    tol = _tolerance([*(x for p in [*pers, *proxies, _floats(entry.get("per_group")),
                                    _floats(entry.get("signal_proxy_per_group"))] if p for x in p),
                      *(e.get(k) for e in [entry, *es] for k in _POOLED_SCALARS)], (config.get("lr"),))
    num, groups = entry.get("num_groups"), sum(map(len, pers))
    if num is not None and _count(num) != groups:
        _refuse_pooled(entry, where, source, "num_groups", json_short(num), repr(groups),
                       f"num_groups = the sum of its batches' len({pattern}.per_group)", fix=fix)
    for key, expected, allowed, rule in _pooled_rules(es, pers, config, pattern, tol):
        bad = _mismatch(entry, key, expected, allowed)
        if bad is not None:
            _refuse_pooled(entry, where, source, key, bad, repr(expected), rule, fix=fix)
        if key == "inner_product":
            _check_pooled_list(entry, where, source, "per_group", pers, [p for p, _ in parts], tol, fix=fix)
    if all(e.get("signal_proxy") is not None for e in es):
        _check_pooled_list(entry, where, source, "signal_proxy_per_group", proxies, [p for p, _ in parts], tol,
                           fix=fix)


#: the pooled entry's and its batches' scalar fields whose digits :func:`_tolerance` reads
_POOLED_SCALARS = ("inner_product", "predicted_gain_per_update", "predicted_gain_at_budget", "signal_proxy",
                   "seconds_per_update", "predicted_gain_at_time_budget")


def _number(value) -> float:
    """``value`` as a float (:func:`gradprobe.outputs.json_float`), NaN when null or no number."""
    try:
        return json_float(value)
    except ValueError:
        return math.nan


def _pooled_rules(es: list[dict], pers: list[list[float]], config: dict, pattern: str, tol: _Tolerance) -> list:
    """(field, expected, allowed difference, rule) of each summary a pooled entry records as a function of its
    batches' entries ``es`` (``pers`` their ``per_group``), :func:`check_pooled_entries`'s list, in that order. The
    allowed difference is :meth:`_Tolerance.allowed` of the formula's terms: their magnitudes, and the weights with
    which they enter it (1/N per batch value of a mean; a ratio's measured divisor, tokens or seconds per update,
    by its derivative |budget x gain| / mean^2)."""
    n, out = len(es), []
    magnitude = _mean([abs(x) for p in pers for x in p], n)  # the terms of the batches' sums, / N
    recorded = [e.get("inner_product") is not None for e in es]
    ip = _mean([_number(e["inner_product"]) if r else _fsum(p) for e, p, r in zip(es, pers, recorded)], n)
    ip_weight = _fsum(1.0 if r else len(p) for p, r in zip(pers, recorded)) / n  # a batch's sum: B_k terms
    out.append(("inner_product", ip, tol.allowed(magnitude, ip_weight),
                f"inner_product = the mean of its batches' {pattern}.inner_product"))
    lr, gain, g_mag, g_weight = config.get("lr"), math.nan, math.nan, math.nan
    if is_json_number(lr, finite=True):
        gain, g_mag, g_weight = 100.0 * lr * ip, 100.0 * abs(lr) * magnitude, 100.0 * abs(lr) * ip_weight
        out.append(("predicted_gain_per_update", gain, tol.allowed(g_mag, g_weight), "predicted_gain_per_update = "
                    f"100 x lr x the mean of its batches' {pattern}.inner_product, lr = {lr!r}"))
    tokens = [_number(e.get("tokens_per_update")) for e in es]
    if all(math.isfinite(t) and t > 0 for t in tokens):
        mean = _mean(tokens, n)
        out.append(("tokens_per_update", mean, 0.5 + tol.allowed(mean, 1.0), f"tokens_per_update = the mean of its "
                    f"batches' {pattern}.tokens_per_update, rounded to a token"))
        out.append(_at_budget_rule("predicted_gain_at_budget", (gain, g_mag, g_weight), mean,
                                   f"(the mean of its batches' {pattern}.tokens_per_update)",
                                   config.get("budget_tokens"), "budget_tokens", tol))
    for key in ("signal_proxy", "seconds_per_update"):
        values = [_number(e.get(key)) for e in es]
        if all(math.isfinite(v) for v in values):
            out.append((key, _mean(values, n), tol.allowed(_mean(list(map(abs, values)), n), 1.0),
                        f"{key} = the mean of its batches' {pattern}.{key}"))
    secs = [_number(e.get("seconds_per_update")) for e in es]
    if all(math.isfinite(s) and s > 0 for s in secs):
        out.append(_at_budget_rule("predicted_gain_at_time_budget", (gain, g_mag, g_weight), _mean(secs, n),
                                   f"(the mean of its batches' {pattern}.seconds_per_update)",
                                   config.get("budget_seconds"), "budget_seconds", tol))
    return [rule for rule in out if rule is not None]


def _check_pooled_list(entry: dict, where: str, source, key: str, lists: list, places: list[str],
                       tol: _Tolerance, *, fix: str | None = None) -> None:
    """Refuse a pooled ``entry[key]`` (where recorded) that is not the batches' ``lists`` (batch k's entry at
    ``places[k]``, e.g. ``rewards[1]``) one after another, each value / N, within ``rel`` x |value| + ``step`` x
    (1/N + 1) (:func:`_tolerance`) + 1e-300: the first value that differs is named with the batch value it should
    be."""
    pooled, n = _floats(entry.get(key)), len(lists)
    if pooled is None or any(p is None for p in lists):
        return
    pattern = f"batches[k].{places[0]}" if len(set(places)) == 1 else "batches[k]'s entry of the reward"
    rule = f"{key} = its batches' {pattern}.{key} one after another, each value divided by N = {n}"
    flat = [(k, j, x / n) for k, p in enumerate(lists) for j, x in enumerate(p)]
    if len(pooled) != len(flat):
        _refuse_pooled(entry, where, source, key, f"a list of {len(pooled)} values", f"{len(flat)}", rule,
                       fix=fix)
    for i, ((k, j, expected), value) in enumerate(zip(flat, pooled)):
        if not abs(value - expected) <= tol.allowed(abs(expected), 1.0 / n) + _SUMMARY_ABS:
            _refuse_pooled(entry, where, source, f"{key}[{i}]", json_short(entry[key][i]), repr(expected),
                           f"{rule}: here batches[{k}].{places[k]}.{key}[{j}] / {n}", fix=fix)


def _refuse_pooled(entry: dict, where: str, source, key: str, recorded: str, expected: str, rule: str, *,
                   fix: str | None = None) -> None:
    """The ValueError of :func:`check_pooled_entries`: file, field, reward, both values, the rule and the fix
    (``fix``, the caller's, when given)."""
    file, advice = file_and_fix(source, edited=True, fix=fix)
    holder, made = _words(source, fix=fix)
    reward = f" (reward {entry['name']!r})" if isinstance(entry.get("name"), str) else ""
    raise ValueError(f"{file} field {where}.{key}{reward} is {recorded}, but its batches give {expected} ({rule}, as "
                     "gradprobe.probe.batches.combine_batches pools them): the pooled entry or a batch's entry was "
                     f"edited or damaged after the probe {made} {holder} (the forecast reads the batches, the probe's "
                     f"table and report the pooled entry), so a forecast from it would not be the probe's; {advice}")


def _entry_items(rewards) -> list[tuple]:
    """(name, entry) of a ``rewards`` field (a list of entries with ``name``, or name -> entry); entries that are no
    objects are left out (:func:`check_entries` names them)."""
    pairs = [(r.get("name"), r) for r in rewards] if isinstance(rewards, list) and all(
        isinstance(r, dict) for r in rewards) else list(rewards.items()) if isinstance(rewards, dict) else []
    return [(name, e) for name, e in pairs if isinstance(e, dict)]


def _group_counts(batches: list) -> dict:
    """Entry name -> the number of groups of each of ``batches`` (a multi-batch probe.json's ``batches``): the
    length of its ``signal_proxy_per_group`` there; names some batch lacks (or holds no list for) are left out."""
    counts: dict = {}
    for b in batches:
        for name, e in _entry_items(b.get("rewards") if isinstance(b, dict) else None):
            if isinstance(e.get("signal_proxy_per_group"), list):
                counts.setdefault(name, []).append(len(e["signal_proxy_per_group"]))
    return {name: c for name, c in counts.items() if len(c) == len(batches)}


def check_request(method: str, budget_tokens, budget_flops, n_draws: int, level: float) -> None:
    """Refuse an unknown method, two budgets, ``n_draws < 100`` or a level outside (0, 1) (ValueError)."""
    from .result import METHODS  # pandas: deferred, so that load_probe's checks here load numpy only

    if method not in METHODS:
        raise ValueError(f"method {method!r} must be one of {METHODS}")
    if budget_tokens is not None and budget_flops is not None:
        raise ValueError("give budget_tokens or budget_flops, not both")
    if n_draws < 100:
        raise ValueError(f"n_draws must be >= 100 for a percentile interval, got {n_draws}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def check_batches(batches: list[dict], reference_reward: str, source=None, *, fix: str | None = None) -> list[str]:
    """The probed reward entries (batch 0's order), after checking every batch probes the same ones, the
    reference is among them and each entry has ``tokens_per_update`` and ``per_group`` (ValueError; a missing or
    null one in one line naming the file, ``source`` else ``probe.json``, the field, e.g. ``rewards[1].per_group``
    or ``batches[0].rewards[1].per_group``, and the fix: ``fix``, the caller's, else :func:`file_and_fix`'s)."""
    names = list(batches[0]["rewards"])
    for j, b in enumerate(batches[1:], 1):
        if set(b["rewards"]) != set(names):
            raise ValueError(f"probe batch {j} has rewards {sorted(b['rewards'])}, batch 0 {sorted(names)}: every batch "
                             "must probe the same rewards")
    if reference_reward not in names:
        raise ValueError(f"the forecast is a gain vs grpo, so the probe needs the {reference_reward!r} reward: add it to "
                         f"--rewards (probed: {', '.join(names)})")
    for name in names:
        for key in ("tokens_per_update", "per_group"):
            k = next((k for k, b in enumerate(batches) if b["rewards"][name].get(key) is None), None)
            if k is not None:
                entry, j = batches[k]["rewards"][name], list(batches[k]["rewards"]).index(name)
                where = f"{f'batches[{k}].' if len(batches) > 1 else ''}rewards[{j}].{key}"
                file, fix = file_and_fix(source, fix=fix)
                raise ValueError(f"{file} field {where} is {'null' if key in entry else 'missing'}: probe entry "
                                 f"{name!r} lacks {key!r}, which the forecast reads (the probe writes it in every "
                                 f"entry); {fix}")
    return names


def budget_of(budget_tokens, budget_flops, cfg: dict, source=None) -> tuple[str, float]:
    """(``"tokens"`` or ``"flops"``, value): the budget asked for, else the probe's ``config.budget_tokens``.

    Raises
    ------
    ValueError
        A budget that is not > 0 (or none at all); a ``config.budget_tokens`` read as the budget that is not what the
        probe accepts (:data:`_SETTINGS`: a finite number >= 1, never text such as ``"2500000"``, ``true``,
        ``"inf"`` or a list), in one line naming the file (``source``, else ``probe.json``), the field and the fix.
    """
    if budget_flops is None:
        kind, stated = "tokens", cfg.get("budget_tokens")
        problem = _setting_problem("budget_tokens", stated) if budget_tokens is None else None
        if problem:
            file, fix = file_and_fix(source)
            raise ValueError(f"{file} field config.budget_tokens {problem}; {fix}")
        value = float(budget_tokens if budget_tokens is not None else stated if stated is not None else math.nan)
    else:
        kind, value = "flops", float(budget_flops)
    if not value > 0:
        raise ValueError(f"budget_{kind} must be > 0 (got {value}); pass budget_tokens= or set the probe's --budget-tokens")
    return kind, value


def arms_of(arms: dict | None, names: list[str]) -> dict:
    """The arms to forecast: ``arms`` checked against the probed entries, or one arm per entry at lr_scale 1.

    Raises
    ------
    ValueError
        An arm whose reward entry the probe did not cover (the message says which flag adds it).
    """
    arms = arms if arms is not None else {n: {"reward": n, "lr_scale": 1.0} for n in names}
    for arm, spec in arms.items():
        if spec.get("reward") not in names:
            key = str(spec.get("reward"))
            fix = (f"add {key.partition('@')[2]!r} to --loss-types (entry REWARD@LOSS_TYPE, gradprobe.probe_keys)"
                   if "@" in key else "add it to --rewards")
            raise ValueError(f"arm {arm!r} has reward {spec.get('reward')!r}, which the probe did not cover "
                             f"(probed: {', '.join(names)}); {fix}")
    return arms


def update_costs(curve, batches: list[dict], names: list[str], cfg: dict, kind: str, reference_reward: str,
                 notes: list[str]) -> tuple[dict, dict]:
    """Each entry's cost of one update, in the reference curve's updates.

    Returns
    -------
    (tokens, cost)
        ``tokens``: name -> generated tokens c_R of one update (the batches' mean, rescaled by
        (curve batch) / (probe batch) when the two update batches differ; a note says so, as it says that the
        probe's batch is assumed when the curve records none); ``cost``:
        name -> the budget's unit per update, c_R tokens, or at a FLOPs budget F_R = f (c_R + 3 c_outcome)
        FLOPs, f the probe's generation FLOPs per generated token and 3 forwards per trained token
        (forward + backward, Kaplan et al. 2020).

    Raises
    ------
    ValueError
        A FLOPs budget without the probe ledger's generation FLOPs, or a ledger ``charged_generated_tokens`` or
        ``flops.generation`` that is no finite number >= 0 (``true``, text: the field and the fix named).
    """
    batches_of, probe_b = update_batches(curve, cfg), _probe_batch(cfg)
    scale = 1.0
    if batches_of is not None:
        (cp, cg), (pp, pg) = batches_of["curve"], batches_of["probe"]
        scale = (cp * cg) / (pp * pg)
        if batches_of["stated"]:  # the update the probe was given is not the one the forecast is for: said plainly
            notes.append(f"the forecast reads the curve's updates, {cp}x{cg} completions, so it is a forecast for "
                         f"{cp}x{cg} updates, not the {pp}x{pg} the probe was given (--update-prompts/--update-group): "
                         f"tokens per update rescaled by {scale:g} to the curve's (per-update efficiency does not "
                         f"depend on the batch size); to forecast {pp}x{pg} updates, give --reference-curve the curve "
                         f"of a grpo run at {pp}x{pg} (`gradprobe train` with a plan whose [train] prompts_per_update "
                         f"= {pp} and group = {pg}, or your own run's log)")
        else:
            notes.append(f"the curve's updates are {cp}x{cg} completions, the probe's {pp}x{pg}: tokens per update "
                         f"rescaled by {scale:g} (per-update efficiency does not depend on the batch size; pass "
                         "--update-prompts/--update-group to state the update you mean)")
    elif all(probe_b) and not all(_curve_batch(curve)):  # a CSV, a TRL log, a metrics.jsonl without its config.json
        trl = _trl_config_batch(batches, probe_b)
        notes.append(f"the reference curve does not record its update batch (update_prompts x update_group), so its "
                     f"updates are taken to be the probe's {probe_b[0]}x{probe_b[1]} completions" + (
                         f", which --trl-config {trl} gave: right when the curve is that run's log; if it comes from "
                         "another run, pass --update-prompts/--update-group equal to that run's" if trl else
                         "; if the run it comes from used another batch, pass --update-prompts/--update-group equal to "
                         "that run's (a TRL GRPOTrainer's: per-device batch x devices x gradient accumulation / "
                         "num_generations prompts x num_generations)"))
    tokens = {n: scale * float(np.mean([b["rewards"][n]["tokens_per_update"] for b in batches])) for n in names}
    if kind != "flops":
        return tokens, dict(tokens)
    fpt = []
    for b in batches:
        led = b["ledger"]
        charged = _ledger_number(led.get("charged_generated_tokens"), "ledger.charged_generated_tokens") or 0
        gen = _ledger_number((led.get("flops") or {}).get("generation"), "ledger.flops.generation")
        if charged and gen:
            fpt.append(gen / charged)
    if not fpt:
        raise ValueError("a FLOPs budget needs the probe ledger's generation FLOPs (ledger.flops.generation); "
                         "re-run the probe with this gradprobe or give budget_tokens")
    per_token = float(np.mean(fpt))
    c_ref = tokens[reference_reward]
    return tokens, {n: per_token * (tokens[n] + TRAIN_FORWARDS * c_ref) for n in names}


def _trl_config_batch(batches: list[dict], probe_b: tuple) -> str | None:
    """The ``--trl-config`` file the probe's update batch ``probe_b`` ((prompts, group), :func:`_probe_batch`) came
    from, else None. From the probe's ``trl_config`` record
    (:meth:`gradprobe.integrations.trl_config.TrlProbeSettings.record`): both of its dimensions must have been
    applied from the file (a field mapped to ``--update-prompts`` and one to ``--group``, neither overridden by a
    flag) and still be the probe's (an ``--update-group`` flag, or prompts from ``--prompts``, make it the user's)."""
    rec = batches[0].get("trl_config") if batches else None
    mapped = rec.get("mapped") if isinstance(rec, dict) else None
    if not isinstance(mapped, dict):
        return None
    applied = {v.get("flag"): v.get("probe_value") for v in mapped.values()
               if isinstance(v, dict) and v.get("applied") and v.get("flag") in ("--update-prompts", "--group")}
    from_file = (applied.get("--update-prompts"), applied.get("--group"))
    return str(rec.get("path")) if None not in from_file and tuple(probe_b) == from_file else None


def _probe_batch(cfg: dict) -> tuple:
    """(prompts, group) of the update the probe's ``config`` forecasts: ``update_prompts`` / ``update_group``,
    each falling back to the probe batch's ``prompts`` / ``group`` (None where neither is recorded)."""
    return (cfg.get("update_prompts") or cfg.get("prompts"), cfg.get("update_group") or cfg.get("group"))


def _curve_batch(curve) -> tuple:
    """(prompts, group) of the reference curve's updates, from its ``metadata`` (None where not recorded)."""
    return (curve.metadata.get("update_prompts"), curve.metadata.get("update_group"))


def update_batches(curve, cfg: dict) -> dict | None:
    """The update the forecast is for, where it differs from the probe's, else None.

    The forecast reads the reference curve's updates (its x axis), so it is a forecast for updates of the curve's
    batch; the probe's update is ``config.update_prompts`` x ``config.update_group`` (completions per update, each
    falling back to the probe batch's ``prompts`` / ``group``).

    Returns
    -------
    dict or None
        ``{"curve": [prompts, group], "probe": [prompts, group], "stated": bool}`` (integers, completions = prompts
        x group) when both batches are recorded and differ; ``stated`` is True when the probe's config records
        ``update_prompts`` or ``update_group`` (``--update-prompts`` / ``--update-group``, a study's ``[train]``
        batch or a TRL config's: ``gradprobe probe`` records None for an update it was not given), False when the
        probe batch stands in for the update. None when they are equal or either is not recorded.
    """
    probe_b, curve_b = _probe_batch(cfg), _curve_batch(curve)
    if not (all(probe_b) and all(curve_b)) or tuple(probe_b) == tuple(curve_b):
        return None
    stated = cfg.get("update_prompts") is not None or cfg.get("update_group") is not None
    return {"curve": [int(x) for x in curve_b], "probe": [int(x) for x in probe_b], "stated": stated}


def _ledger_number(value, field: str):
    """``value`` of the probe ledger's ``field`` as it is (None or a finite number >= 0), else ValueError naming
    the field and the fix: ``true`` would count as 1 token, text would break the FLOPs per token."""
    if value is None or (is_json_number(value, finite=True) and value >= 0):
        return value
    why = " (a boolean is never read as 1 or 0)" if isinstance(value, bool) else ""
    raise ValueError(f"probe.json field {field} is {json_number_text(value, json_short(value))}{why}: it must be a "
                     f"finite number >= 0; {PROBE_FIX}")
