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
  construction, so the verdict says cost only cannot tell it apart and quotes the probe's forecast beside it;
- :func:`loss_change_clause`: the clause appended to the verdict of an arm whose entry changes the loss type
  (``REWARD@LOSS``, :mod:`gradprobe.probe_keys`): these forecasts do not read what the loss does after the first
  optimizer step of a batch, so their forecast there means "not seen", not "no difference";
- :func:`reference_verdict`: the reference row's label, which says when grpo itself has no gradient and, in a
  guided probe, that the reference is the guided outcome (the unguided grpo update is not in a guided probe).
"""

from __future__ import annotations

import math

from ..probe_keys import split_entry_key
from .result import no_gradient_verdict
from .validated_arms import DEFAULT_LOSS_TYPE

__all__ = ["NAN_IV", "NAN_FORECAST", "no_signal_row", "outside_probe_row", "undefined_probe_columns",
           "undefined_rho_note", "cost_only_why", "equal_cost_row", "loss_change_clause", "reference_verdict",
           "guided_note", "REFERENCE_VERDICT", "GUIDED_REFERENCE_VERDICT"]

NAN_IV = (math.nan, math.nan)
#: (effective updates, accuracy, gain, gain interval) of a forecaster that cannot forecast.
NAN_FORECAST = (math.nan, math.nan, math.nan, NAN_IV)

#: The reference row's verdict in an unguided probe: grpo itself (gain 0 by definition).
REFERENCE_VERDICT = "reference (grpo)"
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
               note=f"its <g_R, u>, interval and SNR are exact zeros, not a measurement; {fix}")
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


def undefined_rho_note(ref_alignment: float, n_batches: int, guided: bool = False) -> str:
    """The note of a row whose raw rho is undefined because grpo's own inner product (``ref_alignment``: its mean
    over the ``n_batches`` probe batches) is not positive."""
    what = "on the probe batch" if n_batches == 1 else f"(mean over the {n_batches} probe batches)"
    return (f"raw rho undefined: {_reference_name(guided)}'s own <g_outcome, u> {what} = {ref_alignment:.3g} is not "
            "positive (its interval includes 0 or lies below it), so the ratio is not defined and rho falls back to 1 "
            "= cost only; probe more --prompts or --probe-batches")


def equal_cost_row(row: dict, budget: str, kind: str, level: float) -> dict:
    """The row of an arm forecast by cost only whose update costs what grpo's does (in place).

    Cost only reads both at the same effective updates, so its gain is 0 and its interval [0, 0] by
    construction, not a measurement: ``by_construction`` becomes True (what the report reads), ``gain_interval``
    and ``gain_cost_only_interval`` become NaN (printed ``-``), and the verdict says that cost only cannot tell rewards of equal cost apart and quotes the probe's
    forecast (``gain_probe``, ``gain_probe_interval``, ``snr``: points vs grpo at ``budget``), marked as the
    probe's and not validated better than cost only. ``kind``: "tokens" or "flops"; ``level``: the interval's.
    """
    what = "tokens" if kind == "tokens" else "FLOPs"
    gain, iv, snr = row.get("gain_probe"), row.get("gain_probe_interval") or NAN_IV, row.get("snr")
    finite = all(isinstance(x, (int, float)) and math.isfinite(x) for x in (gain, *iv))
    probe = (f"{gain:+.1f} [{iv[0]:+.1f}, {iv[1]:+.1f}] ({int(round(100 * level))}% interval) vs grpo, SNR "
             + (f"{snr:.2f}" if isinstance(snr, (int, float)) and not math.isnan(snr) else "-") if finite
             else "none (its rho is undefined)")
    row.update(gain_interval=NAN_IV, gain_cost_only_interval=NAN_IV, by_construction=True,
               verdict=f"cost only cannot tell rewards of equal cost apart: at {budget} its forecast is +0.0 by "
                       f"construction (the same {what} per update as grpo), not a measurement (interval: none); the "
                       f"probe's forecast, not validated better than cost only: {probe}")
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
    knobs = ", ".join(f"{k} {guidance[k]:g}" for k in ("fraction", "prefix") if isinstance(guidance.get(k), (int, float)))
    return (f"a guided probe ({knobs or 'guidance'}): every entry is of the guided, importance-weighted update, the "
            "reference included, so the gains vs grpo here are vs the guided outcome, not unguided grpo (compare the "
            "two in a study)")
