"""Matched-compute training (DESIGN.md, "Matched-compute training").

``plan``        the plan file (TOML): :func:`load_plan`, :class:`Plan`, :class:`RunConfig`, :class:`PlanError`
                (built on ``specs``, the dataclasses; ``coerce``; ``plan_checks``; ``budget``);
``run``         one training run until its budget is spent: :func:`run_training` (one update: ``update``;
                evals, checkpoints, summary: ``records``; parts and counters: ``state``; loading: ``loading``);
``cli``         ``gradprobe train``;
``checkpoint``  atomic checkpoints and the run folder's writes.

Importing this package does not import torch; :func:`run_training` is loaded on first use.
"""

from .plan import (BUDGET_KINDS, ArmSpec, BudgetSpec, EvalSpec, HeldoutSpec, Hypothesis, ModelSpec, Plan, PlanError,
                   RunConfig, TaskSpec, TrainConfig, load_plan, parse_plan, run_config_from_dict)

__all__ = ["BUDGET_KINDS", "ArmSpec", "BudgetSpec", "EvalSpec", "HeldoutSpec", "Hypothesis", "ModelSpec", "Plan",
           "PlanError", "RunConfig", "TaskSpec", "TrainConfig", "load_plan", "parse_plan", "run_config_from_dict",
           "run_training"]


def __getattr__(name):
    if name == "run_training":
        from .run import run_training

        return run_training
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
