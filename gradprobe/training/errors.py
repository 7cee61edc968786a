"""The ways a training run stops with an error while keeping its data (re-exported by
:mod:`gradprobe.training.run`). Torch-free."""

from __future__ import annotations

__all__ = ["NonFiniteRunError", "BudgetTooSmallError", "RunConfigMismatchError"]


class NonFiniteRunError(FloatingPointError):
    """An update produced a NaN/inf loss; the run stopped with its data kept. ``update`` is
    the failed update's number (1-based)."""

    def __init__(self, message: str, update: int):
        super().__init__(message)
        self.update = update


class BudgetTooSmallError(ValueError):
    """The first update alone spent more than the token or FLOP budget (DESIGN.md: every budget
    buys updates); the run stopped after it with its data kept. Fix: a larger ``[budget]``."""


class RunConfigMismatchError(ValueError):
    """DIR holds a run made with a different configuration."""
