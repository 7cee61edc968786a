"""Messages of ``gradprobe study`` a trial user found untrue or unlike the other commands' (trial 5): the study's
probe printed its reward warnings without the ``warning:`` prefix (gradprobe.study.worker._probe ran the probe with
no handler for its notes logger, so Python's last-resort handler printed the bare note)."""

from __future__ import annotations

import logging
from pathlib import Path

from gradprobe.probe import run as probe_run
from gradprobe.study import worker
from gradprobe.study.result import StudyResult
from gradprobe.training import run as training_run
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan

NOTE = ("reward 'myrw.py:none_all': 16 of 16 completions got no reward (its value was None, NaN or +-inf); they are "
        "masked (advantage 0, left out of their group's mean and std), not scored 0")


def _fake_probe(config, out, **_):
    """What run_probe does with its notes (gradprobe.probe.run: notes_log.warning), without the model."""
    probe_run.notes_log.warning(NOTE)
    return {"rewards": [{"name": "outcome"}]}


def test_the_studys_probe_prints_its_reward_warnings_with_the_warning_prefix(tmp_path, monkeypatch, capsys):
    plan = load_plan(write_plan(tmp_path, toy_plan("msg", seeds=(0,))))
    monkeypatch.setattr(probe_run, "run_probe", _fake_probe)
    monkeypatch.setattr(training_run, "load_run_policy", lambda *a, **k: None)
    monkeypatch.setattr(training_run, "load_run_task", lambda *a, **k: None)
    handlers, propagate = list(probe_run.notes_log.handlers), probe_run.notes_log.propagate
    res = worker._probe(plan, tmp_path / "probe", {})
    assert res["rewards"] == ["outcome"]
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"gradprobe study: warning: probe: {NOTE}"]
    # the logger is left as it was: a later probe in the same process (inline executor, a test) prints nothing twice
    assert probe_run.notes_log.handlers == handlers and probe_run.notes_log.propagate == propagate


def test_probe_warnings_print_each_note_once_even_with_a_root_handler(monkeypatch, capsys):
    logger = logging.getLogger("gradprobe.test_messages_trial.notes")
    root = logging.StreamHandler()  # a user's logging.basicConfig(): stderr at import time, captured by capsys
    monkeypatch.setattr(logging.getLogger(), "handlers", [root])
    with worker.probe_warnings(logger):
        logger.warning("reward 'x': 4 of 4 groups have no reward at all")
    logger.warning("after the block: through the root handler only")
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["gradprobe study: warning: probe: reward 'x': 4 of 4 groups have no reward at all",
                     "after the block: through the root handler only"]


# ----------------------------------------------------------------------------- item 2: the workers a Ctrl-C stops

def test_ctrl_c_counts_worker_processes_and_the_runs_they_run(tmp_path):
    """Two pool workers, one run finished (its worker now idle) and one running: 2 processes are stopped, 1 of them
    was running a run (it said "stopping 2 running worker(s)", trial 5's sslow.log)."""
    from gradprobe.study.executors import _iter_local
    from gradprobe.study.folder import FolderLock

    held = FolderLock(tmp_path / "busy", ".lock", wait=False, what="run folder")  # the worker waits on it: running
    tasks = [{"kind": "train", "plan": str(tmp_path / "missing.toml"), "arm": "a", "seed": 0,
              "out": str(tmp_path / "quick")},  # fails at once: no plan
             {"kind": "train", "plan": str(tmp_path / "missing.toml"), "arm": "b", "seed": 0,
              "out": str(tmp_path / "busy")}]
    said, stopped = [], []
    gen = _iter_local(tasks, workers=2, threads=1, say=said.append, stopped=stopped)
    try:
        first = next(gen)
        assert (first["arm"], first["status"]) == ("a", "failed")
    finally:
        gen.close()  # what a Ctrl-C in the study's loop does: the generator stops the pool
        held.release()
    assert said == ["interrupted: starting no further run; stopping 2 worker process(es) (1 of them running a run "
                    "or the probe)"]
    assert stopped == [2]


# ----------------------------------------------------------------------------- item 1: what a rerun does

NONES = ("update 3: reward 'myrw.py:none_all' of arm 'nonesarm' returned None, NaN or +-inf for every completion ...; "
         "fix the reward function (it must return a finite number for the completions it scores) and rerun with a "
         "new --out")


def test_the_summary_says_a_rerun_retries_the_run_whose_error_says_start_anew_and_how_to_fix_it():
    """Trial 5's s_plug: grpo done, flaky failed (a raising reward: a retry may pass), nonesarm failed (no reward for
    any completion). A rerun of the same command retries nonesarm too, from its last checkpoint, and it fails the
    same way (it said "nonesarm seed 0 need what their error says (a new --out)" after "rerun the same command")."""
    res = StudyResult(out=Path("s_plug"), plan_sha256="x", done=[("grpo", 0)],
                      failed={("flaky", 0): "RewardFunctionError: reward 'myrw.py:flaky' raised ValueError: ...",
                              ("nonesarm", 0): NONES})
    assert res.summary().splitlines()[-1] == (
        "  failed runs keep their data in s_plug/runs/<arm>/seed<S>/; a rerun of the same command retries every "
        "failed run (completed runs are not redone): the others may succeed, but nonesarm seed 0 would fail the same "
        "way again, as its error says (the rerun trains the same plan and reward code: this folder refuses an edited "
        "plan or plug-in reward file); to fix it, fix what the error names, then run the plan as a new study under a "
        "new --out with --reuse-runs s_plug (its finished runs are copied, not trained again)")
