"""Checks of a run's prompts and off-context guidance before anything is written: shared by ``gradprobe train``
(:func:`gradprobe.training.run.run_training`, before the run folder is created) and ``gradprobe
study`` (:func:`gradprobe.study.preflight.check_plan_inputs`, before the study folder is touched).

An arm with ``guidance`` (:mod:`gradprobe.rollout.guided`) samples part of each group with a hint
taken from the problem's reference solution. Two inputs make such an arm unusable, and without
these checks a run finds out only at its first update, after ``config.json`` and the update-0 eval
were written:

* a problem of the training pool has no reference solution (e.g. ``jsonl:`` data without a
  solution column: :func:`gradprobe.tasks.solutions.reference_solution`);
* the model's prompt format drops the hint (a chat template that renders only part of the user
  message: the hinted prompt encodes to the plain prompt's ids, so the arm would be plain GRPO;
  :func:`gradprobe.rollout.guidance.check_hint_reaches_prompt`).

An arm whose ``fraction`` gives no guided completion per group (``k = 0``) samples no hint and is
not checked, as its run never asks for one.

Every run's training pool and held-out set are checked against the samplers' length rule
(:func:`check_run_prompt_lengths`): a prompt that with ``[sampling] max_new_tokens`` passes the model's context
stopped the run at the first update that drew it, and leaving its row out of the data file then made the
resume refuse the edited file, so the updates made were lost. A guided arm's pool is checked a second time with
its hints (the prompts its guided rollouts are sampled from, longer than the plain ones); an arm without guidance
(or whose ``fraction`` gives no guided completion) costs no second encoding.
"""

from __future__ import annotations

from typing import Iterable

from ..rollout.base import MODEL_CONTEXT
from ..rollout.guidance import (GUIDANCE_LABEL, GuidanceConfig, GuidanceError, check_hint_reaches_prompt,
                                hint_text, task_kind)
from ..rollout.prompt_lengths import check_prompt_lengths, hinted_questions

__all__ = ["GuidancePreflightError", "check_run_guidance", "check_run_prompt_lengths", "check_hinted_prompt_lengths",
           "guidance_key"]

class GuidancePreflightError(GuidanceError):
    """A guided arm cannot run with this task or model (a :class:`~gradprobe.rollout.guidance.GuidanceError`,
    hence a ValueError).

    Attributes
    ----------
    key : str
        The plan key at fault, ``"[arms.NAME] guidance"``.
    reason : str
        What is wrong and its fix (from the guidance layer), without the key.
    """

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


def guidance_key(arm: str) -> str:
    """The plan key of arm ``arm``'s guidance as the refusals name it: ``"[arms.NAME] guidance"``."""
    return f"[arms.{arm}] guidance"


def check_run_guidance(runs: Iterable, task, tokenizer, problems: list) -> None:
    """Refuse a guided run that would fail, or silently be plain GRPO, at its first update.

    Parameters
    ----------
    runs : iterable of gradprobe.training.plan.RunConfig
        The runs to check (``gradprobe train``: its one run; a study: one run per arm). Runs
        without ``guidance``, or whose ``fraction`` gives no guided completion per group
        (:meth:`GuidanceConfig.guided_per_group` of ``train.group`` is 0), are skipped.
    task : gradprobe.tasks.Task
        The built task (its ``reference_solution``, if it has one, is used).
    tokenizer : transformers tokenizer
        The model's tokenizer, with its chat template.
    problems : list of Problem
        The training problems the run draws from (its pool); each must have a reference
        solution, and the first with a non-empty hint must keep it in its encoded prompt.

    Raises
    ------
    GuidancePreflightError
        ``"[arms.NAME] guidance: <reason>"``: a problem without a reference solution (the
        message names the problem and the fix: map a solution column, or remove guidance), or a
        prompt format that drops the hint (the fix: a model that reads its whole prompt, or
        remove guidance). Nothing has been computed or written when it is raised.
    """
    for run in runs:
        if not run.guidance:
            continue
        config = GuidanceConfig(**run.guidance)
        if config.guided_per_group(run.train.group) == 0:
            continue
        kind = task_kind(run.task.name)
        try:
            hints = [hint_text(p, kind, config, task) for p in problems]
            first = next((i for i, h in enumerate(hints) if h), None)
            if first is not None:
                check_hint_reaches_prompt(tokenizer, problems[first], hints[first])
        except GuidanceError as e:
            reason = str(e)
            # guidance_key names the arm's guidance already (else "[arms.x] guidance: guidance: ...")
            reason = reason[len(GUIDANCE_LABEL):] if reason.startswith(GUIDANCE_LABEL) else reason
            raise GuidancePreflightError(guidance_key(run.arm), reason) from None


def check_run_prompt_lengths(max_new_tokens: int, tokenizer, pool: list, heldout: list, *, limit: int | None,
                             what: str = MODEL_CONTEXT, when: str = "", runs: Iterable = (), task=None) -> None:
    """Refuse a run whose training pool or held-out set holds a prompt that does not fit the model's context
    with ``max_new_tokens`` (:func:`gradprobe.rollout.prompt_lengths.check_prompt_lengths`: the samplers' rule,
    the prompts encoded as the rollouts and evals encode them), before the run samples anything; for a guided run
    among ``runs``, its pool's hinted prompts too (:func:`check_hinted_prompt_lengths`).

    Parameters
    ----------
    max_new_tokens : int
        ``[sampling] max_new_tokens``: every rollout, MC continuation and eval of the run samples with it.
    tokenizer : transformers tokenizer
        The model's, with its chat template.
    pool, heldout : list of Problem
        The run's training pool (:func:`gradprobe.training.loading.training_pool`) and held-out set.
    limit : int or None
        The context limit (tokens; :func:`gradprobe.training.loading.load_run_context_limit`, or a loaded
        model's); None: nothing is refused.
    what : str
        The limit's name in the message.
    when : str
        Said in the message: what the refusal comes before (``"checked before update 0; nothing was sampled"``).
    runs : iterable of gradprobe.training.plan.RunConfig
        The runs that sample from ``pool`` (``gradprobe train``: its one run; a study: one per arm); the guided
        ones' hinted prompts are checked too (:func:`check_hinted_prompt_lengths`). Empty: plain prompts only.
    task : gradprobe.tasks.Task, optional
        The built task (its ``reference_solution``, if it has one, gives the hints).

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) The first prompt of the pool (then of the held-out set, then the pool's first hinted prompt
        of a guided run) that does not fit: its data file's line (or id and index), token count, the limit, the
        fix, and how many more do not fit.
    """
    check_prompt_lengths(tokenizer, pool, max_new_tokens=max_new_tokens, limit=limit, what=what,
                         role="training pool", when=when)
    check_prompt_lengths(tokenizer, heldout, max_new_tokens=max_new_tokens, limit=limit, what=what,
                         role="held-out set", when=when)
    check_hinted_prompt_lengths(runs, task, max_new_tokens, tokenizer, pool, limit=limit, what=what, when=when)


def check_hinted_prompt_lengths(runs: Iterable, task, max_new_tokens: int, tokenizer, pool: list, *,
                                limit: int | None, what: str = MODEL_CONTEXT, when: str = "") -> None:
    """Refuse a guided run whose pool holds a problem whose hinted prompt (question plus the first lines of its
    reference solution, :func:`gradprobe.rollout.prompt_lengths.hinted_questions`: what its guided rollouts are
    sampled from) does not fit the model's context with ``max_new_tokens``, by the rule of the plain prompts
    (:func:`gradprobe.rollout.prompt_lengths.check_prompt_lengths`). Without it such a run failed at the first
    update that drew the problem for a guided completion, after the updates before it were computed.

    Runs without ``guidance``, or whose ``fraction`` gives no guided completion per group (k = 0), sample no hint
    and are skipped: they cost nothing here. Runs whose hints are alike (the same ``prefix``) are checked once,
    named together. A problem without a hint (none for its reference solution, or an empty one: its guided prompt
    is its plain one) is not checked here (:func:`check_run_guidance` refuses a missing solution).

    Parameters
    ----------
    runs : iterable of gradprobe.training.plan.RunConfig
    task : gradprobe.tasks.Task or None
        The built task (its ``reference_solution``, if it has one).
    max_new_tokens : int
        ``[sampling] max_new_tokens`` (tokens).
    tokenizer : transformers tokenizer
        The model's, with its chat template.
    pool : list of Problem
        The runs' training pool.
    limit : int or None
        The context limit (tokens); None: nothing is refused (and nothing encoded).
    what, when : str
        As :func:`check_run_prompt_lengths`.

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) The first problem, in data order, whose hinted prompt does not fit: its data file's line (or
        id and index), the arm(s) whose guidance gives the hint (``[arms.NAME] guidance (prefix P)``), its token
        count, the limit, the fixes (a lower ``max_new_tokens``, a shorter question, a smaller prefix) and how many
        of the pool's hinted prompts do not fit.
    """
    if limit is None:
        return
    by_prefix: dict[tuple, list] = {}
    for run in runs:
        if not run.guidance:
            continue
        config = GuidanceConfig(**run.guidance)
        if config.guided_per_group(run.train.group) > 0 and config.prefix > 0:
            by_prefix.setdefault((task_kind(run.task.name), config.prefix), []).append((run.arm, config))
    for (kind, prefix), arms in by_prefix.items():
        questions = hinted_questions(pool, kind, arms[0][1], task)
        if not any(q is not None for q in questions):
            continue
        names = " and ".join(guidance_key(arm) for arm, _ in arms)
        check_prompt_lengths(tokenizer, pool, max_new_tokens=max_new_tokens, limit=limit, what=what,
                             role="training pool", when=when, questions=questions,
                             hinted=f"{names} (prefix {prefix:g})")
