"""The probe's prompts checked against the samplers' length rule before its first rollout.

:func:`check_probe_prompts` is the probe's counterpart of a training run's setup check
(:func:`gradprobe.training.preflight.check_run_prompt_lengths`): the batch's training prompts (a guided arm's
hinted ones too) and, when the reference update is computed from held-out rollouts, the held-out prompts, each
encoded as the rollouts encode it and compared with the rollout sampler's context limit
(:mod:`gradprobe.rollout.prompt_lengths`). Without it a held-out prompt too long for the context stopped the probe
after its rollouts and rewards (MC continuations included) were computed.
"""

from __future__ import annotations

from ..rollout.guidance import task_kind
from ..rollout.prompt_lengths import check_prompt_lengths, hinted_questions, sampler_context_limit
from .config import ProbeConfig

__all__ = ["check_probe_prompts"]


def check_probe_prompts(config: ProbeConfig, policy, task, sampler) -> None:
    """Refuse a probe whose prompts do not fit the model's context with ``config.sampling.max_new_tokens``, before
    any rollout.

    Parameters
    ----------
    config : ProbeConfig
        ``batch.prompts`` training prompts drawn with ``batch.seed`` (the batch :func:`~gradprobe.probe.stages
        .sample_batch` samples), and ``reference.heldout_prompts`` held-out prompts drawn with the same seed (the
        reference update's, :func:`~gradprobe.probe.direction.reference_update`) unless the reference is a
        direction read from a file. With ``guidance`` (a guided arm with guided completions and a hint), the
        batch's hinted prompts too (:func:`~gradprobe.rollout.prompt_lengths.hinted_questions`: what its guided
        rollouts are sampled from, longer than the plain prompts).
    policy : gradprobe.models.Policy
        Its tokenizer (chat template included) and model (the context limit of a sampler without its own).
    task : gradprobe.tasks.Task
        The probe's task.
    sampler : Sampler
        The rollout sampler (:attr:`gradprobe.probe.stages.Samplers.rollout`): its context limit
        (:func:`~gradprobe.rollout.prompt_lengths.sampler_context_limit`).

    Raises
    ------
    gradprobe.rollout.PromptTooLongError
        (a ValueError) The first prompt that does not fit: its data file's line (or id and index), its tokens, the
        limit and the fix (:func:`~gradprobe.rollout.prompt_lengths.check_prompt_lengths`).
    """
    limit, what = sampler_context_limit(sampler, policy.model)
    if limit is None:
        return
    budget, seed = config.sampling.max_new_tokens, config.batch.seed
    sets = [("probe batch", task.problems("train", config.batch.prompts, seed=seed))]
    if not config.reference.variant.takes_path:
        sets.append(("held-out set", task.problems("heldout", config.reference.heldout_prompts, seed=seed)))
    when = "checked before the probe's first rollout; nothing was sampled"
    for role, problems in sets:
        check_prompt_lengths(policy.tokenizer, problems, max_new_tokens=budget, limit=limit, what=what, role=role,
                             when=when)
    g = config.guidance
    if g is None or g.guided_per_group(config.batch.group) == 0 or not g.prefix:
        return
    batch = sets[0][1]
    check_prompt_lengths(policy.tokenizer, batch, max_new_tokens=budget, limit=limit, what=what, role=sets[0][0],
                         when=when, questions=hinted_questions(batch, task_kind(config.task.spec), g, task),
                         hinted=f"--guidance (prefix {g.prefix:g})")
