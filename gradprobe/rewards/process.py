"""Process rewards that cost no continuations: a step verifier checks every reasoning line.

Where a task's reasoning can be checked line by line (chain sums, the arithmetic of GSM8K
solutions), the step values of process supervision need no Monte-Carlo continuations: a
step's reward is 1 when the verifier accepts it and 0 when it does not (the "verifiable
process reward" of Lightman et al. 2023, PRM800K, with the labels from a rule instead of
people). Those per-step rewards go through exactly the code path of ``mc_value``
(:func:`gradprobe.rewards.dense.mc_value_advantages`: group normalisation of all step
rewards of a group, ddof 1, eps 1e-4, then suffix sums over steps; Shao et al. 2024,
DeepSeekMath, sec. 4.1.3), so ``process`` and ``mc_value`` differ only in where the step
values come from.

Registered rewards: ``process`` (process only) and ``process_hybrid_<lam>`` for lam in
:data:`~gradprobe.rewards.dense.HYBRID_WEIGHTS` (0.9, 0.5, 0.1): lam * A(process) +
(1 - lam) * A(outcome), combined by :func:`~gradprobe.rewards.dense.hybrid_advantages` like
``hybrid_<lam>``. Other weights: :func:`make_process_reward` (``lam`` outside [0, 1] is
refused). Cost: no generated tokens (``generated_tokens == {}``); the verifier's wall time is
recorded in ``ledger.device_seconds["reward"]`` (once per batch, shared by all process rewards
of the batch through ``ctx.cache``).

Steps and lines (one rule for rewards and for :func:`trace_fidelity`):

* steps are :func:`gradprobe.rewards.steps.split_steps` of the completion's tokens (newline
  ends a step; blank steps join a neighbour), never merged (no ``max_steps``: a step costs
  nothing here); each non-blank line of a step is given to the verifier;
* a line starting with ``####`` (the answer line) is not a step;
* the verifier returns True (valid), False (invalid) or None (neutral: not a step, e.g. a GSM8K
  sentence without arithmetic); a step is *invalid* if any of its lines is, else *valid* if
  any is, else *neutral*;
* a verifier that raises on a line makes that step *masked*: it gets no step reward, its
  tokens get advantage 0, the run goes on, and it is counted (``verifier_errors``);
* neutral text before a step takes that step's advantage (its tokens precede the step's
  boundary); text after the last scored step (the answer line, EOS) gets 0 from ``process``;
* a completion without any scored step (no parsable step) gets process reward 0: all its
  process advantages are 0, it does not enter its group's statistics, and it is counted
  (``no_step_completions``).

Built-in line verifiers (:data:`STEP_VERIFIERS`, keyed by task kind, the task's ``name``
before any ``":"``): ``chain_sum`` (:func:`chain_sum_line`), ``gsm8k`` and ``gsm_symbolic``
(:func:`arithmetic_line`). Hooks: a task may carry its own ``step_verifier(line, problem,
previous)``; :func:`register_step_verifier` adds a task kind; :func:`make_process_reward`
takes any per-line callable. A model-based process reward (PRM) is in
:mod:`gradprobe.rewards.prm`.

Modules: this one builds and registers the rewards; the line verifiers and their registry are
:mod:`gradprobe.rewards.verifiers` (chain sums) and :mod:`gradprobe.rewards.arithmetic` (GSM8K),
the checking of a batch's steps :mod:`gradprobe.rewards.step_checks`, the trace-fidelity metrics
:mod:`gradprobe.rewards.fidelity`; their public names are re-exported here.
"""

from __future__ import annotations

import numbers

from ..types import RolloutBatch
from .base import RewardContext, RewardOutput, register_reward
from .dense import HYBRID_WEIGHTS, hybrid_advantages, hybrid_overflow_stats
from .outcome import outcome_reward
# the step verifiers, the step checks and trace fidelity live in their own modules; their names
# stay importable from here (tests, gradprobe.training.metrics, user code)
from .arithmetic import arithmetic_line, solution_reference_steps
from .fidelity import trace_fidelity
from .step_checks import (CACHE_KEY, INVALID, MASKED, NEUTRAL, VALID, ProcessSteps, StepCheck, check_steps,
                          process_advantages, process_steps)
from .verifiers import (STEP_VERIFIERS, LineVerifier, StepVerifierSpec, UnknownTaskKindError, chain_sum_line,
                        chain_sum_reference_steps, chain_terms, register_step_verifier, step_verifier_spec,
                        task_kind)

__all__ = ["make_process_reward", "LineVerifier", "UnknownTaskKindError", "STEP_VERIFIERS", "StepVerifierSpec",
           "register_step_verifier", "task_kind", "step_verifier_spec", "chain_terms", "chain_sum_line",
           "chain_sum_reference_steps", "arithmetic_line", "solution_reference_steps", "VALID", "INVALID",
           "NEUTRAL", "MASKED", "CACHE_KEY", "StepCheck", "check_steps", "ProcessSteps", "process_steps",
           "process_advantages", "trace_fidelity"]


def make_process_reward(verifier: LineVerifier | None = None, *, lam: float | None = None,
                        name: str | None = None):
    """A process reward from a step verifier, optionally mixed with ``outcome``.

    Parameters
    ----------
    verifier : LineVerifier, optional
        ``verifier(line, problem, previous) -> True | False | None``; default: the task's
        (:func:`step_verifier_spec`, looked up at call time).
    lam : float in [0, 1], optional
        None: process only. Else lam * A(process) + (1 - lam) * A(outcome)
        (:func:`~gradprobe.rewards.dense.hybrid_advantages`).
    name : str, optional
        Reported name (default ``process`` / ``process_hybrid_<lam>``).

    Returns
    -------
    Reward
        ``reward(batch, ctx) -> RewardOutput``, ``advantages`` (N, T) float64,
        ``generated_tokens`` {}.

    Raises
    ------
    ValueError
        ``lam`` is not a number in [0, 1].
    """
    if lam is not None and (isinstance(lam, bool) or not isinstance(lam, numbers.Real)
                            or not 0.0 <= float(lam) <= 1.0):
        raise ValueError(f"process hybrid weight lam must be a number in [0, 1] (lam * A(process) + "
                         f"(1 - lam) * A(outcome)), got {lam!r}; registered: "
                         + ", ".join(f"process_hybrid_{x}" for x in HYBRID_WEIGHTS))
    reward_name = name or ("process" if lam is None else f"process_hybrid_{lam:g}")

    def reward(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
        ps = process_steps(batch, ctx, verifier)
        adv, valid, stats = process_advantages(ps, batch.completion_mask, batch.group_size)
        if lam is not None:
            out = outcome_reward(batch, ctx)
            adv, valid = hybrid_advantages(adv, valid, out.advantages, out.valid, float(lam))
            stats = {**stats, "lambda": float(lam), "missing": int((~valid).sum()),
                     "zero_variance_groups_process": stats["zero_variance_groups"],
                     "zero_variance_groups_outcome": out.stats["zero_variance_groups"],
                     **hybrid_overflow_stats(stats, out.stats, float(lam))}
        return RewardOutput(name=reward_name, advantages=adv, valid=valid, generated_tokens={}, stats=stats)

    reward.__name__ = reward.__qualname__ = reward_name.replace(".", "")
    reward.__doc__ = ("Process reward from a step verifier" if lam is None else
                      f"{lam:g} * A(process) + {1 - lam:g} * A(outcome)") + " (gradprobe.rewards.process)."
    return reward


register_reward("process", rollout_only=True)(make_process_reward())
for _lam in HYBRID_WEIGHTS:
    register_reward(f"process_hybrid_{_lam}", rollout_only=True)(make_process_reward(lam=_lam,
                                                                                   name=f"process_hybrid_{_lam}"))

