"""The ``greso`` selection rule: GRESO pre-rollout filtering (Zheng et al. 2025, arXiv 2506.02177,
sec. 4; the filter itself is :class:`gradprobe.difficulty.greso.GresoFilter`) on top of DAPO's dynamic
sampling, described in :mod:`gradprobe.difficulty.select`."""

from __future__ import annotations

import logging
import time

import numpy as np

from .greso import GROUP_KINDS, GresoFilter, group_kind
from .select_common import (SelectionRule, charge_and_build, fill_from_dropped, is_informative, mean_success,
                            partition_informative, sample_groups)

#: The selection log (its name predates the split of gradprobe.difficulty.select into modules).
log = logging.getLogger("gradprobe.difficulty.select")

__all__ = ["GresoRule"]


class GresoRule(SelectionRule):
    """``greso``: skip predicted-flat candidates (:class:`GresoFilter`), then dynamic sampling on the rest.

    Candidates are walked in stream order; the non-skipped ones are rolled out B at a time until B
    informative groups are kept (informative groups beyond B and flat ones are dropped, charged as
    ``selection``). Short of B: the earliest dropped groups fill in (``filled``), and if every
    non-skipped candidate was rolled out and fewer than B groups exist, the earliest skipped
    candidates are rolled out and kept (``unskipped``), so every update trains on B groups.
    Every rolled-out group updates its prompt's streaks; from epoch 1 of the candidate stream on, the
    update's flat shares adapt p_easy, p_hard. The skip draws come from a generator seeded by
    (run seed, update)."""

    name = "greso"

    def __init__(self, selector):
        super().__init__(selector)
        self.filter = GresoFilter(selector.config)

    def next_batch(self, update: int, ledger):
        sel, g = self.selector, self.filter
        cand = sel.candidates(update)
        ids = [sel.pool[i].id for i in cand]
        start = time.perf_counter()
        rng = np.random.default_rng([sel.seed, update, 0x62E50])
        explore = (g.p_easy, g.p_hard)
        skip, predicted = g.decide(ids, rng.random(len(ids)))
        ledger.add_seconds("selection", time.perf_counter() - start)
        kept, dropped, rolled, seconds_total = self._roll_out(cand, skip)
        filled = fill_from_dropped(kept, dropped, sel.b)
        unskipped, secs = self._unskip(cand, skip, kept, rolled)
        seconds_total += secs
        if filled or unskipped:
            log.info("greso, update %d: %d of %d candidates skipped; %d dropped groups filled in, %d skipped "
                     "candidates rolled out to make %d groups", update, int(skip.sum()), len(cand), filled,
                     unskipped, sel.b)
        batch = charge_and_build(sel, kept, dropped, seconds_total, ledger)
        start = time.perf_counter()
        shares, adapted = self._observe(update, ids, rolled)
        ledger.add_seconds("selection", time.perf_counter() - start)
        counts = {"skip": skip, "predicted": predicted, "kept": kept, "dropped": dropped, "rolled": rolled,
                  "filled": filled, "unskipped": unskipped}
        return batch, self._record(len(cand), counts, shares, explore, adapted)

    def _roll_out(self, cand, skip):
        """Roll out the non-skipped candidates B at a time until B informative groups are kept.

        Returns (kept, dropped, rolled, seconds): ``rolled`` lists (candidate position, group) in
        rollout order; ``seconds`` the generation wall time."""
        sel = self.selector
        queue = [i for i in range(len(cand)) if not skip[i]]
        kept, dropped, rolled = [], [], []
        seconds_total = 0.0
        for lo in range(0, len(queue), sel.b):
            if len(kept) >= sel.b:
                break
            pos = queue[lo: lo + sel.b]
            entries, secs = sample_groups(sel, [sel.pool[cand[i]] for i in pos], "greso")
            seconds_total += secs
            rolled += list(zip(pos, entries))
            partition_informative(entries, kept, dropped, sel.b)
        return kept, dropped, rolled, seconds_total

    def _unskip(self, cand, skip, kept, rolled) -> tuple[int, float]:
        """Too few candidates survived the filter to make B groups at all: roll out and keep the
        earliest skipped ones. Returns (how many, generation seconds)."""
        sel = self.selector
        if len(kept) >= sel.b:
            return 0, 0.0
        pos = [i for i in range(len(cand)) if skip[i]][: sel.b - len(kept)]
        entries, secs = sample_groups(sel, [sel.pool[cand[i]] for i in pos], "greso")
        rolled += list(zip(pos, entries))
        kept += entries
        return len(pos), secs

    def _observe(self, update: int, ids, rolled) -> tuple[dict, bool]:
        """Update the streaks from the rolled-out groups and, from epoch 1 on, p_easy / p_hard.
        Returns each kind's share of the rolled-out groups and whether the probabilities adapted."""
        sel, g = self.selector, self.filter
        kinds = [group_kind(e.scores) for _, e in rolled]
        g.observe([ids[i] for i, _ in rolled], kinds)
        shares = {k: kinds.count(k) / len(kinds) for k in GROUP_KINDS}
        epoch = update * sel.config.candidates_multiplier * sel.b // len(sel.pool)
        if epoch > 0:
            g.adapt(shares["all_correct"], shares["all_wrong"])
        return shares, epoch > 0

    def _record(self, n_candidates: int, c: dict, shares: dict, explore: tuple, adapted: bool) -> dict:
        """The metrics record (:meth:`PromptSelector.next_batch`); the prediction AUCs are measurement
        only (not part of the rule, not charged): how well the streaks predicted flat groups."""
        g, skip, predicted, rolled = self.filter, c["skip"], c["predicted"], c["rolled"]
        return {"rule": "greso", "candidates": n_candidates, "skipped": int(skip.sum()),
                "skipped_all_correct": sum(bool(s) and k == "all_correct" for s, k in zip(skip, predicted)),
                "skipped_all_wrong": sum(bool(s) and k == "all_wrong" for s, k in zip(skip, predicted)),
                "predicted_flat": sum(k is not None for k in predicted),
                "drawn_groups": len(rolled),
                "kept_informative": sum(is_informative(e.scores) for e in c["kept"]),
                "filled": c["filled"], "unskipped": c["unskipped"], "dropped_groups": len(c["dropped"]),
                "realized_flat_share": shares["all_correct"] + shares["all_wrong"],
                "realized_all_correct_share": shares["all_correct"], "realized_all_wrong_share": shares["all_wrong"],
                "explore_easy": explore[0], "explore_hard": explore[1],
                "explore_easy_next": g.p_easy, "explore_hard_next": g.p_hard, "adapted": adapted,
                "prediction_auc": g.prediction_auc(last=len(rolled)), "prediction_auc_run": g.prediction_auc(),
                "drawn_mean_success": mean_success([e for _, e in rolled]),
                "candidates_mean_p_hat": None, "fail_more_often": None,
                "verdict": "GRESO skips on each prompt's history of zero-variance groups, no p_hat",
                "selected_mean_p_hat": None, "fallback": None}

    def state_dict(self) -> dict:
        """The filter's streaks, history and exploration probabilities under ``"greso"``."""
        return {"greso": self.filter.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from the selector's checkpoint state.

        Raises
        ------
        ValueError
            The state has no ``"greso"`` entry (a checkpoint of another rule)."""
        if "greso" not in state:
            raise ValueError("checkpoint selector state has no 'greso' entry (streaks, p_easy, p_hard) for a greso run")
        self.filter.load_state_dict(state["greso"])
