"""The settings of the difficulty estimator and the check of a pool's prompt ids, without numpy: what a
plan's selection settings (:mod:`gradprobe.difficulty.config`) and ``gradprobe rank-prompts``' settings
validate against, so that parsing a plan or importing the command line loads no numpy. The estimator
itself is :mod:`gradprobe.difficulty.estimator` (which re-exports every name here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["EstimatorConfig", "DuplicatePromptError", "check_unique_ids"]


class DuplicatePromptError(ValueError):
    """A pool holds the same prompt id twice (ids key the posterior, so they must be unique)."""


def check_unique_ids(ids: Sequence[str], what: str = "pool") -> None:
    """Raise :class:`DuplicatePromptError` naming the first repeated id and how many repeats there are."""
    seen, dup = set(), []
    for i in ids:
        if i in seen:
            dup.append(i)
        seen.add(i)
    if dup:
        raise DuplicatePromptError(
            f"the {what} has {len(dup)} duplicate prompt id(s), first {dup[0]!r}: prompt ids key the posterior "
            f"counts, so each prompt must appear once; deduplicate the {what} (e.g. by Problem.id)")


@dataclass(frozen=True)
class EstimatorConfig:
    """Settings of :class:`DifficultyEstimator`.

    Attributes
    ----------
    prior_strength : float
        n0 > 0, pseudo-counts of the model's prior in each prompt's Beta posterior.
    decay : float
        gamma in (0, 1], the factor applied to every observed count per update since it was observed.
    C : float
        Inverse L2 regularisation strength of the logistic model (scikit-learn convention).
    max_history : int
        Observation rows kept for the logistic fit (oldest dropped first; bounds the fit's cost).
    p_clip : float
        p_model is clipped to [p_clip, 1 - p_clip] so alpha0, beta0 > 0.
    """

    prior_strength: float = 8.0
    decay: float = 0.9
    C: float = 1.0
    max_history: int = 8192
    p_clip: float = 1e-3

    def __post_init__(self):
        if not (self.prior_strength > 0 and math.isfinite(self.prior_strength)):
            raise ValueError(f"prior_strength (n0) must be a finite number > 0, got {self.prior_strength}")
        if not 0 < self.decay <= 1:
            raise ValueError(f"decay (gamma) must lie in (0, 1], got {self.decay}")
        if not self.C > 0:
            raise ValueError(f"C must be > 0, got {self.C}")
        if self.max_history < 1:
            raise ValueError(f"max_history must be >= 1, got {self.max_history}")
        if not 0 < self.p_clip < 0.5:
            raise ValueError(f"p_clip must lie in (0, 0.5), got {self.p_clip}")
