"""Number fields of a probe's files and of a study's runs.csv that bypassed the one JSON-number rule
(:func:`gradprobe.outputs.is_json_number`).

Before this change a study's ``probe/probe.json`` with ``rewards[1].tokens_per_update: true`` was read as 1 token per
update by ``calib rows`` (its forecasts flipped sign silently); ``false``/``0`` divided by zero, ``"25520"`` broke
numpy, a 400-digit integer overflowed and NaN gave a message without file or field. ``ProbeResult.table`` read
``int(true)`` as 1; ``ProbeResult.tokens()`` loaded a ``true`` alignment as an object column and an empty
``tokens.jsonl`` as a (0, 0) frame. A runs.csv seed ``True`` said only ``invalid literal for int()``, a 400-digit
``generated_tokens`` raised OverflowError, and a runs.csv cut in half was met with advice to re-analyse (which
would overwrite the analysis from half the data).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from calib.cli import main
from calib.dataset import StudyFormatError, build_rows
from forecast_helpers import probe_result, synthetic_curve
from study_helpers import shipped_copy
from gradprobe.api.probe_result import ProbeResult, load_probe
from gradprobe.forecast import forecast_rewards
from gradprobe.study.reading import restore_runs_csv_fix

HUGE = 10 ** 400
HUGE_SHOWN = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
ACCEPTED = "it must be a finite number >= 1 of generated tokens per update (the probe writes a whole number, e.g. 4477)"


def _study(tmp_path: Path) -> Path:
    return shipped_copy("study_tiny", tmp_path / "study_tiny")


def _edit_probe(study: Path, key: str, value) -> None:
    path = study / "probe" / "probe.json"
    doc = json.loads(path.read_text())
    doc["rewards"][1][key] = value
    path.write_text(json.dumps(doc))


# ----------------------------------------------------------------------------- 1. a study's probe.json

@pytest.mark.parametrize("value, shown", [(True, "true (a boolean is never read as 1 or 0)"),
                                          (False, "false (a boolean is never read as 1 or 0)"), (0, "0"),
                                          ("25520", '"25520"'), (float("nan"), "NaN"), (HUGE, HUGE_SHOWN),
                                          (1e-300, "1e-300")],
                         ids=["true", "false", "zero", "text", "nan", "huge", "tiny"])
def test_calib_rows_refuses_a_tokens_per_update_that_is_no_count_naming_file_field_and_fix(tmp_path, capsys, value,
                                                                                           shown):
    study = _study(tmp_path)
    _edit_probe(study, "tokens_per_update", value)
    file = study / "probe" / "probe.json"
    with pytest.raises(StudyFormatError) as e:  # true was 1 token per update: forecasts flipped sign silently
        build_rows(study)
    assert str(e.value) == (f"{file} field rewards[1].tokens_per_update is {shown}: {ACCEPTED}; this is the probe of "
                            f"a study without run folders ({study} has no runs/: resuming it would train every run "
                            f"again): restore {file} from a copy of the study")
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rewards[1].tokens_per_update" in err and not (tmp_path / "rows.csv").exists()


def test_calib_rows_refuses_a_seconds_per_update_of_true_and_a_per_group_false(tmp_path):
    study = _study(tmp_path)
    _edit_probe(study, "seconds_per_update", True)
    with pytest.raises(StudyFormatError, match=r"field rewards\[1\]\.seconds_per_update is true \(a boolean is never "
                                               r"read as 1 or 0\): it must be a finite number > 0 of seconds"):
        build_rows(study)
    _edit_probe(study, "seconds_per_update", 5.5)
    _edit_probe(study, "per_group", [0.5, False, 0.25])
    with pytest.raises(StudyFormatError) as e:  # np.asarray(..., float64) read false as 0.0
        build_rows(study)
    assert str(e.value).startswith(f"{study / 'probe' / 'probe.json'} field rewards[1].per_group[1] is false: ")


@pytest.mark.parametrize("value, shown", [(None, "null"), ("inf", '"inf"'), (float("nan"), "NaN")])
def test_calib_rows_refuses_a_group_alignment_that_is_no_finite_number(tmp_path, value, shown):
    """null/"inf"/NaN in per_group turned the arm's rho to NaN, or the reference's to cost only, silently."""
    study = _study(tmp_path)
    _edit_probe(study, "per_group", [0.5, value, 0.25])
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    assert str(e.value).startswith(f"{study / 'probe' / 'probe.json'} field rewards[1].per_group[1] is {shown}: a "
                                   "group's alignment is a finite number (the probe writes one per group); ")


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["rewards"].__setitem__(1, 5), "field rewards[1] is 5, not an object"),
    (lambda d: d["rewards"][0].__setitem__("name", 5), "field rewards[0].name is 5, not text"),
    (lambda d: d.__setitem__("rewards", "x"), "has no 'rewards' list: not a probe.json of gradprobe probe")])
def test_calib_rows_refuses_a_reward_entry_that_is_no_object_or_has_no_text_name(tmp_path, edit, says):
    """Were TypeErrors (a traceback from calib rows)."""
    study = _study(tmp_path)
    path = study / "probe" / "probe.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises((StudyFormatError, ValueError)) as e:
        build_rows(study)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_forecast_refuses_a_probe_dict_whose_tokens_per_update_is_true():
    groups = np.random.default_rng(0).normal(1.0, 0.3, 16)
    probe = probe_result({"outcome": groups, "mc": 2.0 * groups}, {"outcome": 1000.0, "mc": True})
    with pytest.raises(ValueError) as e:  # was 1 token per update
        forecast_rewards(synthetic_curve(), probe)
    assert str(e.value).startswith(f"probe.json field rewards[1].tokens_per_update is true (a boolean is never read "
                                   f"as 1 or 0): {ACCEPTED}; re-run the probe")
    probe = probe_result({"outcome": groups, "mc": 2.0 * groups}, {"outcome": 1000.0, "mc": 1500.0})
    probe["ledger"]["charged_generated_tokens"] = True
    with pytest.raises(ValueError, match=r"field ledger\.charged_generated_tokens is true"):
        forecast_rewards(synthetic_curve(), probe, budget_flops=1e13)


# ----------------------------------------------------------------------------- 1 and 2. a probe folder

def _probe_folder(folder: Path, tokens_per_update=300) -> Path:
    raw = {"rewards": [{"name": "outcome", "inner_product": 0.5, "per_group": [0.25, 0.25],
                        "predicted_gain_per_update": 0.125, "tokens_per_update": tokens_per_update,
                        "predicted_gain_at_budget": 2.0}]}
    (folder / "probe.json").write_text(json.dumps(raw))
    return folder


def test_the_probe_table_and_load_probe_refuse_a_tokens_per_update_of_true(tmp_path):
    folder = _probe_folder(tmp_path, True)
    fix = f"re-run `gradprobe probe --out '{tmp_path}'` (with the same settings) to write the probe's files again"
    want = (f"{tmp_path / 'probe.json'} field rewards[0].tokens_per_update is true (a boolean is never read as 1 or "
            f"0): {ACCEPTED}; {fix}")
    with pytest.raises(ValueError) as e:  # int(True) was 1
        _ = ProbeResult(json.loads((folder / "probe.json").read_text()), folder).table
    assert str(e.value) == want
    with pytest.raises(ValueError) as e:
        load_probe(folder)
    assert str(e.value) == want
    assert load_probe(_probe_folder(tmp_path, 300)).table.loc["outcome", "tokens_per_update"] == 300


def _tokens_line(alignment, advantage=1.0) -> str:
    return json.dumps({"row": 0, "prompt_id": "p0", "score": 1.0, "truncated": False, "tokens": [1, 2],
                       "texts": ["a", "b"], "alignment": alignment, "advantages": {"outcome": [advantage, 1.0]}})


def test_the_tokens_table_refuses_a_non_number_token_field_and_an_empty_file(tmp_path):
    probe = load_probe(_probe_folder(tmp_path))
    path = tmp_path / "tokens.jsonl"
    fix = f"re-run `gradprobe probe --out '{tmp_path}'` (with the same settings) to write the probe's files again"
    path.write_text(_tokens_line([0.5, -0.5]) + "\n" + _tokens_line([0.5, True]) + "\n")
    with pytest.raises(ValueError) as e:  # was an object column holding True
        probe.tokens()
    assert str(e.value) == (f"{path} is damaged (line 2: field alignment[1]: True is a boolean (JSON true/false), not "
                            "a number of gradprobe's JSON encoding (a number, null, \"inf\" or \"-inf\"): a boolean is "
                            f"never read as 1 or 0); {fix}")
    path.write_text(_tokens_line([0.5, -0.5], advantage="abc") + "\n")
    with pytest.raises(ValueError, match=r"line 1: field advantages\.outcome\[0\]: 'abc' is not a number"):
        probe.tokens()
    path.write_text("\n")
    with pytest.raises(ValueError) as e:  # was a (0, 0) frame
        probe.tokens()
    assert str(e.value) == f"{path} is damaged (the file is empty: it holds no completion's line); {fix}"
    path.write_text(_tokens_line([0.5, -0.5]) + "\n")
    table = probe.tokens()
    assert table["alignment"].dtype == np.float64 and table["alignment"].tolist() == [0.5, -0.5]


# ----------------------------------------------------------------------------- 3 and 4. a study's runs.csv

def _edit_runs(study: Path, line: int, column: str, value: str) -> None:
    rows = list(csv.reader((study / "runs.csv").open(newline="")))
    rows[line - 1][rows[0].index(column)] = value
    with (study / "runs.csv").open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


# a shipped copy keeps no runs/: restore runs.csv from a copy (resuming would train every run again)
REBUILD = ("restore it from a copy: {study} has no runs/ folder to rebuild it from (`gradprobe study PLAN --out "
           "DIR` rewrites runs.csv from DIR/runs/ARM/seedS/metrics.jsonl)")


@pytest.mark.parametrize("column, value, shown, what", [
    ("seed", "True", "'True'", "a seed (a whole number >= 0 such as 0)"),
    ("generated_tokens", "1" + "0" * 400, HUGE_SHOWN, "a finite number (an empty cell means missing)")],
    ids=["seed-true", "tokens-huge"])
def test_calib_rows_refuses_a_bad_runs_csv_cell_naming_the_line_and_column(tmp_path, capsys, column, value, shown,
                                                                           what):
    study = _study(tmp_path)
    _edit_runs(study, 6, column, value)
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    err = capsys.readouterr().err
    runs = study / "runs.csv"
    assert err == (f"calib rows: error: {runs}, line 6, column {column!r}: {shown} is not {what}; "
                   + REBUILD.format(study=study) + "\n")  # was invalid literal / an OverflowError
    assert not (tmp_path / "rows.csv").exists()


def test_a_runs_csv_cut_in_half_is_called_damaged_before_any_re_analysis(tmp_path, capsys):
    study = _study(tmp_path)
    runs = study / "runs.csv"
    raw = runs.read_bytes()
    runs.write_bytes(raw[:len(raw) // 2])  # cut mid-line
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    msg = str(e.value)  # the cut run's recorded end is lost with the cut: refused as lost eval lines, with the fix
    assert msg.startswith(f"{runs} lost eval lines: arm mc_advantage, seed 2 lacks update(s) 10 "
                          "(study.json), its later lines gone with the file's cut last line (this run's)")
    assert "lines were deleted from or cut off the end of runs.csv" in msg and "\n" not in msg
    assert msg.endswith(restore_runs_csv_fix(study))
    assert main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    assert "cut off the end of runs.csv" in capsys.readouterr().err


def test_a_runs_csv_without_its_last_run_is_called_damaged_and_a_whole_one_still_builds(tmp_path):
    study = _study(tmp_path)
    assert len(build_rows(study)) == 20  # the shipped study, as written
    runs = study / "runs.csv"
    lines = runs.read_text().splitlines(keepends=True)
    runs.write_text("".join(lines[:-9]))  # whole lines, but the last run's evals gone
    with pytest.raises(StudyFormatError) as e:
        build_rows(study)
    msg = str(e.value)
    assert msg.index("looks cut or damaged (it lacks runs analysis.json lists: ") < msg.index("--analyze-only")
