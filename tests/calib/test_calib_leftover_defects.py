"""calib's leftover defects: runs.csv accuracies edited after the analysis, empty file options, an option the
command does not have."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from calib.cli import main
from calib.integrity import StudyFormatError, check_analysis_matches_runs
from calib_helpers import single_thread_blas  # noqa: F401 (autouse fixture)

DATA = Path(__file__).resolve().parents[2] / "data"
FIX = "`gradprobe study --analyze-only --overwrite-analysis --out {}`"  # README.md, `gradprobe study --help`


def _copy_tiny(tmp_path: Path) -> Path:
    study = tmp_path / "study_tiny"
    shutil.copytree(DATA / "study_tiny", study, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    return study


def _per_seed(study: Path) -> dict:
    """arm -> {seed: accuracy points} of analysis.json at the token budget, as calib.dataset reads it."""
    arms = json.loads((study / "analysis.json").read_text())["arms"]
    return {a: {int(s): math.nan if v is None else float(v) for s, v in r["generated_tokens"]["per_seed"].items()}
            for a, r in arms.items()}


@pytest.mark.parametrize("edit, records", [(lambda s: s * math.nan, "none"), (lambda s: s * 100, "6760-7560")],
                         ids=["blanked", "times_100"])
def test_mc_value_accuracies_edited_in_runs_csv_are_refused_naming_the_file_the_arm_and_the_fix(
        tmp_path, capsys, edit, records):
    study = _copy_tiny(tmp_path)
    analysis = json.loads((study / "analysis.json").read_text())
    check_analysis_matches_runs(study, analysis, _per_seed(study))  # as shipped: consistent
    runs = pd.read_csv(study / "runs.csv")
    mc = runs["arm"] == "mc_value"
    assert mc.sum() == 26 and 100 * runs.loc[mc, "accuracy"].min() == pytest.approx(67.6)
    runs.loc[mc, "accuracy"] = edit(runs.loc[mc, "accuracy"])
    runs.to_csv(study / "runs.csv", index=False)
    out = tmp_path / "rows.csv"
    assert main(["rows", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not out.exists()
    assert err == (f"calib rows: error: {study}: analysis.json does not match runs.csv (mc_value: analysis.json reads "
                   f"a mean accuracy of 74.025 points over its seeds, runs.csv records {records} for that arm); "
                   f"runs.csv changed after the analysis: re-analyse the study with {FIX.format(study)}\n")
    with pytest.raises(StudyFormatError, match=r"\(mc_value: analysis.json reads a mean accuracy of 74.025 points"):
        check_analysis_matches_runs(study, analysis, _per_seed(study))


def _argparse_error(argv: list[str], capsys) -> str:
    """The last stderr line of ``calib ARGV`` refused by argparse (exit status 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    return err.splitlines()[-1]


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_calibration_file_option_is_refused_as_empty(tmp_path, capsys, value):
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "probe.json").write_text("{}")
    line = _argparse_error(["apply", str(probe), "--calibration", value], capsys)
    assert line == (f"calib apply: error: argument --calibration: is empty ({value!r}): give the calibration file "
                    "`calib fit ROWS.csv --out FILE.json` wrote, or 'default' (the shipped one) (an unset shell "
                    "variable gives an empty value)")
    assert list(probe.iterdir()) == [probe / "probe.json"]  # no calibrated.json


@pytest.mark.parametrize("argv, option, give", [
    (["apply", ""], "PROBE_DIR", "a `gradprobe probe --out` folder or its probe.json"),
    (["fit", "", "--out", "{tmp}/cal.json"], "ROWS.csv", "a rows CSV (`calib rows STUDY_DIR... --out ROWS.csv`"),
    (["rows", "", "--out", "{tmp}/rows.csv"], "STUDY_DIR", "the --out folder of a finished `gradprobe study`"),
    (["report", str(DATA / "study_tiny"), "--out", "{tmp}/report", "--validation-out", ""], "--validation-out",
     "a JSON file to write, or omit the option for none"),
], ids=["apply-probe", "fit-rows", "rows-study", "report-validation-out"])
def test_other_empty_file_arguments_are_refused_as_empty_before_anything_is_written(tmp_path, capsys, argv, option,
                                                                                    give):
    line = _argparse_error([a.format(tmp=tmp_path) for a in argv], capsys)
    assert line.startswith(f"calib {argv[0]}: error: argument {option}: is empty (''): give {give}")
    assert list(tmp_path.iterdir()) == []


def test_an_option_a_command_does_not_have_gets_that_commands_usage(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["apply", str(tmp_path), "--include-grpo"])  # a `calib fit` option (`calib apply` has --out too)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: calib apply [-h] [--calibration default|PATH]")
    assert err.splitlines()[-1] == ("calib apply: error: unrecognized arguments: --include-grpo; "
                                    "`calib apply --help` lists its options")
    assert list(tmp_path.iterdir()) == []


def test_calib_report_on_a_missing_study_leaves_no_report_folder(tmp_path, capsys):
    """`calib report nosuch --out DIR` refused the study but left an empty DIR (and its new parents)."""
    out = tmp_path / "new" / "report"
    assert main(["report", str(tmp_path / "nosuch"), "--out", str(out)]) == 2
    assert "does not exist or is not a folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
