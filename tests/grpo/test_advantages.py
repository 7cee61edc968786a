import math

import pytest
import torch

from gradprobe.grpo.advantages import group_normalize

nan = float("nan")


def test_group_advantages_sum_to_zero_and_match_formula():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    adv, stats = group_normalize(r, eps=0.0)
    assert torch.allclose(adv.sum(-1), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    # group 0: mean 0.5, sample std (ddof=1) = sqrt(1/3)
    assert adv[0, 0].item() == pytest.approx(0.5 / math.sqrt(1 / 3))
    # group 1: mean 0.75, std = sqrt(0.25/3 * 4 ... ) computed explicitly
    g = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    assert adv[1].tolist() == pytest.approx(((g - g.mean()) / g.std()).tolist())
    assert stats["zero_variance_groups"] == 0 and stats["missing"] == 0


def test_zero_variance_groups_give_exact_zeros():
    r = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.3, 0.3, 0.3]], dtype=torch.float32)
    adv, stats = group_normalize(r)
    assert torch.equal(adv, torch.zeros_like(adv))
    assert stats["zero_variance_groups"] == 3


def test_float32_residue_is_not_spread():
    base = torch.tensor(0.1, dtype=torch.float32)
    r = torch.stack([base, base * 3 / 3, (base + 1e-9) - 1e-9]).reshape(1, 3)
    r[0, 2] = torch.nextafter(base, torch.tensor(1.0))  # one ulp apart
    adv, stats = group_normalize(r)
    assert stats["zero_variance_groups"] == 1 and torch.all(adv == 0)


def test_missing_rewards_masked_and_rest_normalised_without_them():
    r = torch.tensor([[1.0, nan, 0.0, 1.0]])
    adv, stats = group_normalize(r, eps=0.0)
    assert stats["missing"] == 1 and adv[0, 1] == 0
    rest = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    assert adv[0, [0, 2, 3]].tolist() == pytest.approx(((rest - rest.mean()) / rest.std()).tolist())
    assert not torch.isnan(adv).any()


def test_single_member_group_is_zero():
    r = torch.tensor([[nan, 1.0, nan], [nan, nan, nan]])
    adv, stats = group_normalize(r)
    assert torch.equal(adv, torch.zeros_like(adv)) and stats["zero_variance_groups"] == 2 and stats["missing"] == 5


def test_scales():
    r = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    none, _ = group_normalize(r, scale="none")
    assert none.tolist() == [[0.5, -0.5], [0.0, 0.0]]
    batch, _ = group_normalize(r, scale="batch", eps=0.0)
    std = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64).std()
    assert batch[0, 0].item() == pytest.approx(0.5 / std.item())
    with pytest.raises(ValueError, match="scale"):
        group_normalize(r, scale="bogus")


def test_scales_are_a_registry_and_an_unknown_scale_names_the_valid_ones():
    from gradprobe.grpo.advantages import DEFAULT_SCALE, SCALES, check_scale

    assert list(SCALES) == ["group", "batch", "none"] and DEFAULT_SCALE == "group"
    assert check_scale("batch") is SCALES["batch"]
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, nan]])
    centred = torch.tensor([[0.75, -0.25, -0.25, -0.25], [1 / 3, 1 / 3, -2 / 3, 0.0]], dtype=torch.float64)
    assert torch.allclose(group_normalize(r, scale="none")[0], centred, rtol=0, atol=1e-15)
    batch_std = torch.tensor([1.0, 0, 0, 0, 1, 1, 0], dtype=torch.float64).std()  # the 7 valid rewards
    assert torch.allclose(group_normalize(r, scale="batch", eps=0.0)[0], centred / batch_std, rtol=0, atol=1e-15)
    for bad in ("std", None):
        with pytest.raises(ValueError, match=r"advantage scale .* is unknown; valid scales: group, batch, none"):
            group_normalize(r, scale=bad)
