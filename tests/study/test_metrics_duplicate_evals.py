"""A finished run's metrics.jsonl holding one eval line twice (gradprobe.study.collect): an exact repeat gives one
runs.csv row (the analysis warned of a duplicated runs.csv line whose fix, rebuilding runs.csv from the run folders,
wrote it again); two lines of one update with different values are refused, naming the file, the update, the values
and the fix (before, runs.csv held both and the analysis refused it, advising the same rebuild). No training: the
finished runs are written by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gradprobe.study import collect
from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_dir
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan
from test_resume_reads_once import ARMS, _write_finished_run


def _study(tmp_path: Path):
    plan = load_plan(write_plan(tmp_path, toy_plan("dups", seeds=(0, 1), arms=ARMS)))
    out = tmp_path / "study"
    for arm, seed in plan.runs():
        _write_finished_run(run_dir(out, arm, seed), arm, seed)
    return plan, out


def _repeat_eval(metrics: Path, update: int, **changes) -> None:
    """Append a copy of the eval line of ``update`` to ``metrics`` (with ``changes`` to its values)."""
    lines = metrics.read_text().splitlines()
    line = next(json.loads(x) for x in lines if json.loads(x).get("eval") and json.loads(x)["update"] == update)
    metrics.write_text("\n".join(lines + [json.dumps(line | changes)]) + "\n")


def test_an_eval_line_written_twice_gives_one_runs_csv_row(tmp_path):
    plan, out = _study(tmp_path)
    _repeat_eval(run_dir(out, "grpo", 0) / "metrics.jsonl", 2)
    assert collect.write_runs_csv(plan, out) == 16  # 2 arms x 2 seeds x 4 evals
    with open(out / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    grpo0 = [(r["update"], r["accuracy"]) for r in rows if (r["arm"], r["seed"]) == ("grpo", "0")]
    assert grpo0 == [("0", "0.25"), ("1", "0.3125"), ("2", "0.375"), ("3", "0.5")]


def test_two_eval_lines_of_one_update_with_different_values_are_refused(tmp_path):
    plan, out = _study(tmp_path)
    folder = run_dir(out, "mc_value", 1)
    _repeat_eval(folder / "metrics.jsonl", 2, greedy_accuracy=0.5)
    with pytest.raises(StudyError) as e:
        collect.check_finished_runs(plan, out)
    msg = str(e.value)
    assert f"{folder / 'metrics.jsonl'} records the eval at update 2 twice with different values" in msg
    assert "accuracy 0.375 and 0.5" in msg and f"delete {folder} to rerun that run" in msg
    assert "nothing was run or rewritten" in msg and not (out / "runs.csv").exists()


def test_an_eval_line_holding_nan_written_twice_is_still_one_eval(tmp_path):
    plan, out = _study(tmp_path)
    metrics = run_dir(out, "grpo", 0) / "metrics.jsonl"
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    for line in lines:
        if line.get("eval") and line["update"] == 2:
            line["kl_init"] = float("nan")  # json writes NaN; two parsed NaNs are != each other
    metrics.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    _repeat_eval(metrics, 2)
    assert collect.write_runs_csv(plan, out) == 16
    with open(out / "runs.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if (r["arm"], r["seed"], r["update"]) == ("grpo", "0", "2")]
    assert len(rows) == 1 and rows[0]["kl_init"].lower() == "nan"
