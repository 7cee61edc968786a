"""The registry of GRPO loss types (issue 15: one object per loss type serving both the update and the probe).

A :class:`LossType` is a normalisation (how token losses are averaged: per-sequence mean, batch token mean, or
a constant) and an objective (the per-token term: PPO's clipped ratio, CISPO's detached capped weight, GSPO's
sequence ratio); :mod:`gradprobe.grpo.losses` documents each, with its source, and computes the loss from
them. Plans, ``--loss-type``, the update (:func:`gradprobe.grpo.losses.token_weights`,
:func:`gradprobe.grpo.losses.policy_loss`) and the probe (:func:`gradprobe.probe.estimate.group_sums`) read
the same registry, :data:`LOSSES`; :data:`LOSS_TYPES`, :data:`OBJECTIVES` and :data:`GROUP_PARTS` are live
views of it. :func:`register_loss_type` adds one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["NORMALISATIONS", "OBJECTIVE_NAMES", "LossType", "LOSSES", "register_loss_type", "LOSS_TYPES",
           "OBJECTIVES", "GROUP_PARTS"]

# ----------------------------------------------------------------------------- normalisations
# Each normalisation gives the per-token weights w (N, T) of the whole batch and, for the probe's
# bootstrap (gradprobe.probe.estimate.group_sums), the same weights written as a ratio of per-group
# sums: w = u / sum_g den_g, u (N, T) the unnormalised weight, den (B,) group g's share of the
# normaliser Z (B = N / G groups).


def _sequence_mean(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    lengths = mask.sum(-1, keepdim=True).clamp(min=1)
    return mask / (lengths * mask.shape[0])


def _sequence_mean_parts(mask: torch.Tensor, group_size: int, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    u = mask / mask.sum(-1, keepdim=True).clamp(min=1)
    den = torch.full((mask.shape[0] // group_size,), float(group_size), dtype=mask.dtype, device=mask.device)
    return u, den


def _token_mean(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return mask / mask.sum().clamp(min=1)


def _token_mean_parts(mask: torch.Tensor, group_size: int, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    return mask, mask.sum(-1).view(-1, group_size).sum(-1)


def _constant(mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return mask / (mask.shape[0] * max_len)


def _constant_parts(mask: torch.Tensor, group_size: int, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    den = torch.full((mask.shape[0] // group_size,), float(group_size * max_len), dtype=mask.dtype,
                     device=mask.device)
    return mask, den


#: normalisation -> (token weights (mask (N, T) float, L_max) -> w (N, T),
#:                   group parts (mask (N, T) float, G, L_max) -> (u (N, T), den (B,)))
NORMALISATIONS: dict[str, tuple[Callable, Callable]] = {
    "sequence_mean": (_sequence_mean, _sequence_mean_parts),  # Shao et al. 2024, eq. 3
    "token_mean": (_token_mean, _token_mean_parts),           # Yu et al. 2025, DAPO, eq. 12
    "constant": (_constant, _constant_parts),                 # Liu et al. 2025, Dr. GRPO, eq. 5
}

OBJECTIVE_NAMES = ("ppo", "cispo", "gspo")


@dataclass(frozen=True)
class LossType:
    """One GRPO loss variant, serving both the update (:func:`policy_loss`) and the probe
    (:func:`gradprobe.probe.estimate.group_sums`), so the two can never disagree.

    Attributes
    ----------
    name : str
        The ``loss_type`` of plans, ``--loss-type`` and TRL's ``GRPOConfig``.
    normalisation : {"sequence_mean", "token_mean", "constant"}
        How token losses are averaged (:data:`NORMALISATIONS`; module docstring).
    objective : {"ppo", "cispo", "gspo"}
        The per-token term of :func:`policy_loss` (module docstring).
    source : str
        The paper (and equation) or reference implementation it follows.
    """

    name: str
    normalisation: str
    objective: str
    source: str = ""

    def __post_init__(self):
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(f"loss type {self.name!r}: normalisation {self.normalisation!r} is not one of "
                             f"{sorted(NORMALISATIONS)}")
        if self.objective not in OBJECTIVE_NAMES:
            raise ValueError(f"loss type {self.name!r}: objective {self.objective!r} is not one of {OBJECTIVE_NAMES}")

    @property
    def token_weights(self) -> Callable[[torch.Tensor, int], torch.Tensor]:
        """(mask (N, T) float, L_max) -> w (N, T): the per-token weights of the whole batch. Loss types of
        one normalisation share the same function object (the probe groups them into weight families)."""
        return NORMALISATIONS[self.normalisation][0]

    @property
    def group_parts(self) -> Callable[[torch.Tensor, int, int], tuple[torch.Tensor, torch.Tensor]]:
        """(mask (N, T) float64, G, L_max) -> (u (N, T), den (B,)) with w = u / sum(den): the weights as a
        ratio of per-group sums, for the probe's bootstrap over groups."""
        return NORMALISATIONS[self.normalisation][1]


#: the registry of loss types, name -> :class:`LossType` (:func:`register_loss_type` adds one)
LOSSES: dict[str, LossType] = {}


def register_loss_type(loss: LossType) -> LossType:
    """Add ``loss`` to :data:`LOSSES`, so plans, ``--loss-type``, the update and the probe accept it.

    Raises
    ------
    ValueError
        Another loss type is already registered under ``loss.name``.
    """
    old = LOSSES.get(loss.name)
    if old is not None and old != loss:
        raise ValueError(f"loss type {loss.name!r} is already registered ({old})")
    LOSSES[loss.name] = loss
    return loss


for _loss in (
    LossType("grpo", "sequence_mean", "ppo", "Shao et al. 2024, eq. 3"),
    LossType("dapo", "token_mean", "ppo", "Yu et al. 2025, DAPO, eq. 12"),
    LossType("dr_grpo", "constant", "ppo", "Liu et al. 2025, Dr. GRPO, eq. 5"),
    LossType("bnpo", "token_mean", "ppo", "TRL loss_type='bnpo' (batch-global token mean)"),
    LossType("cispo", "token_mean", "cispo", "MiniMax 2025, MiniMax-M1 (arXiv 2506.13585); TRL normalises by "
                                              "num_items_in_batch"),
    LossType("gspo", "sequence_mean", "gspo", "Zheng et al. 2025, GSPO (arXiv 2507.18071); TRL loss_type='grpo' "
                                              "with importance_sampling_level='sequence'"),
):
    register_loss_type(_loss)


class _LossView(Mapping):
    """A read-only, always current view of one attribute of every registered loss type."""

    def __init__(self, attribute: str):
        self._attribute = attribute

    def __getitem__(self, name: str):
        return getattr(LOSSES[name], self._attribute)

    def __iter__(self):
        return iter(LOSSES)

    def __len__(self) -> int:
        return len(LOSSES)

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{k!r}: {v!r}' for k, v in self.items())}}}"


#: loss_type -> its per-token weights (mask (N, T) float, L_max) -> w (N, T); a view of :data:`LOSSES`
#: (plan validation, the update, the probe and the CLI choices follow it).
LOSS_TYPES: Mapping[str, Callable[[torch.Tensor, int], torch.Tensor]] = _LossView("token_weights")

#: loss_type -> objective of :func:`policy_loss` (module docstring): "ppo" (token-level clipped
#: surrogate), "cispo" (clipped, detached IS weight times log-prob), "gspo" (sequence-level ratio).
OBJECTIVES: Mapping[str, str] = _LossView("objective")

#: loss_type -> (mask (N, T) float64, G, L_max) -> (u (N, T), den (B,)), w = u / sum(den): the probe's
#: per-group form of the same weights (:func:`gradprobe.probe.estimate.group_sums`).
GROUP_PARTS: Mapping[str, Callable[[torch.Tensor, int, int], tuple[torch.Tensor, torch.Tensor]]] = \
    _LossView("group_parts")
