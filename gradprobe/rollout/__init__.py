"""Sampling from the policy: the :class:`Sampler` role, its Hugging Face backend, rollout batches.

``base``     :class:`Sample`, the :class:`Sampler` protocol, :class:`PromptTooLongError`;
``hf``       :class:`HFSampler` (batched ``model.generate``; a vLLM backend serves the same role);
``collect``  :func:`collect_rollouts` (encode, sample, score, charge the ledger) and the pure
             :func:`build_batch`.
"""

from .base import PromptTooLongError, Sample, Sampler, cut_at_eos, per_prompt_budgets
from .collect import build_batch, collect_rollouts, score_completions
from .hf import HFSampler

__all__ = ["PromptTooLongError", "Sample", "Sampler", "cut_at_eos", "per_prompt_budgets", "build_batch",
           "collect_rollouts", "score_completions", "HFSampler"]
