"""`gradprobe study` on folders it must not use as they are: a training run's folder (refused before anything is
written), a study whose run folders or study.json are damaged (refused on resume naming the file and the fix, nothing
rewritten from the other runs), a study without its frozen plan.toml, a --reuse-runs source that does not exist, and
a runs.csv cut inside its header. No training: finished runs are written by hand and the executor is faked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import executors
from gradprobe.study.analysis import AnalysisError, analyze
from gradprobe.study.runner import run_dir, run_study
from gradprobe.training.plan import load_plan

from study_helpers import make_study, toy_plan, write_plan

ARMS = '[arms.grpo]\nreward = "outcome"\n[arms.mc_value]\nreward = "mc_value"\n'


@pytest.fixture(autouse=True)
def no_training(monkeypatch):
    """Any task the executor gets is recorded and reported done without training (a refused study gets none)."""
    calls: list[dict] = []

    def fake(task: dict) -> dict:
        calls.append(task)
        return {"kind": task["kind"], "arm": task.get("arm"), "seed": task.get("seed"), "status": "done",
                "updates": 3, "final_accuracy": 0.5, "seconds": 0.01}

    monkeypatch.setattr(executors, "execute_task", fake)
    return calls


def finished_study(tmp_path: Path) -> tuple[Path, Path]:
    """(plan, study folder): every run of a 2-arm x 2-seed toy plan finished (summary.json, metrics.jsonl written by
    hand), then the study run over them (nothing to train): plan.toml, study.json, runs.csv and analysis.json."""
    plan = write_plan(tmp_path, toy_plan("defects", seeds=(0, 1), arms=ARMS))
    out = tmp_path / "study"
    for arm, seed in load_plan(plan).runs():
        d = run_dir(out, arm, seed)
        d.mkdir(parents=True)
        evals = [{"update": u, "eval": True, "generated_tokens": tok, "device_seconds": 0.5 * u, "flops": 1e6 * tok,
                  "greedy_accuracy": k / 16} for u, tok, k in ((0, 0, 4), (1, 260, 5 + seed), (2, 510, 6),
                                                               (3, 705, 7 + (arm == "grpo")))]
        (d / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        (d / "summary.json").write_text(json.dumps({"completed": True, "updates": 3, "final_greedy_accuracy": 0.5}))
    res = run_study(plan, out, executor="inline", check=False, probe=False, say=lambda m: None)
    assert res.ok and res.analysis_error is None and len(res.skipped) == 4
    return plan, out


def _snapshot(out: Path) -> dict:
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".lock"}


def _resume(plan: Path, out: Path) -> int:
    return cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", "--no-probe"])


def _one_line_error(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("gradprobe study: error: ") and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- 1. a training run's folder

def test_a_training_runs_folder_is_refused_as_a_study_folder_before_anything_is_written(tmp_path, capsys,
                                                                                          no_training):
    plan = write_plan(tmp_path, toy_plan("defects", seeds=(0,)))
    run = tmp_path / "run"
    run.mkdir()
    for name, text in (("config.json", "{}"), ("metrics.jsonl", '{"update": 0, "eval": true}\n'),
                       ("summary.json", '{"completed": true}')):
        (run / name).write_text(text)
    before = _snapshot(run)
    assert cli_main(["study", str(plan), "--out", str(run), "--executor", "inline", "--no-probe"]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert line == (f"gradprobe study: error: --out {run} holds a training run (`gradprobe train`) (metrics.jsonl), "
                    "not a study; a study there would mix its plan.toml, study.json, runs/ and analysis.json into it: "
                    "choose another --out (a new or empty folder, or a study's folder to resume it)")
    assert _snapshot(run) == before and sorted(p.name for p in run.iterdir()) == sorted(str(p) for p in before)
    assert not no_training  # nothing was run either

    assert cli_main(["study", "--analyze-only", "--out", str(run)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert f"{run} holds a training run (`gradprobe train`) (metrics.jsonl), not a study (no runs.csv)" in line
    assert "first" not in line and _snapshot(run) == before

    src = make_study(tmp_path / "finished", seeds=2)  # --replicate into it: refused before replicate_of.json
    assert cli_main(["study", "--replicate", str(src), "--out", str(run), "--executor", "inline"]) == 2
    assert "holds a training run" in _one_line_error(capsys.readouterr().err) and _snapshot(run) == before


# ----------------------------------------------------------------------------- 2. damaged study folders on resume

@pytest.mark.parametrize("damage, message", [
    (lambda out: (run_dir(out, "mc_value", 1) / "metrics.jsonl").unlink(),
     "{run}/metrics.jsonl is missing although {run}/summary.json says the run finished: runs.csv cannot be rebuilt "
     "from it; restore it from a copy, or delete {run} to rerun that run (the other runs are kept); nothing was run "
     "or rewritten"),
    (lambda out: (run_dir(out, "mc_value", 1) / "summary.json").write_text("garbage"),
     "{run}/summary.json cannot be read (JSONDecodeError: Expecting value: line 1 column 1 (char 0)): whether the run "
     "finished cannot be told; restore it from a copy, or delete {run} to rerun that run (the other runs are kept); "
     "nothing was run or rewritten"),
    (lambda out: (run_dir(out, "mc_value", 1) / "metrics.jsonl").write_text('{"update": 0, "eval": true, "gener\n'),
     "{run}/metrics.jsonl line 1 is not a JSON object (JSONDecodeError: Unterminated string starting at: line 1 "
     "column 29 (char 28)): the run's file is damaged; restore it from a copy, or delete {run} to rerun that run (the "
     "other runs are kept); nothing was run or rewritten"),
])
def test_a_damaged_run_folder_is_refused_on_resume_and_nothing_is_rewritten(tmp_path, capsys, no_training,
                                                                             damage, message):
    plan, out = finished_study(tmp_path)
    damage(out)
    before = _snapshot(out)
    assert _resume(plan, out) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert message.format(run=run_dir(out, "mc_value", 1)) in line
    assert not no_training  # the run is not re-queued
    assert _snapshot(out) == before  # runs.csv, study.json, analysis.json: not rewritten from the other runs
    assert _resume(plan, out) == 2 and _snapshot(out) == before  # the same on every rerun
    capsys.readouterr()


def test_a_garbage_study_json_is_named_on_resume_and_by_analyze_only(tmp_path, capsys):
    plan, out = finished_study(tmp_path)
    (out / "study.json").write_text('{"plan": garbage')
    before = _snapshot(out)
    fix = (f"the study's record (plan sha256, run statuses, invocations) is damaged; restore it from a copy, or delete "
           f"it and run `gradprobe study '{out / 'plan.toml'}' --out '{out}'` to rebuild it from {out / 'runs'} "
           "(finished runs are not redone; the recorded invocations and wall time are lost)")
    head = f"gradprobe study: error: {out / 'study.json'} cannot be read (JSONDecodeError: Expecting value: line 1 "
    assert _resume(plan, out) == 2
    assert _one_line_error(capsys.readouterr().err) == head + f"column 10 (char 9)): {fix}"
    assert cli_main(["study", "--analyze-only", "--out", str(out)]) == 2
    assert _one_line_error(capsys.readouterr().err) == head + f"column 10 (char 9)): {fix}"
    assert _snapshot(out) == before and not (out / "reanalysis").exists()
    (out / "study.json").unlink()  # the fix it names works: study.json is rebuilt, no run is redone
    assert cli_main(["study", str(out / "plan.toml"), "--out", str(out), "--executor", "inline", "--no-probe",
                     "--no-analysis"]) == 0
    assert [r["status"] for r in json.loads((out / "study.json").read_text())["runs"]] == ["done"] * 4


# ----------------------------------------------------------------------------- 3. no frozen plan.toml

def test_a_study_without_its_frozen_plan_is_refused_naming_what_is_lost_and_how_to_restore_it(tmp_path, capsys):
    plan, out = finished_study(tmp_path)
    (out / "plan.toml").unlink()
    sha = json.loads((out / "study.json").read_text())["plan_sha256"]
    assert cli_main(["study", "--analyze-only", "--out", str(out)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith(f"gradprobe study: error: {out / 'plan.toml'} does not exist: the analysis needs the "
                           "study's frozen plan (without it the budgets, the promised eval gaps and the hypotheses are "
                           "lost")
    assert f"copy the plan file the study ran ({plan.resolve()} per study.json, sha256 {sha}) to {out / 'plan.toml'}" \
        in line
    assert not (out / "reanalysis").exists()
    with pytest.raises(AnalysisError, match="plan.toml does not exist"):
        analyze(out, write=False, figures=False)
    assert _resume(plan, out) == 0  # the restore it names: the same plan writes it back, nothing is redone
    assert (out / "plan.toml").read_bytes() == plan.read_bytes()
    capsys.readouterr()
    assert analyze(out, write=False, figures=False)["matched"]["generated_tokens"]["budget"] == 700.0


# ----------------------------------------------------------------------------- 5. --reuse-runs checked first

def test_a_missing_reuse_source_is_refused_before_the_new_folder_is_written(tmp_path, capsys):
    plan = write_plan(tmp_path, toy_plan("defects", seeds=(0,)))
    out = tmp_path / "new"
    missing = tmp_path / "nonexistent"
    assert cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", "--reuse-runs", str(missing)]) == 2
    assert _one_line_error(capsys.readouterr().err) == (
        f"gradprobe study: error: --reuse-runs {missing}: no runs/ folder there (the folder does not exist); reuse "
        f"needs the folder a study ran in (its runs/): give such a folder, or drop --reuse-runs {missing}")
    assert not out.exists()  # no plan.toml, study.json or .study.lock left behind


# ----------------------------------------------------------------------------- 7. runs.csv cut in its header

def test_a_runs_csv_cut_inside_its_header_names_the_rebuild(tmp_path, capsys):
    plan, out = finished_study(tmp_path)
    (out / "runs.csv").write_text((out / "runs.csv").read_text()[:40])
    assert cli_main(["study", "--analyze-only", "--out", str(out), "--overwrite-analysis"]) == 2
    assert _one_line_error(capsys.readouterr().err) == (
        f"gradprobe study: error: {out / 'runs.csv'} lacks the column(s) device_seconds, accuracy, accuracy_sampled, "
        f"reward, lr_scale (its header line was cut or edited); rebuild it from the run folders: `gradprobe study "
        f"'{out / 'plan.toml'}' --out '{out}'` rewrites runs.csv from {out / 'runs'}/ARM/seedS/metrics.jsonl without "
        "redoing the finished runs (--analyze-only only reads runs.csv)")
    assert _resume(plan, out) == 0  # the rebuild it names
    assert (out / "runs.csv").read_text().startswith("arm,seed,update,generated_tokens,device_seconds,accuracy")
