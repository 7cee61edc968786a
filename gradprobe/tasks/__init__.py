"""Tasks: problem sources (reasoning-gym, GSM8K) and the exact-match verifier.

>>> task = load_task("chain_sum", min_terms=2, max_terms=3)   # doctest: +SKIP
>>> p = task.problems("train", 1)[0]                          # doctest: +SKIP
>>> task.score(f"step\\n#### {p.answer}", p)                  # doctest: +SKIP
1.0
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from gradprobe.tasks.base import (
    SPLITS,
    DatasetFormatError,
    Problem,
    Task,
    TaskConfigError,
    TaskNotFoundError,
    parse_task_config,
)
from gradprobe.tasks.dataset import OPTIONS as DATASET_OPTIONS
from gradprobe.tasks.dataset import DatasetTask, parse_dataset_spec
from gradprobe.tasks.fewshot import apply_fewshot
from gradprobe.tasks.gsm8k import GSM8KTask
from gradprobe.tasks.prompts import INSTRUCTION, encode_prompt, format_prompt
from gradprobe.tasks.reasoning_gym import ReasoningGymTask, registered_names
from gradprobe.tasks.verify import answers_match, extract_answer, normalize_number

__all__ = [
    "load_task",
    "Problem",
    "Task",
    "SPLITS",
    "TaskNotFoundError",
    "TaskConfigError",
    "DatasetFormatError",
    "INSTRUCTION",
    "format_prompt",
    "encode_prompt",
    "extract_answer",
    "normalize_number",
    "answers_match",
    "task_data_files",
    "task_data_identity",
    "file_sha256",
]

_GSM8K_FORMS = (
    '"gsm8k" (hub: openai/gsm8k) or "gsm8k:PATH" (a JSONL file or a folder with '
    'train.jsonl/test.jsonl), your own data as "jsonl:PATH[:key=value,...]" or '
    '"hf:NAME[:CONFIG][:key=value,...]" (keys: prompt, question, answer, solution, verifier, ...)'
)


#: How each kind read from data is written as a task spec (in messages).
_SPEC_FORMS = {"gsm8k": "gsm8k or gsm8k:PATH", "jsonl": "jsonl:PATH", "hf": "hf:NAME"}
#: Options of ``gsm8k`` / ``gsm8k:PATH`` (``fewshot`` aside, which every kind with reference solutions takes).
GSM8K_OPTIONS = ("skip_malformed", "heldout_fraction")
#: Task kinds read from data, and the options each accepts (the lists :func:`load_task` checks them against).
DATA_TASK_OPTIONS = {"gsm8k": GSM8K_OPTIONS, "jsonl": DATASET_OPTIONS, "hf": DATASET_OPTIONS}


def not_a_task_spec(value, argument: str = "spec") -> TypeError:
    """The TypeError for a task argument ``value`` that is no spec string, naming ``argument``, the value (cut short)
    and its type: ``spec must be a string (a task spec, e.g. 'chain_sum'), got 3 (int)``. A loaded :class:`Task` is
    named by its type alone (its repr may be long), with the spec to pass instead (its ``name`` when it has one:
    ``task='chain_sum'``): a task object is not taken, its spec is loaded again."""
    if isinstance(value, Task):
        name = getattr(value, "name", None)
        eg = f"{argument}={name!r}" if isinstance(name, str) and name else f"{argument}='chain_sum'"
        return TypeError(f"{argument} must be a string (a task spec), got a {type(value).__name__} (a loaded task, "
                         f"which is not taken): pass the spec it was loaded from, e.g. {eg} (with its options, if it "
                         "was loaded with some: 'chain_sum:min_terms=2')")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return TypeError(f"{argument} must be a string (a task spec, e.g. 'chain_sum'), got {shown} "
                     f"({type(value).__name__})")


def skip_malformed_kinds() -> list[str]:
    """The task kinds that accept ``skip_malformed`` (``--skip-malformed``), from :data:`DATA_TASK_OPTIONS`."""
    return [kind for kind, options in DATA_TASK_OPTIONS.items() if "skip_malformed" in options]


def load_task(spec: str, **config) -> Task:
    """Build a task from its spec.

    Parameters
    ----------
    spec : str
        ``"gsm8k"`` (hub), ``"gsm8k:PATH"`` (local JSONL file or folder), your own data
        ``"jsonl:PATH[:key=value,...]"`` or ``"hf:NAME[:CONFIG][:key=value,...]"`` (:mod:`gradprobe.tasks.dataset`:
        column mapping, TRL prompt formats, verifier); a leading ``~`` of a PATH or local folder NAME is the home
        folder, as in a shell. Or any reasoning-gym dataset name (``"chain_sum"``, ``"basic_arithmetic"``,
        ``"gsm_symbolic"``, ...), optionally with its config inline:
        ``"chain_sum:min_terms=2,max_terms=3,max_digits=1"``.
    **config
        GSM8K: ``skip_malformed``, ``heldout_fraction``; ``jsonl:``/``hf:``: the options of
        :mod:`gradprobe.tasks.dataset` (``skip_malformed`` among them). reasoning-gym: the
        dataset's config fields (e.g. ``min_terms``, ``max_digits``) plus
        ``train_size`` (see :class:`~gradprobe.tasks.reasoning_gym.ReasoningGymTask`).
        Every kind with reference solutions (chain_sum, gsm8k, jsonl/hf with a solution
        column, gsm_symbolic) also takes ``fewshot=K``: K solved examples before each
        question, as a plain prompt (:mod:`gradprobe.tasks.fewshot`; 0 or absent: none).

    Returns
    -------
    Task

    Raises
    ------
    TaskNotFoundError
        Unknown spec; the message lists every valid name and the gsm8k forms.
    TaskConfigError
        Unknown or invalid config key; ``fewshot`` not a non-negative integer, or given to a
        task kind without reference solutions; ``skip_malformed`` for a generated task (the
        message lists the kinds that take it, :func:`skip_malformed_kinds`).
    FileNotFoundError
        ``gsm8k:PATH`` with a missing path.
    TypeError
        ``spec`` is not a string (one spec, not a list; a loaded Task: its name given, :func:`not_a_task_spec`).
    """
    if not isinstance(spec, str):
        raise not_a_task_spec(spec)
    spec = spec.strip()
    fewshot = config.pop("fewshot", None)
    if spec.startswith(("jsonl:", "hf:")) or spec in ("jsonl", "hf"):
        kind, source, hub_config, inline = parse_dataset_spec(spec)
        options = {**inline, **config}
        inline_fewshot = options.pop("fewshot", None)  # a keyword argument wins over the spec's value
        fewshot = inline_fewshot if fewshot is None else fewshot
        unknown = sorted(set(options) - set(DATA_TASK_OPTIONS[kind]))
        if unknown:
            raise TaskConfigError(f"unknown option {unknown[0]!r} for {kind}:...; valid: "
                                  f"{', '.join(DATA_TASK_OPTIONS[kind])}")
        if kind == "jsonl" and {"train_split", "heldout_split"} & set(options):
            raise TaskConfigError("train_split/heldout_split apply to hf:NAME datasets only; a JSONL file is split "
                                  "by heldout_fraction, a folder holds train.jsonl and test.jsonl")
        return apply_fewshot(DatasetTask(source, kind=kind, hub_config=hub_config, **options), kind, fewshot)
    if spec == "gsm8k" or spec.startswith("gsm8k:"):
        unknown = sorted(set(config) - set(DATA_TASK_OPTIONS["gsm8k"]))
        if unknown:
            raise TaskConfigError(
                f"unknown config key {unknown[0]!r} for gsm8k; valid keys: "
                f"{', '.join(DATA_TASK_OPTIONS['gsm8k'])}, fewshot"
            )
        path = spec[len("gsm8k:"):].strip() if spec != "gsm8k" else None
        if path == "":
            raise TaskNotFoundError(f"{spec!r} names no path; valid: {_GSM8K_FORMS}")
        return apply_fewshot(GSM8KTask(path, **config), "gsm8k", fewshot)
    full_spec = spec
    if ":" in spec:  # "chain_sum:min_terms=2,max_digits=1" -> config from the spec
        spec, config = spec.split(":", 1)[0].strip(), {**parse_task_config(spec.split(":", 1)[1]), **config}
        inline_fewshot = config.pop("fewshot", None)
        fewshot = inline_fewshot if fewshot is None else fewshot
    names = registered_names()
    if spec not in names:
        raise TaskNotFoundError(
            f"unknown task {spec!r}. Valid: {_GSM8K_FORMS}, or a reasoning-gym "
            f"dataset: {', '.join(names)}"
        )
    if "skip_malformed" in config:
        raise TaskConfigError(_skip_malformed_refusal(full_spec))
    return apply_fewshot(ReasoningGymTask(spec, **config), spec, fewshot)


#: The files of a data folder (``jsonl:FOLDER``, ``gsm8k:FOLDER``), in the order a task reads them.
_FOLDER_FILES = ("train.jsonl", "test.jsonl")


def task_data_files(spec: str) -> dict[str, Path]:
    """The local files the task ``spec`` reads, as ``{label: resolved path}``: ``jsonl:PATH[:k=v,...]`` and
    ``gsm8k:PATH`` naming a file -> ``{spec: PATH}`` (also when PATH does not exist now: its data is missing), naming
    a folder -> ``{"SPEC [train.jsonl]": ..., "SPEC [test.jsonl]": ...}``, each file the folder holds. The one place
    that says which files a task spec reads (:func:`task_data_identity`; :func:`load_task` reads them).

    Parameters
    ----------
    spec : str
        A task spec as :func:`load_task` takes it (a relative PATH is resolved from the working directory, as
        :func:`load_task` reads it).

    Returns
    -------
    dict of str -> Path
        ``hf:FOLDER`` naming a local folder (``datasets.load_dataset`` reads it) -> the data files ``datasets``
        resolves for it, and its ``README.md`` / ``.huggingface.yaml`` (a dataset card's ``configs`` say which files
        are read), ``{"SPEC [RELATIVE/PATH]": ...}``: :func:`_local_hf_files`. Empty for a task read from no local
        file: a generated task (``chain_sum``, any reasoning-gym name), the hub (``gsm8k``, ``hf:NAME`` not naming a
        local folder), or a spec :func:`load_task` refuses (its own error names the problem). Never raises."""
    if not isinstance(spec, str):
        return {}
    spec = spec.strip()
    if spec.startswith("hf:"):
        return _local_hf_files(spec)
    if spec.startswith("jsonl:"):
        try:
            path = parse_dataset_spec(spec)[1]
        except ValueError:  # a malformed spec: load_task names it
            return {}
    elif spec.startswith("gsm8k:"):
        path = spec[len("gsm8k:"):].strip()
    else:
        return {}
    if not path:
        return {}
    source = Path(os.path.expanduser(path)).resolve()  # as load_task reads it (a leading ~: the home folder)
    if not source.is_dir():
        return {spec: source}
    return {f"{spec} [{name}]": source / name for name in _FOLDER_FILES if (source / name).is_file()}


def _local_hf_files(spec: str) -> dict[str, Path]:
    """The files ``hf:FOLDER[:CONFIG]`` reads when FOLDER is a local folder, as ``datasets.load_dataset`` looks for
    it (relative to the working directory), else ``{}`` (the hub): the data files ``datasets`` resolves for it
    (``load_dataset_builder(FOLDER, CONFIG).config.data_files``: a dataset card's ``configs`` may name files in
    hidden folders or outside FOLDER), and the ``README.md`` and ``.huggingface.yaml`` that choose them. Where
    ``datasets`` cannot resolve them (not installed, or a folder it refuses: loading it names why), every file under
    FOLDER except those in a folder whose name starts with ``.`` or ``__`` and those whose own name starts with
    ``.``. Labels are ``"SPEC [PATH relative to FOLDER]"``. Never raises."""
    try:
        source, hub_config = parse_dataset_spec(spec)[1:3]
        folder = Path(os.path.expanduser(source)).resolve()  # as DatasetTask reads it (a leading ~: the home folder)
        if not folder.is_dir():
            return {}
        files = _datasets_files(folder, hub_config)
        if files is None:
            files = {p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                     and not any(part.startswith((".", "__")) for part in p.relative_to(folder).parts[:-1])}
        files |= {folder / n for n in ("README.md", ".huggingface.yaml") if (folder / n).is_file()}
    except (ValueError, OSError):  # a malformed spec (load_task names it) or an unreadable folder
        return {}
    return {f"{spec} [{Path(os.path.relpath(p, folder)).as_posix()}]": p for p in sorted(files)}


def _datasets_files(folder: Path, hub_config: str | None) -> set[Path] | None:
    """The local data files ``datasets`` resolves for the folder ``folder`` (resolved paths), or None when it cannot
    tell (``datasets`` missing, or any error of its own: the load names it)."""
    try:
        import datasets

        builder = datasets.load_dataset_builder(str(folder), hub_config)
        found = builder.config.data_files or {}
        return {Path(f).resolve() for split_files in found.values() for f in split_files if "://" not in str(f)}
    except Exception:  # noqa: BLE001 - datasets raises many kinds of error; loading the task names them
        return None


def file_sha256(path, chunk: int = 1 << 20) -> str:
    """The sha256 (64 hex digits) of the file ``path``, read in chunks of ``chunk`` bytes (:mod:`hashlib`).
    Raises OSError when it cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def task_data_identity(spec: str) -> dict[str, dict]:
    """Which data the task ``spec`` reads now: ``{label: {"file": resolved path (str), "sha256": 64 hex digits, or
    None when the file is missing or unreadable}}`` for each file of :func:`task_data_files`; ``{}`` for a task read
    from no local file (nothing to record). A run records it in ``config.json`` and a study in ``study.json``
    (``task_data``), so that a resume after the data was edited is refused
    (:func:`gradprobe.training.run_folder.check_task_data`, :func:`gradprobe.study.freeze.check_task_data`)."""
    out = {}
    for label, path in task_data_files(spec).items():
        try:
            sha = file_sha256(path) if path.is_file() else None
        except OSError:
            sha = None
        out[label] = {"file": str(path), "sha256": sha}
    return out


def _skip_malformed_refusal(spec: str) -> str:
    """Why ``skip_malformed`` is refused for ``spec`` (a generated task), the kinds that take it, and the fix."""
    kinds = ", ".join(f"{k} ({_SPEC_FORMS[k]})" for k in skip_malformed_kinds())
    return (f"skip_malformed (--skip-malformed) applies only to tasks read from data, whose rows can be "
            f"malformed: {kinds}; {spec!r} is a generated (reasoning-gym) task with no malformed rows. "
            f"Fix: drop --skip-malformed (plans: remove skip_malformed from [task.config]; Python: do not "
            f"pass skip_malformed)")
