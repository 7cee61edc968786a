"""A study's tables gathered from its finished run folders: ``runs.csv`` and ``eval_items.jsonl.gz``.

Both are rebuilt from scratch, atomically (:func:`gradprobe.outputs.write_bytes_atomic`): ``runs.csv``
after every finished run, so a killed study loses nothing, and both at the end of an invocation; failed and partial
runs are left out (``study.json`` lists them). Names and the ``runs.csv`` schema come from :mod:`gradprobe.layout`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..layout import EVAL_ITEMS_GZ, EVAL_ITEMS_JSONL, METRICS_JSONL, RUNS_CSV, RUNS_CSV_COLUMNS, run_dir
from ..outputs import write_bytes_atomic
from ..training.plan import Plan
from .folder import StudyError, check_run_folders, run_status

__all__ = ["collect_runs", "write_runs_csv", "write_eval_items", "check_finished_runs", "FinishedRunFiles"]


@dataclass
class FinishedRunFiles:
    """What was read of a study's finished run folders, kept so that one invocation of the study reads each
    finished run's ``metrics.jsonl`` and ``eval_items.jsonl`` once (its check on resume, then ``runs.csv`` after
    every run, and both tables at the end): ``rows[(arm, seed)]`` holds the run's ``runs.csv`` rows
    (:func:`collect_runs`), ``items[(arm, seed)]`` its ``eval_items.jsonl.gz`` lines (:func:`write_eval_items`;
    empty without the file). Only finished runs are kept: a finished run is never redone or replaced while the
    study holds its folder (:class:`~gradprobe.study.folder.FolderLock`), so what was read of it stays true."""

    rows: dict[tuple[str, int], list[dict]] = field(default_factory=dict)
    items: dict[tuple[str, int], list[str]] = field(default_factory=dict)


def _json_lines(path: Path, keep=None) -> list[dict]:
    """The JSON objects on the non-blank lines of the run file ``path`` that ``keep`` (a test of the line's
    text) accepts (default: all).

    Raises
    ------
    StudyError
        The file is missing or unreadable, or a kept line is not a JSON object: one line naming the file (and
        the line) and the fix, restore the file or delete the run's folder to rerun that run.
    """
    fix = f"restore it from a copy, or delete {path.parent} to rerun that run (the other runs are kept)"
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = "is missing" if isinstance(e, FileNotFoundError) else f"cannot be read ({type(e).__name__}: {e})"
        raise StudyError(f"{path} {why}, but the run finished (summary.json): runs.csv cannot be rebuilt "
                         f"without it; {fix}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or (keep is not None and not keep(line)):
            continue
        try:
            e = json.loads(line)
        except ValueError as err:
            e, why = None, f"{type(err).__name__}: {err}"
        else:
            why = f"a JSON {type(e).__name__}, not an object"
        if not isinstance(e, dict):
            raise StudyError(f"{path} line {n} is not a JSON object ({why}): the run's file is damaged; {fix}")
        out.append(e)
    return out


def collect_runs(plan: Plan, out: str | Path, read: FinishedRunFiles | None = None) -> list[dict]:
    """Rows of ``runs.csv``: one per eval point of every COMPLETED run of the plan (failed and
    partial runs are left out; ``study.json`` lists them), in plan order. ``read``: the rows of the runs it holds
    are taken from it, not read again, and those of the finished runs read now are added to it.

    Columns (:data:`~gradprobe.layout.RUNS_CSV_COLUMNS`): arm, seed, update, generated_tokens (charged
    tokens), device_seconds (training device-seconds), accuracy (greedy held-out accuracy in [0, 1]),
    accuracy_sampled (empty where the schedule skipped it), reward, lr_scale, flops
    (generation + training FLOPs), response_length (mean greedy held-out completion, tokens),
    format_rate (greedy held-out completions in the task's format), kl_init (KL to the
    initial policy at the last update before the eval; empty where not measured),
    step_validity_rate and step_count_deviation (trace fidelity of the greedy held-out
    completions, :func:`gradprobe.rewards.process.trace_fidelity`; empty for a task without a
    step verifier). Columns a run of an older version did not record are empty.

    Raises
    ------
    StudyError
        A finished run's ``metrics.jsonl`` is missing, unreadable, holds a line that is not a JSON object or an
        eval line without its update, generated_tokens or device_seconds, or two eval lines of one update with
        different values (one line naming the file, the line or update and the fix: restore it, or delete the run's
        folder to rerun it). An eval line repeated exactly gives one row.
    """
    rows = []
    for arm, seed in plan.runs():
        if read is not None and (arm, seed) in read.rows:
            rows += read.rows[(arm, seed)]
            continue
        folder = run_dir(out, arm, seed)
        if run_status(folder)[0] != "done":
            continue
        run_rows = _run_rows(plan, arm, seed, folder)
        if read is not None:
            read.rows[(arm, seed)] = run_rows
        rows += run_rows
    return rows


def _same(a, b) -> bool:
    """Whether two values of one eval line's field are the same record: equal, or both NaN (an eval line repeated
    exactly that holds a NaN, e.g. a KL that overflowed, is one eval, though NaN != NaN)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _update_key(update):
    """An eval line's ``update`` as a key that tells repeats of one eval apart from others: the value where it can be
    one (2 and 2.0 are one update), else its JSON text (a damaged line's list or object: kept as a row, which the
    analysis refuses naming the cell, :func:`gradprobe.study.reading.load_runs`)."""
    return update if update is None or isinstance(update, (int, float, str)) else json.dumps(update, sort_keys=True)


def _run_rows(plan: Plan, arm: str, seed: int, folder: Path) -> list[dict]:
    """The ``runs.csv`` rows of the finished run ``folder`` (``arm``, ``seed`` of ``plan``): one per eval of its
    ``metrics.jsonl``; an eval line repeated exactly (same update, same values) gives one row, as the eval was one
    (raises :class:`StudyError` as :func:`collect_runs` says, and for two eval lines of one update that differ:
    which is right cannot be told, and a runs.csv holding both is refused by the analysis)."""
    a = plan.arms[arm]
    rows, seen = [], {}
    for e in _json_lines(folder / METRICS_JSONL, lambda line: '"eval": true' in line):
        if missing := [k for k in ("update", "generated_tokens", "device_seconds") if k not in e]:
            raise StudyError(f"{folder / METRICS_JSONL}: an eval line (update {e.get('update')}) lacks "
                             f"{', '.join(missing)}: the run's file is damaged; restore it from a copy, or "
                             f"delete {folder} to rerun that run (the other runs are kept)")
        row = {"arm": arm, "seed": seed, "update": e["update"], "generated_tokens": e["generated_tokens"],
               "device_seconds": e["device_seconds"], "accuracy": e.get("greedy_accuracy"),
               "accuracy_sampled": e.get("sampled_accuracy"), "reward": a.reward, "lr_scale": a.lr_scale,
               "flops": e.get("flops"), "response_length": e.get("response_length"),
               "format_rate": e.get("format_rate"), "kl_init": e.get("kl_init"),
               "step_validity_rate": e.get("step_validity_rate"),
               "step_count_deviation": e.get("step_count_deviation")}
        first = seen.setdefault(_update_key(e["update"]), row)
        if first is row:
            rows.append(row)
        elif differ := ", ".join(f"{k} {first[k]!r} and {row[k]!r}" for k in row if not _same(row[k], first[k])):
            raise StudyError(f"{folder / METRICS_JSONL} records the eval at update {e['update']} twice with "
                             f"different values ({differ}): the run's file is damaged and which line is right "
                             f"cannot be told; restore it from a copy, or delete {folder} to rerun that run (the "
                             "other runs are kept)")
    return rows


def write_runs_csv(plan: Plan, out: str | Path, read: FinishedRunFiles | None = None) -> int:
    """Rebuild ``out/runs.csv`` atomically from the run folders; returns the number of rows. ``read``: what was
    read of the finished runs before (:func:`collect_runs`).

    Raises
    ------
    OutputDirError
        The file cannot be written (the old one is kept).
    StudyError
        A finished run's ``metrics.jsonl`` is missing or damaged (:func:`collect_runs`; nothing is written).
    """
    rows = collect_runs(plan, out, read)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RUNS_CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in RUNS_CSV_COLUMNS})
    write_bytes_atomic(Path(out) / RUNS_CSV, buf.getvalue().encode())
    return len(rows)


def write_eval_items(plan: Plan, out: str | Path, read: FinishedRunFiles | None = None) -> int:
    """Rebuild ``out/eval_items.jsonl.gz`` atomically from the finished runs' ``eval_items.jsonl``
    (each line gains ``arm`` and ``seed``; format: :func:`gradprobe.training.metrics.evaluate`).
    Returns the number of lines; writes nothing when no finished run has per-item results. ``read``: the lines of
    the runs it holds are taken from it, not read again, and those of the finished runs read now are added to it.

    Raises
    ------
    OutputDirError
        The file cannot be written (the old one is kept).
    StudyError
        A finished run's ``eval_items.jsonl`` is unreadable or holds a line that is not a JSON object (the file,
        the line and the fix are named; nothing is written).
    """
    lines = _eval_item_lines(plan, out, read)
    if lines:
        write_bytes_atomic(Path(out) / EVAL_ITEMS_GZ, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return len(lines)


def _eval_item_lines(plan: Plan, out: str | Path, read: FinishedRunFiles | None = None) -> list[str]:
    """The lines of ``eval_items.jsonl.gz``: every finished run's ``eval_items.jsonl`` line with its arm and seed
    (``read`` as :func:`write_eval_items` says; raises :class:`StudyError` as it says)."""
    lines = []
    for arm, seed in plan.runs():
        if read is not None and (arm, seed) in read.items:
            lines += read.items[(arm, seed)]
            continue
        folder = run_dir(out, arm, seed)
        if run_status(folder)[0] != "done":
            continue
        path = folder / EVAL_ITEMS_JSONL
        run_lines = [json.dumps({"arm": arm, "seed": seed, **e}) for e in _json_lines(path)] if path.exists() else []
        if read is not None:
            read.items[(arm, seed)] = run_lines
        lines += run_lines
    return lines


def check_finished_runs(plan: Plan, out: str | Path) -> FinishedRunFiles:
    """Refuse a study folder whose run folders are damaged, before a resume runs anything or rewrites
    ``runs.csv``, ``eval_items.jsonl.gz``, ``study.json`` or ``analysis.json`` from the other runs as if the study
    were complete: a ``summary.json`` that cannot be read, a finished run without its ``metrics.jsonl``
    (:func:`~gradprobe.study.folder.check_run_folders`), a finished run's ``metrics.jsonl`` or ``eval_items.jsonl``
    with a damaged line (:func:`collect_runs`, :func:`write_eval_items`).

    Returns
    -------
    FinishedRunFiles
        What was read of the finished runs, for :func:`write_runs_csv` and :func:`write_eval_items` to take
        instead of reading those files again.

    Raises
    ------
    StudyError
        One line naming the damaged file and the fix (restore it, or delete that run's folder to rerun it).
    """
    check_run_folders(out, plan.runs())
    read = FinishedRunFiles()
    try:
        collect_runs(plan, out, read)
        _eval_item_lines(plan, out, read)
    except StudyError as e:
        raise StudyError(f"{e}; nothing was run or rewritten") from None
    return read
