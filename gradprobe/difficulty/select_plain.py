"""The ``plain`` selection rule: the plain prompt stream, what an arm without ``selection`` trains on
(described in :mod:`gradprobe.difficulty.select`)."""

from __future__ import annotations

from ..streams import pool_indices
from .select_common import SelectionRule

__all__ = ["PlainRule"]


class PlainRule(SelectionRule):
    """``plain``: the next B prompts of the pool's per-seed order (:func:`gradprobe.streams.pool_indices`),
    rolled out by the run's own collection (plain or guided), charged as ``rollout`` tokens. No candidate
    is dropped and nothing is charged to ``selection``; the record is None (the ``metrics.jsonl`` line has
    no ``selection`` entry) and the rule has no state (the checkpoint's ``selector`` is None)."""

    name = "plain"
    draws_candidates = False

    def next_batch(self, update: int, ledger):
        sel = self.selector
        problems = [sel.pool[i] for i in pool_indices(update, sel.b, len(sel.pool), sel.seed)]
        batch = sel.collect(sel.policy, sel.task, problems, group_size=sel.group, sampler=sel.sampler,
                            sampling=sel.sampling, ledger=ledger, category="rollout")
        return batch, None
