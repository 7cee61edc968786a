"""Importance-sampling corrections of the update, a registry: how each token's loss is re-weighted
when the rollouts' sampler is not the training forward pass.

``none``  no correction (the sampler is the training model itself, e.g. the HF sampler);
``tis``   truncated importance sampling, min(pi_train / pi_sampler, C) per token, detached
          (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL
          training"; TRL ``vllm_importance_sampling_cap``, verl ``tis_imp_ratio_cap``;
          :func:`gradprobe.grpo.losses.truncated_is_weights`).

:class:`gradprobe.grpo.step.UpdateConfig` validates ``importance_sampling`` against
:data:`IMPORTANCE_SAMPLINGS`, and :func:`gradprobe.grpo.step.loss_and_backward` asks the chosen
entry whether it needs the sampler's log-probabilities and for its weights; nothing tests the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .losses import truncated_is_weights

__all__ = ["ImportanceSampling", "IMPORTANCE_SAMPLINGS", "get_importance_sampling"]

#: (train_logp (n, T), sampler_logp (n, T), mask (n, T), cap C) -> per-token weights (n, T), or None (no weights)
WeightsFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], Optional[torch.Tensor]]


def _no_weights(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                cap: float) -> torch.Tensor | None:
    return None


def _truncated(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float) -> torch.Tensor:
    return truncated_is_weights(train_logp, sampler_logp, mask, cap=cap)


@dataclass(frozen=True)
class ImportanceSampling:
    """One importance-sampling correction.

    Attributes
    ----------
    name : str
        The ``importance_sampling`` of :class:`~gradprobe.grpo.step.UpdateConfig` and of plans.
    needs_sampler_logp : bool
        Whether the update must be given the sampler's per-token log-probabilities.
    weights : WeightsFn
        (l_train (n, T) of pi_old, detached; l_sampler (n, T), NaN = unscored; completion mask
        (n, T); cap C > 0) -> the per-token weights (n, T) multiplying the policy term of the
        loss, or None for none.
    source : str
        The paper or reference implementation it follows.
    """

    name: str
    needs_sampler_logp: bool
    weights: WeightsFn
    source: str = ""


#: the registry of corrections, name -> :class:`ImportanceSampling`
IMPORTANCE_SAMPLINGS: dict[str, ImportanceSampling] = {
    "none": ImportanceSampling("none", False, _no_weights, "no correction"),
    "tis": ImportanceSampling("tis", True, _truncated, "Yao et al. 2025, truncated importance sampling; TRL "
                                                       "vllm_importance_sampling_mode='token_truncate'"),
}


def get_importance_sampling(name: str) -> ImportanceSampling:
    """The correction registered under ``name``.

    Raises
    ------
    ValueError
        Unknown ``name``; the message lists the registered ones.
    """
    try:
        return IMPORTANCE_SAMPLINGS[name]
    except (KeyError, TypeError):
        raise ValueError(f"importance_sampling {name!r} is not one of {tuple(IMPORTANCE_SAMPLINGS)}") from None
