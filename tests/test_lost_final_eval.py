"""A run's final eval line deleted whole from a study's ``runs.csv`` is refused, not read as a shorter run.

Read as it was, the run ended at its last line left: the matched token budget of ``data/study_tiny`` moved from
250,000 to 187,500 and the printed reason blamed another budget ("a run stopped on another budget"), under a warning
only. The run's end is known from ``study.json`` (a finished run's ``updates``) or from its per-item results, so the
analysis (``gradprobe study --analyze-only``, :func:`gradprobe.study.analyze`, :func:`gradprobe.load_study`) now
refuses in one line naming runs.csv, the run, the missing update and the fix, as ``calib`` does already. A lost
interior eval still warns (a read across it is refused by the gap rule), and a run that really stopped earlier (its
``study.json`` and per-item results end where runs.csv does) is read as before, without a word.
"""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

from gradprobe import load_study
from gradprobe.cli import main
from gradprobe.study import AnalysisError, analyze
from gradprobe.study.reading import load_runs, restore_runs_csv_fix
from study_helpers import make_study

REPO = Path(__file__).resolve().parents[1]
LAST = "grpo_2xlr,3,57,"  # the last line of data/study_tiny/runs.csv: the final eval of arm grpo_2xlr, seed 3


def _tiny(dest: Path) -> Path:
    """A copy of the shipped study ``data/study_tiny`` (its analysis.json and per-item results kept; no figures)."""
    shutil.copytree(REPO / "data" / "study_tiny", dest, ignore=shutil.ignore_patterns("figures"))
    return dest


def _delete_lines(study: Path, starts: str) -> None:
    """Delete the runs.csv lines that start with ``starts`` (at least one), keeping the final line break."""
    lines = (study / "runs.csv").read_text().splitlines()
    kept = [x for x in lines if not x.startswith(starts)]
    assert len(kept) < len(lines)
    (study / "runs.csv").write_text("\n".join(kept) + "\n")


def _refusal(study: Path) -> str:
    """The refusal of a study whose last line (arm grpo_2xlr, seed 3, update 57) was deleted, as load_runs says it."""
    return (f"{study / 'runs.csv'} lost the final eval line(s) of run(s): arm grpo_2xlr, seed 3 ends at update 43 but "
            "lacks update(s) 57 (study.json) after it (study.json: a finished run's final eval is at the update "
            "study.json records): lines were deleted from runs.csv, so where these runs end is unknown (read as they "
            "are, they would end at their last line left, moving their last reads and the matched budgets earlier); "
            f"the analysis refuses to guess; {restore_runs_csv_fix(study)}")


def test_analyze_only_refuses_a_deleted_last_line_in_one_line(tmp_path, capsys):
    study = _tiny(tmp_path / "s")
    _delete_lines(study, LAST)
    assert main(["study", "--analyze-only", "--out", str(study)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"gradprobe study: error: {_refusal(study)}\n"
    assert "restore it from a copy: " in err and "grpo_2xlr, seed 3" in err and "lacks update(s) 57" in err
    assert not (study / "reanalysis").exists()  # the shipped analysis.json is kept; no empty re-analysis folder


def test_analyze_and_load_study_refuse_a_deleted_last_line(tmp_path):
    study = _tiny(tmp_path / "s")
    _delete_lines(study, LAST)
    for read in (lambda: analyze(study, write=False, figures=False), lambda: load_study(study)):
        with pytest.raises(AnalysisError) as info:
            read()
        assert isinstance(info.value, ValueError) and str(info.value) == _refusal(study)


def test_a_lost_final_eval_is_refused_from_the_per_item_results_alone(tmp_path):
    """make_study's study.json records no run's updates: the run folders' eval_items.jsonl tell the run's end."""
    study = make_study(tmp_path / "s", seeds=2)
    _delete_lines(study, "grpo,1,10,")  # grpo seed 1's final eval (updates 0/2/5/10)
    with pytest.raises(AnalysisError) as info:
        load_runs(study)
    msg = str(info.value)
    assert msg.startswith(f"{study / 'runs.csv'} lost the final eval line(s) of run(s): arm grpo, seed 1 ends at "
                          "update 5 but lacks update(s) 10 (runs/ARM/seedS/eval_items.jsonl) after it "
                          "(runs/ARM/seedS/eval_items.jsonl: the per-item results, written at every eval, record an "
                          "eval of the run there): lines were deleted from runs.csv"), msg
    assert msg.endswith(f"rebuild it from the run folders: `gradprobe study '{study / 'plan.toml'}' --out '{study}'` "
                        f"rewrites runs.csv from {study / 'runs'}/ARM/seedS/metrics.jsonl without redoing the finished "
                        "runs (--analyze-only only reads runs.csv)"), msg


def test_runs_that_lost_their_final_evals_are_named_the_rest_counted(tmp_path):
    study = make_study(tmp_path / "s", seeds=5)
    for s in range(5):
        _delete_lines(study, f"grpo,{s},10,")
    with pytest.raises(AnalysisError) as info:
        load_runs(study)
    msg = str(info.value)
    assert ("run(s): arm grpo, seed 0 ends at update 5 but lacks update(s) 10 (runs/ARM/seedS/eval_items.jsonl) after "
            "it; arm grpo, seed 1 ends at update 5 but lacks update(s) 10 (runs/ARM/seedS/eval_items.jsonl) after it; "
            "arm grpo, seed 2 ends at update 5 but lacks update(s) 10 (runs/ARM/seedS/eval_items.jsonl) after it and "
            "2 more run(s) (") in msg, msg
    assert "\n" not in msg


def test_an_interior_deleted_line_still_warns_and_reads_as_before(tmp_path):
    """grpo seed 1 lost its eval at update 10 (its final eval, 56, kept): one warning, and the analysis is the one
    the code before the refusal made (values recorded from it): its per-update read at 10 is refused by the gap rule,
    the rest is read as for the whole file."""
    study = _tiny(tmp_path / "s")
    _delete_lines(study, "grpo,1,10,")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = analyze(study, write=False, figures=False)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and msgs[0].startswith(f"{study / 'runs.csv'} lost eval lines: arm grpo, seed 1 lacks "
                                                 "update(s) 10 (plan) "), msgs
    assert msgs[0].endswith(f"so the analysis reads these runs with fewer evals (a read across a lost eval is refused, "
                            f"being wider than the promised eval gap); {restore_runs_csv_fix(study)}"), msgs
    assert {a: m["budget"] for a, m in res["matched"].items()} == {
        "updates": 10.0, "generated_tokens": 250000.0, "flops": 833291762264.0, "device_seconds": 155.07641884300756}
    assert res["matched"]["generated_tokens"]["source"] == "plan budget; each run's final eval"
    grpo = res["arms"]["grpo"]
    assert grpo["updates"]["per_seed"] == {0: 73.9, 1: None, 2: 75.4, 3: 70.5}
    assert grpo["updates"]["gap_exceeded"] == [1]
    assert grpo["updates"]["accuracy"] == pytest.approx(73.26666666666667, abs=1e-12)
    assert grpo["generated_tokens"]["per_seed"] == pytest.approx({0: 78.8, 1: 77.1, 2: 79.4, 3: 78.2}, abs=1e-9)
    assert grpo["generated_tokens"]["accuracy"] == pytest.approx(78.375, abs=1e-12)
    assert res["arms"]["grpo_2xlr"]["generated_tokens"]["accuracy"] == pytest.approx(74.025, abs=1e-12)


def test_a_run_that_really_ended_earlier_is_read_as_it_ends_without_a_word(tmp_path):
    """grpo_2xlr seed 3 stopped at update 43: study.json and the per-item results say so too, so nothing was lost;
    the matched token budget is then the largest promised point before its end, as before."""
    study = _tiny(tmp_path / "s")
    _delete_lines(study, LAST)
    record = json.loads((study / "study.json").read_text())
    run = next(r for r in record["runs"] if (r["arm"], r["seed"]) == ("grpo_2xlr", 3))
    assert run["updates"] == 57
    run["updates"] = 43
    (study / "study.json").write_text(json.dumps(record))
    gz = study / "eval_items.jsonl.gz"
    items = [json.loads(x) for x in gzip.decompress(gz.read_bytes()).decode().splitlines() if x.strip()]
    kept = [e for e in items if (e["arm"], e["seed"], e["update"]) != ("grpo_2xlr", 3, 57)]
    assert len(kept) == len(items) - 1
    gz.write_bytes(gzip.compress("".join(json.dumps(e) + "\n" for e in kept).encode(), mtime=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no lost-line (or any other) warning
        res = analyze(study, write=False, figures=False)
    tok = res["matched"]["generated_tokens"]
    assert tok["budget"] == 187500.0 and not tok["final_eval"]
    assert "a run stopped on another budget before generated_tokens = 250000" in tok["source"]


# ----------------------------------------------------------------------------- a file cut off after a line

def _cut_refusal(study: Path, last: int = 43, lost: str = "57 (study.json)", legend: str | None = None) -> str:
    """The refusal of a study whose runs.csv was cut off inside or right after grpo_2xlr seed 3's line at ``last``
    (its later lines gone with the cut), as load_runs says it."""
    legend = legend or "study.json: a finished run's final eval is at the update study.json records"
    return (f"{study / 'runs.csv'} lost the final eval line(s) of run(s): arm grpo_2xlr, seed 3 ends at update {last} "
            f"but lacks update(s) {lost} after it, its later lines gone with the file's cut last line (this run's) "
            f"({legend}): lines were deleted from or cut off the end of runs.csv, so where these runs end is unknown "
            "(read as they are, they would end at their last line left, moving their last reads and the matched "
            f"budgets earlier); the analysis refuses to guess; {restore_runs_csv_fix(study)}")


CUTS = {  # how runs.csv was cut: the last line gone, and the line before it (update 43) ...
    "cut mid-line": lambda t: t[:t.rindex(LAST)].rstrip("\n")[:-3],  # ... cut inside its last value (kl_init)
    "cut after a few fields": lambda t: t[:t.rindex(LAST)][:t[:t.rindex(LAST)].rindex(",1653907971152.0,")],
    "whole, no line break": lambda t: t[:t.rindex(LAST)].rstrip("\n"),  # ... whole but without its line break
}


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_a_runs_csv_cut_off_after_a_line_is_refused_not_read_with_an_earlier_end(cut, tmp_path):
    """The commonest damage: the file cut, its last line gone and the one before it cut. That line's run was read
    as ending there (only its evals before the cut line were checked): the matched token budget moved from 250,000
    to 187,500 under the cut's warning alone. Only the cut line's own cells are unknown, not where its run ends."""
    study = _tiny(tmp_path / "s")
    text = (study / "runs.csv").read_text()
    (study / "runs.csv").write_text(CUTS[cut](text))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for read in (lambda: analyze(study, write=False, figures=False), lambda: load_study(study)):
            with pytest.raises(AnalysisError) as info:
                read()
            assert str(info.value) == _cut_refusal(study)
    msgs = {str(w.message) for w in caught}
    assert len(msgs) == 1 and f"{study / 'runs.csv'}: line 150 (" in msgs.pop()  # the cut's own warning, as before


def test_analyze_only_refuses_a_runs_csv_cut_off_after_a_line_in_one_line(tmp_path, capsys):
    study = _tiny(tmp_path / "s")
    text = (study / "runs.csv").read_text()
    (study / "runs.csv").write_text(CUTS["cut mid-line"](text))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cut's warning
        assert main(["study", "--analyze-only", "--out", str(study)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"gradprobe study: error: {_cut_refusal(study)}\n"
    assert not (study / "reanalysis").exists()


def test_a_cut_off_end_is_refused_from_the_per_item_results_alone(tmp_path):
    """make_study's study.json records no run's updates: the run folders' eval_items.jsonl tell the run's end."""
    study = make_study(tmp_path / "s", seeds=2)
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("grpo,1,5,"))
    assert lines[at + 1].startswith("grpo,1,10,")  # grpo seed 1's final eval (updates 0/2/5/10) follows
    path.write_text("\n".join(lines[:at + 1])[:-2])  # cut inside grpo seed 1's update-5 line; the rest gone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cut's warning
        with pytest.raises(AnalysisError) as info:
            load_runs(study)
    msg = str(info.value)
    assert msg.startswith(f"{path} lost the final eval line(s) of run(s): arm grpo, seed 1 ends at update 5 but lacks "
                          "update(s) 10 (runs/ARM/seedS/eval_items.jsonl) after it, its later lines gone with the "
                          "file's cut last line (this run's) (runs/ARM/seedS/eval_items.jsonl: the per-item results, "
                          "written at every eval, record an eval of the run there): lines were deleted from or cut off "
                          "the end of runs.csv"), msg
