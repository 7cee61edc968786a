"""Update throughput of our GRPO loop against TRL's ``GRPOTrainer`` on the same model and data.

One GRPO configuration is run by both, in one process, from the same initial weights:

* model: a randomly initialised Qwen2 (``transformers.Qwen2Config``) with the project's
  character tokenizer (:func:`gradprobe.models.load_policy` ``"tiny-qwen2"`` with the sizes
  given on the command line; default 4 layers, d = 128, ~0.8 M parameters);
* data: reasoning-gym ``chain_sum`` prompts, as a :class:`datasets.Dataset` of chat messages
  for TRL (rendered by the tokenizer's chat template: the same ids as
  :func:`gradprobe.tasks.encode_prompt`, checked before timing), and the same problems for us,
  update by update (each of our updates uses the B prompts of the TRL step it follows);
* settings: B prompts x G completions per update, ``max_completion_length`` L, temperature,
  top_p = 1, top_k = 0, constant learning rate, AdamW (betas 0.9/0.999, eps 1e-8, no weight
  decay), gradient-norm clip 1.0, PPO clip 0.2, loss type, beta = 0 (no reference model),
  one optimizer step per generation batch (TRL: ``steps_per_generation = 1``,
  ``gradient_accumulation_steps = 1``, ``num_iterations = 1``; ours: one
  :func:`gradprobe.grpo.step.grpo_step` on the whole batch), no vLLM, group-std advantages.

Generation: both use Hugging Face ``model.generate`` with a KV cache. Ours switches attention
to ``sdpa`` while sampling and, by default (``UpdateConfig.attention``), for the update's
forward + backward too, keeping the exact eager kernel the probe needs as the model's own;
TRL's copy of the model is given ``sdpa`` throughout (its default when it loads a model itself).

Throughput (the same definition for both): completion tokens (EOS included, padding excluded)
per wall-second of a full update = generation + reward + advantages + loss + backward + clip +
optimizer step. For TRL an update is one ``Trainer`` step, timed from ``on_step_begin`` to
``on_step_end`` (generation happens inside the step, in ``_prepare_inputs``); its tokens are
counted in the reward function from ``completion_ids``. For us it is
``collect_rollouts`` + the ``outcome`` reward + ``grpo_step``, as in
:func:`gradprobe.training.run.run_training`: ``grpo_step`` also computes the per-update policy
statistics (KL to the initial policy, entropy) from its loss forward plus one no-grad forward
of the initial model; that statistics work is timed by ``grpo_step`` (``stats_seconds``),
excluded from the first ratio and included in the second.

A third side, ``ours_eager`` (off with ``--no-eager-variant``), is our loop with the update's
forward + backward under the exact eager kernel the model is loaded with
(:mod:`gradprobe.attention`; the probe's jvp needs it, the update does not;
``UpdateConfig(attention=None)``, the behaviour before sdpa became the update's default): it
shows how much the attention kernel matters. Each round starts every side from the
initial weights, runs ``--warmup`` untimed updates, then ``--updates`` timed ones. The sides
are interleaved update by update, so load from other processes hits all alike: after each TRL
step (its timer stopped, inside ``on_step_end``) one update of each of our sides runs, in an
order that alternates from step to step and from round to round. The throughput of a side is its total
tokens / total seconds over all timed updates; the ratio ours / TRL is printed per round and
overall. Target: >= 1.0.

Shared machines: the thread count is set with ``--threads`` (default 1) and
``os.getloadavg()`` is printed before and after.

    python benchmarks/trl_throughput.py --updates 8 --warmup 1 --rounds 2

Measured 2026-11-30 (before the fixes below) on the shared 2-core CPU box (load average 7-8
from other jobs, so +-20% between rounds), ``--updates 8 --warmup 1 --rounds 2``, defaults
otherwise (B=4, G=4, L=64, grpo, ~300-token prompts): ours 169 tok/s, TRL 202 tok/s, ours/TRL
0.84 (rounds 0.80, 0.87); ours with an sdpa update 0.96 of TRL; with our per-update KL/entropy
statistics 0.59. The gap was the update's exact eager attention (about 3.0 s vs 2.1 s with sdpa
per update here) and, in ``run_training``, two extra statistics forward passes.

After the fixes (the update runs under sdpa by default; KL/entropy from the loss forward plus
one no-grad forward of the initial model; our sides use TRL's prompts step by step), same box,
load average 2.6-5 (1-minute, before and after each run), ``--updates 8 --warmup 1 --rounds 2``:

* chat prompts, seed 0: ours 432 tok/s, TRL 448 tok/s, ours/TRL 0.96 (rounds 0.95, 0.98); with
  statistics 0.81 (0.80, 0.82); exact-eager update 0.84; TRL seconds per update / ours 1.06
  (ours faster per update), but TRL's sampled completions were 10% longer on the same prompts
  (745 vs 678 tokens per update); statistics 0.30 s per update against 1.57 s for the update;
  generation 46% of ours.
* chat prompts, ``--seed 1``: ours/TRL 1.08 (rounds 1.08, 1.08); with statistics 0.90; exact-eager
  update 0.93; seconds per update TRL/ours 1.06; tokens per update ours 763, TRL 747.
* ``--prompt-template compact`` (the tiny tier's ~15-token prompts): ours/TRL 0.99 (rounds 1.01,
  0.97); with statistics 0.87; exact-eager update 0.97; seconds per update TRL/ours 1.07; tokens
  per update ours 684, TRL 739; generation 61% of ours.

So per update on the same prompts ours is ~6% faster than TRL in all three runs; the tokens/s
ratio moves with which side happened to sample longer completions (a fixed-seed stream, the
same in both rounds). The statistics' remaining cost is the initial model's forward (TRL logs
no KL to the initial policy at beta = 0).
``dr_grpo``: :func:`~gradprobe.grpo.step.grpo_step` divides by rows x
``UpdateConfig.max_completion_length`` (here L), as TRL (``tests/grpo/test_trl_equivalence.py``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--prompts", type=int, default=4, help="B, prompts per update")
    p.add_argument("--group", type=int, default=4, help="G, completions per prompt")
    p.add_argument("--max-completion-length", type=int, default=64, help="L, tokens")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--loss-type", default="grpo", choices=("grpo", "dapo", "dr_grpo"))
    p.add_argument("--updates", type=int, default=5, help="timed updates per side and round")
    p.add_argument("--warmup", type=int, default=1, help="untimed updates per side and round")
    p.add_argument("--rounds", type=int, default=2, help="rounds; the order of the sides alternates")
    p.add_argument("--model", default="random", choices=("random", "tiny"),
                   help="random: a randomly initialised Qwen2 of the sizes below (completion lengths are random "
                        "until EOS is sampled); tiny: the warm-started tiny tier on its frontier task "
                        "(TINY_FRONTIER_TASK, compact prompts), whose completions follow the learned format, so "
                        "both sides sample completions of about the same length")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=512)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--prompt-template", default="chat", choices=("chat", "compact"),
                   help="character tokenizer's chat template: 'chat' (instruction + question, ~300 tokens) or "
                        "'compact' (the tiny tier's: the arithmetic expression only, ~15-20 tokens)")
    p.add_argument("--pool", type=int, default=256, help="chain_sum training prompts")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-eager-variant", dest="eager_variant", action="store_false",
                   help="skip the third side, ours with the exact eager attention in the update (see the module "
                        "docstring)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    for name in ("prompts", "group", "max_completion_length", "updates", "rounds", "threads", "pool"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.group < 2:
        raise SystemExit("--group must be >= 2 (group-normalised advantages need two completions)")
    if args.warmup < 0:
        raise SystemExit(f"--warmup must be >= 0, got {args.warmup}")
    return args


def load_model(args):
    from gradprobe.models import load_policy

    from gradprobe.char_tokenizer import TEMPLATES

    if args.model == "tiny":  # the tier's own tokenizer and compact template
        return load_policy("tiny", dtype="float32", seed=args.seed)
    policy = load_policy("tiny-qwen2", dtype="float32", seed=args.seed, layers=args.layers, hidden_size=args.hidden,
                         intermediate_size=args.intermediate, heads=args.heads, kv_heads=args.kv_heads)
    policy.tokenizer.chat_template = TEMPLATES[args.prompt_template]  # both sides share this tokenizer
    return policy


class Ours:
    """Our GRPO update loop (the body of :func:`gradprobe.training.run.run_training`'s update)."""

    def __init__(self, policy, task, pool, args, *, train_attention: str | None = "sdpa"):
        from gradprobe.config import MCConfig, SamplingConfig
        from gradprobe.grpo.step import UpdateConfig
        from gradprobe.ledger import Ledger
        from gradprobe.rewards import get_reward
        from gradprobe.rollout import HFSampler

        self.policy, self.task, self.pool, self.args = policy, task, pool, args
        n = args.prompts * args.group
        self.sampling = SamplingConfig(temperature=args.temperature, top_p=1.0, top_k=0,
                                       max_new_tokens=args.max_completion_length, batch_size=n)
        self.mc = MCConfig()
        self.sampler = HFSampler(policy, seed=args.seed, progress=False)
        self.reward = get_reward("outcome")
        self.ledger = Ledger()
        self.config = UpdateConfig(loss_type=args.loss_type, micro_batch_size=n, max_grad_norm=1.0,
                                   clip_low=0.2, clip_high=0.2, max_completion_length=args.max_completion_length,
                                   attention=train_attention)
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=0.0)
        self.init_model = copy.deepcopy(policy.model).requires_grad_(False).eval()
        self.calls = 0

    def update(self, problem_indices: list[int] | None = None) -> dict:
        """One update on the pool problems ``problem_indices`` (B of them; default the next B in order)."""
        from gradprobe.grpo.step import grpo_step
        from gradprobe.rewards import RewardContext
        from gradprobe.rollout import collect_rollouts

        b = self.args.prompts
        if problem_indices is None:
            problem_indices = [(self.calls * b + k) % len(self.pool) for k in range(b)]
        problems = [self.pool[i] for i in problem_indices]
        self.calls += 1
        start = time.perf_counter()
        batch = collect_rollouts(self.policy, self.task, problems, group_size=self.args.group, sampler=self.sampler,
                                 sampling=self.sampling, ledger=self.ledger, category="rollout")
        generated = time.perf_counter()
        ctx = RewardContext(task=self.task, sampler=self.sampler, sampling=self.sampling, mc=self.mc,
                            ledger=self.ledger, tokenizer=self.policy.tokenizer,
                            eos_token_ids=self.policy.eos_token_ids)
        adv = self.reward(batch, ctx).advantages.to(torch.float64)
        step = grpo_step(self.policy.model, self.optimizer, batch, adv, self.config, ledger=self.ledger,
                         init_model=self.init_model)
        stats_seconds = step["stats_seconds"]
        end = time.perf_counter()
        return {"seconds": end - start - stats_seconds, "generation_seconds": generated - start,
                "stats_seconds": stats_seconds, "kl_init": step["kl_init"], "entropy": step["entropy"],
                "tokens": batch.generated_tokens, "loss": step["loss"],
                "reward_mean": float(torch.nanmean(batch.scores))}


def trl_dataset(task, pool):
    """``chain_sum`` problems as TRL's conversational prompts (one user message)."""
    from datasets import Dataset

    from gradprobe.tasks.prompts import INSTRUCTION

    return Dataset.from_dict({
        "prompt": [[{"role": "user", "content": f"{p.question}\n\n{INSTRUCTION}"}] for p in pool],
        "problem_index": list(range(len(pool))),
    })


def check_same_prompt_ids(trainer, policy, pool, dataset):
    """TRL's prompt ids (its chat-template path) equal ours (:func:`encode_prompt`) on a few prompts."""
    from gradprobe.tasks import encode_prompt

    rows = list(range(min(4, len(pool))))
    theirs = trainer._tokenize_prompts([dataset[i]["prompt"] for i in rows])
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    theirs = theirs["prompt_ids"] if isinstance(theirs, dict) else theirs
    for i, ids in zip(rows, theirs):
        ours = list(encode_prompt(policy.tokenizer, pool[i].question))
        if list(ids) != ours:
            raise SystemExit(f"prompt {i}: TRL tokenizes to {len(ids)} ids, we to {len(ours)}; the comparison "
                             "would not use the same prompts")


def run_trl(model, policy, task, pool, args, steps: int, between_steps=None) -> list[dict]:
    """``steps`` GRPOTrainer steps on ``model``; one dict per step (seconds, tokens).

    ``between_steps(step_index, problem_indices)``, if given, runs after each step's timer
    stopped (inside ``on_step_end``): the other sides' updates, interleaved update by update, on
    the B pool problems TRL's step used (its sampler's order; each repeated G times in a row).
    """
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    n = args.prompts * args.group
    dataset = trl_dataset(task, pool)
    counts: list[int] = []
    indices: list[list[int]] = []
    rewards: list[float] = []

    def reward(prompts, completions, completion_ids, problem_index, **kwargs):
        counts.append(sum(len(ids) for ids in completion_ids))
        indices.append([int(i) for i in problem_index])
        out = []
        for c, i in zip(completions, problem_index):
            text = c[-1]["content"] if isinstance(c, list) else c
            out.append(float(task.score(text, pool[i])))
        rewards.extend(out)
        return out

    steps_out: list[dict] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            steps_out.append({"seconds": time.perf_counter() - self.t0})
            if between_steps is not None:
                step = len(steps_out) - 1
                rows = indices[step]
                groups = [rows[k:k + args.group] for k in range(0, len(rows), args.group)]
                if any(len(set(g)) != 1 for g in groups):
                    raise RuntimeError(f"TRL step {step}: problem indices {rows} are not {args.group} repeats of each "
                                       "prompt in a row; cannot give our sides the same prompts")
                between_steps(step, [g[0] for g in groups])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = GRPOConfig(
            output_dir=tempfile.mkdtemp(prefix="trl-bench-"), report_to="none", logging_strategy="no",
            save_strategy="no", disable_tqdm=True, use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False,
            per_device_train_batch_size=n, num_generations=args.group, gradient_accumulation_steps=1,
            steps_per_generation=1, num_iterations=1, max_completion_length=args.max_completion_length,
            temperature=args.temperature, top_p=1.0, top_k=0, learning_rate=args.lr, lr_scheduler_type="constant",
            warmup_steps=0, optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
            weight_decay=0.0, max_grad_norm=1.0, epsilon=0.2, loss_type=args.loss_type, beta=0.0,
            scale_rewards="group", max_steps=steps, seed=args.seed, use_vllm=False, log_completions=False,
            dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                              processing_class=policy.tokenizer, callbacks=[Timer()])
        check_same_prompt_ids(trainer, policy, pool, dataset)
        trainer.remove_callback(PrinterCallback)  # with disable_tqdm it prints the final metrics dict
        trainer.train()
    if len(counts) != len(steps_out):
        raise RuntimeError(f"TRL ran {len(steps_out)} steps but generated {len(counts)} batches; expected one "
                           "generation per step (steps_per_generation = 1)")
    for s, c in zip(steps_out, counts):
        s["tokens"] = c
    return steps_out


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    import transformers
    import trl

    from gradprobe.ledger import non_embedding_parameters
    from gradprobe.tasks import load_task

    load_before = os.getloadavg()
    base = load_model(args)
    if args.model == "tiny":
        from gradprobe.tiers import TINY_FRONTIER_TASK

        task = load_task("chain_sum", train_size=args.pool, **TINY_FRONTIER_TASK)
    else:
        task = load_task("chain_sum", train_size=args.pool)
    pool = task.problems("train", args.pool, seed=args.seed)
    params = sum(p.numel() for p in base.model.parameters())
    cfg = base.model.config
    print(f"model: {args.model}: Qwen2 {cfg.num_hidden_layers} layers, d={cfg.hidden_size}, {params:,} parameters "
          f"({non_embedding_parameters(base.model):,} non-embedding); vocab {base.model.config.vocab_size}")
    print(f"config: B={args.prompts} x G={args.group}, L={args.max_completion_length}, lr={args.lr}, "
          f"T={args.temperature}, loss={args.loss_type}, beta=0, threads={args.threads}, "
          f"prompt template {'the tier' if args.model == 'tiny' else args.prompt_template}; "
          f"{args.warmup} warm-up + {args.updates} timed updates x {args.rounds} rounds")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; load avg before {load_before}")

    sides = ("ours", "ours_eager", "trl") if args.eager_variant else ("ours", "trl")
    results = {side: [] for side in sides}
    results.update(ours_stats_seconds=[], rounds=[])
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        round_out = {}
        runners, runs_of = {}, {side: [] for side in sides}
        for side in sides[:-1]:
            policy = copy.copy(base)
            policy.model = copy.deepcopy(base.model)
            runners[side] = Ours(policy, task, pool, args, train_attention=None if side == "ours_eager" else "sdpa")

        def ours_updates(step, problem_indices):  # after TRL's step `step`, one update of each of our sides,
            # on the same prompts
            for side in (order if step % 2 == 0 else order[::-1]):
                if side != "trl":
                    runs_of[side].append(runners[side].update(problem_indices))

        model = copy.deepcopy(base.model)
        model.set_attn_implementation("sdpa")
        runs_of["trl"] = run_trl(model, base, task, pool, args, args.warmup + args.updates, ours_updates)
        for side in sides:
            runs = runs_of[side][args.warmup:]
            if len(runs) != args.updates:
                raise RuntimeError(f"{side}: {len(runs)} timed updates, expected {args.updates}")
            if side == "ours":
                results["ours_stats_seconds"] += [u["stats_seconds"] for u in runs]
            results[side] += runs
            tok, sec = sum(u["tokens"] for u in runs), sum(u["seconds"] for u in runs)
            round_out[side] = {"tokens": tok, "seconds": sec, "tokens_per_second": tok / sec,
                               "median_update_seconds": statistics.median(u["seconds"] for u in runs)}
        trl_tps = round_out["trl"]["tokens_per_second"]
        round_out["ratio"] = round_out["ours"]["tokens_per_second"] / trl_tps
        parts = [f"{side} {round_out[side]['tokens_per_second']:.1f} tok/s ({round_out[side]['tokens']} tokens in "
                 f"{round_out[side]['seconds']:.2f} s)" for side in sides]
        stats_sec = sum(u["stats_seconds"] for u in runs_of["ours"][args.warmup:])
        round_out["ratio_with_policy_stats"] = round_out["ours"]["tokens"] / (round_out["ours"]["seconds"]
                                                                               + stats_sec) / trl_tps
        parts.append(f"ours+stats/TRL {round_out['ratio_with_policy_stats']:.3f}")
        if args.eager_variant:
            round_out["ratio_eager"] = round_out["ours_eager"]["tokens_per_second"] / trl_tps
            parts.append(f"ours_eager/TRL {round_out['ratio_eager']:.3f}")
        results["rounds"].append(round_out)
        print(f"round {r + 1} ({' > '.join(order)}): " + ", ".join(parts) + f", ours/TRL {round_out['ratio']:.3f}",
              flush=True)

    def rate(side, extra=0.0):
        return sum(u["tokens"] for u in results[side]) / (sum(u["seconds"] for u in results[side]) + extra)

    ours_seconds = sum(u["seconds"] for u in results["ours"])
    summary = {
        "ours_tokens_per_second": rate("ours"), "trl_tokens_per_second": rate("trl"),
        "ratio": rate("ours") / rate("trl"),
        "ratio_with_policy_stats": rate("ours", sum(results["ours_stats_seconds"])) / rate("trl"),
        "ours_generation_share": sum(u["generation_seconds"] for u in results["ours"]) / ours_seconds,
        "ratio_per_round": [x["ratio"] for x in results["rounds"]],
        # seconds per update, TRL / ours: the same prompts, but completions (sampled) differ in length
        "update_seconds_ratio": (statistics.mean(u["seconds"] for u in results["trl"])
                                 / statistics.mean(u["seconds"] for u in results["ours"])),
        "tokens_per_update": {side: statistics.mean(u["tokens"] for u in results[side]) for side in sides},
        "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "args": vars(args),
    }
    summary["ratio_with_policy_stats_per_round"] = [x["ratio_with_policy_stats"] for x in results["rounds"]]
    summary["ours_stats_seconds_per_update"] = statistics.mean(results["ours_stats_seconds"])
    summary["ours_update_seconds_per_update"] = statistics.mean(u["seconds"] for u in results["ours"])
    if args.eager_variant:
        summary["ours_eager_tokens_per_second"] = rate("ours_eager")
        summary["ratio_eager"] = rate("ours_eager") / rate("trl")
    print(f"overall: ours {summary['ours_tokens_per_second']:.1f} tok/s, TRL {summary['trl_tokens_per_second']:.1f} "
          f"tok/s, ours/TRL {summary['ratio']:.3f} (target >= 1.0; counting our KL/entropy statistics too "
          f"{summary['ratio_with_policy_stats']:.3f})"
          + (f"; update under exact eager attention: ours_eager/TRL {summary['ratio_eager']:.3f}"
             if args.eager_variant else "")
          + f"; statistics {summary['ours_stats_seconds_per_update']:.3f} s per update (update "
          f"{summary['ours_update_seconds_per_update']:.3f} s); seconds per update TRL/ours "
          f"{summary['update_seconds_ratio']:.3f}, tokens per update "
          + ", ".join(f"{k} {v:.0f}" for k, v in summary["tokens_per_update"].items())
          + f"; our generation share {100 * summary['ours_generation_share']:.0f}%; load avg after "
          f"{tuple(round(x, 2) for x in summary['load_avg_after'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "rounds": results["rounds"]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
