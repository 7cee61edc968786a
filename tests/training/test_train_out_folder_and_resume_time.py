"""``gradprobe train --out``: another command's folder is refused, SIGTERM says what a rerun does, and a
resumed run's summary.json counts the wall time of every invocation and records the resume."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import pytest

from gradprobe.cli import train as train_cli
from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _args(plan: Path, out: Path, *extra: str):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                              *extra])


@pytest.fixture
def plan_file(tmp_path) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(tiny_plan(budget={"updates": 1}))
    return p


@pytest.mark.parametrize("files, what", [
    ({"probe.json": "{}", "report.html": "<html>"}, "holds a probe (`gradprobe probe`) (probe.json)"),
    ({"study.json": "{}", "runs.csv": "arm,seed\n"}, "holds a study (`gradprobe study`) (study.json)"),
    ({"runs.csv": "arm,seed\n"}, "holds a study (`gradprobe study`) (runs.csv)"),
    ({"arms.json": "{}", "probe.json": "{}"}, "holds a study's probe folder (arms.json)"),
    ({"cv_predictions.csv": "x\n"}, "holds a calibration report (`calib report`) (cv_predictions.csv)"),
])
def test_train_refuses_another_commands_folder_before_loading_anything(tmp_path, plan_file, capsys, monkeypatch,
                                                                      files, what):
    out = tmp_path / "other"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    before = sorted(p.name for p in out.iterdir())
    monkeypatch.setattr(train_cli, "run_in_folder", lambda *a, **k: pytest.fail("the plan was read before the refusal"))
    assert train_main(_args(plan_file, out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"gradprobe train: error: {out} {what}, not a training run") and "another --out" in err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written
    with pytest.raises(OSError, match="not a training run"):  # the library refuses too (a notebook, a script)
        run_training(parse_plan(plan_file.read_text()).arm("grpo"), out)
    assert sorted(p.name for p in out.iterdir()) == before


def test_train_accepts_a_new_an_empty_and_its_own_run_folder(tmp_path, plan_file, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new", empty):
        assert train_main(_args(plan_file, out)) == 0, capsys.readouterr().err
        assert json.loads((out / "summary.json").read_text())["completed"]
    assert train_main(_args(plan_file, empty)) == 0  # its own run folder: the finished run is returned


def test_sigterm_prints_what_running_the_command_again_does(tmp_path, plan_file, capsys, monkeypatch):
    out = tmp_path / "run"

    def terminated(run, out_dir, **kw):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "metrics.jsonl").write_text('{"update": 1}\n')
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` on the real command
        time.sleep(5)
        pytest.fail("SIGTERM did not stop the run")

    class Escaped(Exception):
        """SIGTERM reached the test's own handler: train_main installed none (the process would just die)."""

    def escaped(signum, frame):
        raise Escaped

    monkeypatch.setattr("gradprobe.training.run.run_training", terminated)
    previous = signal.signal(signal.SIGTERM, escaped)
    try:
        assert train_main(_args(plan_file, out)) == 143
        assert signal.getsignal(signal.SIGTERM) is escaped  # the handler is put back
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert err.startswith("gradprobe train: terminated (SIGTERM); it stopped after 1 update(s), before the first "
                          "checkpoint"), err
    assert "running the same command again starts this run over from update 0" in err


def test_a_resumed_run_counts_every_invocations_wall_time_and_records_the_resume(tmp_path):
    """Killed after update 3 (checkpoint at 2) with 1.5 s spent before the checkpoint and 1 s after it: the
    resumed run's wall_seconds counts both, not only the last invocation's time."""
    run = parse_plan(tiny_plan(budget={"updates": 4}, train={"checkpoint_every": 2})).arm("grpo")
    out = tmp_path / "run"

    class Killed(Exception):
        pass

    def slow_then_killed(update):
        if update in (1, 2):  # update 1: before the checkpoint; update 2: after it was saved
            time.sleep(1.5 if update == 1 else 1.0)
        if update == 3:
            raise Killed

    with pytest.raises(Killed):
        run_training(run, out, after_update=slow_then_killed)
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 4
    assert summary["resumed_from_update"] == [2]
    first, second = summary["invocations"]
    assert first["from_update"] == 0 and first["to_update"] == 3 and first["ended"] == "stopped"
    assert second == {"from_update": 2, "to_update": 4, "ended": "budget",
                      "seconds": pytest.approx(summary["invocation_wall_seconds"])}
    assert first["seconds"] >= 2.5  # both sleeps, the one after the checkpoint too
    assert summary["wall_seconds"] == pytest.approx(first["seconds"] + second["seconds"])
    assert summary["wall_seconds"] >= summary["invocation_wall_seconds"] + 2.5
    saved = json.loads((out / "summary.json").read_text())
    assert saved["wall_seconds"] == pytest.approx(summary["wall_seconds"]) and saved["resumed_from_update"] == [2]


def test_a_run_in_one_go_has_one_invocation(tmp_path, plan_file):
    summary = run_training(parse_plan(plan_file.read_text()).arm("grpo"), tmp_path / "run")
    assert summary["resumed_from_update"] == [] and len(summary["invocations"]) == 1
    assert summary["wall_seconds"] == summary["invocation_wall_seconds"] > 0


def test_train_refuses_a_folder_inside_a_study_but_a_studys_worker_does_not(tmp_path, capsys):
    import shutil

    from gradprobe.cli import main as cli_main
    from gradprobe.training.run_folder import refuse_other_output

    study = tmp_path / "st"
    (study / "runs" / "grpo" / "seed0").mkdir(parents=True)
    (study / "figures").mkdir()
    (study / "study.json").write_text("{}")
    for out in (study / "runs", study / "figures", study / "runs" / "grpo" / "seed0", study / "runs" / "new"):
        rc = cli_main(["train", "--plan", "plans/tiny.toml", "--arm", "grpo", "--updates", "1", "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and f"is inside the study {study} (study.json)" in err, err
        assert "choose an --out outside the study" in err and "delete" not in err
    assert not (study / "runs" / "new").exists()
    refuse_other_output(study / "runs" / "grpo" / "seed0")  # the study's own worker: accepted
    shutil.rmtree(study)
