"""Every prompt a run or probe will sample from, checked against the samplers' length rule before its first rollout.

A sampler refuses a call whose prompt plus ``max_new_tokens`` passes the context limit
(:func:`~gradprobe.rollout.base.check_prompt_ids`), but it sees only the prompts of that call: one over-long
question of a training pool stopped ``gradprobe train`` at whichever update first drew it, possibly hours in,
and leaving the row out of the data then made the run's resume refuse the edited file. :func:`check_prompt_lengths`
applies the same rule (:func:`~gradprobe.rollout.base.exceeds_context`, the same limit,
:func:`sampler_context_limit`) to a whole set of problems at setup, encoded as the rollouts encode them
(:func:`gradprobe.tasks.prompts.encode_prompts`, chat template and BOS included), and names the first prompt that
does not fit by its data file's line (or its id and place in the set), with its token count, the limit and the fix
(a bound on ``max_new_tokens`` that fits the longest prompt of the set, not only the one named).
``gradprobe train`` and ``gradprobe study`` check their pool and held-out set
(:func:`gradprobe.training.preflight.check_run_prompt_lengths`), the probe its batch and held-out prompts
(:func:`gradprobe.probe.prompt_lengths.check_probe_prompts`).

A guided arm (:mod:`gradprobe.rollout.guided`) also samples each problem of its pool from the hinted prompt, the
question plus a prefix of its reference solution, which is longer: :func:`hinted_questions` gives those prompts'
questions (the guided rollouts' own, :func:`~gradprobe.rollout.guidance.hint_text` and
:func:`~gradprobe.rollout.guidance.hinted_question`), and :func:`check_prompt_lengths` checks them by the same rule,
naming the data line, when ``questions`` and ``hinted`` are given.
"""

from __future__ import annotations

from typing import Sequence

from ..tasks.base import data_row, prompt_place
from ..tasks.prompts import encode_prompts
from .base import MODEL_CONTEXT, context_limit, exceeds_context, prompt_too_long
from .guidance import GuidanceConfig, GuidanceError, hint_text, hinted_question

__all__ = ["check_prompt_lengths", "hinted_questions", "sampler_context_limit"]


def sampler_context_limit(sampler, model) -> tuple[int | None, str]:
    """The context limit ``sampler``'s own check compares with and its name (its ``context_limit()``: the
    model's ``max_position_embeddings``, a vLLM engine's ``max_model_len`` too), or, for a sampler without that
    method (a test double, a caller's own backend), the model's (:func:`~gradprobe.rollout.base.context_limit`
    of ``model.config``). None: no limit known, nothing is refused."""
    own = getattr(sampler, "context_limit", None)
    if callable(own):
        return own()
    return context_limit(model.config), MODEL_CONTEXT


def hinted_questions(problems: Sequence, kind: str, guidance: GuidanceConfig, task=None) -> list:
    """The question each problem's guided rollouts are sampled from (:func:`~gradprobe.rollout.guidance
    .hinted_question` with :func:`~gradprobe.rollout.guidance.hint_text`, as
    :func:`gradprobe.rollout.guided.collect_guided_rollouts` builds it), or None where there is no hinted prompt to
    check: an empty hint (the guided prompt is the plain one, checked already), or no hint at all (no reference
    solution, a conversational prompt without a user message: :func:`gradprobe.training.preflight.check_run_guidance`
    refuses those, naming the fix).

    Parameters
    ----------
    problems : sequence of Problem, length M
        The pool a guided arm draws from.
    kind : str
        The task kind (:func:`~gradprobe.rollout.guidance.task_kind` of ``[task] name``).
    guidance : GuidanceConfig
        The arm's settings (``prefix`` sets the hint's length).
    task : Task, optional
        Its ``reference_solution``, when it has one.

    Returns
    -------
    list, length M
        A hinted question (str or PromptText) or None per problem.
    """
    out = []
    for p in problems:
        try:
            hint = hint_text(p, kind, guidance, task)
            out.append(hinted_question(p.question, hint) if hint else None)
        except GuidanceError:
            out.append(None)
    return out


def check_prompt_lengths(tokenizer, problems: Sequence, *, max_new_tokens: int, limit: int | None,
                         what: str = MODEL_CONTEXT, role: str = "prompt pool", when: str = "",
                         questions: Sequence | None = None, hinted: str = "") -> None:
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
    questions : sequence, length M, optional
        The question each problem is sampled from, in place of its own (``Problem.question``): a guided arm's
        hinted questions (:func:`hinted_questions`); None entries are not checked (nor counted).
    hinted : str
        With ``questions``: what gave them, said after the prompt's name (``"[arms.NAME] guidance (prefix 0.5)"``);
        the message then speaks of hinted prompts and names a shorter hint as a fix too.

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) A prompt whose length plus ``max_new_tokens`` passes ``limit``
        (:func:`~gradprobe.rollout.base.exceeds_context`, the samplers' rule): names the first such prompt in data
        order (its file line, or id and index in ``problems``), its length, the limit, the fix, how many of the
        set do not fit. The fix's bound on ``max_new_tokens`` makes every prompt of the set fit: limit minus the
        longest prompt, named as such where it is longer than the first (:func:`~gradprobe.rollout.base
        .prompt_too_long`).
    ValueError
        A prompt the tokenizer cannot render (:func:`gradprobe.tasks.prompts.format_prompt`).
    """
    texts = [p.question for p in problems] if questions is None else list(questions)
    checked = [i for i, q in enumerate(texts) if q is not None]
    ids = dict(zip(checked, encode_prompts(tokenizer, [texts[i] for i in checked])))
    long = [i for i in checked if exceeds_context(len(ids[i]), max_new_tokens, limit)]
    if not long:
        return
    i = min(long, key=lambda k: (data_row(problems[k]), k))
    n, noun = len(checked), "hinted prompt" if hinted else "prompt"
    count = (f"It is the only {noun} of the {role}'s {n} that does not fit" if len(long) == 1 else
             f"{len(long)} of the {role}'s {n} {noun}s do not fit")
    shorter = f"; a smaller prefix in {hinted} gives shorter hints" if hinted else ""
    raise prompt_too_long(i, n, len(ids[i]), max_new_tokens, limit, what,
                          name=f"{_place(problems[i], i, len(problems))} of the {role}"
                               + (f", with its hint from {hinted}," if hinted else ""),
                          note=f" {count}{shorter}{'; ' + when if when else ''}.",
                          longest=max(len(ids[k]) for k in long), longest_name=f"the longest {noun} of the {role}")


def _place(problem, index: int, total: int) -> str:
    """How a refusal names a problem: by its data line (:func:`gradprobe.tasks.base.prompt_place`), or, without
    one, by its id and place in the set checked (``"prompt p3 (index 3 of 8)"``, 0-based)."""
    if data_row(problem) != float("inf") and (getattr(problem, "metadata", None) or {}).get("source"):
        return prompt_place(problem)
    return f"prompt {getattr(problem, 'id', '?')} (index {index} of {total})"
