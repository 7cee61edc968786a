"""The end-to-end figure of the GPU check: the REAL training loop, timed from what it writes.

:func:`loop_benchmark` builds a small in-memory plan (:func:`loop_plan_text`: task ``chain_sum``,
reward ``outcome``, the check's batch shape B x G x T, ``[sampling] backend`` = ``vllm`` where vLLM
imports, else ``hf``), runs :func:`gradprobe.training.run.run_training` itself on the benchmarked
policy for ``warmup + updates`` updates into a temporary folder, and reads every figure from what
the run wrote:

* per-stage seconds of each timed update = the difference of the cumulative ledgers
  (``metrics.jsonl``, one line per update) of that update and the one before: ``generation``
  (rollout sampling), ``reward`` (the verifier), ``metrics`` (``kl_init``/entropy forward),
  ``training`` (grpo_step + the after-update weight push, which the loop times together);
* the weight push's own seconds from the run's own record of each push (the ``weight_push`` field
  of an update's line, written where the sampler holds its own copy of the weights, vLLM: seconds,
  bytes, weight version), so ``update`` = ``training`` - ``weight_push``;
* wall seconds of each update between two ``after_update`` calls (the update 0 eval, the final
  eval and the final checkpoint fall outside the timed updates).

Figures (ratios of timings of one run): generated tokens/s (rollout tokens over generation seconds,
and over wall seconds), update MFU = the ledger's ``flops["training"]`` (3 x forward FLOPs per
trained token, Kaplan et al. 2020) / update device-seconds / peak FLOP/s, end-to-end MFU = the ledger's
generation + training FLOPs / wall seconds / peak FLOP/s, and each stage's share of the wall time.
The first ``warmup`` updates (CUDA kernels, vLLM's graphs, the allocator) are run but not timed.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path

from gradprobe.layout import METRICS_JSONL
from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training

#: ledger ``device_seconds`` kinds of one update, in loop order (``training`` includes the weight push)
LEDGER_STAGES = ("generation", "reward", "metrics", "training")
LOOP_BACKENDS = ("auto", "hf", "hf_paged", "vllm")


def loop_plan_text(*, model_name: str, dtype: str, device: str, backend: str, prompts: int, group: int,
                   max_new_tokens: int, micro_batch_size: int, updates: int, seed: int = 0,
                   gradient_checkpointing: bool = False) -> str:
    """The benchmark's plan (TOML): ``updates`` GRPO updates of ``prompts`` x ``group`` completions of
    at most ``max_new_tokens`` tokens on ``chain_sum`` with the ``outcome`` reward, sampled by ``backend``.

    Evals: one held-out prompt, greedy only, at update 0 and at the end (outside the timed updates);
    one checkpoint, at the end. Every other setting is the plan default a user's run gets
    (``stats_every = 1``, AdamW, ``lr`` 1e-7 so random weights stay finite).

    Raises
    ------
    ValueError
        ``backend`` is not one of ``hf``, ``hf_paged``, ``vllm``.
    """
    if backend not in LOOP_BACKENDS[1:]:
        raise ValueError(f"--loop-backend {backend!r} is not one of {', '.join(LOOP_BACKENDS)}")
    checkpointing = "true" if gradient_checkpointing else "false"
    return f"""
name = "gpu_check_loop"
seeds = [{int(seed)}]
[model]
name = {json.dumps(model_name)}
dtype = "{dtype}"
device = "{device}"
gradient_checkpointing = {checkpointing}
[task]
name = "chain_sum"
pool = {max(4 * prompts, 8)}
[heldout]
prompts = 1
[sampling]
temperature = 1.0
max_new_tokens = {int(max_new_tokens)}
batch_size = {int(prompts * group)}
backend = "{backend}"
[train]
prompts_per_update = {int(prompts)}
group = {int(group)}
lr = 1e-7
micro_batch_size = {int(micro_batch_size)}
checkpoint_every = {int(updates) + 1}
[budget]
updates = {int(updates)}
[eval]
greedy = true
sampled = false
[arms.grpo]
reward = "outcome"
"""


def _update_lines(folder: Path) -> list[dict]:
    """The per-update lines of ``metrics.jsonl`` (eval lines dropped), in update order."""
    lines = [json.loads(x) for x in (folder / METRICS_JSONL).read_text().splitlines() if x.strip()]
    return [x for x in lines if not x.get("eval")]


def push_seconds(line: dict) -> float:
    """Seconds of the weight push an update line records (``line["weight_push"]["seconds"]``); 0 for a
    sampler without its own copy of the weights (no ``weight_push`` field)."""
    return float(line.get("weight_push", {}).get("seconds", 0.0))


def stage_seconds(lines: list[dict], walls: list[float], first: int) -> dict:
    """Stage seconds summed over updates ``first + 1 .. len(lines)`` (1-based), from the ledgers and the
    lines' ``weight_push`` records.

    Parameters
    ----------
    lines : list[dict], length U
        ``metrics.jsonl`` update lines; ``line["ledger"]`` is cumulative, ``line["weight_push"]`` (where
        present) is that update's own push.
    walls : list[float], length U + 1
        ``time.perf_counter()`` at the ``after_update`` call of update i (index 0 unused).
    first : int
        Untimed (warm-up) updates, >= 1 (update ``first``'s ledger is the baseline).

    Returns
    -------
    dict
        ``seconds`` by stage (``generation``, ``reward``, ``metrics``, ``update``, ``weight_push``),
        ``wall_seconds``, ``flops`` by kind and ``generated_tokens`` (rollout) and ``trained_tokens``,
        all differences between the ledgers of update ``first`` and the last update.
    """
    a, b = lines[first - 1]["ledger"], lines[-1]["ledger"]

    def delta(kind: str, key: str) -> float:
        return b[kind].get(key, 0.0) - a[kind].get(key, 0.0)

    push = sum(push_seconds(x) for x in lines[first:])
    seconds = {k: delta("device_seconds", k) for k in LEDGER_STAGES}
    seconds["update"] = seconds.pop("training") - push
    seconds["weight_push"] = push
    return {"seconds": seconds, "wall_seconds": walls[-1] - walls[first],
            "flops": {k: delta("flops", k) for k in ("generation", "training")},
            "generated_tokens": delta("generated_tokens", "rollout"),
            "trained_tokens": b["trained_tokens"] - a["trained_tokens"]}


def loop_figures(timed: dict, peak_flops: float) -> dict:
    """The loop's figures from :func:`stage_seconds`'s sums ``timed`` (module docstring):
    ``tokens_per_second_generation`` and ``tokens_per_second_wall`` (rollout tokens / seconds),
    ``update_mfu`` and ``end_to_end_mfu`` (fractions of ``peak_flops``), ``stage_share`` (fractions of
    the wall time, ``other`` = the rest: batching, logging, the after-update hook)."""
    sec, wall = timed["seconds"], timed["wall_seconds"]
    flops = timed["flops"]
    share = {k: v / wall for k, v in sec.items()}
    share["other"] = 1.0 - sum(share.values())
    return {"tokens_per_second_generation": timed["generated_tokens"] / sec["generation"],
            "tokens_per_second_wall": timed["generated_tokens"] / wall,
            "update_mfu": flops["training"] / sec["update"] / peak_flops,
            "end_to_end_mfu": (flops["training"] + flops["generation"]) / wall / peak_flops,
            "stage_share": share}


def loop_benchmark(policy, *, backend: str, prompts: int, group: int, max_new_tokens: int, micro_batch_size: int,
                   updates: int, warmup: int = 1, seed: int = 0, device: str, dtype: str, peak_flops: float,
                   gradient_checkpointing: bool = False, sync=lambda: None, folder: str | Path | None = None) -> dict:
    """Run the real training loop on ``policy`` and return its timed figures (module docstring).

    Parameters
    ----------
    policy : gradprobe.models.Policy
        Holds the initial weights; the run trains it (call this last on a policy you reuse).
    backend : {"hf", "hf_paged", "vllm"}
        ``[sampling] backend`` of the run.
    prompts, group, max_new_tokens, micro_batch_size : int
        B, G, T and the rows per forward/backward of every update.
    updates : int
        Timed updates (>= 1), after ``warmup`` (>= 1) untimed ones.
    peak_flops : float
        Peak FLOP/s of the device (the MFU denominator).
    sync : callable
        Waits for the device (``torch.cuda.synchronize``) before each wall-clock reading.
    folder : path, optional
        The run folder, kept (default: a temporary folder, deleted afterwards); absent or empty.

    Returns
    -------
    dict
        ``backend``, ``updates_run``, ``updates_timed``, ``weight_pushes`` (update lines of the run
        that record a weight push), ``per_update`` (``update`` number, stage ``seconds`` and ``wall`` of
        every update after the first), ``timed`` (the sums of :func:`stage_seconds`), ``figures``
        (:func:`loop_figures`), ``summary`` (the run's ``summary.json``), ``run_wall_seconds`` (the
        whole ``run_training`` call: evals and the final checkpoint included).

    Raises
    ------
    ValueError
        ``updates`` or ``warmup`` < 1, an unknown ``backend``, or ``folder`` not empty (checked first:
        nothing is written then).
    """
    if updates < 1 or warmup < 1:
        raise ValueError(f"--updates ({updates}) and the warm-up ({warmup}) must each be at least 1")
    if folder is not None and Path(folder).is_dir() and any(Path(folder).iterdir()):
        raise ValueError(f"--loop-folder: {folder} is not empty (it would resume or refuse another run); "
                         f"give a new or empty folder")
    total = warmup + updates
    plan = parse_plan(loop_plan_text(model_name=policy.name, dtype=dtype, device=device, backend=backend,
                                     prompts=prompts, group=group, max_new_tokens=max_new_tokens,
                                     micro_batch_size=micro_batch_size, updates=total, seed=seed,
                                     gradient_checkpointing=gradient_checkpointing))
    run = plan.arm("grpo")
    walls = []
    with contextlib.ExitStack() as stack:
        out = Path(folder) if folder is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))

        def after_update(k: int) -> None:
            sync()
            walls.append(time.perf_counter())

        start = time.perf_counter()
        summary = run_training(run, out, policy=policy, after_update=after_update)
        run_wall = time.perf_counter() - start
        lines = _update_lines(out)
    if len(lines) != total or len(walls) != total:
        raise RuntimeError(f"the loop ran {len(lines)} updates ({len(walls)} after-update calls), expected {total}")
    per_update = [stage_seconds(lines[:k + 1], [0.0] + walls[:k + 1], k) for k in range(1, total)]
    timed = stage_seconds(lines, [0.0] + walls, warmup)
    return {"backend": backend, "updates_run": len(lines), "updates_timed": updates, "warmup_updates": warmup,
            "weight_pushes": sum("weight_push" in x for x in lines),
            "per_update": [{"update": k + 2, "seconds": p["seconds"], "wall": p["wall_seconds"]}
                           for k, p in enumerate(per_update)],
            "timed": timed, "peak_flops": peak_flops, "figures": loop_figures(timed, peak_flops), "summary": summary,
            "run_wall_seconds": run_wall, "batch": {"prompts": prompts, "group": group,
                                                    "max_new_tokens": max_new_tokens}}
