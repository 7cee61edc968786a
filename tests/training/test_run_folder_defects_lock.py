"""``gradprobe train --out DIR`` holds DIR's lock (``DIR/.lock``, the study's FolderLock): a second process on
the same run folder is refused with one line naming the holder's pid (exit 2, nothing written); the lock is
released on success, errors, Ctrl-C and SIGTERM, and the stale lock of a dead process is taken over."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.study.folder import FolderLock, StudyError

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

#: A process that holds ``sys.argv[1]/.lock`` as FolderLock does (flock, ``pid N`` written), then sleeps.
HOLDER = ("import sys, time; from pathlib import Path; from gradprobe.study.folder import FolderLock; "
          "lock = FolderLock(Path(sys.argv[1]), '.lock', wait=False, what='run folder'); "
          "print('locked', flush=True); time.sleep(120)")


def _args(plan: Path, out: Path):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"])


@pytest.fixture
def plan_file(tmp_path) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(tiny_plan(budget={"updates": 1}))
    return p


def _listing(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_run_folder_held_by_a_live_process_is_refused_and_a_dead_ones_lock_is_taken_over(tmp_path, plan_file,
                                                                                         capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = _listing(out)
        assert before == {".lock": f"pid {holder.pid}".encode()}
        assert train_main(_args(plan_file, out)) == 2
        err = capsys.readouterr().err
        assert err == (f"gradprobe train: error: run folder {out} is in use by another process (pid {holder.pid}); "
                       "wait for it to finish or stop it\n")
        assert _listing(out) == before  # nothing written, the holder's pid kept
    finally:
        holder.kill()
        holder.wait()
    assert (out / ".lock").read_text() == f"pid {holder.pid}"  # a stale lock: the kernel released the flock
    assert train_main(_args(plan_file, out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] and summary["updates"] == 1 and len(summary["invocations"]) == 1
    assert (out / ".lock").read_text() == ""  # released: no pid left behind


def test_the_lock_is_held_while_training_and_released_on_success_errors_ctrl_c_and_sigterm(tmp_path, plan_file,
                                                                                          capsys, monkeypatch):
    out = tmp_path / "run"
    seen = []

    def fake_run(raised):
        def run_training(run, out_dir, **kw):
            (Path(out_dir) / "notes.txt").write_text("not a run's file")
            with pytest.raises(StudyError) as e:  # held by this command while it trains
                FolderLock(Path(out_dir), ".lock", wait=False, what="run folder")
            seen.append(str(e.value))
            if raised == "SIGTERM":  # as `kill PID` on the real command: its handler raises Terminated
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
                pytest.fail("SIGTERM did not stop the run")
            raise raised
        return run_training

    for raised, code in ((RuntimeError("boom"), 2), (KeyboardInterrupt(), 130), ("SIGTERM", 143)):
        monkeypatch.setattr("gradprobe.training.run.run_training", fake_run(raised))
        assert train_main(_args(plan_file, out)) == code
        FolderLock(out, ".lock", wait=False, what="run folder").release()  # free again
    assert seen == [f"run folder {out} is in use by another process (pid {os.getpid()}); wait for it to finish or "
                    "stop it"] * 3
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "gradprobe train: error: boom" and err[1].startswith("gradprobe train: interrupted;")
    assert err[2].startswith("gradprobe train: terminated (SIGTERM);")
    monkeypatch.undo()
    assert train_main(_args(plan_file, out)) == 0  # the real run after all three
    FolderLock(out, ".lock", wait=False, what="run folder").release()
    # a run refused after the lock was taken (a model that cannot be loaded) leaves no lock file, no folder
    plan_file.write_text(tiny_plan(budget={"updates": 1}, model={"name": "no-such-model"}))
    assert train_main(_args(plan_file, tmp_path / "bad_model")) == 2
    assert "no-such-model" in capsys.readouterr().err and not (tmp_path / "bad_model").exists()


def test_gradprobe_train_from_python_refuses_a_folder_held_by_another_holder(tmp_path, plan_file):
    import gradprobe

    out = tmp_path / "run"
    lock = FolderLock(out, ".lock", wait=False, what="run folder")  # another open file: flock refuses it too
    try:
        with pytest.raises(StudyError, match=rf"^run folder {out} is in use by another process \(pid {os.getpid()}\)"):
            gradprobe.train(plan_file, out, arm="grpo", progress=False)
        assert _listing(out) == {".lock": f"pid {os.getpid()}".encode()}  # nothing written
    finally:
        lock.release()
    run = gradprobe.train(plan_file, out, arm="grpo", progress=False)  # released: the run goes ahead
    assert run.summary["updates"] == 1
