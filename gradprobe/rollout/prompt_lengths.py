"""Every prompt a run or probe will sample from, checked against the samplers' length rule before its first rollout.

A sampler refuses a call whose prompt plus ``max_new_tokens`` passes the context limit
(:func:`~gradprobe.rollout.base.check_prompt_ids`), but it sees only the prompts of that call: one over-long
question of a training pool stopped ``gradprobe train`` at whichever update first drew it, possibly hours in,
and leaving the row out of the data then made the run's resume refuse the edited file. :func:`check_prompt_lengths`
applies the same rule (:func:`~gradprobe.rollout.base.exceeds_context`, the same limit,
:func:`sampler_context_limit`) to a whole set of problems at setup, encoded as the rollouts encode them
(:func:`gradprobe.tasks.prompts.encode_prompts`, chat template and BOS included), and names the first prompt that
does not fit by its data file's line (or its id and place in the set), with its token count, the limit and the fix.
``gradprobe train`` and ``gradprobe study`` check their pool and held-out set
(:func:`gradprobe.training.preflight.check_run_prompt_lengths`), the probe its batch and held-out prompts
(:func:`gradprobe.probe.prompt_lengths.check_probe_prompts`).
"""

from __future__ import annotations

from typing import Sequence

from ..tasks.base import data_row, prompt_place
from ..tasks.prompts import encode_prompts
from .base import MODEL_CONTEXT, context_limit, exceeds_context, prompt_too_long

__all__ = ["check_prompt_lengths", "sampler_context_limit"]


def sampler_context_limit(sampler, model) -> tuple[int | None, str]:
    """The context limit ``sampler``'s own check compares with and its name (its ``context_limit()``: the
    model's ``max_position_embeddings``, a vLLM engine's ``max_model_len`` too), or, for a sampler without that
    method (a test double, a caller's own backend), the model's (:func:`~gradprobe.rollout.base.context_limit`
    of ``model.config``). None: no limit known, nothing is refused."""
    own = getattr(sampler, "context_limit", None)
    if callable(own):
        return own()
    return context_limit(model.config), MODEL_CONTEXT


def check_prompt_lengths(tokenizer, problems: Sequence, *, max_new_tokens: int, limit: int | None,
                         what: str = MODEL_CONTEXT, role: str = "prompt pool", when: str = "") -> None:
    """Encode every problem's prompt and refuse the set if one does not fit the context with ``max_new_tokens``.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        The policy's, with its chat template: the prompts are encoded as the rollouts encode them
        (:func:`gradprobe.tasks.prompts.encode_prompts`, one batched call).
    problems : sequence of Problem, length M
        The set a run or probe samples from (its training pool, its held-out set).
    max_new_tokens : int
        The sampling budget every prompt is sampled with (tokens); the MC continuations' prefix plus remaining
        budget is no longer.
    limit : int or None
        The context limit (tokens; :func:`sampler_context_limit`); None: nothing is refused.
    what : str
        The limit's name in the message.
    role : str
        The set's name in the message (``"training pool"``, ``"held-out set"``).
    when : str
        Said in the message after the count: what the refusal came before (``"checked before update 0; nothing
        was sampled"``).

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) A prompt whose length plus ``max_new_tokens`` passes ``limit``
        (:func:`~gradprobe.rollout.base.exceeds_context`, the samplers' rule): names the first such prompt in data
        order (its file line, or id and index), its length, the limit, the fix, how many of the set do not fit.
    ValueError
        A prompt the tokenizer cannot render (:func:`gradprobe.tasks.prompts.format_prompt`).
    """
    ids = encode_prompts(tokenizer, [p.question for p in problems])
    long = [i for i, p in enumerate(ids) if exceeds_context(len(p), max_new_tokens, limit)]
    if not long:
        return
    i = min(long, key=lambda k: (data_row(problems[k]), k))
    n = len(problems)
    count = (f"It is the only prompt of the {role}'s {n} that does not fit" if len(long) == 1 else
             f"{len(long)} of the {role}'s {n} prompts do not fit")
    raise prompt_too_long(i, n, len(ids[i]), max_new_tokens, limit, what,
                          name=f"{_place(problems[i], i, n)} of the {role}",
                          note=f" {count}{'; ' + when if when else ''}.")



def _place(problem, index: int, total: int) -> str:
    """How a refusal names a problem: by its data line (:func:`gradprobe.tasks.base.prompt_place`), or, without
    one, by its id and place in the set checked (``"prompt p3 (index 3 of 8)"``, 0-based)."""
    if data_row(problem) != float("inf") and (getattr(problem, "metadata", None) or {}).get("source"):
        return prompt_place(problem)
    return f"prompt {getattr(problem, 'id', '?')} (index {index} of {total})"
