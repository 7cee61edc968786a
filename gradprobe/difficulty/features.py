"""Features of a prompt for the difficulty estimator: what the policy itself makes of it, plus metadata.

Two blocks, concatenated column-wise by :func:`prompt_features`:

``hidden``    the mean over the prompt's non-pad tokens of the policy's LAST hidden state (the output
              of the decoder stack, after its final norm: ``base_model(...).last_hidden_state``), one
              no-grad forward per micro-batch of left-padded prompts, position ids from the attention
              mask (so a row's features do not depend on the other rows' lengths), float64;
``metadata``  the prompt length in tokens, then the task metadata named by ``metadata_keys``
              (reasoning-gym's ``num_terms`` / ``num_digits`` for chain_sum and basic_arithmetic);
              a key a problem lacks is NaN (imputed by the estimator with the fit-time mean).

Cost (DESIGN.md, "The compute ledger"): the prompt tokens read are charged to the ``selection``
category (tokens a prompt-selection rule generated or read), their FLOPs to ``flops["selection"]``
(:func:`gradprobe.ledger.forward_flops_per_token` per token at the mean causal context (L + 1) / 2 of
a prompt of L tokens; an upper bound by the unembedding matmul, which the pass skips), the wall
time to ``device_seconds["selection"]``.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..ledger import forward_flops_per_token
from ..logprobs import position_ids_from_mask
from ..models import use_attention
from ..rollout.base import PromptTooLongError
from ..rollout.hf import _context_length
from ..tasks.prompts import encode_prompt
from ..tasks.base import data_row
from .metadata import check_metadata_keys, is_numeric, prompt_place


__all__ = ["DEFAULT_METADATA_KEYS", "check_problems", "check_prompt_lengths", "hidden_features", "metadata_features",
           "prompt_features", "feature_names"]

#: Task metadata used by default (reasoning-gym arithmetic tasks provide both).
DEFAULT_METADATA_KEYS = ("num_terms", "num_digits")


def check_prompt_lengths(model, prompt_ids: Sequence[Sequence[int]], problems=None) -> None:
    """Refuse prompts longer than the model's context before the feature forward reads them.

    The forward of :func:`hidden_features` reads each prompt whole: a prompt past the model's
    ``max_position_embeddings`` (the limit the samplers check, :func:`gradprobe.rollout.hf._context_length`) is
    read at positions the model never saw, and one of 800k tokens made the attention ask for 640 GB.

    Parameters
    ----------
    model : transformers causal LM
        Its ``config`` (``max_position_embeddings``; no limit known: no check).
    prompt_ids : sequence of sequences of int, length M
        Unpadded prompt token ids.
    problems : list[Problem], length M, optional
        Name the prompt by its id and data line (:func:`gradprobe.difficulty.metadata.prompt_place`); default: by
        its index.

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) A prompt has more tokens than the limit: names the first such prompt (in data order), its
        length, the limit, how many prompts are longer, and the fix (shorten it or leave it out of the pool).
    """
    limit = _context_length(model)
    long = [] if limit is None else [i for i, p in enumerate(prompt_ids) if len(p) > limit]
    if not long:
        return
    if problems is not None and len(problems) != len(prompt_ids):
        problems = None  # mismatched (metadata_features refuses it): name by index
    i = long[0] if problems is None else min(long, key=lambda k: data_row(problems[k]))
    name = f"prompt {i} (of {len(prompt_ids)})" if problems is None else prompt_place(problems[i])
    raise PromptTooLongError(
        f"{name} has {len(prompt_ids[i])} tokens > the model's max_position_embeddings={limit}, the most the forward "
        f"of the difficulty features reads ({len(long)} of the {len(prompt_ids)} prompts "
        f"{'is' if len(long) == 1 else 'are'} longer): shorten the prompt or leave it out of the prompt pool")


@torch.no_grad()
def hidden_features(policy, prompt_ids: Sequence[Sequence[int]], *, batch_size: int = 32,
                    ledger=None, on_batch: Callable[[int], None] | None = None) -> np.ndarray:
    """Mean-pooled last hidden state of every prompt.

    Parameters
    ----------
    policy : gradprobe.models.Policy
        Its ``model`` (any transformers causal LM with a ``base_model``) and tokenizer pad id.
    prompt_ids : sequence of sequences of int, length M
        Unpadded prompt token ids (:func:`gradprobe.tasks.encode_prompt`).
    batch_size : int
        Prompts per forward (memory knob; the result does not depend on it beyond float rounding).
    ledger : gradprobe.ledger.Ledger, optional
        Charged: ``generated_tokens["selection"]`` += the prompt tokens read (padding excluded),
        ``flops["selection"]`` += tokens x forward FLOPs per token at context (L + 1) / 2,
        ``device_seconds["selection"]`` += the wall time. The prompt tokens are read, not generated: the ledger's
        ``selection`` category counts the tokens a selection rule generated or read (DESIGN.md, "The compute
        ledger"), so they are counted there and the commands say "generated or read".
    on_batch : callable(int), optional
        Called after each forward with the prompts it read (a progress bar's ``update``).

    Returns
    -------
    ndarray (float64), shape (M, d_model)
        h_i = (1 / L_i) sum_t h_it over the L_i prompt tokens.

    Raises
    ------
    ValueError
        ``batch_size < 1`` or an empty prompt (no token to pool).
    gradprobe.rollout.PromptTooLongError
        (a ValueError) A prompt longer than the model's ``max_position_embeddings``, before any forward
        (:func:`check_prompt_lengths`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prompts = [list(p) for p in prompt_ids]
    for i, p in enumerate(prompts):
        if not p:
            raise ValueError(f"prompt {i} is empty: mean-pooling needs at least one token")
    model = policy.model
    check_prompt_lengths(model, prompts)
    d = model.config.get_text_config().hidden_size if hasattr(model.config, "get_text_config") else \
        model.config.hidden_size
    out = np.zeros((len(prompts), d), dtype=np.float64)
    if not prompts:
        return out
    start = time.perf_counter()
    device = next(model.parameters()).device
    pad = policy.tokenizer.pad_token_id if policy.tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    flops = 0.0
    # forward_flops_per_token is affine in the context (2 N + unembedding + 2 n_layer ctx d): two calls, not M
    f0 = forward_flops_per_token(model, 0.0)
    slope = forward_flops_per_token(model, 1.0) - f0
    try:
        with use_attention(model, "sdpa"):
            for lo in range(0, len(prompts), batch_size):
                chunk = prompts[lo: lo + batch_size]
                out[lo: lo + len(chunk)] = _pooled_batch(model, chunk, int(pad), device)
                flops += sum(len(p) * (f0 + slope * (len(p) + 1) / 2) for p in chunk)
                if on_batch is not None:
                    on_batch(len(chunk))
    finally:
        model.train(was_training)
    if ledger is not None:
        ledger.add_generated("selection", sum(len(p) for p in prompts))
        ledger.add_flops("selection", flops)
        ledger.add_seconds("selection", time.perf_counter() - start)
    return out


def _pooled_batch(model, chunk: list[list[int]], pad: int, device) -> np.ndarray:
    """One no-grad forward of the left-padded prompts ``chunk`` (b lists of ids): the mean of each prompt's last
    hidden states over its own tokens (pads never enter), shape (b, d), float64."""
    width = max(len(p) for p in chunk)
    ids = torch.full((len(chunk), width), pad, dtype=torch.long)
    mask = torch.zeros((len(chunk), width), dtype=torch.long)
    for k, p in enumerate(chunk):
        ids[k, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[k, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    kwargs = dict(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask), use_cache=False)
    base = model.base_model
    if base is model:  # no separate decoder stack: ask the LM for its hidden states
        h = model(**kwargs, output_hidden_states=True, logits_to_keep=1).hidden_states[-1]
    else:
        h = base(**kwargs).last_hidden_state  # (b, L, d)
    keep = mask.bool().unsqueeze(-1)
    return (torch.where(keep, h.to(torch.float64), 0.0).sum(1) / keep.sum(1)).cpu().numpy()


def metadata_features(problems, prompt_ids: Sequence[Sequence[int]],
                      keys: Sequence[str] = DEFAULT_METADATA_KEYS, *, check: bool = True) -> np.ndarray:
    """Prompt length and numeric task metadata.

    Parameters
    ----------
    problems : list[Problem], length M
    prompt_ids : sequence of sequences of int, length M
    keys : sequence of str
        ``Problem.metadata`` keys, each once; a missing value (or None) becomes NaN (imputed by the estimator).
    check : bool
        Check (and warn about) the keys here (:func:`gradprobe.difficulty.metadata.check_metadata_keys`); False
        for a chunk of a pool whose keys were checked once, whole (a key absent from one chunk is no news).

    Returns
    -------
    ndarray (float64), shape (M, 1 + len(keys))
        Column 0: prompt length in tokens; then one column per key.

    Raises
    ------
    ValueError
        ``len(problems) != len(prompt_ids)``; a key given twice, or a key whose value in some problem is not
        a number (a string, a bool, a dict...), named with the value, its prompt and the numeric keys
        (:func:`gradprobe.difficulty.metadata.check_metadata_keys`).
    """
    if len(problems) != len(prompt_ids):
        raise ValueError(f"metadata_features: {len(problems)} problems but {len(prompt_ids)} prompts")
    if check:
        check_metadata_keys(problems, keys)
    out = np.full((len(problems), 1 + len(keys)), math.nan, dtype=np.float64)
    for i, (prob, ids) in enumerate(zip(problems, prompt_ids)):
        out[i, 0] = len(ids)
        meta = getattr(prob, "metadata", None) or {}
        for j, k in enumerate(keys):
            v = meta.get(k)
            if is_numeric(v):
                out[i, 1 + j] = float(v)
    return out


def feature_names(d_model: int, keys: Sequence[str] = DEFAULT_METADATA_KEYS) -> list[str]:
    """Column names of :func:`prompt_features`: ``h0..h{d-1}``, ``prompt_tokens``, then the keys."""
    return [f"h{k}" for k in range(d_model)] + ["prompt_tokens", *keys]


def check_problems(problems, name: str = "problems") -> None:
    """Refuse ``problems`` that are not task items (:class:`gradprobe.tasks.Problem`: ``id``, ``question``,
    ``answer``, ``metadata``), before a model reads anything, with the fix (a prompt's text passed as is would
    fail deep inside, with "'str' object has no attribute 'question'").

    Parameters
    ----------
    problems : list[Problem]
        What the caller passed (a list or tuple of task items: ``gradprobe.load_task(spec).problems(split, n)``).
    name : str
        The argument as the user passed it.

    Raises
    ------
    TypeError
        ``problems`` is a string, no list or tuple, or holds an item without a ``question`` (the first is named, with
        its index and type, and with how to make a Problem of a text).
    """
    make = "gradprobe.tasks.Problem(id='p0', question=TEXT, answer='')"
    if isinstance(problems, (str, bytes)) or not isinstance(problems, (list, tuple)):
        text = f"the string {_short(problems)}" if isinstance(problems, (str, bytes)) else \
            f"a {type(problems).__name__} {_short(problems)}"
        raise TypeError(f"{name} must be a list of task items (Problems: gradprobe.load_task(spec).problems(split, "
                        f"n)), got {text}; make a Problem of a prompt's text with {make} (answer: the gold answer, "
                        f"not read by the features) and pass a list of them")
    bad = next((i for i, p in enumerate(problems) if not hasattr(p, "question")), None)
    if bad is not None:
        item = problems[bad]
        if isinstance(item, str):
            make = make.replace("TEXT", _short(item))
        raise TypeError(f"{name}[{bad}] is a {type(item).__name__} ({_short(item)}), not a task item: {name} must be "
                        f"a list of Problems (gradprobe.load_task(spec).problems(split, n)); make a Problem of a "
                        f"prompt's text with {make} (answer: the gold answer, not read by the features)")


def _short(value) -> str:
    """``repr(value)`` cut to 60 characters, for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def prompt_features(policy, problems, *, metadata_keys: Sequence[str] = DEFAULT_METADATA_KEYS,
                    batch_size: int = 32, ledger=None, prompt_ids=None, progress: bool = False,
                    desc: str = "features") -> np.ndarray:
    """[hidden | metadata] features of every problem's prompt under the current policy.

    Parameters
    ----------
    policy : gradprobe.models.Policy
    problems : list[Problem], length M
    metadata_keys : sequence of str
    batch_size : int
        Prompts per forward.
    ledger : Ledger, optional
        Charged as in :func:`hidden_features` (``selection``).
    prompt_ids : list[list[int]], optional
        Already encoded prompts (default: :func:`gradprobe.tasks.encode_prompt` of each question).
    progress : bool
        A tqdm bar on stderr over the prompts read by the forward (rate and ETA), labelled ``desc``.
    desc : str

    Returns
    -------
    ndarray (float64), shape (M, d_model + 1 + len(metadata_keys))

    Raises
    ------
    TypeError
        ``problems`` is not a list of task items (Problems, each with a ``question``): a string, or a list holding
        one (a prompt's text); the message names the first such item and shows how to make a Problem of a text
        (:func:`check_problems`), before any forward.
    ValueError
        As :func:`hidden_features` and :func:`metadata_features` (a metadata key given twice or whose values
        are not numbers); a prompt longer than the model's ``max_position_embeddings``
        (:class:`gradprobe.rollout.PromptTooLongError`, named by its id and data line, :func:`check_prompt_lengths`),
        before any forward.
    """
    check_problems(problems)
    if prompt_ids is None:
        prompt_ids = [list(encode_prompt(policy.tokenizer, p.question)) for p in problems]
    check_prompt_lengths(policy.model, prompt_ids, problems)
    with tqdm(total=len(prompt_ids), desc=desc, unit="prompt", disable=not progress, leave=False) as bar:
        h = hidden_features(policy, prompt_ids, batch_size=batch_size, ledger=ledger, on_batch=bar.update)
    return np.concatenate([h, metadata_features(problems, prompt_ids, metadata_keys)], axis=1)
