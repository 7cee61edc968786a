"""Collecting a finished run's eval lines (gradprobe.study.collect) with an ``update`` of any JSON kind: a damaged
line whose update is a list is kept as its runs.csv row and refused by the analysis naming the cell (as before the
repeated-eval check, which raised a bare "unhashable type" TypeError on it), and a repeat of an eval line whose
numbers differ only in how they are written (2.0 for 2) is one row. No training: the finished runs are written by
hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gradprobe.study import collect
from gradprobe.study.reading import AnalysisError, load_runs
from gradprobe.study.runner import run_dir
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan
from test_resume_reads_once import ARMS, _write_finished_run


def test_an_update_that_is_a_list_is_refused_by_the_analysis_and_a_rewritten_repeat_is_one_row(tmp_path: Path):
    plan = load_plan(write_plan(tmp_path, toy_plan("kinds", seeds=(0, 1), arms=ARMS)))
    out = tmp_path / "study"
    for arm, seed in plan.runs():
        _write_finished_run(run_dir(out, arm, seed), arm, seed)
    metrics = run_dir(out, "grpo", 0) / "metrics.jsonl"
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    repeat = next(x for x in lines if x.get("eval") and x["update"] == 2) | {"update": 2.0, "generated_tokens": 510.0}
    for line in lines:
        if line.get("eval") and line["update"] == 3:
            line["update"] = [3]  # a damaged line
    metrics.write_text("".join(json.dumps(x) + "\n" for x in lines + [repeat]))

    assert collect.write_runs_csv(plan, out) == 16  # 2 arms x 2 seeds x 4 evals: the repeat of update 2 is one row
    with open(out / "runs.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if (r["arm"], r["seed"]) == ("grpo", "0")]
    grpo0 = [(r["update"], r["generated_tokens"]) for r in rows]
    assert grpo0 == [("0", "0"), ("1", "260"), ("2", "510"), ("[3]", "705")]
    with pytest.raises(AnalysisError) as e:
        load_runs(out)
    assert "an update that is no whole number >= 0" in str(e.value) and "(arm grpo, seed 0, update [3])" in str(e.value)
