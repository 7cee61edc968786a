"""How the forecasters did on one study when it was held out: its runs' errors beside its own noise floor.

Reads a `calib report` folder's ``cv_predictions.csv`` (rows with ``cv = study``: each study predicted with
every other study's calibration, never its own) for the study named by ``--study`` (a folder-name prefix),
on the runs every forecaster covers, and prints:

- per forecaster, the mean absolute error of the gain vs grpo at the token budget (points) as forecast and
  calibrated (``method = linear``: the calibration fitted on the other studies), with a 95% percentile
  interval from resampling each arm's seeds (5000 resamples, seed 0). That interval is the seed noise of
  this study's runs only: one study cannot say how a forecaster would fare on another.
- per arm, the mean forecast and mean realized gain (arm means, what a study reports);
- the study's seed-noise floor of the run-level MAE (:func:`calib.noise_floor.seed_noise_floor`) and its
  split into training randomness and held-out error (:func:`calib.noise_floor.heldout_floor`), read from
  the study folder under ``--studies-root``.

``--study`` may be repeated: each study's block is printed, then the studies pooled (every run once; the
interval resamples the seeds within each study's arms, so it is still seed noise only, not a spread over
studies; the error on arm means, each forecaster's and its paired difference from cost only, with the same
resampling; the floor and its split over the pooled runs, without an interval; the coverage of the report's
intervals, with the same resampling; the within-study Kendall tau of each forecaster, grpo at 0 ranked too, pooled
over the studies with its 95% study-cluster bootstrap interval (none under 5 ranked studies), one-sided permutation
p-value and ceiling, :func:`calib.metrics.pooled_rank_agreement`, what ``calib report`` computes over all of its
studies). Studies that replicate one
plan (``replicate_of.json``: ``gradprobe study --replicate``) are then pooled into one cell: per arm, the
realized mean over all their seeds with its t interval beside the replicates' mean forecasts, and the error
on those arm means, and the Kendall tau within the cells on them. The raw forecasts ("as
forecast") read each study's own grpo curve and no calibration, so they are the same in any report; the
calibrated ones are fitted on every other study of the report, which should hold the calibration's studies and
the held-out ones only.

The figures of the nine studies on 4,000 held-out prompts (``data/study_tiny_heldout4k``, its replicates
``data/study_tiny_replicate_heldout4k`` and ``data/study_tiny_replicate2_heldout4k``,
``data/study_tiny_hard_heldout4k``, its replicate ``data/study_tiny_hard_replicate_heldout4k``,
``data/study_tiny_llama_heldout4k``, its replicate ``data/study_tiny_llama_replicate_heldout4k``,
``data/study_tiny_losses_heldout4k``, its replicate ``data/study_tiny_losses_replicate_heldout4k``: each README,
and the pooled lines in ``data/calibration/README.md``)
come from::

    calib report data/study_tiny data/study_tiny_sparse data/study_tiny_hard_rewards data/study_tiny_lr \\
        data/study_reward_granularity data/study_tiny_llama data/study_tiny_losses data/study_tiny_greso \\
        data/study_tiny_guided data/study_tiny_heldout4k data/study_tiny_replicate_heldout4k \\
        data/study_tiny_replicate2_heldout4k data/study_tiny_hard_heldout4k data/study_tiny_hard_replicate_heldout4k \\
        data/study_tiny_llama_heldout4k data/study_tiny_llama_replicate_heldout4k data/study_tiny_losses_heldout4k \\
        data/study_tiny_losses_replicate_heldout4k --out runs/report_unseen
    python benchmarks/unseen_study.py runs/report_unseen --study study_tiny_heldout4k \\
        --study study_tiny_replicate_heldout4k --study study_tiny_replicate2_heldout4k \\
        --study study_tiny_hard_heldout4k --study study_tiny_hard_replicate_heldout4k \\
        --study study_tiny_llama_heldout4k --study study_tiny_llama_replicate_heldout4k \\
        --study study_tiny_losses_heldout4k --study study_tiny_losses_replicate_heldout4k
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from calib.bootstrap import detectable_difference
from calib.metrics import p_value_text, pooled_rank_agreement, ranking_table
from calib.report import CV_ROWS_KEY
from calib.noise_floor import heldout_floor, heldout_label, pool_heldout_floors, seed_noise_floor
from gradprobe.outputs import is_json_number, json_short
from gradprobe.study.folder import StudyError
from gradprobe.study.power import detectable_effect
from gradprobe.study.replicate import REPLICATE_SOURCE, read_replicate_record, study_plan_sha
from gradprobe.study.stats import paired_t

FORECASTERS = ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy"]
RESAMPLES, SEED = 5000, 0


def seed_resampled_mean(values: pd.Series, arms: pd.Series, *, resamples: int = RESAMPLES, seed: int = SEED):
    """Mean of ``values`` (one per run: absolute errors, or 1/0 for a realized gain inside/outside its interval) and
    its 95% percentile interval, resampling each arm's runs with replacement."""
    rng = np.random.default_rng(seed)
    groups = [values[arms == a].to_numpy(np.float64) for a in sorted(set(arms))]
    n = sum(g.size for g in groups)
    boot = np.zeros(resamples)
    for g in groups:
        boot += g[rng.integers(0, g.size, (resamples, g.size))].sum(axis=1)
    boot /= n
    return float(values.mean()), (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))


def arm_mean_maes(rows: pd.DataFrame, forecasters: list, *, resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """Per forecaster, the MAE on arm means (each arm once: |forecast - mean realized gain over its seeds|, averaged
    over arms) and its 95% percentile interval, resampling each arm's seeds with replacement; the same resamples
    for every forecaster, so differences between them are paired.

    ``rows``: one row per (forecaster, run) with ``group`` (the arm, or study/arm), ``seed``, ``cv_pred`` (the same
    for every seed of an arm) and ``target``. Returns {forecaster: (mae, (lo, hi), boot)} with ``boot`` the
    resampled MAEs (for paired differences)."""
    rng = np.random.default_rng(seed)
    groups = sorted(set(rows["group"]))
    base = rows[rows["forecaster"] == forecasters[0]]
    realized, draws = {}, {}
    for g in groups:
        t = base.loc[base["group"] == g].sort_values("seed")["target"].to_numpy(np.float64)
        realized[g] = t
        draws[g] = t[rng.integers(0, t.size, (resamples, t.size))].mean(axis=1)
    out = {}
    for f in forecasters:
        x = rows[rows["forecaster"] == f]
        pred = {g: float(x.loc[x["group"] == g, "cv_pred"].mean()) for g in groups}
        mae = float(np.mean([abs(pred[g] - realized[g].mean()) for g in groups]))
        boot = np.mean([np.abs(pred[g] - draws[g]) for g in groups], axis=0)
        out[f] = (mae, (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))), boot)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="a `calib report` folder (holds cv_predictions.csv) made with the study among its studies")
    p.add_argument("--study", required=True, action="append",
                   help="the held-out study's folder name (or a prefix of it that names one study); repeat it to pool "
                        "several studies")
    p.add_argument("--studies-root", default="data", help="the folder holding the study folders (default: data)")
    args = p.parse_args(argv)
    d_all, why, note = _read_report(Path(args.report))
    if why:
        print(f"unseen_study: error: {why}", file=sys.stderr)
        return 2
    root = Path(args.studies_root)
    names = []
    for prefix in args.study:
        studies = sorted(set(d_all.loc[d_all["study"].str.startswith(prefix), "study"]))
        exact = [s for s in studies if s.rsplit("@", 1)[0] == prefix]  # the folder's whole name wins over a prefix
        studies = exact if len(exact) == 1 else studies
        if len(studies) != 1:
            held = sorted(set(d_all["study"]))
            absent = "" if studies or not (root / prefix / "runs.csv").is_file() else (
                f"; {root / prefix} is a study the report was not made with: make a report with it among its "
                f"studies (`calib report data/study_... {root / prefix} --out runs/report_unseen`, as "
                "data/calibration/README.md does for the shipped unseen studies) and pass that folder")
            print(f"unseen_study: error: --study {prefix!r} names {len(studies)} studies of the report "
                  f"({', '.join(studies) or 'none'}); give a prefix that names one of {', '.join(held)}{absent}",
                  file=sys.stderr)
            return 2
        if studies[0] in names:
            print(f"unseen_study: error: --study {prefix!r} names {studies[0]} again; name each study once",
                  file=sys.stderr)
            return 2
        folder = root / studies[0].rsplit("@", 1)[0]
        if not (folder / "runs.csv").is_file():
            print(f"unseen_study: error: {folder} is no study folder (no runs.csv); pass --studies-root, the folder "
                  f"that holds the report's study folders (default: data)", file=sys.stderr)
            return 2
        names.append(studies[0])
    shown = [f for f in FORECASTERS if f in set(d_all["forecaster"])]
    if not shown:
        print(f"unseen_study: error: the report forecasts with none of {', '.join(FORECASTERS)}; make it with "
              "`calib report` (it writes every forecaster)", file=sys.stderr)
        return 2
    try:  # read before anything is printed: a damaged replicate_of.json is refused in one line
        cells = {n: cell_of(root / n.rsplit("@", 1)[0]) for n in names}
    except ValueError as e:
        print(f"unseen_study: error: {e}", file=sys.stderr)
        return 2
    if note:  # after every refusal, before the figures: the figures are printed over the CSV as it is
        print(f"unseen_study: note: {note}", file=sys.stderr)
    blocks = [_one_study(d_all[d_all["study"] == name], name, shown, root) for name in names]
    if len(blocks) > 1:
        _pooled(pd.concat([d for d, _ in blocks]), names, shown, [h for _, h in blocks], cells,
                _interval_level(Path(args.report)))
    return 0


REPORT_COLUMNS = ("cv", "study", "arm", "seed", "forecaster", "method", "cv_pred", "target")


def _read_report(report: Path) -> tuple[pd.DataFrame | None, str | None, str | None]:
    """The leave-one-study-out rows (``cv = study``) of ``report/cv_predictions.csv``, or None and why not, and a note
    (or None) when its row count cannot be checked against ``metrics.json`` (:func:`_row_count`)."""
    make = "make one with `calib report STUDY_DIR... --out FOLDER` and pass FOLDER"
    if report.is_file():
        return None, f"{report} is a file: REPORT is the `calib report` folder that holds cv_predictions.csv", None
    path = report / "cv_predictions.csv"
    if not path.is_file():
        return None, f"{path} not found: REPORT must be a `calib report` folder; {make}", None
    try:
        d = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        return None, f"{path} cannot be read as a CSV ({str(e).splitlines()[0]}); {make}", None
    missing = [c for c in REPORT_COLUMNS if c not in d.columns]
    if missing:
        return None, f"{path} lacks column(s) {missing}: it is not a `calib report` cv_predictions.csv; {make}", None
    bad = _bad_cell(pd.read_csv(path, dtype=str, keep_default_na=False))  # each cell as the file spells it
    if bad:
        return None, f"{path} {bad}: the file is damaged; {make}", None
    lost, note = _row_count(report, len(d))
    if lost:
        return None, lost, None
    d = d[d["cv"] == "study"]
    if d.empty:
        return None, (f"{path} has no leave-one-study-out rows (cv = study): the report needs at least two studies; "
                      f"{make}"), None
    return d, None, note


def _row_count(report: Path, rows: int) -> tuple[str | None, str | None]:
    """(refusal, note) of ``rows``, the data rows read from ``report/cv_predictions.csv``, against the count
    ``calib report`` records in ``report/metrics.json`` (:data:`CV_ROWS_KEY`): a refusal naming both counts and the fix
    when they differ (lines deleted from, or added to, the CSV: the figures would be over other runs), a note when no
    count can be read (a report made before it was recorded, or a metrics.json missing or damaged), else (None, None).
    """
    path, metrics = report / "cv_predictions.csv", report / "metrics.json"
    again = "make the report again with `calib report STUDY_DIR... --out FOLDER` and pass FOLDER"
    try:
        recorded = json.loads(metrics.read_text())
    except (OSError, ValueError) as e:
        return None, (f"the row count of {path} cannot be checked ({metrics} cannot be read: {type(e).__name__}); "
                      f"the figures are over its {rows} rows as they are; {again} to check it")
    n = recorded.get(CV_ROWS_KEY) if isinstance(recorded, dict) else None
    if n is None:
        return None, (f"the row count of {path} cannot be checked ({metrics} records no {CV_ROWS_KEY}: a report made "
                      f"before it was recorded); the figures are over its {rows} rows as they are; {again} to check it")
    if not (is_json_number(n, finite=True, integer=True) and n >= 0):
        return None, (f"the row count of {path} cannot be checked ({metrics} records {CV_ROWS_KEY} {json_short(n)}, "
                      f"not a row count); the figures are over its {rows} rows as they are; {again} to check it")
    if rows != int(n):
        return (f"{path} has {rows} rows but {metrics} records {CV_ROWS_KEY} {int(n)}: lines were "
                f"{'deleted from' if rows < n else 'added to'} the file after `calib report` wrote it, so the figures "
                f"would be over other runs; {again}"), None
    return None, None


def _bad_cell(text: pd.DataFrame) -> str | None:
    """The first cell of a cv_predictions.csv that ``calib report`` never writes, said as "line L column C is V, not
    ...", or None. ``text``: the file read as text (every cell as spelled, an empty cell ""), so a cut line is named
    at its own line, not where pandas turned a column to floats: ``seed`` an integer, ``cv_pred`` and ``target``
    finite numbers, ``cv_lower`` and ``cv_upper`` (where present) numbers or empty (true/false, text and NaN where a
    finite number is wanted are no numbers)."""
    want = {"seed": "an integer", "cv_pred": "a finite number", "target": "a finite number",
            "cv_lower": "a number or empty", "cv_upper": "a number or empty"}
    for c, what in want.items():
        if c not in text.columns:
            continue
        cell = text[c].str.strip()
        num = pd.to_numeric(cell.where(~cell.str.lower().isin(["true", "false"])), errors="coerce")
        if c == "seed":
            ok = cell.str.fullmatch(r"[+-]?\d+")
        elif c in ("cv_pred", "target"):
            ok = np.isfinite(num)
        else:
            ok = (cell == "") | num.notna() & ~np.isinf(num)
        if not ok.all():
            i = int(np.flatnonzero(~ok.to_numpy())[0])
            value = cell.iloc[i]
            return f"line {i + 2} column {c} is {json_short(value) if value else 'empty'}, not {what}"
    return None


def _covered(d: pd.DataFrame, shown: list) -> pd.DataFrame:
    """The rows of ``d`` (one study's cv rows) on the runs that every forecaster in ``shown`` forecast."""
    raw = d[(d["method"] == "none") & d["forecaster"].isin(shown)]
    per_run = raw.groupby(["arm", "seed"])["forecaster"].nunique()
    covered = set(per_run[per_run == len(shown)].index)
    return d[[(a, s) in covered for a, s in zip(d["arm"], d["seed"])]]


def _mae_lines(d: pd.DataFrame, shown: list, groups: pd.Series | None = None) -> None:
    """One line per forecaster: MAE as forecast and calibrated, each with its interval over seeds within ``groups``
    (default: the arms)."""
    for f in shown:
        line = f"  {f:<24}"
        for method, label in (("none", "as forecast"), ("linear", "calibrated on the other studies")):
            x = d[(d["forecaster"] == f) & (d["method"] == method)]
            if len(x):
                key = x["arm"] if groups is None else groups.loc[x.index]
                m, (lo, hi) = seed_resampled_mean((x["cv_pred"] - x["target"]).abs(), key)
                line += f"   {label} {m:.2f} [{lo:.2f}, {hi:.2f}]"
        print(line)


def _split_line(h: dict, n_studies: int = 1) -> None:
    """The two-way split of :func:`calib.noise_floor.heldout_floor`'s result ``h`` over ``n_studies`` studies; "on K
    of M studies" when some could not be split (each named on a ``not split:`` line)."""
    if h["arms"]:
        items = ", ".join(map(str, sorted({a["items"] for a in h["arms"]})))
        split = len({a["study"] for a in h["arms"]})
        part = f" (on {split} of {n_studies} studies)" if split < n_studies else ""
        print("two-way split" + part + " on N = " + items + " held-out items: " + "   ".join(
            f"{heldout_label(f['multiple'])} {f['estimate']:.2f}" for f in h["floors"])
              + f"   (held-out share of the seeds' variance {h['heldout_share']:.2f})")
    for why in h["skipped"]:
        print(f"not split: {why}")


def _one_study(d: pd.DataFrame, name: str, shown: list, root: Path) -> tuple[pd.DataFrame, dict]:
    """Print one held-out study's block; return its covered rows and its held-out split
    (:func:`calib.noise_floor.heldout_floor`, pooled over the studies without reading them again)."""
    d = _covered(d, shown)
    runs = d[(d["method"] == "none") & (d["forecaster"] == shown[0])]
    print(f"{name} held out: {len(runs)} runs of {d['arm'].nunique()} arms; MAE of the gain vs grpo "
          "(points) [95% interval over each arm's seeds: this study's seed noise only]")
    _mae_lines(d, shown)
    raw = d[(d["method"] == "none") & d["forecaster"].isin(shown)]
    means = raw.pivot_table(index="arm", columns="forecaster", values="cv_pred")
    means.insert(0, "realized", runs.groupby("arm")["target"].mean())
    means.insert(0, "seeds", runs.groupby("arm").size())
    print("per arm (mean over seeds, points):")
    print(means[["seeds", "realized", *shown]].round(2).to_string())
    fl = seed_noise_floor(runs["target"], runs["arm"], runs["study"])
    print(f"seed-noise floor of the run-level MAE: {fl['estimate']:.2f} (Gini mean difference, {fl['arms']} arms; one "
          "study: no interval)")
    h = heldout_floor([root / name.rsplit("@", 1)[0]], keep=set(zip(runs["study"], runs["arm"])))
    _split_line(h)
    return d, h


def _pooled(d: pd.DataFrame, names: list, shown: list, splits: list, cells: dict, level: str) -> None:
    """The named studies together: every run once, intervals over the seeds within each (study, arm); ``splits``:
    each study's held-out split (:func:`_one_study`), pooled (:func:`calib.noise_floor.pool_heldout_floors`);
    then the coverage of the report's intervals (``level`` names them) and the within-study ranking."""
    runs = d[(d["method"] == "none") & (d["forecaster"] == shown[0])]
    print(f"pooled, {len(names)} held-out studies: {len(runs)} runs of {runs.groupby(['study', 'arm']).ngroups} "
          "arms; MAE of the gain vs grpo (points) [95% interval over each arm's seeds within its study: these "
          "studies' seed noise only, not how another study would fare]")
    _mae_lines(d, shown, groups=d["study"] + "/" + d["arm"])
    raw = d[(d["method"] == "none") & d["forecaster"].isin(shown)].assign(group=lambda x: x["study"] + "/" + x["arm"])
    _arm_mean_lines(raw, shown, "on arm means (each arm once, as forecast; 95% interval over each arm's seeds, "
                    f"the same resamples for every forecaster; {DETECTABLE}):")
    _coverage_lines(d, shown, level)
    _ranking_lines(d.assign(key=d["study"]), shown, f"within-study ranking ({len(names)} studies)")
    fl = seed_noise_floor(runs["target"], runs["arm"], runs["study"])
    print(f"seed-noise floor of the run-level MAE: {fl['estimate']:.2f} (Gini mean difference, {fl['arms']} arms of "
          f"{len(names)} studies; given without an interval)")
    _split_line(pool_heldout_floors(splits), len(names))
    _replicated_cells(d, shown, cells)


def cell_of(folder: Path) -> str:
    """The study a folder replicates (``replicate_of.json``'s ``source_name``, or in files written before it the
    last part of its ``source``, an absolute path then, a path relative to the folder now: the same cell either
    way; read by :func:`gradprobe.study.replicate.read_replicate_record`, the reader ``replicate_source`` uses),
    or its own name without that file. Only the name is needed: a source study that is nowhere is no error.
    Raises ValueError in one line naming the file when it is damaged (not JSON, no ``source`` path, a
    ``source_name`` that is no folder's name or not the last part of ``source``: the reader's message), or the
    study of that name beside the folder (the one the report pools it with) has another plan sha256 than the
    file records."""
    path = Path(folder) / REPLICATE_SOURCE
    try:
        record = read_replicate_record(folder)
    except StudyError as e:  # a RuntimeError: main() refuses a ValueError in one line
        raise ValueError(str(e)) from None
    if record is None:
        return Path(folder).name
    name = record["source_name"]
    sha, original = study_plan_sha(Path(folder).parent / name)  # the source beside it, as data/ ships them
    want = record.get("source_plan_sha256")
    if sha and want and want != sha:  # replicate_source's rule; an unreadable sha is let by: only the name is needed
        fix = "restore it from the study (`gradprobe study --replicate` writes it) or remove it"
        raise ValueError(f"{path} records source_plan_sha256 {want[:12]}, but {original} has plan sha256 {sha[:12]}: "
                         f"the folder does not replicate that study's plan, so it cannot be pooled with it; {fix}")
    return name


def _replicated_cells(d: pd.DataFrame, shown: list, cells: dict) -> None:
    """The studies that replicate one plan (``replicate_of.json``), pooled into one cell: per arm, the mean
    realized gain over every seed with its 95% Student-t interval (:func:`gradprobe.study.stats.paired_t`) and the
    smallest effect those seeds detect (:func:`gradprobe.study.power.detectable_effect`: 80% power, two-sided
    paired t at alpha 0.05), and each forecaster's mean forecast (the
    mean of the replicates' forecasts, each from its own probe and grpo curve); then the MAE on these arm
    means, with the interval and paired differences of :func:`arm_mean_maes`. Nothing is printed without a
    cell of two or more studies. ``cells``: study name (as the report names it) -> :func:`cell_of` its folder."""
    multi = sorted(c for c in set(cells.values()) if list(cells.values()).count(c) > 1)
    for name, c in sorted(cells.items()):  # a replicate whose source is not among the studies: said, not pooled
        if c not in multi and c != name.rsplit("@", 1)[0]:
            print(f"not pooled: {name} replicates {c}, which is not among the studies passed (--study {c} pools them)")
    if not multi:
        return
    raw = d[(d["method"] == "none") & d["forecaster"].isin(shown)]
    raw = raw.assign(cell=raw["study"].map(cells))
    raw = raw[raw["cell"].isin(multi)].assign(group=lambda x: x["cell"] + "/" + x["arm"])
    for c in multi:
        held = sorted(n for n, v in cells.items() if v == c)
        x = raw[raw["cell"] == c]
        runs = x[x["forecaster"] == shown[0]]
        print(f"replicates pooled: {c}, {len(held)} studies ({', '.join(held)}); per arm, the mean over every seed "
              "(points; realized with its 95% t interval over the seeds and the smallest effect they detect; "
              "forecasts: the replicates' mean):")
        for arm, r in runs.groupby("arm"):
            pt = paired_t(r["target"].to_numpy(np.float64))
            ci = "[n/a]" if pt["ci"] is None else f"[{pt['ci'][0]:+.2f}, {pt['ci'][1]:+.2f}]"
            mde = detectable_effect(pt["sd"], seeds=pt["seeds"])
            fc = "   ".join(f"{f} {x.loc[(x['arm'] == arm) & (x['forecaster'] == f), 'cv_pred'].mean():+.2f}"
                           for f in shown)
            print(f"  {arm:<12} {pt['seeds']} seeds   realized {pt['estimate']:+.2f} {ci}   detectable "
                  f"{'n/a' if mde is None else f'{mde:.2f}'}   {fc}")
    _arm_mean_lines(raw, shown, f"on these cells' arm means ({raw['group'].nunique()} arms, as forecast; 95% interval "
                    "over each arm's seeds, the same resamples for every forecaster; "
                    f"{DETECTABLE}):")
    x = d.assign(cell=d["study"].map(cells))
    _ranking_lines(x[x["cell"].isin(multi)].assign(key=lambda y: y["cell"]), shown,
                   f"ranking within these cells ({len(multi)} cell{'s' * (len(multi) > 1)}, each arm's mean over "
                   "every seed of its cell)")


DETECTABLE = "detectable: the smallest difference from the first these arms could detect, 80% power, two-sided 5%"


def _arm_mean_lines(raw: pd.DataFrame, shown: list, header: str) -> None:
    """``header``, then per forecaster its :func:`arm_mean_maes` line, with the paired difference from the first and
    the smallest difference the arms could detect (:func:`detectable_difference`)."""
    arm = arm_mean_maes(raw, shown)
    print(header)
    for f in shown:
        m, (lo, hi), boot = arm[f]
        line = f"  {f:<24}   {m:.2f} [{lo:.2f}, {hi:.2f}]"
        if f != shown[0]:
            diff = boot - arm[shown[0]][2]
            line += (f"   minus {shown[0]} {m - arm[shown[0]][0]:+.2f} "
                     f"[{np.percentile(diff, 2.5):+.2f}, {np.percentile(diff, 97.5):+.2f}]"
                     f"   detectable {detectable_difference(diff):.2f}")
        print(line)


def _interval_level(report: Path) -> str:
    """How the report's intervals (``cv_lower``, ``cv_upper``) are named: "the report's 90% (cv_plus)" from its
    ``metrics.json`` (``confidence_level``, a number in (0, 1) by the one JSON-number rule, and ``interval``, text),
    or "the report's (metrics.json unreadable: ...)" saying why, when the file is missing, damaged or records no
    usable level: the coverage is still counted, on whatever intervals the CSV holds."""
    path = report / "metrics.json"
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"the report's (level unknown: {path} cannot be read, {type(e).__name__})"
    level = m.get("confidence_level") if isinstance(m, dict) else None
    kind = m.get("interval") if isinstance(m, dict) else None
    if not (is_json_number(level, finite=True) and 0 < level < 1):
        return (f"the report's (level unknown: {path} records confidence_level {json_short(level)}, not a number "
                "in (0, 1))")
    return f"the report's {float(level):.0%}" + (f" ({kind})" if isinstance(kind, str) and kind else "")


def _coverage_lines(d: pd.DataFrame, shown: list, level: str) -> None:
    """Per forecaster, as forecast and calibrated: the share of runs whose realized gain lies in the report's interval
    (``cv_lower`` <= target <= ``cv_upper``, closed, as :func:`calib.metrics.coverage` counts it), with its 95%
    interval over each arm's seeds within its study (:func:`seed_resampled_mean`) and the count."""
    if not {"cv_lower", "cv_upper"} <= set(d.columns):
        print("coverage: not measured (the report's cv_predictions.csv has no cv_lower/cv_upper columns: make the "
              "report again with this version of `calib report`)")
        return
    print(f"coverage of {level} intervals (share of runs whose realized gain lies inside; 95% interval over each "
          "arm's seeds within its study: these studies' seed noise only, not how another study would fare; the "
          "intervals are fitted on the report's other studies, a replicate's own cell included):")
    for f in shown:
        line = f"  {f:<24}"
        for method, label in (("none", "as forecast"), ("linear", "calibrated on the other studies")):
            x = d[(d["forecaster"] == f) & (d["method"] == method)].dropna(subset=["cv_lower", "cv_upper"])
            if len(x):
                inside = ((x["cv_lower"] <= x["target"]) & (x["target"] <= x["cv_upper"])).astype(float)
                m, (lo, hi) = seed_resampled_mean(inside, x["study"] + "/" + x["arm"])
                line += f"   {label} {m:.2f} [{lo:.2f}, {hi:.2f}] ({int(inside.sum())} of {len(x)})"
        print(line)


def ranking_table_of(d: pd.DataFrame, shown: list) -> pd.DataFrame:
    """The ranking table of ``calib report`` (:func:`calib.metrics.ranking_table`, so rows in its order and
    :func:`calib.metrics.pooled_rank_agreement`'s Monte Carlo p-values as the report's), from cv rows: per
    (``key``, arm), each forecaster's mean forecast as forecast (column ``f``), the realized mean gain vs grpo, its
    standard error over seeds and the seeds; plus grpo at 0 in every ``key`` (forecast and realized: the gain of grpo
    over itself, one row per seed of the key, as the report's grpo rows are). ``d``: rows with ``key`` (a study, or a
    cell of replicates: the "study" of the ranking), study, arm, seed, forecaster, method, cv_pred, target.

    Only the forecasts as made are ranked, not calibrated ones: a held-out study's calibration is one line for every
    arm of it, so it orders them as the forecast does, and only moves them against grpo's fixed 0 by its intercept
    (which is how ``calib report``'s calibrated ranking credits studies whose forecasts are all equal)."""
    raw = d[d["forecaster"].isin(shown) & (d["method"] == "none")]
    run = ["key", "study", "arm", "seed"]
    runs = raw[raw["forecaster"] == shown[0]][run + ["target"]]
    wide = runs.merge(raw.pivot_table(index=run, columns="forecaster", values="cv_pred").reset_index(), on=run)
    seeds = runs[["key", "seed"]].drop_duplicates()
    grpo = seeds.assign(arm="grpo", study=seeds["key"], target=0.0, **{f: 0.0 for f in shown})
    rows = pd.concat([wide, grpo], ignore_index=True).drop(columns="study").rename(columns={"key": "study"})
    return ranking_table(rows, shown)


def _ranking_lines(d: pd.DataFrame, shown: list, header: str) -> None:
    """``header``, then per forecaster the Kendall tau between its forecasts (as made) and the realized arm means
    within each ``key`` (grpo at 0 ranked with them), pooled with a one-sided permutation p-value within each ``key``
    and beside the ceiling and the critical value ("significant from": the smallest pooled tau the test calls
    significant at one-sided 5% on those arms) on the same arms (:func:`calib.metrics.pooled_rank_agreement`, as
    ``calib report`` computes them on :func:`ranking_table_of`). A ``key`` whose forecasts are all equal (every
    forecaster on a change of loss: every arm at 0) cannot be ranked and is left out. Kendall's tau-b counts a tie
    in the forecasts as neither agreement nor disagreement: a forecaster that ties two arms of a study (cost only,
    for rewards of equal tokens per update) is scored on its other pairs only, so its tau is not comparable with
    one that orders them. After the tau, its 95% percentile interval from resampling the ranked keys with replacement
    (5000 resamples, seed 0; :func:`calib.bootstrap.pooled_interval`), or ``[no interval]`` under 5 ranked keys, the
    reason printed once below the lines."""
    table = ranking_table_of(d, shown)
    print(header + "; Kendall tau-b pooled over them [95% percentile interval, 5000 resamples of the ranked ones with "
          "replacement] (one-sided permutation p within each; grpo at 0 ranked too; forecasts as made):")
    reasons = []
    for f in shown:
        r = pooled_rank_agreement(table, f)
        ties = int(sum(len(t) - t[f].nunique() for _, t in table.groupby("study") if t[f].nunique() > 1))
        tau, ceiling, critical = (_signed(r[k]) for k in ("kendall_tau", "oracle_kendall_tau", "critical_kendall_tau"))
        iv = r["kendall_tau_interval"]
        iv = "[no interval]" if iv is None else f"[{_signed(iv[0])}, {_signed(iv[1])}]"
        reasons += [r["kendall_tau_interval_reason"]] if r["kendall_tau_interval_reason"] not in reasons else []
        print(f"  {f:<24}   {tau} {iv} (p {p_value_text(r)}; {r['n_arms']} arms in {r['n_studies']}; ceiling "
              f"{ceiling}; significant from {critical}; {ties} tied arm(s) in the studies it ranks)")
    for reason in filter(None, reasons):
        print(f"no tau interval: {reason}")


def _signed(x) -> str:
    """A tau as ``calib report`` prints it: ``+0.52``, or ``n/a`` when undefined (NaN; was ``+nan``)."""
    return "n/a" if x is None or x != x else f"{x:+.2f}"


if __name__ == "__main__":
    sys.exit(main())
