"""A hybrid's part of weight 0 reports no overflow (:func:`gradprobe.rewards.dense.hybrid_overflow_stats`).

``make_process_reward`` and ``prm_reward`` take ``lam`` in [0, 1]: at 1 the outcome part has weight 0 (at 0 the process
part), so its advantages, zeroed or not where its group statistics overflow, add nothing. Its ``nonfinite_groups`` was
reported all the same, and the probe's notes and the training loop's warning then said that those groups' advantages
were set to 0 and to rescale a reward whose advantages were untouched.
"""

from __future__ import annotations

import types

import pytest
import torch

from gradprobe.rewards import process
from gradprobe.rewards.base import RewardOutput
from gradprobe.rewards.dense import hybrid_overflow_stats

MASK = torch.ones(4, 3, dtype=torch.bool)
FLOW = {"nonfinite_groups": 1, "overflow_max_abs_reward": 1e200}


def _process_hybrid(monkeypatch, lam: float, process_flow: dict, outcome_flow: dict) -> dict:
    """The stats of ``make_process_reward(lam=lam)`` whose process and outcome parts report the given overflow."""
    def advantages(ps, mask, g):
        stats = {"missing": 0, "zero_variance_groups": 0, "groups": 1, **process_flow}
        return torch.full((4, 3), 0.25, dtype=torch.float64), torch.ones(4, dtype=torch.bool), stats

    def outcome(batch, ctx):
        return RewardOutput(name="outcome", advantages=torch.full((4, 3), 0.5, dtype=torch.float64),
                            valid=torch.ones(4, dtype=torch.bool), stats={"zero_variance_groups": 0, "groups": 1,
                                                                          **outcome_flow})
    monkeypatch.setattr(process, "process_steps", lambda batch, ctx, verifier: None)
    monkeypatch.setattr(process, "process_advantages", advantages)
    monkeypatch.setattr(process, "outcome_reward", outcome)
    out = process.make_process_reward(lam=lam)(types.SimpleNamespace(completion_mask=MASK, group_size=4), None)
    return {k: out.stats[k] for k in ("nonfinite_groups", "overflow_max_abs_reward")}


@pytest.mark.parametrize("lam, process_flow, outcome_flow", [(1.0, {}, FLOW), (0.0, FLOW, {})])
def test_the_part_of_weight_zero_reports_no_overflow(monkeypatch, lam, process_flow, outcome_flow):
    got = _process_hybrid(monkeypatch, lam, process_flow, outcome_flow)
    assert got == {"nonfinite_groups": 0, "overflow_max_abs_reward": 0.0}


def test_the_part_that_weighs_still_reports_it(monkeypatch):
    assert _process_hybrid(monkeypatch, 1.0, FLOW, {}) == FLOW
    assert _process_hybrid(monkeypatch, 0.0, {}, FLOW) == FLOW
    assert hybrid_overflow_stats({"nonfinite_groups": 2, "overflow_max_abs_reward": 1e170}, FLOW, 0.5) == \
        {"nonfinite_groups": 2, "overflow_max_abs_reward": 1e200,
         "nonfinite_part_groups": {"process": 2, "outcome": 1}}
    # a part of weight 0 is left out, and a one-part reward records no per-part counts
    assert "nonfinite_part_groups" not in hybrid_overflow_stats(FLOW, FLOW, 1.0)
