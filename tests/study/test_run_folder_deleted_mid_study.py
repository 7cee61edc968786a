"""A run folder deleted while its study runs (after the run finished): the study said "3 runs complete", marked
itself finished and wrote runs.csv rows of the deleted run from memory, while its per-item results were gone. Now the
run is recorded as failed (naming the folder), runs.csv leaves it out, the study is not finished, and a rerun
redoes it."""

from __future__ import annotations

import csv
import json
import shutil

from study_helpers import toy_plan, write_plan

import gradprobe.study.orchestrator as orchestrator
from gradprobe.study.runner import run_study


def test_a_run_folder_deleted_mid_study_is_failed_and_redone_by_a_rerun(tmp_path, monkeypatch):
    plan = write_plan(tmp_path, toy_plan("lost", seeds=(0, 1), generated_tokens=200, every_tokens=100,
                                         checkpoint_every=None))
    out = tmp_path / "study"
    record = orchestrator._record_run

    def deleting(res, entry, result):  # seed 1 finished: the user deletes seed 0's folder
        said = record(res, entry, result)
        if res["seed"] == 1:
            shutil.rmtree(out / "runs" / "grpo" / "seed0")
        return said

    monkeypatch.setattr(orchestrator, "_record_run", deleting)
    res = run_study(plan, out, executor="inline", probe=False, analyze=False)
    assert res.done == [("grpo", 1)] and list(res.failed) == [("grpo", 0)]
    assert "runs/grpo/seed0 was deleted or moved while the study ran" in res.failed[("grpo", 0)]
    study = json.loads((out / "study.json").read_text())
    assert study["finished"] is None and [r["status"] for r in study["runs"]] == ["failed", "done"]
    with open(out / "runs.csv") as f:
        assert {row["seed"] for row in csv.DictReader(f)} == {"1"}

    monkeypatch.setattr(orchestrator, "_record_run", record)
    again = run_study(plan, out, executor="inline", probe=False, analyze=False)
    assert again.ok and again.skipped == [("grpo", 1)] and sorted(again.done) == [("grpo", 0), ("grpo", 1)]
    assert json.loads((out / "study.json").read_text())["finished"]
    with open(out / "runs.csv") as f:
        assert {row["seed"] for row in csv.DictReader(f)} == {"0", "1"}
