"""The reward-granularity plans: the GPU one (Qwen2.5-0.5B-Instruct on GSM8K) mirrors the tiny one."""

from __future__ import annotations

from pathlib import Path

from gradprobe.rewards import get_reward
from gradprobe.training.plan import load_plan

PLANS = Path(__file__).resolve().parents[2] / "plans"


def test_the_qwen05b_granularity_plan_loads_with_the_tiny_studys_arms_plus_mc_value():
    gpu = load_plan(PLANS / "reward_granularity_qwen05b.toml")
    tiny = load_plan(PLANS / "reward_granularity.toml")
    assert set(gpu.arm_names) == set(tiny.arm_names) | {"mc_value"}
    assert {gpu.arms[a].reward for a in tiny.arm_names} == {tiny.arms[a].reward for a in tiny.arm_names}
    assert all(get_reward(a.reward) for a in gpu.arms.values())
    m = gpu.model
    assert (m.name, m.dtype, m.device) == ("Qwen/Qwen2.5-0.5B-Instruct", "bfloat16", "cuda")
    assert gpu.task.name == "gsm8k" and gpu.heldout.prompts == 1319
    assert gpu.budget.generated_tokens and gpu.budget.device_seconds
    assert {h.at for h in gpu.hypotheses} == {"generated_tokens", "device_seconds", "updates"}
    assert all(h.test == "paired_t" for h in gpu.hypotheses) and len(gpu.seeds) == 3
    head = (PLANS / "reward_granularity_qwen05b.toml").read_text().splitlines()[0]
    assert head.startswith("#") and "GPU" in head
