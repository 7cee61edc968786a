"""``gradprobe study --no-progress`` hides the progress bars as ``probe``, ``rank-prompts`` and ``difficulty-eval``
do (a tester found the flag refused: ``gradprobe study`` had none): transformers' "Loading weights" bar is gone
from stderr and from each run's ``train.log`` (the run's own per-update lines stay), every task carries it to the
worker that runs it (a Ray worker on another machine does not inherit the command's environment), and the command
that resumes an interrupted study keeps it."""

from __future__ import annotations

import argparse

from transformers.utils import logging as hf_logging

from gradprobe.cli import main
from gradprobe.cli.study import _resume_command, add_study_parser
from gradprobe.study import worker

from helpers_shell import shell_split
from helpers_training import tiny_plan


def test_no_progress_hides_the_loading_bar_and_keeps_the_run_lines(tmp_path, capfd):
    (tmp_path / "plan.toml").write_text(tiny_plan(eval={"sampled": False}))
    out = tmp_path / "study"
    assert main(["study", str(tmp_path / "plan.toml"), "--out", str(out), "--executor", "inline", "--no-probe",
                 "--no-analysis", "--no-progress"]) == 0
    err = capfd.readouterr().err
    log = (out / "runs" / "grpo" / "seed0" / "train.log").read_text()
    assert "Loading weights" not in err and "Loading weights" not in log
    assert "[train grpo s0] update 1: " in log
    assert hf_logging.is_progress_bar_enabled()  # the caller's bars are on again after an in-process call


def test_each_task_hides_the_bars_in_its_worker_and_restores_them(tmp_path, monkeypatch):
    (tmp_path / "plan.toml").write_text(tiny_plan())
    seen = []
    monkeypatch.setattr(worker, "_train", lambda *a, **k: seen.append(hf_logging.is_progress_bar_enabled()) or {})
    for progress in (False, True):
        task = {"kind": "train", "plan": str(tmp_path / "plan.toml"), "arm": "grpo", "seed": 0,
                "out": str(tmp_path / f"run_{progress}"), "progress": progress}
        (tmp_path / f"run_{progress}").mkdir()
        assert worker.execute_task(task)["status"] == "done"
    assert seen == [False, True] and hf_logging.is_progress_bar_enabled()


def test_the_resume_command_keeps_no_progress():
    parser = argparse.ArgumentParser()
    add_study_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["study", "plan.toml", "--out", "st", "--no-progress", "--quiet"])
    assert _resume_command(args) == "gradprobe study plan.toml --out st --quiet --no-progress"


def test_the_resume_command_reads_back_as_the_paths_it_names():
    """Was: ``shlex.quote`` kept a tab raw inside quotes, and the printed line then showed it escaped (``\\t``) inside
    single quotes, a command naming another folder; a plan path ``-p.toml`` was read back as an option."""
    parser = argparse.ArgumentParser()
    add_study_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["study", "./-p.toml", "--out", "st\tx", "--reuse-runs", "r\udcff", "--quiet"])
    args.plan = "-p.toml"  # as a caller of the API may name it
    line = _resume_command(args)
    assert line.isprintable() and "\t" not in line
    assert shell_split(line) == ["gradprobe", "study", "./-p.toml", "--out", "st\tx", "--reuse-runs", "r\udcff",
                                 "--quiet"]
    args = parser.parse_args(["study", "--replicate", "./-src", "--out", "new"])
    args.replicate = "-src"
    assert shell_split(_resume_command(args)) == ["gradprobe", "study", "--out", "new", "--replicate", "./-src"]
