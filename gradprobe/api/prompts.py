"""``gradprobe.rank_prompts(...)``: ``gradprobe rank-prompts`` as a function returning a DataFrame.

The work, the settings, their defaults and their checks are :func:`gradprobe.difficulty.rank.rank_prompts`
and :class:`gradprobe.difficulty.rank.RankSettings` (the command line calls the same function with its
parsed flags); this is the front door's name for it, with the settings as keyword options. The progress
bar is ``progress=`` here, as in :func:`gradprobe.probe` (``progress=False`` hides it); ``no_progress=``, the
setting's own name, is still accepted with a :class:`DeprecationWarning` naming ``progress=False``.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from ..difficulty.rank import RankSettings, rank_prompts as rank
from ..outputs import api_out, naming_out
from ..training.run_folder import model_weights_identity
from .probe import refuse_loaded_objects


__all__ = ["rank_prompts"]


def rank_prompts(model: str, task: str, pool: int, *, out: str | Path | None = None, **options):
    """Predict each pool prompt's success probability under the policy and rank the pool nearest 1/2 first.

    What ``gradprobe rank-prompts`` does (DESIGN.md, "Prompt difficulty"): features of the ``pool``
    training prompts (``task.problems("train", pool, seed=data_seed)``; one batched forward, charged
    ``selection``), ``probe_samples`` sampled completions of ``fit_prompts`` of them (charged
    ``selection``) to fit the logistic model and the posteriors, p_hat for every prompt. Nothing is
    printed on stdout; when every probed outcome is equal (no model signal) a warning line goes to
    stderr, and ``.attrs["warning"]`` holds it.

    Parameters
    ----------
    model : str or os.PathLike
        ``tiny``, ``tiny-qwen2``, ``smollm2-135m``, a folder, ``.gguf`` file or hub id; not a loaded Policy.
    task : str
        Task spec, e.g. ``chain_sum:min_terms=2,max_terms=4``; not a loaded Task.
    pool : int
        N, pool prompts (>= 1).
    out : path, optional
        Also write ``ranking.csv`` and ``rank.json`` there (default: nothing is written). A leading ``~`` or
        ``~user`` is that home folder, as in a shell (:func:`gradprobe.outputs.home_path`).
    **options
        The fields of :class:`gradprobe.difficulty.rank.RankSettings` (the command's flags by their
        Python names), with their defaults: ``probe_samples`` (k, 4), ``fit_prompts`` (64),
        ``prior_strength`` (8.0), ``decay`` (0.9), ``metadata_keys`` (comma-separated or a list),
        ``data_seed`` (0), ``seed`` (0), ``max_new_tokens`` (128), ``temperature`` (1.0),
        ``batch_size`` (64), ``feature_batch_size`` (32), ``device`` ("cpu"), ``dtype`` ("float32"),
        ``skip_malformed`` (False), and ``progress`` (True; False hides the progress bar of the sampled
        completions, as in :func:`gradprobe.probe`; ``no_progress=True``, its old spelling, still works
        with a DeprecationWarning).

    Returns
    -------
    pandas.DataFrame
        ``ranking.csv``: one row per pool prompt, nearest 1/2 first: ``rank`` (1..N), ``prompt_id``,
        ``p_hat`` (predicted success probability), ``distance`` = |p_hat - 1/2|, ``attempts`` and
        ``successes`` (sampled completions of the prompt and how many the verifier scored 1),
        ``p_model`` (the logistic model's prediction alone). ``.attrs`` holds ``rank.json``:
        ``verdict`` (the rule "the candidates are predicted to fail more often than not", mean
        p_hat < 1/2, with its ``text``), ``no_signal``, ``warning``, ``notes``, ``ledger``
        (selection tokens, FLOPs, device-seconds), ``settings``.

    Raises
    ------
    ValueError
        An unknown option (the valid names are listed), a bad value (the option and its flag are
        named), ``progress`` and ``no_progress`` both given, an unknown task, an empty pool, duplicate
        prompt ids; ``out`` an empty or blank string (it would mean the current folder, as ``--out ''``:
        :func:`gradprobe.outputs.api_out`).
    TypeError
        ``out`` is neither None, a str nor an ``os.PathLike``; ``model`` or ``task`` is neither a str nor an
        ``os.PathLike`` (a loaded Policy or Task: the spec to pass named,
        :func:`gradprobe.api.probe.refuse_loaded_objects`).
    OSError
        ``out`` cannot be written (:class:`gradprobe.outputs.OutputDirError`, the fix saying "choose another out"): a
        file in the way, a broken link or a symlink loop, an unwritable folder, or a folder holding another command's
        output; refused before the pool is built or the model loaded, and nothing is created.
    gradprobe.models.ModelNotFoundError
        Unknown model.
    """
    settings = RankSettings.from_options(_progress_option(options))  # refuses bad options before any compute
    refuse_loaded_objects(model, task, strict=True)  # a Policy, Task or number: the argument and the fix named
    out = None if out is None else api_out(out)  # '' (the current folder) refused; ~ expanded
    with naming_out("out"):  # its output fixes say "choose another out", the argument (a block, not a decorator:
        # the deprecation warning above points at the caller's line, stacklevel=3)
        return rank(model, task, pool, out=out, settings=settings, model_identity=model_weights_identity)


def _progress_option(options: dict) -> dict:
    """``options`` with ``progress`` turned into the setting ``no_progress`` (a DeprecationWarning when given
    as ``no_progress``).

    Raises
    ------
    ValueError
        An unknown option (the valid names listed, ``progress`` among them), both spellings, or a
        ``progress`` that is not True or False.
    """
    valid = sorted({f.name for f in dataclasses.fields(RankSettings)} - {"no_progress"} | {"progress"})
    for key in options:
        if key not in valid and key != "no_progress":
            raise ValueError(f"unknown rank_prompts setting {key!r}; valid: {', '.join(valid)}")
    options = dict(options)
    if "no_progress" in options:
        if "progress" in options:
            raise ValueError("rank_prompts got both progress= and no_progress=; pass progress= alone "
                             "(progress=False hides the progress bar)")
        warnings.warn("rank_prompts(no_progress=...) is deprecated: pass progress=False to hide the progress bar "
                      "(as gradprobe.probe does); progress=True, the default, shows it", DeprecationWarning,
                      stacklevel=3)
        return options
    if "progress" in options:
        progress = options.pop("progress")
        if not isinstance(progress, bool):
            raise ValueError(f"progress must be True or False, got {progress!r}")
        options["no_progress"] = not progress
    return options
