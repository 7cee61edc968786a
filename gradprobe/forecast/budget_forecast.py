"""Forecast a reward's accuracy at a budget by reading grpo's learning curve at its effective updates.

Model (DESIGN.md, "The probe", "Forecast (what users read)"). For reward R at a budget of T
generated tokens (or F FLOPs):

- c_R: generated tokens one update of R costs (rollouts plus MC continuations; the probe ledger's
  ``tokens_per_update``, rescaled to the curve's update batch when the probe's differs);
- rho_R: per-update efficiency relative to grpo (:mod:`gradprobe.forecast.proxies`), 1 for
  ``cost_only``, the shrunk probe ratio for ``probe``, sqrt(P_R / P_outcome) for ``signal_proxy``;
- effective updates n_R = (T / c_R) rho_R (at a FLOPs budget: (F / F_R) rho_R, F_R the update's
  FLOPs: c_R generated tokens at one forward each plus the rollout tokens' forward + backward,
  3 forwards (Kaplan et al. 2020), at the probe batch's FLOPs per token);
- forecast accuracy f(n_R), f the reference curve (:class:`~gradprobe.forecast.curves.ReferenceCurve`:
  the ScaleRL sigmoid, Khatri et al. 2025, eq. 1), bounded to [0, 100] points;
- forecast gain vs grpo = f(n_R) - f(T / c_outcome), accuracy points.

A negative rho (the reward's update moves accuracy down along the reference) gives n_R < 0, which
the curve cannot represent; it is clipped to 0 (no progress: the forecast is the curve's start R0) and noted for
every forecaster that gives it, whichever one the verdict uses (:func:`clipped_rho_note`), as the probe's number is
printed in its column and quoted in verdicts: a reward whose update points against the reference's is forecast as
no training, so the number is a ceiling on its gain vs grpo, not a forecast of the harm.

Interval (``level``, default 95%): percentiles of D Monte Carlo draws, draw d pairing the d-th
bootstrap replicate of rho (prompts, plus the reference spread when measured) with a seed-bootstrap
replicate of the curve (drawn with ``numpy.random.PCG64(seed)``), the same curve replicate for
R and for grpo in that draw, so the gain's interval carries the curve's seed spread without
double counting the shared part. The point gain is read off the main fit, not the replicates, so where the
replicates' percentiles miss it (a skewed spread), the interval is widened to reach it: an interval always holds
its point. A curve of one seed has no seed replicates: its draws read the parametric bootstrap of its fit's eval
noise instead (s = sqrt(RSS / (evals - parameters)), :meth:`~.curves.ReferenceCurve.interval_values`,
:func:`~.curve_fit.fit_noise_replicates`), and a note says the interval leaves out the run-to-run spread a second
seed would add; a one-seed fit without residual degrees of freedom has no noise estimate, so no arm but grpo gets
an interval (NaN) or a verdict (``one seed: no interval``, :func:`_curve_replicate_draws`). grpo's own row keeps
[0, 0]: its gain vs itself is 0 exactly. These draws are the forecaster's own (``n_draws``, over the probe's
per-group contributions), not the probe's ``--bootstrap`` resamples, which give only the raw table's intervals.

Notes on the curve and the budget (:func:`_mismatch_notes`, :func:`_budget_notes`): a falling curve (A below
R0: grpo's accuracy drops with updates) is forecast as it is, with a note: read off it, fewer effective updates
forecast more accuracy, so a costlier or less efficient reward looks better. A budget that buys fewer than one
update of an entry is noted too: its forecast is the curve's start, within one update of R0 (no training to speak
of). First among the notes: a curve whose R0 is far from the probe's own held-out accuracy, and a probe batch
whose completions were all truncated (:mod:`.start_check`).

Learning-rate arms (``lr_scale`` != 1): a first-order probe scales linearly with the learning rate,
which training contradicts past the optimum (2x the rate lost 4.4 points on the tiny study), so
without a curve for that rate (``lr_curve``, e.g. from a learning-rate sweep) the arm is marked
``outside_probe`` and gets no number.

Verdict (one line per arm): ``worth its tokens`` when the interval lies above 0, ``not worth its
tokens`` when below, ``no detectable difference`` when it contains 0 (except under cost only for an arm
whose update costs what grpo's does: its 0 is by construction, and the verdict says cost only cannot tell
rewards of equal cost apart and quotes the probe's forecast beside it, :func:`.special_rows.equal_cost_row`;
its interval is NaN, not [0, 0]), ``outside what the probe can
tell (learning-rate change)`` for learning-rate arms without their curve, and ``no gradient: ...; it
cannot train (no forecast)`` for a reward without signal on the probe batch (every advantage 0: equal
rewards in every group, or None/NaN for every completion; :func:`~gradprobe.forecast.result.no_signal_reason`),
whose row gets ``no_signal`` True and no forecast numbers (NaN), not a measured +0.0. When grpo's own reward
has no gradient, every ratio to it is undefined: the other rows' rho, interval, SNR and probe forecast are NaN
and their verdicts say they are cost only; the reference row reads ``reference (grpo): no gradient on this
batch``, and in a guided probe it is labelled the guided outcome (:mod:`.special_rows`). An arm whose entry
uses another loss type than the reference's (``REWARD@LOSS``) ends its verdict with a clause saying that a change
of loss also acts on the optimizer steps after the first of each batch, which these forecasts do not read, so its
forecast means "not seen" (:func:`.special_rows.loss_change_clause`).

No verdict (:func:`no_verdict_reasons`, judged once per forecast): where the reference curve cannot carry one at
the budget, every arm read off it gets ``no verdict at BUDGET: WHY`` instead of advice and ``no_verdict_reason``
says why (its numbers stay, marked in the printout; ``ForecastResult.no_verdict_reason`` and ``probe.json``'s
``forecast.no_verdict_reason`` hold the curve's reason): a fit that does not describe its evals (rmse over 4 points,
or a seed-mean eval over 10 points from it: :func:`~.curve_fit.fit_misfit`), a falling curve, a curve on which grpo
does not learn (its fitted rise A - R0 and its evals' own rise both within 1 point or twice their noise:
:func:`_does_not_learn`; every gain is then 0 by construction), grpo's updates at the budget lying before the
curve's first eval after update 0 (the forecast rests on no eval: a budget of less than one update, or an update
column that holds tokens), grpo's updates beyond :data:`EXTRAPOLATION_LIMIT` (2) times the curve's last eval (the
reach over which ScaleRL validates its sigmoid's extrapolation; an arm's own effective updates beyond it withhold that
arm's verdict alone: :func:`extrapolation_reason`), the shipped default curve read for a probe of another model or
task than the curve's recorded ones (:func:`shipped_curve_reason`; a curve the user gives keeps its verdicts, each
naming the difference: :func:`transfer_clause`), a
one-seed curve without a noise estimate (``one seed: no interval``). The reference row keeps its label. One reason
is the arm's own rather than the curve's: a verdict read off the probe's rho (``probe``) when rho rests on under
:data:`~.proxies.MIN_INFORMATIVE_GROUPS` informative groups (``Efficiency.few_groups``, whose note says its SNR and
interval are not to be trusted) gets none; its reason quotes the forecast and its interval for information and
names the fix, more --prompts or --probe-batches (:func:`~.special_rows.few_groups_reason`).

The stages of :func:`forecast_rewards`: check the request and the probe (:mod:`.probe_input`), cost
of one update per entry, per-entry efficiencies on shared bootstrap draws (:func:`entry_efficiencies`),
one row per arm (:func:`arm_row`), notes on what the curve and the probe disagree about.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..outputs import json_float
from ..tables import holds_surrogate
from .csv_cells import is_skipped_note
from .curves import ReferenceCurve, task_key
from .probe_input import (arms_of, budget_of, check_batches, check_request, pooled_entries, probe_batches_of,
                          update_batches, update_costs)
from .proxies import Efficiency, probe_efficiency, signal_proxy_efficiency, stratified_counts
from .result import METHODS, TABLE_COLUMNS, ForecastResult, format_budget, no_signal_reason, no_verdict, verdict
from .special_rows import (NAN_FORECAST, NAN_IV, cost_only_why, equal_cost_row, few_groups_reason, guided_note,
                           loss_change_clause, no_signal_row, outside_probe_row, reference_verdict,
                           undefined_probe_columns, undefined_rho_note)
from .start_check import start_notes

__all__ = ["forecast_rewards", "forecast_table", "entry_efficiencies", "arm_row", "Setting", "no_verdict_reasons",
           "curve_reasons", "clipped_rho_note", "extrapolation_reason", "shipped_curve_reason", "transfer_clause",
           "EXTRAPOLATION_LIMIT", "unrecorded_curve_notes", "CLEAR_RISE"]


def forecast_table(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """The forecast table of ``rows`` (column -> value each; a column a row lacks is missing there) in ``columns``'
    order. A column holding a text with a lone surrogate (an arm or reward named after a plug-in file whose name has
    an undecodable byte, ``os.fsdecode``: ``r\\udcff.py:fn``) is built with ``dtype=object``: pandas' text type
    stores UTF-8, which has no form for a lone surrogate, so such a name would stop the forecast; every other column,
    and every column of a table without such a name, is inferred as pandas infers it."""
    odd = {c for c in columns if any(holds_surrogate(r.get(c)) for r in rows)}
    if not odd:
        return pd.DataFrame(rows, columns=columns)
    return pd.DataFrame({c: pd.Series([r.get(c) for r in rows], dtype=object if c in odd else None)
                         for c in columns}, columns=columns)


@dataclass
class Setting:
    """What every arm's row is computed against (internal to :func:`forecast_rewards`).

    ``value`` the budget (tokens or FLOPs, ``kind``), ``cost`` / ``tokens`` entry -> per-update cost,
    ``n_ref`` grpo's updates at the budget, ``base`` / ``base_rep`` grpo's accuracy there (points; per
    draw, shape (draws,)), ``rep_idx`` the curve replicate of each draw (shape (draws,), or None),
    ``effs`` / ``sps`` entry -> probe efficiency and signal-proxy (rho, interval, replicates),
    ``first_order`` entry -> mean predicted gain per update (points), ``silent`` entry -> why it gives no
    gradient (:func:`~gradprobe.forecast.result.no_signal_reason`) or None; ``ref_where`` where grpo's own
    reward has no gradient ("on this batch", "on the probe batches") or None when it has one,
    ``ref_alignment`` its mean <g_outcome, u> over the ``n_batches`` probe batches, ``guided`` whether the
    probe is guided (``config.guidance``: every entry, the reference included, is the guided update),
    ``probe_loss_type`` the probe's own ``config.loss_type`` (None when not recorded); ``no_interval`` why no arm but
    grpo gets an interval (a one-seed curve without a noise estimate, :func:`_curve_replicate_draws`) or None;
    ``transfer`` the clause every arm's verdict gets when a user's curve is of another task or model
    (:func:`transfer_clause`), else "".
    """

    curve: ReferenceCurve
    method: str
    reference_reward: str
    kind: str
    value: float
    budget_s: str
    tokens: dict
    cost: dict
    n_ref: float
    base: float
    base_rep: np.ndarray
    rep_idx: np.ndarray | None
    effs: dict
    sps: dict
    first_order: dict
    n_draws: int
    level: float
    lr_curve: dict | None
    silent: dict = field(default_factory=dict)
    ref_where: str | None = None
    ref_alignment: float = math.nan
    n_batches: int = 1
    guided: bool = False
    probe_loss_type: str | None = None
    no_verdict: str | None = None
    no_interval: str | None = None
    transfer: str = ""


def entry_efficiencies(batches: list[dict], names: list[str], reference_reward: str, *, n_draws: int, seed: int,
                       level: float, notes: list[str]) -> tuple[dict, dict]:
    """Each entry's probe efficiency and signal-proxy efficiency vs ``reference_reward`` on shared draws.

    Every entry is resampled with the same stratified bootstrap multiplicities (paired;
    :func:`~gradprobe.forecast.proxies.stratified_counts` with ``seed``), so differences between entries
    are not bootstrap noise. The reference itself is rho = 1 exactly.

    Returns
    -------
    (effs, sps)
        ``effs``: name -> :class:`~gradprobe.forecast.proxies.Efficiency`; ``sps``: name -> (rho_sp,
        interval, replicates shape (n_draws,)), NaN when the probe has no signal proxy (noted).
    """
    sizes = [len(b["rewards"][reference_reward]["per_group"]) for b in batches]
    counts = stratified_counts(sizes, n_draws, seed)
    draws = [b["draw"] for b in batches]
    pg_ref = [np.asarray(b["rewards"][reference_reward]["per_group"], dtype=np.float64) for b in batches]
    has_sp = all(b["rewards"][n].get("signal_proxy_per_group") is not None for b in batches for n in names)
    if not has_sp:
        notes.append("the probe result has no signal proxy (signal_proxy_per_group): re-run the probe with this "
                     "gradprobe for the signal_proxy baseline")
    sp_ref = [np.asarray(b["rewards"][reference_reward]["signal_proxy_per_group"], dtype=np.float64)
              for b in batches] if has_sp else None
    effs: dict[str, Efficiency] = {}
    sps: dict[str, tuple] = {}
    for n in names:
        if n == reference_reward:
            ones = np.ones(n_draws)
            effs[n] = Efficiency(n, 1.0, 0.0, math.nan, 0.0, 1.0, (1.0, 1.0), (1.0, 1.0), ones, len(batches), False, [])
            sps[n] = (1.0, (1.0, 1.0), ones)
            continue
        pg = [np.asarray(b["rewards"][n]["per_group"], dtype=np.float64) for b in batches]
        effs[n] = probe_efficiency(n, pg, pg_ref, counts=counts, reference_draws=draws, level=level)
        if has_sp:
            sp = [np.asarray(b["rewards"][n]["signal_proxy_per_group"], dtype=np.float64) for b in batches]
            sps[n] = signal_proxy_efficiency(sp, sp_ref, counts=counts, level=level)
        else:
            sps[n] = (math.nan, NAN_IV, np.full(n_draws, np.nan))
    for eff in effs.values():
        for note in eff.notes:
            if note not in notes and note.startswith("one "):
                notes.append(note)
    return effs, sps


def _method_forecast(st: Setting, r: str, meth: str, is_ref: bool, arm_curve, arm_notes: list) -> tuple:
    """(effective updates, accuracy, gain vs grpo, gain interval) of entry ``r`` by forecaster ``meth``."""
    if meth == "cost_only" or is_ref:
        rho_pt, rho_rep = 1.0, np.ones(st.n_draws)
    elif meth == "probe":
        rho_pt, rho_rep = st.effs[r].rho, st.effs[r].replicates
    else:
        rho_pt, rho_rep = st.sps[r][0], st.sps[r][2]
    if not math.isfinite(rho_pt):
        return NAN_FORECAST
    n_pt = st.value / st.cost[r] * rho_pt
    n_rep = st.value / st.cost[r] * np.nan_to_num(rho_rep, nan=rho_pt)
    clipped = n_pt < 0
    if n_pt < 0 or (n_rep < 0).any():
        n_pt, n_rep = max(n_pt, 0.0), np.maximum(n_rep, 0.0)
    acc = arm_curve(n_pt)
    if is_ref:
        return (n_pt, acc, 0.0, (0.0, 0.0))
    gain = acc - st.base  # the main fit's; the interval is the replicates' (module docstring): widened to hold it
    if clipped:  # printed (its forecaster's column, a verdict quoting it) whichever forecaster the verdict uses
        arm_notes.append(clipped_rho_note(meth, rho_pt, gain))
    if st.no_interval:  # one seed without a noise estimate: no interval rather than one that claims certainty
        return (n_pt, acc, gain, NAN_IV)
    reps = arm_curve.interval_values(n_rep, st.rep_idx) - st.base_rep
    a = (1.0 - st.level) / 2.0
    lo, hi = np.quantile(reps, [a, 1 - a])
    return (n_pt, acc, gain, (float(min(lo, gain)), float(max(hi, gain))))


def clipped_rho_note(meth: str, rho: float, gain: float) -> str:
    """The note of an entry whose rho by forecaster ``meth`` is below 0 (module docstring): its update points
    against grpo's, the curve has no point below R0, so its forecast (``gain``, accuracy points vs grpo) is that of
    no training: a ceiling on its gain vs grpo, not a forecast of the harm. One per entry and forecaster."""
    name = meth.replace("_", " ")
    return (f"rho {rho:.3g} < 0 ({name}): its update points against grpo's and is forecast as no training (the "
            f"curve cannot go below R0), so the {name} forecast {gain:+.1f} is a ceiling on its gain vs grpo, not a "
            "forecast of the harm")


def arm_row(st: Setting, arm: str, spec: dict) -> dict:
    """One row of the forecast table (:data:`~gradprobe.forecast.result.TABLE_COLUMNS`) for ``arm``,
    whose ``spec`` is ``{"reward": entry, "lr_scale": float}``."""
    r, s = spec["reward"], float(spec.get("lr_scale", 1.0))
    eff = st.effs[r]
    is_ref = r == st.reference_reward and math.isclose(s, 1.0)
    row = {"arm": arm, "reward": r, "lr_scale": s, "tokens_per_update": st.tokens[r], "rho": eff.rho,
           "rho_interval": eff.interval, "snr": eff.snr, "rho_raw": eff.rho_raw, "rho_signal_proxy": st.sps[r][0],
           "first_order_gain": st.value / st.cost[r] * s * st.first_order[r]
           - st.n_ref * st.first_order[st.reference_reward], "no_signal": st.silent.get(r) is not None,
           "by_construction": False, "no_verdict_reason": None}
    if st.silent.get(r) is not None and not is_ref:  # before the learning rate: it cannot train at any rate
        return no_signal_row(row, st.silent[r])
    arm_notes, arm_curve = [], st.curve
    if not math.isclose(s, 1.0):
        match = next((c for k, c in (st.lr_curve or {}).items() if math.isclose(float(k), s)), None)
        if match is None:
            return outside_probe_row(row, s)
        arm_curve = match
        arm_notes.append(f"read from the x{s:g} learning-rate curve ({match.source})")
    per = {meth: _method_forecast(st, r, meth, is_ref, arm_curve, arm_notes) for meth in METHODS}
    used, chosen, why = _fallback(st, row, eff, per, is_ref, arm_notes)
    if chosen == "probe" and eff is not None:  # the probe's rho is read: how far its SNR and interval can be trusted
        arm_notes += [n for n in eff.notes if not n.startswith("one ") and n not in arm_notes]
    n_pt, acc, gain, iv = per[chosen]
    for meth in METHODS:
        row[f"gain_{meth}"] = per[meth][2]
        row[f"gain_{meth}_interval"] = per[meth][3]
    if st.ref_where is not None and not is_ref:
        undefined_probe_columns(row)
    if not is_ref and math.isfinite(n_pt) and n_pt > arm_curve.max_update * 1.0001:
        arm_notes.append(f"its {n_pt:,.0f} effective updates lie beyond the curve's last eval (update "
                         f"{_update_no(arm_curve.max_update)}): extrapolated")
    row.update(effective_updates=n_pt, forecast_accuracy=acc, forecast_gain=gain, gain_interval=iv, method=used,
               note="; ".join(arm_notes),
               verdict=reference_verdict(st.ref_where, st.guided) if is_ref
               else verdict(gain, iv, st.budget_s, st.kind, why=why))
    if (chosen == "cost_only" and not is_ref and st.ref_where is None and math.isclose(s, 1.0)
            and math.isclose(st.cost[r], st.cost[st.reference_reward], rel_tol=1e-9)):
        equal_cost_row(row, st.budget_s, st.kind, st.level)  # cost only's 0 is by construction, not measured
    beyond = None if is_ref or extrapolation_reason(st.n_ref, st.curve, "") else (
        extrapolation_reason(n_pt, arm_curve, "its", st.value, st.kind))  # grpo's own, when beyond, is said once
    few = (few_groups_reason(gain, iv) if chosen == "probe" and not is_ref and st.ref_where is None
           and eff.few_groups else None)  # the verdict would rest on an interval its own note disowns
    why_not = "; ".join(x for x in (st.no_verdict, *([] if arm_curve is st.curve else curve_reasons(arm_curve)),
                                    beyond, few) if x) or None
    if why_not and not is_ref:  # numbers kept (the table marks them), no advice
        row.update(verdict=no_verdict(st.budget_s, why_not), no_verdict_reason=why_not)
    if not is_ref:  # a user's curve of another task or model; a change of loss acts where no forecaster reads
        row["verdict"] += st.transfer + loss_change_clause(r, st.reference_reward, st.probe_loss_type)
    return row


def _fallback(st: Setting, row: dict, eff, per: dict, is_ref: bool, arm_notes: list) -> tuple[str, str, str]:
    """(the method the row says it used, the forecaster whose numbers it shows, the verdict's clause) for entry
    ``row["reward"]``: the asked method, or cost only (with a note) where the asked one cannot forecast; ``per``
    (forecaster -> numbers) is updated in place where a forecaster is undefined."""
    r = row["reward"]
    if is_ref:
        return st.method, st.method, ""
    if st.ref_where is not None:  # every ratio to grpo's alignment is undefined: cost only, said in the verdict
        used = "cost_only" if st.method == "cost_only" else "cost_only (grpo had no gradient)"
        return used, "cost_only", cost_only_why(st.ref_where, st.guided)
    if not math.isfinite(eff.rho_raw):
        arm_notes.append(undefined_rho_note(st.ref_alignment, st.n_batches, st.guided))
        if st.method == "probe":
            return "cost_only (rho undefined)", "probe", ""
    elif st.method == "probe" and eff.shrink == 0.0:
        arm_notes.append(f"SNR of rho-1 (|rho-1|/se) {eff.snr:.2f} <= 1: rho shrunk to 1, i.e. the cost-only forecast")
        return "cost_only (SNR of rho-1 <= 1)", "probe", ""
    if st.method == "signal_proxy" and not math.isfinite(st.sps[r][0]):
        arm_notes.append("no signal proxy in the probe result: cost-only forecast")
        per["signal_proxy"] = per["cost_only"]
        return "cost_only (no signal proxy)", "signal_proxy", ""
    return st.method, st.method, ""


def _silent_entries(probe, batches: list[dict], names: list[str], reference_reward: str,
                    notes: list[str]) -> dict:
    """Entry -> why it gives no gradient on the probe batches (:func:`~gradprobe.forecast.result.no_signal_reason`)
    or None; a note when the reference reward itself has none (every rho is then undefined)."""
    pooled = pooled_entries(probe)
    refs = [b["rewards"][reference_reward] for b in batches]
    silent = {n: no_signal_reason([b["rewards"][n] for b in batches], refs, pooled=pooled.get(n)) for n in names}
    if silent.get(reference_reward):
        notes.append(f"grpo's reward {reference_reward!r} gives no gradient on the probe batch ("
                     f"{silent[reference_reward]}): every other reward's rho, a ratio to its alignment, is undefined "
                     "(rho, its interval, the SNR of rho-1 and the probe forecast are blank) and its verdict is cost "
                     "only; probe more "
                     "--prompts, a larger --group or an easier task")
    return silent


def _reference_state(st: Setting, batches: list[dict], cfg: dict, notes: list[str]) -> None:
    """Fill ``st``'s ``n_batches``, ``ref_alignment``, ``ref_where`` (after ``st.silent``) and ``guided``; a note
    saying a guided probe's gains are vs the guided outcome."""
    ref = st.reference_reward
    st.n_batches, st.guided = len(batches), bool(cfg.get("guidance"))
    st.ref_alignment = sum(float(np.sum(b["rewards"][ref]["per_group"])) for b in batches) / len(batches)
    if st.silent.get(ref):
        st.ref_where = "on this batch" if len(batches) == 1 else f"on the {len(batches)} probe batches"
    if st.guided:
        notes.append(guided_note(cfg["guidance"] if isinstance(cfg["guidance"], dict) else {}))


def _budget_notes(st: Setting, names: list[str]) -> list[str]:
    """A note when the budget buys fewer than one update of an entry with a gradient (its forecast is ~R0)."""
    short = [f"{n} ({st.value / st.cost[n]:.2g} updates of {st.tokens[n]:,.0f} tokens)" for n in names
             if st.value / st.cost[n] < 1 and not st.silent.get(n)]
    if not short:
        return []
    budget = f"{st.budget_s} tokens" if st.kind == "tokens" else st.budget_s
    r0 = st.curve.params["R0"]
    return [f"the budget of {budget} buys fewer than one update of {', '.join(short)}: the forecast there is the "
            f"curve's start (within one update of R0 = {r0:.1f} points: no training to speak of) and says nothing "
            "about the rewards; give a budget of several updates"]


def _mismatch_notes(curve: ReferenceCurve, cfg: dict, n_ref: float) -> list[str]:
    """Where the curve and the probe disagree: extrapolation, learning rate, task, model; a falling curve."""
    notes = []
    p = curve.params
    if _falls(curve):
        notes.append(f"the reference curve {curve.source or '(unnamed)'} falls (A {p['A']:.1f} < R0 {p['R0']:.1f} "
                     "points: grpo's accuracy drops with updates): forecasts read off it reward FEWER updates, so a "
                     "costlier or less efficient reward looks better; check the curve")
    if n_ref > curve.max_update * 1.0001:
        notes.append(f"grpo's {n_ref:,.0f} updates at this budget lie beyond the curve's last eval (update "
                     f"{_update_no(curve.max_update)}): its accuracy there is the fit's extrapolation")
    lr_probe, lr_curve_rate = cfg.get("lr"), curve.metadata.get("lr")
    if lr_probe and lr_curve_rate and not math.isclose(float(lr_probe), float(lr_curve_rate), rel_tol=1e-6):
        notes.append(f"the probe's --lr {float(lr_probe):g} differs from the curve's training rate "
                     f"{float(lr_curve_rate):g}: the forecast is for training at the curve's rate (rho does not depend "
                     "on the rate to first order; the raw first-order gains above do)")
    probe_task = task_key(cfg.get("task"))
    curve_task = curve.metadata.get("task")
    if probe_task and curve_task and probe_task != curve_task:
        notes.append(f"the reference curve was trained on task {curve_task}, the probe ran on {probe_task}: the "
                     "forecast assumes the curve transfers")
    if cfg.get("model") and curve.metadata.get("model") and cfg["model"] != curve.metadata["model"]:
        notes.append(f"the reference curve is of model {curve.metadata['model']!r}, the probe of {cfg['model']!r}")
    return notes + unrecorded_curve_notes(curve, cfg) + _ceiling_notes(curve, n_ref)


def unrecorded_curve_notes(curve: ReferenceCurve, cfg: dict) -> list[str]:
    """The caution (one note per forecast, not per arm) on a reference curve that records no model or no task (a
    CSV, a TRL ``trainer_state.json``, a ``metrics.jsonl`` without its run's ``config.json``, a saved curve or one
    built in Python without them: ``curve.metadata``) that the probe's ``cfg`` records: gradprobe cannot check that
    the curve is of the probe's model and task (as it does for a study folder's curve: :func:`transfer_clause`), and
    a curve of another one makes the forecast wrong. The verdicts stand. [] for the shipped curve (its model and
    task are recorded and checked: :func:`shipped_curve_reason`); [] when nothing is missing."""
    if getattr(curve, "shipped", False):
        return []
    probe = {"model": cfg.get("model"), "task": task_key(cfg.get("task"))}
    missing = [k for k in ("model", "task") if probe[k] and not curve.metadata.get(k)]
    if not missing:
        return []
    ours = ", ".join(f"model {probe['model']!r}" if k == "model" else f"task {probe['task']}" for k in missing)
    what = " or ".join(missing)
    it = "they match" if len(missing) == 2 else "it matches"
    return [f"the reference curve ({curve.source or 'unnamed'}) records no {what}, so gradprobe cannot check that "
            f"{it} the probe's ({ours}): a curve of another {what} makes this forecast wrong"]


def _ceiling_notes(curve: ReferenceCurve, n_ref: float) -> list[str]:
    """A note when the fit's asymptote A sits at its upper bound (status ``at_bound``, A above R0: the asymptote is
    not identified): the evals still rise where they stop, so the curve's ceiling is unknown, and a reading far
    beyond its last eval rests on the bound, not on the evals (:mod:`.curve_fit`: A in [0, 100] points). Where
    grpo's ``n_ref`` updates at the budget lie, within the evals or beyond, is said with it."""
    p = curve.params
    if (getattr(curve, "status", None) or {}).get("A") != "at_bound" or not p["A"] > p["R0"]:
        return []
    where = (f"grpo's {n_ref:,.0f} updates at this budget lie within its evals" if n_ref <= curve.max_update * 1.0001
             else f"grpo's {n_ref:,.0f} updates at this budget lie beyond them, read on the bound")
    return [f"the reference curve's asymptote A sits at its bound ({p['A']:.0f} points: not identified): its evals "
            f"(up to update {_update_no(curve.max_update)}) do not reach their ceiling, so the ceiling is unknown and "
            f"readings far beyond its last eval rest on the bound, not on evals; {where}"]


def _update_no(update: float) -> str:
    """An update number or count of updates (a curve's eval update, a limit: a float, maybe fractional) by all its
    digits, thousands separated: ``22,400``, ``1,500,000`` (``:g`` would print ``1.5e+06``), ``12.5``."""
    return f"{int(update):,}" if float(update).is_integer() and abs(update) < 2**53 else f"{update:,g}"


def _falls(curve: ReferenceCurve) -> bool:
    """Whether ``curve`` falls: A below R0 by more than the printed precision (a flat curve is not falling)."""
    return curve.params["A"] < curve.params["R0"] - 0.05


#: Least fall (R0 - A, accuracy points) that withholds a verdict, whatever the fit's standard errors: a flat curve's
#: fitted A and R0 differ by eval noise in either direction (:func:`_falls_clearly`).
CLEAR_FALL = 1.0


def _falls_clearly(curve: ReferenceCurve) -> bool:
    """Whether ``curve`` falls beyond its noise: the fit's R0 - A and the evals' own drop (the mean at the first
    update count minus the mean at the last) both above :data:`CLEAR_FALL` points, the drop also above twice its
    standard error (sqrt(s_first^2 / k_first + s_last^2 / k_last), the evals' spread over k seeds there, where
    both have 2 or more). A flat curve (a task the policy does not learn) has a fitted A below R0 by noise about
    half the time, and a sigmoid whose shape is not identified can put that gap above a point: only a note then
    (:func:`_falls`), no verdict withheld."""
    p = curve.params
    if not p["R0"] - p["A"] > CLEAR_FALL:
        return False
    pts = curve.points
    first, last = (pts.loc[pts["update"] == u, "accuracy"].to_numpy(float) for u in (pts["update"].min(),
                                                                                      pts["update"].max()))
    drop = float(first.mean() - last.mean())
    noise = math.sqrt(first.var(ddof=1) / first.size + last.var(ddof=1) / last.size) if min(first.size,
                                                                                             last.size) > 1 else 0.0
    return drop > max(CLEAR_FALL, 2.0 * noise)


#: Most rise (accuracy points) of a curve that does not learn: its fitted A - R0 and its evals' own rise (last update
#: count's mean minus the first's) both at most this, or within twice their standard error (:func:`_does_not_learn`).
#: The same size as :data:`CLEAR_FALL`: a change of a point is what eval noise alone gives a flat curve's fit.
CLEAR_RISE = 1.0

#: How far past the curve's last eval a verdict is read, as a multiple of that eval's update count
#: (:func:`extrapolation_reason`): twice, the reach over which ScaleRL's sigmoid extrapolation is validated (Khatri et
#: al. 2025, arXiv:2510.13786: curves fitted on runs to 8k GPU-hours predict them extended to 16k; the 100k-GPU-hour
#: run the same way). Beyond it the forecast is the fit's shape alone (A, n_mid and B that no eval pins there).
EXTRAPOLATION_LIMIT = 2.0


def _end_means(curve: ReferenceCurve) -> tuple[np.ndarray, np.ndarray]:
    """The evals (accuracy points, one per seed's eval) at the curve's first and at its last update count."""
    pts = curve.points
    return tuple(pts.loc[pts["update"] == u, "accuracy"].to_numpy(float)
                 for u in (pts["update"].min(), pts["update"].max()))


def _does_not_learn(curve: ReferenceCurve) -> bool:
    """Whether grpo does not learn on ``curve`` (no difference of updates can show on it): its fitted rise A - R0 and
    its evals' own rise (the mean at the last update count minus the mean at the first) both at most
    :data:`CLEAR_RISE` points. An all-zero or constant curve does not learn, and read off it every gain is 0 by
    construction with a zero-width interval; a falling one does not either (:func:`_falls_clearly` names a clear fall
    instead). A curve whose rise is over 1 point but within its noise is not called flat: its seed bootstrap (or, for
    one seed, its eval noise) already widens every forecast's interval, and the shipped hard-cell curves, which rise
    by -0.3 to +1.5 points over about 60 updates, were forecast within their seed noise on their own studies."""
    p = curve.params
    if p["A"] - p["R0"] > CLEAR_RISE:
        return False
    first, last = _end_means(curve)
    return float(last.mean() - first.mean()) <= CLEAR_RISE


def curve_reasons(curve: ReferenceCurve) -> list[str]:
    """Why ``curve`` cannot carry a verdict at any budget, each clause ending with its fix: a fit that does not
    describe its evals (:attr:`~gradprobe.forecast.curves.ReferenceCurve.misfit`, :func:`~.curve_fit.fit_misfit`),
    a curve that falls beyond its noise (:func:`_falls_clearly`: read off it, fewer effective updates forecast
    more accuracy, so a costlier or less efficient reward looks better), a curve on which grpo does not learn
    (:func:`_does_not_learn`, judged on a fit that describes its evals: every number of updates forecasts the same
    accuracy, so every gain is 0 by construction). Empty when it can."""
    reasons = [f"{curve.misfit}: check the curve"] if curve.misfit else []
    p = curve.params
    if _falls_clearly(curve):
        reasons.append(f"the reference curve falls (A {p['A']:.1f} < R0 {p['R0']:.1f} points), so read off it fewer "
                       "updates forecast more accuracy and a costlier reward looks better: check the curve")
    elif not curve.misfit and _does_not_learn(curve):  # a misfit's residuals are no noise estimate: said once
        first, last = _end_means(curve)
        reasons.append(f"grpo does not learn on this curve (fitted rise A - R0 {p['A'] - p['R0']:+.1f} points, its "
                       f"evals {first.mean():.1f} -> {last.mean():.1f} points, within {CLEAR_RISE:g} point), so no "
                       "difference of updates can show on it: give the curve of a grpo run that learns this task "
                       "(a task the policy can learn, or more updates)")
    return reasons


def extrapolation_reason(n: float, curve: ReferenceCurve, who: str, value: float = math.nan,
                         kind: str = "tokens") -> str | None:
    """Why no verdict is read at ``n`` updates of ``curve`` (``who``'s: "grpo's" or "its"), bought by a budget of
    ``value`` (``kind``: "tokens" or "flops"; the fix names the budget that buys the limit, value x limit / n, where
    it is finite): beyond :data:`EXTRAPOLATION_LIMIT` times the curve's last eval
    (:attr:`~.curves.ReferenceCurve.max_update`), or None."""
    limit = EXTRAPOLATION_LIMIT * curve.max_update
    if not (math.isfinite(n) and n > limit * 1.0001):
        return None
    most = value * limit / n
    fix = (f"give a budget of at most {format_budget(most, kind)}{' tokens' if kind == 'tokens' else ''}"
           if math.isfinite(most) else f"give a budget within {_update_no(limit)} updates")
    times = n / curve.max_update
    times_s = f"{times:,.0f}" if times >= 100 else f"{times:.3g}"
    return (f"{who} {n:,.0f} effective updates lie {times_s}x past the curve's last eval (update "
            f"{_update_no(curve.max_update)}), beyond the {EXTRAPOLATION_LIMIT:g}x over which a sigmoid's "
            f"extrapolation is validated: {fix}, or a curve evaluated further")


def _curve_differences(curve: ReferenceCurve, cfg: dict) -> list[tuple[str, str, str]]:
    """(what, the curve's, the probe's) for the ``model`` and the ``task`` (:func:`~.curves.task_key` form) that the
    curve's metadata records other than the probe's ``cfg``; a probe task recorded as a bare name, without its config
    (as the shipped studies' probes record ``chain_sum``), is compared by name. Empty when both match or either is
    not recorded."""
    meta, diffs = curve.metadata, []
    if cfg.get("model") and meta.get("model") and str(cfg["model"]) != str(meta["model"]):
        diffs.append(("model", repr(meta["model"]), repr(cfg["model"])))
    probe_task, curve_task = task_key(cfg.get("task")), meta.get("task")
    if probe_task and curve_task and ":" not in probe_task:  # a bare name records no config: compared by name
        curve_task = str(curve_task).split(":", 1)[0]
    if probe_task and curve_task and probe_task != curve_task:
        diffs.append(("task", str(meta["task"]), probe_task))
    return diffs


def shipped_curve_reason(curve: ReferenceCurve, cfg: dict) -> str | None:
    """Why the shipped default curve (:attr:`~.curves.ReferenceCurve.shipped`) carries no verdict for a probe of
    ``cfg`` (the probe's ``config``): its recorded ``model`` or ``task`` (:func:`~.curves.task_key` form) differs from
    the probe's, so it is grpo's curve on something else (a probe task recorded as a bare name, without its config, as
    the shipped studies' probes record ``chain_sum``, is compared by name); None when both match, either is not
    recorded, or the curve is not a shipped one (a curve the user gives keeps its verdicts, each naming the
    difference: :func:`transfer_clause`)."""
    if not getattr(curve, "shipped", False):
        return None
    said = {"model": "(the probe's is {})", "task": "(the probe ran on {})"}
    diffs = [f"{what} {theirs} {said[what].format(ours)}" for what, theirs, ours in _curve_differences(curve, cfg)]
    if not diffs:
        return None
    what = "model and task" if len(diffs) == 2 else diffs[0].split(" ", 1)[0]
    return (f"the shipped default curve is grpo's on {' and '.join(diffs)}, so it says nothing about this {what}: "
            "give your own grpo run's curve with --reference-curve (its metrics.jsonl, TRL trainer_state.json or "
            "output_dir, a CSV of update,accuracy, a study folder or a saved curve)")


def transfer_clause(curve: ReferenceCurve, cfg: dict) -> str:
    """The clause appended to each verdict read off a curve the user gave (not the shipped one:
    :func:`shipped_curve_reason` withholds those verdicts) whose recorded model or task differs from the probe's
    ``cfg`` (:func:`_curve_differences`): the user chose to transfer the curve, so the verdict stands, naming what it
    was transferred from, e.g. `` (read off a curve of task chain_sum:max_digits=2, not the probe's task
    chain_sum:max_digits=1)``; "" when they match, either is not recorded, or the curve is shipped."""
    diffs = [] if getattr(curve, "shipped", False) else _curve_differences(curve, cfg)
    if not diffs:
        return ""
    theirs = " and ".join(f"{what} {c}" for what, c, _ in diffs)
    ours = " and ".join(f"{what} {p}" for what, _, p in diffs)
    return f" (read off a curve of {theirs}, not the probe's {ours}: it assumes the curve transfers)"


#: A first eval after update 0 at or past this many updates is read first as an update column holding tokens or
#: samples (:func:`no_verdict_reasons`): one update is thousands of generated tokens (4,480 in the default job's 16x8
#: batch) and tens of samples, so such a column's first eval lies in the thousands, while runs evaluate every few
#: updates (the shipped curves' first evals: updates 2 to 5).
TOKENS_COLUMN_FIRST_EVAL = 1000.0


def no_verdict_reasons(curve: ReferenceCurve, n_ref: float, tokens_ref: float, kind: str,
                       cfg: dict | None = None) -> str | None:
    """Why no arm read off ``curve`` gets a verdict at a budget that buys grpo ``n_ref`` updates of ``tokens_ref``
    generated tokens each (``kind``: the budget's, "tokens" or "flops"), or None, the clauses joined by "; ": the
    shipped default curve for another model or task than the probe's ``cfg`` (:func:`shipped_curve_reason`), the
    clauses of :func:`curve_reasons`, grpo's updates lying before the curve's first eval after update 0
    (:attr:`~gradprobe.forecast.curves.ReferenceCurve.first_eval`: there the forecast rests on no eval, only on R0
    and the fit's shape; the clause asks first whether the update column holds tokens or samples when that eval lies
    at :data:`TOKENS_COLUMN_FIRST_EVAL` updates or more and the budget buys one, else leads with the budget: that it
    buys less than one update, or the budget that reaches the eval, then the update column), and grpo's
    updates beyond :data:`EXTRAPOLATION_LIMIT` times the curve's last eval (:func:`extrapolation_reason`)."""
    shipped = shipped_curve_reason(curve, cfg or {})
    reasons = ([shipped] if shipped else []) + curve_reasons(curve)
    first = curve.first_eval
    if n_ref < first:
        reach = (f"a budget of at least {first * tokens_ref:,.0f} tokens" if kind == "tokens"
                 else "a budget that reaches it")
        if n_ref >= 1 and first >= TOKENS_COLUMN_FIRST_EVAL:  # evals that start where a token column puts them
            reasons.append(f"grpo's {n_ref:.3g} updates at this budget lie before the curve's first eval after update "
                           f"0 (update {_update_no(first)}), so the forecast rests on no eval: does the curve's "
                           f"update column hold tokens or samples instead of updates (one grpo update here is "
                           f"{tokens_ref:,.0f} generated tokens)? Else give {reach}")
        elif n_ref < 1:
            reasons.append(f"the budget buys grpo {n_ref:.3g} of one update ({tokens_ref:,.0f} generated tokens each), "
                           f"less than one update and short of the curve's first eval after update 0 (update "
                           f"{_update_no(first)}), so the forecast rests on no eval: give {reach}")
        else:
            reasons.append(f"the budget buys grpo {n_ref:.3g} updates ({tokens_ref:,.0f} generated tokens each), "
                           f"before the curve's first eval after update 0 (update {_update_no(first)}), so the "
                           f"forecast rests on no eval: give {reach}; or, if the curve's update column holds tokens or "
                           "samples instead of updates, convert it to updates")
    beyond = extrapolation_reason(n_ref, curve, "grpo's", n_ref * tokens_ref if kind == "tokens" else math.nan, kind)
    return "; ".join(reasons + ([beyond] if beyond else [])) or None


def _curve_replicate_draws(curve: ReferenceCurve, n_draws: int, seed: int,
                           notes: list[str]) -> tuple[np.ndarray | None, str | None]:
    """The curve replicate read by each Monte Carlo draw, and why there is no interval (None when there is one).

    Returns
    -------
    (rep_idx, no_interval)
        ``rep_idx``: indices into the replicates :meth:`~.curves.ReferenceCurve.interval_values` reads (the seed
        bootstrap's, or a one-seed curve's eval-noise replicates), shape (n_draws,), drawn with
        ``numpy.random.PCG64(seed + 1)`` (the bootstrap multiplicities use ``PCG64(seed)``); None when there are
        none. ``no_interval``: for a one-seed curve without a noise estimate, the reason every arm but grpo gets
        no interval and no verdict (``"one seed: no interval: ..."``). A note says what the intervals leave out:
        a one-seed curve's run-to-run spread (they carry its eval noise), or all of the curve's uncertainty for a
        curve of several seeds built without replicates.
    """
    rng = np.random.Generator(np.random.PCG64(seed + 1))
    m = curve.interval_replicates
    rep_idx = rng.integers(0, m, size=n_draws) if m else None
    source, noise = curve.interval_source, curve.eval_noise
    if source == "eval_noise":
        sd, dof = noise
        notes.append(f"the reference curve has one seed: intervals carry its eval noise (residual sd {sd:.2f} points "
                     f"of its fit, {dof} degree(s) of freedom; a parametric bootstrap of the fit) but not the "
                     "run-to-run spread a second seed would show, so they are too narrow by that; a curve of 2 or "
                     "more seeds carries it")
    elif noise is not None and noise[0] is None:  # one seed, no residual degrees of freedom: no noise estimate
        return None, ("one seed: no interval: the reference curve has one seed (no seed spread) and its fit has as "
                      "many parameters as evals (no residual degrees of freedom), so nothing estimates its noise; "
                      "give a curve of 2 or more seeds, or more evals")
    elif m == 0:  # built with n_replicates=0
        seeds = len(curve.seed_labels)
        notes.append("the reference curve has one seed but no replicates (n_replicates=0): intervals leave out its "
                     "uncertainty" if seeds < 2 else f"the reference curve has {seeds} seeds but no seed-bootstrap "
                     "replicates (n_replicates=0): intervals leave out its uncertainty")
    return rep_idx, None


def _first_order_gains(batches: list[dict], names: list[str]) -> dict[str, float]:
    """Entry -> its raw first-order gain per update (accuracy points), the mean of the batches'
    ``predicted_gain_per_update`` (NaN where a batch lacks it or records null;
    :func:`~.probe_input.check_entry_numbers` has refused one that is no number)."""
    return {n: float(np.mean([json_float(b["rewards"][n].get("predicted_gain_per_update")) for b in batches]))
            for n in names}


def forecast_rewards(curve: ReferenceCurve, probe, *, budget_tokens: float | None = None,
                     budget_flops: float | None = None, method: str = "probe", arms: dict | None = None,
                     lr_curve: dict | None = None, reference_reward: str = "outcome", n_draws: int = 2000,
                     seed: int = 0, level: float = 0.95, _batches=None, _names=None) -> ForecastResult:
    """Forecast accuracy and gain vs grpo of every probed reward (or arm) at a budget (module docstring).

    Parameters
    ----------
    curve : ReferenceCurve
        grpo's accuracy (points) against updates (:mod:`gradprobe.forecast.curves`).
    probe : dict or list of dict
        A probe result (``probe.json``; several batches when it has ``batches``) or a list of
        per-batch results on the same policy. Each reward entry needs ``tokens_per_update`` and
        ``per_group`` (and ``signal_proxy_per_group`` for the signal-proxy baseline).
    budget_tokens : float, optional
        Generated-token budget T (tokens); default the probe's ``config.budget_tokens``.
    budget_flops : float, optional
        A FLOPs budget instead (exclusive with ``budget_tokens``).
    method : {"probe", "cost_only", "signal_proxy"}
        Which forecaster fills ``forecast_gain``; the others are always computed beside it.
    arms : dict[str, dict], optional
        Arm name -> ``{"reward": key, "lr_scale": float}``, ``key`` a probe entry (a reward, or
        ``REWARD@LOSS_TYPE`` under an extra loss type, :mod:`gradprobe.probe_keys`; default: one arm
        per entry, lr_scale 1). The arm whose entry is ``reference_reward`` at lr_scale 1 is grpo;
        every other arm's rho is vs that entry, so an arm that changes only the loss type
        (``outcome@bnpo``) gets the ratio of its gradient's alignment to grpo's.
    lr_curve : dict[float, ReferenceCurve], optional
        lr_scale -> that learning rate's own grpo curve (a learning-rate sweep); arms with that
        lr_scale are forecast from it instead of being marked ``outside_probe``.
    reference_reward : str
        The probed reward that is grpo (default ``outcome``).
    n_draws, seed : int
        Monte Carlo draws of the interval (>= 100); the seed of the bootstrap and the curve-replicate draws.
    level : float
        Interval coverage in (0, 1).
    _batches, _names : list of dict, list of str, optional
        Internal (forecast_section; study_forecasts the first): ``probe_batches_of(probe)`` of this very probe and
        their ``check_batches``, as the caller read and checked them (not checked again). Default: read here.

    Returns
    -------
    ForecastResult

    Raises
    ------
    ValueError
        An unknown method, both or non-positive budgets, no ``reference_reward`` among the probed
        rewards (add it to ``--rewards``), an arm whose reward was not probed, an entry without
        ``tokens_per_update`` or ``per_group``, ``n_draws < 100``, a level outside (0, 1).
    """
    check_request(method, budget_tokens, budget_flops, n_draws, level)
    batches = probe_batches_of(probe) if _batches is None else _batches
    cfg = batches[0]["config"]
    names = check_batches(batches, reference_reward) if _names is None else _names
    kind, value = budget_of(budget_tokens, budget_flops, cfg)
    arms = arms_of(arms, names)
    notes: list[str] = []
    tokens, cost = update_costs(curve, batches, names, cfg, kind, reference_reward, notes)
    n_ref = value / cost[reference_reward]
    rep_idx, no_interval = _curve_replicate_draws(curve, n_draws, seed, notes)
    effs, sps = entry_efficiencies(batches, names, reference_reward, n_draws=n_draws, seed=seed, level=level,
                                   notes=notes)
    st = Setting(curve=curve, method=method, reference_reward=reference_reward, kind=kind, value=value,
                 budget_s=format_budget(value, kind), tokens=tokens, cost=cost, n_ref=n_ref, base=curve(n_ref),
                 base_rep=curve.interval_values(np.full(n_draws, n_ref), rep_idx), rep_idx=rep_idx, effs=effs,
                 sps=sps, first_order=_first_order_gains(batches, names), n_draws=n_draws, level=level,
                 lr_curve=lr_curve, probe_loss_type=cfg.get("loss_type"), no_interval=no_interval,
                 transfer=transfer_clause(curve, cfg))
    st.silent = _silent_entries(probe, batches, names, reference_reward, notes)
    st.no_verdict = "; ".join(x for x in (no_verdict_reasons(curve, n_ref, tokens[reference_reward], kind, cfg),
                                          no_interval) if x) or None  # judged once per forecast
    _reference_state(st, batches, cfg, notes)
    table = forecast_table([arm_row(st, arm, spec) for arm, spec in arms.items()], list(TABLE_COLUMNS))
    notes += _mismatch_notes(curve, cfg, n_ref) + _budget_notes(st, names)
    # the curve's notes that change what it says: B fixed, and evals of its source skipped (lines or steps named)
    curve_notes = [n for n in curve.notes if n.startswith("B ") or is_skipped_note(n)]
    return ForecastResult(table=table, method=method, budget={"kind": kind, "value": value}, curve=curve.describe(),
                          curve_source=curve.source, grpo_accuracy=float(st.base), reference_reward=reference_reward,
                          level=level, notes=start_notes(curve, batches) + notes + curve_notes,
                          no_verdict_reason=st.no_verdict, update=update_batches(curve, cfg))
