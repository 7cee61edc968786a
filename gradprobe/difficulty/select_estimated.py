"""The selection rules built on the difficulty estimator: ``half`` (train on the B candidates with
p_hat nearest 1/2, the ``select_half`` arm of DESIGN.md) and ``random``, its cost-matched placebo
(the same candidates, features, fit and predictions, B drawn uniformly at random). Both are described
in :mod:`gradprobe.difficulty.select`.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from ..rollout import collect_rollouts
from .estimator import DegenerateOutcomesWarning, rank_half, verdict
from .features import prompt_features
from .select_common import SelectionRule, group_outcomes

#: The selection log (its name predates the split of gradprobe.difficulty.select into modules).
log = logging.getLogger("gradprobe.difficulty.select")

__all__ = ["EstimatedRule", "HalfRule", "RandomRule"]


class EstimatedRule(SelectionRule):
    """Features of the m x B candidates, the estimator's refit and p_hat (all charged as
    ``selection``), then B of the candidates chosen by :meth:`choose`; the chosen prompts' outcomes
    update the estimator online. Subclasses: :class:`HalfRule`, :class:`RandomRule`."""

    #: Rank by |p_hat - 1/2| when the estimator has a signal (``half``), else always at random.
    ranks = False

    def next_batch(self, update: int, ledger):
        sel = self.selector
        cand = sel.candidates(update)
        problems = [sel.pool[i] for i in cand]
        ids = [p.id for p in problems]
        feats = prompt_features(sel.policy, problems, metadata_keys=sel.metadata_keys,
                                batch_size=sel.config.feature_batch_size, ledger=ledger)
        start = time.perf_counter()
        p_hat, caught = self._fit_and_predict(ids, feats)
        chosen, fallback = self.choose(update, ids, p_hat, caught, len(cand))
        ledger.add_seconds("selection", time.perf_counter() - start)
        v = verdict(p_hat)
        batch = collect_rollouts(sel.policy, sel.task, [problems[i] for i in chosen], group_size=sel.group,
                                 sampler=sel.sampler, sampling=sel.sampling, ledger=ledger, category="rollout")
        start = time.perf_counter()
        s, n = group_outcomes(batch.scores, sel.group)
        sel.estimator.observe([ids[i] for i in chosen], feats[chosen], s, n)
        sel.estimator.step()
        ledger.add_seconds("selection", time.perf_counter() - start)
        record = {"rule": self.name, "candidates": len(cand), "candidates_mean_p_hat": v["mean_p_hat"],
                  "fail_more_often": v["fail_more_often"], "verdict": v["text"],
                  "selected_mean_p_hat": float(np.mean(p_hat[chosen])),
                  "selected_mean_success": float(s.sum() / n.sum()) if n.sum() else None,
                  "fallback": fallback, "estimator_degenerate": bool(sel.estimator.degenerate_)}
        return batch, record

    def _fit_and_predict(self, ids, feats):
        """Refit the estimator on the outcomes so far; p_hat (M,) of the candidates and the
        :class:`DegenerateOutcomesWarning` records the fit raised."""
        est = self.selector.estimator
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DegenerateOutcomesWarning)
            est.fit()
        return est.p_hat(ids, feats), caught

    def choose(self, update: int, ids, p_hat, caught, n_candidates: int) -> tuple[list[int], str | None]:
        """Candidate positions the update trains on (B of them) and the record's ``fallback``.

        Without a signal (no outcome observed yet, or all observed outcomes equal) or for a rule that
        does not rank, B positions drawn uniformly (sorted) by a generator seeded with (run seed,
        update); ``half`` then records ``fallback = "random"`` and logs the degenerate case once per run."""
        sel = self.selector
        no_signal = sel.estimator.n_observed_ == 0 or sel.estimator.degenerate_
        rng = np.random.default_rng([sel.seed, update, 0x5E1EC7])
        if self.ranks and not no_signal:
            return rank_half(ids, p_hat)[: sel.b], None
        chosen = sorted(rng.choice(n_candidates, size=sel.b, replace=False).tolist())
        if not self.ranks:
            return chosen, None
        if caught and not sel._warned:  # all observed outcomes equal: say so once per run
            log.warning("select_half: %s; selecting at random among the candidates until outcomes differ",
                        caught[0].message)
            sel._warned = True
        return chosen, "random"


class HalfRule(EstimatedRule):
    """``half``: train on the B candidates nearest p_hat = 1/2 (:func:`~gradprobe.difficulty.estimator.rank_half`)."""

    name = "half"
    ranks = True


class RandomRule(EstimatedRule):
    """``random``: the placebo of ``half`` at the same cost, B candidates drawn uniformly at random."""

    name = "random"
