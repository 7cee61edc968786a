"""User sequence rewards with TRL's signature, plugged in unchanged.

A TRL reward function (``GRPOTrainer(reward_funcs=...)``) is called as
``fn(prompts, completions, **columns) -> list[float | None]``; :func:`sequence_reward` wraps
one into a :data:`~gradprobe.rewards.base.Reward`: rewards are group-normalised like
``outcome`` and broadcast over each completion's tokens. None or NaN means "no reward": the
row is masked and counted, never silently zero (DESIGN.md, "Pitfalls"). For conversational data (TRL's list of
``{"role", "content"}`` messages as the prompt) ``prompts`` and ``completions`` take TRL's conversational shapes
(:func:`trl_prompts_and_completions`), so a reward written for such a dataset reads ``c[0]["content"]`` here too.

Example
-------
>>> def brevity(prompts, completions, **kwargs):
...     return [1.0 if len(c) < 200 else 0.0 for c in completions]
>>> reward = sequence_reward(brevity)            # doctest: +SKIP
>>> out = reward(batch, ctx)                     # doctest: +SKIP
>>> out.advantages.shape == batch.completion_mask.shape   # doctest: +SKIP
True
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import signal
import threading
import warnings

import numpy as np
import torch

from ..grpo.advantages import DEFAULT_SCALE, check_scale
from ..tables import shown
from ..tasks.columns import DATA_COLUMNS, TRL_KEYWORDS
from ..types import RolloutBatch
from .base import RewardContext, RewardFunctionError, RewardOutput
from .outcome import normalize_sequence_rewards


def trl_columns(batch: RolloutBatch) -> dict[str, list]:
    """The keyword columns passed to a TRL-style reward, each a list of length N (one value per completion, in row
    order: completion ``n`` is of problem ``n // G``).

    ``answer`` (the gold answer as the task's verifier reads it), ``problem_id``, ``completion_ids`` (list[int] per
    row, padding excluded, as TRL passes them); every key of the problems' ``metadata`` (``jsonl:`` and ``hf:``
    data: the loader's ``source``, the file, ``row``, ``prompt_format``, ``solution``, and the data's scalar
    columns; a task's ``expression``); and each key of ``metadata["data_columns"]`` (the data's other columns:
    lists, objects, nulls, and those named as a loader key; :func:`gradprobe.tasks.dataset._keep_columns`), so that
    every column but the mapped prompt or question, answer and solution ones arrives under its own name, as TRL's
    ``GRPOTrainer`` passes every dataset column. A list or object value of ``data_columns`` is a copy per
    completion, so a reward that changes it changes neither the problem nor another reward's column.

    A name takes one source for the whole batch: a ``data_columns`` key wins over a metadata key of that name (a
    data column ``source`` is passed, not the file), and a problem without it gets None, as it gets for a metadata
    key it lacks. The names gradprobe passes itself (:data:`gradprobe.tasks.columns.TRL_KEYWORDS`: ``prompts``,
    ``completions`` and the three above) are never taken from the data or the metadata: the reward gets each once,
    gradprobe's value, where a data column of that name in TRL is either replaced too (``completion_ids``) or a
    ``TypeError`` (multiple values for ``prompts``); ``answer`` stays the gold the probe's scores use. The loader
    warns once about such a column, which stays in ``Problem.metadata`` for Python readers, rather than refusing the
    data, whose other rewards do not need it.
    """
    g = batch.group_size
    rows = [batch.problems[n // g] for n in range(batch.num_rows)]
    held = [p.metadata.get(DATA_COLUMNS) for p in rows]
    held = [d if isinstance(d, dict) else {} for d in held]
    data_keys = [k for k in dict.fromkeys(k for d in held for k in d) if k not in TRL_KEYWORDS]
    keys = [k for k in dict.fromkeys(k for p in batch.problems for k in p.metadata)
            if k not in TRL_KEYWORDS and k != DATA_COLUMNS and k not in data_keys]
    cols = {key: [p.metadata.get(key) for p in rows] for key in keys}
    cols.update({key: [copy.deepcopy(d.get(key)) for d in held] for key in data_keys})
    lengths = batch.completion_lengths.tolist()
    comp = batch.completion_ids
    cols["answer"] = [p.answer for p in rows]
    cols["problem_id"] = [p.id for p in rows]
    cols["completion_ids"] = [comp[n, : lengths[n]].tolist() for n in range(batch.num_rows)]
    return cols


#: reward names told (once per process) that they get TRL's conversational shapes (:func:`trl_prompts_and_completions`)
_TOLD_CONVERSATIONAL: set[str] = set()


def _conversational(problem) -> bool:
    """Whether ``problem``'s prompt is TRL's conversational format: a list of messages, which the loaders mark as a
    :class:`~gradprobe.tasks.columns.PromptText` of ``prompt_format`` ``"conversational"`` (and which
    :func:`gradprobe.tasks.prompts.format_prompt` renders through the chat template)."""
    return getattr(problem.question, "prompt_format", None) == "conversational"


def trl_prompts_and_completions(batch: RolloutBatch, name: str = "reward") -> tuple[list, list]:
    """``(prompts, completions)`` as TRL's ``GRPOTrainer`` passes them to a reward function, each a list of length
    N = B * G in row order (completion ``n`` is of problem ``n // G``).

    Plain data (a string prompt, a bare question, a built-in task): ``prompts[n]`` is the problem's
    ``Problem.question`` (the prompt as the data gives it, before gradprobe's instruction or chat template) and
    ``completions[n]`` the decoded completion, both strings. Conversational data (every problem's prompt a list of
    ``{"role", "content"}`` messages): ``prompts[n]`` is that list of messages (a copy per completion, so a reward
    that changes it changes neither the problem nor another row) and ``completions[n]`` is
    ``[{"role": "assistant", "content": text}]``, as TRL's ``GRPOTrainer._generate`` builds them for a
    conversational batch (``is_conversational`` of the first prompt, ``trl/data_utils.py``) and
    ``_calculate_rewards`` passes them (TRL ``main`` at f2cd577, ``trl/trainer/grpo_trainer.py``). The first
    conversational batch of each reward ``name`` warns once (``UserWarning``) that it gets these shapes: a reward
    written for strings would read them wrongly without an error (``len(c)`` is 1 for every completion).

    Raises
    ------
    RewardFunctionError
        The batch mixes conversational and plain prompts (a ``jsonl:`` file whose prompt column holds both): TRL
        takes one shape for the whole batch, read off its first prompt, and its datasets refuse a column of mixed
        types, so no shape is TRL's; the message names ``name``, a problem of each kind and the fix.
    """
    g = batch.group_size
    chat = [_conversational(p) for p in batch.problems]
    if any(chat) and not all(chat):
        first_chat, first_plain = chat.index(True), chat.index(False)
        raise RewardFunctionError(
            f"reward {name!r}: this batch mixes conversational prompts (problem "
            f"{batch.problems[first_chat].id!r}: a list of messages) and plain ones (problem "
            f"{batch.problems[first_plain].id!r}: a string); TRL passes one shape per batch and its datasets refuse a "
            "prompt column of mixed types: write every prompt of the data as a list of {'role', 'content'} "
            "messages, or every one as a string")
    rows = [batch.problems[n // g] for n in range(batch.num_rows)]
    if not any(chat):
        return [p.question for p in rows], list(batch.completions)
    if name not in _TOLD_CONVERSATIONAL:  # once per reward and process: a reward written for strings fails or reads 1
        _TOLD_CONVERSATIONAL.add(name)
        warnings.warn(f"reward {name!r}: conversational data, so it gets TRL's conversational shapes: prompts[n] a "
                      "list of {'role', 'content'} messages, completions[n] [{'role': 'assistant', 'content': text}] "
                      "(read the text as completions[n][0]['content']); a reward written for strings reads them "
                      "wrongly (len(c) is 1, c.startswith raises)", UserWarning, stacklevel=2)
    prompts = [copy.deepcopy(list(p.question.messages)) for p in rows]
    return prompts, [[{"role": "assistant", "content": text}] for text in batch.completions]


def _to_float(value, name: str, index: int) -> float:
    """One completion's reward as a float: None as NaN (no reward), a bool (Python's or numpy's: ``list(arr ==
    gold)`` holds ``np.True_``) as 1.0 or 0.0, a number or a one-value tensor as its value; RewardFunctionError
    naming the reward, the index and the type for anything else."""
    if value is None:
        return math.nan
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or isinstance(value, numbers.Real):  # np.bool_ is not numbers.Real
        return float(value)
    raise RewardFunctionError(f"reward {name!r} returned {type(value).__name__} {value!r} at index {index}; "
                              "expected a number or None")


def _row_values(values, name: str, rows: int):
    """``values``, a TRL-style reward's return; an array (a torch tensor, a numpy array: anything with ``shape`` and
    ``tolist``) as the list of its values when its shape is (K,) or (K, 1) (a model's one-logit head), the length K
    checked by the caller. Tensors and numpy arrays take this one path, so neither is read in an order the
    completions do not have.

    Raises
    ------
    RewardFunctionError
        An array of any other shape ((G, B), (B, G), (1, N), 0-d): flattening it would put its values on the wrong
        completions, or on none; the message names the reward, the shape and the one accepted."""
    shape = getattr(values, "shape", None)
    if shape is None or not hasattr(values, "tolist") or isinstance(values, (str, bytes, dict)):
        return values
    shape = tuple(shape)
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return [row[0] if isinstance(row, list) else row for row in values.tolist()]
    raise RewardFunctionError(f"reward {name!r} returned a {type(values).__module__}.{type(values).__qualname__} "
                              f"of shape {shape}; expected one value per completion in row order (completions[n] "
                              f"is row n): shape ({rows},) or ({rows}, 1), a list of {rows} floats or None")


def one_line(e: BaseException, limit: int = 300) -> str:
    """``TYPE: MESSAGE`` of an exception a reward raised, on one line: line breaks in the message (a completion's
    text quoted in it) written as ``\\n``, other control characters (a terminal's escape sequence) and lone
    surrogates escaped as :func:`gradprobe.tables.shown` writes them, and the text cut at ``limit`` characters with
    "...", so the error the command prints stays the one line it promises and prints as text."""
    text = shown(str(e.code if isinstance(e, SystemExit) else e))
    return f"{type(e).__name__}: {text if len(text) <= limit else text[:limit] + '...'}"


def call_reward(fn, name: str, *args, **kwargs):
    """``fn(*args, **kwargs)``, a user reward's call, with what it raises named as that reward's error.

    An Exception, a SystemExit (``sys.exit()`` would end the command without a word) or a KeyboardInterrupt that no
    SIGINT caused (a bare ``raise KeyboardInterrupt`` in the reward: not the user's Ctrl-C) becomes a
    :class:`RewardFunctionError` naming ``name`` (the cause chained). A KeyboardInterrupt stays one when a SIGINT
    reached this process during the call (told by a handler installed for the call, which runs Python's default
    one), when it is a subclass (a SIGTERM raised as an interrupt: ``gradprobe study``/``probe``'s handlers), or when
    SIGINT has a handler other than Python's default (someone else's: whether it raised cannot be told). In a thread
    other than the main one, or while SIGINT is ignored (a study's pool worker), no SIGINT raises there, so a bare
    KeyboardInterrupt is the reward's.
    """
    main = threading.current_thread() is threading.main_thread()  # signal.signal works only there
    disposition = signal.getsignal(signal.SIGINT) if main else signal.SIG_IGN
    seen: list[int] = []
    wrapped = disposition is signal.default_int_handler

    def on_sigint(signum, frame):
        seen.append(signum)
        signal.default_int_handler(signum, frame)

    if wrapped:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt as e:
        if seen or type(e) is not KeyboardInterrupt or not (wrapped or disposition is signal.SIG_IGN):
            raise
        raise RewardFunctionError(f"reward {name!r} raised {one_line(e).rstrip(': ')} (no SIGINT or Ctrl-C reached "
                                  "the process: the reward raised it itself)") from e
    except (Exception, SystemExit) as e:  # SystemExit: a sys.exit() in the reward would end the command silently
        raise RewardFunctionError(f"reward {name!r} raised {one_line(e)}") from e
    finally:
        if wrapped:
            signal.signal(signal.SIGINT, disposition)


def _required_missing(fn, columns: dict) -> list[str]:
    """The parameters ``fn`` requires (no default, not ``*args``/``**kwargs``) that ``columns`` does not hold."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in columns]


def _keywords_accepted(fn) -> set[str] | None:
    """The keyword parameters ``fn`` names, or None when it takes ``**kwargs`` (or has no signature to read)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def sequence_reward(fn, *, name: str | None = None, scale: str = DEFAULT_SCALE):
    """Wrap a TRL-style sequence reward into a :data:`~gradprobe.rewards.base.Reward`.

    Parameters
    ----------
    fn : callable
        ``fn(prompts, completions, **columns) -> list[float | None]`` (or a tensor or numpy array of shape (N,) or
        (N, 1)), called by keyword as TRL's ``GRPOTrainer`` calls its reward functions (so
        ``fn(completions, **kwargs)`` works too; a ``fn`` without ``**kwargs``, ``fn(completions)``, gets only the
        keywords it names, where TRL would raise TypeError); ``prompts`` and ``completions`` in TRL's shapes
        (:func:`trl_prompts_and_completions`): for plain data ``prompts[n]`` is the problem's question (the dataset
        prompt, before the chat template) and ``completions[n]`` the decoded completion, for conversational data
        ``prompts[n]`` is the list of messages and ``completions[n]`` ``[{"role": "assistant", "content": text}]``;
        ``columns`` as in :func:`trl_columns`; all lists have length N = B * G in row order.
    name : str, optional
        Reported name (default ``fn.__name__``).
    scale : {"group", "batch", "none"}
        Normalisation, a key of :data:`gradprobe.grpo.advantages.SCALES`
        (:func:`gradprobe.grpo.advantages.group_normalize`).

    Returns
    -------
    Reward
        ``reward(batch, ctx) -> RewardOutput`` with ``advantages`` (N, T) float64,
        ``generated_tokens`` {} and ``stats`` (``missing``, ``zero_variance_groups``,
        ``mean_reward`` over valid rows).

    Raises
    ------
    RewardFunctionError
        (when the reward is called) the batch mixes conversational and plain prompts
        (:func:`trl_prompts_and_completions`), ``fn`` requires a parameter no column gives (the columns it could
        name are listed), raised (chained as ``__cause__``; ``SystemExit`` too; the message on one line,
        :func:`one_line`), returned a non-sequence (a dict too; None as a whole: None means no reward for one
        completion), a sequence of the wrong length, a tensor or numpy array of a shape other than (N,) or (N, 1)
        (:func:`_row_values`: a (G, B) table is not read in another order), or a non-numeric value (a bool, numpy's
        too, is 1.0 or 0.0).
    ValueError
        Unknown ``scale``.
    TypeError
        ``fn`` is not callable, or ``name`` is neither a string nor None (when wrapped, not first when probed).
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable reward function f(prompts, completions, **columns), got {fn!r} "
                        f"({type(fn).__name__})")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a string or None, got {name!r} ({type(name).__name__})")
    check_scale(scale, field="sequence_reward scale")
    reward_name = name or getattr(fn, "__name__", None) or repr(fn)
    accepts = _keywords_accepted(fn)

    def reward(batch: RolloutBatch, ctx: RewardContext | None = None) -> RewardOutput:
        prompts, completions = trl_prompts_and_completions(batch, reward_name)
        columns = {"prompts": prompts, "completions": completions, **trl_columns(batch)}
        missing = _required_missing(fn, columns)
        if missing:
            raise RewardFunctionError(f"reward {reward_name!r} requires column(s) {missing}, which this task does not "
                                      f"give; it gives {sorted(columns)} (by keyword, as TRL passes a dataset's "
                                      "columns): use one of those, or give the parameter a default")
        if accepts is not None:
            columns = {k: v for k, v in columns.items() if k in accepts}
        values = _row_values(call_reward(fn, reward_name, **columns), reward_name, batch.num_rows)  # as TRL calls
        if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
            raise RewardFunctionError(f"reward {reward_name!r} returned {type(values).__name__}; expected a list of "
                                      f"{batch.num_rows} values, one per completion: a float, or None for no reward "
                                      "for that completion (the return itself must be a list)")
        if len(values) != batch.num_rows:
            raise RewardFunctionError(f"reward {reward_name!r} returned {len(values)} values for {batch.num_rows} "
                                      "completions (N = B * G); return one float or None per completion")
        r = torch.tensor([_to_float(v, reward_name, i) for i, v in enumerate(values)], dtype=torch.float64)
        adv, valid, stats = normalize_sequence_rewards(r, batch, scale=scale)
        return RewardOutput(name=reward_name, advantages=adv, valid=valid, generated_tokens={}, stats=stats)

    reward.__name__ = f"sequence_reward_{reward_name}"
    reward.__doc__ = f"Sequence reward {reward_name!r} (TRL signature), {scale}-normalised."
    reward.sequence_source = (fn, scale)  # what it wraps: the reward's identity (gradprobe.rewards.base._where)
    return reward
