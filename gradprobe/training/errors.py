"""The ways a training run stops with an error while keeping its data, and the refusal of a run folder whose
files are damaged (re-exported by :mod:`gradprobe.training.run`). Torch-free."""

from __future__ import annotations

__all__ = ["NonFiniteRunError", "PolicyDivergedError", "NoValidRewardError", "RewardOverflowError",
           "BudgetTooSmallError", "RunConfigMismatchError", "DamagedRunFolderError"]


class NonFiniteRunError(FloatingPointError):
    """An update produced a NaN/inf loss; the run stopped with its data kept. ``update`` is
    the failed update's number (1-based). Its subclasses are the other ways a run stops with nothing
    trustworthy trained (:class:`PolicyDivergedError`, :class:`NoValidRewardError`): ``gradprobe train``
    exits 2 with the message, and a study records the run as failed (left out of ``runs.csv`` and the analysis)."""

    def __init__(self, message: str, update: int):
        super().__init__(message)
        self.update = update


class PolicyDivergedError(NonFiniteRunError):
    """Sampling from the policy met non-finite (NaN/inf) logits or probabilities: its weights diverged (a
    learning rate far too large). ``update`` is the update whose rollouts (or the eval whose samples)
    could not be drawn; the run stopped with its data kept (``summary.json``: ``stop_reason``
    ``"policy_diverged"``)."""


class NoValidRewardError(NonFiniteRunError):
    """The arm's reward gave no completion of any update a reward (None, NaN or +-inf for every one, so every
    advantage was 0 and nothing was trained): a broken reward function, not a result. Raised after
    :data:`~gradprobe.training.update.NO_VALID_REWARD_UPDATES` such updates from the run's start, or earlier
    when the budget runs out first; ``update`` is the last of them. The run stopped with its data kept
    (``summary.json``: ``stop_reason`` ``"no_valid_reward"``). A run in which some update had a reward is
    never stopped this way."""


class RewardOverflowError(NoValidRewardError):
    """The arm's reward gave rewards too large for float64 group statistics: in every update from the run's start,
    each group whose rewards differed overflowed (:func:`gradprobe.grpo.advantages.group_normalize`: advantage 0)
    and no group trained, so nothing was trained: a broken reward (rescale it), not a result. Raised as
    :class:`NoValidRewardError` is, after :data:`~gradprobe.training.update.NO_VALID_REWARD_UPDATES` such updates or
    when the budget runs out first (:func:`~gradprobe.training.update.check_untrained_stop`); ``update`` is the last of
    them. The run stopped with its data kept (``summary.json``: ``stop_reason`` ``"reward_overflow"``)."""


class BudgetTooSmallError(ValueError):
    """The first update alone spent more than the token or FLOP budget (DESIGN.md: every budget
    buys updates); the run stopped after it with its data kept. Fix: a larger ``[budget]``."""


class RunConfigMismatchError(ValueError):
    """DIR holds a run made with a different configuration.

    Attributes
    ----------
    resume_fix : str or None
        The fix that lets the same command resume the run (``"to resume it, ..."``: restore the model files or the
        reward file it started from), set where the refusal has one (:mod:`gradprobe.training.run_folder`); None
        where the fix is a new run under a new ``--out``. A study tells the two apart by it
        (:meth:`gradprobe.study.result.StudyResult.summary`), not by the message's words.
    """

    resume_fix: str | None = None


class DamagedRunFolderError(ValueError):
    """A file of an existing run folder cannot be read (``config.json``, ``summary.json``, ``checkpoint.json``,
    a checkpoint's ``model.safetensors`` or ``state.pt``: empty, cut or overwritten); the message names the
    file and the fix. Raised before the run loads its model where it can be."""
