"""Our GRPO losses against TRL's own (``trl.GRPOTrainer._compute_loss``, TRL >= 1.0).

A real :class:`trl.GRPOTrainer` is built around the tiny random Qwen2 policy (no download,
no training loop) and its ``_compute_loss`` is called on a fixed batch: left-padded prompts,
right-padded completions of unequal lengths, sequence advantages, off-policy old
log-probabilities (so some ratios are clipped) and reference log-probabilities (KL term).
Our side is :func:`gradprobe.logprobs.token_logprobs` + :func:`gradprobe.grpo.losses.token_weights`
+ :func:`gradprobe.grpo.losses.policy_loss` (and :func:`gradprobe.grpo.step.loss_and_backward`
for micro-batching). Losses AND parameter gradients are compared.

Two layers, because TRL computes log-probabilities with its own fused LM head
(``trl.trainer.utils.add_fused_lm_head``), whose log-sum-exp accumulates in float32 even for a
float64 model:

* the loss (clip, KL, normalisation): TRL's ``_compute_loss`` with its log-probability hook
  replaced by ours, float64 model: agreement to 1e-12 (relative). (Qwen2's RMSNorm computes in
  float32 even in a float64 model; identical computations still agree bit for bit, but a
  gradient rescaled by a non-power-of-2 constant only to ~1e-7, see the dr_grpo relation);
* end to end: TRL's unmodified ``_compute_loss`` (fused head, temperature 0.7, no position ids:
  RoPE is shift-invariant so left padding does not matter) vs ours: agreement to 1e-5, the
  float32 precision of TRL's kernel.

Definitional relations (asserted below):

``grpo``     identical (per-sequence mean, then mean over sequences; with gradient
             accumulation TRL divides each micro-batch's mean by the number of accumulation
             steps, which equals our batch-global weights when micro-batches have equal rows);
``dapo``     identical (tokens of the whole generation batch, ``num_items_in_batch``);
``dr_grpo``  TRL divides by rows x ``max_completion_length`` (the config value); so do we:
             :class:`~gradprobe.grpo.step.UpdateConfig` ``max_completion_length`` (set by
             ``run_training`` to the sampler's ``max_new_tokens``) is the constant L_max of
             Dr. GRPO (Liu et al. 2025, sec. 3.1), identical to TRL for every batch. Only without
             it (``None``) do :func:`token_weights` and the update fall back to T, the batch's
             padded completion width: ``loss_TRL(L_max) = loss_ours(T) * T / L_max``;
KL (beta)    TRL's default ``use_bias_correction_kl=True`` multiplies the k3 KL of every token
             by the ratio rho = pi_theta / pi_old; ours does not, so
             ``loss_TRL = loss_ours + beta * sum_t w_t * k3_t * (rho_t - 1)``; with
             ``use_bias_correction_kl=False`` they are identical. (TRL only builds a reference
             model when beta != 0 at construction, which would download one; the trainer is
             built with beta = 0 and ``trainer.beta`` set afterwards; ``_compute_loss`` reads
             only ``self.beta`` and ``inputs["ref_per_token_logps"]``.)
"""

from __future__ import annotations

import os
import tempfile
import warnings

import pytest
import torch

from gradprobe.grpo.losses import policy_loss, token_weights
from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.logprobs import token_logprobs
from gradprobe.models import load_policy
from gradprobe.types import RolloutBatch

torch.set_num_threads(1)

LOSS_TYPES = ("grpo", "dapo", "dr_grpo")
TEMPERATURE = 0.7
PROMPT_LENS = (5, 3, 7, 4)  # B = 4 prompts, left-padded to P = 7
G = 3  # completions per prompt -> N = 12 rows
COMPLETION_LENS = (6, 2, 9, 1, 4, 9, 3, 7, 5, 8, 2, 6)  # T = 9 (rows 2 and 5 reach it)
L_MAX = 9
OUTPUT_DIR = os.path.join(tempfile.gettempdir(), "gradprobe-trl-equivalence")  # GRPOConfig needs one; nothing is saved


def _tight(a: torch.Tensor, b: torch.Tensor, rtol: float):
    """max |a - b| <= rtol * max |b| (relative to the scale of the reference)."""
    scale = b.abs().max().clamp(min=1e-30)
    err = (a - b).abs().max()
    assert err <= rtol * scale, f"max abs diff {err:.3e} > {rtol:g} x scale {scale:.3e}"


@pytest.fixture()
def policy():
    """A fresh model per test: GRPOTrainer patches the forward of the model it is given."""
    return load_policy("tiny-qwen2", dtype="float64", seed=3)


@pytest.fixture()
def data(policy):
    """A fixed batch in both layouts: TRL's input dict and our (input_ids, attention_mask, P)."""
    gen = torch.Generator().manual_seed(7)
    vocab = policy.model.config.vocab_size
    pad = policy.tokenizer.pad_token_id
    p, t, n = max(PROMPT_LENS), max(COMPLETION_LENS), len(COMPLETION_LENS)
    prompt_ids = torch.full((n, p), pad, dtype=torch.long)
    prompt_mask = torch.zeros((n, p), dtype=torch.long)
    completion_ids = torch.full((n, t), pad, dtype=torch.long)
    completion_mask = torch.zeros((n, t), dtype=torch.long)
    for i, lp in enumerate(PROMPT_LENS):
        ids = torch.randint(4, vocab, (lp,), generator=gen)
        for j in range(G):
            prompt_ids[i * G + j, p - lp:] = ids
            prompt_mask[i * G + j, p - lp:] = 1
    for row, lc in enumerate(COMPLETION_LENS):
        completion_ids[row, :lc] = torch.randint(4, vocab, (lc,), generator=gen)
        completion_mask[row, :lc] = 1
    rewards = torch.tensor([1., 0., 1., 0., 0., 1., 1., 1., 0., 0., 1., 0.], dtype=torch.float64).view(-1, G)
    adv = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-4)
    adv = adv.reshape(-1)  # (N,), TRL's layout: one advantage per completion
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    with torch.no_grad():
        logp = token_logprobs(policy.model, input_ids, attention_mask, p, temperature=TEMPERATURE)
    # Off-policy: old log-probs 0.3 nats away per token, so many ratios leave [0.8, 1.2]; the
    # reference policy elsewhere again (KL term non-zero).
    old = (logp + 0.3 * torch.randn(logp.shape, generator=gen, dtype=torch.float64)) * completion_mask
    ref = (logp + 0.2 * torch.randn(logp.shape, generator=gen, dtype=torch.float64)) * completion_mask
    mask = completion_mask.bool()
    ratio = torch.exp(logp - old)[mask]
    assert ((ratio < 0.8) | (ratio > 1.2)).float().mean() > 0.2  # the clip is exercised
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids,
                completion_mask=completion_mask, advantages=adv, old=old, ref=ref, input_ids=input_ids,
                attention_mask=attention_mask, p=p)


def _trainer(policy, loss_type: str, *, beta: float = 0.0, bias_correction_kl: bool = False,
             max_completion_length: int = L_MAX, accumulation: int = 1):
    """A real GRPOTrainer around ``policy.model`` (float64, CPU), used only for ``_compute_loss``."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_dict({"prompt": ["1 + 2"] * 4})
    with warnings.catch_warnings():  # GRPOConfig: "gradient_checkpointing is deprecated" (transformers 5)
        warnings.simplefilter("ignore")
        args = GRPOConfig(output_dir=OUTPUT_DIR, report_to="none", use_cpu=True, bf16=False,
                          gradient_checkpointing=False,
                          per_device_train_batch_size=len(COMPLETION_LENS) // accumulation,
                          gradient_accumulation_steps=accumulation, steps_per_generation=accumulation,
                          num_generations=G, max_completion_length=max_completion_length, loss_type=loss_type,
                          beta=0.0, epsilon=0.2, temperature=TEMPERATURE, use_bias_correction_kl=bias_correction_kl,
                          logging_strategy="no", save_strategy="no")
        trainer = GRPOTrainer(model=policy.model, reward_funcs=lambda prompts, completions, **kw: [0.0] * len(prompts),
                              args=args, train_dataset=dataset, processing_class=policy.tokenizer)
    trainer.beta = beta  # see the module docstring: avoids building (downloading) a reference model
    trainer.current_gradient_accumulation_steps = accumulation  # set by Trainer's loop, which we do not run
    trainer.model.train()
    return trainer


def _use_our_logprobs(trainer):
    """Replace TRL's fused-head log-probs by ours (float64), keeping the rest of _compute_loss TRL's."""

    def logps(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        lp = token_logprobs(model, input_ids, attention_mask, input_ids.shape[1] - logits_to_keep,
                            temperature=TEMPERATURE)
        return lp, torch.zeros_like(lp.detach()), None

    trainer._get_per_token_logps_and_entropies = logps
    return trainer


def _trl_inputs(data, rows=slice(None), *, beta: float):
    out = {k: data[k][rows] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")}
    out["advantages"] = data["advantages"][rows]
    out["old_per_token_logps"] = data["old"][rows]
    out["num_items_in_batch"] = data["completion_mask"].sum().to(torch.float64)  # whole generation batch
    if beta:
        out["ref_per_token_logps"] = data["ref"][rows]
    return out


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def _trl_loss_and_grad(trainer, data, *, beta: float, chunks: int = 1):
    model = trainer.model
    model.zero_grad(set_to_none=True)
    n, total = data["input_ids"].shape[0], 0.0
    for c in range(chunks):
        rows = slice(c * n // chunks, (c + 1) * n // chunks)
        loss = trainer._compute_loss(model, _trl_inputs(data, rows, beta=beta))
        loss.backward()
        total += float(loss.detach())
    return total, _grads(model)


def _our_loss_and_grad(policy, data, loss_type: str, *, beta: float = 0.0, max_completion_length=L_MAX,
                       correction: bool = False):
    """Ours; ``correction`` adds beta * w * k3 * (rho - 1), TRL's use_bias_correction_kl term."""
    model = policy.model
    model.zero_grad(set_to_none=True)
    mask = data["completion_mask"].bool()
    w = token_weights(mask, loss_type, max_completion_length=max_completion_length)
    logp = token_logprobs(model, data["input_ids"], data["attention_mask"], data["p"], temperature=TEMPERATURE)
    adv = data["advantages"][:, None].expand_as(logp) * mask
    loss = policy_loss(logp, adv, w, old_logp=data["old"], ref_logp=data["ref"] if beta else None, kl_coef=beta)
    if correction:
        delta = data["ref"] - logp
        k3 = torch.exp(delta) - delta - 1
        loss = loss + beta * (w * k3 * (torch.exp(logp - data["old"]) - 1)).sum()
    loss.backward()
    return float(loss.detach()), _grads(model)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_loss_and_gradient_equal_trl_float64(policy, data, loss_type, beta):
    """TRL's clip/KL/normalisation with our log-probs: identical loss and gradient in float64."""
    trainer = _use_our_logprobs(_trainer(policy, loss_type, beta=beta))
    trl_loss, trl_grad = _trl_loss_and_grad(trainer, data, beta=beta)
    our_loss, our_grad = _our_loss_and_grad(policy, data, loss_type, beta=beta)
    assert abs(trl_loss) > 1e-3 and trl_grad.norm() > 1e-3  # a real signal, not 0 == 0
    assert our_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(our_grad, trl_grad, 1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_kl_bias_correction_relation(policy, data, loss_type):
    """TRL's default use_bias_correction_kl=True is our loss plus beta * sum w k3 (rho - 1)."""
    beta = 0.05
    trainer = _use_our_logprobs(_trainer(policy, loss_type, beta=beta, bias_correction_kl=True))
    trl_loss, trl_grad = _trl_loss_and_grad(trainer, data, beta=beta)
    plain_loss, plain_grad = _our_loss_and_grad(policy, data, loss_type, beta=beta)
    our_loss, our_grad = _our_loss_and_grad(policy, data, loss_type, beta=beta, correction=True)
    assert our_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(our_grad, trl_grad, 1e-12)
    assert (plain_grad - trl_grad).norm() > 1e-6 * trl_grad.norm()  # the correction is not a no-op here


def _rollout_batch(data) -> RolloutBatch:
    n = data["input_ids"].shape[0]
    return RolloutBatch(problems=[None] * (n // G), group_size=G, input_ids=data["input_ids"],
                        attention_mask=data["attention_mask"], prompt_length=data["p"],
                        completion_mask=data["completion_mask"].bool(), completions=[""] * n,
                        truncated=torch.zeros(n, dtype=torch.bool), scores=torch.zeros(n, dtype=torch.float64),
                        temperature=TEMPERATURE, prompt_token_ids=[[]] * (n // G))


def test_dr_grpo_constant_equals_trl(policy, data):
    """TRL's dr_grpo divides by rows x max_completion_length; so does our update given
    UpdateConfig.max_completion_length (what run_training passes), even when every completion
    is shorter than the limit (T = 9 < L_max = 32). The fallback without it is rows x T."""
    l_max = 32  # the config's limit, longer than every completion in this batch (T = 9)
    trainer = _use_our_logprobs(_trainer(policy, "dr_grpo", max_completion_length=l_max))
    trl_loss, trl_grad = _trl_loss_and_grad(trainer, data, beta=0.0)
    model = policy.model
    model.zero_grad(set_to_none=True)
    adv = data["advantages"][:, None] * data["completion_mask"]
    config = UpdateConfig(loss_type="dr_grpo", micro_batch_size=5, max_completion_length=l_max)
    update_loss = loss_and_backward(model, _rollout_batch(data), adv, config, old_logp=data["old"])
    update_grad = _grads(model)
    assert update_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(update_grad, trl_grad, 1e-12)
    same_loss, same_grad = _our_loss_and_grad(policy, data, "dr_grpo", max_completion_length=l_max)
    assert same_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(same_grad, trl_grad, 1e-12)
    fallback_loss, fallback_grad = _our_loss_and_grad(policy, data, "dr_grpo", max_completion_length=None)
    t = data["completion_ids"].shape[1]
    assert fallback_loss * t / l_max == pytest.approx(trl_loss, rel=1e-12, abs=0)
    # Gradients: 1e-6, not 1e-12. Qwen2's RMSNorm computes in float32 even in a float64 model,
    # so a backward seeded with a different constant (9/32 is not a power of 2) rounds differently.
    _tight(fallback_grad * t / l_max, trl_grad, 1e-6)
    assert (fallback_grad - trl_grad).norm() > 0.5 * trl_grad.norm()  # the constants really differ


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_gradient_accumulation_equals_trl(policy, data, loss_type):
    """TRL with 2 accumulation steps (steps_per_generation = 2) vs our micro-batched
    :func:`loss_and_backward` (micro_batch_size = N / 2, sdpa attention, L_max for dr_grpo):
    same gradient as the full batch."""
    n = data["input_ids"].shape[0]
    trainer = _use_our_logprobs(_trainer(policy, loss_type, accumulation=2))
    trl_loss, trl_grad = _trl_loss_and_grad(trainer, data, beta=0.0, chunks=2)
    model = policy.model
    model.zero_grad(set_to_none=True)
    adv = data["advantages"][:, None] * data["completion_mask"]
    config = UpdateConfig(loss_type=loss_type, micro_batch_size=n // 2, max_completion_length=L_MAX)
    our_loss = loss_and_backward(model, _rollout_batch(data), adv, config, old_logp=data["old"])
    our_grad = _grads(model)
    assert our_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(our_grad, trl_grad, 1e-12)
    full_loss, full_grad = _our_loss_and_grad(policy, data, loss_type)
    assert full_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    _tight(full_grad, trl_grad, 1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_end_to_end_with_trl_fused_logprobs(policy, data, loss_type):
    """TRL's unmodified _compute_loss (its fused LM head computes the log-probs at temperature
    0.7 with float32 accumulators) vs ours: equal to float32 precision, with the KL term."""
    beta = 0.05
    trainer = _trainer(policy, loss_type, beta=beta)
    mask = data["completion_mask"].bool()
    with torch.no_grad():
        trl_logp, _, _ = trainer._get_per_token_logps_and_entropies(
            policy.model, data["input_ids"], data["attention_mask"], data["completion_ids"].shape[1])
        our_logp = token_logprobs(policy.model, data["input_ids"], data["attention_mask"], data["p"],
                                  temperature=TEMPERATURE)
    _tight(trl_logp[mask], our_logp[mask], 1e-6)
    trl_loss, trl_grad = _trl_loss_and_grad(trainer, data, beta=beta)
    our_loss, our_grad = _our_loss_and_grad(policy, data, loss_type, beta=beta)
    assert our_loss == pytest.approx(trl_loss, rel=1e-5)
    _tight(our_grad, trl_grad, 1e-5)
