"""A study's tables gathered from its finished run folders: ``runs.csv`` and ``eval_items.jsonl.gz``.

Both are rebuilt from scratch, atomically (:func:`gradprobe.outputs.write_bytes_atomic`), after every
finished run, so a killed study loses nothing; failed and partial runs are left out (``study.json``
lists them). Names and the ``runs.csv`` schema come from :mod:`gradprobe.layout`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

from ..layout import EVAL_ITEMS_GZ, EVAL_ITEMS_JSONL, METRICS_JSONL, RUNS_CSV, RUNS_CSV_COLUMNS, run_dir
from ..outputs import write_bytes_atomic
from ..training.plan import Plan
from .folder import run_status

__all__ = ["collect_runs", "write_runs_csv", "write_eval_items"]


def collect_runs(plan: Plan, out: str | Path) -> list[dict]:
    """Rows of ``runs.csv``: one per eval point of every COMPLETED run of the plan (failed and
    partial runs are left out; ``study.json`` lists them), in plan order.

    Columns (:data:`~gradprobe.layout.RUNS_CSV_COLUMNS`): arm, seed, update, generated_tokens (charged
    tokens), device_seconds (training device-seconds), accuracy (greedy held-out accuracy in [0, 1]),
    accuracy_sampled (empty where the schedule skipped it), reward, lr_scale, flops
    (generation + training FLOPs), response_length (mean greedy held-out completion, tokens),
    format_rate (greedy held-out completions in the task's format), kl_init (KL to the
    initial policy at the last update before the eval; empty where not measured),
    step_validity_rate and step_count_deviation (trace fidelity of the greedy held-out
    completions, :func:`gradprobe.rewards.process.trace_fidelity`; empty for a task without a
    step verifier). Columns a run of an older version did not record are empty.
    """
    rows = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        status, _ = run_status(folder)
        if status != "done":
            continue
        a = plan.arms[arm]
        for line in (folder / METRICS_JSONL).read_text().splitlines():
            if '"eval": true' not in line:
                continue
            e = json.loads(line)
            rows.append({"arm": arm, "seed": seed, "update": e["update"], "generated_tokens": e["generated_tokens"],
                         "device_seconds": e["device_seconds"], "accuracy": e.get("greedy_accuracy"),
                         "accuracy_sampled": e.get("sampled_accuracy"), "reward": a.reward, "lr_scale": a.lr_scale,
                         "flops": e.get("flops"), "response_length": e.get("response_length"),
                         "format_rate": e.get("format_rate"), "kl_init": e.get("kl_init"),
                         "step_validity_rate": e.get("step_validity_rate"),
                         "step_count_deviation": e.get("step_count_deviation")})
    return rows


def write_runs_csv(plan: Plan, out: str | Path) -> int:
    """Rebuild ``out/runs.csv`` atomically from the run folders; returns the number of rows.

    Raises
    ------
    OutputDirError
        The file cannot be written (the old one is kept).
    """
    rows = collect_runs(plan, out)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RUNS_CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in RUNS_CSV_COLUMNS})
    write_bytes_atomic(Path(out) / RUNS_CSV, buf.getvalue().encode())
    return len(rows)


def write_eval_items(plan: Plan, out: str | Path) -> int:
    """Rebuild ``out/eval_items.jsonl.gz`` atomically from the finished runs' ``eval_items.jsonl``
    (each line gains ``arm`` and ``seed``; format: :func:`gradprobe.training.metrics.evaluate`).
    Returns the number of lines; writes nothing when no finished run has per-item results.

    Raises
    ------
    OutputDirError
        The file cannot be written (the old one is kept).
    """
    lines = []
    for arm, seed in plan.runs():
        folder = run_dir(out, arm, seed)
        path = folder / EVAL_ITEMS_JSONL
        if run_status(folder)[0] != "done" or not path.exists():
            continue
        for line in path.read_text().splitlines():
            lines.append(json.dumps({"arm": arm, "seed": seed, **json.loads(line)}))
    if lines:
        write_bytes_atomic(Path(out) / EVAL_ITEMS_GZ, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return len(lines)
