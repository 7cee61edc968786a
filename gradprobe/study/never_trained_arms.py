"""Arms with a run that never trained, as the analysis's parts leave them out (:mod:`gradprobe.study.analysis`,
"Runs that never trained").

A run never trained when every update of its ``metrics.jsonl`` had every advantage 0 (every group flat, every
completion truncated, the rewards overflowed or none given: :mod:`gradprobe.training.untrained`); the analysis
records such runs per arm in ``analysis.json["arms"][ARM]["never_trained"]`` (``[{"seed", "cause", "why",
"updates", ...}]``). Its numbers measure a broken setup, not the arm, so the rankings, the hypotheses, the
learning-rate sweep and the detectable effect leave the arm out and say why with :func:`never_trained_why`.
This module sits below all of them (the sweep cannot import the report, which imports the sweep's report).
"""

from __future__ import annotations

__all__ = ["never_trained_text", "never_trained_why", "untrained_arms"]


def never_trained_text(runs: list[dict]) -> str:
    """``"seed 0: the rewards ... overflowed ... (11 updates)"``: an arm's ``never_trained`` records, joined."""
    return "; ".join(f"seed {r.get('seed')}: {r.get('why')} ({r.get('updates')} updates)" for r in runs)


def never_trained_why(arm: str, runs: list[dict]) -> str:
    """``"ARM never trained (seed 0: WHY (10 updates); ...)"``: the arm, its seeds that never trained and the cause
    (:func:`never_trained_text`), the reason a part of the analysis gives for leaving the arm out."""
    return f"{arm} never trained ({never_trained_text(runs)})"


def untrained_arms(arms: dict) -> dict[str, list[dict]]:
    """arm -> its ``never_trained`` records, for the arms of ``analysis.json["arms"]`` with at least one (an entry
    without the key, from an analysis written before it, counts as trained); in ``arms`` order."""
    return {a: list(e["never_trained"]) for a, e in arms.items() if isinstance(e, dict) and e.get("never_trained")}
