"""``[sampling] temperature = 1e-300`` passed the plan checks and training then stopped at update 0 on non-finite
logits (logits / temperature overflow float32), leaving a run folder; ``top_k = 1e19`` (past int64) passed too. Both
are now refused by :class:`gradprobe.config.SamplingConfig` (so by a plan when it is read, and by the probe's
config), naming the key, the value and the fix. The floor is float32's (1e-30), not vLLM's greedy threshold (1e-5):
a temperature of 1e-6 samples (near-greedily) and a plan or study frozen with one stays readable."""

from __future__ import annotations

import pytest

from gradprobe.config import MAX_TOP_K, MIN_TEMPERATURE, SamplingConfig
from gradprobe.training.plan import PlanError, parse_plan

from helpers_training import tiny_plan


@pytest.mark.parametrize("value", [1e-300, 1e-31, 9.99e-31])
def test_a_temperature_below_the_minimum_is_refused_when_the_plan_is_read(value):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(sampling={"temperature": value}))
    msg = str(e.value)
    assert f"sampling.temperature = {value!r} is below the minimum 1e-30" in msg
    assert "overflows to inf" in msg and "set temperature >= 1e-30" in msg
    assert parse_plan(tiny_plan(sampling={"temperature": MIN_TEMPERATURE})).sampling.temperature == 1e-30
    assert parse_plan(tiny_plan(sampling={"temperature": 1e-6})).sampling.temperature == 1e-6  # near-greedy: read


def test_a_temperature_below_the_minimum_is_refused_by_the_probe_config():
    with pytest.raises(ValueError, match=r"sampling\.temperature = 1e-300 is below the minimum 1e-30"):
        SamplingConfig(temperature=1e-300)
    assert SamplingConfig(temperature=5e-6).temperature == 5e-6


@pytest.mark.parametrize("value, shown", [(10**19, "10000000000000000000"), (2**31, "2147483648")])
def test_a_top_k_past_32_bits_is_refused(value, shown):
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(sampling={"top_k": value}))
    assert f"sampling.top_k = {shown} is above 2,147,483,647 (2**31 - 1)" in str(e.value)
    assert "set top_k = 0 to keep every token (off)" in str(e.value)
    with pytest.raises(ValueError, match="sampling.top_k = 2147483648 is above"):
        SamplingConfig(top_k=2**31)
    plan = parse_plan(tiny_plan(sampling={"top_k": MAX_TOP_K}))  # the bound itself, and a vocabulary-sized one
    assert (plan.sampling.top_k, SamplingConfig(top_k=50_000).top_k) == (2**31 - 1, 50_000)
