"""Reading a reference curve's eval points from what a user has: a study, ``metrics.jsonl``, a CSV, TRL.

:class:`CurveSources` holds the alternate constructors of :class:`~gradprobe.forecast.curves.ReferenceCurve`
(``from_study``, ``from_metrics``, ``from_csv``, ``from_trl_state``): each reads the update count and
held-out accuracy of every eval (and, where the file says it, what the curve was trained with) and
builds the curve with ``cls(...)``. Accuracies are read as fractions or points, and each eval once
(:mod:`gradprobe.forecast.accuracy_values`: :func:`to_points`, :func:`one_value_per_eval`).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np

from ..layout import CONFIG_JSON, METRICS_JSONL, PLAN_COPY, RUNS_CSV
from ..outputs import is_json_number, json_number_float, json_number_text, json_short
from .accuracy_values import one_value_per_eval, read_points, to_points
from .analysis_reads import analysis_damage, analysis_differences, missing_items_clause, rebuild_analysis
from .csv_cells import (CAUTION_MARK, SKIPPED_MARK, check_csv_values, numeric_columns, one_line_per_eval,
                        read_csv_checked, skipped_cells, skipped_note, study_skipped_evals, with_skipped,
                        without_short_lines)
from .curve_fit import N_REPLICATES, CurveError, TooFewEvalsError, fit_needs
# not_utf8 and read_source_text: curve_file and curves import them from here too
from .text_files import JSONShapeError, not_utf8, parse_curve_json, read_source_text
from .study_items import item_accuracy_mismatches, read_item_lines, restore_runs_csv_fix

__all__ = ["CurveSources", "task_key", "to_points", "one_value_per_eval", "TRL_STATE", "PLAN_EVAL_HINT",
           "TRL_EVAL_HINT", "CSV_EVAL_HINT", "study_eval_hint", "INITIAL_RANGE", "initial_accuracy_value",
           "GIVEN_R0_MARK", "GIVEN_R0_KEY", "last_checkpoint_state", "trl_state_path", "truncated_hint",
           "TRL_RECOPY"]

TRL_STATE = "trainer_state.json"  # TRL's Trainer log (log_history)
#: a TRL (transformers Trainer) checkpoint folder of an output_dir: ``checkpoint-N``, N its global step
#: (transformers.trainer_utils' ``_re_checkpoint``, what its ``get_last_checkpoint`` orders by)
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
#: The fix of too few evals for a curve of gradprobe runs (ReferenceCurve's refusal ends with it) ...
PLAN_EVAL_HINT = "evaluate more often (e.g. `[eval] every_tokens` smaller than the budget)"
#: ... and for a TRL run (:meth:`CurveSources.from_trl_state` passes it as the curve's ``eval_hint``).
TRL_EVAL_HINT = ("evaluate more often: in TRL's TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a "
                 "smaller eval_steps, and eval_on_start=True for the eval at step 0 (or give the initial policy's "
                 "accuracy: initial_accuracy=, gradprobe probe --initial-accuracy)")
#: ... and for a CSV of evals (:meth:`CurveSources.from_csv`: its rows are the evals) ...
CSV_EVAL_HINT = "evaluate more often (evals at more update counts, one row of the CSV per eval)"
#: ... and for a TRL run with an eval at step 0, its own or the ``initial_accuracy`` given (the step-0 eval is not
#: what is missing).
_TRL_MORE_EVALS = ("evaluate more often: in TRL's TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a "
                   "smaller eval_steps")
#: In the note saying the curve's update-0 point is the ``initial_accuracy`` given, not an eval of its file
#: (:meth:`CurveSources.from_trl_state`): :func:`gradprobe.forecast.start_check.start_notes` prints it under the
#: forecast where the note on an extrapolated R0 would be.
GIVEN_R0_MARK = " is the given initial accuracy "
#: The curve's ``metadata`` key recording that update-0 points are the ``initial_accuracy`` given (kept by
#: :meth:`~gradprobe.forecast.curves.ReferenceCurve.save`): ``{"value": X as given, "points": X in points,
#: "seeds": [the labels of the seeds whose update-0 point it is]}``
#: (:attr:`~gradprobe.forecast.curves.ReferenceCurve.given_r0`).
GIVEN_R0_KEY = "initial_accuracy"
_GIVEN = "initial_accuracy"  # where the value given sits among a TRL log's evals (:func:`_trl_rows`)
_SHOWN_STEPS = 5  # skipped eval steps (or files) named in a note; the rest are counted
#: The fix of a TRL trainer state that does not parse, or parses as no TRL writer writes it (a key twice).
TRL_RECOPY = ("re-copy trainer_state.json from the TRL run's output_dir (its last checkpoint-N/), or pass that "
              "output_dir itself to --reference-curve")


def task_key(task: str | None, config: dict | None = None) -> str | None:
    """A task spec in one canonical form, ``name:k1=v1,k2=v2`` with keys sorted (to compare tasks).

    ``task`` may already carry an inline config (``chain_sum:max_terms=4,min_terms=3``); ``config``
    adds keys. Specs naming files or hub datasets (``gsm8k:PATH``, ``jsonl:PATH[:k=v]``, ``hf:NAME[:...]``)
    are kept as given.
    """
    if task is None:
        return None
    name, _, inline = str(task).partition(":")
    if name in ("gsm8k", "jsonl", "hf"):
        return str(task)
    kv = {}
    for part in filter(None, (x.strip() for x in inline.split(","))):
        k, _, v = part.partition("=")
        kv[k.strip()] = v.strip()
    for k, v in (config or {}).items():
        kv[str(k)] = str(v)
    return name + (":" + ",".join(f"{k}={kv[k]}" for k in sorted(kv)) if kv else "")


def _plan_metadata(plan: Path, arm: str) -> dict:
    """What a study's frozen plan says the arm's curve was trained with (``plan_error`` when unreadable)."""
    try:
        p = tomllib.loads(plan.read_text())
        train, task = p.get("train", {}), p.get("task", {})
        arm_spec = (p.get("arms") or {}).get(arm, {})
        return dict(model=(p.get("model") or {}).get("name"), task=task_key(task.get("name"), task.get("config")),
                    update_prompts=arm_spec.get("prompts_per_update", train.get("prompts_per_update")),
                    update_group=arm_spec.get("group", train.get("group")),
                    lr=float(train.get("lr", math.nan)) * float(arm_spec.get("lr_scale", 1.0)),
                    loss_type=train.get("loss_type"), max_new_tokens=(p.get("sampling") or {}).get("max_new_tokens"))
    except (tomllib.TOMLDecodeError, TypeError, ValueError) as e:
        return {"plan_error": f"plan.toml unreadable: {e}"}


def _run_config(path: Path, i: int, n_paths: int, meta: dict) -> tuple[str, object]:
    """The seed label of run ``i`` from the ``config.json`` beside its ``metrics.jsonl`` (read when ``n_paths`` > 1;
    run ``i`` without one is ``str(i)``), and the seed that file records (``run.seed``; None: no such file or
    field, for :func:`_one_run_each`); fills ``meta`` (model, task, update batch, lr, loss type) where it has no
    value yet. A ``config.json`` that is absent gives no metadata; one that is there is read whole or refused
    (:func:`_config_run`): skipped, its update batch would be taken to be the probe's and the forecast would move,
    with notes saying the curve records none.

    Raises
    ------
    CurveError
        A ``config.json`` that cannot be read or is not what ``gradprobe train`` writes (:func:`_config_run`); a
        ``run.seed`` read as a label that is not an integer >= 0 (``true``, ``"0"``, ``1.5``), which ``gradprobe
        train`` never writes. The message names the file, the field, the value and the fix.
    """
    label, recorded = str(i), None
    cfg = path.parent / CONFIG_JSON
    if not cfg.is_file():
        return label, recorded
    run = _config_run(cfg)
    recorded = run.get("seed")
    seed = run.get("seed", i)
    if n_paths > 1 and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise CurveError(f"{cfg}: field 'run.seed' = {json_short(seed, 40)} is not a seed: `gradprobe train` "
                         "writes the run's seed as an integer >= 0 (JSON, unquoted); write the seed the run "
                         "was trained with")
    label = str(seed) if n_paths > 1 else label
    train, task = run.get("train", {}), run.get("task", {})
    for k, v in (("model", run.get("model", {}).get("name")),
                 ("task", task_key(task.get("name"), task.get("config"))),
                 ("update_prompts", train.get("prompts_per_update")), ("update_group", train.get("group")),
                 ("lr", train.get("lr")), ("loss_type", train.get("loss_type"))):
        meta.setdefault(k, v)
    return label, recorded


#: The fix of a ``config.json`` beside a ``metrics.jsonl`` that cannot be read (:func:`_config_run`).
_CONFIG_FIX = ("`gradprobe train` writes it at the start of the run: put back the run's own config.json (from a copy "
               "of the run folder), or move the file out of the folder to read the curve without the run's model, "
               "task and update batch (then state the update with --update-prompts/--update-group)")
#: The objects of a run's ``config.json`` whose fields the curve's metadata reads (``gradprobe train`` writes each as
#: a JSON object; ``run.task.config`` the task's keyword arguments).
_CONFIG_TABLES = (("run",), ("run", "model"), ("run", "task"), ("run", "train"), ("run", "task", "config"))


def _config_run(cfg: Path) -> dict:
    """The ``run`` object of a ``gradprobe train`` ``config.json`` (``{}`` when it has none: a ``config.json`` of
    something else, such as a model's), read as UTF-8 JSON (:func:`~.text_files.read_source_text`,
    :func:`~.text_files.parse_curve_json`) with each object the metadata reads (:data:`_CONFIG_TABLES`) checked to
    be one where present.

    Raises
    ------
    CurveError
        Naming the file, what is wrong and the fix (:data:`_CONFIG_FIX`): bytes that are not UTF-8 text (UTF-16,
        gzip, ...: what they are, :func:`~.text_files.not_utf8`, with its iconv fix), text that is not JSON (truncated
        or damaged: :func:`_cut_short`), a key given twice or nesting too deep (:class:`~.text_files.JSONShapeError`),
        a document that is not an object, or one of :data:`_CONFIG_TABLES` that is not an object (``"run": {"model":
        "tiny"}``).
    """
    try:
        doc = parse_curve_json(read_source_text(cfg))
    except UnicodeDecodeError as e:
        why = not_utf8(cfg, e, False, json_fix=f"then put the converted file in its place ({cfg.name})")
        raise CurveError(f"{cfg} (the run's config, read for the curve's model, task and update batch) cannot be "
                         f"read as JSON: {why}") from None
    except json.JSONDecodeError as e:
        what = "truncated (it ends mid-value)" if _cut_short(e) else "damaged"
        raise CurveError(f"{cfg} (the run's config, read for the curve's model, task and update batch) is not valid "
                         f"JSON ({e}): the file is {what}; {_CONFIG_FIX}") from None
    except JSONShapeError as e:
        raise CurveError(f"{cfg} (the run's config, read for the curve's model, task and update batch): {e}; "
                         f"{_CONFIG_FIX}") from None
    for keys in ((),) + _CONFIG_TABLES:
        value, field = doc, "the document"
        for depth, key in enumerate(keys):
            value, field = value.get(key, {}), "field " + repr(".".join(keys[:depth + 1]))
        if not isinstance(value, dict):
            raise CurveError(f"{cfg} (the run's config, read for the curve's model, task and update batch): {field} "
                             f"is {json_short(value, 40)}, not the JSON object `gradprobe train` writes there, so the "
                             f"run's model, task and update batch cannot be read; {_CONFIG_FIX}")
    return doc.get("run", {})


def _number(value, where: str) -> float:
    """``value`` as a float when it is a number (:func:`~gradprobe.outputs.is_json_number`, NaN and +-inf included:
    the callers skip a NaN eval and refuse an infinite one; an integer too large for a float reads as +-inf,
    :func:`~gradprobe.outputs.json_number_float`, and the refusal shows it as the file holds it).

    Raises
    ------
    CurveError
        ``value`` is no number (true/false, null, text such as ``"0.676"``, a list or an object): the message names
        ``where`` (file, line or entry, and field) and the value (true/false/null as JSON writes them).
    """
    if is_json_number(value):
        return json_number_float(value)
    hint = ""
    if isinstance(value, str):  # "0.676" would read as 0.676: a JSON string is text, whatever it spells
        try:
            float(value)
            hint = " (a JSON string: write the number unquoted)"
        except ValueError:
            pass
    shown = json.dumps(value) if isinstance(value, bool) or value is None else repr(value)
    raise CurveError(f"{where} = {shown} is not a number{hint}; fix or delete that eval")


def _shown_cell(text: str) -> str:
    """A CSV cell too large for a float as the file holds it: an integer's first and last ten digits and its length
    (:func:`~gradprobe.outputs.json_number_text`), anything else (``1e400``) quoted."""
    digits = text.lstrip("+-")
    if not digits.isdigit():
        return f"{text!r} (too large for a float)"
    try:
        return json_number_text(int(text))
    except ValueError:  # beyond Python's int-to-text limit: the digits counted from the text
        sign = "-" if text.startswith("-") else ""
        return f"{sign}{digits[:10]}...{digits[-10:]} (an integer of {len(digits)} digits, too large for a float)"


def _too_large_cells(raw: bytes, path: Path, cols) -> None:
    """Refuse a cell of ``cols`` of the CSV whose bytes are ``raw`` that holds a number too large for a float (a
    400-digit integer, ``1e400``): pandas reads it as ``inf``, or as an integer no float holds, so the cell is shown
    as the file holds it (:func:`_shown_cell`), not as the ``inf`` the file does not hold. Row ``i`` is line
    ``i + 2``, as :func:`~.csv_cells.read_csv_checked` reads it.

    Raises
    ------
    CurveError
        Naming the file, the line, the column, the cell and the fix (a cell that spells ``inf`` is left to
        :func:`~.csv_cells.numeric_columns`, which refuses it).
    """
    import io

    import pandas as pd

    text = stripped_header(pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, skip_blank_lines=False))
    for col in cols:
        bad = []
        for row, cell in enumerate(text[col]):
            t = cell.strip()
            try:
                big = math.isinf(float(t)) and t.lstrip("+-").lower() not in ("inf", "infinity")
            except ValueError:
                continue
            if big:
                bad.append((row, t))
        if bad:
            row, t = bad[0]
            raise CurveError(f"{path}, line {row + 2}, column {col!r}: {_shown_cell(t)} is not a finite number "
                             f"({len(bad)} such cell(s) in that column); fix or delete that line")


#: What a cell of a CSV's seed column may not spell (case aside): a boolean is no seed label.
_BOOLEAN_CELLS = ("true", "false")


def _check_csv_seeds(seeds: np.ndarray, lines: list[int], path: Path, seed_col: str) -> None:
    """Refuse a boolean-looking cell (``True``, ``false``: :data:`_BOOLEAN_CELLS`) of a CSV's seed column: it
    would be read as a seed label of its own (the one-seed caution gone, a seed bootstrap over a spurious seed).
    A seed label is the seed's integer or any other run name (text); ``seeds`` and ``lines`` (each cell's line of
    the file) are those of the lines read.

    Raises
    ------
    CurveError
        Naming the file, the first such line, the column, the cell and the fix.
    """
    bad = [i for i, v in enumerate(seeds) if isinstance(v, (bool, np.bool_))
           or (isinstance(v, str) and v.strip().lower() in _BOOLEAN_CELLS)]
    if bad:
        raise CurveError(f"{path}, line {lines[bad[0]]}, column {seed_col!r}: {str(seeds[bad[0]])!r} is a boolean, "
                         f"not a seed label ({len(bad)} such cell(s) in that column); write the run's seed (an integer "
                         "such as 0) or its name in that cell")


def _study_seed_ok(value) -> bool:
    """Whether a ``runs.csv`` seed cell as pandas read it is a seed ``gradprobe study`` writes: an integer >= 0
    (a float one where a blank cell elsewhere made the column float; text of digits where other text made it
    text), not a boolean, a fraction, a negative number, other text or a blank cell."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, np.integer)):
        return value >= 0
    if isinstance(value, (float, np.floating)):
        return math.isfinite(value) and value >= 0 and float(value).is_integer()
    return isinstance(value, str) and value.strip().isdigit() and value.strip().isascii()


def _check_study_seeds(d, runs: Path, arm: str) -> None:
    """Refuse a seed cell of the lines of ``arm`` read from a study's ``runs.csv`` (``d``, row index ``i`` on line
    ``i + 2``) that is not an integer >= 0 (:func:`_study_seed_ok`): ``gradprobe study`` writes each run's seed so,
    and a cell such as ``True`` would be read as a seed of its own.

    Raises
    ------
    CurveError
        Naming the file, the first such line, the column, the cell and the fix
        (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`: rebuilt from ``runs/``, else from a copy).
    """
    bad = [(int(i), v) for i, v in zip(d.index, d["seed"]) if not _study_seed_ok(v)]
    if bad:
        line, v = bad[0][0] + 2, bad[0][1]
        shown = "an empty cell" if isinstance(v, float) and math.isnan(v) else repr(str(v))
        raise CurveError(f"{runs}, line {line}, column 'seed': {shown} is not a seed ({len(bad)} such line(s) of arm "
                         f"{arm!r}): `gradprobe study` writes each run's seed as an integer >= 0, so runs.csv was "
                         f"edited or damaged; {restore_runs_csv_fix(runs.parent)}")


def _check_item_accuracies(df, arm: str, accuracy_col: str, study_dir: Path, runs: Path) -> None:
    """Refuse a study's ``runs.csv`` whose ``accuracy_col`` cell of a line of ``arm`` is not the mean of the per-item
    results the study wrote at that eval (:func:`~gradprobe.forecast.study_items.item_accuracy_mismatches`, the
    analysis's and calibration's check, within its ``ITEM_ACCURACY_TOL``): the run computed the accuracy from those
    items, so the file was edited or damaged and the curve would be fitted to values no run measured.

    ``df``: runs.csv as :meth:`CurveSources.from_study` read it (row ``i`` on line ``i + 2``; a cut line's accuracy
    blanked, so not compared). Only ``arm``'s lines and ``accuracy_col`` are compared (what the curve reads), each
    eval once (exact copies of a line dropped). A study without per-item results (``eval_items.jsonl.gz``, or the
    run folders' ``eval_items.jsonl``), or with unreadable ones, is not checked.

    Raises
    ------
    CurveError
        The analysis's message (the file, each line, run and update, the runs.csv value and the items' mean) and its
        fix (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`).
    """
    items = read_item_lines(study_dir)
    if not items:
        return
    cols = [c for c in ("arm", "seed", "update", "generated_tokens", accuracy_col) if c in df.columns]
    rows = df.loc[df["arm"] == arm, cols].drop_duplicates()
    wrong = item_accuracy_mismatches(rows, items, runs, [int(i) + 2 for i in rows.index], study_dir)
    if wrong is not None:
        raise CurveError(f"{wrong}, and the reference curve is fitted to those accuracies; "
                         f"{restore_runs_csv_fix(study_dir)}")


def _check_analysis_reads(study_dir: Path, table, raw: bytes, arm: str | None = None) -> None:
    """Refuse a study whose ``analysis.json`` was not made from the ``runs.csv`` it holds now
    (:func:`~gradprobe.forecast.analysis_reads.analysis_differences`, the comparison ``calib`` refuses it by: arms,
    seed counts, plan sha256, each run's accuracy read at a matched point and at update 0, each arm's update-0 mean
    (its R0), and ``arm``'s sigmoid fit to its evals, which tells an edit of an eval no read uses). An accuracy
    edited where the per-item results are gone (or were never saved) is refused so; a blank accuracy cell skips only
    the reads it could have changed (the curve's notes name it); a runs.csv re-saved with 6 or more significant
    digits is read as the same file. A folder without a readable ``analysis.json`` (a study still running, or
    stopped before its analysis) is not compared; a damaged one
    (:func:`~gradprobe.forecast.analysis_reads.analysis_damage`) is refused, as calib refuses it.

    ``table``: runs.csv as read (every arm; row ``i`` on line ``i + 2``), ``raw``: its bytes; ``arm``: the curve's
    arm, the only one whose fit is refitted (about 20 ms; None: every arm's).

    Raises
    ------
    CurveError
        Naming the study folder, the differences (as :func:`gradprobe.study.coverage.stale_analysis` phrases them),
        per-item results the analysis was made with that are missing now
        (:func:`~gradprobe.forecast.analysis_reads.missing_items_clause`), and the fix: put back the runs.csv the
        analysis was made from (:func:`~gradprobe.forecast.study_items.restore_runs_csv_fix`), or, if the edit was
        meant, re-analyse the study
        (:func:`~gradprobe.forecast.analysis_reads.rebuild_analysis`).
    """
    damage = analysis_damage(study_dir)
    if damage is not None:  # as calib refuses it: not read as a study without an analysis
        raise CurveError(f"{study_dir}/analysis.json is damaged ({damage}), so runs.csv cannot be checked against the "
                         "analysis the study made from it; put the file back from a copy of the study, or "
                         f"{rebuild_analysis(study_dir)}, then read the curve again")
    diffs = analysis_differences(study_dir, table, raw, fit_arms=None if arm is None else [arm])
    if not diffs:
        return
    items = missing_items_clause(study_dir)
    raise CurveError(f"{study_dir}: analysis.json does not match runs.csv ({'; '.join(diffs)}): runs.csv changed "
                     "after the analysis, and the reference curve would be fitted to runs.csv as it is now"
                     f"{'; ' + items if items else ''}; put back the runs.csv the analysis was made from: "
                     f"{restore_runs_csv_fix(study_dir)}; or, if the edit was meant, "
                     f"{rebuild_analysis(study_dir)}, then read the curve again")


def _each_file_once(paths: list[Path], kind: str, entries: list[list] | None = None) -> None:
    """Refuse one file given twice (two runs of one file would count as two seeds), and, with ``entries`` (each
    file's log entries), two files that log one run (:func:`_one_run_each`)."""
    seen = {}
    for p in paths:
        first = seen.setdefault(p.resolve(), p)
        if first is not p:
            raise CurveError(f"{kind} {p} is given twice ({first} and {p}): each run's file once (two copies would "
                             "count as two seeds with identical evals)")
    if entries is not None:
        _one_run_each(entries, paths, kind)


#: Entries two files must share, from their first on, to be one run's (a run's log entries carry its losses and
#: timings, which no other run repeats; two seeds of one initial policy share at most their first eval)
SAME_RUN_ENTRIES = 3


def _one_run_each(entries: list[list], paths: list[Path], kind: str, claimed: list | None = None) -> None:
    """Refuse two files that log one run: one's entries (``entries[i]``: file ``i``'s log entries, in order: a
    metrics.jsonl's lines, a trainer state's ``log_history``) are the first entries of the other's, at least
    :data:`SAME_RUN_ENTRIES` of them: two checkpoints of one TRL run (``checkpoint-40`` and ``checkpoint-60``), or a
    copy of a file at another path. Counted as two seeds they would shrink the curve's seed spread toward zero.
    ``claimed``: each file's seed as its run records it (a ``config.json`` beside a metrics.jsonl; None: none): two
    files that record different seeds are two runs, however alike their logs."""
    for i in range(len(paths)):
        for j in range(i + 1, len(paths)):
            if claimed and None not in (claimed[i], claimed[j]) and claimed[i] != claimed[j]:
                continue
            a, b = sorted((i, j), key=lambda k: len(entries[k]))
            if len(entries[a]) >= SAME_RUN_ENTRIES and entries[b][:len(entries[a])] == entries[a]:
                how = ("the same entries" if len(entries[a]) == len(entries[b]) else
                       f"its first {len(entries[a])} entries")
                raise CurveError(f"{kind} {paths[a]} and {paths[b]} log one run: {paths[b]} holds {how} of {paths[a]} "
                                 "(losses and times included, which no other run repeats), as two checkpoints of one "
                                 "run or a copy do; each seed is one run: pass one file per run (a run's newest "
                                 "checkpoint holds its whole log)")


def _run_file(path, name: str, what: str) -> Path:
    """``path``, or ``path / name`` when it is a folder; CurveError naming ``what`` to pass when it is missing."""
    path = Path(path)
    if path.is_dir():
        path = path / name
    if not path.is_file():
        raise CurveError(f"{path} not found; pass {what}")
    return path


def last_checkpoint_state(folder) -> tuple[Path | None, str | None]:
    """The ``trainer_state.json`` of the last checkpoint of a TRL ``output_dir``, and a note saying which was read.

    TRL (transformers' Trainer) saves ``output_dir/checkpoint-N/`` every ``save_steps``, N the global step, each
    with a ``trainer_state.json`` whose ``log_history`` holds the run's whole history up to step N; the last
    checkpoint is the one with the highest N, picked as ``transformers.trainer_utils.get_last_checkpoint`` picks
    it (folders named ``checkpoint-<digits>``, compared by the number: checkpoint-1000 after checkpoint-999). That
    function is not called: importing ``transformers.trainer_utils`` loads torch, for a folder listing. A
    checkpoint without a ``trainer_state.json`` (a save cut short) is passed over for the next highest, and the
    note says so.

    Parameters
    ----------
    folder : path
        A folder (an ``output_dir``).

    Returns
    -------
    (Path, str) or (None, None)
        The file and the note (for the curve's ``notes``: which checkpoint was read, of how many); ``(None,
        None)`` when ``folder`` is not a folder or no ``checkpoint-N`` folder in it holds a ``trainer_state.json``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None, None
    found = sorted(((int(m[1]), p) for p in folder.iterdir() if (m := _CHECKPOINT.match(p.name)) and p.is_dir()),
                   key=lambda x: x[0], reverse=True)
    last = next((i for i, (_, p) in enumerate(found) if (p / TRL_STATE).is_file()), None)
    if last is None:
        return None, None
    checkpoint, passed = found[last][1], [p.name for _, p in found[:last]]
    state, of = checkpoint / TRL_STATE, f"of {len(found)} checkpoint folder{'s' if len(found) > 1 else ''}"
    if not passed:
        return state, (f"{folder} is a TRL output_dir: read {state}, the trainer state of its last checkpoint "
                       f"({checkpoint.name}, {of}), whose log_history holds the run's history up to that step")
    # a caution (CAUTION_MARK): the forecast prints it, as it prints skipped evals
    return state, (f"{folder} is a TRL output_dir whose last checkpoint{'s' if len(passed) > 1 else ''} "
                   f"{', '.join(passed)} hold{'' if len(passed) > 1 else 's'} no {TRL_STATE} (a save cut short?): "
                   f"{state}, the last checkpoint that holds one ({of}),{CAUTION_MARK}evals logged after its step "
                   f"{found[last][0]} are not in it")


def trl_state_path(path) -> tuple[Path, str | None]:
    """The TRL ``trainer_state.json`` that ``path`` names, and a note when it was found in a checkpoint.

    ``path`` is the file itself (any name: its content is checked when read), a checkpoint folder holding one,
    or a TRL ``output_dir`` holding ``checkpoint-N/`` folders: its own ``trainer_state.json`` when it has one
    (``trainer.save_state()`` at the end of training writes it there), else the last checkpoint's
    (:func:`last_checkpoint_state`, whose note says which was read).

    Raises
    ------
    CurveError
        No such file, or a folder with no ``trainer_state.json`` in it nor in a ``checkpoint-N`` folder: the
        message names the missing file and what to pass.
    """
    path = Path(path)
    if path.is_dir() and not (path / TRL_STATE).is_file():
        state, note = last_checkpoint_state(path)
        if state is not None:
            return state, note
    return _run_file(path, TRL_STATE, "a TRL trainer_state.json (or the checkpoint folder, or the output_dir "
                                      "holding checkpoint-N folders)"), None


def _eval_lines(path: Path, metric: str) -> tuple[list[tuple[float, float, str]], list[tuple[str, str, float]],
                                                 list[str]]:
    """(update, metric, ``"PATH:LINE"``) of every ``"eval": true`` line of a ``metrics.jsonl`` carrying
    ``metric``, and (``"PATH:LINE"``, ``"NaN"`` or ``"null"``, update) of the eval lines whose ``metric`` is NaN or
    JSON ``null`` (skipped: neither is an eval, as a CSV's empty or NaN cell; ``gradprobe train`` writes ``null`` for
    an accuracy it did not measure, e.g. ``sampled_accuracy`` between the ends under ``[eval] sampled_at =
    "ends"``). Eval lines without ``metric`` are not evals of the curve and are passed over. Third: the file's
    non-blank lines, stripped (its log entries, for :func:`_one_run_each`).

    Raises
    ------
    CurveError
        A line that is not JSON, a line whose ``eval`` is not JSON true or false (:func:`_eval_field`), an eval line
        holding ``metric`` (even ``null``) without ``update``, an ``update``
        or ``metric`` that is no number (a JSON string such as ``"0.676"`` or true/false included), a negative
        update or an infinite metric (each naming ``PATH:LINE``), no eval line with ``metric``.
    """
    out, skipped = [], []
    try:
        text = read_source_text(path)
    except UnicodeDecodeError as e:
        raise CurveError(f"{path} cannot be read as JSON lines: {not_utf8(path, e, False)}") from None
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = parse_curve_json(line)
        except json.JSONDecodeError as e:
            raise CurveError(f"{path}:{line_no} is not valid JSON ({e})") from None
        except JSONShapeError as e:  # `gradprobe train` writes each key once: the line was edited or damaged
            raise CurveError(f"{path}:{line_no}: {e}; fix or delete that line") from None
        at = f"{path}:{line_no}"
        if isinstance(rec, dict) and "eval" in rec and not isinstance(rec["eval"], bool):
            raise CurveError(_eval_field(at, rec["eval"]))
        if not (isinstance(rec, dict) and rec.get("eval") is True and metric in rec):
            continue
        if "update" not in rec:
            raise CurveError(f"{at}: an eval line without 'update', so that eval cannot be placed on the curve's "
                             "update axis; add the update it was evaluated at (\"update\": N) or delete that line")
        update = _number(rec["update"], f"{at}: field 'update'")
        if not update >= 0 or math.isinf(update):
            raise CurveError(f"{at}: field 'update' = {json_number_text(rec['update'], f'{update:g}')} must be an "
                             "update count >= 0; fix or delete that eval")
        if not update.is_integer():
            raise CurveError(f"{at}: field 'update' = {rec['update']!r} is not a whole number of updates: the curve's "
                             "x axis counts optimizer updates, and `gradprobe train` logs each eval's update as an "
                             "integer; write the update that eval was made at (1.0 reads as 1), or delete that eval")
        if rec[metric] is None:  # not measured at that eval, or a failed one logged without a value
            skipped.append((at, "null", update))
            continue
        value = _number(rec[metric], f"{at}: field {metric!r}")
        if math.isnan(value):
            skipped.append((at, "NaN", update))
        elif math.isinf(value):
            raise CurveError(f"{at}: field {metric!r} = {json_number_text(rec[metric], str(value))} is not a finite "
                             "number; fix or delete that eval")
        else:
            out.append((update, value, at))
    if not out and not skipped:
        raise CurveError(_no_metric_lines(path, metric))
    return out, skipped, [x.strip() for x in text.splitlines() if x.strip()]


def _eval_field(at: str, value) -> str:
    """The refusal of a ``metrics.jsonl`` line (``at``: ``PATH:LINE``) whose ``eval`` field holds ``value``, not JSON
    true or false (``"true"``, ``1``, ``null``, ...): whether the line is an eval cannot be read."""
    hint = " (a JSON string: write true or false unquoted)" if isinstance(value, str) else ""
    return (f"{at}: field 'eval' = {json_short(value, 40)} must be JSON true (an eval line, as `gradprobe train` "
            f"writes it) or false{hint}; fix that line")




#: Why ``gradprobe train`` logs a null accuracy (:func:`_lines_skipped_note`): not the TRL reader's failed eval.
_TRAIN_NULL_WHY = ("`gradprobe train` writes null for an accuracy it did not measure at that eval (e.g. "
                   "sampled_accuracy between the first and the last eval under [eval] sampled_at = \"ends\"; a "
                   "failed eval may log one too)")


def _train_null_fix(metric: str) -> str:
    """The fix of a ``metrics.jsonl``'s null evals of ``metric``: for ``sampled_accuracy`` (null by schedule under
    ``sampled_at = "ends"``) the greedy accuracy or a run sampled at every eval, else a run that measured it
    (``"read greedy_accuracy instead (...), or ..."``: :func:`_lines_skipped_note` puts ``"to use them, "`` or
    ``"to use the null ones, "`` before it, :func:`_skipped_lead` a refusal's lead)."""
    if metric == "sampled_accuracy":
        return ("read greedy_accuracy instead (--reference-curve-metric greedy_accuracy; metric='greedy_accuracy'), "
                "or the curve of a run with sampled accuracy at every eval ([eval] sampled_at = \"all\")")
    return f"rerun those evals, or give the curve of a run that measured {metric!r} at every eval"


def _lines_skipped_note(skipped: list[tuple[str, str, float]], metric: str, led: tuple[str, ...] = ()) -> str | None:
    """The note naming the NaN and null eval lines :func:`_eval_lines` skipped, per kind, by ``PATH:LINE`` (None:
    none): a NaN as the TRL reader says it (:data:`_SKIPPED_WHY`), a null as what ``gradprobe train`` writes for
    an accuracy it did not measure (:data:`_TRAIN_NULL_WHY`), each with its fix (:func:`_train_null_fix`; said once
    for both kinds where both fixes begin with rerunning them; the fix of the kinds in ``led`` left out, for a
    refusal whose lead names it: :func:`_skipped_lead`)."""
    parts, why, kinds = [], [], []
    for kind in ("NaN", "null"):
        places = [at for at, k, _ in skipped if k == kind]
        if places:
            more = f" and {len(places) - _SHOWN_STEPS} more" if len(places) > _SHOWN_STEPS else ""
            parts.append(f"{len(places)} eval line(s){SKIPPED_MARK}a {kind} {metric!r} "
                         f"({', '.join(places[:_SHOWN_STEPS])}{more})")
            why.append(_SKIPPED_WHY["NaN"] if kind == "NaN" else _TRAIN_NULL_WHY)
            kinds.append(kind)
    if not parts:
        return None
    fixes, null_fix = [], _train_null_fix(metric)
    nan, null = "NaN" in kinds and "NaN" not in led, "null" in kinds and "null" not in led
    if nan and null and null_fix.startswith(_RERUN):  # one fix for both kinds: rerun those evals, or ...
        fixes.append(f"to use them, {null_fix}")
    else:
        if nan:
            fixes.append("rerun those evals to use them" if kinds == ["NaN"] else "rerun the NaN evals to use them")
        if null:
            fixes.append(f"to use {'the null ones' if 'NaN' in kinds else 'them'}, {null_fix}")
    return "; ".join(parts) + ": " + "; ".join(why + fixes)


#: The fix of NaN evals (:data:`_SKIPPED_WHY`: a diverged or failed eval) in a refusal's lead (:func:`_skipped_fix`).
_NAN_FIX = "rerun those evals (if the run diverged there, look at why first)"
_RERUN = "rerun those evals"  # how a null fix that reruns them begins (said once beside _NAN_FIX)


def _skipped_fix(kinds: list[str], null_fix: str) -> str:
    """The fix of the evals skipped for the ``kinds`` (``"NaN"``, ``"null"``) of a refusal's lead: ``null_fix`` (the
    reader's: :func:`_train_null_fix`, or rerun / name another key for TRL), :data:`_NAN_FIX`, or both, said once
    where both begin with rerunning."""
    if kinds == ["null"]:
        return null_fix
    if kinds == ["NaN"]:
        return _NAN_FIX
    if null_fix.startswith(_RERUN):
        return _NAN_FIX + null_fix[len(_RERUN):]
    return f"for the NaN ones, {_NAN_FIX}; for the null ones, {null_fix}"


def _lead_kinds(updates: list[float], skipped: list[tuple[str, float]], B: float | None) -> list[str]:
    """The kinds (``"NaN"``, ``"null"``) of the skipped evals (``skipped``: (kind, update)) that leave too few evals:
    the evals with a value (at ``updates``) do not pin the fit's free parameters and, with values at the skipped
    ones' updates too, they would (:func:`fit_needs`). One kind when it alone would pin the fit and the other would
    not; both when each would, or only both together; [] when none would (evaluating more often is the fix)."""
    have, free = fit_needs(updates, B)
    if have >= free:
        return []

    def pins(kinds: set[str]) -> bool:
        with_skipped, free_with_skipped = fit_needs(list(updates) + [u for k, u in skipped if k in kinds], B)
        return with_skipped >= free_with_skipped

    null, nan = pins({"null"}), pins({"NaN"})
    if null != nan:
        return ["null"] if null else ["NaN"]
    return ["NaN", "null"] if null or pins({"NaN", "null"}) else []


def _skipped_lead(updates: list[float], skipped: list[tuple[str, float]], B: float | None, metric: str,
                  null_fix: str) -> tuple[str | None, tuple[str, ...]]:
    """(the fix that leads a refusal for too few evals: the curve's ``eval_hint``, the kinds it names) when the evals
    skipped for a NaN or null ``metric`` (``skipped``: (kind, update)) are what leaves too few (:func:`_lead_kinds`):
    the evals exist, so evaluating more often is not the fix; rerunning them is (:func:`_skipped_fix`). The lead
    counts the other update counts they sit at and, for NaN, the evals. (None, ()) otherwise (the reader's own
    hint stands)."""
    kinds = _lead_kinds(updates, skipped, B)
    if not kinds:
        return None, ()
    k = len({u for kind, u in skipped if kind in kinds} - set(updates))
    counts = [sum(x == kind for x, _ in skipped) for kind in kinds]
    held = ("null" if kinds == ["null"] else f"NaN in {counts[0]} eval(s)" if kinds == ["NaN"]
            else f"NaN in {counts[0]} eval(s), null in {counts[1]}")
    return (f"evals at {k} other update count(s) are in the file(s) but hold no value for {metric!r} ({held}), so "
            f"evaluating more often would not help: {_skipped_fix(kinds, null_fix)}"), tuple(kinds)


def _no_value(metric: str, src: str, kinds: list[str], null_fix: str, nan_fix: str = _NAN_FIX) -> str:
    """The refusal of a curve none of whose evals of ``metric`` holds a value (each one ``kinds``: NaN, null or
    both), with the fix (:func:`_skipped_fix`; ``nan_fix`` when all are NaN: the TRL reader's adds naming another
    eval key, :data:`_TRL_ALL_NAN_FIX`); the skipped evals' note (without the fix) follows it."""
    fix = nan_fix if kinds == ["NaN"] else _skipped_fix(kinds, null_fix)
    return (f"no eval of {metric!r} with a value in {src}: its evals of {metric!r} hold no value "
            f"({' or '.join(kinds)}), so more frequent evals would not help; {fix}")


def _no_metric_lines(path: Path, metric: str) -> str:
    """The refusal of a metrics.jsonl without an eval line holding ``metric``: the keys its eval lines hold and
    the option to name one, or that the run has no eval line at all."""
    keys = set()
    for line in read_source_text(path).splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("eval") is True:
            keys |= {k for k, v in rec.items() if is_json_number(v) and k not in ("update", "eval")}
    if not keys:
        return (f"{path} has no eval lines ('\"eval\": true'): the run was not evaluated; {PLAN_EVAL_HINT}, or give "
                "the curve of a run that was")
    return (f"{path}: no eval line has {metric!r}; its eval lines hold {sorted(keys)}: name the held-out accuracy "
            "(greedy_accuracy or sampled_accuracy) with --reference-curve-metric KEY (gradprobe probe) or metric=KEY "
            "(ReferenceCurve.from_metrics / load_reference_curve)")


#: What may end a JSON text cut inside a number or a literal (``-0.``, ``1e-``, ``tr``, ``nul``; Python's json also
#: reads ``NaN``, ``Infinity`` and ``-Infinity``), from where the parser stopped (:func:`_cut_short`) ...
_CUT_TOKEN = re.compile(r"[-+.0-9eE]+|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?|N(?:aN?)?"
                        r"|-?I(?:n(?:f(?:i(?:n(?:i(?:ty?)?)?)?)?)?)?")
#: ... and inside a string's \uXXXX escape (json's "Invalid \uXXXX escape" at its ``u``: ``u``, ``u0``, ``u00e``;
#: also ``u00e9``, a whole escape that the text ends right after, which json reports so too).
_CUT_ESCAPE = re.compile(r"u[0-9a-fA-F]{0,4}")


def _cut_short(error: json.JSONDecodeError) -> bool:
    """Whether the JSON text of ``error`` (a :class:`json.JSONDecodeError`) stops mid-value, as a copy cut short
    does: the parser ran off the end of the text (``error.pos`` at its end, trailing whitespace aside); or, in a
    text that ends with no closing bracket (``}`` or ``]``), it ends inside a string (json's ``Unterminated
    string``: no closing quote before the end, so the string runs to it) or the parser stopped inside the text's
    last token, a fragment of a number, a literal or a ``\\uXXXX`` escape (``0.``, ``1e-``, ``tr``, ``nul``,
    ``\\u00``: :data:`_CUT_TOKEN`, :data:`_CUT_ESCAPE`). Otherwise the text is damaged: a character wrong or
    missing inside it, or a whole text followed by more (json's ``Extra data``)."""
    doc = error.doc if isinstance(error.doc, str) else ""
    text = doc.rstrip()
    if error.pos >= len(text):
        return True
    if text.endswith(("}", "]")) or error.msg.startswith("Extra data"):
        return False
    if error.msg.startswith("Unterminated string"):
        return True
    token = _CUT_ESCAPE if error.msg.startswith("Invalid \\uXXXX escape") else _CUT_TOKEN
    return token.fullmatch(text[error.pos:]) is not None


def truncated_hint(path: Path, error: json.JSONDecodeError) -> str:
    """What a JSON file ``path`` that does not parse (``error``) is, and the fix: truncated when it stops mid-value
    (:func:`_cut_short`: a copy stopped early, or one taken while TRL was writing it), else damaged; a text holding
    ``"log_history"`` is a TRL trainer state (re-copy it from the run's output_dir), any other a saved curve
    (re-copy it, or rebuild it with ReferenceCurve.save)."""
    doc = error.doc if isinstance(error.doc, str) else ""
    what = ("the file is truncated (it ends mid-value: a copy cut short, or taken while it was being written)"
            if _cut_short(error) else "the file is damaged")
    if '"log_history"' in doc:
        return f"{what}; it looks like a TRL trainer state: {TRL_RECOPY}"
    return f"{what}; re-copy it, or rebuild the curve from its source and write it with ReferenceCurve.save"


def _trl_history(path: Path) -> list:
    """The ``log_history`` list of a TRL ``trainer_state.json``; CurveError when it is not JSON or holds none."""
    try:
        hist = parse_curve_json(read_source_text(path))["log_history"]
    except json.JSONDecodeError as e:
        raise CurveError(f"{path} is not valid JSON ({e}): {truncated_hint(path, e)}") from None
    except JSONShapeError as e:  # TRL writes each key once, 2 to 3 levels deep: edited or damaged
        raise CurveError(f"{path} is not a trainer state as TRL writes it: {e}; {TRL_RECOPY}") from None
    except UnicodeDecodeError as e:
        raise CurveError(f"{path} cannot be read as JSON: {not_utf8(path, e, True)}") from None
    except (KeyError, TypeError) as e:
        raise CurveError(f"{path} is not a TRL trainer_state.json with a 'log_history' list ({e})") from None
    if not isinstance(hist, list):
        raise CurveError(f"{path} is not a TRL trainer_state.json: 'log_history' is a {type(hist).__name__}, "
                         "not a list")
    return hist


def _trl_rows(path: Path, metric: str,
              initial_accuracy: float | None) -> tuple[list[tuple[float, float, str]], list[tuple[float, str]]]:
    """(step, metric, where) of every ``log_history`` entry of a TRL ``trainer_state.json`` carrying ``metric``
    (``where``: ``"PATH log_history[i] (step S)"``, or ``"initial_accuracy"`` for the value passed, added when no
    entry is at step 0), and (step, ``"NaN"`` or ``"null"``) of the entries whose ``metric`` is NaN or JSON
    ``null`` (skipped: neither is an eval, as a CSV's empty or NaN cell). Entries without ``metric`` (training
    lines, evals of other keys) are not evals of the curve and are passed over.

    Raises
    ------
    CurveError
        Not JSON or no ``log_history`` list; an entry holding ``metric`` (even ``null``) without a ``step`` (an eval
        that cannot be placed: the message names ``log_history[i]``); a ``step`` or ``metric`` that is no number or
        is infinite (the message names the entry and its step); no entry with ``metric`` (the eval keys found are
        listed).
    """
    hist = _trl_history(path)
    rows, skipped = [], []
    for i, h in enumerate(hist):
        if not (isinstance(h, dict) and metric in h):
            continue
        if "step" not in h:
            raise CurveError(f"{path}: log_history[{i}] holds {metric!r} but no 'step', so that eval cannot be placed "
                             "on the curve's update axis; add the optimizer step it was evaluated at (\"step\": N) "
                             "or delete that entry")
        step = _number(h["step"], f"{path}: log_history[{i}] field 'step'")
        if not step >= 0 or math.isinf(step):
            raise CurveError(f"{path}: log_history[{i}] field 'step' = {json_number_text(h['step'], f'{step:g}')} must "
                             "be an optimizer step count >= 0; fix or delete that entry")
        if not step.is_integer():
            raise CurveError(f"{path}: log_history[{i}] field 'step' = {h['step']!r} is not a whole number of "
                             "optimizer steps: the curve's x axis counts updates, and TRL logs each entry's global "
                             "step as an integer; write the step that eval was made at (20.0 reads as 20), or delete "
                             "that entry")
        if h[metric] is None:  # a failed or skipped eval logged without a value
            skipped.append((step, "null"))
            continue
        value = _number(h[metric], f"{path}: log_history[{i}] (step {h['step']}) field {metric!r}")
        if math.isnan(value):
            skipped.append((step, "NaN"))
        elif math.isinf(value):
            raise CurveError(f"{path}: log_history[{i}] (step {step:g}) field {metric!r} = "
                             f"{json_number_text(h[metric], str(value))} is not a finite number; fix or delete that "
                             "eval")
        else:
            rows.append((step, value, f"{path} log_history[{i}] (step {step:g})"))
    if not rows and not skipped:
        raise CurveError(_no_trl_metric(path, hist, metric, initial_accuracy))
    if initial_accuracy is not None and not any(s == 0 for s, _, _ in rows):
        rows.insert(0, (0.0, float(initial_accuracy), _GIVEN))
    return rows, skipped


def _no_trl_metric(path: Path, hist: list, metric: str, initial_accuracy: float | None = None) -> str:
    """The refusal of a ``log_history`` without an entry holding ``metric``: the eval keys it holds and the option
    to name one, or that the run was not evaluated (with ``initial_accuracy`` given, that it is R0 alone, and the fix
    is evals after step 0, not giving it again)."""
    keys = sorted({k for h in hist if isinstance(h, dict) for k in h if k.startswith("eval")})
    if not keys and initial_accuracy is not None:
        return (f"{path}: no log_history entry has {metric!r}, nor any eval metric (eval_...): the run was not "
                f"evaluated, and the initial accuracy given (--initial-accuracy {initial_accuracy:g}) is the curve's "
                "R0 alone, no curve: a curve needs evals after step 0; give GRPOTrainer an eval_dataset and "
                f"{_TRL_MORE_EVALS}")
    if not keys:
        return (f"{path}: no log_history entry has {metric!r}, nor any eval metric (eval_...): the run was not "
                f"evaluated; give GRPOTrainer an eval_dataset and {TRL_EVAL_HINT}")
    grpo = [k for k in keys if k.startswith("eval_rewards/") and k.endswith("/mean")]  # GRPOTrainer's rewards
    hint = f" (a GRPOTrainer's per-reward means: {', '.join(grpo)})" if grpo else ""
    return (f"{path}: no log_history entry has {metric!r}; eval keys found: {keys or 'none'}{hint}; name the one "
            "that holds held-out accuracy: --reference-curve-metric KEY (gradprobe probe) or metric=KEY "
            "(ReferenceCurve.from_trl_state / load_reference_curve)")


#: The fix of a TRL log's null evals in a refusal's lead (:func:`_skipped_fix`).
_TRL_NULL_FIX = "rerun those evals, or name another eval key (--reference-curve-metric KEY)"
#: The fix of a TRL log whose evals of the metric are all NaN (:func:`_no_value`): a key that is NaN at every eval
#: is often not the held-out accuracy (a TRL log's eval keys are the user's), so naming another is a fix, as for null
#: ones. (A ``metrics.jsonl``'s all-NaN refusal keeps :data:`_NAN_FIX` alone: its keys are gradprobe's own, and
#: :func:`_no_metric_lines` names them.)
_TRL_ALL_NAN_FIX = _NAN_FIX + _TRL_NULL_FIX[len(_RERUN):]
#: Why a skipped TRL eval is no eval, by what its metric held (:func:`_trl_skipped_note`).
_SKIPPED_WHY = {"NaN": "a NaN is no eval (a diverged or failed eval)",
                "null": "a null is no eval (a failed or skipped eval, logged without a value)"}


def _trl_skipped_note(skipped: dict[Path, list[tuple[float, str]]], metric: str,
                      led: tuple[str, ...] = ()) -> str | None:
    """The note naming the NaN and null evals :func:`_trl_rows` skipped, per file and kind, by step (None: none), with
    the fix (rerun them) of the kinds not in ``led`` (a refusal whose lead names their fix: :func:`_skipped_lead`)."""
    parts, kinds = [], []
    for path, entries in skipped.items():
        for kind in ("NaN", "null"):
            steps = [s for s, k in entries if k == kind]
            if steps:
                shown = ", ".join(f"{s:g}" for s in steps[:_SHOWN_STEPS])
                more = f" and {len(steps) - _SHOWN_STEPS} more" if len(steps) > _SHOWN_STEPS else ""
                parts.append(f"{len(steps)} eval(s) of {path}{SKIPPED_MARK}a {kind} {metric!r} (step(s) {shown}{more})")
                if kind not in kinds:
                    kinds.append(kind)
    if not parts:
        return None
    unled = [k for k in kinds if k not in led]
    fix = ("" if not unled else "; rerun those evals to use them" if unled == kinds
           else f"; rerun the {unled[0]} evals to use them")
    return "; ".join(parts) + ": " + "; ".join(_SKIPPED_WHY[k] for k in kinds) + fix


#: The range of ``initial_accuracy`` under each ``accuracy_scale`` (auto: either scale, the curve's own values
#: decide which; :func:`_check_initial_scale` and :func:`to_points` refuse a value on the other one).
INITIAL_RANGE = {"fraction": (0.0, 1.0, "a fraction in [0, 1]"), "points": (0.0, 100.0, "points in [0, 100]"),
                 "auto": (0.0, 100.0, "a fraction in [0, 1] or points in [0, 100], as the curve's values are")}


def initial_accuracy_value(value, accuracy_scale: str = "auto") -> float | None:
    """``initial_accuracy=`` (``gradprobe probe --initial-accuracy``) as a float (None: not given), checked against
    the range of ``accuracy_scale`` (:data:`INITIAL_RANGE`; an unknown scale is left to :func:`to_points`).

    Raises
    ------
    CurveError
        A value that is no number (a string or a bool), not finite (an integer beyond a float's range included,
        shown as given: :func:`~gradprobe.outputs.json_number_text`), or outside the scale's range; the message
        names ``initial_accuracy (--initial-accuracy)`` (a string or bool, which the command line cannot give:
        ``initial_accuracy`` alone), the value and the fix.
    """
    if value is None:
        return None
    if not is_json_number(value):
        raise CurveError(f"initial_accuracy = {value!r} is not a number: give the initial policy's accuracy on the "
                         "curve's eval (same scale as the metric), or leave it out")
    x = json_number_float(value)  # an integer beyond a float's range reads as +-inf, shown as given
    if not math.isfinite(x):
        raise CurveError(f"initial_accuracy (--initial-accuracy) {json_number_text(value, str(x))} is not a finite "
                         "number: give the initial policy's accuracy on the curve's eval (same scale as the metric), "
                         "or leave it out")
    if accuracy_scale in INITIAL_RANGE:
        lo, hi, what = INITIAL_RANGE[accuracy_scale]
        if not lo <= x <= hi:
            raise CurveError(f"initial_accuracy (--initial-accuracy) {x:g} must be {what} (accuracy_scale="
                             f"{accuracy_scale!r}, --reference-curve-scale {accuracy_scale}): the initial policy's "
                             "accuracy on the curve's eval")
    return x


def _check_initial_scale(x: float | None, y: list[float], where: list[str], accuracy_scale: str, files: str) -> None:
    """Refuse, under ``accuracy_scale="auto"``, an ``initial_accuracy`` ``x`` on another scale than the files' own
    evals, whether or not it is used (a file with its own eval at step 0 keeps it, and a value out of the evals'
    range is a mistake all the same, refused as the README says):

    - one in (0, 1] beside evals in points (most above 1, as :func:`to_points` reads points): it would be read as
      points (a seed's first eval is judged there only when out of line with its seed's steps), so a fraction
      given for a curve in points would become an R0 near 0 points;
    - one above 1 beside evals that are all fractions: :func:`to_points` would refuse the mix naming the value
      given as if it were an eval of the file, and read as points the evals would sit under 1 point; the fix is
      the value as a fraction.

    ``y``, ``where``: the evals' values and places, ``x`` among them (placed :data:`_GIVEN`) where it is the
    update-0 point of a file without its own (where it is not, the message says each file's own step-0 eval is R0
    instead); ``files``: the files read, named in the message.
    """
    own = [v for v, at in zip(y, where) if at != _GIVEN]
    used = _GIVEN in where
    if accuracy_scale != "auto" or x is None or not own:
        return
    lo, hi = min(own), max(own)
    own_r0 = "each file has its own eval at step 0, which is read as R0 instead"
    without = "R0 is then the fit's extrapolation" if used else own_r0
    if x > 1.0 and hi <= 1.0:
        raise CurveError(f"initial_accuracy (--initial-accuracy) {x:g} is on another scale than the evals of {files}, "
                         f"which are fractions (range {lo:.4g}-{hi:.4g}): give it as a fraction as the file's evals "
                         f"are ({x / 100:g}, if {x:g} is points), or leave it out ({without})")
    if not 0.0 < x <= 1.0 or sum(v <= 1.0 for v in own) >= len(own) / 2:  # fractions (or a mix to_points refuses)
        return
    as_points = f"an R0 of {x:g}" if used else f"{x:g} points"
    raise CurveError(f"initial_accuracy (--initial-accuracy) {x:g} is on another scale than the evals of {files}, "
                     f"which are points (range {lo:.4g}-{hi:.4g}): as points it would be {as_points}; give it in "
                     f"points ({100 * x:g}), or state the scale with accuracy_scale='points' (--reference-curve-scale "
                     "points) if it is points as it stands" + ("" if used else f", or leave it out ({own_r0})"))


def _unused_initial_accuracy(initial_accuracy: float | None, rows: dict[Path, list]) -> str | None:
    """The note naming the files whose own eval at step 0 was read instead of ``initial_accuracy`` (None: none)."""
    if initial_accuracy is None:
        return None
    own = [f"{path} ({v:g})" for path, r in rows.items() for s, v, at in r if s == 0 and at != _GIVEN]
    if not own:
        return None
    return (f"initial_accuracy (--initial-accuracy) {initial_accuracy:g}{SKIPPED_MARK}{len(own)} file(s) with their "
            f"own eval at step 0, which is read instead: {', '.join(own[:_SHOWN_STEPS])}"
            + (f" and {len(own) - _SHOWN_STEPS} more" if len(own) > _SHOWN_STEPS else ""))


def _no_arm_evals(runs: Path, arm: str, accuracy_col: str, B: float | None, skipped: str | None) -> str:
    """The refusal of a study's ``runs.csv`` none of whose lines of ``arm`` holds both an update and an
    ``accuracy_col`` value. With lines skipped (``skipped``: their note, which :func:`_named` appends with its fix:
    fill those cells in) it says no more; else it says what a curve needs (:func:`~.curve_fit.fit_needs`) and the
    fix: sample at every eval for ``accuracy_sampled``, else evaluate the arm (:func:`study_eval_hint`)."""
    lead = f"{runs}: no line of arm {arm!r} holds both an update and an {accuracy_col!r} value"
    if skipped is not None:
        return lead
    _, free = fit_needs([], B)
    fix = ("read the greedy accuracy (accuracy_col='accuracy'), or run a copy of the study's plan.toml with `[eval] "
           "sampled_at = \"all\"` under a new --out" if accuracy_col == "accuracy_sampled"
           else study_eval_hint(runs.parent, arm))
    return (f"{lead}: a reference curve needs evals at at least {free} distinct update counts > 0, or {free - 1} and "
            f"an eval at update 0 (R0); {fix}")


def _no_eval_lines(df, path: Path, B: float | None) -> None:
    """Refuse a CSV of evals (``df``, read by :func:`~.csv_cells.read_csv_checked`) with no line holding a value:
    a header alone (or blank lines after it) is no curve, and evaluating more often is not the fix; the message says
    what the file needs, one line per eval, and how many (:func:`~.curve_fit.fit_needs`).

    Raises
    ------
    TooFewEvalsError
        Naming the file, what a line holds and the minimum of evals (:data:`CSV_EVAL_HINT` its ``eval_hint``).
    """
    if df.notna().any(axis=None):
        return
    _, free = fit_needs([], B)
    raise TooFewEvalsError(
        f"CSV {path} has no eval lines (a header and no line of values): a reference curve needs one line per eval, "
        f"its update count and accuracy (e.g. `0,0.41` under update,accuracy), at at least {free} distinct update "
        f"counts > 0, or {free - 1} and an eval at update 0 (R0)", updates=[], B=B, eval_hint=CSV_EVAL_HINT)


def stripped_header(df):
    """``df`` (a CSV read by :func:`~.csv_cells.read_csv_checked`) with the spaces around its column names dropped
    (a header ``update, accuracy`` names ``accuracy``; pandas reads the cells' numbers across such spaces), unless
    two names would then be the same (``update`` and `` update``: left as written)."""
    names = [c.strip() if isinstance(c, str) else c for c in df.columns]
    return df.set_axis(names, axis=1) if len(set(names)) == len(names) else df


#: The separators a CSV is mistaken to use when its header reads as one column, as :func:`_csv_columns` names them.
_SEPARATORS = {";": "semicolons (;)", "\t": "tabs", "|": "bars (|)"}


def _csv_columns(df, raw: bytes, path: Path, cols) -> None:
    """Refuse a CSV (bytes ``raw``, table ``df``) whose header has no column of ``cols``, listing its columns, with
    the fix: name the header's columns (or pass the column names to :meth:`~CurveSources.from_csv`); a header read
    as one column holding a semicolon, a tab or a bar is a file separated by it (a spreadsheet's export in a
    locale whose decimal mark is a comma writes ``0;0,40``): the message names the separator and the fix, the file
    written with commas, or read with pandas and passed to the constructor (which detects fractions as the
    readers do)."""
    missing = [c for c in cols if c not in df.columns]
    if not missing:
        return
    head = str(df.columns[0]) if len(df.columns) == 1 else ""
    sep = next((s for s in _SEPARATORS if s in head), None)
    if sep is None:
        raise CurveError(f"{path} has no column {missing[0]!r} (columns: {list(df.columns)}); name the header's "
                         "columns update,accuracy (or pass update_col=, accuracy_col=, seed_col= to "
                         "ReferenceCurve.from_csv)")
    comma = b"," in raw.partition(b"\n")[2]  # decimal commas: 0;0,40
    raise CurveError(f"{path} is separated by {_SEPARATORS[sep]}, not commas: its header {head!r} reads as one column, "
                     f"so there is no column {missing[0]!r}; a CSV curve is comma-separated: write the file with "
                     f"commas between its cells{' and points as decimal marks (0.40, not 0,40)' if comma else ''} (a "
                     "spreadsheet's CSV export with the comma as separator), or, from Python, read it with "
                     f"pandas.read_csv(path, sep={sep!r}{', decimal=' + repr(',') if comma else ''}) and pass its "
                     "columns to ReferenceCurve(updates=..., accuracy=..., seeds=...)")


def _stacked_runs(updates, values, where: list[str], path: Path) -> None:
    """Refuse a CSV without a seed column holding several runs one after another: its updates start over (a line's
    update at or below every update before it, after a larger one) and repeat with different accuracies, which
    :func:`~.accuracy_values.one_value_per_eval` would call one eval recorded twice; the fix is a seed column.
    One repeat without such a start (a line appended, a run resumed from a checkpoint) is left to it.

    Parameters
    ----------
    updates, values : sequence of float, shape (evals,)
    where : sequence of str, shape (evals,)
        Each eval's line (``"line 4"``), named in the message.

    Raises
    ------
    CurveError
        Naming the file, the lines where runs start, the first repeats and the fix.
    """
    u, y = np.asarray(updates, dtype=np.float64), np.asarray(values, dtype=np.float64)
    starts = [i for i in range(1, u.size) if u[i] < u[i - 1] and u[i] <= u[:i].min()]
    first, pairs = {}, []
    for i, (a, b) in enumerate(zip(u.tolist(), y.tolist())):
        j = first.setdefault(a, i)
        if j != i and y[j] != b:
            pairs.append(f"{where[j]} ({y[j]:g}) and {where[i]} ({b:g})")
    if not starts or not pairs:
        return
    more = f" and {len(pairs) - 3} more" if len(pairs) > 3 else ""
    runs = ", ".join(where[i] for i in starts[:5]) + (f" and {len(starts) - 5} more" if len(starts) > 5 else "")
    raise CurveError(f"{path} has no seed column, but its updates start over at {runs} and repeat with other "
                     f"accuracies ({'; '.join(pairs[:3])}{more}): {len(starts) + 1} runs stacked one after another? "
                     f"add a column seed naming each line's run (0 on the first run's lines, 1 from "
                     f"{where[starts[0]]}, ...), or keep one run per file")


def _one_arm(df, path: Path) -> None:
    """Refuse a CSV whose column ``arm`` names several arms: a study's ``runs.csv`` holds every arm's evals, and
    read as one curve they would be mixed (grpo's and the rewards' accuracies at the same updates, refused only as
    "the same eval twice" without saying why).

    Raises
    ------
    CurveError
        Naming the file, the arms and the fix: the study folder (its grpo arm is read,
        :meth:`CurveSources.from_study`), or a CSV of the reference arm's rows only.
    """
    if "arm" not in df.columns:
        return
    arms = sorted({str(a) for a in df["arm"].dropna()})
    if len(arms) > 1:
        folder = path.parent if path.name == "runs.csv" else Path("STUDY")
        raise CurveError(f"{path} holds the evals of {len(arms)} arms (column 'arm': {', '.join(arms[:6])}"
                         f"{', ...' if len(arms) > 6 else ''}), as a study's runs.csv does: a reference curve is one "
                         f"arm's evals; pass the study folder (`--reference-curve {folder}` reads its grpo arm) or a "
                         "CSV of the reference arm's rows only")


class CurveSources:
    """Alternate constructors of :class:`~gradprobe.forecast.curves.ReferenceCurve` (mixed into it), and its
    short :meth:`__repr__`."""

    def __repr__(self) -> str:
        """``ReferenceCurve(updates 0-40, 5 points, 1 seed, mode 'sigmoid', source '...')``: what the curve was
        fitted on (its eval points; the source cut at 60 characters), not the object's address."""
        points = getattr(self, "points", None)
        if points is None or not len(points):
            return f"{type(self).__name__}(no points)"
        n, seeds = points["update"], len(set(points["seed"]))
        source = str(getattr(self, "source", "") or "")
        source = source if len(source) <= 60 else source[:57] + "..."  # short: the full one is .source
        return (f"{type(self).__name__}(updates {n.min():g}-{n.max():g}, {len(points)} points, {seeds} "
                f"seed{'s' if seeds != 1 else ''}, mode {getattr(self, 'mode', None)!r}"
                + (f", source {source!r})" if source else ")"))

    @classmethod
    def from_study(cls, study_dir: str | Path, *, arm: str = "grpo", accuracy_col: str = "accuracy",
                   mode: str = "sigmoid", B: float | None = None, n_replicates: int = N_REPLICATES):
        """The curve of one arm of a ``gradprobe study`` folder (its ``runs.csv``).

        Parameters
        ----------
        study_dir : path
            Holds ``runs.csv`` (columns ``arm``, ``seed``, ``update``, ``accuracy`` as fractions) and,
            optionally, ``plan.toml`` (model, task, update batch, learning rate: the curve's metadata).
        arm : str
            The arm whose evals are fitted (default ``grpo``).
        accuracy_col : str
            ``accuracy`` (greedy, the study's headline) or ``accuracy_sampled``.
        mode, B, n_replicates
            See :class:`ReferenceCurve`.

        Lines of ``arm`` with an empty ``update`` or ``accuracy_col`` cell are no evals: they are left out
        and named in the curve's ``notes`` (:func:`~gradprobe.forecast.csv_cells.study_skipped_evals`), since
        a ``runs.csv`` that ``gradprobe study`` wrote from greedy evals has none. So are lines of ``arm`` with
        fewer fields than the header (a file cut mid-line: the last value may be cut too), and the last line
        when the file does not end with a line break. A line that copies an earlier one exactly is read once.

        Raises
        ------
        CurveError
            No ``runs.csv``, a ``runs.csv`` with a header alone, a missing column, a cell of ``update`` or
            ``accuracy_col`` that is no number or too large for a float (the message names the line and shows the
            cell as the file holds it), a seed of ``arm`` that is no integer >= 0 (``True``, ``1.5``, a blank cell:
            :func:`_check_study_seeds`), an unknown arm (the message lists the arms), no line of ``arm`` with both
            values (:func:`_no_arm_evals`), too few evals
            (a :class:`~.curve_fit.TooFewEvalsError` naming the study, the arm and its ``runs.csv``, the minimum and
            the fix, :func:`study_eval_hint`, as the other readers' do; the skipped lines after it, if any), one
            eval of ``arm`` (seed, update) on two lines with
            different accuracies, an accuracy outside [0, 1] (runs.csv records fractions), an ``accuracy_col`` cell
            of ``arm`` that is not the mean of its eval's per-item results where the study saved them
            (:func:`_check_item_accuracies`: the line, both values and the fix, as the analysis refuses), an
            ``analysis.json`` made from another ``runs.csv`` (any arm's read at a matched point or update 0, the seeds:
            :func:`_check_analysis_reads`, as calib compares them; none without a readable ``analysis.json``).
        """
        study_dir = Path(study_dir)
        runs = study_dir / RUNS_CSV
        if not runs.is_file():
            raise CurveError(f"{runs} not found; pass the --out folder of a finished `gradprobe study`")
        raw = runs.read_bytes()  # read once: the table and its short lines come from the same bytes
        df = read_csv_checked(runs, raw)
        for col in ("arm", "seed", "update", accuracy_col):
            if col not in df.columns:
                raise CurveError(f"{runs} has no column {col!r} (columns: {list(df.columns)})")
        _too_large_cells(raw, runs, ("update", accuracy_col))
        df = numeric_columns(df, ("update", accuracy_col), runs)
        blank = study_skipped_evals(df, arm, accuracy_col)
        df, cut, cut_lines = without_short_lines(df, runs, raw, accuracy_col, arm)
        blank = skipped_note([(line, col) for line, col in blank if line not in cut_lines], runs)
        skipped = "; ".join(x for x in (blank, cut) if x) or None
        df = df.dropna(how="all")
        if df.empty:
            raise CurveError(f"{runs} has no eval lines (a header and no line of values): no run of the study has "
                             "finished; pass the --out folder of a finished `gradprobe study`")
        if arm not in set(df["arm"]):
            raise CurveError(f"{runs} has no arm {arm!r}; its arms are {sorted(set(df['arm']))}")
        d = df[(df["arm"] == arm) & df[accuracy_col].notna() & df["update"].notna()]
        _check_study_seeds(d, runs, arm)
        d = one_line_per_eval(d, runs, accuracy_col)
        _check_item_accuracies(df, arm, accuracy_col, study_dir, runs)
        _check_analysis_reads(study_dir, df, raw, arm)
        meta = {"study": str(study_dir), "arm": arm}
        if (study_dir / PLAN_COPY).is_file():
            meta.update(_plan_metadata(study_dir / PLAN_COPY, arm))
        seeds, src = d["seed"].to_numpy(), f"study {study_dir.name} arm {arm} ({runs})"
        try:
            if d.empty:
                raise CurveError(_no_arm_evals(runs, arm, accuracy_col, B, skipped))
            acc, note = to_points(d[accuracy_col].to_numpy(float), "auto", f"{runs.name} {accuracy_col}")
            src = (f"study {study_dir.name} arm {arm} ({runs}, {len(set(seeds))} seeds x "
                   f"{int(d.groupby('seed').size().min())}-{int(d.groupby('seed').size().max())} evals)")
            return cls(updates=d["update"].to_numpy(float), accuracy=acc, seeds=seeds, mode=mode, B=B, source=src,
                       metadata=meta, notes=[note] + [skipped] * (skipped is not None), n_replicates=n_replicates,
                       eval_hint=study_eval_hint(study_dir, arm), accuracy_scale="points")
        except CurveError as e:  # too few evals: named as metrics.jsonl's and a CSV's are (_named)
            raise _named(e, src, skipped, fix="fill those cells in if they are evals") from None

    @classmethod
    def from_metrics(cls, paths, *, metric: str = "greedy_accuracy", accuracy_scale: str = "auto",
                     mode: str = "sigmoid", B: float | None = None, metadata: dict | None = None,
                     n_replicates: int = N_REPLICATES):
        """The curve of one or more ``gradprobe train`` runs (one ``metrics.jsonl`` per seed).

        Parameters
        ----------
        paths : path or sequence of paths
            ``metrics.jsonl`` files (or their run folders). Lines with ``"eval": true`` carry ``update``
            and ``metric``. A ``config.json`` beside the file gives the metadata (model, task, batch, lr).
        metric : str
            ``greedy_accuracy`` (fractions; default) or ``sampled_accuracy``.
        accuracy_scale : {"auto", "fraction", "points"}
            ``auto`` detects fractions (all values in [0, 1]) and says so in ``notes``; values above 1 but at
            most 5 are refused as of unknown scale (:func:`read_points`).

        Raises
        ------
        CurveError
            A missing file, a file given twice, a ``config.json`` beside a file that cannot be read or is not what
            ``gradprobe train`` writes (not UTF-8, not JSON, a key twice, ``run.train`` no object, ...:
            :func:`_config_run`; an absent one is no error) or whose ``run.seed`` (the label of each of several runs) is
            no integer >= 0 (:func:`_run_config`), a line that is not JSON or names a key twice
            (:func:`~.text_files.parse_curve_json`), an ``update`` or ``metric`` that is no number (a JSON string such
            as ``"0.676"`` or true/false included), a negative update or one that is no whole number (``2.5``; ``2.0``
            reads as 2) or an infinite metric (each naming the line), an eval line without ``update`` (the message names
            the fix), a file without eval lines carrying ``metric``, eval lines of ``metric`` that all hold null or NaN
            (the message says which, and the fix: :func:`_no_value`), one update of a run with two different values
            (:func:`one_value_per_eval`), values that mix fractions and points or whose scale cannot be told under
            ``auto`` (:func:`to_points`, :func:`read_points`; the lines are named), too few evals (the fix named:
            evaluate more often, or, when the null or NaN lines are what leaves too few, their fix first:
            :func:`_skipped_lead`; the files are named in the refusal's first sentence, and the skipped lines in the
            note after it: :func:`_named`), an ``eval`` field that is not JSON true or false (``"true"``, ``1``: the
            message names the line). Eval lines whose ``metric`` is NaN or JSON ``null`` (not measured there, or a
            failed eval) are skipped and named, in the curve's ``notes`` and in any refusal, with the fix
            (:func:`_lines_skipped_note`: for a ``sampled_accuracy`` that ``gradprobe train`` left null by its
            ``sampled_at = "ends"`` schedule, ``greedy_accuracy`` or a run sampled at every eval); an exact repeat of an
            eval is read once and named.
        """
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not paths:
            raise CurveError("from_metrics needs at least one metrics.jsonl")
        paths = [_run_file(p, METRICS_JSONL, "the metrics.jsonl of a `gradprobe train` run (or its folder)")
                 for p in paths]
        _each_file_once(paths, "metrics.jsonl")
        n, y, seeds, where, no_value, meta, used = [], [], [], [], [], dict(metadata or {}), set()
        logs, claimed = [], []  # each file's log lines and recorded seed, for _one_run_each
        for i, path in enumerate(paths):
            label, recorded = _run_config(path, i, len(paths), meta)
            if label in used:  # two runs with the same seed stay two curves
                label = f"{label}#{i}"
            used.add(label)
            rows, skipped_here, log = _eval_lines(path, metric)
            no_value, logs, claimed = no_value + skipped_here, logs + [log], claimed + [recorded]
            for u, v, at in rows:
                n.append(u)
                y.append(v)
                seeds.append(label)
                where.append(at)
        src = f"metrics.jsonl of {len(paths)} run(s) ({paths[0]}{', ...' if len(paths) > 1 else ''})"
        skipped = _lines_skipped_note(no_value, metric)
        if not n:  # every eval of the metric null or NaN: the evals exist, their values do not
            kinds = [kind for kind in ("NaN", "null") if any(k == kind for _, k, _ in no_value)]
            raise with_skipped(CurveError(_no_value(metric, src, kinds, _train_null_fix(metric))),
                               _lines_skipped_note(no_value, metric, led=tuple(kinds)), fix=None)
        lead, led = _skipped_lead(n, [(k, u) for _, k, u in no_value], B, metric, _train_null_fix(metric))
        try:
            keep, copies = one_value_per_eval(n, y, seeds, where, src)
            n, y, seeds, where = ([x for x, k in zip(col, keep) if k] for col in (n, y, seeds, where))
            acc, note = read_points(np.array(y), accuracy_scale, f"metrics {metric}", where, updates=n, seeds=seeds)
            curve = cls(updates=n, accuracy=acc, seeds=seeds, mode=mode, B=B, source=src, metadata=meta,
                        notes=[note] + [x for x in (skipped, copies) if x], n_replicates=n_replicates,
                        eval_hint=lead or PLAN_EVAL_HINT,  # the skipped lines' fix when they leave too few evals
                        accuracy_scale="points")  # acc is points: to_points read the scale
            _one_run_each(logs, paths, "metrics.jsonl", claimed)
            return curve
        except CurveError as e:
            if lead and isinstance(e, TooFewEvalsError):  # it leads with the skipped lines' fix: said once
                skipped = _lines_skipped_note(no_value, metric, led=led)
            raise _named(e, src, skipped) from None

    @classmethod
    def from_csv(cls, path: str | Path, *, update_col: str = "update", accuracy_col: str = "accuracy",
                 seed_col: str | None = "auto", accuracy_scale: str = "auto", mode: str = "sigmoid",
                 B: float | None = None, metadata: dict | None = None, n_replicates: int = N_REPLICATES):
        """The curve from a CSV of evals: one row per eval.

        Parameters
        ----------
        path : path
        update_col, accuracy_col : str
            Columns of the update count and the accuracy (fractions or points, detected). The header's names are
            read without the spaces around them (``update, accuracy``: :func:`stripped_header`).
        seed_col : str or None
            Column of the seed/run label; ``"auto"`` (default): the column ``seed`` when the header has one
            (``--reference-curve FILE.csv`` reads several seeds that way), else one seed; None: one seed. A label
            is the run's seed (an integer) or any other run name (text), but not a boolean (``True``, ``false``:
            refused, :func:`_check_csv_seeds`); a seed cell that is empty or holds only spaces makes its line no
            eval (skipped and named in the notes, as an empty accuracy cell).
        accuracy_scale : {"auto", "fraction", "points"}
        metadata : dict, optional
            ``update_prompts``, ``update_group``, ``model``, ``task``, ``lr`` of the run.

        Raises
        ------
        CurveError
            A missing or unparsable file, a file with no line of values (a header alone: a
            :class:`~.curve_fit.TooFewEvalsError` saying what a line holds and how many are needed,
            :func:`_no_eval_lines`), a missing column (the message lists the columns; a file separated by semicolons,
            tabs or bars is named so, with the fix: :func:`_csv_columns`), a cell of the update or accuracy column
            that is text, infinite or too large for a float (the message names the line and the column, and shows the
            cell as the file holds it: :func:`_too_large_cells`), a boolean seed label (the line named), a column
            ``arm`` naming several arms (a study's runs.csv: :func:`_one_arm`), a negative update or one that is no
            whole number (``2.5``; ``2.0`` reads as 2: :func:`~.csv_cells.check_csv_values`), runs stacked one after
            another without a seed column (:func:`_stacked_runs`: add one), one (seed, update) on two lines with
            different accuracies (:func:`one_value_per_eval`), an accuracy column that mixes fractions and points or
            whose scale cannot be told under ``auto`` (above 1, at most 5: :func:`read_points`; the lines are named),
            too few evals (a :class:`~.curve_fit.TooFewEvalsError` naming the CSV, the minimum and the fix,
            :data:`CSV_EVAL_HINT`, as the other readers' do: :func:`_named`). Lines with an empty or NaN cell there
            are skipped (logs with a row per step carry the accuracy at evals only), and named: in the curve's
            ``notes``, and in any refusal (:mod:`gradprobe.forecast.csv_cells`); so are lines that look cut (fewer
            fields than the header, or a last line without a line break: its last value may be cut); an exact copy of
            a line is read once and named.
        """
        path = Path(path)
        if not path.is_file():
            raise CurveError(f"CSV {str(path)!r} not found")
        raw = path.read_bytes()  # read once: the table and its cut lines come from the same bytes
        df = stripped_header(read_csv_checked(path, raw))  # a header update, accuracy too
        if seed_col == "auto":
            seed_col = "seed" if "seed" in df.columns else None
        cols = [update_col, accuracy_col] + ([seed_col] if seed_col else [])
        _csv_columns(df, raw, path, cols)
        _one_arm(df, path)
        _too_large_cells(raw, path, (update_col, accuracy_col))
        df = numeric_columns(df, (update_col, accuracy_col), path)
        if seed_col:  # a seed cell of spaces is an empty cell (as numeric_columns reads one): no label, no eval
            df[seed_col] = df[seed_col].mask(df[seed_col].map(lambda x: isinstance(x, str) and not x.strip()))
        _no_eval_lines(df, path, B)
        df, cut, cut_at = without_short_lines(df, path, raw, accuracy_col, trust_last=True)
        blank = skipped_note([(line, c) for line, c in skipped_cells(df, cols) if line not in cut_at], path)
        df = df[df[cols].notna().all(axis=1)]
        where = [f"line {i + 2}" for i in df.index]
        seeds = df[seed_col].to_numpy() if seed_col else None
        if seeds is not None:
            _check_csv_seeds(seeds, [int(i) + 2 for i in df.index], path, seed_col)
        skipped = "; ".join(x for x in (blank, cut) if x) or None
        try:
            check_csv_values(df, path, update_col)
            if seeds is None:  # several runs in one file: a seed column, not a repeated eval
                _stacked_runs(df[update_col], df[accuracy_col], where, path)
            keep, copies = one_value_per_eval(df[update_col], df[accuracy_col], seeds, where, str(path))
            df, where, seeds = df[keep], [w for w, k in zip(where, keep) if k], None if seeds is None else seeds[keep]
            acc, note = read_points(df[accuracy_col].to_numpy(float), accuracy_scale, f"{path} {accuracy_col}",
                                    where,
                                  updates=df[update_col].to_numpy(float), seeds=seeds)
            return cls(updates=df[update_col].to_numpy(float), accuracy=acc, seeds=seeds, mode=mode, B=B,
                       source=f"CSV {path}", metadata=metadata, notes=[note] + [x for x in (skipped, copies) if x],
                       n_replicates=n_replicates, eval_hint=CSV_EVAL_HINT, accuracy_scale="points")
        except CurveError as e:  # too few evals: named as metrics.jsonl's and a study's are (_named)
            raise _named(e, f"CSV {path}", skipped, fix="fill those cells in if they are evals" if blank else None
                         ) from None

    @classmethod
    def from_trl_state(cls, paths, *, metric: str = "eval_accuracy", accuracy_scale: str = "auto",
                       initial_accuracy: float | None = None, mode: str = "sigmoid", B: float | None = None,
                       metadata: dict | None = None, n_replicates: int = N_REPLICATES):
        """The curve from TRL ``trainer_state.json`` file(s) (one per seed).

        TRL's ``Trainer`` writes ``log_history``, a list of dicts; eval entries carry ``step`` (optimizer steps =
        updates) and the eval metrics. Steps are read as updates: with gradient accumulation one TRL step is one
        optimizer update, which is what the x axis means.

        Parameters
        ----------
        paths : path or sequence of paths
            ``trainer_state.json`` files, checkpoint folders or TRL output_dirs (:func:`trl_state_path`).
        metric : str
            The log_history key of the held-out accuracy (default ``eval_accuracy``; e.g.
            ``eval_rewards/accuracy_reward/mean`` for a GRPOTrainer eval of an accuracy reward).
        accuracy_scale : {"auto", "fraction", "points"}
        initial_accuracy : float, optional
            Accuracy of the initial policy (same scale as the metric) when the log has no step-0 eval (TRL evaluates at
            step 0 only with ``eval_on_start=True``); it becomes R0 (``gradprobe probe --initial-accuracy``). A file
            with its own (non-NaN, non-null) eval at step 0 keeps it, and a note in ``notes`` names the file. Where it
            is used, it is no eval of the file: a note (with :data:`GIVEN_R0_MARK`, printed under the forecast) says R0
            is the value given, the curve's ``metadata`` records it (:data:`GIVEN_R0_KEY`, kept by ``save``), its
            summary counts the file's own evals and the scale note's range is theirs, the value given named apart.

        Raises
        ------
        CurveError
            A missing or invalid file (a key twice in one object, or nesting too deep:
            :func:`~.text_files.parse_curve_json`), a file given twice, an entry holding ``metric`` without a ``step``
            (named ``log_history[i]``), a ``step`` or ``metric`` that is no number or is infinite, a ``step`` no whole
            number (``20.5``) (the message names the ``log_history`` entry and its step), no entry with ``metric`` (the
            message lists the eval keys found), an ``initial_accuracy`` that is no finite number or outside the scale's
            range (:func:`initial_accuracy_value`; or, under ``accuracy_scale="auto"``, one in (0, 1] beside evals in
            points, or one above 1 beside evals in fractions, used or not: :func:`_check_initial_scale`), no eval of
            ``metric`` with a value (all null or NaN: the message says which, and to rerun them or name another eval
            key: :func:`_no_value`), one step with two different values (:func:`one_value_per_eval`: e.g. a
            ``trainer.evaluate()`` after training at the last eval's step with sampled evals; keep one), values that mix
            fractions and points or whose scale cannot be told under ``auto`` (above 1, at most 5: :func:`read_points`;
            the entries are named), too few evals (the fix named is TRL's ``eval_strategy`` / ``eval_steps``, and
            ``eval_on_start`` or ``initial_accuracy`` when no eval sits at step 0, or rerunning a NaN or null step-0
            eval: :func:`_trl_eval_hint`; when the null or NaN evals are what leaves too few, rerunning them:
            :func:`_skipped_lead`; the files named first, the skipped evals in a note after the fix: :func:`_named`).
            Entries whose ``metric`` is NaN or ``null`` (a failed or skipped eval) are skipped, as a CSV's empty or NaN
            cells, and named by their steps, in ``notes`` and any refusal. Entries without ``metric`` are passed over.
        """
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not paths:
            raise CurveError("from_trl_state needs at least one trainer_state.json")
        paths, found_in = map(list, zip(*map(trl_state_path, paths)))  # a note where an output_dir was given
        _each_file_once(paths, "trainer_state.json", entries=[_log_history(p) for p in paths])
        initial_accuracy = initial_accuracy_value(initial_accuracy, accuracy_scale)
        n, y, seeds, where, rows_of, nan_steps = _trl_points(paths, metric, initial_accuracy)
        skipped = _trl_skipped_note(nan_steps, metric)
        no_value = [(k, s) for e in nan_steps.values() for s, k in e]
        hint, led = _trl_eval_hint(n, *_skipped_lead(n, no_value, B, metric, _TRL_NULL_FIX), nan_steps, metric)
        files = _named_files(paths)
        src = f"TRL trainer_state.json of {len(paths)} run(s) ({paths[0]}{', ...' if len(paths) > 1 else ''})"
        if all(at == _GIVEN for at in where):  # every eval of the metric null or NaN (the value given is none)
            kinds = [kind for kind in ("NaN", "null") if any(k == kind for k, _ in no_value)]
            raise with_skipped(CurveError(_no_value(metric, src, kinds, _TRL_NULL_FIX, _TRL_ALL_NAN_FIX)),
                               _trl_skipped_note(nan_steps, metric, led=tuple(kinds)), fix=None)
        try:
            keep, copies = one_value_per_eval(n, y, seeds, where, src, hint=(
                "if both are evals of the same policy (a trainer.evaluate() after training, at the last eval's "
                "step), delete one entry"))
            n, y, seeds, where = ([x for x, k in zip(col, keep) if k] for col in (n, y, seeds, where))
            _check_initial_scale(initial_accuracy, y, where, accuracy_scale, files)  # used or not
            given = np.array([at == _GIVEN for at in where])
            acc, note = read_points(np.array(y), accuracy_scale, f"trainer_state {metric}", where, updates=n,
                                  seeds=seeds, given=given)
            meta, given_note = _given_r0(initial_accuracy, acc, given, np.array(n), seeds, paths, metadata)
            unused = _unused_initial_accuracy(initial_accuracy, rows_of)
            return cls(updates=n, accuracy=acc, seeds=seeds, mode=mode, B=B, source=src, metadata=meta,
                       notes=[*filter(None, found_in), note, *(x for x in (given_note, skipped, copies, unused) if x)],
                       n_replicates=n_replicates, eval_hint=hint, accuracy_scale="points")  # hint: TRL's settings
        except CurveError as e:
            if led and isinstance(e, TooFewEvalsError):  # it leads with the skipped evals' fix: said once
                skipped = _trl_skipped_note(nan_steps, metric, led=led)
            raise _named(e, src, skipped) from None


def _named(error: CurveError, src: str, skipped: str | None, fix: str | None = None) -> CurveError:
    """A reader's refusal: ``error`` with the note of the evals it skipped (``skipped``; None: none) and that note's
    ``fix`` appended (:func:`~.csv_cells.with_skipped`). Where ``error`` is the refusal for too few evals (a
    :class:`~.curve_fit.TooFewEvalsError`), its first sentence names the source ``src`` (``"metrics.jsonl of 1
    run(s) (PATH)"``, ``"CSV PATH"``, ``"study NAME arm grpo (PATH)"``: :meth:`~.curve_fit.TooFewEvalsError.naming`)
    whether or not a note follows, and it stays a TooFewEvalsError (``updates``, ``B``, ``eval_hint`` kept; its
    ``naming`` rebuilds the message without the note): every reader's refusal reads alike, and the file is named
    before the fix, not only in a note after it."""
    if not isinstance(error, TooFewEvalsError):
        return with_skipped(error, skipped, fix=fix)
    named = error.naming(src)
    if skipped is None:
        return named
    return TooFewEvalsError(str(with_skipped(named, skipped, fix=fix)), updates=named.updates, B=named.B,
                            eval_hint=named.eval_hint)


def study_eval_hint(study_dir: Path, arm: str) -> str:
    """The fix of too few evals in arm ``arm`` of the study in ``study_dir`` (:meth:`CurveSources.from_study`: the
    curve's ``eval_hint``): evaluate that arm more often (a copy of the study's frozen plan, run anew) or give
    another study."""
    return (f"evaluate arm {arm!r} more often: copy its {PLAN_COPY} ({Path(study_dir) / PLAN_COPY}; the study's frozen "
            "plan, which the study refuses to resume once edited), set `[eval] every_tokens` smaller than the budget "
            f"and run it with a new --out, or pass the folder of a study whose {arm!r} arm has evals at more update "
            "counts")


def _trl_eval_hint(n: list[float], lead: str | None, led: tuple[str, ...], skipped: dict[Path, list[tuple[float, str]]],
                   metric: str) -> tuple[str, tuple[str, ...]]:
    """(the fix a TRL curve's refusal for too few evals names, its ``eval_hint``; the kinds of skipped evals that fix
    names, which the note of skipped evals after it does not fix again): ``lead`` (the skipped evals' fix, naming
    ``led``: :func:`_skipped_lead`) where they are what leaves too few; else, with an eval at step 0 among the
    updates ``n`` (its own or the ``initial_accuracy`` given), evaluating more often; else, where a step-0 eval is
    there but is not a number, rerunning it (:func:`_trl_step0_hint`), not ``eval_on_start=True``, which would log one;
    else :data:`TRL_EVAL_HINT`."""
    if lead:
        return lead, led
    if 0 in n:
        return _TRL_MORE_EVALS, ()
    kinds, step0 = _trl_step0_hint(skipped, metric)
    return step0 or TRL_EVAL_HINT, kinds


def _trl_step0_hint(skipped: dict[Path, list[tuple[float, str]]], metric: str) -> tuple[tuple[str, ...], str | None]:
    """(the kinds, the fix of too few evals) of a TRL log whose eval at step 0 is there but holds no number for
    ``metric`` (NaN or null: ``skipped``, per file (step, kind), as :func:`_trl_rows` gives them) and no other file
    has one: ``eval_on_start=True`` is set already, so that eval is to be rerun (or another eval key named, or the
    initial policy's accuracy given). The kinds are those the note of skipped evals need not fix again (all of
    them where every skipped eval sits at step 0: :func:`_trl_skipped_note`'s ``led``). ((), None): no such eval."""
    at_zero = {p: [k for s, k in e if s == 0] for p, e in skipped.items()}
    files = [p for p, kinds in at_zero.items() if kinds]
    if not files:
        return (), None
    kinds = [k for k in ("NaN", "null") if any(k in v for v in at_zero.values())]
    only_zero = all(s == 0 for e in skipped.values() for s, _ in e)
    return (tuple(kinds) if only_zero else ()), (
        f"{_TRL_MORE_EVALS}; the eval at step 0 is in {_named_files(files)} (a step-0 eval is logged) but is not a "
        f"number ({' or '.join(kinds)} {metric!r}): rerun that eval, or name another eval key "
        "(--reference-curve-metric KEY), or give the initial policy's accuracy (initial_accuracy=, gradprobe probe "
        "--initial-accuracy)")


def _log_history(path: Path) -> list:
    """A trainer state's ``log_history`` (for :func:`_one_run_each`); [] when it cannot be read or has none (its
    reader names why)."""
    try:
        history = parse_curve_json(read_source_text(path)).get("log_history")
    except (OSError, ValueError, AttributeError):  # JSONShapeError and UnicodeDecodeError are ValueErrors
        return []
    return history if isinstance(history, list) else []


def _trl_points(paths: list[Path], metric: str, initial_accuracy: float | None) -> tuple[list, ...]:
    """(steps, values, seed labels, places, rows per file, skipped evals per file) of TRL trainer states
    (:func:`_trl_rows` of each; file ``i`` is seed ``str(i)``); raises what :func:`_trl_rows` raises."""
    n, y, seeds, where, nan_steps, rows_of = [], [], [], [], {}, {}
    for i, path in enumerate(paths):
        rows_of[path], nan_steps[path] = _trl_rows(path, metric, initial_accuracy)
        for s, v, at in rows_of[path]:
            n.append(s)
            y.append(v)
            seeds.append(str(i))
            where.append(at)
    return n, y, seeds, where, rows_of, nan_steps


def _named_files(paths: list[Path]) -> str:
    """``"a.json, b.json and 2 more"``: the first files of ``paths``, the rest counted."""
    more = f" and {len(paths) - _SHOWN_STEPS} more" if len(paths) > _SHOWN_STEPS else ""
    return ", ".join(str(p) for p in paths[:_SHOWN_STEPS]) + more


def _given_r0(initial_accuracy: float | None, acc: np.ndarray, given: np.ndarray, n: np.ndarray, seeds: list[str],
              paths: list[Path], metadata: dict | None) -> tuple[dict | None, str | None]:
    """(the curve's metadata, the note) saying which update-0 points are the ``initial_accuracy`` given, not evals
    of their files: ``metadata`` plus :data:`GIVEN_R0_KEY`, and a note with :data:`GIVEN_R0_MARK`; ``metadata``
    and None when it was not used. ``acc`` (points), ``given`` (bool), ``n`` (updates), ``seeds``: shape (points,);
    file ``i`` of ``paths`` is seed ``str(i)``."""
    if initial_accuracy is None or not given.any():
        return metadata, None
    labels = sorted({seeds[i] for i in np.flatnonzero(given)}, key=int)
    points, at_zero = float(acc[given][0]), acc[n == 0]
    meta = {**(metadata or {}), GIVEN_R0_KEY: {"value": initial_accuracy, "points": points, "seeds": labels}}
    files = _named_files([paths[int(label)] for label in labels])
    given_as = f"(initial_accuracy / --initial-accuracy {initial_accuracy:g})"
    if at_zero.size == len(labels):
        return meta, (f"R0 = {points:.1f} points{GIVEN_R0_MARK}{given_as}, not an eval of {files}; every gain is "
                      "read relative to it")
    return meta, (f"the update-0 point of {files} ({points:.1f} points){GIVEN_R0_MARK}{given_as}, not an eval of "
                  f"that file; R0 = {float(at_zero.mean()):.1f} points averages it with the other files' own step-0 "
                  "evals")
