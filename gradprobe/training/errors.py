"""The ways a training run stops with an error while keeping its data, and the refusal of a run folder whose
files are damaged (re-exported by :mod:`gradprobe.training.run`). Torch-free."""

from __future__ import annotations

__all__ = ["NonFiniteRunError", "PolicyDivergedError", "BudgetTooSmallError", "RunConfigMismatchError",
           "DamagedRunFolderError"]


class NonFiniteRunError(FloatingPointError):
    """An update produced a NaN/inf loss; the run stopped with its data kept. ``update`` is
    the failed update's number (1-based)."""

    def __init__(self, message: str, update: int):
        super().__init__(message)
        self.update = update


class PolicyDivergedError(NonFiniteRunError):
    """Sampling from the policy met non-finite (NaN/inf) logits or probabilities: its weights diverged (a
    learning rate far too large). ``update`` is the update whose rollouts (or the eval whose samples)
    could not be drawn; the run stopped with its data kept (``summary.json``: ``stop_reason``
    ``"policy_diverged"``)."""


class BudgetTooSmallError(ValueError):
    """The first update alone spent more than the token or FLOP budget (DESIGN.md: every budget
    buys updates); the run stopped after it with its data kept. Fix: a larger ``[budget]``."""


class RunConfigMismatchError(ValueError):
    """DIR holds a run made with a different configuration."""


class DamagedRunFolderError(ValueError):
    """A file of an existing run folder cannot be read (``config.json``, ``summary.json``, ``checkpoint.json``,
    a checkpoint's ``model.safetensors`` or ``state.pt``: empty, cut or overwritten); the message names the
    file and the fix. Raised before the run loads its model where it can be."""
