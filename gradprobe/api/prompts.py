"""``gradprobe.rank_prompts(...)``: ``gradprobe rank-prompts`` as a function returning a DataFrame.

The settings, their defaults and their checks are the command's own (read from its parser in
:func:`gradprobe.difficulty.cli.add_difficulty_parsers`, never restated here), and the work is the
command's (:func:`gradprobe.difficulty.cli.rank_prompts`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

__all__ = ["rank_prompts"]


class _RaisingParser(argparse.ArgumentParser):
    """An argparse parser whose errors raise ValueError instead of exiting the interpreter."""

    def error(self, message):
        raise ValueError(message)


def _rank_args(model: str, task: str, pool: int, out: Path, options: dict) -> argparse.Namespace:
    from ..difficulty.cli import add_difficulty_parsers

    parser = _RaisingParser(prog="gradprobe.rank_prompts")
    add_difficulty_parsers(parser.add_subparsers(dest="command", parser_class=_RaisingParser))
    sub = parser._subparsers._group_actions[0].choices["rank-prompts"]
    by_dest = {a.dest: a for a in sub._actions if a.option_strings and a.dest != "help"}
    argv = ["rank-prompts", "--model", str(model), "--task", str(task), "--pool", str(pool), "--out", str(out)]
    for key, value in options.items():
        action = by_dest.get(key)
        if action is None or key in ("model", "task", "pool", "out"):
            valid = sorted(set(by_dest) - {"model", "task", "pool", "out"})
            raise ValueError(f"unknown rank_prompts setting {key!r}; valid: {', '.join(valid)}")
        flag = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            argv += [flag] if value else []
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(map(str, value))]
        elif value is not None:
            argv += [flag, str(value)]
    try:
        return parser.parse_args(argv)
    except ValueError as e:
        raise ValueError(f"rank_prompts: {e}") from None


def rank_prompts(model: str, task: str, pool: int, *, out: str | Path | None = None, **options):
    """Predict each pool prompt's success probability under the policy and rank the pool nearest 1/2 first.

    What ``gradprobe rank-prompts`` does (DESIGN.md, "Prompt difficulty"): features of the ``pool``
    training prompts (``task.problems("train", pool, seed=data_seed)``; one batched forward, charged
    ``selection``), ``probe_samples`` sampled completions of ``fit_prompts`` of them (charged
    ``selection``) to fit the logistic model and the posteriors, p_hat for every prompt.

    Parameters
    ----------
    model : str
        ``tiny``, ``tiny-qwen2``, ``smollm2-135m``, a folder, ``.gguf`` file or hub id.
    task : str
        Task spec, e.g. ``chain_sum:min_terms=2,max_terms=4``.
    pool : int
        N, pool prompts (>= 1).
    out : path, optional
        Also keep ``ranking.csv`` and ``rank.json`` there (default: nothing is kept).
    **options
        The command's options by their Python names, with its defaults: ``probe_samples`` (k, 4),
        ``fit_prompts`` (64), ``prior_strength`` (8.0), ``decay`` (0.9), ``metadata_keys``,
        ``data_seed``, ``seed``, ``max_new_tokens``, ``temperature``, ``batch_size``,
        ``feature_batch_size``, ``device``, ``dtype``, ``skip_malformed``, ``no_progress``.

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
        An unknown option (the valid names are listed), a bad value (the option is named), an
        unknown task, an empty pool, duplicate prompt ids.
    OSError
        ``out`` cannot be written (before any compute).
    gradprobe.models.ModelNotFoundError
        Unknown model.
    """
    import pandas as pd

    from ..difficulty.cli import rank_prompts as rank_command
    from ..training.checkpoint import removed_if_left_empty

    temporary = out is None
    folder = Path(tempfile.mkdtemp(prefix="gradprobe_rank_")) if temporary else Path(out)
    try:
        args = _rank_args(model, task, pool, folder, options)  # refuses bad options before any compute
        with removed_if_left_empty(None if temporary else folder), contextlib.redirect_stdout(io.StringIO()):
            rank_command(args)  # its summary lines go to .attrs instead of stdout
        table = pd.read_csv(folder / "ranking.csv")
        table.attrs.update(json.loads((folder / "rank.json").read_text()))
    finally:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
    return table
