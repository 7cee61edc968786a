"""Forecast rows that are not an ordinary forecast, and what the reference row says.

:func:`~gradprobe.forecast.budget_forecast.arm_row` builds one row per arm; the rows here are the ones whose
numbers are missing or qualified, each with the words that say why:

- :func:`no_signal_row`: a reward whose every advantage is 0 on the probe batch (no forecast at all);
- :func:`outside_probe_row`: a learning-rate arm without its own curve;
- :func:`undefined_probe_columns`: any reward when grpo's own reward has no gradient on the probe batch
  (every ratio to it, rho, its interval, SNR and the probe's forecast, is undefined; the verdict is cost only
  and says so, :func:`cost_only_why`);
- :func:`undefined_rho_note`: grpo's own inner product is not positive, so the raw rho is undefined and rho
  falls back to 1 (cost only);
- :func:`equal_cost_row`: under cost only, an arm whose update costs what grpo's does: its forecast is 0 by
  construction, so the verdict says cost only cannot tell it apart and quotes the probe's forecast beside it, or
  "none" and why when the probe cannot tell either (:func:`probe_cannot_tell`: rho undefined, or its SNR <= 1, when
  the probe's forecast is that same 0);
- :func:`reference_rho_undefined` and :func:`unmeasured_probe_row`: what ``gradprobe probe`` prints and saves
  (:func:`~gradprobe.forecast.section.forecast_section`) leaves out the probe numbers it has not measured: every
  rho when the reference update is zero or grpo's own <g_outcome, u> interval includes 0 or lies below it (the
  rows are then cost only's, and say so), and the probe forecast of an arm of grpo's cost whose rho's SNR is <= 1
  (cost only's 0 by construction: no forecast under ``--forecaster probe``);
- :func:`loss_change_clause`: the clause appended to the verdict of an arm whose entry changes the loss type
  (``REWARD@LOSS``, :mod:`gradprobe.probe_keys`): these forecasts do not read what the loss does after the first
  optimizer step of a batch, so their forecast there means "not seen", not "no difference";
- :func:`reference_verdict`: the reference row's label, which says when grpo itself has no gradient and, in a
  guided probe, that the reference is the guided outcome (the unguided grpo update is not in a guided probe).
"""

from __future__ import annotations

import math

from ..probe_keys import split_entry_key
from .proxies import MIN_INFORMATIVE_GROUPS, rho_snr_text
from .result import gain_text, no_gradient_verdict, no_verdict, verdict
from .validated_arms import DEFAULT_LOSS_TYPE

__all__ = ["NAN_IV", "NAN_FORECAST", "no_signal_row", "outside_probe_row", "undefined_probe_columns",
           "undefined_rho_note", "cost_only_why", "equal_cost_row", "loss_change_clause", "reference_verdict",
           "guided_note", "probe_cannot_tell", "reference_rho_undefined", "reference_rho_unbounded",
           "unmeasured_probe_row", "REFERENCE_VERDICT", "NO_VERDICT_MARK",
           "GUIDED_REFERENCE_VERDICT", "FEW_GROUPS_VERDICT", "few_groups_reason", "no_verdict_words"]

NAN_IV = (math.nan, math.nan)
#: (effective updates, accuracy, gain, gain interval) of a forecaster that cannot forecast.
NAN_FORECAST = (math.nan, math.nan, math.nan, NAN_IV)

#: The reference row's verdict in an unguided probe: grpo itself (gain 0 by definition).
REFERENCE_VERDICT = "reference (grpo)"

#: The mark of a number read off a reference curve that gives no verdict at the budget (a row's or the forecast
#: section's ``no_verdict_reason``: :func:`~gradprobe.forecast.budget_forecast.no_verdict_reasons`), in the console
#: table (:func:`gradprobe.forecast.format_forecast`) and the HTML report alike
#: (:func:`gradprobe.forecast.section.row_marks`).
NO_VERDICT_MARK = "*"
#: How the no-verdict reason of an arm whose probe rho rests on too few groups starts (:func:`few_groups_reason`).
FEW_GROUPS_VERDICT = "rho rests on too few groups for its interval to carry a verdict"
#: What the line under a forecast table says a marked number is, by why its row gives no verdict
#: (:func:`no_verdict_words`): the reference curve's reasons, a rho on too few groups, both kinds among the rows.
_NO_VERDICT_WORDS = {"curve": "read off a reference curve that gives no verdict here",
                     "few": "resting on too few probe groups to give a verdict",
                     "both": "read off a reference curve that gives no verdict here, or resting on too few probe "
                             "groups to give one"}
#: The reference row's verdict in a guided probe (every entry is the guided, importance-weighted update).
GUIDED_REFERENCE_VERDICT = ("guided outcome (this probe's reference: the unguided grpo update is not in a guided "
                            "probe; compare in a study)")


def _no_numbers(row: dict) -> dict:
    """``row`` without forecast numbers: every forecaster's gain, accuracy and interval NaN (in place)."""
    row.update({k: math.nan for k in ("effective_updates", "forecast_accuracy", "forecast_gain", "gain_probe",
                                       "gain_cost_only", "gain_signal_proxy")})
    row.update(gain_interval=NAN_IV, gain_probe_interval=NAN_IV, gain_cost_only_interval=NAN_IV,
               gain_signal_proxy_interval=NAN_IV)
    return row


def no_signal_row(row: dict, reason: str) -> dict:
    """The row of a reward without signal on the probe batch (``reason``: why, from
    :func:`~gradprobe.forecast.result.no_signal_reason`): no forecast, not even the raw first-order gain (NaN),
    and a verdict saying it cannot train."""
    if reason.startswith("no usable"):
        fix = "check the reward function: it gave no usable value"
    elif reason.startswith("its rewards are too large"):
        fix = "rescale the reward: its group statistics overflow float64"
    else:
        fix = "it may still train on other prompts: probe more --prompts, a larger --group or an easier task"
    row.update(method="no_signal", no_signal=True, verdict=no_gradient_verdict(reason), rho=math.nan,
               rho_interval=NAN_IV, snr=math.nan, first_order_gain=math.nan,  # rho_raw stays: the raw sums' exact 0
               note=f"its <g_R, u>, interval and SNR of <g_R, u> are exact zeros, not a measurement; {fix}")
    return _no_numbers(row)


def outside_probe_row(row: dict, s: float) -> dict:
    """The row of a learning-rate arm (``lr_scale`` ``s``) without its own curve: no number."""
    _no_numbers(row)
    row.update(method="outside_probe",
               note=f"learning-rate change (x{s:g}): a first-order probe scales linearly with the rate, which "
                    "training contradicts past the optimum; pass a learning-rate sweep's curve "
                    f"(lr_curve={{{s:g}: curve}}) to forecast it",
               verdict="outside what the probe can tell (learning-rate change)")
    return row


def _reference_name(guided: bool) -> str:
    return "the guided outcome" if guided else "grpo"


def undefined_probe_columns(row: dict) -> dict:
    """Blank (NaN) the probe-based columns of a row whose reward is compared with a reference without gradient:
    ``rho_raw``, ``rho``, ``rho_interval``, ``snr``, ``gain_probe`` and its interval (in place)."""
    row.update(rho_raw=math.nan, rho=math.nan, rho_interval=NAN_IV, snr=math.nan, gain_probe=math.nan,
               gain_probe_interval=NAN_IV)
    return row


def cost_only_why(where: str, guided: bool = False) -> str:
    """The clause of a verdict made from cost only because grpo has no gradient ``where`` ("on this batch")."""
    return f"cost only: {_reference_name(guided)} had no gradient {where}, so the probe cannot compare"


#: The start and the fix (its end) of :func:`undefined_rho_note`, by which :func:`unmeasured_probe_row` finds it.
_UNDEFINED_RHO_START, _UNDEFINED_RHO_FIX = "raw rho undefined: ", "probe more --prompts or --probe-batches"


def undefined_rho_note(ref_alignment: float, n_batches: int, guided: bool = False) -> str:
    """The note of a row whose raw rho is undefined because grpo's own inner product (``ref_alignment``: its mean
    over the ``n_batches`` probe batches) is not positive."""
    what = "on the probe batch" if n_batches == 1 else f"(mean over the {n_batches} probe batches)"
    return (f"{_UNDEFINED_RHO_START}{_reference_name(guided)}'s own <g_outcome, u> {what} = {ref_alignment:.3g} is "
            "not positive (its interval includes 0 or lies below it), so the ratio is not defined and rho falls back "
            f"to 1 = cost only; {_UNDEFINED_RHO_FIX}")


def _number(x) -> float:
    """``x`` as a float; None (json_safe's NaN), a boolean or text as NaN."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def probe_cannot_tell(row: dict) -> str | None:
    """Why the probe's forecast of a forecast row is no measurement of its own, or None when it is one.

    The probe forecaster reads rho; when rho is undefined (``rho_raw`` NaN: grpo's own <g_outcome, u> is not
    positive) or shrunk all the way to 1 (``snr`` <= 1: :func:`~gradprobe.forecast.proxies.shrink_factor` is 0),
    its forecast is cost only's, which for an arm of grpo's cost is 0 by construction. Returns a clause for a
    verdict (no trailing punctuation)."""
    raw, snr = _number(row.get("rho_raw")), _number(row.get("snr"))
    if math.isnan(raw):
        return "rho is undefined (grpo's own <g_outcome, u> is not positive)"
    if not snr > 1:
        return f"the probe cannot tell this reward from grpo (SNR of rho-1 {snr:.2f} <= 1, so rho is shrunk to 1)"
    return None


def equal_cost_row(row: dict, budget: str, kind: str, level: float, *, probe_why: str | None = None,
                   probe_fallback: bool = False) -> dict:
    """The row of an arm forecast by cost only whose update costs what grpo's does (in place).

    Cost only reads both at the same effective updates, so its gain is 0 and its interval [0, 0] by
    construction, not a measurement: ``by_construction`` becomes True (what the report reads), ``gain_interval``
    and ``gain_cost_only_interval`` become NaN (printed ``-``), and the verdict says that cost only cannot tell
    rewards of equal cost apart and quotes the probe's forecast (``gain_probe``, ``gain_probe_interval``, ``snr``:
    points vs grpo at ``budget``), marked as the probe's and not validated better than cost only; or, where the
    probe cannot tell (``probe_why``, else :func:`probe_cannot_tell`: rho undefined, or its SNR <= 1, when the
    probe's forecast is this same 0), says "none" and why. ``probe_fallback``: the row's forecaster is the probe,
    fallen back to cost only; its verdict is then ``no forecast at BUDGET: WHY, and cost only, ...``: the 0 is no
    verdict. ``kind``: "tokens" or "flops"; ``level``: the interval's.
    """
    what = "tokens" if kind == "tokens" else "FLOPs"
    why = probe_why or probe_cannot_tell(row)
    zero = f"+0.0 by construction (the same {what} per update as grpo), not a measurement (interval: none)"
    row.update(gain_interval=NAN_IV, gain_cost_only_interval=NAN_IV, by_construction=True)
    if probe_fallback and why:
        row["verdict"] = (f"no forecast at {budget}: {why}, and cost only, its fallback, cannot tell rewards of equal "
                          f"cost apart: its forecast is {zero}")
        return row
    gain, iv, snr = row.get("gain_probe"), row.get("gain_probe_interval") or NAN_IV, _number(row.get("snr"))
    finite = all(math.isfinite(_number(x)) for x in (gain, *iv))
    if why or not finite:
        probe = f"none, since {why}" if why else "none"
    else:
        probe = (f"{gain:+.1f} [{iv[0]:+.1f}, {iv[1]:+.1f}] ({int(round(100 * level))}% interval) vs grpo, "
                 "SNR of rho-1 "
                 + ("-" if math.isnan(snr) else rho_snr_text(row.get("rho_raw"), snr, f"{snr:.2f}")))
    row["verdict"] = (f"cost only cannot tell rewards of equal cost apart: at {budget} its forecast is {zero}; the "
                      f"probe's forecast, not validated better than cost only: {probe}")
    return row


def reference_rho_undefined(entry: dict | None, reference: dict | None = None,
                            guided: bool = False) -> tuple[str, str] | None:
    """Why rho is undefined for every reward of a probe result, judged on the reference reward's own <g_outcome, u>:
    (a clause for a verdict, the forecast section's note), or None when rho is defined (or cannot be judged).

    rho_R = <g_R, u> / <g_outcome, u> (:mod:`~gradprobe.forecast.proxies`) is undefined when its denominator may be 0
    or negative: the reference update u is zero (``reference["norm"]`` 0, or every group's <g_outcome, u> exactly 0:
    every inner product is 0), or grpo's own <g_outcome, u> has a 95% bootstrap interval over prompts (the probe's
    ``interval``, as the probe table prints it) that lies below 0, or a mean that is not positive. An interval that
    includes 0 with a positive mean is not judged here: by Fieller's theorem (Fieller 1954, J. R. Stat. Soc. B 16)
    the ratio's confidence set is then unbounded, but every shipped study probe is of that kind and the probe
    forecaster was validated on them as they are (its SNR shrinkage,
    :func:`~gradprobe.forecast.proxies.probe_efficiency`, is what tempers such a ratio), so blanking it here would
    show a forecaster other than the validated one; :func:`reference_rho_unbounded` gives its note instead.

    Parameters
    ----------
    entry : dict or None
        The reference reward's entry of ``probe.json``'s ``rewards`` (pooled over the batches of a multi-batch
        probe): ``inner_product``, ``interval`` ([lo, hi] or None without a bootstrap), ``per_group``.
    reference : dict or None
        ``probe.json``'s ``reference`` (its ``norm``: 0 for a zero reference update).
    guided : bool
        A guided probe (the reference is the guided outcome).
    """
    if not isinstance(entry, dict):
        return None
    name, ip = _reference_name(guided), _number(entry.get("inner_product"))
    iv = entry.get("interval") if isinstance(entry.get("interval"), (list, tuple)) else None
    lo, hi = (_number(iv[0]), _number(iv[1])) if iv is not None and len(iv) == 2 else (math.nan, math.nan)
    groups = entry.get("per_group") or []
    blank = (f"rho (each reward's <g_R, u> over {name}'s) is undefined; raw rho, rho, its interval, the SNR of "
             "rho-1 and the probe's forecast are blank and no verdict rests on them")
    if _number((reference or {}).get("norm")) == 0 or (ip == 0 and groups and all(_number(g) == 0 for g in groups)):
        return ("rho is undefined (the reference update is zero: every <g_R, u> is 0)",
                f"the reference update u is zero, so every <g_R, u> is exactly 0, {name}'s own included: {blank}; the "
                "probe's warning above says why and what to change")
    if math.isfinite(lo) and math.isfinite(hi) and hi < 0:
        where = "lies below 0"
        return (f"rho is undefined ({name}'s own <g_outcome, u> interval [{lo:+.3e}, {hi:+.3e}] {where})",
                f"{name}'s own <g_outcome, u> = {ip:+.3e}, 95% interval [{lo:+.3e}, {hi:+.3e}] over prompts, {where}: "
                f"the denominator may be 0 or negative, so {blank}; {_UNDEFINED_RHO_FIX}")
    if not ip > 0 and math.isfinite(ip):
        return (f"rho is undefined ({name}'s own <g_outcome, u> = {ip:.3g} is not positive)",
                f"{name}'s own <g_outcome, u> = {ip:.3g} is not positive, so {blank}; {_UNDEFINED_RHO_FIX}")
    return None


def reference_rho_unbounded(entry: dict | None, guided: bool = False) -> str | None:
    """The forecast section's note when grpo's own <g_outcome, u> has a 95% interval that includes 0 with a positive
    mean, or None (no interval, an interval off 0, or a mean that is not positive: :func:`reference_rho_undefined`).

    rho_R = <g_R, u> / <g_outcome, u>. By Fieller's theorem (Fieller 1954, J. R. Stat. Soc. B 16, 175-185) the
    confidence set of a ratio whose denominator's interval includes 0 is unbounded, so rho's printed interval (the
    percentiles of a prompt bootstrap) understates how loosely the probe pins rho down. The numbers are kept, as the
    probe forecaster was validated on such probes (:func:`reference_rho_undefined`); the note says so and how to
    narrow the denominator.

    Parameters
    ----------
    entry : dict or None
        The reference reward's entry of ``probe.json``'s ``rewards``: ``inner_product``, ``interval`` ([lo, hi]).
    guided : bool
        A guided probe (the reference is the guided outcome).
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("interval"), (list, tuple)):
        return None
    iv, ip = entry["interval"], _number(entry.get("inner_product"))
    lo, hi = (_number(iv[0]), _number(iv[1])) if len(iv) == 2 else (math.nan, math.nan)
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(ip) and ip > 0 and lo <= 0 <= hi):
        return None
    name = _reference_name(guided)
    return (f"{name}'s own <g_outcome, u> = {ip:+.3e}, 95% interval [{lo:+.3e}, {hi:+.3e}] over prompts, includes 0: "
            f"rho (each reward's <g_R, u> over {name}'s) then has an unbounded confidence set (Fieller's theorem), so "
            "its printed interval (bootstrap percentiles) understates its uncertainty; the probe forecaster shrinks "
            "rho toward 1 by the SNR of rho-1, as validated on the shipped studies, whose probes all read so; "
            f"{_UNDEFINED_RHO_FIX} to narrow {name}'s interval")


def _without_undefined_rho_note(note: str) -> str:
    """``note`` (clauses joined by "; ") without :func:`undefined_rho_note`'s clause: it says rho falls back to 1."""
    start = note.find(_UNDEFINED_RHO_START)
    if start < 0:
        return note
    end = note.find(_UNDEFINED_RHO_FIX, start)
    end = len(note) if end < 0 else end + len(_UNDEFINED_RHO_FIX)
    return "; ".join(p for p in (note[:start].rstrip("; "), note[end:].lstrip("; ")) if p)


def unmeasured_probe_row(row: dict, *, undefined: str | None, equal_cost: bool, method: str, budget: str,
                         kind: str, level: float, reference_key: str, probe_loss_type: str | None,
                         cost_row: dict | None = None, transfer: str = "") -> dict:
    """A forecast row (floats, NaN for missing) without the probe numbers it has not measured (in place).

    - ``undefined`` (rho undefined for every reward, :func:`reference_rho_undefined`'s clause): the probe columns
      are blanked (:func:`undefined_probe_columns`) and :func:`undefined_rho_note` (rho falls back to 1) leaves the
      note. Under ``method`` "probe" the row becomes cost only's (``cost_row``: the same arm's row of a cost-only
      forecast: effective updates, accuracy, gain, interval, note), labelled ``cost_only (rho undefined)``, its
      verdict saying that the probe cannot compare; an arm of grpo's cost (``equal_cost``) gets
      :func:`equal_cost_row`'s (no forecast under the probe, "none" quoted under cost only);
    - else an arm of grpo's cost whose probe forecast is cost only's 0 by construction (:func:`probe_cannot_tell`:
      rho's SNR <= 1): ``gain_probe`` and its interval are blanked, and under "probe" the verdict is
      :func:`equal_cost_row`'s ``no forecast``.

    A rewritten verdict keeps the row's ``no_verdict_reason`` (:func:`~.result.no_verdict`), ``transfer`` (the
    clause naming a user's curve of another task or model:
    :func:`~gradprobe.forecast.budget_forecast.transfer_clause`) and :func:`loss_change_clause` (entry
    ``row["reward"]`` vs ``reference_key``). ``budget``, ``kind``, ``level``: as
    :func:`equal_cost_row`. Rows without signal and learning-rate arms without a curve are left as they are.
    """
    if row.get("no_signal") or row.get("method") == "outside_probe":
        return row
    why = undefined or (probe_cannot_tell(row) if equal_cost else None)
    if why is None:
        return row
    if undefined:
        undefined_probe_columns(row)
        if method == "probe" and cost_row is not None:
            row.update({k: cost_row[k] for k in ("effective_updates", "forecast_accuracy", "forecast_gain",
                                                 "gain_interval", "note")}, method="cost_only (rho undefined)")
        row["note"] = _without_undefined_rho_note(str(row.get("note") or ""))
    else:
        row.update(gain_probe=math.nan, gain_probe_interval=NAN_IV)
    if method not in ("probe", "cost_only") or (method == "cost_only" and not equal_cost):
        return row  # the forecaster's own verdict stands
    if equal_cost:
        equal_cost_row(row, budget, kind, level, probe_why=why, probe_fallback=method == "probe")
    else:
        row["verdict"] = verdict(row["forecast_gain"], row["gain_interval"], budget, kind,
                                 why=f"cost only: {why}, so the probe cannot compare")
    if row.get("no_verdict_reason"):
        row["verdict"] = no_verdict(budget, row["no_verdict_reason"])
    row["verdict"] += transfer + loss_change_clause(str(row["reward"]), reference_key, probe_loss_type)
    return row


def loss_change_clause(entry: str, reference: str, probe_loss_type: str | None) -> str:
    """The clause appended to the verdict of an arm whose probe entry has a loss type other than the reference's,
    else "".

    ``entry`` and ``reference``: probe entry keys (``REWARD`` or ``REWARD@LOSS``, parsed with
    :func:`~gradprobe.probe_keys.split_entry_key`); ``probe_loss_type``: the probe's own ``config.loss_type`` (None
    or "" when the probe.json does not record it: it is then the default ``grpo``,
    :data:`~.validated_arms.DEFAULT_LOSS_TYPE`, as :func:`~.validated_arms.mark_validated_arms` reads it, so
    ``outcome@grpo`` and ``outcome`` share it). A loss's ratio, clip and
    token weights act on the optimizer steps after the first of each rollout batch (``[train] iterations`` > 1),
    which a first-order probe at the initial policy does not read, and cost only sees the same tokens per update
    (``data/calibration/README.md``, "Studies the calibration never saw").

    Raises
    ------
    ValueError
        A malformed key (:func:`~gradprobe.probe_keys.split_entry_key`).
    """
    probe_loss_type = probe_loss_type or DEFAULT_LOSS_TYPE  # as mark_validated_arms reads an unrecorded one
    own = split_entry_key(entry, probe_loss_type)[1]
    if own == split_entry_key(reference, probe_loss_type)[1]:
        return ""
    name = f" ({own})" if own else ""
    return (f"; a change of loss{name} also acts on the optimizer steps after the first of each batch, which these "
            'forecasts do not read: its forecast means "not seen", not "no difference" (data/calibration/README.md, '
            '"Studies the calibration never saw")')


def reference_verdict(silent_where: str | None, guided: bool) -> str:
    """The reference row's verdict: :data:`REFERENCE_VERDICT` (or :data:`GUIDED_REFERENCE_VERDICT` in a guided
    probe), plus ``": no gradient <silent_where>"`` when the reference reward itself has no signal (it stays the
    reference)."""
    label = GUIDED_REFERENCE_VERDICT if guided else REFERENCE_VERDICT
    return f"{label}: no gradient {silent_where}" if silent_where else label


def guided_note(guidance: dict) -> str:
    """The forecast section's note on a guided probe (``guidance``: ``config.guidance``, fraction and prefix)."""
    knobs = ", ".join(f"{k} {guidance[k]:g}" for k in ("fraction", "prefix")
                      if isinstance(guidance.get(k), (int, float)))
    return (f"a guided probe ({knobs or 'guidance'}): every entry is of the guided, importance-weighted update, the "
            "reference included, so the gains vs grpo here are vs the guided outcome, not unguided grpo (compare the "
            "two in a study)")


def few_groups_reason(gain: float, iv) -> str:
    """The no-verdict reason of an arm whose verdict would rest on the probe's rho while rho rests on under
    :data:`~.proxies.MIN_INFORMATIVE_GROUPS` informative groups (``Efficiency.few_groups``: its SNR and interval do
    not measure its uncertainty, :func:`~.proxies._reading_notes`): the forecast ``gain`` and interval ``iv``
    (accuracy points vs grpo) are quoted for information (left out where not finite), and the fix named."""
    finite = iv is not None and all(isinstance(x, (int, float)) and math.isfinite(x) for x in (gain, *iv))
    nums = f": {gain_text(gain, iv)}, for information only" if finite else ""
    return (f"{FEW_GROUPS_VERDICT} (under {MIN_INFORMATIVE_GROUPS} groups contribute: see the note){nums}; use more "
            "--prompts or --probe-batches")


def no_verdict_words(reasons) -> str:
    """What the line under a forecast table (the console's and ``report.html``'s) says a number marked
    :data:`NO_VERDICT_MARK` is, from the ``no_verdict_reason`` of the marked rows (``reasons``; empty ones ignored):
    read off a reference curve that gives no verdict, resting on too few probe groups (every reason starts
    :data:`FEW_GROUPS_VERDICT`), or either."""
    reasons = [str(r) for r in reasons if r]
    if not any(FEW_GROUPS_VERDICT in r for r in reasons):
        return _NO_VERDICT_WORDS["curve"]
    return _NO_VERDICT_WORDS["few" if all(r.startswith(FEW_GROUPS_VERDICT) for r in reasons) else "both"]
