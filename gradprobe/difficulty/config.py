"""Prompt-selection settings of a plan's arm (no torch import: plans are parsed without it).

The keys an arm may set (:data:`SELECTION_KEYS`, flat in ``[arms.NAME]``)::

    [arms.select_half]
    reward = "outcome"
    selection = "half"            # "half" | "random" | "dynamic"  (gradprobe.difficulty.select)
    candidates_multiplier = 4     # m: m x B candidates per update
    prior_strength = 8.0          # n0 of the Beta prior
    decay = 0.9                   # gamma per update
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .estimator import EstimatorConfig

__all__ = ["SELECTION_RULES", "SELECTION_KEYS", "SelectionConfig", "parse_selection"]

SELECTION_RULES = ("half", "random", "dynamic")
#: Keys an arm of a plan may set for selection (flat in ``[arms.NAME]``).
SELECTION_KEYS = ("selection", "candidates_multiplier", "prior_strength", "decay", "feature_batch_size")


@dataclass(frozen=True)
class SelectionConfig:
    """How an arm selects its prompts.

    Attributes
    ----------
    rule : {"half", "random", "dynamic"}
    candidates_multiplier : int
        m >= 1: candidates per update are m x B prompts.
    prior_strength : float
        n0 of the estimator (:class:`~gradprobe.difficulty.estimator.EstimatorConfig`).
    decay : float
        gamma of the estimator, per update.
    feature_batch_size : int
        Prompts per feature forward.
    """

    rule: str
    candidates_multiplier: int = 4
    prior_strength: float = 8.0
    decay: float = 0.9
    feature_batch_size: int = 32

    def __post_init__(self):
        if self.rule not in SELECTION_RULES:
            raise ValueError(f"selection {self.rule!r} is not one of {', '.join(SELECTION_RULES)}")
        if not isinstance(self.candidates_multiplier, int) or self.candidates_multiplier < 1:
            raise ValueError(f"candidates_multiplier must be an integer >= 1, got {self.candidates_multiplier!r}")
        if self.feature_batch_size < 1:
            raise ValueError(f"feature_batch_size must be >= 1, got {self.feature_batch_size}")
        EstimatorConfig(prior_strength=self.prior_strength, decay=self.decay)  # validates both

    def estimator_config(self) -> EstimatorConfig:
        return EstimatorConfig(prior_strength=self.prior_strength, decay=self.decay)


def parse_selection(table: dict) -> dict | None:
    """The normalised selection settings of an arm table, or None when it sets no ``selection``.

    Parameters
    ----------
    table : dict
        The arm's TOML table; only :data:`SELECTION_KEYS` are read.

    Returns
    -------
    dict or None
        :class:`SelectionConfig` fields as a JSON-ready dict (``rule`` for the ``selection`` key).

    Raises
    ------
    ValueError
        A selection key without ``selection``, a value of the wrong type, or an invalid value; the
        message names the key and the valid choices.
    """
    given = {k: table[k] for k in SELECTION_KEYS if k in table}
    if not given:
        return None
    if "selection" not in given:
        raise ValueError(f"{', '.join(given)} set without selection; add selection = one of "
                         f"{', '.join(repr(r) for r in SELECTION_RULES)}")
    rule = given.pop("selection")
    if not isinstance(rule, str):
        raise ValueError(f"selection must be a string, one of {', '.join(SELECTION_RULES)}; got {rule!r}")
    kinds = {"candidates_multiplier": int, "prior_strength": float, "decay": float, "feature_batch_size": int}
    for k, v in given.items():
        ok = isinstance(v, int) if kinds[k] is int else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok:
            raise ValueError(f"{k} must be {'an integer' if kinds[k] is int else 'a number'}, got {v!r}")
        given[k] = kinds[k](v)
    return asdict(SelectionConfig(rule=rule, **given))


