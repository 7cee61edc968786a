"""Lines deleted whole from a study's ``runs.csv`` or a report's ``cv_predictions.csv`` are told, not read as fewer
runs or evals: ``load_runs`` warns naming the file, the runs, the missing updates and the fix (the analysis reads on,
as for a cut line; a run's lost final eval is refused instead: tests/test_lost_final_eval.py), ``calib report``
refuses such a study, ``calib report`` records the row count of
``cv_predictions.csv`` in ``metrics.json`` and ``benchmarks/unseen_study.py`` refuses a CSV of another count."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calib.dataset import StudyFormatError
from calib.report import read_runs, write_report
from calib_helpers import default_arms, synthetic_forecasts, write_study
from gradprobe.cli import main
from gradprobe.study.reading import AnalysisError, load_runs, lost_eval_lines, restore_runs_csv_fix
from study_helpers import make_study

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for p in (REPO / "data").glob("study_*") if (p / "runs.csv").is_file())
REPORT = REPO / "data" / "calibration" / "report"


def rc_of_calib_rows(study: Path, tmp_path: Path) -> int:
    """``calib rows STUDY --out ...``'s exit status."""
    from calib.cli import main as calib_main

    return calib_main(["rows", str(study), "--out", str(tmp_path / "rows.csv")])


def _lost_warning(study) -> str:
    """The one 'lost eval lines' warning of ``load_runs(study)`` (any other warning fails the test)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_runs(study)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "lost eval lines" in msgs[0], msgs
    return msgs[0]


def _copy(name: str, dest: Path, items: bool = True) -> Path:
    """A copy of the shipped study ``data/NAME`` (without figures; without per-item results unless ``items``)."""
    skip = ("figures",) if items else ("figures", "eval_items.jsonl.gz")
    shutil.copytree(REPO / "data" / name, dest, ignore=shutil.ignore_patterns(*skip))
    return dest


def _drop(study: Path, keep) -> list[str]:
    """Rewrite study/runs.csv keeping the header and the data lines ``keep(index, fields)`` accepts; returns the
    original lines."""
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    kept = [lines[0]] + [x for i, x in enumerate(lines[1:]) if keep(i, x.split(","))]
    path.write_text("\n".join(kept) + "\n")
    return lines


def test_every_shipped_study_reads_without_a_lost_line():
    assert len(SHIPPED) >= 20
    for study in SHIPPED:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no lost-line (or any other) warning on a shipped study
            df = load_runs(study)
        assert lost_eval_lines(df, study) is None, study
        assert len(df) == len(pd.read_csv(study / "runs.csv")), study
    assert len(read_runs(SHIPPED)) == sum(len(pd.read_csv(s / "runs.csv")) for s in SHIPPED)  # calib reads them all


def test_every_other_line_deleted_names_each_run_its_missing_updates_and_the_fix(tmp_path):
    """lost_eval_lines (as calib reads runs.csv) names every lost update; the analysis refuses the file, whose runs
    lost their final evals too (a lost final eval is refused, not warned: tests/test_lost_final_eval.py)."""
    study = _copy("study_tiny", tmp_path / "s")
    _drop(study, lambda i, f: i % 2 == 0)  # data lines 1, 3, 5, ... kept
    msg = lost_eval_lines(pd.read_csv(study / "runs.csv"), study)
    assert msg == (f"{study / 'runs.csv'} lost eval lines: arm grpo, seed 0 lacks update(s) 2, 10, 20 (plan), "
                   "42 (eval_items.jsonl.gz); arm grpo, seed 1 lacks update(s) 0, 5 (plan), 15, 29 "
                   "(eval_items.jsonl.gz), 56 (study.json); arm grpo, seed 2 lacks update(s) 2, 10, 20 (plan), "
                   "42 (eval_items.jsonl.gz) and 17 more run(s) (plan: every run evaluates at update 0, at the "
                   "plan's [eval] at_updates and, under a [budget] updates, at its at_fractions, up to its last "
                   "eval; eval_items.jsonl.gz: the per-item results, written at every eval, record an eval of the run "
                   "there; study.json: a finished run's final eval is at the update study.json records): lines were "
                   "deleted from runs.csv"), msg
    with pytest.raises(AnalysisError) as info:
        load_runs(study)
    refused = str(info.value)
    assert refused.startswith(f"{study / 'runs.csv'} lost the final eval line(s) of run(s): arm grpo, seed 1 ends at "
                              "update 42 but lacks update(s) 56 (study.json) after it; arm grpo, seed 3 ends at "
                              "update 43 but lacks update(s) 57 (study.json) after it; arm grpo_2xlr, seed 1 ends at "
                              "update 42 but lacks update(s) 56 (study.json) after it and 13 more run(s) (study.json: "
                              "a finished run's final eval is at the update study.json records): lines were deleted "
                              "from runs.csv"), refused
    assert refused.endswith(restore_runs_csv_fix(study)) and "\n" not in refused


def test_one_middle_line_at_a_budget_fraction_is_named_from_the_per_item_results(tmp_path):
    study = _copy("study_tiny", tmp_path / "s")
    lines = _drop(study, lambda i, f: not (f[0] == "grpo" and f[1] == "0" and f[2] == "29"))
    assert len((study / "runs.csv").read_text().splitlines()) == len(lines) - 1
    msg = _lost_warning(study)
    assert msg.startswith(f"{study / 'runs.csv'} lost eval lines: arm grpo, seed 0 lacks update(s) 29 "
                          "(eval_items.jsonl.gz) (eval_items.jsonl.gz: the per-item results, written at every eval, "
                          "record an eval of the run there): lines were deleted from runs.csv"), msg
    assert f"restore it from a copy: {study} has no runs/ folder to rebuild it from" in msg


def test_a_listed_update_and_a_final_eval_are_named_from_the_plan_and_study_json_alone(tmp_path):
    study = _copy("study_tiny_hard", tmp_path / "s", items=False)  # no per-item results: plan and study.json only
    runs = pd.read_csv(study / "runs.csv")
    g = runs[(runs["arm"] == runs["arm"].iloc[0]) & (runs["seed"] == 1)]
    arm, last = g["arm"].iloc[0], int(g["update"].max())
    left = int(g.loc[g["update"] < last, "update"].max())
    _drop(study, lambda i, f: not (f[0] == arm and f[1] == "1" and f[2] in ("5", str(last))))
    msg = lost_eval_lines(pd.read_csv(study / "runs.csv"), study)  # as calib reads it
    assert msg.startswith(f"{study / 'runs.csv'} lost eval lines: arm {arm}, seed 1 lacks update(s) 5 (plan), {last} "
                          "(study.json) (plan: every run evaluates at update 0, at the plan's [eval] at_updates and, "
                          "under a [budget] updates, at its at_fractions, up to its last eval; study.json: a finished "
                          "run's final eval is at the update study.json "
                          "records): lines were deleted from runs.csv"), msg
    with pytest.raises(AnalysisError) as info:  # the analysis refuses the lost final eval
        load_runs(study)
    assert str(info.value).startswith(f"{study / 'runs.csv'} lost the final eval line(s) of run(s): arm {arm}, seed 1 "
                                      f"ends at update {left} but lacks update(s) {last} (study.json) after it "
                                      "(study.json: a finished run's final eval is at the update study.json records)"
                                      ), str(info.value)


def test_a_study_with_run_folders_says_to_rebuild_runs_csv_from_them(tmp_path):
    study = make_study(tmp_path / "s", seeds=2)
    _drop(study, lambda i, f: not (f[0] == "grpo" and f[1] == "1" and f[2] == "2"))
    msg = _lost_warning(study)
    assert msg.startswith(f"{study / 'runs.csv'} lost eval lines: arm grpo, seed 1 lacks update(s) 2 (plan) "), msg
    assert msg.endswith(f"rebuild it from the run folders: `gradprobe study '{study / 'plan.toml'}' --out '{study}'` "
                        f"rewrites runs.csv from {study / 'runs'}/ARM/seedS/metrics.jsonl without redoing the finished "
                        "runs (--analyze-only only reads runs.csv)")
    with warnings.catch_warnings():  # the analysis reads the runs with the evals left
        warnings.simplefilter("ignore")
        got = load_runs(study)
    assert sorted(got.loc[(got["arm"] == "grpo") & (got["seed"] == 1), "update"]) == [0, 5, 10]


def test_analyze_only_warns_once_and_analyses_the_runs_with_the_evals_left(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=2, items=False)
    _drop(study, lambda i, f: not (f[0] == "grpo" and f[1] == "1" and f[2] == "2"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["study", "--analyze-only", "--out", str(study)]) == 0
    lost = [str(w.message) for w in caught if "lost eval lines" in str(w.message)]
    assert len(lost) == 1 and lost[0].startswith(f"{study / 'runs.csv'} lost eval lines: arm grpo, seed 1 lacks "
                                                 "update(s) 2 (plan) "), lost
    assert json.loads((study / "analysis.json").read_text())["arms"]["grpo"]["seeds"] == 2


def test_a_cut_last_line_is_the_cuts_warning_not_a_lost_line(tmp_path):
    """The file cut inside its last line, the last run's final eval (update 57): that line's own cells are unknown,
    not where its run ends (its update is read), so the cut's warning alone is said. A file cut off after an earlier
    line, the lines after it gone, is refused instead (tests/test_lost_final_eval.py)."""
    study = _copy("study_tiny", tmp_path / "s")
    text = (study / "runs.csv").read_text()
    assert text.endswith("\ngrpo_2xlr,3,57,252769,155.07641884300756,0.736,0.632,outcome,2.0,2185420438640.0,35.51,"
                         "1.0,0.018720273539739492\n")
    (study / "runs.csv").write_text(text[:text.rindex(",35.51,")])  # cut after its flops, no final line break
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = load_runs(study)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "line 151 (10 of 13 fields) look(s) cut" in msgs[0], msgs
    assert "lost eval lines" not in msgs[0], msgs
    run = df[(df["arm"] == "grpo_2xlr") & (df["seed"] == 3)]
    assert run["update"].iloc[-1] == 57 and run["generated_tokens"].iloc[-1] == 252769  # its end is read


def test_a_cut_line_in_the_middle_leaves_a_lost_final_eval_told(tmp_path):
    """A cut line exempts no run's end (a cut LAST line neither: tests/test_lost_final_eval.py): a line cut in the
    middle does not hide that the last line was deleted whole (was: the cut warning alone); that lost final eval is
    refused."""
    study = _copy("study_tiny", tmp_path / "s")
    lines = (study / "runs.csv").read_text().splitlines()
    lines[10] = lines[10].rsplit(",", 1)[0]  # a field short: cut
    (study / "runs.csv").write_text("\n".join(lines[:-1]) + "\n")  # and the final eval of the last run deleted
    with warnings.catch_warnings(record=True) as caught, pytest.raises(AnalysisError) as info:
        warnings.simplefilter("always")
        load_runs(study)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "line 11 (12 of 13 fields) look(s) cut" in msgs[0], msgs
    arm, seed, update = lines[-1].split(",")[:3]
    assert f"lost the final eval line(s) of run(s): arm {arm}, seed {seed} ends at update " in str(info.value)
    assert f"lacks update(s) {update} (study.json) after it" in str(info.value)


@pytest.mark.parametrize("fraction,updates", [(0.55, 100), (0.28, 25), (0.07, 100), (0.14, 50), (0.5, 30)])
def test_a_budget_fraction_eval_is_expected_where_training_evaluates(fraction, updates, tmp_path):
    """Under a [budget] updates, an at_fractions eval is at the first update u with u >= f * limit, as training's
    crossed_eval_points decides it (0.55 * 100 = 55.00000000000001: update 56, not 55)."""
    from gradprobe.training.plan import load_plan
    from gradprobe.training.state import crossed_eval_points

    study = _copy("study_tiny", tmp_path / "s", items=False)
    text = (study / "plan.toml").read_text()
    plan = load_plan(study / "plan.toml")
    at = next(u for u in range(updates + 1) if crossed_eval_points(
        plan.eval.__class__(**{**plan.eval.__dict__, "at_fractions": (fraction,)}),
        plan.budget.__class__(**{**{k: None for k in plan.budget.given()}, "updates": updates}),
        {"updates": float(u)}))
    import re

    text = text.split("[[hypotheses]]")[0]  # their matched reads are at a token budget
    text = re.sub(r"(?m)^generated_tokens\s*=.*$", f"updates = {updates}", text)
    text = re.sub(r"(?m)^at_fractions\s*=.*$", f"at_fractions = [{fraction}]", text)
    text = re.sub(r"(?m)^at_updates\s*=.*$", "at_updates = []", text)
    (study / "plan.toml").write_text(text)
    # seed 99: no run of study.json (whose final updates are the shipped runs')
    df = pd.DataFrame({"arm": "grpo", "seed": 99, "update": [0, at, updates], "generated_tokens": [0, 10, 20]})
    assert lost_eval_lines(df, study) is None
    lost = lost_eval_lines(df[df["update"] != at], study)
    assert lost is not None and f"arm grpo, seed 99 lacks update(s) {at} (plan)" in lost


def test_calib_refuses_a_study_whose_runs_csv_lost_a_line(tmp_path):
    """Where the rows are built (calib rows, fit and report alike: calib.integrity.read_study_runs); a review found
    calib rows accepting what calib report refused."""
    from calib.dataset import build_rows

    study = _copy("study_tiny", tmp_path / "study_tiny")
    _drop(study, lambda i, f: not (f[0] == "mc_value" and f[1] == "2" and f[2] == "5"))
    with pytest.raises(StudyFormatError) as info:
        build_rows(study)
    msg = str(info.value)
    assert msg.startswith(f"{study / 'runs.csv'} lost eval lines: arm mc_value, seed 2 lacks update(s) 5 (plan)"), msg
    assert msg.endswith(f"which calibration would read as runs with fewer evals; {restore_runs_csv_fix(study)}")
    assert rc_of_calib_rows(study, tmp_path) == 2


# ----------------------------------------------------------------------------- cv_predictions.csv


def test_calib_report_records_the_row_count_of_cv_predictions(tmp_path):
    studies = [write_study(tmp_path / f"s{i}", arms=default_arms(n_extra=1, rng=np.random.default_rng(i)), seed=i)
               for i in range(2)]
    metrics = write_report(studies, tmp_path / "out", forecast_fn=synthetic_forecasts, cv="study",
                           n_permutations=99, bootstrap_resamples=200)
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    rows = len(pd.read_csv(tmp_path / "out" / "cv_predictions.csv"))
    assert rows > 0 and saved["cv_predictions_rows"] == metrics["cv_predictions_rows"] == rows


def _report(tmp_path: Path, keep, rows=None) -> Path:
    """A copy of the shipped report's cv_predictions.csv (data lines ``keep`` accepts) with its metrics.json, which
    records ``rows`` as cv_predictions_rows (None: none, as a report made before the count was recorded)."""
    lines = (REPORT / "cv_predictions.csv").read_text().splitlines()
    (tmp_path / "cv_predictions.csv").write_text("\n".join([lines[0]] + [x for i, x in enumerate(lines[1:])
                                                                         if keep(i)]) + "\n")
    metrics = json.loads((REPORT / "metrics.json").read_text())
    assert metrics["cv_predictions_rows"] == 1376  # the shipped report records its count
    del metrics["cv_predictions_rows"]
    if rows is not None:
        metrics["cv_predictions_rows"] = rows
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    return tmp_path


@pytest.mark.parametrize("keep, said", [(lambda i: i % 2 == 0, "has 688 rows"), (lambda i: i != 700, "has 1375 rows")])
def test_unseen_study_refuses_a_cv_predictions_csv_that_lost_lines(unseen, capsys, tmp_path, keep, said):
    n = len(pd.read_csv(REPORT / "cv_predictions.csv"))
    assert n == 1376
    report = _report(tmp_path, keep, rows=n)
    assert unseen.main([str(report), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"unseen_study: error: {report / 'cv_predictions.csv'} {said} but {report / 'metrics.json'} "
                          "records cv_predictions_rows 1376: lines were deleted from the file after `calib report` "
                          "wrote it, so the figures would be over other runs; make the report again with `calib "
                          "report STUDY_DIR... --out FOLDER` and pass FOLDER"), err


def test_unseen_study_reads_a_cv_predictions_csv_of_the_recorded_count_without_a_note(unseen, capsys, tmp_path):
    report = _report(tmp_path, lambda i: True, rows=1376)
    assert unseen.main([str(report), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("study_tiny@b6b755233a8f held out: 12 runs of 3 arms;")


def test_a_report_made_before_the_count_says_in_one_line_that_it_cannot_be_checked(unseen, capsys, tmp_path):
    report = _report(tmp_path, lambda i: True)
    assert unseen.main([str(report), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 0
    out, err = capsys.readouterr()
    assert err == (f"unseen_study: note: the row count of {report / 'cv_predictions.csv'} cannot be checked "
                   f"({report / 'metrics.json'} records no cv_predictions_rows: a report made before it was recorded); "
                   "the figures are over its 1376 rows as they are; make the report again with `calib report "
                   "STUDY_DIR... --out FOLDER` and pass FOLDER to check it\n")
    assert out.startswith("study_tiny@b6b755233a8f held out: 12 runs of 3 arms;")  # and the benchmark goes on


def test_calib_refuses_a_lost_middle_line_in_a_file_without_a_final_line_break(tmp_path):
    """A cut last line (here: no final line break) exempts only its own run's end, in calib as in the analysis: a
    middle line deleted whole is still told (a review found every check skipped once any line looked cut)."""
    from calib.dataset import build_rows

    study = _copy("study_tiny", tmp_path / "study_tiny")
    lines = _drop(study, lambda i, f: not (f[0] == "grpo" and f[1] == "0" and f[2] == "14"))
    (study / "runs.csv").write_text((study / "runs.csv").read_text().rstrip("\n"))
    assert any(x.startswith("grpo,0,14,") for x in lines)
    with pytest.raises(StudyFormatError, match=r"lost eval lines: arm grpo, seed 0 lacks update\(s\) 14 "):
        build_rows(study)
    (study / "runs.csv").write_text("\n".join(lines) + "\n")  # whole again: the rows are built
    assert len(build_rows(study)) == 20


def test_the_analysis_reads_the_per_item_results_once(tmp_path, monkeypatch):
    """The lost-line check of runs.csv and the analysis's intervals both need the per-item results: the analysis
    reads (decompresses and parses) them once and passes them on (they were read twice)."""
    from gradprobe.study import analysis as analysis_module
    from gradprobe.study import reading

    study = _copy("study_tiny", tmp_path / "s")
    calls = []
    real = reading._item_lines
    monkeypatch.setattr(reading, "_item_lines", lambda d: calls.append(d) or real(d))
    monkeypatch.setattr(analysis_module, "_item_lines", reading._item_lines)
    analysis_module.analyze(study, write=False, figures=False)
    assert len(calls) == 1
    _drop(study, lambda i, f: not (f[0] == "grpo" and f[1] == "0" and f[2] == "14"))  # still told, from them
    assert "arm grpo, seed 0 lacks update(s) 14 (eval_items.jsonl.gz)" in _lost_warning(study)
