"""A study's ``runs.csv`` read as a reference curve (``ReferenceCurve.from_study``: ``gradprobe probe
--reference-curve STUDY``, ``gradprobe forecast``, :func:`~gradprobe.forecast.load_reference_curve`) is compared with
the study's ``analysis.json`` as ``calib rows`` compares them (:func:`gradprobe.study.coverage.stale_analysis`, by
:func:`gradprobe.forecast.analysis_reads.analysis_differences` in the forecast layer).

Found by a trial user: a grpo accuracy edited in runs.csv, with the per-item results (``eval_items.jsonl.gz``)
deleted, moved the verdict (-3.3 [-4.3, -2.2] to -4.4 [-6.1, -2.6]) without a word, while ``calib rows`` refused the
same folder. Now the curve is refused, naming the folder, the changed reads and the fix; a folder without
``analysis.json`` (a study still running or stopped before its analysis) is read as before.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curves import CurveError, ReferenceCurve
from gradprobe.forecast.study import rebuild_analysis
from gradprobe.forecast.study_items import restore_runs_csv_fix
from gradprobe.study.coverage import stale_analysis
from gradprobe.study.reading import load_runs
from study_helpers import shipped_copy

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (REPO / "data").glob("study_*") if (p / "analysis.json").is_file())
#: grpo seed 0's eval at update 10 in study_tiny: the read at its matched update budget (10, an exact read)
TINY_READ = "grpo,0,10,"
#: the user's edit there (0.739 -> 0.9) as stale_analysis (calib) phrases it
CHANGED = ("the accuracy analysis.json reads differs from runs.csv's now for 1 run(s): grpo seed 0 at updates = 10: "
           "73.9 points in analysis.json, 90 from runs.csv now (update 10: accuracy 0.9)")


def _edit(study: Path, start: str, col: str, new: str) -> str:
    """Set cell ``col`` of runs.csv's first line that starts with ``start`` to ``new``; returns the old cell."""
    lines = (study / "runs.csv").read_text().splitlines()
    header = lines[0].split(",")
    n = next(i for i, x in enumerate(lines) if x.startswith(start))
    fields = lines[n].split(",")
    old, fields[header.index(col)] = fields[header.index(col)], new
    lines[n] = ",".join(fields)
    (study / "runs.csv").write_text("\n".join(lines) + "\n")
    return old


def _now(study: Path) -> list[str]:
    """stale_analysis of the folder: calib's phrases for how its analysis.json differs from its runs.csv."""
    return stale_analysis(study, pd.read_csv(study / "runs.csv").drop_duplicates(["arm", "seed", "update"]))


def _refusal(study: Path, diffs: str, items: int | None = 1000) -> str:
    missing = (f"; the per-item results the analysis was made with ({items} held-out items) are missing too "
               f"({study / 'eval_items.jsonl.gz'}, or the run folders' eval_items.jsonl), so runs.csv's accuracies "
               "cannot be checked eval by eval: restore eval_items.jsonl.gz from a copy of the study") if items else ""
    return (f"{study}: analysis.json does not match runs.csv ({diffs}): runs.csv changed after the analysis, and the "
            f"reference curve would be fitted to runs.csv as it is now{missing}; put back the runs.csv the analysis "
            f"was made from: {restore_runs_csv_fix(study)}; or, if the edit was meant, "
            f"{rebuild_analysis(study)}, then read the curve again")


def test_an_accuracy_edited_at_a_matched_point_without_per_item_results_is_refused(tmp_path):
    study = shipped_copy("study_tiny", tmp_path / "tiny")  # no eval_items.jsonl.gz: the user deleted it
    curve = ReferenceCurve.from_study(study)  # the unchanged copy: the shipped folder's curve
    assert curve.params == ReferenceCurve.from_study(REPO / "data" / "study_tiny").params
    assert len(curve.points) == 36
    assert _edit(study, TINY_READ, "accuracy", "0.9") == "0.739"
    assert _now(study) == [CHANGED]  # calib's comparison sees it
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_study(study)
    assert str(e.value) == _refusal(study, CHANGED)


def test_the_refusal_names_what_calib_names(tmp_path):
    """An update-0 accuracy of another arm (the initial read, a mean over the arms), a grpo run's final eval (the
    generated-token budget, read at each run's final eval) and a grpo seed deleted: each refused with
    stale_analysis's phrases, the curve read from any accuracy column."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    _edit(study, "mc_value,2,0,", "accuracy", "0.7")  # 0.676 at update 0
    lines = (study / "runs.csv").read_text().splitlines()
    last = max(i for i, x in enumerate(lines) if x.startswith("grpo,1,"))
    assert lines[last].startswith("grpo,1,56,")
    _edit(study, "grpo,1,56,", "accuracy", "0.8")  # grpo seed 1's final eval (0.771)
    (study / "runs.csv").write_text("\n".join(x for x in (study / "runs.csv").read_text().splitlines()
                                              if not x.startswith("grpo,3,")) + "\n")
    diffs = _now(study)
    assert diffs[0] == "grpo: 4 seed(s) in analysis.json, 3 in runs.csv (seeds [0, 1, 2])"
    assert ("grpo seed 1 at generated_tokens = 250,000: 77.1 points in analysis.json, 80 from runs.csv now (update 56: "
            "accuracy 0.8)") in diffs[1]
    assert "seed 2 at update 0 (initial.per_seed, the mean over the arms): 67.6 points in analysis.json, " in diffs[1]
    for col in ("accuracy", "accuracy_sampled"):
        with pytest.raises(CurveError) as e:
            ReferenceCurve.from_study(study, accuracy_col=col)
        assert str(e.value) == _refusal(study, "; ".join(diffs))


def test_a_folder_without_analysis_json_is_read_as_before(tmp_path):
    """A study still running, or stopped before its analysis: nothing to compare with, the curve is read from
    runs.csv as it is; a damaged analysis.json is refused (as calib rows refuses it: a breaker cut it and edited
    runs.csv, and the curve was read without a word)."""
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    _edit(study, TINY_READ, "accuracy", "0.9")
    analysis = (study / "analysis.json").read_bytes()
    with pytest.raises(CurveError, match="analysis.json does not match runs.csv"):
        ReferenceCurve.from_study(study)
    (study / "analysis.json").unlink()
    points = ReferenceCurve.from_study(study).points
    assert points[(points["seed"] == "0") & (points["update"] == 10)]["accuracy"].tolist() == [pytest.approx(90.0)]
    (study / "analysis.json").write_bytes(analysis[:100])  # cut: no JSON
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_study(study)
    assert str(e.value).startswith(f"{study}/analysis.json is damaged (JSONDecodeError: ")
    assert str(e.value).endswith("so runs.csv cannot be checked against the analysis the study made from it; put the "
                                 "file back from a copy of the study, or "
                                 f"{rebuild_analysis(study)}, then read the curve again")
    (study / "analysis.json").write_text("[1, 2]")
    with pytest.raises(CurveError, match=r"is damaged \(it holds a JSON list, not an object\)"):
        ReferenceCurve.from_study(study)


def test_the_command_line_refuses_it_before_the_probe_runs(tmp_path, capsys, monkeypatch):
    study = shipped_copy("study_tiny", tmp_path / "tiny")
    _edit(study, TINY_READ, "accuracy", "0.9")
    with pytest.raises(CurveError) as e:
        load_reference_curve(str(study))
    assert str(e.value) == _refusal(study, CHANGED)
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe ran"))
    out = tmp_path / "probe"
    assert main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
                 "--group", "2", "--no-progress", "--reference-curve", str(study), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: {_refusal(study, CHANGED)}"
    assert not out.exists()


def test_either_fix_named_lets_the_curve_load(tmp_path):
    """The runs.csv the analysis was made from put back: the shipped curve; the edit meant and the study
    re-analysed (what `gradprobe study --analyze-only --overwrite-analysis` runs): the edited curve."""
    from gradprobe.study.analysis import analyze

    study = shipped_copy("study_tiny", tmp_path / "tiny")
    _edit(study, TINY_READ, "accuracy", "0.9")
    with pytest.raises(CurveError):
        ReferenceCurve.from_study(study)
    analyze(study, figures=False)
    points = ReferenceCurve.from_study(study).points
    assert points[(points["seed"] == "0") & (points["update"] == 10)]["accuracy"].tolist() == [pytest.approx(90.0)]
    shutil.copy(REPO / "data" / "study_tiny" / "runs.csv", study / "runs.csv")  # the analysis is the edited one now
    with pytest.raises(CurveError, match=r"grpo seed 0 at updates = 10: 90 points in analysis.json, 73.9 from "):
        ReferenceCurve.from_study(study)
    shutil.copy(REPO / "data" / "study_tiny" / "analysis.json", study / "analysis.json")
    assert ReferenceCurve.from_study(study).params == ReferenceCurve.from_study(REPO / "data" / "study_tiny").params


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_study_agrees_and_an_edit_is_phrased_as_calib_phrases_it(tmp_path, name):
    """The forecast layer's comparison (it may not import gradprobe.study) gives stale_analysis's phrases: none on
    each shipped study, the same ones after its first grpo run's accuracies are all raised by 0.01."""
    from gradprobe.forecast.analysis_reads import analysis_differences
    from gradprobe.forecast.csv_cells import read_csv_checked

    study = shipped_copy(name, tmp_path / name)
    path = study / "runs.csv"
    raw = path.read_bytes()
    assert analysis_differences(study, read_csv_checked(path, raw), raw) == [] == _now(study)
    df = pd.read_csv(path)
    first = int(df.loc[df["arm"] == "grpo", "seed"].min())  # 0, or 4 in the replicates
    run = (df["arm"] == "grpo") & (df["seed"] == first) & df["accuracy"].notna()
    df.loc[run, "accuracy"] = (df.loc[run, "accuracy"] + 0.01).clip(upper=1.0)
    df.to_csv(path, index=False)
    raw = path.read_bytes()
    diffs = analysis_differences(study, read_csv_checked(path, raw), raw)
    assert diffs == _now(study) and len(diffs) == 1 and f"grpo seed {first} at " in diffs[0]


def _read_evals(study: Path) -> set[tuple[str, str, str]]:
    """(arm, seed, update) as runs.csv spells them of every eval a read of analysis.json uses: update 0, and at each
    recorded matched point the run's final eval (``final_eval``) or the evals at and around the point."""
    analysis = json.loads((study / "analysis.json").read_text())
    df = pd.read_csv(study / "runs.csv")
    used = {(a, str(s), "0") for a, s in zip(df["arm"], df["seed"])}
    for axis, m in analysis["matched"].items():
        col = {"updates": "update"}.get(axis, axis)
        for (arm, seed), g in (df.groupby(["arm", "seed"]) if m["recorded"] else ()):
            x = g[col].to_numpy()
            k = int(np.searchsorted(x, m["budget"]))
            at = [len(x) - 1] if m["final_eval"] else [k - 1, k, k + 1]
            used |= {(arm, str(seed), str(g["update"].iloc[i])) for i in at if 0 <= i < len(x)}
    return used


def _random_edits(study: Path, rng: np.random.Generator) -> list[str]:
    """Edit runs.csv at random where no read of analysis.json looks (:func:`_read_evals`), the file's other bytes
    kept: 1 to 3 accuracies of one arm moved by 1 to 20 thousandths, an update of that arm moved between its
    neighbours, and an accuracy cell of another arm blanked (a lost eval); returns what was edited, for the failure
    message."""
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    acc, used = lines[0].split(",").index("accuracy"), _read_evals(study)
    edited, lost = rng.choice(sorted({r[0] for r in rows}), 2, replace=False)
    free = [i for i, r in enumerate(rows) if r[0] == edited and tuple(r[:3]) not in used]
    said = []
    for i in rng.choice(free, int(rng.integers(1, 4)), replace=False):
        old, step = float(rows[i][acc]), int(rng.choice([-1, 1])) * int(rng.integers(1, 21)) / 1000
        rows[i][acc] = f"{old + step if 0 <= old + step <= 1 else old - step:.5g}"
        said.append(f"accuracy of {rows[i][:3]} -> {rows[i][acc]}")
    i = int(rng.choice([i for i in free if rows[i - 1][:2] == rows[i][:2] == rows[i + 1][:2]
                        and int(rows[i + 1][2]) - int(rows[i - 1][2]) > 2]))
    ups = [u for u in range(int(rows[i - 1][2]) + 1, int(rows[i + 1][2])) if u != int(rows[i][2])]
    rows[i][2] = str(int(rng.choice(ups)))
    said.append(f"update of {rows[i][:2]} -> {rows[i][2]}")
    i = int(rng.choice([i for i, r in enumerate(rows) if r[0] == lost]))
    rows[i][acc] = ""
    said.append(f"accuracy of {rows[i][:3]} blanked")
    path.write_text("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n")
    return said


def _both_ways(study: Path) -> tuple[list[str], list[str]]:
    """(analysis_differences of runs.csv's bytes, as a curve reads it; stale_analysis of load_runs, as calib and the
    command line read it)."""
    from gradprobe.forecast.analysis_reads import analysis_differences
    from gradprobe.forecast.csv_cells import read_csv_checked

    path = study / "runs.csv"
    raw = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the blank cell's and the moved update's warnings
        return analysis_differences(study, read_csv_checked(path, raw), raw), stale_analysis(study, load_runs(study))


@pytest.mark.parametrize("name, seed", [("study_tiny_greso", 0), ("study_tiny_greso", 1), ("study_tiny_guided", 2),
                                        ("study_tiny_heldout4k", 3), ("study_tiny_losses", 4)])
def test_random_edits_are_told_alike_both_ways_and_as_the_analysis_reads_the_file(tmp_path, name, seed):
    """Edits at random where no read looks (:func:`_random_edits`): the curve's comparison and calib's give the same
    phrases, never none (each arm's fit tells them; a lost eval of another arm hides nothing), also for an
    analysis.json without promised gaps (an older analysis: neither reads the plan); the study re-analysed from the
    edited runs.csv, both give none: the check reads runs.csv as the analysis does (its reads, R0s and fits)."""
    from gradprobe.study.analysis import analyze

    study = shipped_copy(name, tmp_path / name)
    said = _random_edits(study, np.random.default_rng(seed))
    curve, calib = _both_ways(study)
    assert curve == calib and curve, said
    analysis = json.loads((study / "analysis.json").read_text())
    for m in analysis["matched"].values():
        m.pop("promised_gap", None)
    (study / "analysis.json").write_text(json.dumps(analysis))
    curve, calib = _both_ways(study)
    assert curve == calib and curve, said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyze(study, figures=False)
    assert _both_ways(study) == ([], []), said
