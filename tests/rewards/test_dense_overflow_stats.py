"""Dense and hybrid rewards report the groups whose values overflow float64 group statistics.

:func:`gradprobe.grpo.advantages.group_normalize` gives such a group advantage 0 and counts it (``nonfinite_groups``,
``overflow_max_abs_reward``); the probe's notes and the training loop's warning read those keys to tell the user to
rescale the reward. ``mc_value`` (and ``process``, the PRM rewards, every hybrid) built their stats without them, so
those groups stayed at advantage 0 without a word.
"""

from __future__ import annotations

import types

import pytest
import torch

from gradprobe.probe.result import diagnose
from gradprobe.rewards import REWARDS, dense, process
from gradprobe.rewards.base import RewardOutput
from gradprobe.rewards.dense import mc_value_advantages, overflow_stats
from gradprobe.rewards.steps import StepValues

BIG = 1e160
MASK = torch.ones(4, 3, dtype=torch.bool)


def _huge_steps() -> StepValues:
    """One group of 4 rows whose step values differ, about +-1e160."""
    return StepValues(boundaries=[[1, 3], [2, 3], [1, 3], [2, 3]], values=[[BIG, -BIG], [-BIG, BIG], [0.0, BIG],
                      [BIG, 0.0]], v0=[0.0] * 4, rewards=[-BIG, BIG, BIG, 0.0], group_size=4)


def _overflowing(monkeypatch) -> None:
    """Make dense's group normalisation report its one group as overflowing (advantage 0), as
    :func:`~gradprobe.grpo.advantages.group_normalize` does for a group whose statistics overflow float64 (whether a
    given size overflows is group_normalize's own matter: its tests); what dense does with the report is tested here."""
    def normalize(rewards, scale):
        stats = {"missing": int((~torch.isfinite(rewards)).sum()), "zero_variance_groups": 0,
                 "groups": int(rewards.shape[0]), "nonfinite_groups": 1, "overflow_max_abs_reward": BIG}
        return torch.zeros_like(rewards), stats
    monkeypatch.setattr(dense, "group_normalize", normalize)


def _outcome(stats: dict) -> RewardOutput:
    """An outcome part with advantages 0.5 on every token and the given stats."""
    return RewardOutput(name="outcome", advantages=torch.full((4, 3), 0.5, dtype=torch.float64),
                        valid=torch.ones(4, dtype=torch.bool), stats={"zero_variance_groups": 0, "groups": 1, **stats})


def test_mc_value_reports_the_groups_that_overflowed(monkeypatch):
    ordinary = StepValues(boundaries=[[1, 3]] * 4, values=[[0.5, 1.0], [0.25, 0.0], [1.0, 1.0], [0.0, 0.0]],
                          v0=[0.5] * 4, rewards=[1.0, 0.0, 1.0, 0.0], group_size=4)
    stats = mc_value_advantages(ordinary, MASK)[2]
    assert stats["nonfinite_groups"] == 0 and stats["overflow_max_abs_reward"] == 0.0
    _overflowing(monkeypatch)
    adv, valid, stats = mc_value_advantages(_huge_steps(), MASK)
    assert torch.equal(adv, torch.zeros(4, 3, dtype=torch.float64)) and bool(valid.all())
    assert stats["nonfinite_groups"] == 1 and stats["overflow_max_abs_reward"] == BIG
    assert stats["zero_variance_groups"] == 0 and stats["groups"] == 1
    batch = types.SimpleNamespace(num_prompts=1, num_rows=4, truncated=torch.zeros(4, dtype=torch.bool),
                                  completion_mask=MASK, metadata={})
    notes = diagnose(batch, {}, {"mc_value": {"stats": stats}})
    assert notes == ["reward 'mc_value': in 1 of 1 groups its rewards differ but are too large for float64 group "
                     "statistics (|reward| up to 1e+160): their mean or std overflows, so their advantages were set to "
                     "0 (the rewards are not equal); rescale the reward (e.g. divide it by its largest magnitude)"]


@pytest.mark.parametrize("part", ["mc", "outcome"])
def test_a_hybrid_reports_the_overflow_of_either_part(monkeypatch, part):
    sv = _huge_steps() if part == "mc" else StepValues(
        boundaries=[[1, 3]] * 4, values=[[0.5, 1.0], [0.25, 0.0], [1.0, 1.0], [0.0, 0.0]], v0=[0.5] * 4,
        rewards=[1.0, 0.0, 1.0, 0.0], group_size=4)
    flow = {"nonfinite_groups": 1, "overflow_max_abs_reward": 3e200} if part == "outcome" else {}
    if part == "mc":
        _overflowing(monkeypatch)
    monkeypatch.setattr(dense, "mc_step_values", lambda batch, ctx: sv)
    monkeypatch.setattr(dense, "outcome_reward", lambda batch, ctx: _outcome(flow))
    out = REWARDS["hybrid_0.5"](types.SimpleNamespace(completion_mask=MASK), None)
    want = (1, BIG) if part == "mc" else (1, 3e200)
    assert (out.stats["nonfinite_groups"], out.stats["overflow_max_abs_reward"]) == want
    assert out.stats["groups"] == 1


def test_a_process_hybrid_reports_the_outcome_part_overflow_and_the_parts_combine(monkeypatch):
    steps = StepValues(boundaries=[[1, 3]] * 4, values=[[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
                       v0=[0.5] * 4, rewards=[1.0, 0.0, 0.0, 1.0], group_size=4)
    monkeypatch.setattr(process, "process_steps", lambda batch, ctx, verifier: None)
    monkeypatch.setattr(process, "process_advantages", lambda ps, mask, g: mc_value_advantages(steps, mask))
    monkeypatch.setattr(process, "outcome_reward",
                        lambda batch, ctx: _outcome({"nonfinite_groups": 1, "overflow_max_abs_reward": 1e200}))
    out = process.make_process_reward(lam=0.5)(types.SimpleNamespace(completion_mask=MASK, group_size=4), None)
    assert out.stats["nonfinite_groups"] == 1 and out.stats["overflow_max_abs_reward"] == 1e200
    # the parts combined: the larger count, the largest |reward|, a part's absent keys as 0
    assert overflow_stats({}, {"zero_variance_groups": 2}) == {"nonfinite_groups": 0, "overflow_max_abs_reward": 0.0}
    assert overflow_stats({"nonfinite_groups": 2, "overflow_max_abs_reward": 1e170},
                          {"nonfinite_groups": 3, "overflow_max_abs_reward": 1e160}) == \
        {"nonfinite_groups": 3, "overflow_max_abs_reward": 1e170}
