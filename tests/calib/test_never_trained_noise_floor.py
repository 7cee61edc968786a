"""calib's run-level seed-noise floor and its errors on arm means leave out an arm with a run that never trained
(every update had every advantage 0: a broken setup, not a sample of the arm's seed noise), and every arm of a study
whose grpo has one, and name them (calib.noise_floor.seed_noise_floor / arm_level_errors ``never_trained``).

calib's rows carry no never-trained flag (the shipped calibration stays byte-identical), so the arms are read from
each study's analysis.json ``arms[ARM].never_trained`` (calib.noise_floor.study_never_trained). The study: a copy of
the shipped data/study_tiny_lr (4 seeds per arm, no run that never trained) whose analysis.json marks grpo_4xlr's
seed 1 (or grpo's seed 2) as never trained; its realized gains: the shipped data/calibration/rows.csv."""

from __future__ import annotations

import html
import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calib.dataset import read_rows
from calib.noise_floor import NO_SEEDS, arm_level_errors, seed_noise_floor, study_never_trained
from calib.integrity import StudyFormatError
from calib.report import compute

ROOT = Path(__file__).resolve().parents[2]
KEY = "study_tiny_lr@6c0e8ace18cf"  # the study column of calib's rows (FOLDER@SHA12)
FLAT = "every group's rewards were equal (all groups flat: zero variance)"
NOT_NOISE = ("a run that never trained (every update had every advantage 0) samples a broken setup, not the arm's seed "
             "noise")
ARMS = ["grpo_0.25xlr", "grpo_0.5xlr", "grpo_2xlr", "grpo_4xlr"]


def _copy(tmp_path, arm: str, seed: int, name: str = "study_tiny_lr") -> Path:
    """data/NAME copied under its own folder name, ``arm``'s run ``seed`` marked as never trained."""
    study = tmp_path / name
    shutil.copytree(ROOT / "data" / name, study)
    doc = json.loads((study / "analysis.json").read_text())
    doc["arms"][arm]["never_trained"] = [{"seed": seed, "cause": "flat", "why": FLAT, "updates": 10,
                                          "max_abs_reward": 1.0, "grad_norm_max": 0.0}]
    (study / "analysis.json").write_text(json.dumps(doc))
    return study


def _rows() -> pd.DataFrame:
    rows = read_rows(ROOT / "data" / "calibration" / "rows.csv")
    return rows[(rows["study"] == KEY) & ~rows["is_reference"].astype(bool)].reset_index(drop=True)


def _floor(values) -> float:
    """floor_a = mean over pairs |y_i - y_j| / sqrt(2), by a plain loop."""
    pairs = list(itertools.combinations([float(v) for v in values], 2))
    return sum(abs(x - y) for x, y in pairs) / len(pairs) / math.sqrt(2.0)


def test_the_floor_leaves_out_an_arm_that_never_trained_and_names_it(tmp_path):
    rows, study = _rows(), _copy(tmp_path, "grpo_4xlr", 1)
    untrained = study_never_trained([study])
    assert list(untrained) == [KEY] and [r["seed"] for r in untrained[KEY]["grpo_4xlr"]] == [1]
    assert study_never_trained([ROOT / "data" / "study_tiny_lr"]) == {}  # the shipped study: none
    before = seed_noise_floor(rows["target"], rows["arm"], rows["study"], resamples=2000)
    after = seed_noise_floor(rows["target"], rows["arm"], rows["study"], never_trained=untrained, resamples=2000)
    assert (before["arms"], before["runs"]) == (4, 16) and "never_trained" not in before
    assert (after["arms"], after["runs"]) == (3, 12)  # before: grpo_4xlr's 4 runs counted as seed noise
    kept = [_floor(rows.loc[rows["arm"] == a, "target"]) for a in ARMS[:3]]
    assert after["estimate"] == pytest.approx(sum(kept) / 3, rel=1e-12)  # 4 seeds each: equal weights
    assert after["estimate"] != pytest.approx(before["estimate"], rel=1e-6)
    assert after["never_trained"] == [{"study": KEY, "arm": "grpo_4xlr",
                                       "why": f"grpo_4xlr never trained (seed 1: {FLAT} (10 updates)): {NOT_NOISE}",
                                       "runs": [{"arm": "grpo_4xlr", "seed": 1, "cause": "flat"}]}]


def test_a_control_arm_that_never_trained_leaves_every_arm_of_its_study_out(tmp_path):
    rows, untrained = _rows(), study_never_trained([_copy(tmp_path, "grpo", 2)])
    got = seed_noise_floor(rows["target"], rows["arm"], rows["study"], never_trained=untrained, resamples=2000)
    assert (got["arms"], got["runs"], got["reason"]) == (0, 0, NO_SEEDS) and math.isnan(got["estimate"])
    why = f"the control arm grpo never trained (seed 2: {FLAT} (10 updates)): {NOT_NOISE}"
    assert got["never_trained"] == [{"study": KEY, "arm": a, "why": why,
                                     "runs": [{"arm": "grpo", "seed": 2, "cause": "flat"}]} for a in ARMS]


def test_the_errors_on_arm_means_leave_the_arm_out(tmp_path):
    rows, untrained = _rows(), study_never_trained([_copy(tmp_path, "grpo_4xlr", 1)])
    pred = rows["target"] + np.arange(len(rows), dtype=float) / 8  # a forecast off by known amounts
    got = arm_level_errors(pred, rows["target"], rows["arm"], rows["study"], never_trained=untrained, resamples=2000)
    assert (got["arms"], got["floor_arms"]) == (3, 3)  # before: 4, 4
    off = [float((pred - rows["target"])[rows["arm"] == a].mean()) for a in ARMS[:3]]
    assert got["mae"]["estimate"] == pytest.approx(sum(abs(x) for x in off) / 3, rel=1e-12)
    floors = [_floor(rows.loc[rows["arm"] == a, "target"]) / 2 for a in ARMS[:3]]  # floor_a / sqrt(4 seeds)
    assert got["floor"]["estimate"] == pytest.approx(sum(floors) / 3, rel=1e-12)
    assert [(e["arm"], e["runs"]) for e in got["never_trained"]] == [
        ("grpo_4xlr", [{"arm": "grpo_4xlr", "seed": 1, "cause": "flat"}])]


def test_the_report_reads_the_arms_from_each_studys_analysis(tmp_path):
    """data/study_tiny: its common rows (every forecaster has a number) are mc_value, mc_advantage and hybrid_0.5."""
    key = "study_tiny@b6b755233a8f"
    rows = read_rows(ROOT / "data" / "calibration" / "rows.csv")
    rows = rows[rows["study"] == key].reset_index(drop=True)
    study = _copy(tmp_path, "mc_advantage", 0, "study_tiny")
    m, _, _ = compute(rows, cv="arm", n_permutations=9, bootstrap_resamples=2000, study_dirs=[study])
    fl = m["seed_noise_floor"]
    assert fl["never_trained"] == [{"study": key, "arm": "mc_advantage", "runs": [
        {"arm": "mc_advantage", "seed": 0, "cause": "flat"}],
        "why": f"mc_advantage never trained (seed 0: {FLAT} (10 updates)): {NOT_NOISE}"}]
    assert (fl["arms"], fl["runs"]) == (2, 8)  # before: 3 study-arms, 12 runs
    kept = [_floor(rows.loc[rows["arm"] == a, "target"]) for a in ("hybrid_0.5", "mc_value")]
    assert fl["estimate"] == pytest.approx(sum(kept) / 2, rel=1e-12)
    levels = [e["raw"]["common"]["arm_level"] for e in m["errors"]["arm"].values() if "common" in e["raw"]]
    assert len(levels) == 4
    for level in levels:
        assert [x["arm"] for x in level["never_trained"]] == ["mc_advantage"]
        assert (level["arms"], level["floor_arms"]) == (2, 2)  # before: 3, 3


def test_the_report_text_and_page_name_the_arms_left_out(tmp_path, capsys):
    """``calib report`` prints (and its page shows) which arms the floors left out and why; the page escapes it."""
    from calib.cli import _print_floor
    from calib.report_html import _floor_html

    key = "study_tiny@b6b755233a8f"
    rows = read_rows(ROOT / "data" / "calibration" / "rows.csv")
    rows = rows[rows["study"] == key].reset_index(drop=True)
    study = _copy(tmp_path, "mc_advantage", 0, "study_tiny")
    m, _, _ = compute(rows, cv="arm", n_permutations=9, bootstrap_resamples=2000, study_dirs=[study])
    why = f"mc_advantage never trained (seed 0: {FLAT} (10 updates)): {NOT_NOISE}"
    _print_floor(m, "arm")
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "left out:" in ln]
    assert lines == [f"{'':<26}left out: {key}/mc_advantage: {why}"]
    page = _floor_html(m, "arm")
    assert f"<p>Left out of the floor and the arm-mean errors: {html.escape(f'{key}/mc_advantage: {why}')}.</p>" in page
    m2, _, _ = compute(rows, cv="arm", n_permutations=9, bootstrap_resamples=2000,
                       study_dirs=[ROOT / "data" / "study_tiny"])
    _print_floor(m2, "arm")
    assert "left out:" not in capsys.readouterr().out and "Left out of the floor" not in _floor_html(m2, "arm")


# --- a never_trained value that is no list of records: refused by calib, read around by the study report -----------

RECORD = ('a record of a run that never trained (an object with "seed": a whole number >= 0, "cause": text, and, '
          'when present, "why": text, "updates": a number >= 0)')


def _malformed(tmp_path, value, arm: str = "mc_advantage") -> Path:
    """data/study_tiny copied, its analysis.json ``arms[arm].never_trained`` set to ``value``."""
    study = tmp_path / "study_tiny"
    shutil.copytree(ROOT / "data" / "study_tiny", study)
    doc = json.loads((study / "analysis.json").read_text())
    doc["arms"][arm]["never_trained"] = value
    (study / "analysis.json").write_text(json.dumps(doc))
    return study


def _refusal(study: Path, field: str, shown: str, what: str) -> str:
    """The refusal of a study without runs/ (as shipped): a re-analysis would record no run that never trained."""
    return (f"{study}/analysis.json field arms.mc_advantage.never_trained{field} is {shown}, not {what}; restore "
            f"{study}/analysis.json from a copy of the study ({study} has no runs/: a re-analysis would read no run "
            "folder and record no run that never trained)")


def test_the_fix_of_a_study_with_run_folders_is_a_re_analysis(tmp_path):
    """With runs/ the analysis reads the records from the run folders again; without it (above) a re-analysis would
    write [] for every arm, so the fix is a copy of analysis.json (before: re-analyse in both cases)."""
    study = _malformed(tmp_path, 3)
    (study / "runs").mkdir()
    with pytest.raises(StudyFormatError) as e:
        study_never_trained([study])
    assert str(e.value) == (f"{study}/analysis.json field arms.mc_advantage.never_trained is 3, not {LIST}; re-analyse "
                            f"the study with `gradprobe study '{study}/plan.toml' --analyze-only --overwrite-analysis "
                            f"--out '{study}'` (it reads these records from the run folders again)")


LIST = f"absent, null or a list (each item {RECORD})"
GOOD = {"seed": 0, "cause": "flat", "why": "W", "updates": 10}


@pytest.mark.parametrize("value, field, shown, what", [
    (3, "", "3", LIST),
    (True, "", "true", LIST),
    ("seed 0 never trained", "", '"seed 0 never trained"', LIST),
    ({"seed": 0, "cause": "flat"}, "", '{"seed": 0, "cause": "flat"}', LIST),
    (["seed 0"], "[0]", '"seed 0"', RECORD),
    ([GOOD, None], "[1]", "null", RECORD),
    ([{"why": "x"}], "[0]", '{"why": "x"}', RECORD + ': it has no "seed", no "cause"'),
    ([{"seed": 0}], "[0]", '{"seed": 0}', RECORD + ': it has no "cause"'),
    ([{**GOOD, "seed": "0"}], "[0].seed", '"0"', f"a whole number >= 0 ({RECORD})"),
    ([{**GOOD, "seed": -1}], "[0].seed", "-1", f"a whole number >= 0 ({RECORD})"),
    ([{**GOOD, "seed": 1.0}], "[0].seed", "1.0", f"a whole number >= 0 ({RECORD})"),
    ([{**GOOD, "seed": True}], "[0].seed", "true (a boolean is never read as 1 or 0)",
     f"a whole number >= 0 ({RECORD})"),
    ([{**GOOD, "cause": None}], "[0].cause", "null", f"text ({RECORD})"),
    ([{**GOOD, "why": 7}], "[0].why", "7", f"text ({RECORD})"),
    ([{**GOOD, "updates": "10"}], "[0].updates", '"10"', f"a number >= 0 ({RECORD})"),
    ([{**GOOD, "updates": -1}], "[0].updates", "-1", f"a number >= 0 ({RECORD})")],
    ids=["number", "true", "text", "lone-object", "list-of-text", "null-record", "no-seed-no-cause", "no-cause",
         "seed-text", "seed-negative", "seed-float", "seed-true", "cause-null", "why-number", "updates-text",
         "updates-negative"])
def test_study_never_trained_refuses_a_value_that_is_no_list_of_records(tmp_path, value, field, shown, what):
    """Before: 3 and true raised TypeError, a text, a lone object or a list of text AttributeError (calib report
    crashed with a traceback; a text was split into characters), and a record without seed or cause was printed as
    "seed None: None (None updates)"."""
    study = _malformed(tmp_path, value)
    with pytest.raises(StudyFormatError) as e:
        study_never_trained([study])
    assert str(e.value) == _refusal(study, field, shown, what)
    assert "\n" not in str(e.value)


def test_study_never_trained_reads_null_empty_and_whole_records(tmp_path):
    """null and [] are no run that never trained; a record with seed and cause (without why and updates, with keys
    calib does not read) is read as written. Before: a record with a null seed was read too (printed "seed None")."""
    study = _malformed(tmp_path, None)
    doc = json.loads((study / "analysis.json").read_text())
    doc["arms"]["mc_value"]["never_trained"] = []
    doc["arms"]["hybrid_0.5"]["never_trained"] = [{"seed": 2, "cause": "truncated", "max_abs_reward": 1.0}]
    doc["arms"]["grpo_2xlr"]["never_trained"] = [{**GOOD, "seed": None}]
    (study / "analysis.json").write_text(json.dumps(doc))
    with pytest.raises(StudyFormatError, match=r"field arms\.grpo_2xlr\.never_trained\[0\]\.seed is null, not a whole"):
        study_never_trained([study])  # before: read, printed as "seed None"
    doc["arms"]["grpo_2xlr"]["never_trained"] = [GOOD]
    (study / "analysis.json").write_text(json.dumps(doc))
    key = "study_tiny@b6b755233a8f"
    assert study_never_trained([study]) == {key: {"hybrid_0.5": [{"seed": 2, "cause": "truncated",
                                                                  "max_abs_reward": 1.0}], "grpo_2xlr": [GOOD]}}


def test_calib_report_refuses_a_malformed_never_trained_with_rc_2(tmp_path, capsys):
    """Before: a traceback (TypeError: 'int' object is not iterable), rc 1, no report."""
    from calib.cli import main

    study = _malformed(tmp_path, 3)
    assert main(["report", "--out", str(tmp_path / "rep"), "--cv", "arm", str(study)]) == 2
    err = capsys.readouterr().err
    assert err == f"calib report: error: {_refusal(study, '', '3', LIST)}\n"


@pytest.mark.parametrize("value", [3, True, "seed 0", {"seed": 0, "cause": "flat"}, ["x", None]],
                         ids=["number", "true", "text", "lone-object", "no-object"])
def test_the_study_report_reads_around_a_malformed_never_trained(value):
    """gradprobe's study report (format_rankings) of an analysis whose never_trained is no list of records says its
    records cannot be read instead of raising (before: TypeError or AttributeError); untrained_arms reads the
    records that are objects only."""
    from gradprobe.study.report import format_rankings

    doc = json.loads((ROOT / "data" / "study_tiny" / "analysis.json").read_text())
    doc["arms"]["mc_advantage"]["never_trained"] = value
    text = format_rankings(doc)  # before: raised here
    from gradprobe.study.never_trained_arms import UNREADABLE_RECORDS, never_trained_text, untrained_arms

    assert (f"mc_advantage never trained, not ranked (every update of the run had every advantage 0): "
            f"{UNREADABLE_RECORDS}") in text.splitlines()
    assert UNREADABLE_RECORDS == ("its records in analysis.json cannot be read: re-analyse the study with `gradprobe "
                                  "study STUDY/plan.toml --analyze-only --overwrite-analysis --out STUDY` where it "
                                  "keeps its runs/ (the records are read from the run folders), else restore "
                                  "analysis.json from a copy of the study")
    assert untrained_arms(doc["arms"]) == {}
    assert never_trained_text([None, GOOD, "x"]) == "seed 0: W (10 updates)"
    assert untrained_arms({"a": {"never_trained": ["x", GOOD]}, "b": {"never_trained": "seed"}}) == {"a": [GOOD]}
