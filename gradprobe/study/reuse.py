"""Reuse finished runs of other studies (``gradprobe study PLAN --out DIR --reuse-runs OTHER``).

A study that adds arms to an earlier one (more hybrid weights beside the same outcome arm, a
wider learning-rate sweep) need not train again the runs it shares with it: a run is a
deterministic function of its resolved configuration (``config.json``'s ``run``: model, task,
held-out set, sampling, update, budget, eval schedule, seed; the random streams are drawn from
the seed, :mod:`gradprobe.streams`) and of the software that ran it (``config.json``'s
``versions``). The shipped studies show it: the grpo arm of ``data/study_tiny``,
``data/study_tiny_lr`` and ``data/study_tiny_granularity`` is the same run bit for bit.

A finished run of ``source/runs/<arm>/seed<S>`` is copied into this study's ``runs/<arm>/seed<S>``
only when

* its ``summary.json`` says it completed;
* its resolved configuration equals the one this plan gives the same arm and seed, except for
  the two fields that name the plan (``plan_sha256``, ``plan_name``: they label the run and
  enter no computation);
* it was made by the same gradprobe, torch and transformers versions as this process (another
  version may sample or round differently, so it would not be the run this plan asks for);
* for a task read from data files, it read files of the same content (``config.json``'s ``task_data``, at any path;
  a run that did not record them is not reused);
* for a plug-in reward, it ran code of the same content: the reward's file and the helper modules it imports
  (``config.json``'s ``reward_plugin``; a run that did not record it is not reused);
* for a model read from files (a tier, a local folder, a GGUF file), it started from initial weights of the same
  content (``config.json``'s ``model_weights``, at any path; a run that did not record them is not reused, nor one
  whose record is damaged or contradicts what the model is, by the rule a resume refuses it with:
  :func:`gradprobe.training.run_folder.model_record_problem`, nor one that started from a local folder or file the
  plan's ``[model] name`` finds no more, a relative name from another working directory).

The copy is byte for byte (into a temporary folder, then renamed, so a killed copy leaves
nothing half-written) plus ``reused_from.json`` in the run folder naming the source run, the
source study's plan sha256 and the time; ``study.json`` marks the run ``reused_from``. Its
device-seconds were spent in the source study and are not added to this study's wall time.
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

from ..layout import keeps_runs, run_dir
from ..outputs import output_error, versions, write_json_atomic
from ..tasks import task_data_identity
from ..training.plan import Plan, run_config_from_dict
from ..training.run_folder import (LOCAL_SOURCES, MODEL_WEIGHTS, MODULES, REWARD_PLUGIN, TASK_DATA, config_differences,
                                   model_files_differences, model_record_problem, model_weights_mismatch,
                                   modules_mismatch, modules_problem, task_data_mismatch, task_data_problem)
from .folder import REUSED_JSON, run_status  # REUSED_JSON: the run folder's provenance record of a reused run

#: RunConfig fields that only name the plan a run belongs to (no computation reads them)
PLAN_LABELS = ("plan_sha256", "plan_name")

#: the versions that must match for a run to be the same computation
VERSION_KEYS = ("gradprobe", "torch", "transformers")


class ReuseError(ValueError):
    """A ``--reuse-runs`` source cannot be used (not a study folder, unreadable run record)."""


def _comparable(run: dict) -> dict:
    d = run_config_from_dict(run).to_dict()  # keys added since the source ran get their defaults
    for k in PLAN_LABELS:
        d.pop(k, None)
    return d


def _differences(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def check_reuse_sources(sources, out: str | Path) -> None:
    """Refuse a ``--reuse-runs`` source that cannot give runs, before anything is written (:func:`run_study`
    calls it before it creates or locks the study folder).

    Raises
    ------
    ReuseError
        A source is the study's own folder ``out``, or has no ``runs/`` folder (missing, not a study folder, a
        shipped study that keeps only its tables): one line naming it and the fix.
    """
    for source in [Path(s) for s in sources]:
        if source.resolve() == Path(out).resolve():
            raise ReuseError(f"--reuse-runs {source} is this study's own folder; give another study's folder")
        if not keeps_runs(source):
            what = "no runs/ folder there (" + ("the folder does not exist)" if not source.exists() else
                                                 "is it a study folder? a shipped study keeps only its tables)")
            raise ReuseError(f"--reuse-runs {source}: {what}; reuse needs the folder a study ran in (its runs/): "
                             f"give such a folder, or drop --reuse-runs {source}")


def reuse_runs(plan: Plan, out: str | Path, sources, say=None, weights: dict | None = None
               ) -> dict[tuple[str, int], str]:
    """Copy the finished runs of ``sources`` that this plan would train identically into ``out``.

    Parameters
    ----------
    plan : Plan
        The study's (frozen) plan.
    out : path
        The study folder; only runs not yet present in it (no ``summary.json`` and no
        ``metrics.jsonl``) are filled.
    sources : sequence of path
        Other study folders (each with a ``runs/`` folder); the first source holding a matching
        finished run of an (arm, seed) gives it.
    say : callable(str), optional
        One line per source: runs reused, and runs of the same arm and seed that were not reused
        with the reason (config fields that differ, other versions, unfinished).
    weights : dict, optional
        :func:`gradprobe.training.run_folder.model_weights_identity` of the plan's ``[model] name``, when the caller
        computed it (:func:`gradprobe.study.freeze.check_study_model`: the weights hashed once per invocation); None:
        computed here.

    Returns
    -------
    dict
        ``{(arm, seed): source run folder}`` of the runs copied.

    Raises
    ------
    ReuseError
        A source is not a study folder (no ``runs/`` and no ``plan.toml``), or a run's
        ``config.json`` cannot be read (the file is named).
    OutputDirError
        ``out`` cannot be written (nothing half-copied is left).
    """
    say = say or (lambda m: None)
    out = Path(out)
    check_reuse_sources(sources, out)
    here = {k: v for k, v in versions().items() if k in VERSION_KEYS}
    data_now = task_data_identity(plan.task.name)  # the task's data files now ({} for a generated task)
    spec = str(plan.model.name)
    weights_now = weights if weights is not None else _weights_identity(spec)  # what the plan's model loads now
    copied: dict[tuple[str, int], str] = {}
    for source in [Path(s) for s in sources]:
        reused, refused = [], []
        for arm, seed in plan.runs():
            if (arm, seed) in copied or run_status(run_dir(out, arm, seed))[0] != "pending":
                continue
            src = run_dir(source, arm, seed)
            if not src.is_dir():
                continue
            status, _ = run_status(src)
            if status != "done":
                refused.append(f"{arm} seed {seed} ({status})")
                continue
            try:
                cfg = json.loads((src / "config.json").read_text())
                theirs = _comparable(cfg["run"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise ReuseError(f"--reuse-runs: cannot read the run configuration {src / 'config.json'} "
                                 f"({type(e).__name__}: {e})") from None
            other = (_other_run(theirs, _comparable(plan.arm(arm, seed).to_dict()), cfg, here)
                     or _other_task_data(plan.task.name, cfg, data_now)
                     or _other_reward_code(plan.arms[arm].reward, cfg) or _other_weights(cfg, weights_now, spec))
            if other:
                refused.append(f"{arm} seed {seed} ({other})")
                continue
            _copy_run(src, run_dir(out, arm, seed), cfg)
            copied[(arm, seed)] = str(src.resolve())
            reused.append(f"{arm} seed {seed}")
        say(f"--reuse-runs {source}: reused {len(reused)} finished run(s) with this plan's configuration"
            + (f" ({', '.join(reused)})" if reused else "")
            + (f"; not reused: {'; '.join(refused)}" if refused else ""))
    return copied


def _other_run(theirs: dict, ours: dict, cfg: dict, here: dict) -> str | None:
    """Why a source run is not the run this plan gives its arm and seed: its configuration (``theirs``,
    :func:`_comparable`) differs from ``ours`` (the fields and their values), or it was made with other
    :data:`VERSION_KEYS` versions (``cfg``'s ``versions``) than ``here``; None when neither."""
    diff = _differences(theirs, ours)
    if diff:
        return f"config differs in: {', '.join(diff)}: {config_differences(theirs, ours)}"
    vers = {k: (cfg.get("versions") or {}).get(k) for k in VERSION_KEYS}
    vdiff = _differences(vers, here)
    if vdiff:
        return "made with other versions: " + ", ".join(f"{k} {vers.get(k)} vs {here.get(k)} here" for k in vdiff)
    return None


def _other_task_data(spec: str, cfg: dict, now: dict) -> str | None:
    """Why a source run's ``config.json`` (``cfg``) may have read other data than the task ``spec`` reads now
    (``now``, :func:`gradprobe.tasks.task_data_identity`): its recorded ``task_data`` differs in content (the same
    content at another path is the same data), is damaged, or was not recorded (a run made before gradprobe recorded
    it); None when it read the same data or neither reads a file."""
    then = cfg.get(TASK_DATA)
    if not now and not then:
        return None
    if then is None:
        return ("its task data was not recorded (made before gradprobe recorded a task's data files), so whether it "
                "read this data cannot be told")
    if task_data_problem(then) is not None:
        return f"its config.json field {TASK_DATA} is damaged"
    differs = task_data_mismatch(spec, then, now, started="it ran")
    return None if differs is None else f"trained on other task data: {differs[0]}"


def _weights_identity(spec: str) -> dict | None:
    """:func:`gradprobe.training.run_folder.model_weights_identity` of ``spec`` (imported here: it reads the models
    module, which loads torch; the study package stays torch-free)."""
    from ..training.run_folder import model_weights_identity

    return model_weights_identity(spec)


def _other_weights(cfg: dict, now: dict | None, spec: str | None = None) -> str | None:
    """Why a source run's ``config.json`` (``cfg``) may have started from other initial weights than the plan's model
    ``spec`` loads now (``now``, :func:`gradprobe.training.run_folder.model_weights_identity`; None or without a
    digest: a generated model or a hub id, not checked, unless the run recorded a local folder or file, which the name
    finds no more: a relative name from another working directory); ``spec`` defaults to the path ``now`` or the
    record names. Its recorded ``model_weights`` differ in content (a tier rebuilt in the cache since, replaced
    weights; the same content at another path is the same weights), its model's files beside the weights differ (an
    edited ``config.json`` or tokenizer, :func:`gradprobe.training.run_folder.model_files_differences`), or were not
    recorded (a run made before gradprobe recorded them), or the record is damaged or contradicts what the model is
    (:func:`gradprobe.training.run_folder.model_record_problem`, the rule a resume refuses it with: the reason
    named); None when they are the same."""
    then = cfg.get(MODEL_WEIGHTS)
    local = isinstance(then, dict) and then.get("source") in LOCAL_SOURCES
    if (now is None or now.get("digest") is None) and not local:
        return None
    spec = spec if spec is not None else str((now or then).get("path"))
    if then is None:
        return ("its initial weights were not recorded (made before gradprobe recorded them), so whether it started "
                f"from the weights {now['path']} holds now cannot be told")
    problem = model_record_problem(spec, then, now)
    if problem is not None:
        return f"its config.json is damaged (field {MODEL_WEIGHTS} {problem})"
    if now is None or now.get("digest") is None:  # a local model then, which the name finds no more
        return f"its initial weights cannot be found here: {model_weights_mismatch(spec, then, now)[1]}"
    if then["digest"] is None:  # a policy passed in code, or a hub id: not read from files
        how = "passed in code" if then["source"] == "given" else f"a hub id ({then['path']}), not read from files"
        return (f"its initial weights were {how}, so whether it started from the weights {now['path']} holds "
                "cannot be told")
    if (then.get("method"), then.get("digest")) != (now.get("method"), now["digest"]):
        return (f"started from other initial weights ({then['path']}, digest {str(then.get('digest'))[:12]}; the "
                f"model loads {now['path']}, digest {now['digest'][:12]}, now)")
    if "model_files" not in then and now.get("model_files"):
        return ("its model's config.json and tokenizer files were not recorded (made before gradprobe recorded them), "
                f"so whether it used the ones {now['path']} holds now cannot be told")
    differs = model_files_differences(then, now)
    return None if differs is None else f"same weights, but files beside them differ from when it ran: {differs}"


def _other_reward_code(spec: str, cfg: dict) -> str | None:
    """Why a source run's ``config.json`` (``cfg``) may have trained with other code than the plug-in reward ``spec``
    runs now (:func:`gradprobe.rewards.plugin.plugin_identity`): its recorded ``reward_plugin`` file or a helper
    module differs in content (the same content at another path is the same code), is damaged, or was not
    recorded; None when the code is the same or ``spec`` is a built-in reward. A trial user's edited reward file was
    reused: the study's remaining runs and its probe ran the new code, the copied runs the old, under one arm."""
    from ..rewards.plugin import is_plugin_name, plugin_identity  # torch: the study package stays torch-free

    if not is_plugin_name(spec):
        return None
    then, now = cfg.get(REWARD_PLUGIN), plugin_identity(spec) or {}
    if not isinstance(then, dict) or not then.get("sha256") or modules_problem(then) is not None:
        return (f"its reward code was not recorded, or its config.json field {REWARD_PLUGIN} is damaged, so whether "
                f"it trained with the code reward {spec!r} runs now cannot be told")
    if then["sha256"] != now.get("sha256"):
        return (f"trained with other reward code: {then.get('file')} sha256 {str(then['sha256'])[:12]} then, "
                f"{now.get('file')} sha256 {str(now.get('sha256'))[:12]} now")
    if MODULES in then and now.get("file"):
        differs = modules_mismatch(spec, Path(now["file"]).parent, then[MODULES], now.get(MODULES) or {},
                                   started="it ran")
        if differs is not None:
            return f"trained with other reward code: {differs[0]}"
    return None


def _copy_run(src: Path, dst: Path, cfg: dict) -> None:
    tmp = dst.with_name(dst.name + ".reuse-tmp")
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():  # an empty or pending folder (run_status "pending"): replaced
            shutil.rmtree(dst)
        shutil.copytree(src, tmp)
        write_json_atomic(tmp / REUSED_JSON, {
            "source": str(src.resolve()), "source_plan_sha256": cfg.get("plan_sha256"),
            "copied": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
        tmp.rename(dst)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise output_error("copying a reused run into", dst, e) from e


def reused_source(folder: str | Path) -> str | None:
    """The source run folder of a reused run (``reused_from.json``), else None."""
    p = Path(folder) / REUSED_JSON
    try:
        return json.loads(p.read_text()).get("source")
    except (OSError, ValueError):
        return None
