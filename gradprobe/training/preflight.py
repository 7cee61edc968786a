"""Checks of a run's off-context guidance before anything is written: shared by ``gradprobe train``
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
"""

from __future__ import annotations

from typing import Iterable

from ..rollout.guidance import (GUIDANCE_LABEL, GuidanceConfig, GuidanceError, check_hint_reaches_prompt,
                                hint_text, task_kind)

__all__ = ["GuidancePreflightError", "check_run_guidance", "guidance_key"]

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
