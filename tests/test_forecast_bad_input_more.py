"""Bad input to the forecast's readers: a study's matched budget, a saved curve's seed labels, an accuracy that
underflows to 0.

Before this change: ``study_forecasts`` read ``analysis.json``'s ``matched.generated_tokens.budget`` with ``float()``
unchecked (``true`` forecast at a budget of 1 token, ``"abc"`` said only "could not convert string to float", NaN and
0 went on to the forecaster), where ``calib rows`` refuses the same field naming the file, the field and the
re-analysis; a saved curve accepted an empty or blank seed label (``""``: no source gives one) and ``ReferenceCurve``
wrote one, a CSV seed cell of spaces was a seed of its own, and a non-text entry of ``seed_labels`` was named only as
the whole list; an accuracy cell ``-1e-400`` (0 to float precision) was read as -0.0 (the note's range said ``-0``)
where ``1e-400`` is read as 0.0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from calib.dataset import _token_budget
from calib.integrity import StudyFormatError
from gradprobe.forecast import ReferenceCurve, study_forecasts
from gradprobe.forecast.curve_fit import CurveError
from gradprobe.forecast.curve_file import REBUILD, REBUILD_HOW
from gradprobe.forecast.study import matched_token_budget
from study_helpers import shipped_copy

REPO = Path(__file__).resolve().parents[1]

FIX = ("re-analyse the study with `gradprobe study '{s}/plan.toml' --analyze-only --overwrite-analysis --out '{s}'` "
       "(it rebuilds analysis.json from runs.csv)")
BUDGET = "a finite number > 0 of generated tokens"
BOOL = " (a boolean is never read as 1 or 0)"
HUGE = "1000000000...0000000000 (an integer of 401 digits, too large for a float)"
LABEL = ("it must be text with a visible character (the seed's label: the run's seed as text, e.g. \"0\", or its run "
         "name)")


# ----------------------------------------------------------------------------- 1. the matched budget

@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return shipped_copy("study_tiny", tmp_path_factory.mktemp("budget") / "s")


def _with_budget(study: Path, value, key: str = "generated_tokens") -> dict:
    """``study``'s analysis.json with the matched budget of ``key`` set to ``value`` (``generated_tokens`` renamed
    ``tokens`` for the older key), written and read back as JSON (NaN and Infinity as json writes them)."""
    doc = json.loads((study / "analysis.json").read_text())
    if key != "generated_tokens":
        doc["matched"][key] = doc["matched"].pop("generated_tokens")
    doc["matched"][key]["budget"] = value
    (study / "analysis.json").write_text(json.dumps(doc))
    return json.loads((study / "analysis.json").read_text())


@pytest.mark.parametrize("value, shown", [
    (True, "true" + BOOL), (False, "false" + BOOL), ("abc", '"abc"'), ("250000", '"250000"'),
    (float("nan"), "NaN"), (float("inf"), "Infinity"), (0, "0"), (-250000.0, "-250000.0"), (10 ** 400, HUGE),
    (None, "null"), ([250000], "[250000]"),
], ids=["true", "false", "text", "number-as-text", "nan", "inf", "zero", "negative", "400-digits", "null", "list"])
def test_a_study_budget_that_is_no_finite_positive_number_is_refused_by_file_field_and_fix(study, value, shown):
    analysis = _with_budget(study, value)
    want = (f"{study}/analysis.json field matched.generated_tokens.budget is {shown}, not {BUDGET}; "
            + FIX.format(s=study))
    with pytest.raises(ValueError) as e:
        study_forecasts(study)
    assert str(e.value) == want
    # the same refusal, word for word, as calib rows gives for the field (one rule, one wording)
    with pytest.raises(StudyFormatError) as c:
        _token_budget(analysis, study)
    assert str(c.value) == want
    with pytest.raises(StudyFormatError) as shared:
        matched_token_budget(analysis, study, error=StudyFormatError)
    assert str(shared.value) == want


def test_an_older_analysis_budget_is_named_by_its_own_key_and_a_missing_one_names_the_fix(study):
    _with_budget(study, True, key="tokens")
    with pytest.raises(ValueError, match=r"field matched\.tokens\.budget is true \(a boolean is never read as 1 or "
                                         r"0\), not a finite number > 0 of generated tokens; re-analyse the study"):
        study_forecasts(study)
    doc = json.loads((study / "analysis.json").read_text())
    del doc["matched"]["tokens"]["budget"]
    (study / "analysis.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError) as e:
        study_forecasts(study)
    assert str(e.value) == (f"{study}/analysis.json: matched.generated_tokens.budget is missing; "
                            + FIX.format(s=study))


def test_a_good_budget_is_read_as_its_float():
    assert matched_token_budget({"matched": {"generated_tokens": {"budget": 250000}}}, Path("S")) == 250000.0
    assert matched_token_budget({"matched": {"tokens": {"budget": 1.5}}}, Path("S")) == 1.5
    assert type(matched_token_budget({"matched": {"tokens": {"budget": np.int64(7)}}}, Path("S"))) is float


# ----------------------------------------------------------------------------- 2. seed labels

UPDATES = [0, 5, 10, 20, 40, 80]
ACC_A = [20.0, 30.0, 45.0, 60.0, 70.0, 72.0]
ACC_B = [22.0, 33.0, 47.0, 58.0, 69.0, 74.0]


def _curve(seeds=("0", "1")) -> ReferenceCurve:
    return ReferenceCurve(updates=UPDATES * 2, accuracy=ACC_A + ACC_B,
                          seeds=[seeds[0]] * len(UPDATES) + [seeds[1]] * len(UPDATES), n_replicates=20)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    path = _curve().save(tmp_path_factory.mktemp("curve") / "curve.json")
    return json.loads(path.read_text())


def _load_edited(tmp_path: Path, doc: dict, edit) -> ReferenceCurve:
    doc = json.loads(json.dumps(doc))
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return ReferenceCurve.load(path)


def _relabel(old: str, new):
    """Every point of seed ``old`` relabelled ``new``, ``seed_labels`` to match (the fit and its replicates stay
    valid: the labels keep their order)."""
    def edit(doc):
        doc["points"]["seed"] = [new if s == old else s for s in doc["points"]["seed"]]
        doc["seed_labels"] = [new if s == old else s for s in doc["seed_labels"]]
    return edit


@pytest.mark.parametrize("label, shown", [("", '""'), ("  ", '"  "'), ("\t", '"\\t"')],
                         ids=["empty", "spaces", "tab"])
def test_a_blank_seed_label_is_refused_naming_the_point_and_the_fix(tmp_path, saved, label, shown):
    with pytest.raises(CurveError) as e:
        _load_edited(tmp_path, saved, _relabel("0", label))
    assert str(e.value) == (f"reference curve file {str(tmp_path / 'edited.json')!r}: field points.seed[0] is {shown}, "
                            f"{LABEL}; {REBUILD}")


@pytest.mark.parametrize("label, shown", [
    (True, "true"), (None, "null"), ([0], "[0]"), ({"seed": 0}, '{"seed": 0}'), (0, "0"), (1.5, "1.5"),
], ids=["true", "null", "list", "object", "integer", "float"])
def test_a_seed_label_that_is_not_text_is_refused_naming_the_point_and_the_fix(tmp_path, saved, label, shown):
    with pytest.raises(CurveError) as e:
        _load_edited(tmp_path, saved, lambda d: d["points"]["seed"].__setitem__(7, label))
    assert str(e.value) == (f"reference curve file {str(tmp_path / 'edited.json')!r} is damaged: field points.seed[7] "
                            f"is {shown}, {LABEL}; {REBUILD_HOW}")


@pytest.mark.parametrize("labels, field, shown, damaged", [
    (["0", True], "seed_labels[1]", "true", True), ([None, "1"], "seed_labels[0]", "null", True),
    (["0", 1], "seed_labels[1]", "1", True), (["", "1"], "seed_labels[0]", '""', False),
    ("0,1", "seed_labels", '"0,1" (text)', True),
], ids=["true", "null", "integer", "empty", "not-a-list"])
def test_a_seed_labels_entry_that_is_no_label_is_refused_by_its_index(tmp_path, saved, labels, field, shown, damaged):
    with pytest.raises(CurveError) as e:
        _load_edited(tmp_path, saved, lambda d: d.__setitem__("seed_labels", labels))
    head = f"reference curve file {str(tmp_path / 'edited.json')!r}"
    if field == "seed_labels":
        want = f"{head} is damaged: field seed_labels is {shown}, it must be a list (each seed of points.seed once)"
        assert str(e.value) == f"{want}; {REBUILD_HOW}"
    elif damaged:
        assert str(e.value) == f"{head} is damaged: field {field} is {shown}, {LABEL}; {REBUILD_HOW}"
    else:
        assert str(e.value) == f"{head}: field {field} is {shown}, {LABEL}; {REBUILD}"


def test_good_labels_still_load_and_a_curve_with_a_blank_label_is_not_written(tmp_path, saved):
    loaded = _load_edited(tmp_path, saved, _relabel("1", "run-b"))
    assert loaded.seed_labels == ["0", "run-b"]
    no_list = _load_edited(tmp_path, saved, lambda d: d.pop("seed_labels"))  # optional: the points' seeds
    assert no_list.seed_labels == ["0", "1"]
    path = tmp_path / "blank.json"
    with pytest.raises(CurveError) as e:
        _curve(seeds=(" ", "1")).save(path)
    assert str(e.value) == ("seed label \" \" of the curve is blank: a saved curve's seed label is text with a visible "
                            "character (the seed's label: the run's seed as text, e.g. \"0\", or its run name); give "
                            "each seed such a label (ReferenceCurve's seeds=), then save")
    assert not path.exists()


def test_a_csv_seed_cell_of_spaces_is_an_empty_cell_not_a_seed(tmp_path):
    rows = [f"{u},{a / 100},0" for u, a in zip(UPDATES, ACC_A)] + [f"{u},{a / 100},1" for u, a in zip(UPDATES, ACC_B)]
    rows.insert(3, "15,0.5,   ")  # line 5
    path = tmp_path / "curve.csv"
    path.write_text("update,accuracy,seed\n" + "\n".join(rows) + "\n")
    c = ReferenceCurve.from_csv(path)
    assert c.seed_labels == ["0", "1"] and len(c.points) == 12 and 15.0 not in set(c.points["update"])
    assert any(f"1 line(s) of {path}" in n and "line 5 column 'seed'" in n for n in c.notes)


# ----------------------------------------------------------------------------- 3. an accuracy that underflows to 0

def _read(reader: str, cell: str, tmp_path: Path) -> ReferenceCurve:
    """A two-seed curve (fractions) whose first eval of seed 0 (update 0) is written as ``cell``, read by ``reader``."""
    evals = [(s, u, a / 100) for s, acc in ((0, ACC_A), (1, ACC_B)) for u, a in zip(UPDATES, acc)]
    text = [(s, u, cell if (s, u) == (0, 0) else repr(a)) for s, u, a in evals]
    if reader == "csv":
        path = tmp_path / "c.csv"
        path.write_text("update,accuracy,seed\n" + "".join(f"{u},{a},{s}\n" for s, u, a in text))
        return ReferenceCurve.from_csv(path)
    def per_seed(folder: str, name: str, render) -> list[Path]:
        """One file ``tmp_path/<folder><seed>/<name>`` per seed, ``render(evals of the seed)`` its text."""
        paths = [tmp_path / f"{folder}{seed}" / name for seed in (0, 1)]
        for seed, path in enumerate(paths):
            path.parent.mkdir()
            path.write_text(render([(u, a) for s, u, a in text if s == seed]))
        return paths

    if reader == "metrics":
        return ReferenceCurve.from_metrics(per_seed("seed", "metrics.jsonl", lambda ev: "".join(
            f'{{"eval": true, "update": {u}, "greedy_accuracy": {a}}}\n' for u, a in ev)))
    if reader == "trl":
        return ReferenceCurve.from_trl_state(per_seed("trl", "trainer_state.json", lambda ev: (
            '{"log_history": [' + ", ".join(f'{{"step": {u}, "eval_accuracy": {a}}}' for u, a in ev) + "]}")))
    if reader == "study":
        study = shipped_copy("study_tiny", tmp_path / "s")
        lines = (study / "runs.csv").read_text().splitlines(True)
        header = lines[0].split(",")
        first = lines[1].split(",")
        assert first[header.index("arm")] == "grpo" and first[header.index("update")] == "0"
        first[header.index("accuracy")] = cell
        lines[1] = ",".join(first)
        (study / "runs.csv").write_text("".join(lines))
        (study / "analysis.json").unlink()  # a study before its analysis: else the edited update-0 read is refused
        return ReferenceCurve.from_study(study, n_replicates=20)
    # a saved curve whose update-0 point of seed 0 is written as the cell (its R0 the mean of the update-0 points)
    curve = ReferenceCurve(updates=[u for _, u, _ in evals], accuracy=[0.0 if (s, u) == (0, 0) else 100 * a
                                                                      for s, u, a in evals],
                           seeds=[str(s) for s, _, _ in evals], n_replicates=20)
    path = curve.save(tmp_path / "curve.json")
    doc = json.dumps(json.loads(path.read_text()))
    assert doc.count('"accuracy": [0.0, ') == 1
    path.write_text(doc.replace('"accuracy": [0.0, ', f'"accuracy": [{cell}, '))
    return ReferenceCurve.load(path)


@pytest.mark.parametrize("cell", ["1e-400", "-1e-400", "-0"])
@pytest.mark.parametrize("reader", ["csv", "metrics", "trl", "study", "saved"])
def test_an_accuracy_that_underflows_to_zero_is_read_as_zero_by_every_reader(tmp_path, reader, cell):
    c = _read(reader, cell, tmp_path)
    pts = c.points
    v = pts.loc[(pts["seed"] == "0") & (pts["update"] == 0), "accuracy"].to_numpy()
    assert v.size == 1 and v[0] == 0.0 and math.copysign(1.0, v[0]) == 1.0  # +0.0, not -0.0
    scale = [n for n in c.notes if "accuracy read as" in n]
    if reader != "saved":
        assert len(scale) == 1 and "range 0-" in scale[0] and "range -0" not in scale[0]


def test_a_studys_runs_csv_read_as_a_curve_csv_is_refused_for_its_arms_and_the_fix_works(tmp_path):
    """runs.csv holds every arm's evals: read as one curve they mixed (refused only as "the same eval twice", no
    reason); now refused naming the arms, and both fixes load: the study folder, and the grpo rows alone."""
    import pandas as pd

    runs = REPO / "data" / "study_tiny" / "runs.csv"
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_csv(runs)
    assert str(e.value) == (f"{runs} holds the evals of 5 arms (column 'arm': grpo, grpo_2xlr, hybrid_0.5, "
                            "mc_advantage, mc_value), as a study's runs.csv does: a reference curve is one arm's "
                            "evals; "
                            f"pass the study folder (`--reference-curve {runs.parent}` reads its grpo arm) or a CSV of "
                            "the reference arm's rows only")
    grpo = pd.read_csv(runs)
    grpo[grpo["arm"] == "grpo"].to_csv(tmp_path / "grpo.csv", index=False)
    one, study = ReferenceCurve.from_csv(tmp_path / "grpo.csv"), ReferenceCurve.from_study(runs.parent)
    key = ["seed", "update"]
    a, b = (c.points.assign(seed=c.points["seed"].astype(str)).sort_values(key).reset_index(drop=True)
            for c in (one, study))
    assert len(a) == len(b) == 36 and np.allclose(a["accuracy"], b["accuracy"]) and (a[key] == b[key]).all().all()


def test_a_budget_the_analysis_left_null_on_purpose_says_why_not_re_analyse(tmp_path):
    """An analysis writes matched.generated_tokens.budget null with its reason when the runs record no generated
    tokens: re-analysing writes null again, so the refusal gives the reason and the fix that works (a review's
    finding: it said "re-analyse")."""
    study = shipped_copy("study_tiny", tmp_path / "s")
    a = json.loads((study / "analysis.json").read_text())
    why = "runs.csv has no generated_tokens column"
    a["matched"]["generated_tokens"] = {"budget": None, "recorded": False, "final_eval": False, "source": why}
    with pytest.raises(ValueError) as e:
        matched_token_budget(a, study)
    assert str(e.value) == (f"{study}/analysis.json field matched.generated_tokens.budget is null: the study has no "
                            f"matched generated-token budget ({why}); forecasts are at a token budget: leave this "
                            "study out, or re-run it with [budget] generated_tokens")
    a["matched"]["generated_tokens"] = {"budget": None}  # null without the analysis' reason: damage, re-analyse
    with pytest.raises(ValueError, match="is null, not a finite number > 0 of generated tokens; re-analyse"):
        matched_token_budget(a, study)
