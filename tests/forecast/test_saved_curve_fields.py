"""Every field of a saved reference curve is checked on load, and each refusal names its field (FINDINGS 1, 2, 9).

- hand-edited seed-bootstrap ``replicates`` (R0 or B changed, all alike, counts that are not the draws), a ``status``
  the fit does not write, a bool-less ``r0_fixed``, negative ``standard_errors``: refused, naming the field;
- the ``metadata`` the forecast reads (``update_prompts``, ``update_group``, ``lr``, ``task``, ``model``): refused
  on load, before any compute (``gradprobe probe`` exits 2 with one line and makes no ``--out``);
- a damaged field is named (``params.A``, ``points.update[1]``, ``replicates[3]``) with the problem and the fix in
  one line, never an exception's text in place of the field;
- the shipped curves and curves saved by this gradprobe still load.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from forecast_helpers import synthetic_curve

from gradprobe.forecast import CurveError, ReferenceCurve, default_curve_path
from gradprobe.forecast import curve_file
from gradprobe.forecast.curve_file import FORMAT, REFIT_FIRST, REFIT_HASHED

CURVES = default_curve_path().parent
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]
FIX = "rebuild it from its source (ReferenceCurve.from_study"
GARBLE = ("float() argument", "could not convert", "reshape", "setting an array element", "is missing or invalid",
          "np.float64")


def _edited(tmp_path: Path, edit) -> Path:
    """A copy of the shipped curve with ``edit(document)`` applied, as a file."""
    d = json.loads(default_curve_path().read_text())
    edit(d)
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(d))
    return path


def _refused(path: Path, field: str) -> str:
    """The one-line refusal of ``path``, asserted to name the file, exactly ``field`` (as ``field FIELD ``) and the
    fix."""
    with pytest.raises(CurveError) as e:
        ReferenceCurve.load(path)
    msg = str(e.value)
    assert "\n" not in msg and repr(str(path)) in msg and FIX in msg, msg
    assert re.search(rf"\bfield {re.escape(field)} ", msg), (field, msg)
    assert not any(g in msg for g in GARBLE), msg
    return msg


def _set_all(column: int, value: float):
    return lambda d: [r.__setitem__(column, value) for r in d["replicates"]]


def _to_start(index: int):
    """Replicate ``index`` set to the main fit's params: where its refit starts, so no worse than the start (the
    cheap check passes) but worse than its refit."""
    def edit(d):
        p = d["params"]
        d["replicates"][index] = [p["R0"], p["A"], p["n_mid"], p["B"]]
    return edit


def _swap_counts(d):
    c = d["replicate_seed_counts"]
    c[0], c[1] = c[1], c[0]


# ---------------------------------------------------------------- the shipped and saved curves still load

def test_every_shipped_curve_still_loads():
    """Every reference curve in gradprobe/data/curves/ loads (forecast_validation.json there is calib's record of
    the forecasters, not a curve, and is named as such)."""
    loaded = []
    for path in sorted(CURVES.iterdir()):
        d = json.loads(path.read_text())
        if d.get("format") != FORMAT:
            assert path.name == "forecast_validation.json", path
            with pytest.raises(CurveError, match="is not a reference curve"):
                ReferenceCurve.load(path)
            continue
        c = ReferenceCurve.load(path)
        assert len(c.replicates) == len(d["replicates"]) and c.metadata == d["metadata"]
        loaded.append(path.name)
    assert "tiny_frontier_grpo.json" in loaded


@pytest.mark.parametrize("kw", [
    dict(seeds=3, noise=0.3, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4, "task": "chain_sum",
                                        "model": "tiny", "loss_type": "grpo", "max_new_tokens": 80}),
    dict(seeds=3, noise=0.3, B=2.0, metadata={"update_prompts": 16.0, "update_group": None, "lr": None}),
    dict(seeds=1, noise=0.3),  # one seed: no replicates
    dict(seeds=4, noise=0.5, n_replicates=7, mode="empirical"),
    dict(seeds=2, noise=0.5, n_replicates=0),
    dict(seeds=3, noise=0.0),  # an exact fit
], ids=["metadata", "B-fixed", "one-seed", "7-replicates-empirical", "no-replicates", "exact"])
def test_curves_saved_by_this_gradprobe_still_load(tmp_path, kw):
    c = synthetic_curve(**kw)
    d = ReferenceCurve.load(c.save(tmp_path / "c.json"))
    assert d.params == c.params and d.status == c.status and d.metadata == c.metadata
    np.testing.assert_array_equal(d.replicates, c.replicates)
    np.testing.assert_array_equal(d.replicate_seed_counts, c.replicate_seed_counts)


def test_curves_without_update_zero_and_with_a_seed_lacking_it_still_load(tmp_path):
    n = [2, 5, 10, 20, 40] * 3 + [0, 0]
    y = [20, 30, 36, 40, 42, 21, 29, 37, 41, 43, 19, 31, 35, 39, 41, 12, 12]
    seeds = ["0"] * 5 + ["1"] * 5 + ["2"] * 5 + ["0", "1"]  # seed 2 has no eval at update 0
    for kw in (dict(updates=n[:15], accuracy=y[:15], seeds=seeds[:15]),  # R0 fitted
               dict(updates=n, accuracy=y, seeds=seeds),  # some replicates keep the main fit's R0
               dict(updates=n + [0], accuracy=y + [12], seeds=seeds + ["3"])):  # seed 3: its update-0 eval only
        c = ReferenceCurve(**kw)
        d = ReferenceCurve.load(c.save(tmp_path / "c.json"))
        np.testing.assert_array_equal(d.replicates, c.replicates)


def test_a_load_refits_only_a_few_replicates(monkeypatch):
    """The replicate check's cost is bounded: the first REFIT_FIRST replicates and REFIT_HASHED more are refitted
    (plus check_fit's one refit of the points), whatever the number of replicates."""
    calls = []
    real = curve_file.fit_sigmoid
    monkeypatch.setattr(curve_file, "fit_sigmoid", lambda *a, **k: calls.append(k.get("start")) or real(*a, **k))
    ReferenceCurve.load(default_curve_path())
    assert len(calls) == 1 + REFIT_FIRST + REFIT_HASHED
    assert sum(s is not None for s in calls) == REFIT_FIRST + REFIT_HASHED  # the replicates' refits start at params


# ---------------------------------------------------------------- 1: replicates, status, r0_fixed, standard errors

@pytest.mark.parametrize("edit,field,detail", [
    (_set_all(0, 10.0), "replicates[0] (R0)", r"is 10\.0 but the mean accuracy at update 0 of its resampled seeds "
                                               r"\(replicate_seed_counts\[0\] = \[3, 0, 0, 1\]\) is 67\.6"),
    (_set_all(3, 10.0), "replicates[0]", r"does not fit its resampled points .*rmse 7\.6\d* points, worse than the "
                                         r"1\.19\d* of the main fit's params its refit starts from"),
    (_set_all(1, 99.0), "replicates[0]", r"does not fit its resampled points"),
    (lambda d: d.__setitem__("replicates", [d["replicates"][0]] * len(d["replicates"])), "replicates[3]",
     r"does not fit its resampled points \(replicate_seed_counts\[3\] = \[0, 2, 2, 0\]\)"),
    (_to_start(1), "replicates[1]", r"does not fit its resampled points .* where its refit gives 1\.36"),
    (lambda d: d["replicates"][100].__setitem__(1, d["replicates"][100][1] + 0.5), "replicates[100]",
     r"does not fit its resampled points"),
    (lambda d: d.__setitem__("replicate_seed_counts", [[9, 9, 9, 9]] * 200), "replicate_seed_counts[0][0]",
     r"is 9, it must be an integer in \[0, 4\]"),
    (lambda d: d.__setitem__("replicate_seed_counts", [[2, 2, 2, 2]] * 200), "replicate_seed_counts[0]",
     r"is \[2, 2, 2, 2\] and sums to 8, but each replicate draws 4 seeds"),
    (_swap_counts, "replicate_seed_counts[0]",
     r"is \[0, 1, 2, 1\] but the seed bootstrap \(numpy PCG64\(20251015\), .*\) draws \[3, 0, 0, 1\]"),
    (lambda d: d["replicate_seed_counts"][5].__setitem__(2, 1.5), "replicate_seed_counts[5][2]",
     r"is 1\.5, it must be an integer in \[0, 4\]"),
    (lambda d: d["status"].__setitem__("A", "banana"), "status.A",
     r'is "banana", it must be one of identified, not_identified, at_bound'),
    (lambda d: d["status"].__setitem__("R0", "identified"), "status.R0", r'is "identified", it must be "fixed"'),
    (lambda d: d["status"].__setitem__("A", "not_identified"), "status.A",
     r'is "not_identified" but standard_errors\.A 19\.86\d* is below 22\.22'),
    (lambda d: d["status"].__setitem__("B", "at_bound"), "status.B",
     r'is "at_bound" but params\.B 0\.51\d* is not on a'),
    (lambda d: d.__setitem__("r0_fixed", False), "r0_fixed",
     r"is false but the points have evals at update 0"),
    (lambda d: d.__setitem__("r0_fixed", "yes"), "r0_fixed", r'is "yes" \(text\), it must be true or false'),
    (lambda d: d["standard_errors"].__setitem__("A", -5), "standard_errors.A",
     r"is -5\.0, it must be a finite number >= 0, or null"),
    (lambda d: d["standard_errors"].__setitem__("A", None), "status.A",
     r'is "identified" but standard_errors\.A is null'),
    (lambda d: d["standard_errors"].__setitem__("R0", 1.0), "standard_errors.R0", r"is given, but R0 is fixed"),
    (lambda d: d.__setitem__("seed_labels", ["a"]), "seed_labels", r'is \["a"\] but the points\' seeds are'),
    (lambda d: d.__setitem__("b_fixed", 5), "params.B", r"is 0\.51\d* but b_fixed is 5\.0"),
], ids=["R0=10", "B=10", "A=99", "all-alike", "one-at-its-start", "one-A+0.5", "counts-9s", "counts-2s",
        "counts-swapped",
        "count-1.5", "status-banana", "status-R0", "status-A-not-identified", "status-B-at-bound", "r0_fixed-false",
        "r0_fixed-text", "se-negative", "se-null-identified", "se-of-fixed-R0", "seed_labels", "b_fixed"])
def test_edited_replicates_and_fit_fields_are_refused_naming_the_field(tmp_path, edit, field, detail):
    msg = _refused(_edited(tmp_path, edit), field)
    assert re.search(re.escape(f"field {field} ") + detail, msg), msg


def test_replicate_edits_that_changed_the_forecast_interval_are_refused_before_any_forecast(tmp_path):
    """FINDINGS 1's edits each moved the printed interval with exit 0; now none reaches the forecast."""
    for i, edit in enumerate((_set_all(0, 10.0), _set_all(3, 10.0),
                              lambda d: d.__setitem__("replicates", [d["replicates"][0]] * 200))):
        sub = tmp_path / str(i)
        sub.mkdir()
        with pytest.raises(CurveError, match=r"field replicates\[\d+\]"):
            ReferenceCurve.load(_edited(sub, edit))


# ---------------------------------------------------------------- 2: the metadata the forecast reads

@pytest.mark.parametrize("key,value,shown,want", [
    ("update_prompts", "16", '"16" (text)', "a positive integer"),
    ("update_prompts", -16, "-16", "a positive integer"),
    ("update_prompts", 1e-9, "1e-09", "a positive integer"),
    ("update_prompts", 0, "0", "a positive integer"),
    ("update_prompts", 2.5, "2.5", "a positive integer"),
    ("update_prompts", True, "true", "a positive integer"),
    ("update_group", "8", '"8" (text)', "a positive integer"),
    ("update_group", 10 ** 400, None, "a positive integer"),
    ("lr", "abc", '"abc" (text)', "a finite number > 0"),
    ("lr", -1, "-1", "a finite number > 0"),
    ("lr", 0.0, "0.0", "a finite number > 0"),
    ("lr", math.nan, "nan", "a finite number > 0"),
    ("lr", math.inf, "inf", "a finite number > 0"),
    ("task", 5, "5", "text"),
    ("model", ["tiny"], '["tiny"]', "text"),
], ids=["prompts-text", "prompts-negative", "prompts-1e-9", "prompts-0", "prompts-2.5", "prompts-true", "group-text",
        "group-huge", "lr-text", "lr-negative", "lr-0", "lr-nan", "lr-inf", "task-number", "model-list"])
def test_metadata_the_forecast_reads_is_checked_on_load(tmp_path, key, value, shown, want):
    msg = _refused(_edited(tmp_path, lambda d: d["metadata"].__setitem__(key, value)), f"metadata.{key}")
    if shown is not None:
        assert f"field metadata.{key} is {shown}, it must be {want} (" in msg, msg
    assert "or null if unknown" in msg


def test_metadata_not_an_object_is_named_and_valid_metadata_loads(tmp_path):
    msg = _refused(_edited(tmp_path, lambda d: d.__setitem__("metadata", [1, 2])), "metadata")
    assert "field metadata is [1, 2], it must be an object" in msg
    for meta in (None, {}, {"update_prompts": 16.0, "update_group": 8, "lr": 1e-4, "task": None, "model": None,
                            "loss_type": None, "anything": [1, "x"]}):
        c = ReferenceCurve.load(_edited(tmp_path, lambda d: d.__setitem__("metadata", meta)))
        assert c.metadata == (meta or {})


@pytest.mark.parametrize("key,value,field", [("update_prompts", "16", "metadata.update_prompts"),
                                             ("update_prompts", 1e-9, "metadata.update_prompts"),
                                             ("lr", "abc", "metadata.lr")])
def test_probe_with_bad_curve_metadata_exits_2_in_one_line_before_any_compute(tmp_path, capsys, monkeypatch, key,
                                                                              value, field):
    from gradprobe.cli import main

    bad = _edited(tmp_path, lambda d: d["metadata"].__setitem__(key, value))
    out = tmp_path / "runs" / "probe"
    monkeypatch.chdir(tmp_path)
    assert main(["probe", *SMALL, "--reference-curve", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"gradprobe probe: error: reference curve file {str(bad)!r}: field {field} is "), err
    assert FIX in err
    assert not out.exists() and not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 9: a damaged field is named

@pytest.mark.parametrize("edit,field,detail", [
    (lambda d: d["params"].__setitem__("A", None), "params.A", "is null, it must be a finite number in [0, 100]"),
    (lambda d: d["params"].__setitem__("A", "89.8"), "params.A", 'is "89.8" (text), it must be a finite number'),
    (lambda d: d["params"].pop("B"), "params.B", "is missing"),
    (lambda d: d.__setitem__("params", "R0=67"), "params", 'is "R0=67" (text), it must be an object'),
    (lambda d: d.__setitem__("rmse", None), "rmse", "is null, it must be a finite number >= 0"),
    (lambda d: d["standard_errors"].__setitem__("A", "big"), "standard_errors.A", 'is "big" (text), it must be a'),
    (lambda d: d["replicates"][3].pop(), "replicates[3]", "has 3 values, it must have 4 (R0, A, n_mid, B)"),
    (lambda d: d["replicates"][3].__setitem__(1, None), "replicates[3] (A)", "is null, it must be a finite number"),
    (lambda d: d.__setitem__("replicates", []), "replicate_seed_counts", "has 200 rows but replicates has 0"),
    (lambda d: d["replicate_seed_counts"].pop(), "replicate_seed_counts", "has 199 rows but replicates has 200"),
    (lambda d: d["replicate_seed_counts"][7].pop(), "replicate_seed_counts[7]", "has 3 entries, it must have 4"),
    (lambda d: d["points"].pop("update"), "points.update", "is missing"),
    (lambda d: d["points"]["accuracy"].pop(), "points.accuracy", "has 35 entries but points.update has 36"),
    (lambda d: d["points"]["update"].__setitem__(1, "2"), "points.update[1]", 'is "2" (text), it must be a finite'),
    (lambda d: d["points"]["update"].__setitem__(1, -2), "points.update[1]",
     "is -2.0, it must be a finite number >= 0"),
    (lambda d: d["points"]["accuracy"].__setitem__(5, None), "points.accuracy[5]", "is null, it must be a finite"),
    (lambda d: d["points"]["seed"].__setitem__(0, 0), "points.seed[0]", "is 0, it must be text"),
    (lambda d: d.__setitem__("notes", "hello"), "notes", 'is "hello" (text), it must be a list of texts'),
    (lambda d: d.__setitem__("mode", "bogus"), "mode", "is \"bogus\", it must be one of 'sigmoid', 'empirical'"),
    (lambda d: d.__setitem__("b_fixed", "1"), "b_fixed", 'is "1" (text), it must be a finite number in [0.1, 10]'),
    (lambda d: d.pop("status"), "status", "is missing"),
], ids=["A-null", "A-text", "B-missing", "params-text", "rmse-null", "se-text", "replicate-3-values", "replicate-null",
        "replicates-empty", "counts-short", "counts-row-short", "points-update-missing", "points-accuracy-short",
        "points-update-text", "points-update-negative", "points-accuracy-null", "points-seed-number", "notes-text",
        "mode", "b_fixed-text", "status-missing"])
def test_a_damaged_field_is_named_with_its_problem_and_the_fix(tmp_path, edit, field, detail):
    msg = _refused(_edited(tmp_path, edit), field)
    assert f"field {field} {detail}" in msg, msg
