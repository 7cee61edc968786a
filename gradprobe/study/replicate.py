"""A replicate of a finished study: the same frozen plan on fresh seeds and a fresh held-out set
(``gradprobe study --replicate DIR --out NEW``), and the comparison of the two studies' gains."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ..layout import ANALYSIS_JSON, CONFIG_JSON, PLAN_COPY, STUDY_JSON, run_dir
from ..outputs import prepare_output_dir, write_json_atomic
from ..tables import shown
from ..training.plan import Plan, load_plan
from .folder import StudyError, check_frozen_plan, sha256, study_plan_sha
from .orchestrator import run_study
from .preflight import check_plan_inputs
from .result import StudyResult

__all__ = ["REPLICATE_SOURCE", "check_replicate_code", "check_replicate_model", "same_heldout", "replicate_plan_text",
           "replicate_record", "read_replicate_record", "replicate_source", "study_plan_sha", "replicate_study",
           "compare_replicate"]

REPLICATE_SOURCE = "replicate_of.json"

#: the end of the header :func:`replicate_plan_text` writes (its second line)
_HEADER_END = "written by gradprobe study --replicate."


def replicate_plan_text(text: str, *, seeds, heldout_seed: int, source: str, source_sha256: str,
                        fresh_heldout: bool = True) -> str:
    """The TOML text of a replicate: ``text`` with its ``seeds`` and ``[heldout] seed`` replaced.

    Edited with tomlkit (a style-preserving TOML parser), so everything else of the plan is kept
    byte for byte: comments (a comment on the ``seeds`` or ``[heldout] seed`` line stays on its
    line), key order, blank lines. ``seeds`` may span several lines (it is rewritten on one,
    keeping the comment after its closing bracket; comments between the old seeds go with them);
    a plan without ``seeds`` gains it at the top level, one without ``[heldout] seed`` gains it. The plan of a
    replicate replicated again loses its own two header lines (:data:`_HEADER_END` ends them): they name other seeds.

    Parameters
    ----------
    text : str
        The original study's frozen ``plan.toml``.
    seeds : sequence of int
        The replicate's seeds.
    heldout_seed : int
        The replicate's data seed (held-out set and training pool).
    source, source_sha256 : str
        The original study folder and its plan's sha256 (written as a header comment).
    fresh_heldout : bool
        Whether the new data seed draws another held-out set (the header says so); False where the task's held-out
        items do not depend on it (a data file's whole test split): the header says the replicate evaluates on the
        original's held-out items (:func:`same_heldout`).

    Raises
    ------
    StudyError
        ``text`` is not valid TOML, or its ``heldout`` is not a table.
    """
    head_lines = text.splitlines(keepends=True)[:2]
    if len(head_lines) == 2 and head_lines[0].startswith("# Replicate of ") and head_lines[1].rstrip().endswith(
            _HEADER_END):
        text = text[len("".join(head_lines)):]
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as e:
        raise StudyError(f"the frozen plan is not valid TOML ({e}); the replicate cannot be written") from None
    new_seeds = tomlkit.array()
    new_seeds.extend(int(s) for s in seeds)
    doc["seeds"] = new_seeds  # tomlkit keeps the old value's end-of-line comment (and adds the key if missing)
    if "heldout" not in doc:
        heldout = tomlkit.table()
        heldout.add("seed", int(heldout_seed))
        doc.add(tomlkit.nl())
        doc.add("heldout", heldout)
    else:
        heldout = doc["heldout"]
        if not isinstance(heldout, dict):
            raise StudyError("the frozen plan's heldout is not a table; the replicate cannot be written")
        heldout["seed"] = int(heldout_seed)
    held = (f"a fresh held-out set (data seed {int(heldout_seed)})" if fresh_heldout else
            "the original's held-out set (the task's held-out items do not depend on the data seed, "
            f"{int(heldout_seed)} now)")
    head = (f"# Replicate of the study in {source} (plan sha256 {source_sha256}): the same plan on fresh seeds\n"
            f"# {list(seeds)} and {held}; {_HEADER_END}\n")
    return head + tomlkit.dumps(doc)


def replicate_record(source: str | Path, out: str | Path, *, source_sha256: str, seeds,
                     heldout_seed: int) -> dict:
    """The content of ``out/replicate_of.json`` for a replicate of the study ``source`` in ``out``.

    ``source`` is the source folder as a POSIX path relative to ``out`` (``"../study_x"`` for a folder
    beside it), so the two folders stay linked when they are moved or copied together; an absolute POSIX
    path only where no relative path leads there (another drive). ``source_name`` is the source folder's
    name; ``source_plan_sha256`` (its ``plan.toml``'s sha256), ``seeds`` and ``heldout_seed`` (the
    replicate's) are kept as given. Read back with :func:`read_replicate_record` and :func:`replicate_source`.
    """
    src, dest = Path(source).resolve(), Path(out).resolve()
    try:
        rel = Path(os.path.relpath(src, dest))
    except ValueError:  # two drives (Windows): no relative path
        rel = None
    path = rel.as_posix() if rel is not None and (dest / rel).resolve() == src else src.as_posix()
    return {"source": path, "source_name": src.name, "source_plan_sha256": source_sha256,
            "seeds": [int(s) for s in seeds], "heldout_seed": int(heldout_seed)}


def _is_folder_name(name) -> bool:
    """Whether ``name`` is one folder's name: a string of a single path part, not ``""``, ``.`` or ``..``."""
    return isinstance(name, str) and Path(name).name == name and name not in {"", ".", ".."}


def read_replicate_record(folder: str | Path) -> dict | None:
    """``folder/replicate_of.json`` read and checked: the one reader of the file (:func:`replicate_source`,
    ``benchmarks/unseen_study.py``'s ``cell_of``); None where ``folder`` has no such file (it is no replicate).

    Returns the file's JSON object with ``source`` (a non-empty path, relative to ``folder`` as
    :func:`replicate_record` writes it, or absolute in files written before) and ``source_name``: the name of
    the study folder replicated, the last part of ``source`` (resolved against ``folder``). Files written before
    ``source_name`` was recorded get it from ``source``, so old absolute and new relative files name the same
    study; where the file records it, it must be one folder's name and agree with ``source``.

    Raises
    ------
    StudyError
        In one line naming ``replicate_of.json`` and the fix: the file cannot be read, is not a JSON object, has
        no ``source`` path ending in a folder's name, its ``source_name`` is no folder's name (a path, ``..``) or
        another name than the last part of ``source``.
    """
    path = Path(folder) / REPLICATE_SOURCE
    if not path.is_file():
        return None
    fix = "restore it from a copy of the replicate (`gradprobe study --replicate SRC --out DIR` writes it)"
    try:
        record = json.loads(path.read_text())
        source = record.get("source")
    except OSError as e:
        raise StudyError(f"{path} cannot be read ({type(e).__name__}: {e.strerror}); {fix}") from None
    except json.JSONDecodeError as e:  # where the text stops being JSON
        raise StudyError(f"{path} is not a JSON object (JSONDecodeError): not valid JSON at line {e.lineno}, column "
                         f"{e.colno} ({e.msg}); {fix}") from None
    except UnicodeDecodeError as e:
        raise StudyError(f"{path} is not a JSON object (UnicodeDecodeError): not UTF-8 text (byte "
                         f"{e.object[e.start]:#04x} at offset {e.start}); {fix}") from None
    except (ValueError, AttributeError) as e:  # JSON but no object (a list, a number)
        raise StudyError(f"{path} is not a JSON object ({type(e).__name__}); {fix}") from None
    last = Path(os.path.abspath(Path(folder) / source)).name if isinstance(source, str) and source else ""
    if not _is_folder_name(last):
        raise StudyError(f"{path} has no 'source' path of the replicated study (got {source!r}); {fix}")
    name = record.get("source_name", last)  # files written before source_name: the last part of source
    if not _is_folder_name(name):
        raise StudyError(f"{path} has source_name {name!r}, not a folder's name (one path part, no '..'); "
                         f"set it to {last!r}, the last part of source {source!r}, or {fix}")
    if name != last:
        raise StudyError(f"{path} has source_name {name!r}, but its source {source!r} ends in {last!r}: the two "
                         f"must name one study; set source_name to {last!r} if source is right, or {fix}")
    sha = record.get("source_plan_sha256")
    if sha is not None and not (isinstance(sha, str) and sha):
        raise StudyError(f"{path} has source_plan_sha256 {_shown(sha)}, not the hex sha256 of the source study's "
                         f"{PLAN_COPY} (a string); {fix}")
    return {**record, "source": source, "source_name": name}


def _is_study(folder: Path) -> bool:
    """Whether ``folder`` holds a study: its frozen plan or its ``study.json`` (written together by
    :func:`gradprobe.study.freeze.freeze_plan`, so every study folder has both)."""
    return (folder / PLAN_COPY).is_file() or (folder / STUDY_JSON).is_file()


def _shown(value) -> str:
    """A value of ``replicate_of.json`` or a path for a one-line message: ``repr`` for text (control characters and
    NUL escaped); a path as it is where every character is printable, else its ``repr``; a long value cut."""
    if isinstance(value, Path):
        value = str(value)
        text = value if value.isprintable() else repr(value)
    else:
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def replicate_source(folder: str | Path) -> Path:
    """The folder of the study that the replicate in ``folder`` replicates, read from ``folder/replicate_of.json``
    (:func:`read_replicate_record`).

    A relative ``source`` (written by :func:`replicate_record`) is resolved against ``folder``; an absolute one
    (files written before) is taken as it is, and where no study is there, the study of the same name beside
    ``folder`` is taken (shipped studies are copied side by side, as ``data/`` holds them). A folder is taken only
    where it holds a study (``plan.toml`` or ``study.json``) and, where the record has ``source_plan_sha256``, only
    where that study's plan sha256 (:func:`study_plan_sha`: its ``study.json``'s, else its ``plan.toml``'s) is the one
    recorded: a copy of another study under the source's name is not the source, and a study whose plan sha256
    cannot be read (neither ``study.json``'s ``plan_sha256`` nor ``plan.toml``) cannot be checked to be it.

    Raises
    ------
    StudyError
        In one line: ``folder`` does not exist or is a file; ``replicate_of.json`` is missing, or damaged
        (:func:`read_replicate_record`); ``source`` leads to a file; no study folder is found at the path(s) tried
        (the fix: copy the source study there); or the study found has another plan sha256 than the record's
        (both named, first 12 hex digits, with the file each is read from), or none that can be read while the
        record has ``source_plan_sha256`` (the folder named, with what it lacks). Where several paths are tried, the
        first study found that fails is named.
    """
    folder = Path(folder)
    path = folder / REPLICATE_SOURCE
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise StudyError(f"replicate folder {_shown(folder)} {what}; pass the folder of the replicate study (the "
                         "--out of `gradprobe study --replicate SRC --out DIR`, holding replicate_of.json)")
    record = read_replicate_record(folder)
    if record is None:
        raise StudyError(f"{_shown(path)} not found: {_shown(folder)} is no replicate, or {REPLICATE_SOURCE} was "
                         "lost; restore it from a copy of the replicate (`gradprobe study --replicate SRC --out DIR` "
                         "writes it)")
    source, parent = record["source"], Path(os.path.normpath(folder / os.pardir))
    tried = [Path(os.path.normpath(folder / source))]  # an absolute source stays as it is
    if Path(source).is_absolute() and parent / record["source_name"] != tried[0]:
        tried.append(parent / record["source_name"])
    want, other = record.get("source_plan_sha256"), None
    for candidate in tried:
        if not _is_study(candidate):
            continue
        sha, held = study_plan_sha(candidate)
        if want is None or sha == want:
            return candidate
        other = other or (candidate, sha, held)  # another plan, or none readable: not checked to be the source
    if other is not None and other[1] is None:
        raise _unchecked_source(path, want, other[0])
    if other is not None:
        candidate, sha, held = other
        raise StudyError(f"{_shown(path)} records source_plan_sha256 {want[:12]}, but the study at "
                         f"{_shown(candidate)} has plan sha256 {sha[:12]} ({_shown(held)}): it is another study (or "
                         f"another plan) than the one replicated; put the replicated study (plan sha256 {want[:12]}) "
                         f"there, or restore {REPLICATE_SOURCE} from a copy of the replicate")
    raise _no_source(path, folder, source, tried, parent)


def _unchecked_source(path: Path, want: str, candidate: Path) -> StudyError:
    """The StudyError of :func:`replicate_source` where the study at ``candidate`` has no plan sha256 to check
    against the ``source_plan_sha256`` (``want``) its ``replicate_of.json`` (``path``) records: its ``study.json``
    records none (missing, damaged, or without ``plan_sha256``) and its ``plan.toml`` cannot be read."""
    plan = candidate / PLAN_COPY
    why = "has no " + PLAN_COPY if not plan.exists() else f"has a {PLAN_COPY} that cannot be read"
    record = (f"no {STUDY_JSON}" if not (candidate / STUDY_JSON).exists()
              else f"a {STUDY_JSON} that records no plan_sha256")
    return StudyError(f"{_shown(path)} records source_plan_sha256 {want[:12]}, but the study at {_shown(candidate)} "
                      f"{why} and {record}, so its plan sha256 cannot be read to check that it is the study "
                      f"replicated; put the replicated study's {PLAN_COPY} (plan sha256 {want[:12]}) there, or restore "
                      f"{REPLICATE_SOURCE} from a copy of the replicate")


def _no_source(path: Path, folder: Path, source: str, tried: list, parent: Path) -> StudyError:
    """The StudyError of :func:`replicate_source` where no study is at the ``tried`` paths (one is a file, or
    none exists)."""
    files = [p for p in tried if p.is_file()]
    if files:
        hint = (f", e.g. {os.path.relpath(files[0].parent, folder)!r} (the folder holding "
                f"{_shown(Path(files[0].name))})" if _is_study(files[0].parent) else "")
        return StudyError(f"{_shown(path)} names source {_shown(source)}, but {_shown(files[0])} is a file, not a "
                          f"study folder; set source to the source study's folder, relative to {_shown(folder)}"
                          f"{hint}")
    beside = " (beside the replicate)" if tried[-1].parent == parent else ""
    return StudyError(f"{_shown(path)} names source {_shown(source)}, but no study folder (with {PLAN_COPY} or "
                      f"{STUDY_JSON}) is at {' nor '.join(map(_shown, tried))}; copy the source study to "
                      f"{_shown(tried[-1])}{beside}")


def replicate_study(source: str | Path, out: str | Path, *, plan: Plan, executor: str = "local",
                    workers: int | None = None, ray_address: str | None = None, probe: bool = True,
                    analyze: bool = True, say=None, report_to: str = "none") -> StudyResult:
    """Run a replicate of the finished study ``source`` in ``out`` (``gradprobe study --replicate``).

    The replicate's plan is the source's frozen ``plan.toml`` with the seeds and held-out seed of
    ``plan`` (:func:`gradprobe.training.plan.replicate_plan`); it is frozen in ``out`` like any plan
    (a killed replicate, run again with the same seeds, resumes its frozen plan: :func:`_resumed_replicate`),
    ``out/replicate_of.json`` records the source (:func:`replicate_record`:
    its path relative to ``out`` and its name), and at the end
    :func:`compare_replicate` prints each arm's gain vs grpo at matched tokens in both studies.

    Raises
    ------
    StudyError
        ``source/plan.toml`` was edited after the study froze it
        (:func:`~gradprobe.study.folder.check_frozen_plan`), the generated plan does not read back as ``plan`` (seeds
        or held-out seed differ), or a plug-in reward's
        code or the task's data is no longer what the source study ran (:func:`check_replicate_code`), nor its model
        (:func:`check_replicate_model`; the identity it computes is the replicate's study's, not hashed again), or
        ``out`` holds another study or replicate (:func:`_resumed_replicate`); nothing is written into ``out``.
    gradprobe.study.preflight.PreflightError
        The plan's model, tokenizer or task cannot be loaded (nothing is written into ``out``).
    """
    source, out = Path(source), Path(out)
    try:
        check_frozen_plan(source)  # an edited plan.toml is not the plan the source's runs ran
    except StudyError as e:
        raise StudyError(f"--replicate: {e}; a replicate of the edited plan would not replicate the study") from None
    text = (source / PLAN_COPY).read_text()
    src_sha = sha256((source / PLAN_COPY).read_bytes())
    original = load_plan(source / PLAN_COPY, check_schedule=False, check_reach=False)
    said = say or (lambda m: print(m, file=sys.stderr))
    resumed = _resumed_replicate(source, out, src_sha, plan, original)
    with tempfile.TemporaryDirectory() as tmp:
        path = resumed or Path(tmp) / f"{plan.name}.toml"
        if resumed is None:
            path.write_text(replicate_plan_text(text, seeds=plan.seeds, heldout_seed=plan.heldout.seed,
                                                source=str(source), source_sha256=src_sha))
        check = load_plan(path, check_reach=resumed is None)
        if check.seeds != plan.seeds or check.heldout.seed != plan.heldout.seed:
            raise StudyError(f"the replicate plan written from {source / PLAN_COPY} reads back with seeds "
                             f"{list(check.seeds)} and held-out seed {check.heldout.seed}, expected "
                             f"{list(plan.seeds)} and {plan.heldout.seed}")
        check_plan_inputs(check, executor=executor)  # before anything is written into out
        check_replicate_code(source, check)
        weights = check_replicate_model(source, original, say=said)  # hashed once: run_study reads it
        if resumed is None and same_heldout(original, check):
            path.write_text(replicate_plan_text(text, seeds=plan.seeds, heldout_seed=plan.heldout.seed,
                                                source=str(source), source_sha256=src_sha, fresh_heldout=False))
            said(f"note: the held-out set of task {check.task.name!r} does not depend on its data seed (the same "
                 f"{check.heldout.prompts} items with [heldout] seed {check.heldout.seed} as with the original's), so "
                 f"the replicate evaluates on the original's held-out items: only its training seeds are fresh")
        if resumed is None:
            prepare_output_dir(out)
            record = replicate_record(source, out, source_sha256=src_sha, seeds=plan.seeds,
                                      heldout_seed=plan.heldout.seed)
            write_json_atomic(out / REPLICATE_SOURCE, record)
        result = run_study(path, out, executor=executor, workers=workers, ray_address=ray_address, probe=probe,
                           analyze=analyze, say=say, check=False, report_to=report_to,
                           model_weights=weights if check.model.name == original.model.name else None)
    if analyze and (out / ANALYSIS_JSON).exists() and (source / ANALYSIS_JSON).exists():
        said(compare_replicate(source, out))
    return result


def _resumed_replicate(source: Path, out: Path, src_sha: str, plan: Plan, original: Plan) -> Path | None:
    """``out/plan.toml`` where ``out`` holds this replicate already (a killed or finished one run again): its
    ``replicate_of.json`` records the source's plan sha256 and ``plan``'s seeds and held-out seed. The frozen plan is
    resumed as it is, so the source given another way (an absolute path, from another directory), which changes the
    header of a plan written anew, is the same replicate. None where ``out`` holds no study (a new replicate).

    Raises
    ------
    StudyError
        ``out`` holds another study (no ``replicate_of.json``), a replicate of another study or on other seeds (the
        fix: the ``--seed-offset`` it was started with, or a new ``--out``), or a damaged ``replicate_of.json``
        (:func:`read_replicate_record`); nothing is written.
    """
    if not _is_study(out):
        return None
    record = read_replicate_record(out)
    if record is None:
        raise StudyError(f"--out {_shown(out)} holds a study that is no replicate (no {REPLICATE_SOURCE}); give a new "
                         "--out for the replicate")
    seeds, held = record.get("seeds"), record.get("heldout_seed")
    if (record.get("source_plan_sha256") in (None, src_sha) and seeds == list(plan.seeds)
            and held == plan.heldout.seed and (out / PLAN_COPY).is_file()):
        return out / PLAN_COPY
    if record.get("source_plan_sha256") not in (None, src_sha):
        raise StudyError(f"--out {_shown(out)} holds a replicate of another study ({record['source_name']}, plan "
                         f"sha256 {str(record['source_plan_sha256'])[:12]}; {REPLICATE_SOURCE}), not of "
                         f"{_shown(source)} (plan sha256 {src_sha[:12]}); give a new --out")
    offset = (f"--seed-offset {seeds[0] - original.seeds[0]}" if isinstance(seeds, list) and seeds
              and type(seeds[0]) is int else "the --seed-offset it was started with")
    raise StudyError(f"--out {_shown(out)} holds the replicate of {_shown(source)} on seeds {seeds} (held-out seed "
                     f"{held}; {REPLICATE_SOURCE}), not this one on seeds {list(plan.seeds)} (held-out seed "
                     f"{plan.heldout.seed}); resume it with {offset}, or give a new --out for another replicate; "
                     "nothing was written")


def same_heldout(original: Plan, replicate: Plan) -> bool:
    """Whether ``replicate``'s held-out set (its ``[heldout] seed``) holds the same items as ``original``'s: a task
    whose held-out items do not depend on the data seed (a data file's whole test split) gives a replicate no fresh
    held-out set, and the replicate must not claim one. Items compared by question and answer, as a set (the seed
    may only reorder them).

    Raises
    ------
    Exception
        Whatever loading the task or drawing its held-out set raises (the study's preflight,
        :func:`~gradprobe.study.preflight.check_plan_inputs`, has drawn it already).
    """
    from ..training.loading import load_run_task  # torch: imported only when a replicate runs

    task = load_run_task(replicate.task)

    def items(seed: int) -> set:
        return {(p.question, str(p.answer)) for p in task.problems("heldout", replicate.heldout.prompts, seed=seed)}

    return items(original.heldout.seed) == items(replicate.heldout.seed)


def check_replicate_code(source: str | Path, plan: Plan) -> None:
    """Refuse a replicate of the study ``source`` that would run other code or data than ``source`` ran: a replicate
    changes only the seeds and the held-out seed, so a plug-in reward file (or a helper module it imports) or a task
    data file edited since is another experiment, and comparing it with ``source`` as a replication would mislead.

    Compared with ``source``'s ``study.json`` records (``reward_plugins``, ``task_data``, as
    :func:`gradprobe.study.freeze.check_reward_plugins` and :func:`gradprobe.study.freeze.check_task_data` write them
    when the study starts): the same content at another path is the same code or data. A study without a record
    (built-in rewards, a generated task, a study from before they were recorded) or without a readable
    ``study.json`` is not checked here.

    Raises
    ------
    StudyError
        In one line naming the file, both sha256s (12 hex digits) and the fix: restore the file as ``source`` ran it,
        or run the edited plan as a new study (``gradprobe study PLAN --out NEW``), not a replicate; or the record
        is damaged (``study.json`` and the field named).
    """
    from ..rewards.plugin import is_plugin_name, plugin_identity  # torch: imported only when a replicate runs
    from ..tasks import task_data_identity
    from ..training.run_folder import (MODULES, TASK_DATA, modules_mismatch, modules_problem, task_data_mismatch,
                                       task_data_problem)
    from .freeze import REWARD_PLUGINS, plugin_file_mismatch

    sj = Path(source) / STUDY_JSON
    try:
        study = json.loads(sj.read_text())
    except (OSError, ValueError):
        return
    study = study if isinstance(study, dict) else {}
    new_study = (f"restore it as the study {shown(str(source))} ran it, or run the edited plan as a new study "
                 "(`gradprobe study PLAN --out NEW`): a replicate changes only the seeds and the held-out set")
    plugins = study.get(REWARD_PLUGINS) if isinstance(study.get(REWARD_PLUGINS), dict) else {}
    for spec in sorted({arm.reward for arm in plan.arms.values() if is_plugin_name(arm.reward)}):
        then, now = plugins.get(spec), plugin_identity(spec) or {}
        if not isinstance(then, dict):
            continue
        if (differs := plugin_file_mismatch(spec, then, now, f"the study {shown(str(source))} ran", sj)) is not None:
            raise StudyError(f"--replicate: {differs}; {new_study}")
        if (problem := modules_problem(then)) is not None:
            raise StudyError(f"--replicate: {sj} field {REWARD_PLUGINS}[{spec!r}].{MODULES} {problem}: the file is "
                             f"damaged, so whether reward {spec!r} runs the code the study ran cannot be told; "
                             "restore study.json from a copy of the study")
        if MODULES in then and now.get("file"):
            differs = modules_mismatch(spec, Path(now["file"]).parent, then[MODULES], now.get(MODULES) or {},
                                       started=f"the study {shown(str(source))} ran")
            if differs is not None:
                raise StudyError(f"--replicate: {differs[0]}; {differs[1]}, or run the edited plan as a new study "
                                 "(`gradprobe study PLAN --out NEW`): a replicate changes only the seeds and the "
                                 "held-out set")
    recorded = study.get(TASK_DATA)
    if recorded is None:
        return
    if (problem := task_data_problem(recorded)) is not None:
        raise StudyError(f"--replicate: {sj} field {TASK_DATA} {problem}: the file is damaged, so whether task "
                         f"{plan.task.name!r} reads the data the study ran on cannot be told; restore study.json "
                         "from a copy of the study")
    differs = task_data_mismatch(plan.task.name, recorded, task_data_identity(plan.task.name),
                                 started=f"the study {shown(str(source))} ran")
    if differs is not None:
        raise StudyError(f"--replicate: {differs[0]} ({shown(str(sj))} {TASK_DATA}); {differs[1]}, or run the "
                         "plan on the new data as a new study (`gradprobe study PLAN --out NEW`): a replicate "
                         "changes only the seeds and the held-out set")


def check_replicate_model(source: str | Path, original: Plan, *, say=None) -> dict | None:
    """Refuse a replicate of the study ``source`` whose ``[model] name`` now loads another model than the source's
    runs started from: a replicate changes only the seeds and the held-out set, so a local model folder or ``.gguf``
    file whose weights (or ``config.json``, tokenizer files) changed since, or a tier rebuilt in the cache, would train
    another model, and comparing it with ``source`` as a replication would mislead.

    Compared with what ``source`` recorded (:func:`_model_records`): its ``study.json``'s ``model_weights`` (written
    when the study started, :func:`gradprobe.study.freeze.check_study_model`) and each run's ``config.json``'s
    (written when the run started), both :func:`gradprobe.training.run_folder.model_weights_identity`: the sha256 of
    the weight files, or a sampled sha256 past :data:`~gradprobe.training.run_folder.HASH_LIMIT_BYTES`, and the
    sha256 of the files beside them; by the rules of a run's resume
    (:func:`~gradprobe.training.run_folder.model_record_problem`,
    :func:`~gradprobe.training.run_folder.model_weights_comparable`,
    :func:`~gradprobe.training.run_folder.model_weights_mismatch`): the records are read, not the source's model
    hashed again; the model now is hashed once. A hub id or a generated model (``tiny-qwen2``) then and now is not
    compared; the same weights at another path are the same model. Where nothing of ``source`` recorded the model (a
    study from before gradprobe recorded it, copied without its ``runs/`` or not) while the model now is read from
    local files, one note says (``say``, else stderr) that the model could not be compared; the replicate goes on.

    Parameters
    ----------
    source : path
        The study replicated.
    original : Plan
        Its frozen plan (its ``[model] name``, the replicate's too, and the arms whose runs are read).
    say : callable(str), optional
        Where the note goes (default: stderr).

    Returns
    -------
    dict or None
        The identity of the model now (``model_weights_identity`` of ``[model] name``), for the replicate's study
        (:func:`~gradprobe.study.orchestrator.run_study`'s ``model_weights``: not hashed again); None for a generated
        model or a name that resolves to nothing.

    Raises
    ------
    StudyError
        In one line: the model spec, what it loads now and what the source recorded (paths and digests, 12 hex
        digits; or each file beside the weights and both sha256s), the file that recorded it (``study.json``, or a
        run's ``config.json`` with its arm and seed), and the fix: restore the model the study ran, or run the plan on
        this model as a new study (``gradprobe study PLAN --out NEW``), not a replicate; or a record is damaged (the
        file and field named, with the fix).
    """
    from ..training.run_folder import (LOCAL_SOURCES, MODEL_WEIGHTS, model_record_problem, model_weights_comparable,
                                       model_weights_identity, model_weights_mismatch)  # torch: only a replicate

    spec, source = str(original.model.name), Path(source)
    current = model_weights_identity(spec)
    hashed, compared = current is not None and current.get("digest") is not None, False
    new_study = ("or run the plan on this model as a new study (`gradprobe study PLAN --out NEW`): a replicate "
                 "changes only the seeds and the held-out set; nothing was written")
    for path, then, whose in _model_records(source, original):
        problem = model_record_problem(spec, then, current)
        if problem is not None and (hashed or isinstance(then, dict) and then.get("source") in LOCAL_SOURCES):
            raise StudyError(f"--replicate: {shown(str(path))} is damaged (field {MODEL_WEIGHTS} {problem}): whether "
                             f"model {spec!r} loads the model the study {shown(str(source))} ran cannot be told; "
                             f"restore the file from a copy of the study, {new_study}")
        if problem is not None or not model_weights_comparable(then, current):
            continue
        compared = True
        differs = model_weights_mismatch(spec, then, current)
        if differs is not None:
            fix = differs[2].removeprefix("to resume it, ")
            raise StudyError(f"--replicate: {differs[1]} ({shown(str(path))} {MODEL_WEIGHTS}, {whose}): the replicate "
                             f"would train another model than the study {shown(str(source))} ran; to replicate it, "
                             f"{fix}, {new_study}")
    if hashed and not compared:
        (say or (lambda m: print(m, file=sys.stderr, flush=True)))(
            f"note: neither the {STUDY_JSON} nor a run of the study {shown(str(source))} records the model it started "
            f"from ({MODEL_WEIGHTS} in {STUDY_JSON}, or in {CONFIG_JSON} in its runs/: a study from before gradprobe "
            f"recorded it), so whether model {spec!r} ({current['path']}, digest {current['digest'][:12]}) is the "
            "model the study ran could not be compared; replicating")
    return current


def _model_records(source: Path, original: Plan) -> list[tuple[Path, object, str]]:
    """The records of the model the study ``source`` (frozen plan ``original``) ran, for
    :func:`check_replicate_model`, as (file, record, whose record in words): ``study.json``'s ``model_weights``
    first (recorded when the study started: :func:`gradprobe.study.freeze.check_study_model`), then each run's
    ``config.json``'s (recorded when it started). A file that cannot be read, or has no such field (a study or run
    from before gradprobe recorded it, a study copied without its ``runs/``), gives none; a field that is there is
    given as it is, a damaged one included (for the caller to refuse)."""
    from ..training.run_folder import MODEL_WEIGHTS

    places = [(source / STUDY_JSON, "the record of the study's model when it started")]
    places += [(run_dir(source, arm, seed) / CONFIG_JSON, f"the record of the study's run {arm} seed {seed}")
               for arm, seed in original.runs()]
    records = []
    for path, whose in places:
        try:
            records.append((path, json.loads(path.read_text())[MODEL_WEIGHTS], whose))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue
    return records


def compare_replicate(original: str | Path, replicate: str | Path, *, axis: str = "generated_tokens") -> str:
    """A table of each arm's gain vs grpo (points, t interval over seeds) in the original study and
    its replicate at matched ``axis``, and whether the replicate's estimate falls inside the
    original's interval. Reads both ``analysis.json`` files (old ones keyed ``tokens`` too)."""
    def gains(folder: Path) -> dict:
        a = json.loads((Path(folder) / ANALYSIS_JSON).read_text())
        out = {}
        for arm, entry in (a.get("arms") or {}).items():
            block = entry.get(axis) or (entry.get("tokens") if axis == "generated_tokens" else None) or {}
            if block.get("gain_vs_grpo") is not None:
                out[arm] = (block["gain_vs_grpo"], block.get("gain_ci"))
        return out

    def fmt(g) -> str:
        if g is None:
            return "n/a"
        est, ci = g
        return f"{est:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")

    a, b = gains(original), gains(replicate)
    lines = [f"replication at matched {axis} (gain vs grpo, points, 95% t interval over seeds):",
             f"  {'arm':<14} {'original':<24} {'replicate':<24} replicate inside original's interval"]
    for arm in [x for x in a if x != "grpo"] + [x for x in b if x not in a and x != "grpo"]:
        inside = "n/a"
        if arm in a and arm in b and a[arm][1]:
            inside = "yes" if a[arm][1][0] <= b[arm][0] <= a[arm][1][1] else "no"
        lines.append(f"  {arm:<14} {fmt(a.get(arm)):<24} {fmt(b.get(arm)):<24} {inside}")
    return "\n".join(lines)
