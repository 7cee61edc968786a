"""The ``dynamic`` selection rule: DAPO dynamic sampling (Yu et al. 2025, "DAPO", sec. 3.2 "Dynamic
Sampling", eq. 11), described in :mod:`gradprobe.difficulty.select`."""

from __future__ import annotations

import logging

from .select_common import (SelectionRule, charge_and_build, fill_from_dropped, mean_success,
                            partition_informative, sample_groups)

#: The selection log (its name predates the split of gradprobe.difficulty.select into modules).
log = logging.getLogger("gradprobe.difficulty.select")

__all__ = ["DynamicRule"]


class DynamicRule(SelectionRule):
    """``dynamic``: roll out the candidate stream B prompts at a time and drop every group whose
    rewards are all equal, until B informative groups are kept (at most m x B prompts); short of B,
    the earliest dropped groups fill in (``filled``)."""

    name = "dynamic"

    def next_batch(self, update: int, ledger):
        sel = self.selector
        cand = sel.candidates(update)
        kept, dropped = [], []
        drawn = 0
        seconds_total = 0.0
        for lo in range(0, len(cand), sel.b):
            if len(kept) >= sel.b:
                break
            chunk = [sel.pool[i] for i in cand[lo: lo + sel.b]]
            entries, secs = sample_groups(sel, chunk, "dynamic")
            partition_informative(entries, kept, dropped, sel.b)
            drawn += len(chunk)
            seconds_total += secs
        filled = fill_from_dropped(kept, dropped, sel.b)
        if filled:
            log.info("dynamic sampling, update %d: %d of %d groups informative after %d prompts; %d filled with "
                     "zero-advantage groups", update, sel.b - filled, sel.b, drawn, filled)
        batch = charge_and_build(sel, kept, dropped, seconds_total, ledger)
        record = {"rule": "dynamic", "candidates": drawn, "drawn_groups": drawn, "kept_informative": sel.b - filled,
                  "filled": filled, "dropped_groups": len(dropped), "drawn_mean_success": mean_success(kept + dropped),
                  "candidates_mean_p_hat": None, "fail_more_often": None,
                  "verdict": "dynamic sampling uses observed rewards, no p_hat", "selected_mean_p_hat": None,
                  "fallback": None}
        return batch, record
