"""The isolated measurements of the GPU check (:mod:`gpu_check`, parts 2, 4 and 5 of its docstring): the
rollout backends' generated tokens per second (:func:`generation_throughput`), the grpo_step
micro-benchmark on a synthetic batch (:func:`step_microbenchmark`) and the jvp pass in the model's dtype
against a float32 copy (:func:`jvp_precision`). Each times one piece alone, not the training loop
(:mod:`loop_bench` times that)."""

from __future__ import annotations

import time

import torch

from probe_cost import PROMPT_TEXT

PEAK_BF16_FLOPS = 989e12  # H100 SXM / H200 dense BF16 tensor peak (NVIDIA datasheets: 1,979 TFLOPS with sparsity)


def sync(device: str) -> None:
    """Wait for ``device`` (``torch.cuda.synchronize`` on CUDA; nothing elsewhere)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def generation_throughput(policy, backends: list[str], *, prompts: int, group: int, max_new_tokens: int,
                          seed: int, device: str) -> dict:
    """Generated tokens per second of each backend on ``prompts`` x ``group`` completions.

    Prompts are prefixes of one text (ragged lengths, as :func:`probe_cost.synthetic_batch`).
    Each backend first runs a warm-up call (2 prompts x 2, 16 tokens), then the measured call.

    Returns
    -------
    dict
        backend -> {"generated_tokens", "seconds", "tokens_per_second", "completions",
        "truncated_fraction"} or {"error": "..."} when the backend failed (the others still count).
    """
    from gradprobe.config import SamplingConfig
    from gradprobe.rollout import make_sampler

    full = policy.tokenizer(PROMPT_TEXT, add_special_tokens=True)["input_ids"]
    ids = [full[:max(4, len(full) - 7 * i)] for i in range(prompts)]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=max_new_tokens, batch_size=prompts * group)
    out = {}
    for name in backends:
        try:
            options = {"gpu_memory_utilization": 0.3} if name == "vllm" else {}
            sampler = make_sampler(name, policy, seed=seed, progress=False, **options)
            sampler.sample(ids[:2], num_samples=2, sampling=sampling, max_new_tokens=16)  # warm-up
            sync(device)
            t0 = time.perf_counter()
            samples = sampler.sample(ids, num_samples=group, sampling=sampling)
            sync(device)
            seconds = time.perf_counter() - t0
            tokens = sum(len(s.token_ids) for s in samples)
            out[name] = {"generated_tokens": tokens, "seconds": seconds, "tokens_per_second": tokens / seconds,
                         "completions": len(samples),
                         "truncated_fraction": sum(s.truncated for s in samples) / len(samples)}
            if hasattr(sampler, "close"):
                sampler.close()
        except Exception as e:  # report and go on: the other figures still count
            out[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"  generation {name}: {out[name]}", flush=True)
    return out


def step_microbenchmark(model, batch, *, micro_batch_size: int, updates: int, device: str,
                        gradient_checkpointing: bool, seed: int, peak_flops: float = PEAK_BF16_FLOPS) -> dict:
    """The isolated grpo_step micro-benchmark (not the loop): MFU of :func:`~gradprobe.grpo.step.grpo_step`
    (AdamW, lr 1e-7) on the synthetic ``batch``, one warm-up step then ``updates`` timed steps, against
    ``peak_flops`` FLOP/s; the model's parameters are restored afterwards."""
    from gradprobe.grpo.step import UpdateConfig, grpo_step
    from gradprobe.ledger import forward_flops_per_token
    from gradprobe.training.metrics import mean_context

    saved = {k: p.detach().clone() for k, p in model.named_parameters()}
    g = torch.Generator().manual_seed(seed + 2)
    mask = batch.completion_mask
    adv = torch.where(mask.cpu(), torch.randn(mask.shape, generator=g, dtype=torch.float64), 0.0).to(mask.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-7)
    config = UpdateConfig(micro_batch_size=micro_batch_size)
    if gradient_checkpointing:
        from gradprobe.training.run import enable_gradient_checkpointing

        enable_gradient_checkpointing(model)
    try:
        seconds = []
        for k in range(updates + 1):
            sync(device)
            t0 = time.perf_counter()
            step = grpo_step(model, optimizer, batch, adv, config)
            sync(device)
            if k:
                seconds.append(time.perf_counter() - t0)
    finally:
        if gradient_checkpointing:
            off = getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable
            off()
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(saved[k])
        del optimizer
        model.zero_grad(set_to_none=True)
    fpt = forward_flops_per_token(model, mean_context(batch))
    completion, computed = batch.generated_tokens, int(batch.attention_mask.sum())
    sec = sum(seconds) / len(seconds)
    return {"seconds_per_update": sec, "updates_timed": len(seconds), "forward_flops_per_token": fpt,
            "completion_tokens": completion, "computed_tokens": computed,
            "mfu_completion_tokens": 3 * fpt * completion / sec / peak_flops,
            "mfu_all_tokens": 3 * fpt * computed / sec / peak_flops, "loss": step["loss"],
            "gradient_checkpointing": gradient_checkpointing}


def jvp_precision(model, batch, *, rows: int, seed: int, micro_batch_size: int) -> dict:
    """The jvp pass in the model's dtype vs a float32 copy (float64 for a float32 model) on the first
    ``rows`` rows (whole groups), along a random direction whose entries have each parameter's RMS
    times 1e-3; :func:`~gradprobe.probe.alignment.alignment_reference_check`'s record."""
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
