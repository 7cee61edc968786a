"""Prompt-selection settings of a plan's arm (no torch import: plans are parsed without it).

The keys an arm may set (:data:`SELECTION_KEYS`, flat in ``[arms.NAME]``)::

    [arms.select_half]
    reward = "outcome"
    selection = "half"            # "plain" | "half" | "random" | "dynamic" | "greso"  (gradprobe.difficulty.select)
    candidates_multiplier = 4     # m: m x B candidates per update
    prior_strength = 8.0          # n0 of the Beta prior
    decay = 0.9                   # gamma per update

``selection = "plain"`` (the plain prompt stream) is what an arm without ``selection`` trains on and takes
no other key; :func:`parse_selection` reads it as no selection (``None``), so both spellings give the same
run configuration.

``selection = "greso"`` (GRESO pre-rollout filtering, :class:`gradprobe.difficulty.select.GresoFilter`)
takes ``candidates_multiplier`` and its own keys (:data:`GRESO_KEYS`, refused with any other rule)::

    greso_explore_easy = 0.5      # p_easy: initial exploration probability of all-correct streaks
    greso_explore_hard = 0.5      # p_hard: the same for all-wrong streaks
    greso_target_flat = 0.25      # target share of zero-variance groups (1/3 all-correct, 2/3 all-wrong)
    greso_step = 0.01             # change of p_easy / p_hard per update (0 = fixed)
    greso_explore_min = 0.05      # the adapted p stays within [min, max]
    greso_explore_max = 0.95
    greso_explore_floor = 0.01    # a skipped prompt is still rolled out with probability >= this
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from .estimator import EstimatorConfig

__all__ = ["SELECTION_RULE_CLASSES", "SELECTION_RULES", "SELECTION_KEYS", "GRESO_KEYS", "PLAIN", "SelectionConfig",
           "parse_selection"]

#: The registry of prompt-selection rules: ``selection`` value -> ``"module:class"`` of its
#: :class:`~gradprobe.difficulty.select_common.SelectionRule` (resolved once per run by
#: :func:`gradprobe.difficulty.select.rule_class`). Classes are named as strings so that plans validate
#: against the registry's names without importing torch; a new rule is one entry here. ``plain`` is the
#: rule of an arm without ``selection`` (the training loop calls every rule the same way).
SELECTION_RULE_CLASSES = {
    "plain": "gradprobe.difficulty.select_plain:PlainRule",
    "half": "gradprobe.difficulty.select_estimated:HalfRule",
    "random": "gradprobe.difficulty.select_estimated:RandomRule",
    "dynamic": "gradprobe.difficulty.select_dynamic:DynamicRule",
    "greso": "gradprobe.difficulty.select_greso:GresoRule",
}
#: The valid ``selection`` values of a plan's arm, in the registry's order (a snapshot taken at import;
#: validation reads the registry itself).
SELECTION_RULES = tuple(SELECTION_RULE_CLASSES)
#: Keys of the ``greso`` rule only (defaults: Zheng et al. 2025's released scripts, see :class:`SelectionConfig`).
GRESO_KEYS = ("greso_explore_easy", "greso_explore_hard", "greso_target_flat", "greso_step", "greso_explore_min",
              "greso_explore_max", "greso_explore_floor")
#: Keys an arm of a plan may set for selection (flat in ``[arms.NAME]``).
SELECTION_KEYS = ("selection", "candidates_multiplier", "prior_strength", "decay", "feature_batch_size") + GRESO_KEYS
#: The rule of an arm without ``selection``: the plain prompt stream (no candidates, no key of its own).
PLAIN = "plain"


@dataclass(frozen=True)
class SelectionConfig:
    """How an arm selects its prompts.

    Attributes
    ----------
    rule : str
        A name of :data:`SELECTION_RULE_CLASSES` (``"plain"``, ``"half"``, ``"random"``, ``"dynamic"``,
        ``"greso"``); ``"plain"`` takes every other field at its default.
    candidates_multiplier : int
        m >= 1: candidates per update are m x B prompts.
    prior_strength : float
        n0 of the estimator (:class:`~gradprobe.difficulty.estimator.EstimatorConfig`).
    decay : float
        gamma of the estimator, per update.
    feature_batch_size : int
        Prompts per feature forward.
    greso_explore_easy, greso_explore_hard : float
        ``greso`` only: initial exploration probabilities p_easy, p_hard in [0, 1]. A prompt whose
        last z groups were all correct (all wrong) is rolled out with probability
        max(p_easy^z, floor) (max(p_hard^z, floor)) and skipped otherwise. Default 0.5 (the
        ``+data.p_easy=0.5 +data.p_hard=0.5`` of GRESO's ``train-scripts/*_greso.sh``).
    greso_target_flat : float
        ``greso`` only: target share in [0, 1] of zero-variance groups among those rolled out;
        GRESO's code splits it 1/3 all-correct, 2/3 all-wrong (default 0.25).
    greso_step : float
        ``greso`` only: >= 0, the change of p_easy and p_hard per update (0.01; 0 keeps them fixed).
    greso_explore_min, greso_explore_max : float
        ``greso`` only: 0 <= min <= max <= 1, the range the adapted p_easy, p_hard stay in (0.05, 0.95).
    greso_explore_floor : float
        ``greso`` only: in [0, 1], the least probability that a prompt with a streak is rolled out
        (0.01 in GRESO's code; 0 allows skipping with certainty).

    Raises
    ------
    ValueError
        An unknown rule, a value out of range (the message names the key and its range), or a
        ``greso_*`` key changed from its default under a rule other than ``greso``, or any key changed
        from its default under ``plain``.
    """

    rule: str
    candidates_multiplier: int = 4
    prior_strength: float = 8.0
    decay: float = 0.9
    feature_batch_size: int = 32
    greso_explore_easy: float = 0.5
    greso_explore_hard: float = 0.5
    greso_target_flat: float = 0.25
    greso_step: float = 0.01
    greso_explore_min: float = 0.05
    greso_explore_max: float = 0.95
    greso_explore_floor: float = 0.01

    def __post_init__(self):
        if self.rule not in SELECTION_RULE_CLASSES:
            raise ValueError(f"selection {self.rule!r} is not one of {', '.join(SELECTION_RULE_CLASSES)}")
        if self.rule == PLAIN and (changed := [f.name for f in fields(self) if f.name != "rule"
                                               and getattr(self, f.name) != f.default]):
            raise ValueError(_plain_takes_no_key(changed))
        if self.rule != "greso":
            changed = [k for k in GRESO_KEYS if getattr(self, k) != _GRESO_DEFAULTS[k]]
            if changed:
                raise ValueError(f"{', '.join(changed)} applies to selection = \"greso\" only, not {self.rule!r}; "
                                 f"remove it or set selection = \"greso\"")
        for k in ("greso_explore_easy", "greso_explore_hard", "greso_target_flat", "greso_explore_min",
                  "greso_explore_max", "greso_explore_floor"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{k} must be a probability in [0, 1], got {v!r}")
        if not (isinstance(self.greso_step, (int, float)) and 0.0 <= self.greso_step <= 1.0):
            raise ValueError(f"greso_step must lie in [0, 1] (0 keeps p_easy, p_hard fixed), got {self.greso_step!r}")
        if self.greso_explore_min > self.greso_explore_max:
            raise ValueError(f"greso_explore_min ({self.greso_explore_min}) must not exceed greso_explore_max "
                             f"({self.greso_explore_max}); lower the min or raise the max")
        if not isinstance(self.candidates_multiplier, int) or self.candidates_multiplier < 1:
            raise ValueError(f"candidates_multiplier must be an integer >= 1, got {self.candidates_multiplier!r}")
        if self.feature_batch_size < 1:
            raise ValueError(f"feature_batch_size must be >= 1, got {self.feature_batch_size}")
        EstimatorConfig(prior_strength=self.prior_strength, decay=self.decay)  # validates both

    def estimator_config(self) -> EstimatorConfig:
        return EstimatorConfig(prior_strength=self.prior_strength, decay=self.decay)

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict; the ``greso_*`` keys only for ``rule = "greso"`` (so the
        settings, and checkpoints, of the other rules are those they had before ``greso`` existed)."""
        d = asdict(self)
        return d if self.rule == "greso" else {k: v for k, v in d.items() if k not in GRESO_KEYS}


_GRESO_DEFAULTS = {f.name: f.default for f in fields(SelectionConfig) if f.name in GRESO_KEYS}


def _plain_takes_no_key(keys) -> str:
    return (f"{', '.join(keys)} set with selection = \"plain\" (the plain prompt stream, which selects nothing); "
            f"remove {'it' if len(keys) == 1 else 'them'} or choose a selecting rule: "
            f"{', '.join(r for r in SELECTION_RULE_CLASSES if r != PLAIN)}")


def parse_selection(table: dict) -> dict | None:
    """The normalised selection settings of an arm table, or None when it sets no ``selection``.

    Parameters
    ----------
    table : dict
        The arm's TOML table; only :data:`SELECTION_KEYS` are read.

    Returns
    -------
    dict or None
        :class:`SelectionConfig` fields as a JSON-ready dict (``rule`` for the ``selection`` key;
        :meth:`SelectionConfig.to_dict`, so ``greso_*`` keys only for ``selection = "greso"``); None
        also for ``selection = "plain"``, the plain prompt stream of an arm without ``selection``.

    Raises
    ------
    ValueError
        A selection key without ``selection`` or with ``selection = "plain"``, a value of the wrong type,
        or an invalid value; the message names the key and the valid choices.
    """
    given = {k: table[k] for k in SELECTION_KEYS if k in table}
    if not given:
        return None
    if "selection" not in given:
        raise ValueError(f"{', '.join(given)} set without selection; add selection = one of "
                         f"{', '.join(repr(r) for r in SELECTION_RULE_CLASSES if r != PLAIN)}")
    rule = given.pop("selection")
    if not isinstance(rule, str):
        raise ValueError(f"selection must be a string, one of {', '.join(SELECTION_RULE_CLASSES)}; got {rule!r}")
    if rule == PLAIN:
        if given:
            raise ValueError(_plain_takes_no_key(list(given)))
        return None
    kinds = {"candidates_multiplier": int, "prior_strength": float, "decay": float, "feature_batch_size": int,
             **{k: float for k in GRESO_KEYS}}
    if rule in SELECTION_RULE_CLASSES and rule != "greso" and (greso := [k for k in given if k in GRESO_KEYS]):
        raise ValueError(f"{', '.join(greso)} applies to selection = \"greso\" only, not {rule!r}; "
                         f"remove it or set selection = \"greso\"")
    for k, v in given.items():
        ok = isinstance(v, int) if kinds[k] is int else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok:
            raise ValueError(f"{k} must be {'an integer' if kinds[k] is int else 'a number'}, got {v!r}")
        given[k] = kinds[k](v)
    return SelectionConfig(rule=rule, **given).to_dict()


