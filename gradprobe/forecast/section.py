"""The forecast as ``gradprobe probe`` prints and saves it: ``probe.json``'s ``forecast`` section.

:func:`forecast_section` forecasts a probe result against the shipped reference curve of its model
(:data:`DEFAULT_CURVES`) with the forecaster that validated best (:data:`VALIDATION`, measured by
``calib report``), and records what pre-screening cost (with or without a forecast); :func:`format_forecast` prints it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..outputs import json_float, json_short
from ..tables import format_columns, shown
from .accuracy_values import is_scale_note
from .budget_forecast import forecast_rewards, forecast_table, transfer_clause
from .curves import ReferenceCurve, default_curve_path
from .probe_input import budget_of, check_batches, check_entries, check_entry_inputs, file_and_fix, probe_batches_of
from .proxies import EXACT_SNR, ROUNDING_RTOL, rho_snr_text
from .result import METHODS, format_budget
from .special_rows import (NO_VERDICT_MARK, REFERENCE_VERDICT, reference_rho_unbounded, reference_rho_undefined,
                           no_verdict_words, reference_verdict, unmeasured_probe_row)
from .start_check import CHECK_MARK
from .validated_arms import DEFAULT_LOSS_TYPE, mark_validated_arms

__all__ = ["DEFAULT_CURVES", "VALIDATION_FILE", "VALIDATION", "load_validation", "forecast_section", "pre_screen_line",
           "format_forecast", "SECONDS_NOTE", "RAW_GAINS_ABOVE", "row_marks", "RHO_SNR_HEADER", "EXACT_SNR_LINE"]

#: Models whose shipped reference curve is used when no --reference-curve is given.
DEFAULT_CURVES = {"tiny": "tiny_frontier_grpo.json"}

VALIDATION_FILE = "forecast_validation.json"

#: What ``forecast.budget["seconds_note"]`` says when the probe had ``--budget-seconds``: the forecast (read on
#: the reference curve, whose x axis is updates at a token cost) is at the token or FLOPs budget only.
SECONDS_NOTE = ("the forecast is at the token (or FLOPs) budget only; the seconds budget's gain is each reward's raw "
                "first-order predicted_gain_at_time_budget (rewards[]), from its seconds_per_update including the "
                "reward's own compute")

#: The words of the no-curve ``note`` (:func:`forecast_section`) that place the raw first-order gains above it, as
#: ``gradprobe probe`` prints them (its probe table comes first); ``report.html`` finds and replaces them
#: (:func:`gradprobe.probe.report_html._page_note`: its raw per-reward table comes after the note).
RAW_GAINS_ABOVE = "the gains above are"

_UNSURE = NO_VERDICT_MARK
#: The forecast table's column of rho's evidence, |rho_raw - 1| / se (``snr`` of the forecast rows,
#: :mod:`~.proxies`), not the per-reward table's <g_R,u> / se (:data:`gradprobe.probe.table.ALIGNMENT_SNR_HEADER`).
#: Two SNRs, each named by its ratio. A row whose se is float rounding (a reward that rescales grpo's exactly) shows
#: ``exact`` there (:func:`~.proxies.rho_snr_text`), not a number of order 1e14; one whose se is exactly 0 (a ratio
#: resting on one contributing group, whose note says so) shows ``inf``, not ``exact``.
RHO_SNR_HEADER = "|rho-1|/se"
#: The line under a forecast table with an ``exact`` SNR of rho-1 (:func:`~.proxies.se_at_rounding`).
EXACT_SNR_LINE = (f"{EXACT_SNR}: rho's bootstrap replicates equal it to float rounding (se <= {ROUNDING_RTOL:.1e} "
                  "|rho|): each contributing group's alignment is rho times grpo's (e.g. grpo's advantages rescaled), "
                  "so rho is exact on the probe batch, not noisy")

#: What ``pre_screen["note"]`` says the pre-screen cost counts.
_PRE_SCREEN_NOTE = ("probe rollouts, MC continuations and the held-out reference's rollouts, against one grpo run's "
                   "budget")


def load_validation(path=None) -> dict:
    """What ``--forecaster auto`` (the default of ``gradprobe probe``) uses, and the evidence.

    The issue's rule: the verdict uses the forecaster that validates best, and says which. The record is
    measured, not written by hand: ``calib report STUDY... --validation-out FILE`` picks the forecaster
    with the lowest leave-one-study-out mean absolute error of the gain vs grpo over the shipped studies
    (``calib.report.validation_record``). The shipped record is ``gradprobe/data/curves/``
    :data:`VALIDATION_FILE`; ``data/calibration/README.md`` says which studies it covers.

    Returns
    -------
    dict
        ``{"best": "probe" | "cost_only" | "signal_proxy", "mae": {forecaster: points}, "evidence": str,
        "studies": [...], "arms", "rewards", "loss_types": what the validated arms were, ...}`` (a record
        written before it listed its arms has no ``arms``, ``rewards`` or ``loss_types``).

    Raises
    ------
    ValueError
        The file is missing, not JSON, or names an unknown forecaster (the message names the file and the
        command that rewrites it).
    """
    path = Path(path) if path is not None else default_curve_path().with_name(VALIDATION_FILE)
    fix = "rewrite it with `calib report STUDY... --out DIR --validation-out FILE`"
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"the forecaster validation record {path} cannot be read ({e}); {fix}") from None
    if record.get("best") not in METHODS or not record.get("evidence"):
        raise ValueError(f"the forecaster validation record {path} has no valid 'best' forecaster and evidence; {fix}")
    return record


#: The shipped validation record (:func:`load_validation`), read once at import.
VALIDATION = load_validation()


def _pre_screen(result: dict, budget_kind: str, budget_value: float | None) -> tuple[dict, list[str]]:
    """What screening cost against one grpo run's budget: ``probe.json``'s ``forecast.pre_screen`` and its note.

    The spent tokens are the probe ledger's generated tokens of the probe batches (``rollout``), the MC
    continuations (``continuation``) and prompt selection (``selection``), plus every category of the held-out
    reference's own ledger (``reference.ledger``, its rollouts); the probe ledger's ``eval`` is not counted.

    Parameters
    ----------
    result : dict
        A probe result (``ledger`` and ``reference.ledger`` read; missing ones count 0 tokens).
    budget_kind : {"tokens", "flops"}
        The kind of the forecast's budget (``forecast.budget["kind"]``).
    budget_value : float or None
        Its value (generated tokens or FLOPs); None when the budget is not known.

    Returns
    -------
    (block, notes)
        ``block``: ``{"generated_tokens": int, "budget_tokens": float | None, "share_of_budget": float | None,
        "note": _PRE_SCREEN_NOTE}``, the budget and the share (spent / budget, a fraction) None unless the budget
        is a positive number of tokens; ``notes``: one note when the pre-screen spent at least the budget (a
        pre-screen is worth running only when it costs less than what it screens), else empty.
    """
    gen = (result.get("ledger") or {}).get("generated_tokens") or {}
    ref_led = ((result.get("reference") or {}).get("ledger") or {}).get("generated_tokens") or {}
    spent = int(sum(gen.get(c, 0) for c in ("rollout", "continuation", "selection")) + sum(ref_led.values()))
    budget = float(budget_value) if budget_kind == "tokens" and budget_value is not None and budget_value > 0 else None
    block = {"generated_tokens": spent, "budget_tokens": budget, "share_of_budget": spent / budget if budget else None,
             "note": _PRE_SCREEN_NOTE}
    if not (budget and spent >= budget):
        return block, []
    return block, [f"the pre-screen spent {spent:,} generated tokens, {spent / budget:.1f}x one grpo run's budget of "
                   f"{budget:,.0f}: at this budget training an arm costs less than screening it; probe fewer prompts "
                   "or continuations, or forecast at the budget you will train"]


def _no_forecast(result: dict, note: str) -> dict:
    """The ``forecast`` section without a forecast: ``note`` says what one needs; the pre-screen cost (against the
    probe's ``config.budget_tokens``, read as :func:`forecast_rewards` reads it; unknown when that is not a positive
    number) and its notes are kept."""
    try:
        kind, value = budget_of(None, None, result.get("config") or {})
    except (TypeError, ValueError):  # no usable budget: the spent tokens are still reported
        kind, value = "tokens", None
    block, notes = _pre_screen(result, kind, value)
    return {"available": False, "note": note, "pre_screen": block, "notes": notes}


#: The no-curve ``note`` of :func:`forecast_section` after "no reference curve for model 'M': " and
#: :data:`RAW_GAINS_ABOVE` (read when the note is made: the probe's page finds those words by the module's value).
_NO_CURVE = ("the raw first-order extrapolation (expected to overestimate); a forecast needs a "
             "reference curve: pass --reference-curve (Python: reference_curve=; a grpo run's metrics.jsonl, a TRL "
             "trainer_state.json, a CSV of update,accuracy, a study folder or a saved curve)")


def _entry_names(result: dict, source, fix: str | None = None) -> list[str]:
    """The names of the reward entries of probe result ``result``, after refusing (ValueError, one line naming the
    file: ``source``, else ``probe.json``; the field and the fix) a ``rewards`` item that is no reward object with a
    text ``name``, e.g. ``rewards: [null]`` or ``["x"]`` (:func:`~.probe_input.probe_batches_of`'s check), and, with
    ``source`` (the dict is that ``probe.json`` as the probe wrote it), an entry's ``lr``, budget or
    ``tokens_per_update`` that the file's ``config`` or batch records contradict
    (:func:`~.probe_input.check_entry_inputs`, which refuses an entry's number field that holds no number first,
    as :func:`gradprobe.load_probe` does), and a ``rewards`` object (name -> entry), as
    :func:`gradprobe.outputs.read_probe_json` refuses it. A dict without ``source`` (the probe's own result before
    it is written, one put together in memory) is not checked against its records. ``fix``: the fix a refusal names,
    the caller's (default: derived from ``source``, :func:`~.probe_input.file_and_fix`)."""
    rewards = result.get("rewards", [])
    if source is not None and isinstance(rewards, dict):  # a name -> entry object: no probe.json of the probe's
        raise ValueError(f"{source} has no 'rewards' list: not a probe.json of gradprobe probe; "
                         f"{file_and_fix(source, fix=fix)[1]}")
    check_entries(rewards, "", source, fix=fix)  # a null or text item: one line naming the field, not a TypeError
    if source is not None:
        check_entry_inputs(result, source, fix=fix)
    return ([r["name"] for r in rewards] if isinstance(rewards, list) else
            [e.get("name", k) for k, e in rewards.items()])  # (name -> entry, as probe_batches_of reads it)


def _config_of(result, source, fix: str | None = None) -> dict:
    """The ``config`` of probe result ``result`` ({} when it records none), after refusing a ``result`` that is no
    dict (a ``probe.json`` holding ``[]``: was an AttributeError) in one line naming the file (``source``, else
    ``probe.json``) and the fix (``fix``, the caller's, else :func:`~.probe_input.file_and_fix`'s)."""
    if not isinstance(result, dict):
        file, fix = file_and_fix(source, fix=fix)
        raise ValueError(f"{file} holds {json_short(result)}, not a probe result (a JSON object with a 'rewards' "
                         f"list, as gradprobe probe writes it); {fix}")
    return result.get("config") or {}


def forecast_section(result: dict, *, curve: ReferenceCurve | None = None, curve_spec: str | None = None,
                     method: str = "auto", reference_reward: str = "outcome", source=None, fix=None) -> dict:
    """The ``forecast`` section of ``probe.json`` (what ``gradprobe probe`` prints).

    Parameters
    ----------
    result : dict
        A probe result (one batch, or combined by :func:`gradprobe.probe.batches.run_probe_batches`).
    curve : ReferenceCurve, optional
        The reference curve. Default: the shipped curve of the probe's model (:data:`DEFAULT_CURVES`), else none.
    curve_spec : str, optional
        How the user named the curve (recorded).
    method : {"auto", "probe", "cost_only", "signal_proxy"}
        ``auto``: the forecaster that validated best (:data:`VALIDATION`), recorded with its evidence.
    reference_reward : str
    source : path, optional
        The file ``result`` was read from: a refusal of its entries names it (else ``probe.json``) and its fix.
        Given, ``result`` is that file as the probe wrote it, checked against its own records (:func:`_entry_names`).
    fix : str, optional
        The fix such a refusal names, the caller's (calib's for a dict); default: :func:`~.probe_input.file_and_fix`'s.

    Returns
    -------
    dict
        :meth:`ForecastResult.to_dict` (with ``no_verdict_reason``: why the reference curve gives no verdict at the
        budget or None, per row too: such a row's ``verdict`` says why instead of advising; ``update``) plus
        ``method_choice`` (why this forecaster), per row
        ``validated_arm`` (False for a reward or loss type that was not among the arms the forecasters were
        validated on, whose ``verdict`` then says so; None when the validation record does not list its
        arms: :func:`gradprobe.forecast.validated_arms.mark_validated_arms`), ``curve_spec``, ``curve_options``
        (how the curve was read: ``{"metric", "accuracy_scale", "initial_accuracy"}`` as given to
        :func:`~gradprobe.forecast.load_reference_curve`, i.e. ``--reference-curve-metric``,
        ``--reference-curve-scale`` and ``--initial-accuracy``, None where not given; the whole None for a curve
        not read by it: :attr:`ReferenceCurve.read_options`), ``curve_is_default``, ``budget["seconds"]`` and
        ``budget["seconds_note"]`` (with ``config.budget_seconds``: the forecast stays at the token or FLOPs
        budget, :data:`SECONDS_NOTE`), ``guided`` (``config.guidance`` is set: the reference is the guided outcome)
        and ``pre_screen`` (generated tokens of the probe batches, continuations and held-out reference, and their
        share of the budget: what screening cost against one grpo run; :func:`_pre_screen`). Without a curve, or without
        the reference reward: ``{"available": False, "note": ..., "pre_screen": ..., "notes": [...]}``, the note
        saying what is needed, ``pre_screen`` the same block against the probe's ``config.budget_tokens`` and
        ``notes`` the pre-screen's (a pre-screen dearer than the budget).

    Raises
    ------
    ValueError
        See :func:`forecast_rewards`; each naming ``source``: an edited entry (:func:`~.probe_input.probe_batches_of`),
        a ``rewards`` item that is no reward object or an entry its file's records contradict (:func:`_entry_names`),
        one without ``tokens_per_update`` or ``per_group`` (:func:`~.probe_input.check_batches`), no dict (``[]``).
    """
    cfg = _config_of(result, source, fix)
    is_default = False
    if curve is None:
        name = DEFAULT_CURVES.get(str(cfg.get("model")))
        if name is None:
            return _no_forecast(result, f"no reference curve for model {cfg.get('model')!r}: "
                                f"{RAW_GAINS_ABOVE} {_NO_CURVE}")
        curve = ReferenceCurve.load(default_curve_path().with_name(name))
        curve_spec, is_default = f"default ({name})", True
    if reference_reward not in _entry_names(result, source, fix):
        return _no_forecast(result, f"the forecast is a gain vs grpo: add {reference_reward!r} to --rewards")
    names = check_batches(batches := probe_batches_of(result, source, fix=fix), reference_reward, source, fix=fix)
    choice = "as asked" if method != "auto" else f"auto: validated best, {VALIDATION['evidence']}"
    method = VALIDATION["best"] if method == "auto" else method
    fr = forecast_rewards(curve, result, method=method, reference_reward=reference_reward, _batches=batches,
                          _names=names)  # read and checked here with the file named: not again
    _unmeasured_probe_columns(fr, result, curve, method, reference_reward, batches, names)
    d = fr.to_dict()
    d["method_choice"] = choice
    mark_validated_arms(d["rows"], VALIDATION, probe_loss_type=str(cfg.get("loss_type") or DEFAULT_LOSS_TYPE),
                        reference_reward=reference_reward, forecaster=d["method"])
    secs = cfg.get("budget_seconds")
    if secs is not None:  # the forecast is at the token (or FLOPs) budget; the seconds one is per reward, raw
        d["budget"].update(seconds=float(secs), seconds_note=SECONDS_NOTE)
    block, screen_notes = _pre_screen(result, d["budget"]["kind"], d["budget"]["value"])
    d.update(curve_spec=curve_spec, curve_options=getattr(curve, "read_options", None),
             curve_is_default=is_default, guided=bool(cfg.get("guidance")), pre_screen=block)
    if not is_default:  # how a user's curve's accuracies were read (fractions or points): a wrong guess moves R0
        d["notes"] = [*d.get("notes", []), *(n for n in curve.notes if is_scale_note(n))]
    d["notes"] = [*d.get("notes", []), *screen_notes]
    return d


def _unmeasured_probe_columns(fr, result: dict, curve: ReferenceCurve, method: str, reference_reward: str,
                              batches: list[dict] | None = None, names: list[str] | None = None) -> None:
    """Blank the probe numbers of ``fr`` (a :class:`~.result.ForecastResult` of ``result`` with ``method``; in place)
    that the probe has not measured, and say so (:func:`~.special_rows.unmeasured_probe_row`). ``batches``, ``names``:
    ``probe_batches_of(result)`` and its ``check_batches`` as the caller read them, reused by the cost-only forecast
    below (default: read and checked again).

    Where rho is undefined for every reward (:func:`~.special_rows.reference_rho_undefined`: the reference update is
    zero, or grpo's own <g_outcome, u> interval lies below 0) the probe columns are blanked, a note says why, and
    under ``method`` "probe" each row is cost only's (a cost-only forecast of the same probe and curve); else an arm
    of grpo's cost whose rho's SNR is <= 1 loses its probe forecast (cost only's 0 by construction). Where grpo's
    interval includes 0 with a positive mean, the numbers are kept and a note says rho's confidence set is unbounded
    (:func:`~.special_rows.reference_rho_unbounded`).
    Nothing changes when grpo's own reward has no gradient (the rows say so already). Only what ``gradprobe probe``
    prints and saves: :func:`~.budget_forecast.forecast_rewards` (and the calibration's rows, read from it through
    :func:`~.study.study_forecasts`) keep the probe forecaster as validated, fallbacks included.
    """
    rows = fr.table.to_dict(orient="records")
    cfg = result.get("config") or {}
    guided = bool(cfg.get("guidance"))
    ref = next((r for r in rows if r["reward"] == reference_reward and math.isclose(r["lr_scale"], 1.0)), None)
    if ref is None or ref["verdict"] != reference_verdict(None, guided):  # grpo without gradient: already blank
        return
    entry = next((e for e in result.get("rewards") or [] if isinstance(e, dict) and e.get("name") == reference_reward),
                 None)
    undefined = reference_rho_undefined(entry, result.get("reference"), guided)
    cost_rows = {}
    if undefined and method == "probe":  # the rows fall back to cost only's forecast of the same arms
        cost = forecast_rewards(curve, result, method="cost_only", reference_reward=reference_reward, _batches=batches,
                                _names=names)
        cost_rows = {r["arm"]: r for r in cost.table.to_dict(orient="records")}
    for row in rows:
        if row is ref:
            continue
        equal = math.isclose(row["lr_scale"], 1.0) and math.isclose(row["tokens_per_update"], ref["tokens_per_update"],
                                                                     rel_tol=1e-9)
        unmeasured_probe_row(row, undefined=undefined[0] if undefined else None, equal_cost=equal, method=method,
                             budget=format_budget(fr.budget["value"], fr.budget["kind"]), kind=fr.budget["kind"],
                             level=fr.level, reference_key=reference_reward, probe_loss_type=cfg.get("loss_type"),
                             cost_row=cost_rows.get(row["arm"]), transfer=transfer_clause(curve, cfg))
    if undefined:
        fr.notes.append(undefined[1])
    elif unbounded := reference_rho_unbounded(entry, guided):
        fr.notes.append(unbounded)
    fr.table = forecast_table(rows, list(fr.table.columns))


def format_forecast(section: dict) -> str:
    """Plain-text forecast table and verdicts (printed under the probe table by ``gradprobe probe``).

    Numbers read off a reference curve that gives no verdict at the budget (``no_verdict_reason``: the section's
    for grpo's accuracy in the title and in grpo's row, whose gain is 0 by definition and unmarked; a row's for its
    accuracy and gain) are marked ``*``, with a line under the table; the rows' verdicts then say why, instead of
    advice. Where the forecast is for other updates than the probe's (the section's ``update``), the title names
    them.

    Without a forecast (``available`` False): the ``forecast: none.`` line with the section's note, then the
    pre-screen cost line (when the section's ``pre_screen`` has a share of a token budget) and its notes.
    """
    if not section:
        return ""
    if not section.get("available"):  # what screening cost is still said: it was spent
        return "\n".join([f"\nforecast: none. {section.get('note', '')}", *pre_screen_line(section),
                          *(f"note: {n}" for n in section.get("notes", []))])
    pct = int(round(100 * section["level"]))
    unsure = _UNSURE if section.get("no_verdict_reason") else ""  # read off a curve that gives no verdict
    lines = ["", _title(section, unsure),
             f"forecaster: {section['method']} ({section.get('method_choice', '')}); the other forecasters' gains are "
             "printed beside it",
             f"reference curve: {section['curve']}"
             + ("  [shipped default]" if section.get("curve_is_default") else "")]
    notes = section.get("notes", [])
    lines += [f"note: {n}" for n in notes if n.startswith(CHECK_MARK)]  # above the verdicts it casts doubt on
    header = ["arm", "tokens/update", "raw rho", "rho", f"rho {pct}%", RHO_SNR_HEADER, "eff.updates", "accuracy",
              "gain vs grpo", f"{pct}% interval", "probe", "cost-only", "signal", "method"]
    rows = []

    def f(x, spec):  # numbers in json_safe's encoding: None -> "-", "inf"/"-inf" -> inf/-inf; -0.0 prints as 0
        if x is None:
            return "-"
        s = format(json_float(x), spec)  # a value that rounds to zero prints as the verdicts print it: +0.0, not -0.0
        return ("+" if spec.startswith("+") else "") + s[1:] if s.startswith("-") and float(s) == 0 else s

    for r in section["rows"]:
        riv = r.get("rho_interval") or [None, None]
        riv_s = "-" if riv[0] is None else f"[{f(riv[0], '.2f')}, {f(riv[1], '.2f')}]"
        raw = r.get("rho_raw")
        giv = r.get("gain_interval") or [None, None]
        giv_s = "-" if giv[0] is None else f"[{f(giv[0], '+.1f')}, {f(giv[1], '+.1f')}]"
        acc_mark, mark = row_marks(section, r)
        rows.append([r["arm"], f(r["tokens_per_update"], ",.0f"), f(raw, ".2f"), f(r["rho"], ".2f"), riv_s,
                     rho_snr_text(raw, r["snr"], f(r["snr"], ".2f")), f(r["effective_updates"], ".1f"),
                     f(r["forecast_accuracy"], ".1f") + acc_mark,
                     f(r["forecast_gain"], "+.1f") + mark, giv_s, f(r["gain_probe"], "+.1f"),
                     f(r["gain_cost_only"], "+.1f"), f(r["gain_signal_proxy"], "+.1f"), str(r["method"])])
    lines += format_columns(header, rows, "<>>>>>>>>>>>><")
    if any(row[5] == EXACT_SNR for row in rows):
        lines.append(EXACT_SNR_LINE)
    if any(r.get("no_verdict_reason") for r in section["rows"]):  # a curve's reason, or a rho on too few groups
        words = no_verdict_words(r.get("no_verdict_reason") for r in section["rows"])
        lines.append(f"{_UNSURE} {words} (why: below); not advice")
    elif section.get("no_verdict_reason"):  # no row's verdict says why (grpo alone, rewards without gradient)
        lines.append(f"{_UNSURE} read off a reference curve that gives no verdict here: "
                     f"{section['no_verdict_reason']}")
    lines.append("")
    for r in section["rows"]:
        if r["verdict"] != REFERENCE_VERDICT:  # grpo's plain row has nothing to say; a guided or flat reference has
            # the arm as the table above shows it (a tab in a plug-in reward's name as \\t: tables.shown)
            lines.append(f"{shown(r['arm'])}: {r['verdict']}" + (f"  ({r['note']})" if r.get("note") else ""))
    lines += pre_screen_line(section)
    lines += [f"note: {n}" for n in notes if not n.startswith(CHECK_MARK)]
    return "\n".join(lines)


def _title(section: dict, unsure: str) -> str:
    """The forecast's title line: the budget, the update the forecast is for where it is not the probe's (the
    section's ``update``: :func:`~.probe_input.update_batches`), grpo's accuracy there (marked ``unsure``: ``*``
    when the curve gives no verdict, else ''), and where the seconds budget's gains are."""
    b = section["budget"]
    at = f"{format_budget(b['value'], b['kind'])} {'tokens' if b['kind'] == 'tokens' else ''}".rstrip()
    upd = section.get("update")
    if upd:  # the forecast reads the curve's updates: say which, as the note says why
        theirs = f"{upd['probe'][0]}x{upd['probe'][1]}"
        theirs = f"the {theirs} of --update-prompts x --update-group" if upd.get("stated") else f"the probe's {theirs}"
        at += f", for the curve's {upd['curve'][0]}x{upd['curve'][1]} updates, not {theirs}"
    acc = section.get("grpo_accuracy")  # None (json_safe's NaN) only from a curve without a value there
    reaches = (f"reaches {json_float(acc):.1f}{unsure} points there" if acc is not None
               else "has no accuracy there (the curve gives none)")
    if section.get("guided"):  # a guided probe: its reference is the guided outcome, not grpo
        title = f"forecast vs the guided outcome at {at} (read on grpo's curve, which {reaches})"
    else:
        title = f"forecast vs grpo at {at} (grpo {reaches})"
    if b.get("seconds") is not None:
        title += (f"; --budget-seconds {b['seconds']:g} is not forecast here: each reward's raw first-order gain at "
                  f"{b['seconds']:g} device-seconds is gain@{b['seconds']:g}s in the table above "
                  "(predicted_gain_at_time_budget)")
    return title


def row_marks(section: dict, row: dict) -> tuple[str, str]:
    """(accuracy mark, gain mark) of a forecast table row: :data:`~.special_rows.NO_VERDICT_MARK` on a number read
    off a reference curve that gives no verdict at the budget, else ''. A row's own ``no_verdict_reason`` marks its
    accuracy and gain (and its interval); the section's marks grpo's own row's accuracy (the title's accuracy, read
    off that curve) but not its gain, which is 0 by definition. The one rule of the console table
    (:func:`format_forecast`) and the HTML report (:mod:`gradprobe.probe.report_html`)."""
    mark = NO_VERDICT_MARK if row.get("no_verdict_reason") else ""
    title = NO_VERDICT_MARK if section.get("no_verdict_reason") and _is_reference(section, row) else ""
    return mark or title, mark


def _is_reference(section: dict, row: dict) -> bool:
    """Whether ``row`` is grpo's own (the section's ``reference_reward`` at lr_scale 1): its accuracy is the title's."""
    scale = row.get("lr_scale")
    return row.get("reward") == section.get("reference_reward") and (scale is None or math.isclose(scale, 1.0))


def pre_screen_line(section: dict) -> list[str]:
    """The pre-screen cost line of a ``forecast`` section (:func:`_pre_screen`), none without a token budget: one
    wording for the text output (:func:`format_forecast`) and the HTML report. Returns a list of 0 or 1 lines."""
    ps = section.get("pre_screen") or {}
    if ps.get("share_of_budget") is None:
        return []
    return [f"pre-screen cost: {ps['generated_tokens']:,} generated tokens = {ps['share_of_budget']:.1%} of one grpo "
            f"run's {format_budget(ps['budget_tokens'], 'tokens')} budget"]
