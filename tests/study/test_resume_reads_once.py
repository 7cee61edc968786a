"""A resumed study reads each finished run's metrics.jsonl and eval_items.jsonl once per invocation: the check of the
run folders on resume (gradprobe.study.collect.check_finished_runs) hands what it read to the rebuilds of runs.csv
(after every run and at the end) and eval_items.jsonl.gz, which read only the runs finished since; the files written
are those a rebuild from every run folder writes. No training: finished runs are written by hand and the executor is
faked."""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from gradprobe.study import collect, executors
from gradprobe.study.runner import run_dir, run_study
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan

ARMS = '[arms.grpo]\nreward = "outcome"\n[arms.mc_value]\nreward = "mc_value"\n'


def _write_finished_run(folder: Path, arm: str, seed: int) -> None:
    """A finished run written by hand: summary.json completed, four evals in metrics.jsonl (and one training line
    between them), their per-item results in eval_items.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    evals = [{"update": u, "eval": True, "generated_tokens": tok, "device_seconds": 0.5 * u, "flops": 1e6 * tok,
              "greedy_accuracy": k / 16} for u, tok, k in ((0, 0, 4), (1, 260, 5 + seed), (2, 510, 6),
                                                           (3, 705, 7 + (arm == "grpo")))]
    lines = [json.dumps(evals[0]), json.dumps({"update": 1, "loss": 0.25})] + [json.dumps(e) for e in evals[1:]]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "eval_items.jsonl").write_text("".join(
        json.dumps({"update": e["update"], "generated_tokens": e["generated_tokens"], "greedy": f"{seed}{u % 2}1"})
        + "\n" for u, e in enumerate(evals)))
    (folder / "summary.json").write_text(json.dumps({"completed": True, "updates": 3, "final_greedy_accuracy": 0.5}))


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Counter of the run files read through gradprobe.study.collect._json_lines, keyed 'arm/seedS/file'."""
    counts: Counter = Counter()
    real = collect._json_lines

    def counted(path, keep=None):
        counts[f"{path.parent.parent.name}/{path.parent.name}/{path.name}"] += 1
        return real(path, keep)

    monkeypatch.setattr(collect, "_json_lines", counted)
    return counts


@pytest.fixture
def trained(monkeypatch) -> list[tuple[str, int]]:
    """The (arm, seed) of every training task the executor gets; each is 'trained' by writing its finished run."""
    calls: list[tuple[str, int]] = []

    def fake(task: dict) -> dict:
        if task["kind"] == "train":
            calls.append((task["arm"], task["seed"]))
            _write_finished_run(Path(task["out"]), task["arm"], task["seed"])
        return {"kind": task["kind"], "arm": task.get("arm"), "seed": task.get("seed"), "status": "done",
                "updates": 3, "final_accuracy": 0.5, "seconds": 0.01}

    monkeypatch.setattr(executors, "execute_task", fake)
    return calls


def _study(tmp_path: Path, finished) -> tuple[Path, Path]:
    """(plan, study folder) of a 2-arm x 2-seed toy plan whose runs ``finished`` are written by hand."""
    plan = write_plan(tmp_path, toy_plan("reads", seeds=(0, 1), arms=ARMS))
    out = tmp_path / "study"
    for arm, seed in finished:
        _write_finished_run(run_dir(out, arm, seed), arm, seed)
    return plan, out


def _tables(out: Path) -> tuple[bytes, bytes]:
    return (out / "runs.csv").read_bytes(), (out / "eval_items.jsonl.gz").read_bytes()


def _rebuilt(plan: Path, out: Path) -> tuple[bytes, bytes]:
    """runs.csv and eval_items.jsonl.gz as a rebuild from every run folder writes them (nothing taken as read)."""
    p = load_plan(out / "plan.toml")
    collect.write_runs_csv(p, out)
    collect.write_eval_items(p, out)
    return _tables(out)


def test_a_resume_reads_each_finished_runs_files_once_and_writes_the_same_tables(tmp_path, reads, trained):
    runs = [("grpo", 0), ("grpo", 1), ("mc_value", 0), ("mc_value", 1)]
    plan, out = _study(tmp_path, runs)
    res = run_study(plan, out, executor="inline", check=False, probe=False, analyze=False, say=lambda m: None)
    assert res.ok and len(res.skipped) == 4 and trained == []
    assert reads == Counter({f"{a}/seed{s}/{f}": 1 for a, s in runs for f in ("metrics.jsonl", "eval_items.jsonl")})
    written = _tables(out)
    rows = list(csv.DictReader(written[0].decode().splitlines()))
    assert len(rows) == 16  # 4 runs x 4 evals; the training line is no row
    assert [(r["arm"], r["seed"], r["update"], r["generated_tokens"], r["accuracy"]) for r in rows[4:8]] == [
        ("grpo", "1", "0", "0", "0.25"), ("grpo", "1", "1", "260", "0.375"), ("grpo", "1", "2", "510", "0.375"),
        ("grpo", "1", "3", "705", "0.5")]
    items = [json.loads(x) for x in gzip.decompress(written[1]).decode().splitlines()]
    assert len(items) == 16 and items[5] == {"arm": "grpo", "seed": 1, "update": 1, "generated_tokens": 260,
                                             "greedy": "111"}
    reads.clear()
    assert _rebuilt(plan, out) == written  # the tables of a rebuild from the run folders, byte for byte
    assert sum(reads.values()) == 8  # (the rebuild itself read every file: nothing was taken from the resume)


def test_runs_finished_during_a_resume_are_read_once_and_earlier_ones_are_not_read_again(tmp_path, reads, trained):
    done = [("grpo", 0), ("mc_value", 1)]
    plan, out = _study(tmp_path, done)
    res = run_study(plan, out, executor="inline", check=False, probe=False, analyze=False, say=lambda m: None)
    assert res.ok and sorted(res.skipped) == done and trained == [("grpo", 1), ("mc_value", 0)]
    # runs.csv is rebuilt after each of the two runs and at the end, eval_items.jsonl.gz at the end: before, the
    # runs finished on resume had their metrics.jsonl read four times and their eval_items.jsonl twice
    assert reads == Counter({f"{a}/seed{s}/{f}": 1 for a in ("grpo", "mc_value") for s in (0, 1)
                             for f in ("metrics.jsonl", "eval_items.jsonl")})
    written = _tables(out)
    assert len(list(csv.DictReader(written[0].decode().splitlines()))) == 16
    assert _rebuilt(plan, out) == written
