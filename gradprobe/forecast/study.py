"""Forecasts of every arm of a study at its matched token budget: the calibration's feature table.

:func:`study_forecasts` joins a ``gradprobe study`` folder's probe (``probe/probe.json``,
``probe/arms.json``) with a reference curve (by default the study's own grpo arm from
``runs.csv``; pass ``curve=`` for a leave-out: a curve the study did not make) and returns, per arm,
the forecast gain vs grpo of every forecaster (:func:`gradprobe.forecast.forecast_rewards`) at the
study's matched generated-token budget (``analysis.json["matched"]["generated_tokens"]["budget"]``).

Each arm reads its own probe entry: ``arms.json``'s ``probe_entry`` (``outcome@bnpo`` for an arm that
trains the outcome reward with the bnpo loss, :mod:`gradprobe.probe_keys`), or its ``reward`` in an
``arms.json`` written before loss-type arms. Its rho is vs grpo's entry (the reference curve's loss).

A guided arm whose ``arms.json`` record has ``probe_dir`` (``guided/<arm>``) reads that entry of its own
probe, ``probe/<probe_dir>/probe.json`` (the importance-weighted guided update, sampled as the arm's
training does; :func:`gradprobe.study.probe_plan.guided_probes`). The entry is merged into the shared
probe batch by batch under the key ``ENTRY~<probe_dir>`` (:func:`merge_guided_entries`), so its rho is
its per-group contributions against grpo's in the shared probe, and its tokens per update, signal proxy and
first-order gain are the guided probe's. The two batches are independent samples of the same size on the
same training prompts (same seed and settings; guided rollouts and importance weights in one, plain
rollouts in the other), group g of each on the same prompt, so the forecast's joint resample of group
indices resamples prompts, with both batches' rollouts of a drawn prompt, and keeps each batch's
marginal distribution. Both probes measure along one reference update v (the guided probe reuses the
shared one's, ``reference.reused``); under Adam each u = P v has P from its own batch. Without the guided
probe (an older study, or a probe whose batches do not match it) the arm reads its reward's unguided entry
and the note says so. A guided arm whose reward failed on its guided probe's batch (that probe.json's ``left_out``,
or, when every reward of that probe failed, its record ``probe/<probe_dir>/left_out.json`` and no probe.json:
:func:`gradprobe.study.worker.isolated_probe`) has no forecast and says why, as an arm whose reward the shared probe
left out. A guided probe or record that is there but damaged or edited (not UTF-8 or JSON, an entry its own records
contradict) is refused in one line naming the file and the fix, as the study's own probe is.
"""

from __future__ import annotations

import json
import math
import tomllib
import warnings
from pathlib import Path

import pandas as pd

from ..layout import (ANALYSIS_JSON, ARMS_JSON, GUIDED_LEFT_OUT, PLAN_COPY, PROBE_JSON, RETRAIN_CLAUSE, keeps_runs,
                      probe_dir, rerun_advice, study_probe_advice)
from ..outputs import is_json_number, json_number_text, json_short, read_probe_json, shell_word
from ..probe_keys import arm_entry
from .analysis_reads import rebuild_analysis  # defined there for the curve reader; calib imports it from here
from .budget_forecast import forecast_rewards
from .curves import ReferenceCurve
from .probe_input import check_entry_inputs, pooled_entries, probe_batches_of

__all__ = ["study_forecasts", "failed_guided_probe", "merge_guided_entries", "matched_token_budget", "STUDY_COLUMNS",
           "SkippedEvalsWarning", "rebuild_analysis", "MATCHED_BUDGET_KEYS"]

#: Separates an arm's probe entry from its guided probe's folder in a merged key (``outcome~guided/guided``).
_GUIDED_KEY_SEPARATOR = "~"
#: The keys of ``analysis.json``'s matched generated-token budget, newest first (``tokens`` in older analyses).
MATCHED_BUDGET_KEYS = ("generated_tokens", "tokens")


class SkippedEvalsWarning(UserWarning):
    """Lines of a study's reference arm in ``runs.csv`` without an update or greedy accuracy: the study's own
    reference curve, which every in-sample forecast of its arms reads, is fitted without them."""


STUDY_COLUMNS = ("arm", "reward", "loss_type", "probe_entry", "lr_scale", "budget", "budget_value", "tokens_per_update", "rho", "snr",
                 "token_multiplier", "forecast_probe", "forecast_cost_only", "forecast_signal_proxy",
                 "forecast_first_order", "forecast_probe_interval", "method", "note", "curve_source", "in_sample",
                 "realized_gain")


def read_study_json(path: Path, fix: str, error: type[Exception] = ValueError, *, damaged: str | None = None) -> dict:
    """Read one JSON file of a study folder.

    Raises ``FileNotFoundError`` (or ``error`` when it is given) naming the file and ``fix`` when it is
    missing, and ``error`` naming the file and ``damaged`` (default: "re-run the step that writes it") when it is not
    UTF-8 text or not valid JSON (a UTF-8 byte-order mark an editor wrote is read, as
    :func:`gradprobe.outputs.read_probe_json` reads a probe.json). ``calib`` passes its ``StudyFormatError``.
    """
    path = Path(path)
    damaged = "re-run the step that writes it" if damaged is None else damaged
    if not path.is_file():
        raise (error if error is not ValueError else FileNotFoundError)(f"{path} is missing; {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as e:
        raise error(f"{path} is not UTF-8 text ({e}); {damaged}") from None
    except json.JSONDecodeError as e:
        raise error(f"{path} is not valid JSON ({e}); {damaged}") from None


def _realized_gain(entry: dict, arm: str, study_dir: Path, budget: float) -> float:
    """The arm's mean gain vs grpo at the matched token budget (accuracy points; NaN for grpo's own
    row when the analysis left it out). Raises ValueError when the analysis refused every read at
    that budget (e.g. a study budgeted in FLOPs whose evals do not reach a common token count)."""
    block = entry.get("generated_tokens") or entry.get("tokens") or {}
    gain = block.get("gain_vs_grpo", math.nan)
    if gain is None:
        raise ValueError(f"{study_dir}/analysis.json: arm {arm!r} has no gain vs grpo at the matched token budget "
                         f"({budget:,.0f} tokens): every seed's read was refused or missing there (refused: {block.get('gap_exceeded')}). "
                         "Forecasts and calibration rows are at a token budget: leave this study out, or re-run it "
                         "with [budget] generated_tokens")
    return float(gain)


def study_forecasts(study_dir, *, curve: ReferenceCurve | None = None, probe=None, mode: str = "sigmoid",
                    lr_curve: dict | None = None, n_draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per arm of a study: forecast gain vs grpo at the matched token budget, by every forecaster.

    Parameters
    ----------
    study_dir : path
        A finished ``gradprobe study`` folder (``runs.csv``, ``analysis.json``, ``probe/probe.json``,
        ``probe/arms.json``; ``plan.toml`` optional).
    curve : ReferenceCurve, optional
        The reference curve. Default: the study's own ``grpo`` arm (``ReferenceCurve.from_study``), which
        makes the forecasts in-sample for that study (``in_sample`` True); pass a curve from another study
        or run for a leave-out.
    probe : dict or list of dict, optional
        A probe result to use instead of the study's ``probe/probe.json`` (e.g. a multi-batch probe of the
        same initial policy, :func:`gradprobe.probe.batches.run_probe_batches`), guided entries merged in.
    mode : {"sigmoid", "empirical"}
        Mode of the default curve. ``n_draws``, ``seed``: of the forecast intervals.
    lr_curve : dict[float, ReferenceCurve], optional
        Curves for learning-rate arms (otherwise they are ``outside_probe`` with NaN forecasts).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`STUDY_COLUMNS`, one row per arm (budget axis ``tokens``): ``reward`` and ``loss_type``
        (the arm's training loss; from ``plan.toml`` when ``arms.json`` predates it, None without either),
        ``probe_entry`` (the probe entry read: ``arms.json``'s, else the reward; ``ENTRY~guided/<arm>`` for a
        guided arm read from its guided probe, module docstring). Gains are accuracy points vs grpo at the
        budget: ``forecast_probe`` (probe efficiency, shrunk; cost only where its SNR <= 1),
        ``forecast_cost_only`` (rho = 1), ``forecast_signal_proxy`` (verl's proxy; NaN when the probe has
        none), ``forecast_first_order`` (the raw extrapolation (T / c_R) s g_R - (T / c_grpo) g_grpo, the
        old ``predicted_gain_at_budget`` difference), ``forecast_probe_interval`` ((lo, hi)).
        ``token_multiplier`` = c_R / c_grpo; ``rho``, ``snr`` the probe's shrunk efficiency and its SNR;
        ``realized_gain`` the study's mean gain vs grpo at matched tokens (``analysis.json``, for checks;
        not a feature). ``grpo``'s row is 0 by definition. An arm whose reward a probe left out (``left_out``:
        :func:`_left_out_arms`, :func:`_guided_entries`) has method ``no_probe_entry``, no forecast, the note why.

    Raises
    ------
    FileNotFoundError
        A missing study file (named, with the fix).
    ValueError
        Invalid JSON, no ``grpo`` arm, a matched token budget in ``analysis.json`` that is missing or no finite
        number > 0 (``true``, text, NaN, 0: :func:`matched_token_budget`, naming the field and the re-analysis that
        fixes it), a damaged or edited ``probe/probe.json``, guided probe or its ``left_out.json`` (named with the
        fix), an arm whose probe entry the probe did not cover (a probe.json from before loss-type arms: the message
        says to re-run the probe), grpo's reward left out of the probe, a curve that cannot be fitted (``CurveError``).

    Warns
    -----
    SkippedEvalsWarning
        With ``curve`` None, when lines of grpo in ``runs.csv`` hold no update or greedy accuracy
        (:attr:`ReferenceCurve.skipped_notes <gradprobe.forecast.curves.ReferenceCurve.skipped_notes>` of the
        study's own curve), naming them and the fix. ``gradprobe study`` never writes such a line.
    """
    study_dir = Path(study_dir)
    analysis, arms_res, arms_map, probe, batches = _read_study(study_dir, probe)
    budget = matched_token_budget(analysis, study_dir)
    in_sample = curve is None
    if curve is None:
        curve = ReferenceCurve.from_study(study_dir, arm="grpo", mode=mode)
        _warn_skipped_evals(study_dir, curve)
    plan_arms, plan_loss = _plan_arms(study_dir)
    arms, labels = _arm_specs(study_dir, arms_res, arms_map, plan_arms, plan_loss)
    left_out = _left_out_arms(study_dir, probe, arms)  # reward failed on the probe batch: a row without forecast
    arms = {arm: a for arm, a in arms.items() if arm not in left_out}
    batches = _check_probed(study_dir, probe, arms, batches)
    probe, guided, batches = _guided_entries(study_dir, probe, arms, labels, arms_map, batches, left_out=left_out)
    res = forecast_rewards(curve, probe, budget_tokens=budget, method="probe", arms=arms, lr_curve=lr_curve,
                           reference_reward=arms["grpo"]["reward"], n_draws=n_draws, seed=seed, _batches=batches)
    t = res.table.set_index("arm")
    c_ref = float(t.loc["grpo", "tokens_per_update"])
    common = {"budget": "tokens", "budget_value": budget, "curve_source": ("in-sample: " if in_sample else "") +
              curve.source, "in_sample": in_sample}
    rows = [{"arm": arm, **labels[arm], **_forecast_columns(t.loc[arm], c_ref), **common,
             "note": "; ".join(_arm_notes(t.loc[arm], plan_arms.get(arm) or {}, guided.get(arm))),
             "realized_gain": _realized_gain(arms_res[arm], arm, study_dir, budget)} for arm in arms]
    rows += [{"arm": arm, **labels[arm], **_left_out_row(arms_res[arm], arm, why, study_dir, budget), **common}
             for arm, why in left_out.items()]
    return pd.DataFrame(sorted(rows, key=lambda r: list(arms_res).index(r["arm"])), columns=list(STUDY_COLUMNS))


def _left_out_row(res: dict, arm: str, why: str, study_dir: Path, budget: float) -> dict:
    """The row of an arm without a probe entry (:func:`_left_out_arms`; ``res``: its analysis): no forecast, method
    ``no_probe_entry``, the note why, and its realized gain."""
    return {"lr_scale": float(res.get("lr_scale", 1.0)), "method": "no_probe_entry", "note": why,
            "realized_gain": _realized_gain(res, arm, study_dir, budget)}


def _left_out_arms(study_dir: Path, probe, arms: dict) -> dict:
    """arm -> why it has no probe entry, for the arms whose reward the study's probe left out (``probe.json``'s
    ``left_out``: the reward failed on the probe batch, :func:`gradprobe.study.worker.isolated_probe`); ValueError
    when that is grpo's, which every gain is measured against."""
    records = probe.get("left_out") if isinstance(probe, dict) else None
    why = {}
    for r in records if isinstance(records, list) else []:
        for arm in r.get("arms") or []:
            if arm in arms:
                why[arm] = (f"no probe entry: its reward {r.get('reward')!r} failed on the probe batch and was left "
                            f"out of {study_dir}/probe/probe.json ({r.get('error')}); {r.get('fix')}")
    if "grpo" in why:
        raise ValueError(f"{study_dir}: arm grpo, which every gain is measured against, has {why['grpo']}")
    return why


def _read_study(study_dir: Path, probe) -> tuple[dict, dict, dict, object, list | None]:
    """(``analysis.json``, its ``arms`` (arm -> analysis, ``grpo`` among them), ``probe/arms.json``, the probe:
    ``probe`` when given, else ``probe/probe.json``, and the probe's batches: ``probe_batches_of`` of the file read
    here (checked with the file named), None for a given ``probe``) of a study folder, read in that order.

    Raises
    ------
    FileNotFoundError
        No such folder, or a missing file (named, with the fix).
    ValueError
        Invalid JSON, or no ``grpo`` arm in ``analysis.json`` (gains are measured against it).
    """
    if not study_dir.is_dir():
        raise FileNotFoundError(f"study folder {str(study_dir)!r} does not exist; pass the --out folder of a finished "
                                "`gradprobe study` (e.g. data/study_tiny)")
    analysis = read_study_json(study_dir / ANALYSIS_JSON, "run `gradprobe study` to the end")
    file, arms_fix = probe_dir(study_dir) / PROBE_JSON, _arms_fix(study_dir)
    arms_map = read_study_json(probe_dir(study_dir) / ARMS_JSON, arms_fix if file.is_file()
                               else _missing_probe_fix(study_dir), damaged=arms_fix)  # no probe at all: how to run it
    if probe is None:
        probe = read_probe_json(file, rerun_advice(file.parent),
                                missing=_missing_probe_fix(study_dir))  # as load_probe reads it (a BOM is read)
        check_entry_inputs(probe, source=file)  # as load_probe checks it: an edited field is named as it names it
        batches = probe_batches_of(probe, source=file)  # a damaged entry: named with this file
    else:
        batches = None  # read (and checked) by _check_probed
    arms_res = analysis.get("arms") or {}
    if "grpo" not in arms_res:
        raise ValueError(f"{study_dir}/analysis.json has no 'grpo' arm (arms: {sorted(arms_res)}); gains are measured "
                         "against it")
    return analysis, arms_res, arms_map, probe, batches


def _warn_skipped_evals(study_dir: Path, curve: ReferenceCurve) -> None:
    """One :class:`SkippedEvalsWarning` per note of the study's own curve that names skipped lines of runs.csv."""
    for note in curve.skipped_notes:
        warnings.warn(f"{study_dir}: {note}; the study's own grpo curve, which every forecast of its rows reads, is "
                      "fitted without them. Fill those cells in (each run's metrics.jsonl holds its evals), or, where "
                      "the study's run folders are kept, rewrite runs.csv by running its plan.toml again with --out "
                      f"{shell_word(study_dir)} (finished runs are not redone)", SkippedEvalsWarning, stacklevel=3)


def _arms_fix(study_dir: Path) -> str:
    """How to write a study's missing or damaged ``probe/arms.json`` again: resume the study (which writes it before
    its probe, keeping finished runs and a finished probe); for a study without ``runs/`` (a shipped study keeps only
    its tables), where resuming would train every run again, restore it from a copy of the study."""
    if not keeps_runs(study_dir):
        return (f"restore it from a copy of the study ({study_dir} has no runs/: resuming the study to write it again "
                f"{RETRAIN_CLAUSE})")
    return (f"resume the study with `gradprobe study {shell_word(study_dir / PLAN_COPY)} --out "
            f"{shell_word(study_dir)}`, which writes it again (finished runs and a finished probe are kept)")


def _missing_probe_fix(study_dir: Path) -> str:
    """What to do about a study folder without ``probe/probe.json``, from what ``study.json`` records of its probe
    (the probe runs before the arms; ``--no-probe`` records none): resume the study, which keeps finished runs and
    runs only the probe; for a study without ``runs/`` (a shipped study keeps only its tables), where resuming would
    train every run again, restore ``probe/`` from a copy of the study (as :func:`_arms_fix`)."""
    try:
        record = json.loads((study_dir / "study.json").read_text()).get("probe")
    except (OSError, ValueError, AttributeError):
        record = None
    failed = isinstance(record, dict) and record.get("status") not in (None, "done")
    why = (f"the study's probe {record.get('status')} ({record.get('error')})" if failed else
           "the study has no probe (it ran with --no-probe, or stopped during the probe)")
    if not keeps_runs(study_dir):
        return (f"{why}: restore {study_dir / 'probe'} from a copy of the study that holds it ({study_dir} has no "
                f"runs/: resuming the study to run its probe {RETRAIN_CLAUSE})")
    resume = (f"`gradprobe study {shell_word(study_dir / PLAN_COPY)} --out {shell_word(study_dir)}` (it keeps finished "
              "runs and runs only the probe)")
    return f"{why}; run it again with {resume}" if failed else f"{why}: run it with {resume}"


def matched_token_budget(analysis: dict, study_dir, error: type[Exception] = ValueError) -> float:
    """The matched generated-token budget of a study's ``analysis.json`` (``matched.generated_tokens.budget``, or
    ``matched.tokens.budget`` in older analyses: :data:`MATCHED_BUDGET_KEYS`), in generated tokens.

    The budget must be a finite number > 0 by gradprobe's one JSON-number rule
    (:func:`gradprobe.outputs.is_json_number` with ``finite=True``: never a boolean (JSON ``true`` would read as 1),
    text (``"250000"``), NaN, +-inf or an integer too large for a float), as ``calib rows`` requires of the same field
    (:func:`calib.integrity.analysis_number`), so a study forecast directly is refused as calib refuses it.

    Parameters
    ----------
    analysis : dict
        ``analysis.json`` as read (:func:`read_study_json`).
    study_dir : path
        The study folder, named by the error.
    error : type
        The exception raised (``ValueError``; ``calib`` may pass its ``StudyFormatError``, as to
        :func:`read_study_json`).

    Raises
    ------
    error
        The field is missing, or holds no finite number > 0; one line naming ``STUDY/analysis.json``, the field
        (``matched.generated_tokens.budget``), its value as the file holds it and the fix (a re-analysis,
        :func:`rebuild_analysis`).
    """
    fix = rebuild_analysis(study_dir)
    matched = analysis.get("matched") if isinstance(analysis, dict) else None
    key = next((k for k in MATCHED_BUDGET_KEYS if isinstance(matched, dict) and isinstance(matched.get(k), dict)),
               None)
    if key is None or "budget" not in matched[key]:
        raise error(f"{study_dir}/{ANALYSIS_JSON}: matched.{MATCHED_BUDGET_KEYS[0]}.budget is missing; {fix}")
    value, source = matched[key]["budget"], matched[key].get("source")
    if is_json_number(value, finite=True) and float(value) > 0:
        return float(value)
    if value is None and matched[key].get("recorded") is False and isinstance(source, str) and source:
        # the analysis wrote null on purpose (the runs record no generated tokens): re-analysing writes it again
        raise error(f"{study_dir}/{ANALYSIS_JSON} field matched.{key}.budget is null: the study has no matched "
                    f"generated-token budget ({source}); forecasts are at a token budget: leave this study out, or "
                    "re-run it with [budget] generated_tokens")
    why = " (a boolean is never read as 1 or 0)" if isinstance(value, bool) else ""
    raise error(f"{study_dir}/{ANALYSIS_JSON} field matched.{key}.budget is "
                f"{json_number_text(value, json_short(value))}{why}, not a finite number > 0 of generated tokens; "
                + fix)


def _plan_arms(study_dir: Path) -> tuple[dict, str | None]:
    """The frozen plan's arms table and training loss type (``{}``, None without ``plan.toml``)."""
    if not (study_dir / PLAN_COPY).is_file():
        return {}, None
    plan_doc = tomllib.loads((study_dir / PLAN_COPY).read_text())
    return plan_doc.get("arms") or {}, (plan_doc.get("train") or {}).get("loss_type", "grpo")


def _arm_specs(study_dir: Path, arms_res: dict, arms_map: dict, plan_arms: dict, plan_loss) -> tuple[dict, dict]:
    """(arm -> {"reward": probe entry, "lr_scale"}, arm -> {"reward", "loss_type", "probe_entry"}) of every
    analysed arm, read from ``arms.json`` (its ``probe_entry``), else the analysis and the plan. A record with
    neither ``probe_entry`` nor ``reward`` is refused (:func:`~gradprobe.probe_keys.arm_entry`) with the study's fix
    (:func:`_arms_fix`: resume the study, or for a study without ``runs/`` restore the file from a copy)."""
    arms, labels = {}, {}
    for arm in arms_res:
        spec = arms_map.get(arm) or {}
        reward = spec.get("reward", arms_res[arm].get("reward"))
        entry = arm_entry(spec, source=probe_dir(study_dir) / ARMS_JSON, fix=_arms_fix(study_dir)) if spec else reward
        loss = spec.get("loss_type") or (plan_arms.get(arm) or {}).get("loss_type") or plan_loss
        arms[arm] = {"reward": entry, "lr_scale": float(spec.get("lr_scale", arms_res[arm].get("lr_scale", 1.0)))}
        labels[arm] = {"reward": reward, "loss_type": loss, "probe_entry": entry}
    return arms, labels


def _check_probed(study_dir: Path, probe, arms: dict, batches: list | None = None) -> list:
    """ValueError when an arm's loss-type entry (``REWARD@LOSS``) is missing from an older probe.json, with the
    study's fix (:func:`gradprobe.layout.study_probe_advice`: delete it and resume the study, or for a study without
    ``runs/`` restore it from a copy). Returns ``batches``, the probe's ``probe_batches_of`` as :func:`_read_study`
    read it, or read here when None."""
    batches = probe_batches_of(probe) if batches is None else batches
    probed = set(batches[0]["rewards"])
    missing = {arm: a["reward"] for arm, a in arms.items() if a["reward"] not in probed}
    if any("@" in key for key in missing.values()):
        raise ValueError(f"{study_dir}/probe/probe.json has no entry for arm(s) {missing} (probed: {sorted(probed)}): "
                         "it was written before the probe estimated the arms' loss types; "
                         + study_probe_advice(study_dir, probe_dir(study_dir) / PROBE_JSON))
    return batches


def _guided_entries(study_dir: Path, probe, arms: dict, labels: dict, arms_map: dict,
                    batches: list | None = None, left_out: dict | None = None) -> tuple[object, dict, list | None]:
    """``probe`` with each guided arm's guided entry merged in (:func:`merge_guided_entries`), the arm's
    ``reward`` in ``arms`` and ``probe_entry`` in ``labels`` switched to its key; and arm (with ``probe_dir``)
    -> ``{"key": merged key, "folder": its guided probe's folder}``, or ``{"why": why its guided probe was not
    read}`` (it is missing, or does not match the shared probe: :func:`merge_guided_entries`); and the returned
    probe's ``probe_batches_of``: ``batches`` (``probe``'s, as read before) while nothing was merged, else None (the
    merged probe is read by the forecast). Arms sharing a guided probe and reward read and merge it once and share
    the key; a guided probe is read and checked once (its batches passed on to the merge), as is ``probe``.

    An arm whose reward its guided probe left out (that ``probe.json``'s ``left_out``, or the record
    :data:`GUIDED_LEFT_OUT` of a guided probe whose every reward failed, which has no ``probe.json``) is taken out
    of ``arms`` and put in ``left_out`` (arm -> why it has no probe entry, :func:`_guided_left_out_why`; a dict of
    the caller's, or one of this call's own), with no status.

    Raises
    ------
    ValueError
        A guided probe that is there but damaged or edited (:func:`gradprobe.outputs.read_probe_json`,
        :func:`~gradprobe.forecast.probe_input.check_entry_inputs`,
        :func:`~gradprobe.forecast.probe_input.probe_batches_of`), or a damaged record (:func:`failed_guided_probe`):
        one line naming the file, the field and the fix.
    """
    status, done, read, left_out = {}, {}, {}, {} if left_out is None else left_out
    for arm, a in list(arms.items()):
        folder = (arms_map.get(arm) or {}).get("probe_dir")
        if not folder or arm == "grpo":  # grpo's is the shared entry every rho is measured against
            continue
        path = probe_dir(study_dir) / folder / PROBE_JSON
        if folder not in read:  # a damaged or edited guided probe is refused, as the study's own probe is
            if path.is_file():
                guided = read_probe_json(path, rerun_advice(path.parent))
                check_entry_inputs(guided, source=path)
                read[folder] = guided, probe_batches_of(guided, source=path)
            else:  # none: the record of a probe whose every reward failed, or nothing (not probed yet, an older study)
                read[folder] = failed_guided_probe(study_dir, folder), None
        if (why := _guided_left_out_why(read[folder][0], arm, study_dir, folder, path)) is not None:
            left_out[arm] = why
            del arms[arm]
            continue
        if (folder, a["reward"]) not in done:
            if read[folder][1] is None:
                done[folder, a["reward"]] = {"why": f"its guided probe {folder}/{PROBE_JSON} is missing"}
            else:
                guided, own = read[folder]
                try:  # one that does not match the shared probe: the unguided entry, the note says why
                    probe, key = merge_guided_entries(probe, guided, a["reward"], folder, source=path,
                                                      _probe_batches=batches, _guided_batches=own)
                    batches = None  # the merged probe's batches are not the shared probe's: read in the next merge
                    done[folder, a["reward"]] = {"key": key, "folder": folder}
                except ValueError as e:
                    done[folder, a["reward"]] = {"why": str(e)}
        status[arm] = dict(done[folder, a["reward"]])
        if "key" in status[arm]:
            a["reward"] = labels[arm]["probe_entry"] = status[arm]["key"]
    return probe, status, batches


def failed_guided_probe(study_dir: Path, folder: str) -> dict | None:
    """The record :data:`GUIDED_LEFT_OUT` of the guided probe ``folder`` (relative to ``probe/``) whose every
    reward failed on its batch (``{"left_out": [records]}``, :func:`gradprobe.study.worker.isolated_probe`'s records),
    marked ``every_reward_failed``; None when there is no such file.

    Raises
    ------
    ValueError
        A record that is not UTF-8 JSON holding a list ``left_out`` of objects: one line naming the file and the fix
        (delete it and resume the study, which probes that arm again; a study without ``runs/``: restore it).
    """
    path = probe_dir(study_dir) / folder / GUIDED_LEFT_OUT
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        doc, why = None, f"cannot be read ({type(e).__name__}: {e})"
    else:
        why = "is not an object with a list of objects left_out"
    records = doc.get("left_out") if isinstance(doc, dict) else None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        fix = (f"delete it and resume the study with `gradprobe study {shell_word(study_dir / PLAN_COPY)} --out "
               f"{shell_word(study_dir)}`, which runs that guided probe again (finished runs are kept)"
               if keeps_runs(study_dir) else f"restore it from a copy of the study ({study_dir} has no runs/: "
               f"resuming the study to probe again {RETRAIN_CLAUSE})")
        raise ValueError(f"{path} (the record of a guided probe whose every reward failed) {why}; {fix}")
    return {"left_out": [dict(r, every_reward_failed=True) for r in records]}


def _guided_left_out_why(guided, arm: str, study_dir: Path, folder: str, path: Path) -> str | None:
    """Why guided arm ``arm`` has no probe entry, when its guided probe ``guided`` (its ``probe.json`` at ``path``,
    or :func:`failed_guided_probe`'s record of ``folder``) left its reward out (a ``left_out`` record naming the
    arm), as :func:`_left_out_arms` says it of the shared probe; else None."""
    records = guided.get("left_out") if isinstance(guided, dict) else None
    for r in records if isinstance(records, list) else []:
        if isinstance(r, dict) and arm in (r.get("arms") or []):
            where = (f"{study_dir}/probe/{folder}, as every reward of that probe did, so it has no {PROBE_JSON} "
                     f"(recorded in {GUIDED_LEFT_OUT}: " if r.get("every_reward_failed")
                     else f"and was left out of {path} (")
            return (f"no probe entry: its reward {r.get('reward')!r} failed on the batch of its guided probe {where}"
                    f"{r.get('error')}); {r.get('fix')}")
    return None


def _with_entry(item: dict, key: str, entry: dict) -> dict:
    """A probe result (or batch) ``item`` with one more reward entry ``key`` (a copy; ``rewards`` list or dict)."""
    entry = {k: v for k, v in entry.items() if k != "name"} | {"name": key}
    rewards = item["rewards"]
    rewards = [*rewards, entry] if isinstance(rewards, list) else {**rewards, key: entry}
    return dict(item, rewards=rewards)


def merge_guided_entries(probe, guided, entry: str, folder: str, source=None, *, _probe_batches: list | None = None,
                         _guided_batches: list | None = None) -> tuple[object, str]:
    """The shared probe ``probe`` with the guided probe's ``entry`` added batch by batch (module docstring).

    Parameters
    ----------
    probe : dict or list of dict
        The study's probe result (``probe/probe.json``, or the ``probe=`` given to :func:`study_forecasts`).
    guided : dict or list of dict
        The guided arm's probe result (``probe/<folder>/probe.json``).
    entry : str
        The arm's entry key in both (``probe_entry`` of ``arms.json``).
    folder : str
        The guided probe's folder relative to ``probe/`` (``"guided/<arm>"``).
    source : path, optional
        The file ``guided`` was read from, named in a refusal of its entries (else ``probe.json``).
    _probe_batches, _guided_batches : list of dict, optional
        Internal, for :func:`study_forecasts`, which has read and checked both probes with their files named: the
        batches ``probe_batches_of(probe)`` and ``probe_batches_of(guided, source=source)``
        (:func:`~gradprobe.forecast.probe_input.probe_batches_of`) returned for these very ``probe`` and ``guided``,
        not read again. Not checked against them: another probe's batches would be merged instead. Default: read
        (and checked) here.

    Returns
    -------
    (merged, key)
        ``merged``: a copy of ``probe`` (same structure) whose batch k also has the entry ``key`` =
        ``ENTRY~FOLDER``, the guided probe's batch-k entry ``entry`` (a multi-batch ``probe.json``'s pooled
        ``rewards`` get the guided probe's pooled entry); ``key``: that key.

    Raises
    ------
    ValueError
        The guided probe has no ``entry``, another number of batches than ``probe``, or another number of
        groups (``per_group`` length) in a batch than ``probe``'s ``entry``, or entries that contradict their
        per-group lists or (pooled) their batches (:func:`~gradprobe.forecast.probe_input.probe_batches_of`,
        ``source`` named); the caller then reads the unguided entry and notes why.
    """
    key = f"{entry}{_GUIDED_KEY_SEPARATOR}{folder}"
    shared = probe_batches_of(probe) if _probe_batches is None else _probe_batches
    own = probe_batches_of(guided, source=source) if _guided_batches is None else _guided_batches
    if len(own) != len(shared):
        raise ValueError(f"its guided probe {folder} has {len(own)} batch(es), the probe {len(shared)}")
    for k, (b, g) in enumerate(zip(shared, own)):
        if entry not in g["rewards"]:
            raise ValueError(f"its guided probe {folder} has no entry {entry!r} (probed: {sorted(g['rewards'])})")
        n_own, n_shared = (len(x["rewards"][entry].get("per_group") or ()) for x in (g, b))
        if n_own != n_shared:
            raise ValueError(f"its guided probe {folder} has {n_own} groups in batch {k}, the probe {n_shared}")
    entries = [g["rewards"][entry] for g in own]
    if isinstance(probe, (list, tuple)):
        return [_with_entry(item, key, e) for item, e in zip(probe, entries)], key
    if isinstance(probe.get("batches"), list) and probe["batches"]:
        # the guided probe.json's own top-level entries (pooled over its batches), read as one batch
        merged = _with_entry(probe, key, pooled_entries(guided, source).get(entry, entries[0]))
        merged["batches"] = [_with_entry(item, key, e) for item, e in zip(probe["batches"], entries)]
        return merged, key
    return _with_entry(probe, key, entries[0]), key


def _arm_notes(r: pd.Series, plan_arm: dict, guided: dict | None = None) -> list[str]:
    """The forecast's note on the arm, plus what the probe cannot see of a selection or guided arm
    (``guided``: :func:`_guided_entries`'s record of an arm with ``probe_dir``, None for the others)."""
    notes = [r["note"]] if r["note"] else []
    if plan_arm.get("selection"):
        notes.append("prompt-selection arm: the probe sees only its reward, not the selection or its tokens")
    if guided and "key" in guided:
        notes.append(f"guided arm: its entry is its guided probe's (probe/{guided['folder']}: the guided rollouts and the "
                     "importance-weighted update), its rho vs grpo's entry in the shared probe")
    elif plan_arm.get("guidance") or guided:
        why = f" ({guided['why']})" if guided else ""
        notes.append("guided arm: the probe sees only its reward, not the guided rollouts or their importance "
                     f"weights{why}")
    return notes


def _forecast_columns(r: pd.Series, c_ref: float) -> dict:
    """The forecast table's numbers of one arm, under their :data:`STUDY_COLUMNS` names."""
    return {"lr_scale": float(r["lr_scale"]), "tokens_per_update": float(r["tokens_per_update"]),
            "rho": float(r["rho"]), "snr": float(r["snr"]), "token_multiplier": float(r["tokens_per_update"]) / c_ref,
            "forecast_probe": float(r["gain_probe"]), "forecast_cost_only": float(r["gain_cost_only"]),
            "forecast_signal_proxy": float(r["gain_signal_proxy"]),
            "forecast_first_order": float(r["first_order_gain"]),
            "forecast_probe_interval": tuple(r["gain_probe_interval"]), "method": r["method"]}
