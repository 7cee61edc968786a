"""Issue 14, rough edges of `gradprobe study`: the plan's inputs are checked before the folder is
written, --restart replaces a frozen plan no run of which finished, invocations and their wall
time (a killed one up to its last heartbeat), --analyze-only writes beside a shipped analysis,
and one progress line with an ETA per finished run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import executors
from gradprobe.study.invocations import HEARTBEAT_JSON, Invocation
from gradprobe.study.preflight import PreflightError, check_plan_inputs
from gradprobe.study.runner import PlanChangedError, freeze_plan, progress_line, run_dir, run_study
from gradprobe.training.plan import parse_plan

from helpers_rollout import one_thread
from study_helpers import make_study, toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

TOY = toy_plan("edges", seeds=(0, 1), generated_tokens=200, checkpoint_every=None)


def _plan(tmp_path: Path, text: str = TOY, name: str = "plan.toml") -> Path:
    return write_plan(tmp_path, text, name)


# ----------------------------------------------------------------------------- 1. check before freezing

def test_the_plan_inputs_of_a_good_plan_resolve():
    report = check_plan_inputs(parse_plan(TOY), executor="local")
    assert report.model_source == "tiny-qwen2" and report.offline and report.prompt_tokens > 10


@pytest.mark.parametrize("edit, message", [
    (('name = "tiny-qwen2"', 'name = "no-such-org/no-such-model-xyz"'),
     ["[model] name = 'no-such-org/no-such-model-xyz'", "nor a model in the local Hugging Face cache",
      "hf download no-such-org/no-such-model-xyz"]),
    (('name = "tiny-qwen2"', 'name = "{tmp}/empty_model"'),
     ["[model] name = '{tmp}/empty_model'", "has no config.json", "holds config.json"]),
    (('name = "tiny-qwen2"', 'name = "{tmp}/config_only"'),
     ["[model] name = '{tmp}/config_only'", "has no tokenizer files (tokenizer.json"]),
    (('name = "tiny-qwen2"', 'name = "./nowhere/at/all"'), ["[model] name = './nowhere/at/all'", "no such model"]),
    (('name = "chain_sum"', 'name = "chain_summ"'), ["[task] name = 'chain_summ'", "unknown task", "fix [task] name"]),
    (("pool = 16", "pool = 16\n[task.config]\nnot_a_key = 3"), ["[task.config] of 'chain_sum'", "not_a_key"]),
])
def test_a_plan_whose_model_or_task_cannot_load_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch, edit, message):
    from gradprobe.models import tiny_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never the network, whatever the machine
    (tmp_path / "empty_model").mkdir()
    tiny_config("tiny-qwen2", vocab_size=64).save_pretrained(tmp_path / "config_only")  # config, no tokenizer
    plan = _plan(tmp_path, TOY.replace(edit[0], edit[1].format(tmp=tmp_path)))
    out = tmp_path / "study"
    assert cli_main(["study", str(plan), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    for m in message:
        assert m.format(tmp=tmp_path) in err, err
    assert "nothing was" in err and "Traceback" not in err
    assert not out.exists()  # not even the folder
    with pytest.raises(PreflightError):
        run_study(plan, out, executor="inline")
    assert not out.exists()


def test_a_hub_model_not_in_the_cache_is_allowed_to_download_only_when_the_runs_may(monkeypatch):
    from gradprobe.study.preflight import runs_offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert runs_offline("local") and runs_offline("ray") and not runs_offline("inline")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not runs_offline("local")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert runs_offline("inline")


# ----------------------------------------------------------------------------- 2. --restart

def _half_started(tmp_path: Path, finished: bool = False) -> tuple[Path, Path, Path]:
    """A study of plan A with a partial run (and a finished one if asked), and plan B."""
    a = _plan(tmp_path, TOY, "a.toml")
    b = _plan(tmp_path, TOY.replace("lr = 1e-3", "lr = 2e-3"), "b.toml")
    out = tmp_path / "study"
    freeze_plan(a, out)
    s0 = run_dir(out, "grpo", 0)
    s0.mkdir(parents=True)
    (s0 / "metrics.jsonl").write_text('{"update": 1}\n')
    (out / "probe").mkdir()
    (out / "probe" / "arms.json").write_text("{}")
    (out / "notes.txt").write_text("mine")  # not a study output: never deleted
    if finished:
        s1 = run_dir(out, "grpo", 1)
        s1.mkdir(parents=True)
        (s1 / "summary.json").write_text(json.dumps({"completed": True}))
    return a, b, out


def test_a_changed_plan_names_restart_while_no_run_finished(tmp_path, capsys):
    a, b, out = _half_started(tmp_path)
    assert cli_main(["study", str(b), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert "No run of the frozen plan has finished: rerun with --restart" in err and "new --out" in err
    assert (out / "plan.toml").read_bytes() == a.read_bytes() and run_dir(out, "grpo", 0).exists()


def test_restart_is_refused_once_a_run_finished(tmp_path, capsys):
    a, b, out = _half_started(tmp_path, finished=True)
    assert cli_main(["study", str(b), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert "1 run(s) of the frozen plan have finished" in err and "--restart" not in err
    assert cli_main(["study", str(b), "--out", str(out), "--executor", "inline", "--restart"]) == 2
    err = capsys.readouterr().err
    assert "--restart refused: 1 run(s) of the frozen plan have finished (runs/grpo/seed1)" in err
    assert "Run the changed plan with a new --out" in err
    assert (out / "plan.toml").read_bytes() == a.read_bytes()  # nothing touched
    assert (run_dir(out, "grpo", 1) / "summary.json").exists() and (run_dir(out, "grpo", 0) / "metrics.jsonl").exists()


def test_restart_replaces_the_frozen_plan_and_partial_outputs(tmp_path, capsys):
    a, b, out = _half_started(tmp_path)
    b.write_text(b.read_text().replace("seeds = [0, 1]", "seeds = [0]"))
    code = cli_main(["study", str(b), "--out", str(out), "--executor", "inline", "--restart", "--no-probe",
                     "--no-analysis"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "--restart: no run of the frozen plan" in err and "deleting its frozen plan and partial outputs" in err
    assert (out / "plan.toml").read_bytes() == b.read_bytes()
    study = json.loads((out / "study.json").read_text())
    assert study["plan_sha256"] == parse_plan(b.read_text()).sha256
    assert [(r["seed"], r["status"]) for r in study["runs"]] == [(0, "done")]
    metrics = (run_dir(out, "grpo", 0) / "metrics.jsonl").read_text()
    assert '{"update": 1}\n' not in metrics  # the old partial run was deleted, not resumed
    assert not run_dir(out, "grpo", 1).exists() and not (out / "probe" / "probe.json").exists()
    assert json.loads((out / "probe" / "arms.json").read_text())["grpo"]["reward"] == "outcome"  # rewritten
    assert (out / "notes.txt").read_text() == "mine"
    help_text = runner_help()
    assert "--restart" in help_text and "--overwrite-analysis" in help_text


def runner_help() -> str:
    import argparse

    from gradprobe.cli.study import add_study_parser

    parser = argparse.ArgumentParser(prog="gradprobe")
    add_study_parser(parser.add_subparsers())
    return parser._subparsers._group_actions[0].choices["study"].format_help()


# ----------------------------------------------------------------------------- 3. invocations

def _wait(ready, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.02)


def test_a_killed_invocation_counts_up_to_its_last_heartbeat_and_only_once(tmp_path):
    study: dict = {"wall_seconds": 10.0}
    first = Invocation(tmp_path, interval=0.05)
    assert first.begin(study) == [] and study["invocations"] == [first.record]
    first.start()

    def beat_seconds() -> float:
        try:
            return json.loads((tmp_path / HEARTBEAT_JSON).read_text())["seconds"]
        except (OSError, ValueError):
            return 0.0

    _wait(lambda: beat_seconds() > 0.3, "heartbeat past 0.3 s")
    first._stop.set()  # dies without an end (as after SIGKILL): only its heartbeat is left
    first._thread.join()
    beat = json.loads((tmp_path / HEARTBEAT_JSON).read_text())
    saved = json.loads(json.dumps(study))  # what study.json held: the entry without an end
    second = Invocation(tmp_path, interval=60)
    killed = second.begin(saved)
    assert len(killed) == 1 and killed[0]["id"] == first.record["id"] and killed[0]["ended"] == "killed"
    assert killed[0]["seconds"] == beat["seconds"] > 0.3 and killed[0]["last_seen"] == beat["last_seen"]
    assert saved["wall_seconds"] == pytest.approx(10.0 + beat["seconds"])
    mine = second.end(saved, "normally")
    assert saved["wall_seconds"] == pytest.approx(10.0 + beat["seconds"] + mine)
    assert [e["ended"] for e in saved["invocations"]] == ["killed", "normally"]
    # killed again between saving study.json and removing the heartbeat: nothing is counted twice
    third = Invocation(tmp_path)
    total = saved["wall_seconds"]
    assert third.begin(saved) == [] and saved["wall_seconds"] == total


# ----------------------------------------------------------------------------- 4. --analyze-only

def test_analyze_only_writes_a_reanalysis_beside_a_shipped_analysis(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=4)
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0  # no analysis yet: in place
    assert f"wrote {study}/analysis.json" in capsys.readouterr().out
    shipped = (study / "analysis.json").read_bytes()
    (study / "analysis.json").write_bytes(shipped.replace(b'"plan_sha256"', b'"shipped": true, "plan_sha256"', 1))
    shipped = (study / "analysis.json").read_bytes()
    figure = study / "figures" / "accuracy_vs_generated_tokens.png"
    mtime = figure.stat().st_mtime_ns

    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    out = capsys.readouterr().out
    re = study / "reanalysis"
    assert f"wrote the re-analysis to {re}/analysis.json, {re}/figures/ and {re}/report.txt" in out
    assert (study / "analysis.json").read_bytes() == shipped and figure.stat().st_mtime_ns == mtime
    new = json.loads((re / "analysis.json").read_text())
    old = json.loads(shipped)
    old.pop("shipped")
    assert new == old  # the analysis is deterministic: the re-analysis agrees with what shipped
    assert (re / "figures" / "accuracy_vs_generated_tokens.png").stat().st_size > 1000
    report = (re / "report.txt").read_text()
    assert "at matched tokens" in report and report.strip() in out

    assert cli_main(["study", "--analyze-only", "--out", str(study), "--overwrite-analysis"]) == 0
    assert f"wrote {study}/analysis.json" in capsys.readouterr().out
    assert json.loads((study / "analysis.json").read_text()) == new  # rewritten in place
    assert cli_main(["study", "--out", str(study), "--overwrite-analysis"]) == 2
    assert "--overwrite-analysis goes with --analyze-only" in capsys.readouterr().err


# ----------------------------------------------------------------------------- 5. progress

def test_progress_line_eta_is_the_mean_time_per_finished_run_times_the_runs_left():
    assert progress_line(3, 1, 8, 120.0, 4) == "3/8 runs complete (1 failed), elapsed 2 min 0 s, ETA 2 min 0 s"
    assert progress_line(5, 0, 8, 76.0, 2) == "5/8 runs complete, elapsed 1 min 16 s, ETA 1 min 54 s"  # 38 s x 3
    assert progress_line(0, 0, 4, 5.0, 0).endswith("ETA ?")
    assert progress_line(4, 0, 4, 50.0, 4).endswith("ETA 0 s")


def _fake_execute(task: dict) -> dict:
    return {"kind": task["kind"], "arm": task.get("arm"), "seed": task.get("seed"), "status": "done", "updates": 3,
            "final_accuracy": 0.5, "seconds": 0.01}


def test_one_progress_line_per_finished_run_and_quiet_silences_them(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(executors, "execute_task", _fake_execute)
    plan = _plan(tmp_path, TOY.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))
    argv = ["study", str(plan), "--executor", "inline", "--no-probe", "--no-analysis"]
    assert cli_main([*argv, "--out", str(tmp_path / "a")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[study] run grpo")]
    assert [x.split("; ")[1].split(",")[0] for x in lines] == [f"{k}/3 runs complete" for k in (1, 2, 3)]
    assert all("elapsed" in x and "ETA" in x for x in lines) and lines[-1].endswith("ETA 0 s")
    assert cli_main([*argv, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert "[study]" not in capsys.readouterr().err


def test_ray_executor_without_ray_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    import importlib.util

    from gradprobe.study.runner import StudyError, run_study

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    plan = write_plan(tmp_path, toy_plan("noray", seeds=(0,)))
    with pytest.raises(StudyError, match=r"--executor ray needs Ray: pip install 'ray\[default\]'"):
        run_study(plan, tmp_path / "study", executor="ray", probe=False)
    assert not (tmp_path / "study").exists()


def test_a_damaged_tier_build_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """A tester: the study preflight did not check a damaged tier build, so the study froze its plan and every run
    failed with the same tier error."""
    import shutil

    from gradprobe.tiers import cache_root, shipped_root, tier_path

    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    cached = Path(shutil.copytree(tier_path("tiny"), cache_root() / tier_path("tiny").name))
    (cached / "warmstart.json").write_text('{"format')
    plan = _plan(tmp_path, TOY.replace('name = "tiny-qwen2"', 'name = "tiny"'))
    out = tmp_path / "study"
    assert cli_main(["study", str(plan), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe study: error: [model] name = 'tiny': the tier in {cached} is damaged: "
                          f"{cached / 'warmstart.json'} is damaged (not valid JSON: ")
    assert err.endswith("; rebuild it with `gradprobe warmstart --tier tiny --force`, or delete "
                        f"{cached} to load the shipped build {shipped_root() / cached.name} again (a cache build "
                        "takes precedence) (checked before the study folder was written; nothing was)\n")
    assert not out.exists()
