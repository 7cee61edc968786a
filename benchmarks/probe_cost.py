"""Cost of the probe's alignment pass against one GRPO update and against the naive baseline.

On one synthetic batch (prompts cut from a fixed string, left-padded; random completion tokens
with ragged lengths) it measures, in ``--repeats`` rounds after a warm-up round, each round
running every measurement once (interleaved, so load from other processes hits all alike):

* ``update``      one GRPO update's forward + backward as training runs it (under
                  ``UpdateConfig.attention``, PyTorch's fused SDPA kernel by default): ``policy_loss``
                  over the same micro-batches, ``backward()``, no optimizer step; the target is
                  judged against it;
* ``update_eager`` the same under the eager attention kernel that ``torch.func.jvp`` needs
                  (reported beside, not judged: the fused kernel has no forward-mode rule);
* ``probe(R)``    ``token_alignment`` (one jvp pass) + ``estimate_rewards`` without bootstrap
                  for R = 1, 5, 20 rewards;
* ``naive(R)``    R x (forward + backward of one reward's loss + dot with v): the cost of getting
                  the same R inner products by reverse mode; measured for one reward and
                  multiplied by R (the R passes are identical in cost).

Targets (DESIGN.md, "Cost accounting of the probe itself"): probe(5) / update <= 1.5 and
probe(20) / probe(5) <= 1.1, judged on the median over rounds of the per-round ratio (its two
terms run back to back); the ratio of the medians and of the minimums are printed beside it.
The thread count is left as torch set it (``torch.get_num_threads()``). Exit status 0 when both
targets pass.

Clock (``--clock``): ``cpu`` (the default on the CPU) times each measurement by the process's CPU time
(``time.process_time``, user + system of all threads), ``wall`` by ``time.perf_counter``. On a shared
machine the wall clock measures the share of the cores the process got, not the work: under a load
average of ~20 on 2 cores (1-5% of a core for this process) per-round wall ratios of the same code
ranged 0.77-1.36 while the CPU-time ratios stayed within 0.95-1.07. With one thread (or threads that
wait passively, ``OMP_WAIT_POLICY=PASSIVE``) the CPU time is the work itself. On a GPU use ``wall``
(the default there). Both clocks are recorded in ``--json``.

    python benchmarks/probe_cost.py --model smollm2-135m --prompts 4 --group 4 --completion-tokens 96
    python benchmarks/probe_cost.py --model tiny-qwen2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

PROMPT_TEXT = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May? Think step by step and give the final "
    "answer after ####."
)
REWARD_COUNTS = (1, 5, 20)


def synthetic_batch(tokenizer, vocab_size: int, *, prompts: int, group: int, completion_tokens: int,
                    temperature: float, seed: int):
    """A RolloutBatch of B prompts (prefixes of one text, ragged) x G random completions (ragged)."""
    from gradprobe.tasks.base import Problem
    from gradprobe.types import RolloutBatch

    g = torch.Generator().manual_seed(seed)
    full = tokenizer(PROMPT_TEXT, add_special_tokens=True)["input_ids"]
    lengths = [max(4, len(full) - 7 * i) for i in range(prompts)]
    p_len, t_len, n = max(lengths), completion_tokens, prompts * group
    pad = tokenizer.pad_token_id
    specials = set(tokenizer.all_special_ids)
    input_ids = torch.full((n, p_len + t_len), pad, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    completion_mask = torch.zeros((n, t_len), dtype=torch.bool)
    for i, lp in enumerate(lengths):
        for j in range(group):
            r = i * group + j
            input_ids[r, p_len - lp:p_len] = torch.tensor(full[:lp])
            attention_mask[r, p_len - lp:p_len] = 1
            lc = t_len if r == 0 else int(torch.randint(t_len // 2, t_len + 1, (1,), generator=g))
            comp = torch.randint(0, vocab_size, (lc,), generator=g)
            comp = torch.where(torch.isin(comp, torch.tensor(sorted(specials))), torch.full_like(comp, 42), comp)
            input_ids[r, p_len:p_len + lc] = comp
            attention_mask[r, p_len:p_len + lc] = 1
            completion_mask[r, :lc] = True
    return RolloutBatch(
        problems=[Problem(id=f"bench/train/{i}", question=PROMPT_TEXT, answer="72") for i in range(prompts)],
        group_size=group, input_ids=input_ids, attention_mask=attention_mask, prompt_length=p_len,
        completion_mask=completion_mask, completions=[""] * n, truncated=torch.zeros(n, dtype=torch.bool),
        scores=torch.randint(0, 2, (n,), generator=g).double(), temperature=temperature,
        prompt_token_ids=[full[:lp] for lp in lengths])


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "n/a"


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed(fn, clock: str = "wall") -> float:
    """Seconds ``fn()`` took on ``clock`` (``wall``: time.perf_counter; ``cpu``: time.process_time)."""
    read = CLOCKS[clock]
    t0 = read()
    fn()
    return read() - t0


def measure_costs(model, batch, *, micro_batch_size: int, repeats: int, clock: str = "wall", seed: int = 0,
                  naive: bool = True, plain_softmax_jvp: bool = False, sync=None) -> dict:
    """Time one GRPO update's forward + backward, the alignment pass, R-reward estimates and the naive baseline.

    ``repeats`` interleaved rounds after one warm-up round (discarded): each round runs every
    measurement once, so load from other processes hits all of them alike.

    Parameters
    ----------
    model : transformers causal LM, any dtype/device
    batch : gradprobe.types.RolloutBatch on the model's device, N rows x T completion columns
    micro_batch_size : int
        Rows per forward(+backward) / per jvp.
    repeats : int
        Timed rounds (>= 1).
    clock : {"wall", "cpu"}
        ``wall`` (``time.perf_counter``; use on a GPU, with ``sync``) or ``cpu`` (process CPU time).
    seed : int
        Seeds the direction v (entries N(0, 1e-6)) and the R random per-token rewards.
    naive : bool
        Also time ``naive(1)``: reverse mode for one reward (forward + backward + dot with v).
    sync : callable, optional
        Called before reading the clock at both ends of each measurement (``torch.cuda.synchronize``
        on a GPU, whose kernels run asynchronously).

    Returns
    -------
    dict
        ``runs`` / ``runs_other_clock`` (seconds per round and measurement, on ``clock`` and on the
        other clock), ``median_seconds``, ``min_seconds`` (with ``probe(R)`` = align + estimate(R),
        ``naive(R)`` = R x naive(1)), ``paired_ratios`` (median over rounds of probe(5)/update and
        probe(20)/probe(5), each pair measured back to back), ``other_clock``, ``trainable_parameters``.

    Raises
    ------
    ValueError
        ``repeats < 1`` or an unknown ``clock``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    from gradprobe.grpo.losses import policy_loss, token_weights
    from gradprobe.grpo.step import UpdateConfig
    from gradprobe.logprobs import token_logprobs
    from gradprobe.models import use_attention
    from gradprobe.probe import estimate_rewards, token_alignment, trainable_parameters
    from gradprobe.probe.references import dot, reward_gradient

    sync = sync or (lambda: None)
    n, t = batch.completion_mask.shape
    mbs = micro_batch_size
    g = torch.Generator().manual_seed(seed + 1)
    params = trainable_parameters(model)
    v = {k: (torch.randn(p.shape, generator=g) * 1e-3).to(p.device, p.dtype) for k, p in params.items()}
    mask = batch.completion_mask
    rewards = {f"r{k}": torch.where(mask, torch.randn((n, t), generator=g, dtype=torch.float64).to(mask.device), 0.0)
               for k in range(max(REWARD_COUNTS))}
    weights = token_weights(mask, "grpo")
    n_params = sum(p.numel() for p in params.values())

    def update_with(attention):
        def update():
            model.zero_grad(set_to_none=True)
            adv = rewards["r0"]
            with use_attention(model, attention):
                for start in range(0, n, mbs):
                    rows = slice(start, start + mbs)
                    logp = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows], batch.prompt_length,
                                          temperature=batch.temperature)
                    policy_loss(logp, adv[rows], weights[rows]).backward()
            model.zero_grad(set_to_none=True)
        return update

    alignment = {}

    def align():
        alignment["a"] = token_alignment(model, batch, v, micro_batch_size=mbs, fast_softmax_jvp=not plain_softmax_jvp)

    def estimate(r):
        names = list(rewards)[:r]
        return lambda: estimate_rewards(
            alignment["a"], {k: rewards[k] for k in names}, completion_mask=mask, group_size=batch.group_size,
            lr=1e-6, tokens_per_update={k: batch.generated_tokens for k in names}, budget_tokens=1e6, n_bootstrap=0)

    def naive_one():
        grad = reward_gradient(model, batch, rewards["r0"], weights, micro_batch_size=mbs)
        dot(grad, v)

    def synced(fn):
        def run():
            fn()
            sync()
        return run

    # Rounds interleave every measurement, so load from other processes hits all of them alike;
    # round 0 is the warm-up and is discarded.
    # "update" is the update as training runs it (UpdateConfig.attention, default sdpa); "update_eager"
    # the same under the eager kernel the jvp needs (forward-mode AD has no rule for the fused kernel)
    jobs = {"update": update_with(UpdateConfig().attention), "update_eager": update_with(model.config._attn_implementation), "align": align,
            **{f"estimate({r})": estimate(r) for r in REWARD_COUNTS}}
    if naive:
        jobs["naive(1)"] = naive_one
    runs = {k: [] for k in jobs}
    other = "wall" if clock == "cpu" else "cpu"
    other_runs = {k: [] for k in jobs}  # the other clock
    for round_ in range(repeats + 1):
        for name, fn in jobs.items():
            sync()
            read = CLOCKS[other]
            t0 = read()
            seconds = timed(synced(fn), clock)
            if round_:
                runs[name].append(seconds)
                other_runs[name].append(read() - t0)
    for r in REWARD_COUNTS:
        runs[f"probe({r})"] = [a + e for a, e in zip(runs["align"], runs[f"estimate({r})"])]
    med = {k: statistics.median(x) for k, x in runs.items()}
    low = {k: min(x) for k, x in runs.items()}
    if naive:
        for r in REWARD_COUNTS:
            med[f"naive({r})"], low[f"naive({r})"] = r * med["naive(1)"], r * low["naive(1)"]
    # paired per-round ratios: both terms measured back to back, so they share the machine's load
    ratio_update = statistics.median(p / u for p, u in zip(runs["probe(5)"], runs["update"]))
    ratio_rewards = statistics.median(p20 / p5 for p20, p5 in zip(runs["probe(20)"], runs["probe(5)"]))
    ratio_eager = statistics.median(p / u for p, u in zip(runs["probe(5)"], runs["update_eager"]))
    return {"runs": runs, "runs_other_clock": other_runs, "median_seconds": med, "min_seconds": low,
            "paired_ratios": {"probe5_over_update": ratio_update, "probe20_over_probe5": ratio_rewards,
                              "probe5_over_update_eager": ratio_eager},
            "clock": clock, "other_clock": other, "trainable_parameters": n_params, "rows": n,
            "completion_columns": t, "completion_tokens": batch.generated_tokens, "micro_batch_size": mbs,
            "repeats": repeats}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-qwen2", help="alias or path for gradprobe.models.load_policy")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prompts", type=int, default=4, help="B")
    parser.add_argument("--group", type=int, default=4, help="G")
    parser.add_argument("--completion-tokens", type=int, default=96, help="T, the longest completion")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="rows per forward(+backward) / per jvp")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (after one warm-up round)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plain-softmax-jvp", action="store_true",
                        help="token_alignment(fast_softmax_jvp=False): PyTorch's own forward-mode softmax rules")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default=None,
                        help="what the targets are judged on: cpu (process CPU time; default on the CPU, robust to "
                             "load from other processes) or wall (time.perf_counter; default on a GPU)")
    parser.add_argument("--json", default=None, help="also write the measurements to this JSON file")
    args = parser.parse_args(argv)
    if args.clock is None:
        args.clock = "cpu" if args.device == "cpu" else "wall"

    from gradprobe.models import load_policy

    load_before = _loadavg()
    t0 = time.perf_counter()
    policy = load_policy(args.model, dtype=args.dtype, device=args.device, seed=args.seed)
    load_s = time.perf_counter() - t0
    model = policy.model
    batch = synthetic_batch(policy.tokenizer, model.config.vocab_size, prompts=args.prompts, group=args.group,
                            completion_tokens=args.completion_tokens, temperature=args.temperature,
                            seed=args.seed).to(policy.device)
    n, t = batch.completion_mask.shape
    mbs = args.micro_batch_size
    m = measure_costs(model, batch, micro_batch_size=mbs, repeats=args.repeats, clock=args.clock, seed=args.seed,
                      plain_softmax_jvp=args.plain_softmax_jvp,
                      sync=torch.cuda.synchronize if str(args.device).startswith("cuda") else None)
    load_after = _loadavg()
    runs, other_runs, med, low = m["runs"], m["runs_other_clock"], m["median_seconds"], m["min_seconds"]
    other, n_params = m["other_clock"], m["trainable_parameters"]
    ratio_update, ratio_rewards = m["paired_ratios"]["probe5_over_update"], m["paired_ratios"]["probe20_over_probe5"]
    t_update = med["update"]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, python {platform.python_version()}, "
          f"{platform.machine()}; load average {load_before} before, {load_after} after")
    print(f"model {args.model} ({n_params / 1e6:.2f}M trainable parameters, {args.dtype}, {args.device}, "
          f"attention {model.config._attn_implementation}, loaded in {load_s:.1f} s)")
    print(f"clock: {args.clock} ({'process CPU time, time.process_time' if args.clock == 'cpu' else 'wall, time.perf_counter'})")
    other_ratio = statistics.median(
        (a + e) / u for a, e, u in zip(other_runs["align"], other_runs["estimate(5)"], other_runs["update"]))
    print(f"softmax jvp rules: {'PyTorch (--plain-softmax-jvp)' if args.plain_softmax_jvp else 'FastSoftmaxJvp'}")
    print(f"batch B={args.prompts} G={args.group} N={n}, prompt columns P={batch.prompt_length}, completion columns "
          f"T={t}, completion tokens {batch.generated_tokens}, micro-batch {mbs} rows; {args.repeats} interleaved "
          "rounds after 1 warm-up round")
    print("probe(R) = token_alignment (one jvp pass, independent of R) + estimate_rewards(R rewards, n_bootstrap=0), "
          "both timed in each round; naive(R) = R x naive(1)")
    print()
    print(f"{'measurement':<14}{'median s':>10}{'min s':>10}{'med/update':>11}   runs (s)")
    order = ["update", "update_eager", "align"] + [f"estimate({r})" for r in REWARD_COUNTS] + [f"probe({r})" for r in REWARD_COUNTS]
    for name in order + [f"naive({r})" for r in REWARD_COUNTS]:
        shown = runs.get(name)
        tail = " ".join(f"{x:.4f}" for x in shown) if shown else f"= {name[6:-1]} x naive(1)"
        print(f"{name:<14}{med[name]:>10.4f}{low[name]:>10.4f}{med[name] / t_update:>11.3f}   {tail}")
    p5, p20 = med["probe(5)"], med["probe(20)"]
    ok1, ok2 = ratio_update <= 1.5, ratio_rewards <= 1.1
    verdict = {True: "PASS", False: "FAIL"}
    print()
    print("targets, on the median of per-round ratios (ratio of medians; ratio of minimums):")
    print(f"  probe(5)/update    <= 1.5 : {ratio_update:.3f} ({p5 / t_update:.3f}; "
          f"{low['probe(5)'] / low['update']:.3f})  {verdict[ok1]}")
    print(f"  probe(20)/probe(5) <= 1.1 : {ratio_rewards:.3f} ({p20 / p5:.3f}; "
          f"{low['probe(20)'] / low['probe(5)']:.3f})  {verdict[ok2]}")
    print(f"  (on the {other} clock, not judged: probe(5)/update {other_ratio:.3f}; against the update under the "
          f"eager attention kernel the jvp runs on: {m['paired_ratios']['probe5_over_update_eager']:.3f})")
    print(f"naive(20)/probe(20) = {med['naive(20)'] / p20:.1f}x "
          f"(minimums: {low['naive(20)'] / low['probe(20)']:.1f}x); "
          f"estimate(20) - estimate(5) = {1e3 * (med['estimate(20)'] - med['estimate(5)']):.2f} ms")
    if args.json:
        record = {"args": vars(args), "torch": torch.__version__, "threads": torch.get_num_threads(),
                  "clock": args.clock, "median_seconds": med, "min_seconds": low, "runs": runs,
                  f"runs_{other}_clock": other_runs,
                  "paired_ratios": {"probe5_over_update": ratio_update, "probe20_over_probe5": ratio_rewards},
                  "pass": {"probe5_over_update": ok1, "probe20_over_probe5": ok2}}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
