"""Per-update statistics, held-out evaluation and the ``metrics.jsonl`` writer of a training run.

Definitions used in the per-update lines (computed on the update's batch, BEFORE the update,
i.e. under the policy that sampled it, at the sampling temperature, over completion tokens):

``kl_init``   k3 estimator (Schulman 2020, "Approximating KL divergence") of
              KL(pi_theta || pi_init) per token: mean of exp(d) - d - 1, d = l_init - l_theta,
              l_init from a frozen copy of the initial weights; unbiased because the tokens
              were sampled from pi_theta. 0 at the first update up to rounding (l_theta and l_init
              come from two separate forwards of equal weights; the tests allow 1e-24 in
              float64). d is clamped to [-20, 20] nats as verl clamps it
              (:func:`gradprobe.grpo.step.policy_stat_sums`).
``kl_clamped_tokens`` completion tokens whose |d| exceeded that clamp (then ``kl_init`` is a
              lower bound; a warning is logged); null on updates without the statistics.
``entropy``   mean over completion tokens of the full-vocabulary entropy of pi_theta(. | prefix)
              (nats), from the same forward that gives l_theta (exact, not -mean logp).
``reward_mean`` verifier outcome r_ij of the rollouts, missing (NaN) ignored (``score_missing``: the
              completions the task's scorer gave no score); ``reward_missing``: completions the
              arm's trained reward gave no reward (None, NaN or +-inf; masked: advantage 0, left out
              of their group's mean and std; the reward's own figures are in ``reward_stats``);
              ``reward_valid``: completions it did give a reward (a run whose updates all have 0
              stops, ``stop_reason`` ``"no_valid_reward"``: :func:`gradprobe.training.update.check_untrained_stop`);
``advantage_*`` over completion tokens of rows with a reward.

``weight_push`` (a sampler backend with its own copy of the weights, ``backend = "vllm"``, only):
              the push of the updated weights into the engine after the update: ``seconds``
              (wall, inside the ledger's training seconds), ``bytes`` sent and the engine's
              ``weight_version`` after it (:meth:`gradprobe.rollout.vllm_sampler.VLLMSampler.push_weights`).

In a training run both come from the update's own forward pass: l_theta and the entropy from
the loss's logits (detached, before the optimizer step, under the update's ``sdpa`` attention),
l_init from one no-grad forward of the frozen initial model
(:func:`gradprobe.grpo.step.loss_and_backward` with ``init_model``). That extra work is timed
as ``device_seconds["metrics"]``, outside the training seconds. :func:`policy_stats` is the
standalone two-pass computation (its own no-grad forwards of pi_theta and pi_init), equal in
value (``tests/grpo/test_update_attention.py``). Eval tokens go to the ledger's ``eval``
category and its seconds to ``"eval"``, never to the budget. FLOPs:
:func:`gradprobe.ledger.forward_flops_per_token` at the batch's mean context (prompt + half the
mean completion), 3x that per trained token.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from ..grpo.losses import KL_LOG_RATIO_CLAMP
from ..ledger import forward_flops_per_token
from ..logprobs import position_ids_from_mask
from ..outputs import json_safe, output_error  # noqa: F401  (json_safe: also imported from here)
from ..rewards.process import trace_fidelity
from ..rollout import HFSampler, score_completions
from ..streams import stream_seed


@torch.no_grad()
def logp_entropy(model, batch, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp, entropy), each (n, T) float: same inputs and temperature as the training loss."""
    ids, am = batch.input_ids[rows], batch.attention_mask[rows]
    t = batch.completion_mask.shape[1]
    out = model(input_ids=ids, attention_mask=am, position_ids=position_ids_from_mask(am), use_cache=False,
                logits_to_keep=t + 1)
    logits = out.logits[:, :-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    logp_all = torch.log_softmax(logits / batch.temperature, dim=-1)  # (n, T, V)
    logp = logp_all.gather(-1, ids[:, batch.prompt_length:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def policy_stats(model, init_model, batch, micro_batch_size: int) -> tuple[float, float]:
    """(k3 KL to the initial policy, mean token entropy) on the batch's completion tokens, in nats.

    Two no-grad forwards per micro-batch (pi_theta and pi_init) under each model's own attention:
    for a batch without an update. A training update gets the same values from its loss forward
    (:func:`gradprobe.grpo.step.grpo_step` with ``init_model``), without the pi_theta forward.
    """
    kl_sum, ent_sum = 0.0, 0.0
    for start in range(0, batch.num_rows, micro_batch_size):
        rows = slice(start, min(batch.num_rows, start + micro_batch_size))
        mask = batch.completion_mask[rows].to(torch.float64)
        logp, ent = logp_entropy(model, batch, rows)
        init_logp, _ = logp_entropy(init_model, batch, rows)
        d = (init_logp - logp).to(torch.float64).clamp(min=-KL_LOG_RATIO_CLAMP, max=KL_LOG_RATIO_CLAMP)  # as verl
        kl_sum += float(((torch.exp(d) - d - 1) * mask).sum())
        ent_sum += float((ent.to(torch.float64) * mask).sum())
    n = max(int(batch.completion_mask.sum()), 1)
    return kl_sum / n, ent_sum / n


def advantage_stats(adv: torch.Tensor, batch, valid: torch.Tensor) -> dict:
    """Mean, population std and mean |A| of the advantages (N, T) over completion tokens of valid rows."""
    mask = batch.completion_mask.cpu() & valid.cpu()[:, None]
    a = adv.cpu()[mask]
    if a.numel() == 0:
        return {"advantage_mean": 0.0, "advantage_std": 0.0, "advantage_abs_mean": 0.0}
    return {"advantage_mean": float(a.mean()), "advantage_std": float(a.std(unbiased=False)),
            "advantage_abs_mean": float(a.abs().mean())}


def zero_variance_groups(scores: torch.Tensor) -> int:
    """Groups (rows of the (B, G) scores) with fewer than two rewards or all rewards equal."""
    n = 0
    for row in scores:
        r = row[torch.isfinite(row)]
        n += int(r.numel() < 2 or bool(r.max() == r.min()))
    return n


def mean_context(batch) -> float:
    """Mean context of a generated token (tokens): prompt length + half the mean completion length."""
    prompt = float(np.mean([len(p) for p in batch.prompt_token_ids]))
    return prompt + float(batch.completion_lengths.double().mean()) / 2


def evaluate(policy, task, problems, prompt_ids, run, ledger, *, sampled: bool = True) -> dict:
    """Held-out accuracy of the current policy, with per-item results.

    Every eval of a run (and the same seed of every arm) samples with a fresh sampler seeded
    from the run's ``eval`` stream (:func:`gradprobe.streams.stream_seed`), so evals differ
    only through the policy. Eval tokens go to ``ledger.generated_tokens["eval"]``, seconds to
    ``device_seconds["eval"]`` and FLOPs to ``flops["eval"]``; none is charged to a budget.

    Parameters
    ----------
    problems : list[Problem], length P
        The held-out set, in its fixed order.
    prompt_ids : list[list[int]], length P
    run : RunConfig
        ``run.eval`` (greedy, sampled, samples) and ``run.sampling``.
    ledger : Ledger
    sampled : bool
        False skips the sampled completions even when ``run.eval.sampled`` (the schedule's
        ``sampled_at = "ends"`` at intermediate evals).

    Returns
    -------
    dict
        ``greedy_accuracy``, ``sampled_accuracy`` (fractions in [0, 1], None when not
        measured), ``eval_tokens``, ``eval_seconds``, ``prompts``, ``response_length``
        (mean greedy completion tokens, EOS included), ``format_rate`` (greedy completions the
        task's format check accepts), ``step_validity_rate`` and ``step_count_deviation`` (greedy
        traces, :func:`gradprobe.rewards.process.trace_fidelity`; None without a step verifier),
        and ``items``: ``{"greedy": "0110...", "sampled": ["0110...", ...]}``, one character per
        held-out item in order ('1' = correct; a verifier crash counts as wrong), one string per sample.
    """
    tok = policy.tokenizer
    result = {"greedy_accuracy": None, "sampled_accuracy": None, "response_length": None, "format_rate": None,
              "step_validity_rate": None, "step_count_deviation": None}
    items: dict = {"greedy": None, "sampled": []}
    tokens = 0
    start = time.perf_counter()
    modes = [("greedy", True, 1)] if run.eval.greedy else []
    modes += [("sampled", False, run.eval.samples)] if run.eval.sampled and sampled else []
    for mode, greedy, k in modes:
        sampler = HFSampler(policy, seed=stream_seed(run.seed, "eval"), progress=False)
        samples = sampler.sample(prompt_ids, num_samples=k, sampling=run.sampling, greedy=greedy, desc=f"eval {mode}")
        texts = tok.batch_decode([s.token_ids for s in samples], skip_special_tokens=True)
        scores, _ = score_completions(task, texts, [p for p in problems for _ in range(k)])
        correct = np.asarray([s == 1.0 for s in scores], dtype=bool).reshape(len(problems), k)
        result[f"{mode}_accuracy"] = float(correct.mean())
        strings = ["".join("1" if c else "0" for c in correct[:, j]) for j in range(k)]
        if greedy:
            items["greedy"] = strings[0]
            result["response_length"] = float(np.mean([len(s.token_ids) for s in samples]))
            result["format_rate"] = float(np.mean([bool(task.format_rate(t)) for t in texts]))
            result.update(trace_fidelity(task, texts, problems))  # greedy traces' step checks
        else:
            items["sampled"] = strings
        n = sum(len(s.token_ids) for s in samples)
        tokens += n
        ctx = float(np.mean([len(p) for p in prompt_ids])) + n / max(len(samples), 1) / 2
        ledger.add_flops("eval", n * forward_flops_per_token(policy.model, ctx))
    seconds = time.perf_counter() - start
    ledger.add_generated("eval", tokens)
    ledger.add_seconds("eval", seconds)
    return {**result, "eval_tokens": tokens, "eval_seconds": seconds, "prompts": len(problems), "items": items}


def batch_stats(batch, task, advantages: torch.Tensor, valid: torch.Tensor) -> dict:
    """Rollout statistics of one update's batch.

    Parameters
    ----------
    batch : RolloutBatch
        N = B * G scored rollouts.
    task : Task
        ``format_rate(completion) -> bool``.
    advantages : Tensor, shape (N, T)
    valid : BoolTensor, shape (N,)
        Rows with a reward: the trained reward's :attr:`~gradprobe.rewards.RewardOutput.valid`.

    Returns
    -------
    dict
        ``reward_mean`` (the task's outcome scores, missing ignored; None when all are missing),
        ``score_missing`` (completions without an outcome score), ``reward_missing`` (completions
        without a reward of the trained reward: ``valid`` false), ``reward_valid`` (completions with one),
        ``advantage_mean/std/abs_mean``, ``response_length_mean`` (tokens, EOS included),
        ``truncation_rate``, ``format_rate``, ``zero_variance_groups``.
    """
    scores = batch.scores
    finite = scores[torch.isfinite(scores)]
    return {"reward_mean": float(finite.mean()) if finite.numel() else None,
            "score_missing": int((~torch.isfinite(scores)).sum()),
            "reward_missing": int((~valid.bool().cpu()).sum()),
            "reward_valid": int(valid.bool().cpu().sum()),
            **advantage_stats(advantages, batch, valid),
            "response_length_mean": float(batch.completion_lengths.double().mean()),
            "truncation_rate": float(batch.truncated.double().mean()),
            "format_rate": float(np.mean([bool(task.format_rate(c)) for c in batch.completions])),
            "zero_variance_groups": zero_variance_groups(batch.scores_grouped())}


class MetricsFile:
    """``metrics.jsonl``, appended line by line; truncated to a checkpoint's length on resume.

    ``tracker`` (:class:`gradprobe.tracking.Tracker`, optional) receives every line written
    (``--report-to``) and is closed with the file."""

    def __init__(self, path: Path, length: int, tracker=None):
        self.path, self.tracker = path, tracker
        try:
            with open(path, "a+b") as f:
                size = f.seek(0, 2)
                if size < length:
                    raise RuntimeError(f"{path} has {size} bytes but its checkpoint expects {length}; delete "
                                       f"{path.parent} to start over")
                f.truncate(length)
            self.f = open(path, "a")
        except OSError as e:
            raise output_error("opening", path, e) from e

    def write(self, line: dict) -> None:
        try:
            self.f.write(json.dumps(json_safe(line)) + "\n")
            self.f.flush()
        except OSError as e:
            raise output_error("appending to", self.path, e) from e
        if self.tracker is not None:
            self.tracker.log_line(json_safe(line))

    def sync(self) -> int:
        """fsync and return the byte length."""
        self.f.flush()
        os.fsync(self.f.fileno())
        return self.f.tell()

    def close(self) -> None:
        self.f.close()
        if self.tracker is not None:
            self.tracker.close()
