"""Freezing a study's plan: the plan copied byte for byte into the study folder, its sha256 in ``study.json``.

A study's plan cannot change after its first run: :func:`freeze_plan` refuses a folder frozen with a
plan of another sha256 (:class:`~gradprobe.study.folder.PlanChangedError`), unless no run of it has
finished and ``restart`` asks to replace it (:data:`STUDY_OUTPUTS` are then deleted). DESIGN.md,
"Matched-compute training"; file names from :mod:`gradprobe.layout`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

from ..layout import CONFIG_JSON, PLAN_COPY, PROBE_JSON, STUDY_JSON, run_dir
from ..outputs import (json_short, output_error, prepare_output_dir, shell_word, versions, write_bytes_atomic,
                       write_json_atomic)
from ..tables import shown
from ..tasks import task_data_identity
from ..training.budget import reach_silenced
from ..training.plan import Plan, check_plan_budget, load_plan
from ..training.plan_checks import check_reference_arm
from ..training.run_folder import (MODULES, TASK_DATA, modules_mismatch, modules_problem, task_data_mismatch,
                                   task_data_moved, task_data_problem)
from .folder import (STUDY_OUTPUTS, FolderLock, PlanChangedError, StudyError, check_frozen_plan, finished_runs,
                     is_file_manager_file, is_plan_sha, not_written_by_study, now, read_study_json, sha256,
                     study_json_fix, study_plan_sha)

__all__ = ["STUDY_OUTPUTS", "freeze_plan", "check_reward_plugins", "REWARD_PLUGINS", "check_task_data", "TASK_DATA",
           "check_study_model", "load_study_plan"]

# STUDY_OUTPUTS (what ``--restart`` deletes) is defined in .folder, whose refuse_other_output refuses a user's files of
# those names in a folder without study.json; exposed here as before.


def load_study_plan(plan_path: str | Path, out: str | Path | None) -> Plan:
    """:func:`~gradprobe.training.plan.load_plan` of the plan a study into ``out`` runs: a plan ``out`` froze
    already (its bytes' sha256 is the one ``out/study.json`` records, :func:`~gradprobe.study.folder.study_plan_sha`)
    is resumed as it was frozen, without the checks added since that a new plan must pass (``check_reach``: a token
    budget out of reach of the updates, warned instead; an ``[arms.grpo]`` frozen before the reference arm's check,
    read as it was run); any other plan is checked in full: a new study, another
    plan, or a folder without ``study.json`` that merely holds the plan as ``plan.toml`` (a plan kept in its own
    output folder is no study yet). Raises as ``load_plan``."""
    plan_path = _home(plan_path)
    try:
        frozen = _frozen_in(out, sha256(Path(plan_path).read_bytes()))
    except (OSError, TypeError):  # load_plan names an unreadable plan or a path that is none
        frozen = False
    return load_plan(plan_path, check_reach=not frozen, check_reference=not frozen)


def _home(plan_path):
    """``plan_path`` with a leading ``~`` or ``~user`` expanded as :func:`~gradprobe.training.plan.load_plan` expands
    it (:func:`os.path.expanduser`), so that the plan checked is the file frozen; anything that is no path is left
    for ``load_plan`` to refuse."""
    return os.path.expanduser(plan_path) if isinstance(plan_path, (str, os.PathLike)) else plan_path


def _check_reference(plan: Plan, out) -> Plan:
    """``plan``, refused when it starts a new study whose ``[arms.grpo]`` is not plain GRPO
    (:func:`~gradprobe.training.plan_checks.check_reference_arm`: its analysis measures every gain against it), a
    :class:`Plan` object given in code too; a plan ``out`` froze already is resumed as it was run (:func:`_frozen_in`).
    Raises PlanError, before anything is written."""
    if not _frozen_in(out, plan.sha256):
        for arm in plan.arms.values():
            check_reference_arm(arm, plan.train)
    return plan


def _frozen_in(out, sha: str) -> bool:
    """Whether the study folder ``out`` froze the plan of sha256 ``sha``: its ``study.json`` records that sha256
    (:func:`~gradprobe.study.folder.study_plan_sha`); a folder that holds the plan only as ``plan.toml``, or no folder
    (None, missing), froze nothing yet. The one rule of :func:`load_study_plan` and :func:`freeze_plan`.

    Raises
    ------
    TypeError
        ``out`` is not a path (and not None)."""
    if out is None or not Path(out).is_dir():
        return False
    recorded, source = study_plan_sha(Path(out))
    return source.name == STUDY_JSON and recorded == sha


def _check_as_new(plan: Plan, out: Path) -> None:
    """Unless the study folder ``out`` (its lock held) holds ``plan`` frozen now (:func:`_frozen_in`), refuse
    ``plan`` as the plan of a new study: the check that :func:`load_study_plan` leaves out for a plan the folder froze
    already (a ``[budget] generated_tokens`` out of reach of ``[budget] updates``, only warned about there), made as
    :func:`~gradprobe.training.plan.load_plan` makes it. Why: :func:`freeze_plan` is given the plan as read before
    the lock was taken; another command may have replaced or removed the study since, and ``plan`` would then be
    frozen anew (``--restart``, or a new study) without the check.

    Raises
    ------
    PlanError
        As :func:`~gradprobe.training.plan.check_plan_budget` refuses it (the budgets, the arm and the fix named)."""
    if _frozen_in(out, plan.sha256):
        return
    check_plan_budget(plan, check_reach=True)


def freeze_plan(plan_path: str | Path, out: str | Path, *, restart: bool = False, say=None,
                plan: Plan | None = None) -> tuple[Plan, dict]:
    """Validate ``plan_path``, then copy it to ``out/plan.toml`` and record it in ``out/study.json``.

    Parameters
    ----------
    plan_path : path
        The plan TOML (validated with :func:`~gradprobe.training.plan.load_plan`).
    out : path
        The study folder (created and checked writable before anything else is written).
    restart : bool
        When ``out`` holds a study of another plan of which no run has finished: delete its frozen plan and every
        study output (:data:`STUDY_OUTPUTS`: runs, probe, runs.csv, analysis...) and freeze ``plan_path`` instead
        (said on stderr, even when ``say`` is silent: data is deleted). The caller must hold the study folder's lock.
    say : callable(str), optional
        Progress messages.
    plan : Plan, optional
        ``plan_path`` as :func:`load_study_plan` read it already (not parsed and warned about again); None: read here.
        A read made before the lock and no longer true of ``out`` is checked again (:func:`_check_as_new`).

    Returns
    -------
    (Plan, dict)
        The plan of the FROZEN copy (every run reads that file: :func:`_frozen_copy`) and ``study.json``'s content.

    Raises
    ------
    PlanError
        The plan is invalid, read here or checked again (:func:`_check_reference`, :func:`_check_as_new`).
    PlanChangedError
        ``out`` holds a study of a plan with another sha256 (both hashes named; the fix: a new ``--out``, or
        ``--restart`` when no run of it has finished), or ``restart`` was asked but runs of the frozen plan have
        finished (how many is named).
    StudyError
        ``out/plan.toml`` was edited after freezing, ``out/study.json`` is damaged (not JSON, no object: the
        file and the fix are named, :func:`~gradprobe.study.folder.read_study_json`), or it records no plan sha256
        and ``out/plan.toml`` is missing (which plan the study froze cannot be told; the frozen plan's sha256 is read
        by :func:`~gradprobe.study.folder.study_plan_sha`, the one rule: study.json's, else plan.toml's). With
        ``restart``: ``runs/`` holds what is not a run folder of the frozen plan, or the outputs it would delete hold
        files gradprobe does not write there (a user's notes in a run folder: named, with the fix; nothing is
        deleted, :func:`_restart_study`).
    OutputDirError
        ``out`` cannot be created or written (names the path and the fix).
    """
    plan_path = _home(plan_path)  # the file load_plan reads, copied and recorded below
    plan = _check_reference(plan if plan is not None else load_study_plan(plan_path, out), out)  # frozen: as run
    out = prepare_output_dir(Path(out))
    _check_as_new(plan, out)  # the folder now, under the lock: the plan's read, before it, may have seen it frozen
    raw = Path(plan_path).read_bytes()
    frozen, sj = out / PLAN_COPY, out / STUDY_JSON
    if not (sj.exists() or frozen.exists()):
        write_bytes_atomic(frozen, raw)
        study = _new_study_json(plan, plan_path)
        write_json_atomic(sj, study)
        return _frozen_copy(plan, frozen, new=True), study
    study = read_study_json(out) or {}  # a damaged study.json is refused here, before its plan sha256 is read
    recorded = study.get("plan_sha256")
    if "plan_sha256" in study and not is_plan_sha(recorded):
        # a damaged record: falling back to plan.toml would check the frozen copy against itself
        raise StudyError(f"{sj} field plan_sha256 is {json_short(recorded)}, not the hex sha256 of the frozen plan: "
                         f"the file is damaged, so whether {frozen} is the plan the study froze cannot be told; "
                         f"{study_json_fix(out)}")
    old = study_plan_sha(out)[0]
    if old is None:
        raise _no_plan_record(sj, frozen)
    if old != plan.sha256:
        if restart and not finished_runs(out) and not _is_file(plan_path, frozen):  # --restart would delete it
            _restart_study(out, old, plan, plan_path)
            return freeze_plan(plan_path, out, say=say, plan=plan)
        raise _plan_changed(out, plan_path, old, plan.sha256, restart)
    if restart and say is not None:
        say("--restart: the plan is the frozen one; nothing to replace, resuming the study")
    if not frozen.exists():
        write_bytes_atomic(frozen, raw)
    check_frozen_plan(out, study)  # an edited plan.toml: the one check of a frozen plan
    if not study:
        study = _new_study_json(plan, plan_path)
        write_json_atomic(sj, study)
    return _frozen_copy(plan, frozen, new=False), study  # plan_path's bytes, loaded above as the study's


def _no_plan_record(sj: Path, frozen: Path) -> StudyError:
    """The error for a study whose ``study.json`` (``sj``) records no plan sha256 and whose frozen plan (``frozen``)
    is missing or unreadable: which plan it froze cannot be told; the fix is to restore either, or a new --out."""
    lost = "does not exist" if not frozen.exists() else "cannot be read"
    return StudyError(f"{sj} records no plan_sha256 and {frozen} {lost}: which plan this study froze cannot be "
                      f"told; restore {frozen} (or {sj}) from a copy of the study, or run the plan with a new --out")


def _is_file(path, other: Path) -> bool:
    """Whether ``path`` and ``other`` name one existing file (a path written another way or a link to it too)."""
    try:
        return Path(path).resolve().samefile(other)
    except OSError:
        return False


def _edited_frozen_copy(out: Path, old: str, new: str, restart: bool) -> PlanChangedError:
    """The refusal of a study whose own frozen copy ``out/plan.toml`` was edited (sha256 ``new``, ``old`` recorded)
    and given as the plan: it is a study output, so ``--restart`` would delete it before freezing it, and the hint to
    "restore the original plan" would name the edited file itself."""
    frozen = out / PLAN_COPY
    done = len(finished_runs(out))
    why = ("--restart deletes the frozen plan with the study's outputs, so it cannot freeze this file itself"
           if restart else "a study's plan cannot change")
    then = (f"`gradprobe study CHANGED.toml --out {shell_word(out)} --restart` (no run of the frozen plan has "
            f"finished)" if not done else
            f"`gradprobe study CHANGED.toml --out NEW_DIR` ({done} run(s) of the frozen plan have finished)")
    return PlanChangedError(f"{frozen} is the study's frozen plan, and it was edited after the study froze it "
                            f"(sha256 {new[:12]} now, {out / STUDY_JSON} records {old[:12]}): {why}; nothing was run "
                            f"or deleted. To run the edited plan, copy it out (`cp {shell_word(frozen)} "
                            f"CHANGED.toml`), then run {then}; to resume this study, restore {frozen} from a copy "
                            "of the study")


def _frozen_copy(plan: Plan, frozen: Path, *, new: bool) -> Plan:
    """The plan of the study's frozen copy ``frozen``: ``plan`` itself, its ``path`` that copy's, when the copy holds
    its bytes (sha256), so a study's one plan is parsed, checked and warned about once; else (the plan file was
    changed while it was being frozen) the copy loaded, checked in full where it is ``new``."""
    if sha256(frozen.read_bytes()) == plan.sha256:
        return dataclasses.replace(plan, path=str(frozen))
    return load_plan(frozen, check_reach=new, check_reference=new)


def _plan_changed(out: Path, plan_path, old: str, new: str, restart: bool) -> PlanChangedError:
    """The refusal of a plan of sha256 ``new`` in a study folder frozen with ``old``: the fix depends on
    whether runs of the frozen plan have finished (then only a new ``--out``) and on ``restart``."""
    if _is_file(plan_path, out / PLAN_COPY):
        return _edited_frozen_copy(out, old, new, restart)
    finished = finished_runs(out)
    head = (f"study folder {str(out)!r} was started with a plan of sha256 {old}, but {str(plan_path)!r} has "
            f"sha256 {new}: a study's plan is frozen before its first run and cannot change. ")
    if finished and restart:
        return PlanChangedError(
            head + f"--restart refused: {len(finished)} run(s) of the frozen plan have finished "
            f"({', '.join(str(f.relative_to(out)) for f in finished[:4])}{', ...' if len(finished) > 4 else ''}) "
            f"and would be lost. Run the changed plan with a new --out")
    if finished:
        return PlanChangedError(
            head + f"{len(finished)} run(s) of the frozen plan have finished, so it cannot be replaced: run "
            f"the changed plan with a new --out (or restore the original plan, {out / PLAN_COPY}, to resume "
            f"this study)")
    return PlanChangedError(
        head + f"No run of the frozen plan has finished: rerun with --restart to replace the frozen plan and "
        f"its partial outputs with this plan, or run it with a new --out (or restore the original plan, "
        f"{out / PLAN_COPY}, to resume this study)")


def _restart_study(out: Path, old_sha: str, plan: Plan, plan_path) -> None:
    """Delete the study outputs of ``out`` (:data:`STUDY_OUTPUTS`); in ``runs/`` only the frozen plan's run folders
    (:func:`_frozen_runs`), each once its lock is free (an orphaned worker of a killed study exits within a second).

    Raises
    ------
    StudyError
        ``runs/`` holds anything but the frozen plan's run folders (a user's run of another arm or seed, a file):
        named, with the fix (move it out of ``runs/``, or a new ``--out``); or a run folder, ``probe/``, ``figures/``
        or ``reanalysis/`` holds files gradprobe does not write there (a user's ``notes.txt`` or ``my_eval/res.csv``
        in a run folder, :func:`~gradprobe.study.folder.not_written_by_study`): the first six named, then how many
        more, with the fix (move them out of the study folder and rerun with ``--restart``, or a new ``--out``).
        Nothing is deleted.
    OutputDirError
        A study output cannot be deleted (names it and the fix)."""
    allowed = _frozen_runs(out)
    foreign, folders = _runs_entries(out / "runs", allowed)
    if foreign:
        shown = ", ".join(str(f.relative_to(out)) for f in foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        arms = sorted({arm for arm, _ in allowed})
        raise StudyError(
            f"--restart refused: {out / 'runs'} holds {shown}, which {'is' if len(foreign) == 1 else 'are'} not a "
            f"run folder of the frozen plan (sha256 {old_sha[:12]}; its run folders are runs/<arm>/seed<N> for arms "
            f"{', '.join(arms) or '(none readable)'}), so not the study's, and --restart would delete "
            f"{'it' if len(foreign) == 1 else 'them'}: move {'it' if len(foreign) == 1 else 'them'} out of "
            f"{out / 'runs'} and rerun with --restart, or run {plan_path} with a new --out; nothing was deleted")
    _refuse_users_files(out, folders, plan_path)
    gone = [f"{name}/" if (out / name).is_dir() else name for name in STUDY_OUTPUTS
            if (out / name).exists() or (out / name).is_symlink()]
    print(f"[study] --restart: no run of the frozen plan (sha256 {old_sha}) has finished; deleting its frozen plan "
          f"and partial outputs in {out} ({', '.join(gone)}; {len(folders)} run folder(s) in runs/) and freezing "
          f"{plan_path} (sha256 {plan.sha256})", file=sys.stderr, flush=True)
    for folder in folders:
        if not folder.is_symlink():
            FolderLock(folder, ".lock", wait=True, what="run folder").release()
    runs = out / "runs"  # its arm folders (all the frozen plan's: checked above) and itself: empty once the run
    emptied = [*(sorted(runs.iterdir()) if runs.is_dir() else []), runs]  # folders are gone, so only rmdir'd
    for path in [*folders, *emptied, *(out / name for name in STUDY_OUTPUTS if name != "runs")]:
        try:
            if path.is_dir() and not path.is_symlink():
                if path in emptied:  # runs/ and its arm folders hold nothing else now, but a file manager's files
                    for leftover in [p for p in path.iterdir() if is_file_manager_file(p)]:
                        leftover.unlink()
                path.rmdir() if path in emptied else shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError as e:
            raise output_error("deleting (--restart)", path, e) from e


def _refuse_users_files(out: Path, folders: list[Path], plan_path) -> None:
    """Refuse ``--restart`` (StudyError, as :func:`_restart_study` says) when the outputs it deletes whole hold files
    gradprobe does not write there (:func:`~gradprobe.study.folder.not_written_by_study`)."""
    theirs = not_written_by_study(out, folders)
    if not theirs:
        return
    shown = ", ".join(str(f.relative_to(out)) for f in theirs[:6])
    more = f" and {len(theirs) - 6} more" if len(theirs) > 6 else ""
    it, they = ("it", "it is") if len(theirs) == 1 else ("them", "they are")
    raise StudyError(
        f"--restart refused: {out} holds {len(theirs)} file(s) that gradprobe does not write there: {shown}{more}; "
        f"{they} not the study's (a run folder holds only config.json, metrics.jsonl, eval_items.jsonl, "
        f"summary.json, checkpoints, weights/ and train.log), and --restart deletes run folders, probe/, figures/ "
        f"and reanalysis/ whole, so it would delete {it}: move {it} out of {out} and rerun with --restart, or run "
        f"{plan_path} with a new --out; nothing was deleted")


def _frozen_runs(out: Path) -> set[tuple[str, str]]:
    """The (arm, ``seed<N>``) run folder names of the plan frozen in ``out`` (as :func:`~gradprobe.layout.run_dir`
    names them): ``study.json``'s ``runs`` records and its ``plan.toml``'s runs, whichever can be read (an empty set
    when neither: then nothing in ``runs/`` is taken for the study's). Raises nothing."""
    names = set()
    try:
        records = json.loads((out / STUDY_JSON).read_text()).get("runs")
    except (OSError, ValueError, AttributeError):  # missing, not JSON, not an object
        records = None
    for r in records if isinstance(records, list) else []:
        if isinstance(r, dict) and isinstance(r.get("arm"), str) and type(r.get("seed")) is int:
            names.add((r["arm"], run_dir("", r["arm"], r["seed"]).name))
    try:
        with reach_silenced():  # the frozen plan being replaced: its budget's reach is of no concern here
            frozen = load_plan(out / PLAN_COPY, check_schedule=False)
        names |= {(arm, run_dir("", arm, seed).name) for arm, seed in frozen.runs()}
    except Exception:  # PlanError, a plug-in reward that cannot be loaded: the records above decide
        pass
    return names


def _runs_entries(runs: Path, allowed: set[tuple[str, str]]) -> tuple[list[Path], list[Path]]:
    """(what ``runs/`` holds that is not a run folder named in ``allowed``, the run folders it holds that are), each
    sorted; ([], []) when there is no ``runs/``. A ``runs`` that is a file, a symlinked arm folder, or a file beside
    the arm or seed folders is not the study's; a file manager's file there (:func:`~.folder.is_file_manager_file`)
    is no one's and is left out of both."""
    if not (runs.exists() or runs.is_symlink()):
        return [], []
    if not runs.is_dir():
        return [runs], []
    foreign, folders = [], []
    arms = {arm for arm, _ in allowed}
    for entry in sorted(runs.iterdir()):
        if is_file_manager_file(entry):
            continue
        if entry.name not in arms or entry.is_symlink() or not entry.is_dir():
            foreign.append(entry)
            continue
        for sub in sorted(entry.iterdir()):
            if not is_file_manager_file(sub):
                (folders if (entry.name, sub.name) in allowed and sub.is_dir() else foreign).append(sub)
    return foreign, folders


def _new_study_json(plan: Plan, plan_path) -> dict:
    """``study.json`` of a newly frozen plan: its sha256, path, creation time, versions, every run pending."""
    return {"plan_sha256": plan.sha256, "plan_path": str(Path(plan_path).resolve()), "created": now(),
            "versions": versions(),
            "runs": [{"arm": a, "seed": s, "dir": str(run_dir("", a, s)), "status": "pending"}
                     for a, s in plan.runs()]}


REWARD_PLUGINS = "reward_plugins"
"""``study.json``'s record of each plug-in reward's code: ``{spec: {"file", "sha256", "modules"}}`` (``modules``: its
helper modules' sha256s, :func:`gradprobe.rewards.plugin.plugin_identity`; absent in a study from before they were
recorded)."""


def check_reward_plugins(plan: Plan, out: Path, study: dict) -> dict:
    """Record (first invocation) or check (later ones) which code each plug-in reward of ``plan`` runs, in
    ``study.json``'s ``reward_plugins``, before any run starts: a study resumed after its reward file or a helper
    module it imports from its folder was edited (or from a directory where the name finds another file) would train
    its remaining seeds with other code than its finished ones, and average the two under one arm (a run's own record
    only guards its resume from a checkpoint, :func:`gradprobe.training.run_folder.check_reward_identity`). The same
    content at another path is the same code: accepted, the record kept. A record from before helper modules were
    recorded (no ``modules``) is accepted with one note on stderr naming the helper modules that could not be checked
    (none when the reward imports none).

    Parameters
    ----------
    plan : Plan
        The frozen plan; built-in rewards are not recorded.
    out : Path
        The study folder (its lock held).
    study : dict
        ``study.json`` as read; updated in place and rewritten when a reward is recorded.

    Returns
    -------
    dict
        ``study``.

    Raises
    ------
    StudyError
        While a run of a plug-in reward is still to train (finished or not started:
        :func:`~gradprobe.study.folder.finished_runs`): its file's sha256 differs from the recorded one (one line
        naming the reward, both files and sha256s, 12 hex digits, and the fix: restore the file, or run the plan as a
        new study under a new --out), or a helper module differs (edited, new or gone: one line naming
        the module file, both sha256s and the fix, :func:`gradprobe.training.run_folder.modules_mismatch`), or its
        record's ``modules`` is damaged, not an object of text -> sha256 (``study.json`` and the field named, with
        the fix); nothing is run or written.
    UnknownRewardError
        A plug-in reward that cannot be loaded (as the study's preflight says).
    """
    from ..rewards.plugin import is_plugin_name, plugin_identity  # torch: the study package stays torch-free

    recorded = study.get(REWARD_PLUGINS) if isinstance(study.get(REWARD_PLUGINS), dict) else {}
    done = {Path(p).resolve() for p in finished_runs(out)}
    pending = {plan.arms[a].reward for a, seed in plan.runs() if (out / run_dir("", a, seed)).resolve() not in done}
    new = {}
    for spec in sorted({arm.reward for arm in plan.arms.values() if is_plugin_name(arm.reward)}):
        now_id = plugin_identity(spec)
        then = recorded.get(spec)
        if isinstance(then, dict) and spec in pending:  # a study whose runs of it are all finished trains no more
            _check_recorded_plugin(out, spec, then, now_id)
        if not isinstance(then, dict):
            new[spec] = {"file": now_id.get("file"), "sha256": now_id.get("sha256"),
                         MODULES: now_id.get(MODULES) or {}}
    if new:
        study[REWARD_PLUGINS] = {**recorded, **new}
        write_json_atomic(out / STUDY_JSON, study)
    return study


def plugin_file_mismatch(spec: str, then: dict, now_id: dict, started: str, sj: Path) -> str | None:
    """``reward 'SPEC' now runs FILE (sha256 ...), not the code <started> (FILE, sha256 ..., <sj> reward_plugins)``
    when the plug-in reward ``spec``'s file now (``now_id``: :func:`gradprobe.rewards.plugin.plugin_identity`) has
    another sha256 than ``study.json``'s record ``then`` (``sj``: that file), else None (the same content at another
    path is the same code; a record without a sha256 is not compared). The one comparison a study's resume
    (:func:`check_reward_plugins`) and a replicate (:func:`gradprobe.study.replicate.check_replicate_code`) make."""
    if not then.get("sha256") or now_id.get("sha256") == then.get("sha256"):
        return None
    return (f"reward {spec!r} now runs {shown(str(now_id.get('file')))} (sha256 {str(now_id.get('sha256'))[:12]}), "
            f"not the code {started} ({shown(str(then.get('file')))}, sha256 {str(then['sha256'])[:12]}, "
            f"{shown(str(sj))} {REWARD_PLUGINS})")


def _check_recorded_plugin(out: Path, spec: str, then: dict, now_id: dict) -> None:
    """Refuse (StudyError, as :func:`check_reward_plugins` says) to train more of reward ``spec`` when its code
    ``now_id`` (:func:`gradprobe.rewards.plugin.plugin_identity`) differs from study.json's record ``then``."""
    sj = out / STUDY_JSON
    if (differs := plugin_file_mismatch(spec, then, now_id, "the study's runs started with", sj)) is not None:
        raise StudyError(
            f"{shown(str(out))}: {differs}: its remaining runs would train another reward than its finished ones; "
            "restore the reward file as it was (or run from the directory the study started in), or run the plan "
            "as a new study under a new --out")
    problem = modules_problem(then)
    if problem is not None:
        raise StudyError(f"{sj} field {REWARD_PLUGINS}[{spec!r}].{MODULES} {problem}: the file is damaged, so whether "
                         f"reward {spec!r}'s helper modules are the code the study's runs started with cannot be "
                         f"told; {study_json_fix(out)}")
    if not now_id.get("file"):  # a module without a file has no folder, so no helper modules
        return
    mods, folder = now_id.get(MODULES) or {}, Path(now_id["file"]).parent
    if MODULES not in then:
        if mods:
            print(f"note: {out} was started before gradprobe recorded the helper modules a plug-in reward imports "
                  f"from its folder, so whether those of reward {spec!r} ({', '.join(mods)} in {folder}) are the "
                  "code its runs started with could not be checked; continuing the study", file=sys.stderr,
                  flush=True)
        return
    differs = modules_mismatch(spec, folder, then[MODULES], mods, started="the study started")
    if differs is not None:
        raise StudyError(f"{out}: {differs[0]}, not the code the study's runs started with ({sj} {REWARD_PLUGINS}): "
                         f"its remaining runs would train another reward than its finished ones; {differs[1]}, or "
                         "run the plan as a new study under a new --out")


def _read_data_yet(plan: Plan, out: Path) -> bool:
    """Whether a run of the study has started (its ``config.json``) or its probe has written ``probe.json``: then
    they read the task's data as recorded (:func:`check_task_data`)."""
    return (any((out / run_dir("", a, s) / CONFIG_JSON).exists() for a, s in plan.runs())
            or (out / "probe" / PROBE_JSON).exists())


def check_task_data(plan: Plan, out: Path, study: dict) -> dict:
    """Record (first invocation) or check (later ones) which data the plan's task reads, in ``study.json``'s
    ``task_data`` (``{label: {"file": resolved path, "sha256": 64 hex digits}}``,
    :func:`gradprobe.tasks.task_data_identity`), before any run starts: a study resumed after its data file was edited
    would train and score its remaining runs on other data than its finished ones (the same initial policy scored
    0.875 for one seed and 0.25 for the next) and average the two in the analysis. The same content at another path is
    the same data: accepted with a note on stderr, the record kept. A task read from no local file (``chain_sum``, a
    reasoning-gym name, the hub) records nothing and is not checked.

    Parameters
    ----------
    plan : Plan
        The frozen plan (its ``[task] name``; a relative path is read from the working directory, as the runs read
        it).
    out : Path
        The study folder (its lock held).
    study : dict
        ``study.json`` as read; updated in place and rewritten when the data is recorded.

    Returns
    -------
    dict
        ``study``.

    Raises
    ------
    StudyError
        While a run of the study is still to train (not finished: :func:`~gradprobe.study.folder.finished_runs`) or
        a probe of the study still to run (:func:`~gradprobe.study.probe_plan.pending_probes`), and a run or the
        probe has already read the data (before that, changed data is recorded anew, with a note):
        a data file's content differs from the record (edited, missing, or a folder's file not read when the study
        started: :func:`gradprobe.training.run_folder.task_data_mismatch`; one line naming the file, both sha256s,
        12 hex digits, and the fix: restore the file, or run the plan as a new study under a new --out), or the
        record is damaged (``study.json`` and the field named, with the fix); nothing is run or written.

    A study from before the data was recorded (no ``task_data``) is accepted with one note on stderr saying that the
    data could not be checked; it is recorded then only when none of its runs has started (their data is unknown).
    """
    spec = plan.task.name
    current = task_data_identity(spec)
    if not current and not study.get(TASK_DATA):  # recorded but none now: hf:FOLDER from another directory, refused
        return study
    sj = out / STUDY_JSON
    if TASK_DATA not in study:
        if any((out / run_dir("", a, s) / CONFIG_JSON).exists() for a, s in plan.runs()):
            print(f"note: {out} was started before gradprobe recorded a task's data files and their sha256, so whether "
                  f"task {spec!r} ({', '.join(v['file'] for v in current.values())}) reads the data its runs started "
                  "with could not be checked; continuing the study", file=sys.stderr, flush=True)
        elif all(v["sha256"] for v in current.values()):  # a missing file: the runs' load_task refuses it
            study[TASK_DATA] = current
            write_json_atomic(sj, study)
        return study
    recorded = study[TASK_DATA]
    problem = task_data_problem(recorded)
    if problem is not None:
        raise StudyError(f"{sj} field {TASK_DATA} {problem}: the file is damaged, so whether task {spec!r} reads the "
                         f"data the study's runs started with cannot be told; {study_json_fix(out)}")
    from .probe_plan import pending_probes

    done = {Path(p).resolve() for p in finished_runs(out)}
    if (all((out / run_dir("", a, s)).resolve() in done for a, s in plan.runs())
            and not pending_probes(plan, out / "probe")):
        return study  # every run and probe finished: nothing more reads the data
    if (not _read_data_yet(plan, out) and current and current != recorded
            and all(v["sha256"] for v in current.values())):
        print(f"note: the data of task {spec!r} changed since {out} was started, before any run or probe read it; "
              "recording the data it reads now", file=sys.stderr, flush=True)
        study[TASK_DATA] = current
        write_json_atomic(sj, study)
        return study
    differs = task_data_mismatch(spec, recorded, current, started="the study started")
    if differs is not None:
        what, fix, other_data = differs
        mixes = (": its remaining runs would train and evaluate on other data than its finished ones, and the "
                 "analysis would average the two" if other_data else "")
        raise StudyError(f"{out}: {what} ({sj} {TASK_DATA}){mixes}; {fix}, or run the plan as a new study under a "
                         "new --out")
    for note in task_data_moved(spec, recorded, current, started="the study started"):
        print(f"note: {note}; continuing the study in {out}", file=sys.stderr, flush=True)
    return study


def check_study_model(plan: Plan, out: Path, current: dict | None = None, *,
                      study: dict | None = None) -> dict | None:
    """Refuse to continue a study whose model now loads another model than one of its runs started from, while a run
    is still to train: its remaining runs would train another model than its finished ones, and the analysis would
    average the two (a tester: ``config.json`` of the model folder edited between two invocations; seed 1 trained
    on the edited model, the study reported 2 runs complete). Every run records what it started from
    (``config.json``'s ``model_weights``, :func:`gradprobe.training.run_folder.model_weights_identity`); a run's
    own resume checks its record (:func:`gradprobe.training.run_folder.check_model_weights`), this checks the runs
    not started yet against the others', with the same rules
    (:func:`~gradprobe.training.run_folder.model_record_problem`,
    :func:`~gradprobe.training.run_folder.model_weights_comparable`): a run without a record (made before gradprobe
    recorded one), with a damaged record or config (named when the run resumes), a generated model or a hub id then
    and now: not checked; a local folder or GGUF file then whose name finds none now (a relative ``[model] name``
    from another working directory, which would be read as a hub id): refused.

    With ``study`` (``study.json`` as read), the identity is also recorded there as ``model_weights`` (the shape of a
    run's record) while no run has started (:func:`_record_study_model`), so a copy of the study without its ``runs/``
    still says which model it ran (:func:`gradprobe.study.replicate.check_replicate_model` compares it); the weights
    are not hashed again for it.

    Parameters
    ----------
    plan : Plan
        The study's frozen plan.
    out : Path
        The study folder.
    current : dict, optional
        :func:`~gradprobe.training.run_folder.model_weights_identity` of the plan's ``[model] name``, when the caller
        computed it (hashing the weights once per invocation); None: computed here, when a run remains.
    study : dict, optional
        ``study.json`` as read (the orchestrator's): ``model_weights`` is set in it and the file rewritten when the
        identity is recorded; None: nothing recorded.

    Returns
    -------
    dict or None
        The model's identity now, for the invocation's other checks (:func:`gradprobe.study.reuse.reuse_runs`); None
        when every run finished (not computed) or the model has none (a generated model, a name that resolves to
        nothing now).

    Raises
    ------
    StudyError
        One line: the study folder, the run whose record differs, what differs (weights: both builds or paths and
        digests; files beside the weights: each file and both sha256s; a local model the name finds no more), the fix
        to load that model again, or run the plan as a new study under a new --out; nothing is run or written.
    """
    from ..training.run_folder import (MODEL_WEIGHTS, model_record_problem, model_weights_comparable,
                                       model_weights_identity, model_weights_mismatch)  # torch: only a study reads it

    done = {Path(p).resolve() for p in finished_runs(out)}
    if all((out / run_dir("", a, s)).resolve() in done for a, s in plan.runs()):
        return None
    spec = str(plan.model.name)
    current = current if current is not None else model_weights_identity(spec)
    for arm, seed in plan.runs():
        try:
            then = json.loads((out / run_dir("", arm, seed) / CONFIG_JSON).read_text()).get(MODEL_WEIGHTS)
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue  # no run yet, or a damaged config.json: the run's own resume names it
        if then is None or model_record_problem(spec, then, current) is not None:
            continue
        differs = model_weights_mismatch(spec, then, current) if model_weights_comparable(then, current) else None
        if differs is not None:
            raise StudyError(f"{out}: {differs[1]} (the record of its run {arm} seed {seed}, {CONFIG_JSON} "
                             f"{MODEL_WEIGHTS}): the study's remaining runs would train another model than its "
                             f"finished ones, and the analysis would average the two; {differs[2]}, or run the plan "
                             "as a new study under a new --out; nothing was run or written")
    if study is not None:
        _record_study_model(plan, out, study, current)
    return current


def _record_study_model(plan: Plan, out: Path, study: dict, current: dict | None) -> None:
    """Record ``current`` (the identity of the plan's model now, :func:`check_study_model`'s) as ``study.json``'s
    ``model_weights`` (``study`` updated in place, the file rewritten) while no run of the study has started (none
    has its ``config.json``): the model its runs start from, which each run records again in its own ``config.json``.
    A record that differs then (the model changed before any run started from it, or a damaged record) is replaced,
    with a note on stderr where it named other weights or files. Once a run has started, the runs' records decide
    (:func:`check_study_model`) and the study's is kept as it is: a study from before gradprobe recorded it, resumed,
    gains none (what its started runs trained is theirs to say). A generated model (``current`` None) records nothing.

    Raises
    ------
    OutputDirError
        ``study.json`` cannot be written (:func:`~gradprobe.outputs.write_json_atomic`).
    """
    from ..training.run_folder import (MODEL_WEIGHTS, model_files_differences, model_record_problem,
                                       model_weights_comparable, model_weights_mismatch)

    then, spec = study.get(MODEL_WEIGHTS), str(plan.model.name)
    if (current is None or then == current
            or any((out / run_dir("", a, s) / CONFIG_JSON).exists() for a, s in plan.runs())):
        return
    sound = then is not None and model_record_problem(spec, then, current) is None
    differs = model_weights_mismatch(spec, then, current) if sound and model_weights_comparable(then, current) else None
    if differs is not None:
        what = (f"the same weights from {current['path']} with other files beside them "
                f"({model_files_differences(then, current)})" if differs[0] == "files"
                else f"{_weights_shown(current)}, not {_weights_shown(then)}")
        print(f"note: model {spec!r} now loads {what}, unlike the record made when {out} was started "
              f"({out / STUDY_JSON} {MODEL_WEIGHTS}), but no run has started from it yet; recording the model it "
              "loads now", file=sys.stderr, flush=True)
    study[MODEL_WEIGHTS] = current
    write_json_atomic(out / STUDY_JSON, study)


def _weights_shown(record: dict) -> str:
    """A weights identity in a note: its path and its digest's first 12 hex digits (a hub id: its name alone)."""
    digest = record.get("digest")
    return f"{record['path']} (digest {digest[:12]})" if isinstance(digest, str) else str(record["path"])
