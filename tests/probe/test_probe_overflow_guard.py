"""The probe's statistics refuse advantages whose squares overflow float64, and refuse by reward name any non-finite
number left all the same: 1e150 advantages gave a bootstrap variance of inf (a stored SNR of 0.0) and 1e200 a signal
proxy of inf that failed only when probe.json was read back, with advice about deleting a study's probe."""

from __future__ import annotations

import warnings

import pytest
import torch

from gradprobe.probe import estimate_rewards
from gradprobe.probe.estimate import signal_proxy_group_sums

N, T, G = 8, 3, 2
MASK = torch.ones(N, T, dtype=torch.bool)
MASK[1, 2] = False


def rows(scale, off_mask=0.0):
    """Advantages scale * (+1, -1, ...) per row on the mask; ``off_mask`` off it (the probe ignores it)."""
    sign = torch.tensor([1.0, -1.0] * (N // 2), dtype=torch.float64)[:, None].expand(N, T)
    return torch.where(MASK, sign * scale, torch.full((N, T), off_mask, dtype=torch.float64))


def alignment(scale=1.0):
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, T, generator=g, dtype=torch.float64) * scale


def estimate(adv, a=None):
    return estimate_rewards(alignment() if a is None else a, {"outcome": rows(1.0), "big": adv},
                            completion_mask=MASK, group_size=G, lr=1e-6, tokens_per_update={"outcome": 10, "big": 10},
                            budget_tokens=1e6, n_bootstrap=50)


def test_estimate_reports_large_advantages_whose_statistics_stay_finite():
    # the size limit is checked where a reward's output enters (checked_output); the estimate refuses only what
    # overflows (the next test), and reads no value off the mask
    for scale in (1e100, 1e150):
        big = next(e for e in estimate(rows(scale, off_mask=1e300)) if e.name == "big")
        assert abs(big.inner_product) > scale / 100 and 0 < big.snr < float("inf")


def test_a_non_finite_statistic_is_refused_by_reward_and_field_not_written():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in square" is not the message
        with pytest.raises(ValueError) as e:
            estimate(rows(1e90), alignment(1e120))  # the alignment's square overflows the bootstrap variance
    assert str(e.value).startswith("reward 'big': the probe's bootstrap standard deviation is inf (float64 overflow: "
                                   "its advantages reach |A| = 1e+90, the alignment |a| = ")
    assert str(e.value).endswith("): rescale the reward (divide its scores or advantages by a constant)")


def test_signal_proxy_refuses_squares_that_overflow_by_name_or_index():
    pi = torch.full((N, T), 0.5, dtype=torch.float64)
    stacked = torch.stack([rows(1.0), rows(1e200)])
    with pytest.raises(ValueError) as e:
        signal_proxy_group_sums(stacked, pi, pi, MASK, G, names=["outcome", "huge"])
    assert str(e.value) == ("reward 'huge': the signal proxy's per-group sum of A^2 W is not finite (float64 "
                            "overflow: its advantages reach |A| = 1e+200): rescale the reward (divide its scores or "
                            "advantages by a constant)")
    with pytest.raises(ValueError, match=r"^the reward at advantages\[1\]: the signal proxy's per-group sum"):
        signal_proxy_group_sums(stacked, pi, pi, MASK, G)
    sums = signal_proxy_group_sums(torch.stack([rows(1.0), rows(1e100)]), pi, pi, MASK, G)
    # W = 1 - 2 pi + sum pi^2 = 0.5 per token: group 0 has 3 + 2 tokens, group 1 3 + 3, each with A^2 = 1e200
    assert sums[1].tolist() == pytest.approx([2.5e200, 3e200, 3e200, 3e200], rel=1e-12)


def test_signal_proxy_refuses_a_sum_that_overflows_all_the_same():
    pi = torch.zeros(N, T, dtype=torch.float64)
    with pytest.raises(ValueError) as e:
        signal_proxy_group_sums(rows(1.0), pi, torch.full((N, T), 1e308, dtype=torch.float64), MASK, G,
                                names=["outcome"])
    assert str(e.value) == ("reward 'outcome': the signal proxy's per-group sum of A^2 W is not finite (float64 "
                            "overflow: its advantages reach |A| = 1): rescale the reward (divide its scores or "
                            "advantages by a constant)")
