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
the curve cannot represent; it is clipped to 0 (no progress) and noted.

Interval (``level``, default 95%): percentiles of D Monte Carlo draws, draw d pairing the d-th
bootstrap replicate of rho (prompts, plus the reference spread when measured) with a seed-bootstrap
replicate of the curve (drawn with ``numpy.random.PCG64(seed)``), the same curve replicate for
R and for grpo in that draw, so the gain's interval carries the curve's seed spread without
double counting the shared part.

Learning-rate arms (``lr_scale`` != 1): a first-order probe scales linearly with the learning rate,
which training contradicts past the optimum (2x the rate lost 4.4 points on the tiny study), so
without a curve for that rate (``lr_curve``, e.g. from a learning-rate sweep) the arm is marked
``outside_probe`` and gets no number.

Verdict (one line per arm): ``worth its tokens`` when the interval lies above 0, ``not worth its
tokens`` when below, ``no detectable difference`` when it contains 0, ``outside what the probe can
tell (learning-rate change)`` for learning-rate arms without their curve.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .curves import ReferenceCurve, task_key
from .proxies import Efficiency, probe_efficiency, signal_proxy_efficiency, stratified_counts

__all__ = ["ForecastResult", "forecast_rewards", "METHODS", "probe_batches_of", "format_budget", "forecast_section",
           "format_forecast", "DEFAULT_CURVES"]

METHODS = ("probe", "cost_only", "signal_proxy")
TRAIN_FORWARDS = 3.0  # forward + backward of a trained token, in forwards (gradprobe.ledger)
TABLE_COLUMNS = ("arm", "reward", "lr_scale", "tokens_per_update", "rho", "rho_interval", "snr", "effective_updates",
                 "forecast_accuracy", "forecast_gain", "gain_interval", "method", "note", "verdict", "rho_raw",
                 "rho_signal_proxy", "gain_probe", "gain_probe_interval", "gain_cost_only", "gain_cost_only_interval",
                 "gain_signal_proxy", "gain_signal_proxy_interval", "first_order_gain")


def format_budget(value: float, kind: str = "tokens") -> str:
    """250000 -> '250k', 1000000 -> '1M', 1.5e15 FLOPs -> '1.5e+15 FLOPs'."""
    if kind == "flops":
        return f"{value:.3g} FLOPs"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= div:
            return f"{value / div:.4g}{suf}"
    return f"{value:g}"


@dataclass
class ForecastResult:
    """Forecasts of every arm at one budget.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per arm, columns :data:`TABLE_COLUMNS`: ``reward``, ``tokens_per_update`` (tokens),
        ``rho`` (shrunk probe efficiency), ``rho_interval`` ((lo, hi)), ``snr`` (|rho_raw - 1| / se),
        ``effective_updates`` (updates, of the method used), ``forecast_accuracy`` (points),
        ``forecast_gain`` (points vs grpo), ``gain_interval`` ((lo, hi)), ``method`` (the forecaster
        that made the row's number), ``note``, ``verdict``; beside it every forecaster's gain and
        interval (``gain_probe``, ``gain_cost_only``, ``gain_signal_proxy``) and the raw first-order
        extrapolation ``first_order_gain`` (points vs grpo, expected to overestimate).
    method : str
        The forecaster asked for.
    budget : dict
        ``kind`` ("tokens" or "flops") and ``value``.
    curve : str
        The reference curve's one-line description; ``curve_source`` where it came from.
    grpo_accuracy : float
        f(T / c_outcome), points.
    notes : list[str]
    """

    table: pd.DataFrame
    method: str
    budget: dict
    curve: str
    curve_source: str
    grpo_accuracy: float
    reference_reward: str
    level: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN -> None, tuples -> lists): ``probe.json``'s ``forecast`` section."""
        rows = []
        for rec in self.table.to_dict(orient="records"):
            rows.append({k: _json_value(v) for k, v in rec.items()})
        return {"available": True, "method": self.method, "budget": dict(self.budget), "curve": self.curve,
                "curve_source": self.curve_source, "grpo_accuracy": _json_value(self.grpo_accuracy),
                "reference_reward": self.reference_reward, "level": self.level, "rows": rows,
                "notes": list(self.notes),
                "model": "accuracy f(n_R) of grpo's reference curve at effective updates n_R = (T / c_R) rho_R; "
                         "gain = f(n_R) - f(T / c_outcome) (DESIGN.md, 'Forecast'; ScaleRL sigmoid, Khatri et al. 2025, "
                         "eq. 1)"}


def _json_value(v):
    if isinstance(v, (tuple, list, np.ndarray)):
        return [_json_value(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def probe_batches_of(probe) -> list[dict]:
    """The probe batches of a probe result: a ``probe.json`` dict (with ``batches`` when
    :func:`gradprobe.probe.batches.run_probe_batches` made it), or a list of per-batch results.

    Returns
    -------
    list of dict
        Each: ``rewards`` (name -> entry), ``reference`` (dict), ``config`` (dict), ``ledger`` (dict),
        ``batch`` (dict), ``draw`` (reference draw id).

    Raises
    ------
    ValueError
        Anything else (the message says what is expected).
    """
    if isinstance(probe, (list, tuple)):
        items = list(probe)
    elif isinstance(probe, dict) and isinstance(probe.get("batches"), list) and probe["batches"]:
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
        entries = {r["name"]: r for r in rewards} if isinstance(rewards, list) else \
            {k: dict(v, name=v.get("name", k)) for k, v in rewards.items()}
        ref = item.get("reference") or {}
        draw = ref.get("draw", ref.get("norm", i))
        out.append({"rewards": entries, "reference": ref, "config": item.get("config") or {},
                    "ledger": item.get("ledger") or {}, "batch": item.get("batch") or {}, "draw": draw})
    return out


def _verdict(gain: float, iv, budget: str, kind: str) -> str:
    what = "tokens" if kind == "tokens" else "FLOPs"
    if not (math.isfinite(gain) and iv and all(math.isfinite(x) for x in iv)):
        return "no forecast"
    lo, hi = iv
    nums = f"{gain:+.1f} [{lo:+.1f}, {hi:+.1f}] vs grpo"
    if lo > 0:
        return f"worth its {what} at {budget}: {nums}"
    if hi < 0:
        return f"not worth its {what} at {budget}: {nums}"
    return f"no detectable difference at {budget}: {nums}"


def forecast_rewards(curve: ReferenceCurve, probe, *, budget_tokens: float | None = None,
                     budget_flops: float | None = None, method: str = "probe", arms: dict | None = None,
                     lr_curve: dict | None = None, reference_reward: str = "outcome", n_draws: int = 2000,
                     seed: int = 0, level: float = 0.95) -> ForecastResult:
    """Forecast accuracy and gain vs grpo of every probed reward (or arm) at a budget.

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
    n_draws : int
        Monte Carlo draws of the interval (>= 100).
    seed : int
        Seed of the bootstrap and the curve-replicate draws.
    level : float
        Interval coverage in (0, 1).

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
    if method not in METHODS:
        raise ValueError(f"method {method!r} must be one of {METHODS}")
    if budget_tokens is not None and budget_flops is not None:
        raise ValueError("give budget_tokens or budget_flops, not both")
    if n_draws < 100:
        raise ValueError(f"n_draws must be >= 100 for a percentile interval, got {n_draws}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    batches = probe_batches_of(probe)
    cfg = batches[0]["config"]
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
            if any(b["rewards"][name].get(key) is None for b in batches):
                raise ValueError(f"probe entry {name!r} lacks {key!r}; re-run the probe with this gradprobe")
    if budget_flops is None:
        kind = "tokens"
        value = float(budget_tokens if budget_tokens is not None else cfg.get("budget_tokens", math.nan))
    else:
        kind, value = "flops", float(budget_flops)
    if not value > 0:
        raise ValueError(f"budget_{kind} must be > 0 (got {value}); pass budget_tokens= or set the probe's --budget-tokens")
    arms = arms if arms is not None else {n: {"reward": n, "lr_scale": 1.0} for n in names}
    for arm, spec in arms.items():
        if spec.get("reward") not in names:
            key = str(spec.get("reward"))
            fix = (f"add {key.partition('@')[2]!r} to --loss-types (entry REWARD@LOSS_TYPE, gradprobe.probe_keys)"
                   if "@" in key else "add it to --rewards")
            raise ValueError(f"arm {arm!r} has reward {spec.get('reward')!r}, which the probe did not cover "
                             f"(probed: {', '.join(names)}); {fix}")
    notes: list[str] = []

    # tokens per update, in the curve's updates
    probe_b = (cfg.get("update_prompts") or cfg.get("prompts"), cfg.get("update_group") or cfg.get("group"))
    curve_b = (curve.metadata.get("update_prompts"), curve.metadata.get("update_group"))
    scale = 1.0
    if all(probe_b) and all(curve_b) and tuple(probe_b) != tuple(curve_b):
        scale = (curve_b[0] * curve_b[1]) / (probe_b[0] * probe_b[1])
        notes.append(f"the curve's updates are {curve_b[0]}x{curve_b[1]} completions, the probe's {probe_b[0]}x"
                     f"{probe_b[1]}: tokens per update rescaled by {scale:g} (per-update efficiency does not depend on "
                     "the batch size; pass --update-prompts/--update-group to state the update you mean)")
    tokens = {n: scale * float(np.mean([b["rewards"][n]["tokens_per_update"] for b in batches])) for n in names}
    c_ref = tokens[reference_reward]
    if kind == "flops":
        fpt = []
        for b in batches:
            led = b["ledger"]
            charged = led.get("charged_generated_tokens") or 0
            gen = (led.get("flops") or {}).get("generation")
            if charged and gen:
                fpt.append(gen / charged)
        if not fpt:
            raise ValueError("a FLOPs budget needs the probe ledger's generation FLOPs (ledger.flops.generation); "
                             "re-run the probe with this gradprobe or give budget_tokens")
        per_token = float(np.mean(fpt))
        cost = {n: per_token * (tokens[n] + TRAIN_FORWARDS * c_ref) for n in names}
    else:
        cost = dict(tokens)
    n_ref = value / cost[reference_reward]

    # bootstrap multiplicities shared by every reward (paired), and curve replicates per draw
    sizes = [len(b["rewards"][reference_reward]["per_group"]) for b in batches]
    counts = stratified_counts(sizes, n_draws, seed)
    rng = np.random.Generator(np.random.PCG64(seed + 1))
    m = len(curve.replicates)
    rep_idx = rng.integers(0, m, size=n_draws) if m else None
    if m == 0:
        notes.append("the reference curve has one seed: intervals leave out its uncertainty")
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
            sps[n] = (math.nan, (math.nan, math.nan), np.full(n_draws, np.nan))
    for eff in effs.values():
        for note in eff.notes:
            if note not in notes and note.startswith("one "):
                notes.append(note)

    base = curve(n_ref)
    base_rep = curve.replicate_values(np.full(n_draws, n_ref), rep_idx)
    budget_s = format_budget(value, kind)
    first_order = {}
    for n in names:
        g = float(np.mean([b["rewards"][n].get("predicted_gain_per_update", math.nan) for b in batches]))
        first_order[n] = g
    rows = []
    for arm, spec in arms.items():
        r, s = spec["reward"], float(spec.get("lr_scale", 1.0))
        eff = effs[r]
        is_ref = r == reference_reward and math.isclose(s, 1.0)
        row = {"arm": arm, "reward": r, "lr_scale": s, "tokens_per_update": tokens[r], "rho": eff.rho,
               "rho_interval": eff.interval, "snr": eff.snr, "rho_raw": eff.rho_raw,
               "rho_signal_proxy": sps[r][0],
               "first_order_gain": value / cost[r] * s * first_order[r] - n_ref * first_order[reference_reward]}
        arm_notes = []
        arm_curve = curve
        if not math.isclose(s, 1.0):
            match = next((c for k, c in (lr_curve or {}).items() if math.isclose(float(k), s)), None)
            if match is None:
                row.update({k: math.nan for k in ("effective_updates", "forecast_accuracy", "forecast_gain", "gain_probe",
                                                   "gain_cost_only", "gain_signal_proxy")})
                row.update(gain_interval=(math.nan, math.nan), gain_probe_interval=(math.nan, math.nan),
                           gain_cost_only_interval=(math.nan, math.nan), gain_signal_proxy_interval=(math.nan, math.nan),
                           method="outside_probe",
                           note=f"learning-rate change (x{s:g}): a first-order probe scales linearly with the rate, which "
                                "training contradicts past the optimum; pass a learning-rate sweep's curve "
                                f"(lr_curve={{{s:g}: curve}}) to forecast it",
                           verdict="outside what the probe can tell (learning-rate change)")
                rows.append(row)
                continue
            arm_curve = match
            arm_notes.append(f"read from the x{s:g} learning-rate curve ({match.source})")
        per = {}
        for meth in METHODS:
            if meth == "cost_only" or is_ref:
                rho_pt, rho_rep = 1.0, np.ones(n_draws)
            elif meth == "probe":
                rho_pt, rho_rep = eff.rho, eff.replicates
            else:
                rho_pt, rho_rep = sps[r][0], sps[r][2]
            if not math.isfinite(rho_pt):
                per[meth] = (math.nan, math.nan, math.nan, (math.nan, math.nan))
                continue
            n_pt = value / cost[r] * rho_pt
            n_rep = value / cost[r] * np.nan_to_num(rho_rep, nan=rho_pt)
            if n_pt < 0 or (n_rep < 0).any():
                if meth == method and n_pt < 0:
                    arm_notes.append(f"rho {rho_pt:.3g} < 0 ({meth}): effective updates clipped to 0 (the curve has no "
                                     "regression below R0)")
                n_pt, n_rep = max(n_pt, 0.0), np.maximum(n_rep, 0.0)
            acc = arm_curve(n_pt)
            if is_ref:
                gain, iv = 0.0, (0.0, 0.0)
            else:
                gain = acc - base
                reps = arm_curve.replicate_values(n_rep, rep_idx) - base_rep
                a = (1.0 - level) / 2.0
                lo, hi = np.quantile(reps, [a, 1 - a])
                iv = (float(lo), float(hi))
            per[meth] = (n_pt, acc, gain, iv)
        used = method
        if method == "probe" and not is_ref and eff.shrink == 0.0:
            arm_notes.append(f"probe SNR {eff.snr:.2f} <= 1: rho shrunk to 1, i.e. the cost-only forecast"
                             if math.isfinite(eff.rho_raw) else "rho undefined (grpo's alignment <= 0): cost-only forecast")
            used = "cost_only (probe SNR <= 1)"
        elif method == "signal_proxy" and not math.isfinite(sps[r][0]):
            arm_notes.append("no signal proxy in the probe result: cost-only forecast")
            per["signal_proxy"] = per["cost_only"]
            used = "cost_only (no signal proxy)"
        n_pt, acc, gain, iv = per[method]
        for meth in METHODS:
            row[f"gain_{meth}"] = per[meth][2]
            row[f"gain_{meth}_interval"] = per[meth][3]
        if not is_ref and math.isfinite(n_pt) and n_pt > arm_curve.max_update * 1.0001:
            arm_notes.append(f"its {n_pt:.0f} effective updates lie beyond the curve's last eval (update "
                             f"{arm_curve.max_update:g}): extrapolated")
        row.update(effective_updates=n_pt, forecast_accuracy=acc, forecast_gain=gain, gain_interval=iv, method=used,
                   note="; ".join(arm_notes),
                   verdict="reference (grpo)" if is_ref else _verdict(gain, iv, budget_s, kind))
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    if n_ref > curve.max_update * 1.0001:
        notes.append(f"grpo's {n_ref:.0f} updates at this budget lie beyond the curve's last eval (update "
                     f"{curve.max_update:g}): its accuracy there is the fit's extrapolation")
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
    return ForecastResult(table=table, method=method, budget={"kind": kind, "value": value}, curve=curve.describe(),
                          curve_source=curve.source, grpo_accuracy=float(base), reference_reward=reference_reward,
                          level=level, notes=notes + [n for n in curve.notes if n.startswith("B ")])


#: Models whose shipped reference curve is used when no --reference-curve is given.
DEFAULT_CURVES = {"tiny": "tiny_frontier_grpo.json"}

VALIDATION_FILE = "forecast_validation.json"


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
        ``{"best": "probe" | "cost_only" | "signal_proxy", "mae": {forecaster: points}, "evidence": str, ...}``.

    Raises
    ------
    ValueError
        The file is missing, not JSON, or names an unknown forecaster (the message names the file and the
        command that rewrites it).
    """
    from .curves import default_curve_path

    path = Path(path) if path is not None else default_curve_path().with_name(VALIDATION_FILE)
    fix = "rewrite it with `calib report STUDY... --out DIR --validation-out FILE`"
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"the forecaster validation record {path} cannot be read ({e}); {fix}") from None
    if record.get("best") not in ("probe", "cost_only", "signal_proxy") or not record.get("evidence"):
        raise ValueError(f"the forecaster validation record {path} has no valid 'best' forecaster and evidence; {fix}")
    return record


#: The shipped validation record (:func:`load_validation`), read once at import.
VALIDATION = load_validation()


def forecast_section(result: dict, *, curve: ReferenceCurve | None = None, curve_spec: str | None = None,
                     method: str = "auto", reference_reward: str = "outcome") -> dict:
    """The ``forecast`` section of ``probe.json`` (what ``gradprobe probe`` prints).

    Parameters
    ----------
    result : dict
        A probe result (one batch, or combined by :func:`gradprobe.probe.batches.run_probe_batches`).
    curve : ReferenceCurve, optional
        The reference curve. Default: the shipped curve of the probe's model when there is one
        (:data:`DEFAULT_CURVES`: ``tiny``), else none.
    curve_spec : str, optional
        How the user named the curve (recorded).
    method : {"auto", "probe", "cost_only", "signal_proxy"}
        ``auto``: the forecaster that validated best (:data:`VALIDATION`), recorded with its evidence.
    reference_reward : str

    Returns
    -------
    dict
        :meth:`ForecastResult.to_dict` plus ``method_choice`` (why this forecaster), ``curve_spec``,
        ``curve_is_default`` and ``pre_screen``
        (generated tokens of the probe batches, continuations and held-out reference, and their share
        of the budget: what screening cost against one grpo run). Without a curve, or without the
        reference reward: ``{"available": False, "note": ...}`` saying what is needed.

    Raises
    ------
    ValueError
        See :func:`forecast_rewards`.
    """
    from .curves import default_curve_path

    cfg = result.get("config") or {}
    is_default = False
    if curve is None:
        name = DEFAULT_CURVES.get(str(cfg.get("model")))
        if name is None:
            return {"available": False, "note": f"no reference curve for model {cfg.get('model')!r}: the gains above "
                    "are the raw first-order extrapolation (expected to overestimate); a forecast needs a reference "
                    "curve: pass --reference-curve (a grpo run's metrics.jsonl, a TRL trainer_state.json, a CSV of "
                    "update,accuracy, a study folder or a saved curve)"}
        curve = ReferenceCurve.load(default_curve_path().with_name(name))
        curve_spec, is_default = f"default ({name})", True
    names = [r["name"] for r in result.get("rewards", [])]
    if reference_reward not in names:
        return {"available": False, "note": f"the forecast is a gain vs grpo: add {reference_reward!r} to --rewards"}
    choice = "as asked"
    if method == "auto":
        method = VALIDATION["best"]
        choice = f"auto: validated best, {VALIDATION['evidence']}"
    fr = forecast_rewards(curve, result, method=method, reference_reward=reference_reward)
    d = fr.to_dict()
    d["method_choice"] = choice
    led = result.get("ledger") or {}
    gen = led.get("generated_tokens") or {}
    ref_led = ((result.get("reference") or {}).get("ledger") or {}).get("generated_tokens") or {}
    spent = int(sum(gen.get(c, 0) for c in ("rollout", "continuation", "selection")) + sum(ref_led.values()))
    budget = d["budget"]["value"] if d["budget"]["kind"] == "tokens" else None
    d.update(curve_spec=curve_spec, curve_is_default=is_default,
             pre_screen={"generated_tokens": spent, "budget_tokens": budget,
                         "share_of_budget": spent / budget if budget else None,
                         "note": "probe rollouts, MC continuations and the held-out reference's rollouts, against one "
                                 "grpo run's budget"})
    return d


def format_forecast(section: dict) -> str:
    """Plain-text forecast table and verdicts (printed under the probe table by ``gradprobe probe``)."""
    if not section:
        return ""
    if not section.get("available"):
        return f"\nforecast: none. {section.get('note', '')}"
    b = section["budget"]
    budget_s = format_budget(b["value"], b["kind"])
    pct = int(round(100 * section["level"]))
    lines = ["", f"forecast vs grpo at {budget_s} {'tokens' if b['kind'] == 'tokens' else ''}".rstrip()
             + f" (grpo reaches {section['grpo_accuracy']:.1f} points there)",
             f"forecaster: {section['method']} ({section.get('method_choice', '')}); the other forecasters' gains are "
             "printed beside it",
             f"reference curve: {section['curve']}" + ("  [shipped default]" if section.get("curve_is_default") else "")]
    header = ["arm", "tokens/update", "raw rho", "rho", f"rho {pct}%", "SNR", "eff.updates", "accuracy", "gain vs grpo",
              f"{pct}% interval", "probe", "cost-only", "signal", "method"]
    rows = []

    def f(x, spec):
        return "-" if x is None else format(x, spec)

    for r in section["rows"]:
        riv = r.get("rho_interval") or [None, None]
        riv_s = "-" if riv[0] is None else f"[{riv[0]:.2f}, {riv[1]:.2f}]"
        raw = r.get("rho_raw")
        giv = r.get("gain_interval") or [None, None]
        giv_s = "-" if giv[0] is None else f"[{giv[0]:+.1f}, {giv[1]:+.1f}]"
        rows.append([r["arm"], f(r["tokens_per_update"], ",.0f"), f(raw, ".2f"), f(r["rho"], ".2f"), riv_s,
                     f(r["snr"], ".2f"), f(r["effective_updates"], ".1f"), f(r["forecast_accuracy"], ".1f"),
                     f(r["forecast_gain"], "+.1f"), giv_s, f(r["gain_probe"], "+.1f"), f(r["gain_cost_only"], "+.1f"),
                     f(r["gain_signal_proxy"], "+.1f"), str(r["method"])])
    from ..tables import format_columns  # columns as wide as their longest entry (long reward names)

    lines += format_columns(header, rows, "<>>>>>>>>>>>><")
    lines.append("")
    for r in section["rows"]:
        if r["verdict"] != "reference (grpo)":
            lines.append(f"{r['arm']}: {r['verdict']}" + (f"  ({r['note']})" if r.get("note") else ""))
    ps = section.get("pre_screen") or {}
    if ps.get("share_of_budget") is not None:
        lines.append(f"pre-screen cost: {ps['generated_tokens']:,} generated tokens = {ps['share_of_budget']:.1%} of "
                     f"one grpo run's {budget_s} budget")
    lines += [f"note: {n}" for n in section.get("notes", [])]
    return "\n".join(lines)
