"""``gradprobe.probe(...)`` and ``gradprobe.load_probe(dir)``: the probe as a typed result.

:func:`probe` does what ``gradprobe probe`` does (:func:`gradprobe.probe.batches.run_probe_batches`,
the forecast section of :func:`gradprobe.forecast.forecast_section`, ``probe.json`` and
``report.html``) and returns a :class:`ProbeResult` instead of printing: a DataFrame per reward
(:attr:`ProbeResult.table`), the per-token alignment a_ijt (:attr:`ProbeResult.alignment`, shape
(N, T)) and the tokens with every reward's advantage (:meth:`ProbeResult.tokens`). A folder written by
``gradprobe probe --out DIR`` reads back with :func:`load_probe`. The result object and its reader live
in :mod:`gradprobe.api.probe_result` (re-exported here).

Importing this module imports neither torch nor pandas (they load on first use): the probe's
machinery (:mod:`gradprobe.probe`, :mod:`gradprobe.rewards`, :mod:`gradprobe.forecast`, all
torch-bound) is imported inside the functions that run it.
"""

from __future__ import annotations

import inspect
import numbers
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..layout import PROBE_JSON, rerun_advice
from ..outputs import api_out, home_path, naming_out, read_probe_json
from ..probe_settings import DEFAULT_TASK, MAX_SEED, ProbeConfig, check_forecaster
from ..tasks import Task, not_a_task_spec
from ..training.coerce import echo_value
from .probe_result import ProbeFileError, ProbeResult, load_probe

__all__ = ["ProbeResult", "probe", "load_probe", "ProbeFileError"]


def _extra_reward(item, index: int) -> tuple[str, object]:
    """(name, Reward) of a non-string entry of ``rewards``, checked before any compute.

    Raises
    ------
    ValueError
        A token-level Reward passed bare, a function without a name (a lambda), a pair whose function cannot be called
        as ``reward(batch, ctx)`` (a TRL-style one: :func:`gradprobe.probe.stages.native_signature_problem`), a
        function or pair under the name of a registered reward that is another function (:func:`_registered_name`),
        or anything else; each names ``rewards[index]`` and the fix.
    """
    from ..probe.stages import native_signature_problem  # torch-bound: deferred (module docstring)
    from ..rewards import sequence_reward
    from ..rewards.output import type_name

    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and callable(item[1]):
        name, fn = item
        problem = native_signature_problem(fn)
        if problem is not None:
            raise ValueError(f"rewards[{index}] = ({name!r}, ...): {problem}; the second item of a pair is a Reward: "
                             f"pass ({name!r}, gradprobe.sequence_reward({getattr(fn, '__name__', 'fn')})) for a "
                             "TRL-style function, or the function itself, bare (named after it)")
        _registered_name(index, name, fn, fn, f"give the pair another name (the string {name!r} alone probes the "
                                              "registered one)")
        return item
    if callable(item):
        params = list(inspect.signature(item).parameters)
        if params[:1] == ["batch"]:
            raise ValueError(f"rewards[{index}] is a token-level Reward (batch, ctx): pass it as (name, reward), or "
                             "register it with gradprobe.register_reward(name) and pass the name")
        name = getattr(item, "__name__", None)
        if not name or name == "<lambda>":
            what = "a lambda" if name else f"a {type_name(item)} object without __name__"
            raise ValueError(f"rewards[{index}] has no name ({what}): pass (name, sequence_reward(fn)) or a def")
        reward = sequence_reward(item, name=name)
        _registered_name(index, name, reward, item, f"rename the function, or pass it under another name as a "
                                                    f"pair, (\"my_{name}\", gradprobe.sequence_reward({name}))")
        return name, reward
    raise ValueError(f"rewards[{index}] = {item!r}: expected a registered reward name (str), a TRL-style function "
                     "f(prompts, completions, **columns) -> list[float | None], or a (name, Reward) pair")


def _registered_name(index: int, name: str, reward, given, fix: str) -> None:
    """ValueError when ``name``, the name ``rewards[index]`` (``given``: the caller's function) gets, is registered to
    a reward other than ``reward``, what ``given`` is probed as (:func:`gradprobe.rewards.base.registered_elsewhere`):
    the probe and what reads its results would take the caller's function for that reward (a ``def outcome`` for
    grpo's reference). ``fix``: how to name it otherwise."""
    from ..rewards.base import registered_elsewhere, reward_origin  # torch-bound: deferred (module docstring)

    other = registered_elsewhere(name, reward)
    if other is not None:
        raise ValueError(f"rewards[{index}] ({reward_origin(given)}) is named {name!r}, which is the registered reward "
                         f"{reward_origin(other)}, another function: the probe and everything reading its results "
                         f"(grpo's reference, notes, a calibration) would take yours for it; {fix}")


def _reference_curve(value) -> tuple[object, str | None]:
    """(curve, how it was named, recorded in ``probe.json``) of ``reference_curve=``: None (the model's shipped
    curve, if any), a path or ``'default'`` (:func:`gradprobe.forecast.load_reference_curve`), or a
    :class:`~gradprobe.forecast.ReferenceCurve` used as it is. Raises TypeError for anything else, ValueError for
    an empty string, CurveError for a path naming nothing readable."""
    from ..forecast import ReferenceCurve, load_reference_curve  # pandas and scipy: deferred (module docstring)

    if value is None:
        return None, None
    if isinstance(value, ReferenceCurve):
        return value, repr(value)
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"reference_curve must be a path, 'default' or a ReferenceCurve, got {type(value).__name__}; "
                        "build a curve from points with gradprobe.forecast.ReferenceCurve(updates=[...], "
                        "accuracy=[...]) and pass it, or save it with .save(PATH) and pass the path")
    spec = os.fspath(value)
    if not str(spec).strip():
        raise ValueError(f"reference_curve is empty ({spec!r}): give a path or 'default' (the shipped tiny-tier "
                         "curve), or leave it None for the model's shipped curve (if any)")
    if str(spec).startswith("~"):  # the home folder, as on the command line; recorded as read: expanded
        spec = str(home_path(spec))
    return load_reference_curve(spec), str(spec)


def _probe_config(model: str, task: str, names: tuple, settings: dict) -> ProbeConfig:
    """A ProbeConfig from flat keyword settings (:meth:`ProbeConfig.from_dict`, the one coercer)."""
    return ProbeConfig.from_dict({**settings, "model": model, "task": task, "rewards": names})


def _probe_into(*, folder: Path, config, probe_batches: int, extra: dict, curve, curve_spec, forecaster: str,
                checkpoints=None) -> None:
    """Run the probe into ``folder`` as ``gradprobe probe --out`` does: an earlier probe's files there are
    replaced whole (put back on an error), the forecast, ``probe.json`` and the report."""
    # torch-bound (matplotlib for the report): deferred so that importing the API stays light
    from ..forecast import forecast_section
    from ..probe.batches import run_probe_batches
    from ..probe.output import batch_folder_count, replacing_earlier_probe, write_probe_json
    from ..probe.report_html import write_probe_report

    checkpoint_files = None
    if checkpoints is not None:
        from ..probe.checkpoints import checkpoint_weights

        checkpoint_files = len(checkpoint_weights(checkpoints))
    # the argument named as write() names its dir; a batch_K it writes that is no earlier probe's is refused first
    folders = batch_folder_count(probe_batches, checkpoint_files)
    with replacing_earlier_probe(folder, label="out", batch_folders=folders):
        if checkpoints is None:
            result = run_probe_batches(config, batches=probe_batches, out=folder, extra_rewards=extra or None)
        else:  # batches at the initial policy and at each checkpoint, pooled
            from ..probe.checkpoints import run_probe_checkpoints

            result = run_probe_checkpoints(config, checkpoints, batches=probe_batches, out=folder,
                                           extra_rewards=extra or None)
        result["forecast"] = forecast_section(result, curve=curve, curve_spec=curve_spec, method=forecaster)
        write_probe_json(folder, result)  # each file named in the probe's record as it is started
        write_probe_report(folder, result)  # off-screen figures (a notebook's backend is left alone); named once drawn


@naming_out("out")  # its output fixes say "choose another out", the argument, not --out
def probe(model: str = "tiny", task=None, rewards=("outcome", "mc_value", "hybrid_0.5"), *, out=None,
          probe_batches: int = 1, checkpoints=None, reference_curve=None, forecaster: str = "auto",
          **settings) -> ProbeResult:
    """Probe rewards on one batch: per-token alignment with a reference update, gains, forecast.

    The same computation and files as ``gradprobe probe`` (README, "The probe command"; DESIGN.md,
    "The probe"): B x G rollouts, each reward's per-token advantages A^R (N, T), one forward-mode
    pass for the alignment a (N, T), <g_R, u> = (1/Z_R) sum A^R a per reward, the raw first-order
    gains, and the forecast vs grpo read off a reference learning curve.

    Parameters
    ----------
    model : str or os.PathLike
        ``tiny`` (the shipped tier), an alias (``smollm2-135m``, ``tiny-qwen2``, ``tiny-llama``), a
        folder, a ``.gguf`` file or a hub id (:func:`gradprobe.models.load_policy`); not a loaded Policy.
    task : str, optional
        A task spec (:func:`gradprobe.tasks.load_task`); default the tiny tier's frontier task; not a loaded Task.
    rewards : sequence
        Each a registered reward name (``gradprobe.rewards.REWARDS``), a TRL-style function ``f(prompts, completions,
        **columns) -> list[float | None]`` (wrapped with :func:`gradprobe.sequence_reward`, named after it), or a
        ``(name, Reward)`` pair (called ``reward(batch, ctx)``); none under another reward's registered name. All are
        probed in one alignment pass. ``outcome`` must be among them for a forecast (a gain vs grpo).
    out : path, optional
        Output folder (``probe.json``, ``report.html``, ``alignment.safetensors``, ``tokens.jsonl``; checked writable
        before any compute; a leading ``~`` is a home folder, :func:`gradprobe.outputs.home_path`). Default: a temporary
        folder that lives as long as the result (:meth:`ProbeResult.write` copies it).
    probe_batches : int
        N probe batches on disjoint prompts sharing one reference direction (``--probe-batches``).
    checkpoints : str, path or sequence, optional
        Kept weights of a reference GRPO run of ``model`` (``--checkpoints``: a run folder with ``weights/``,
        ``checkpoint-UUUUUU`` folders or ``.safetensors`` files): ``probe_batches`` batches at the initial policy
        and at each, pooled (:mod:`gradprobe.probe.checkpoints`).
    reference_curve : str, path or ReferenceCurve, optional
        grpo's accuracy-vs-updates curve for the forecast (``--reference-curve``: ``default``, a
        study folder, a metrics.jsonl, a CSV...), or a :class:`gradprobe.forecast.ReferenceCurve` (used as it
        is); default (None): the model's shipped curve, if any.
    forecaster : {"auto", "probe", "cost_only", "signal_proxy"}
        Which forecaster makes the verdict (``--forecaster``; checked before any compute).
    **settings
        Any flat :class:`gradprobe.probe.run.ProbeConfig` setting (``prompts`` B, ``group`` G,
        ``heldout_prompts``, ``heldout_group``, ``lr``, ``loss_type``, ``budget_tokens`` (tokens; ``"250k"``
        as ``--budget-tokens`` takes it), ``budget_seconds`` (device-seconds), ``precondition``, ``seed``,
        ``n_bootstrap``, ``progress``...), any :class:`gradprobe.config.SamplingConfig` field (``max_new_tokens``,
        ``temperature``, ``backend``...) or :class:`gradprobe.config.MCConfig` field
        (``continuations`` K, ``max_steps``), or a stage as an object or dict (``sampling=``, ``mc=``,
        ``batch={"prompts": 4}``...), read by :meth:`gradprobe.probe.run.ProbeConfig.from_dict`; ``guidance=
        {"fraction": 0.25, "prefix": 0.5}`` probes a guided arm's update (:mod:`gradprobe.probe.guided`).

    Returns
    -------
    ProbeResult

    Raises
    ------
    ValueError
        Unknown setting (valid names listed; ``bootstrap``, an option's name: its keyword ``n_bootstrap``), bad value
        (field named: ``continuations (--continuations) must be >= 1``; ``seed`` outside [0, 2**63 - 1]), unknown
        ``forecaster``, empty ``out`` or ``reference_curve``, unknown reward, model or task, bad ``rewards`` entry or
        ``guidance``, no reference solutions, a template dropping the hint (before compute); non-finite advantages.
    gradprobe.rewards.RewardFunctionError
        A reward raised (``sys.exit()`` too) or returned something unusable; its attribute ``reward`` names it.
    TypeError
        ``out`` is not a path, ``reference_curve`` is neither a path nor a ReferenceCurve, ``rewards`` is neither a
        sequence nor a string, ``model`` a Policy or ``task`` a Task (:func:`refuse_loaded_objects`) (before compute).
    OSError
        ``out`` cannot be written, is a file, holds a run, a study, a model, or a ``batch_K`` the probe writes that is
        no earlier probe's (before any compute). An earlier probe there is replaced whole; on an error it is put back.
    gradprobe.forecast.curves.CurveError
        ``reference_curve`` names nothing readable (before any compute; a ValueError).
    """
    out = None if out is None else api_out(out)  # '' refused (the current folder); ~ expanded
    check_forecaster(forecaster)
    config, extra = _config_and_rewards(model, task, rewards, settings)  # refuses bad settings before compute
    curve, curve_spec = _reference_curve(reference_curve)
    if checkpoints is not None:  # a missing or wrong path fails before any compute
        from ..probe.checkpoints import checkpoint_weights

        checkpoint_weights(checkpoints)
    return _probe_result(out, config=config, probe_batches=probe_batches, extra=extra, curve=curve,
                         curve_spec=curve_spec, forecaster=forecaster, checkpoints=checkpoints)


#: ``gradprobe probe`` options that are no probe setting in Python, and what takes their place there
_COMMAND_LINE_ONLY = {
    "calibration": "a calibration is applied to the result: calib.apply(calib.load('default' or PATH), result)",
    "reference_curve_metric": "pass reference_curve=gradprobe.forecast.load_reference_curve(PATH, metric=...)",
    "reference_curve_scale": "pass reference_curve=gradprobe.forecast.load_reference_curve(PATH, "
                             "accuracy_scale=...)",
    "initial_accuracy": "pass reference_curve=gradprobe.forecast.load_reference_curve(PATH, initial_accuracy=...)",
    "trl_config": "gradprobe.probe reads no TRL config file; pass the settings it maps as keywords (loss_type, group, "
                  "max_new_tokens, lr, temperature, top_p, seed, precondition, update_prompts) and its scale_rewards "
                  "as the outcome variant among rewards (outcome, outcome_batch or outcome_dr)",
}

#: ``gradprobe probe`` options whose keyword in Python is another name: the option's name (as a keyword, ``--bootstrap``
#: -> ``bootstrap``) -> (the keyword of :func:`probe`, whether it is the option negated: ``--no-progress`` is
#: ``progress=False``). Every other option of the command is a keyword of the same name (a setting of
#: :meth:`ProbeConfig.from_dict` or an argument of :func:`probe`) or in :data:`_COMMAND_LINE_ONLY`.
_PYTHON_NAMES = {
    "bootstrap": ("n_bootstrap", False),
    "generation_batch_size": ("batch_size", False),
    "no_progress": ("progress", True),
}


def refuse_loaded_objects(model, task, *, strict: bool = False) -> None:
    """Refuse a ``model`` or ``task`` argument that is a loaded object where a spec is taken (an object is not taken:
    the spec is loaded again), named by its type, never by its repr (a module dump). ``strict`` (``rank_prompts``,
    which takes text or a path for each): any other value that is neither a str nor an ``os.PathLike`` too; else
    (:func:`probe`, whose ``model`` and ``task`` may be stage dicts or objects of :class:`ProbeConfig`) those are its
    settings' to check. Torch is imported only for a Policy (which exists only once :mod:`gradprobe.models` is) or a
    strict refusal.

    Raises
    ------
    TypeError
        ``model`` is a :class:`gradprobe.models.Policy` (:func:`gradprobe.models.model_spec`'s message: the spec it
        was loaded from to pass, ``model='tiny'``) or ``task`` a :class:`gradprobe.tasks.Task`
        (:func:`gradprobe.tasks.not_a_task_spec`: its name to pass); with ``strict``, either of another type.
    """
    models = sys.modules.get("gradprobe.models")
    if (models is not None and isinstance(model, models.Policy)) or (
            strict and not isinstance(model, (str, os.PathLike))):
        from ..models import model_spec

        model_spec(model, "model")
    if isinstance(task, Task) or (strict and not isinstance(task, (str, os.PathLike))):
        raise not_a_task_spec(task, "task")


def _refuse_command_line_only(settings: dict) -> None:
    """ValueError for a ``gradprobe probe`` option given to :func:`probe` by its command-line name where the API takes
    it another way (:data:`_COMMAND_LINE_ONLY`: the way named) or under another keyword (:data:`_PYTHON_NAMES`: the
    keyword named, with the value given: ``pass n_bootstrap=50``); the settings' own check names any other unknown
    key."""
    for key in sorted(set(settings) & (set(_COMMAND_LINE_ONLY) | set(_PYTHON_NAMES))):
        if key in _PYTHON_NAMES:
            name, negated = _PYTHON_NAMES[key]
            value = settings[key]
            if negated:  # --no-progress given as no_progress=True is progress=False
                value = not value if isinstance(value, numbers.Integral) else False
            way = f"pass {name}={echo_value(value)}, its name in Python"
        else:
            way = _COMMAND_LINE_ONLY[key]
        raise ValueError(f"{key} is no setting of gradprobe.probe (it is --{key.replace('_', '-')} of the command "
                         f"line): {way}")


def _check_seed(settings: dict) -> None:
    """ValueError, before any model loads, for a whole-number seed outside [0, 2**63 - 1]
    (:data:`~gradprobe.probe_settings.MAX_SEED`: what ``--seed`` takes, as ``gradprobe train``'s does), given as
    ``seed=`` or in ``batch=`` (a dict; a BatchSettings refuses one when made): numpy's and torch's generators would
    refuse it only after the model loaded, in their own words that name no setting. The message is that of
    :func:`gradprobe.train`'s seed: ``seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed),
    got 18446744073709551616`` (``batch.seed`` for one in ``batch=``; a long value shortened,
    :func:`~gradprobe.training.coerce.echo_value`). A seed of another type is left to the settings' own check
    (``seed must be an integer, got '5' (str)``)."""
    batch = settings.get("batch")
    given = [("seed", settings.get("seed"))]
    if isinstance(batch, Mapping):  # a BatchSettings checks its own seed when made
        given.append(("batch.seed", batch.get("seed")))
    for name, value in given:
        whole = (isinstance(value, numbers.Integral) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
        if whole and not 0 <= value <= MAX_SEED:
            raise ValueError(f"{name} must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), "
                             f"got {echo_value(value)}")


def _config_and_rewards(model: str, task, rewards, settings: dict) -> tuple[ProbeConfig, dict]:
    """(config, {name: Reward} of the rewards that are no registered name) of :func:`probe`'s arguments;
    ``rewards`` may be one comma-separated string."""
    refuse_loaded_objects(model, task)  # a Policy or Task object: the spec to pass named, not a stage's message
    _refuse_command_line_only(settings)
    _check_seed(settings)
    if isinstance(rewards, str):
        rewards = [r.strip() for r in rewards.split(",") if r.strip()]
    if not isinstance(rewards, Sequence):
        raise TypeError(f"rewards must be a list of rewards (names, functions or (name, Reward) pairs) or a "
                        f"comma-separated string of names, got {rewards!r} ({type(rewards).__name__})")
    names = tuple(r for r in rewards if isinstance(r, str))
    pairs = [(i, *_extra_reward(r, i)) for i, r in enumerate(rewards) if not isinstance(r, str)]
    first: dict[str, int] = {}
    for i, name, _ in pairs:  # a dict of them kept only the last of two functions named alike, without a word
        if name in first:
            raise ValueError(f"rewards[{first[name]}] and rewards[{i}] are both named {name!r} (their __name__), so "
                             "one would replace the other: give each function its own name, or pass (name, "
                             "sequence_reward(fn)) pairs with distinct names")
        first[name] = i
    extra = {name: reward for _, name, reward in pairs}
    return _probe_config(model, task or DEFAULT_TASK, names, settings), extra


def _probe_result(out: Path | None, **run) -> ProbeResult:
    """Run the probe (:func:`_probe_into`) into ``out``, or into a temporary folder that lives as long as the
    result when ``out`` is None (removed again when the probe fails, or its probe.json cannot be read back).
    ``probe.json`` is read back as :func:`load_probe` reads it (:func:`gradprobe.outputs.read_probe_json`)."""
    temporary = out is None
    folder = Path(tempfile.mkdtemp(prefix="gradprobe_probe_")) if temporary else out
    try:
        _probe_into(folder=folder, **run)
        raw = read_probe_json(folder / PROBE_JSON, rerun_advice(folder))  # a BOM read; one-line refusals
    except BaseException:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return ProbeResult(raw, folder, _temporary=temporary)
