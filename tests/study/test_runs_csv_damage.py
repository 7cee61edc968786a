"""A damaged ``runs.csv`` (empty, blank cells) is reported with the file, the rows and the fix (rebuild it
from the run folders by re-running the study's command, which does not redo finished runs), never as a bare
pandas error or as "re-run the study"; a blank accuracy cell is not dropped silently."""

from __future__ import annotations

import csv
import warnings

import pytest

from gradprobe.cli import main
from gradprobe.study.reading import (AnalysisError, load_runs, matched_budgets, read_runs, recorded_axes,
                                     restore_runs_csv_fix, _runs)
from study_helpers import make_study


def _blank(root, col, rows):
    """Blank the ``col`` cell of the given data rows (0-based, file order) of root/runs.csv."""
    path = root / "runs.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    j = table[0].index(col)
    for r in rows:
        table[r + 1][j] = ""
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table)
    return table


def test_empty_runs_csv_names_the_file_and_the_fix(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    (root / "runs.csv").write_bytes(b"")
    with pytest.raises(AnalysisError) as info:
        load_runs(root)
    assert str(info.value) == (
        f"{root / 'runs.csv'} is empty (0 bytes: no header line, no rows); rebuild it from the run folders: "
        f"`gradprobe study '{root / 'plan.toml'}' --out '{root}'` rewrites runs.csv from {root / 'runs'}/ARM/seedS/"
        "metrics.jsonl without redoing the finished runs (--analyze-only only reads runs.csv)")


def test_analyze_only_on_an_empty_runs_csv_exits_2_naming_it(tmp_path, capsys):
    root = make_study(tmp_path / "s", seeds=2, items=False)
    (root / "runs.csv").write_bytes(b"")
    assert main(["study", "--analyze-only", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{root / 'runs.csv'} is empty (0 bytes" in err and "No columns to parse" not in err
    assert f"restore it from a copy: {root} has no runs/ folder to rebuild it from" in err


def test_blank_generated_tokens_names_the_rows_and_the_rebuild(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    table = _blank(root, "generated_tokens", [2, 9])
    df = load_runs(root)
    why = recorded_axes(df)["generated_tokens"]
    rows = [table[3], table[10]]  # file lines 4 and 11
    assert why == (f"runs.csv has blank generated_tokens cells at line 4 (arm {rows[0][0]}, seed {rows[0][1]}, update "
                   f"{rows[0][2]}), line 11 (arm {rows[1][0]}, seed {rows[1][1]}, update {rows[1][2]}): every eval "
                   f"records generated_tokens, so runs.csv was edited or damaged; {restore_runs_csv_fix(root)}, then "
                   "analyse again to compare at generated_tokens")
    assert "re-run the study" not in why
    assert matched_budgets(df)["generated_tokens"] == {"budget": None, "recorded": False, "final_eval": False,
                                                       "source": why}
    assert recorded_axes(df)["updates"] is None


def test_a_column_never_recorded_keeps_the_old_reason(tmp_path):
    root = make_study(tmp_path / "s", seeds=2, flops=False)
    assert recorded_axes(load_runs(root))["flops"] == ("runs.csv has no flops values (runs made before it was "
                                                       "recorded); re-run the study to compare at flops")


def test_blank_accuracy_warns_naming_the_rows_and_the_eval_is_left_out(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    table = _blank(root, "accuracy", [1])  # grpo seed 0, update 2: file line 3
    assert table[2][:3] == ["grpo", "0", "2"]
    with pytest.warns(UserWarning) as rec:
        df = load_runs(root)
    msg = str(rec[0].message)
    assert msg.startswith(f"{root / 'runs.csv'}: 1 eval(s) have a blank accuracy cell (line 3 (arm grpo, seed 0, "
                          "update 2)): the analysis reads those runs without these evals")
    assert msg.endswith(restore_runs_csv_fix(root))
    reads = read_runs(_runs(df), "updates", 2.0)
    assert (reads[("grpo", 0)]["status"], reads[("grpo", 0)]["updates"]) == ("gap_exceeded", [0, 5])  # eval gone
    assert reads[("grpo", 1)]["status"] == "exact"


def test_a_whole_column_blank_is_no_damage_warning(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = load_runs(root)  # accuracy_sampled is blank everywhere (not measured): no warning
    assert df["accuracy_sampled"].isna().all() and df.attrs["csv_lines"][0] == 2


def test_blank_lines_do_not_shift_the_named_lines(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    _blank(root, "generated_tokens", [2])
    path = root / "runs.csv"
    text = path.read_text().splitlines()
    path.write_text("\n".join(text[:3] + [""] + text[3:]) + "\n")  # a blank line 4: the data row 3 is now line 5
    assert "at line 5 (arm grpo, seed 0, update 5)" in recorded_axes(load_runs(root))["generated_tokens"]


def test_blank_seed_is_refused_naming_the_line(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    _blank(root, "seed", [5])
    with pytest.raises(AnalysisError, match=r"runs.csv has a blank 'seed' cell at line 7 \(arm grpo, seed nan, "
                                            r"update 2\): runs.csv was edited or damaged; rebuild it from the run "
                                            r"folders"):
        load_runs(root)


def test_a_line_cut_short_is_named_and_its_missing_cells_read_as_blank(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    path = root / "runs.csv"
    lines = path.read_text().splitlines()
    n_cols = len(lines[0].split(","))
    lines[-1] = ",".join(lines[-1].split(",")[: n_cols - 2])  # the last line lost its last two fields
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=rf"runs.csv: line {len(lines)} \({n_cols - 2} of {n_cols} fields\) look\(s\) "
                                         r"cut: the file was cut or edited, missing cells are read as blank") as rec:
        df = load_runs(root)
    assert "rebuild it from the run folders" in str(rec[0].message)
    assert len(df) == len(lines) - 1  # the row is kept
    with warnings.catch_warnings():  # an intact file: no such warning
        warnings.simplefilter("error")
        make_study(tmp_path / "t", seeds=2)
        load_runs(tmp_path / "t")


def _copy_row(root, i, accuracy=None):
    """Append a copy of data row ``i`` (0-based) of root/runs.csv, its accuracy set to ``accuracy`` if given;
    returns (the copied row's line, the new line)."""
    path = root / "runs.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    row = list(table[i + 1])
    if accuracy is not None:
        row[table[0].index("accuracy")] = accuracy
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table + [row])
    return i + 2, len(table) + 1


def test_one_eval_on_two_lines_with_different_values_is_refused_naming_both(tmp_path, capsys):
    root = make_study(tmp_path / "s", seeds=2)
    first, copy = _copy_row(root, 3, accuracy="0.01")
    with pytest.raises(AnalysisError) as info:
        load_runs(root)
    assert (f"runs.csv records the same eval (arm, seed, update) twice with different values: arm grpo, seed 0, "
            f"update 10 (lines {first}, {copy}); runs.csv was edited or damaged and which line is right cannot be "
            "told; rebuild it from the run folders") in str(info.value)
    assert main(["study", "--analyze-only", "--out", str(root)]) == 2
    assert "twice with different values" in capsys.readouterr().err


def test_an_exact_copy_of_a_line_is_warned_and_read_once(tmp_path):
    clean = load_runs(make_study(tmp_path / "c", seeds=2))
    root = make_study(tmp_path / "s", seeds=2)
    _, copy = _copy_row(root, 3)
    with pytest.warns(UserWarning, match=rf"runs.csv: 1 line\(s\) copy an earlier line exactly \(line {copy}\): each "
                                         r"eval is read once"):
        df = load_runs(root)
    assert df.equals(clean)


def test_an_accuracy_in_points_is_refused_naming_the_line(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    path = root / "runs.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    j = table[0].index("accuracy_sampled")
    table[4][j] = "61.5"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table)
    with pytest.raises(AnalysisError, match=r"runs.csv: accuracy_sampled must be a fraction in \[0, 1\] \(runs.csv "
                                            r"records fractions; reports print points\), got 61.5 at line 5 \(arm "
                                            r"grpo, seed 0, update 10\)"):
        load_runs(root)


@pytest.mark.parametrize("damage", ["cut", "text"])
def test_damaged_per_item_results_are_refused_naming_the_file_and_leave_no_reanalysis_folder(tmp_path, capsys, damage):
    from study_helpers import aggregate_items

    root = make_study(tmp_path / "s", seeds=2)
    aggregate_items(root)
    assert main(["study", "--analyze-only", "--out", str(root)]) == 0  # the study's own analysis.json
    capsys.readouterr()
    gz = root / "eval_items.jsonl.gz"
    gz.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2] if damage == "cut" else b"hello")
    assert main(["study", "--analyze-only", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"gradprobe study: error: {gz} cannot be read (" in err
    assert ("the per-item results were cut or damaged; restore the file from the study, or, where its run folders "
            f"are kept, `gradprobe study '{root / 'plan.toml'}' --out '{root}'` rewrites it") in err
    assert not (root / "reanalysis").exists()


def test_analyze_only_names_a_line_cut_short_once(tmp_path, capsys):
    root = make_study(tmp_path / "s", seeds=2)
    assert main(["study", "--analyze-only", "--out", str(root)]) == 0  # analysis.json: the next goes to reanalysis/
    capsys.readouterr()
    path = root / "runs.csv"
    lines = path.read_text().splitlines()
    whole = lines[-1]
    lines[-1] = ",".join(lines[-1].split(",")[:-2])
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["study", "--analyze-only", "--out", str(root)]) == 0
    assert sum("look(s) cut: the file was cut or edited" in str(w.message) for w in caught) == 1
    path.write_text("\n".join(lines[:-1] + [whole]))  # the last line whole, but no line break after it: may be cut
    with pytest.warns(UserWarning, match=rf"runs.csv: line {len(lines)} \(the last line, no line break after "
                                         r"it\) look\(s\) cut"):
        load_runs(root)


def test_a_blank_flops_cell_in_a_run_that_records_flops_is_damage_not_an_older_version(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    _blank(root, "flops", [3])
    why = recorded_axes(load_runs(root))["flops"]
    assert why.startswith("runs.csv has blank flops cells at line 5 (arm grpo, seed 0, update 10): every eval "
                          "records flops, so runs.csv was edited or damaged; rebuild it from the run folders"), why
    old = make_study(tmp_path / "old", seeds=2, flops=False)  # a study from before flops was recorded
    assert recorded_axes(load_runs(old))["flops"].startswith("runs.csv has no flops values (runs made before")


def test_blank_cells_names_only_the_masked_blank_cells(tmp_path):
    """The mask narrows which blank cells count (recorded_axes: only within a run that records the column)."""
    import numpy as np

    from gradprobe.study.reading import blank_cells

    root = make_study(tmp_path / "s", seeds=2)
    table = _blank(root, "flops", [2, 9])
    df = load_runs(root)
    everything = blank_cells(df, "flops")
    assert everything.startswith("line 4 (arm ") and ", line 11 (arm " in everything
    only_first = np.zeros(len(df), dtype=bool)
    only_first[int(np.flatnonzero(df["flops"].isna().to_numpy())[0])] = True
    r = table[3]
    assert blank_cells(df, "flops", only_first) == f"line 4 (arm {r[0]}, seed {r[1]}, update {r[2]})"
    assert blank_cells(df, "flops", ~df["flops"].isna().to_numpy()) is None  # the mask holds no blank cell
    df["flops"] = np.nan
    assert blank_cells(df, "flops") is None  # a column blank everywhere was not recorded: no damage to name
    assert blank_cells(df, "flops", np.ones(len(df), dtype=bool)).startswith("line 2 (arm ")


def test_a_cut_line_loses_its_accuracy_in_the_analysis_as_in_the_reference_curve(tmp_path):
    """A line that looks cut (fewer fields, or the last line with no line break after it, which may hold
    ``0.`` for ``0.74``) is read without its accuracy by ``load_runs``, the same evals that
    ``ReferenceCurve.from_study`` leaves out, and is named by one warning (not again as a blank accuracy cell)."""
    import numpy as np

    from gradprobe.forecast import ReferenceCurve

    root = make_study(tmp_path / "s", seeds=2)
    path = root / "runs.csv"
    lines = path.read_text().splitlines()
    grpo = [i for i, s in enumerate(lines) if s.startswith("grpo,")]
    short, last, blank = grpo[2], grpo[-1], grpo[1]
    lines[short] = lines[short].rsplit(",", 1)[0]  # loses its last field
    cells = lines[blank].split(",")
    cells[lines[0].split(",").index("accuracy")] = ""  # a blank accuracy cell on a whole line
    lines[blank] = ",".join(cells)
    lines = lines[:last + 1]  # grpo's last line ends the file, every field kept, no line break after it
    path.write_text("\n".join(lines))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = load_runs(root)
    messages = [str(w.message) for w in caught]
    assert sum(f"line {short + 1} (" in m and f"line {last + 1} (the last line" in m and "look(s) cut" in m
               for m in messages) == 1, messages
    blanks = [m for m in messages if "blank accuracy cell" in m]  # the cut lines are not counted again
    assert len(blanks) == 1 and f": 1 eval(s) have a blank accuracy cell (line {blank + 1} (arm grpo" in blanks[0]
    at = {int(n): i for i, n in enumerate(df.attrs["csv_lines"])}
    for n in (short + 1, last + 1):
        assert np.isnan(df.loc[at[n], ["accuracy", "accuracy_sampled"]].to_numpy(float)).all()
        assert df.loc[at[n], "generated_tokens"] == float(lines[n - 1].split(",")[3])  # the rest is read
    kept = df[(df["arm"] == "grpo") & df["accuracy"].notna()]
    assert len(kept) == len(grpo) - 3
    curve = ReferenceCurve.from_study(root)
    points = curve.points.sort_values(["seed", "update"])
    assert list(zip(points["seed"], points["update"])) == sorted(
        zip(kept["seed"].astype(str), kept["update"].astype(float)))
    np.testing.assert_allclose(points["accuracy"].to_numpy(float),
                               100 * kept.sort_values(["seed", "update"])["accuracy"].to_numpy(float), atol=1e-9)


def _set_cell(root, col: str, row: int, value: str) -> list:
    """Write ``value`` into the ``col`` cell of data row ``row`` (0-based, file order) of root/runs.csv."""
    path = root / "runs.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    table[row + 1][table[0].index(col)] = value
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table)
    return table


def _refused(tmp_path, col: str, row: int, value: str) -> tuple[str, str]:
    """Load a study whose ``col`` cell of data row ``row`` is ``value``; returns (the refusal's text, ``line L
    (arm A, seed S, update U)`` naming that row)."""
    root = make_study(tmp_path / "s", seeds=2)
    arm, seed, update = _set_cell(root, col, row, value)[row + 1][:3]
    with pytest.raises(AnalysisError) as e:
        load_runs(root)
    assert str(e.value).startswith(f"{root / 'runs.csv'}: ")
    assert str(e.value).endswith(f"; {restore_runs_csv_fix(root)}")
    return str(e.value), f"line {row + 2} (arm {arm}, seed {seed}, update {update})"


@pytest.mark.parametrize("value", ["inf", "-inf"])
def test_an_infinite_accuracy_is_refused_naming_the_line(tmp_path, value):
    """An accuracy cell 'inf' passed the [0, 1] check (it tested finite values only) and loaded as +inf."""
    message, where = _refused(tmp_path, "accuracy", 3, value)
    assert (f"runs.csv: accuracy must be a fraction in [0, 1] (runs.csv records fractions; reports print points), got "
            f"{value} at {where}; ") in message


@pytest.mark.parametrize("col, value, unit", [("generated_tokens", "-8660", "generated tokens"),
                                              ("generated_tokens", "inf", "generated tokens"),
                                              ("device_seconds", "-1.5", "training device-seconds"),
                                              ("flops", "-2e9", "FLOPs")])
def test_a_negative_or_infinite_cost_is_refused_naming_the_line(tmp_path, col, value, unit):
    """Negative generated_tokens (every line) loaded without a word, and calib and the analysis read them as
    costs; a blank cell stays the analysis's to judge (recorded_axes), as before."""
    message, where = _refused(tmp_path, col, 5, value)
    assert (f"runs.csv: {col} must be a finite number >= 0 (the {unit} charged up to that eval), got "
            f"{float(value):g} at {where}; ") in message


def test_no_accuracy_on_any_line_is_refused(tmp_path):
    root = make_study(tmp_path / "s", seeds=2)
    n = len(_blank(root, "accuracy", [])) - 1
    _blank(root, "accuracy", range(n))
    _blank(root, "accuracy_sampled", range(n))
    with pytest.raises(AnalysisError, match=r"runs.csv: no eval records an accuracy \(the accuracy and "
                                            r"accuracy_sampled columns are blank or NaN on every line"):
        load_runs(root)
