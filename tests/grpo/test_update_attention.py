"""The update's attention switch, its one-pass policy statistics and the dr_grpo constant.

* ``UpdateConfig.attention`` (default ``sdpa``): the update's forward + backward run under it,
  the model's own ``gradprobe_eager`` is restored afterwards (also after an error); in float64
  the per-token log-probabilities of a LEFT-PADDED batch under ``sdpa`` equal each row alone and
  the exact eager kernel's, with no NaN from the fully masked padding rows (the failure of
  transformers' own ``eager`` in float64, :mod:`gradprobe.attention`), and so do the gradients.
* ``loss_and_backward(..., init_model=..., stats=...)``: entropy and k3 KL to the initial policy
  from the loss's own forward equal the two-pass :func:`gradprobe.training.metrics.policy_stats`
  (float64), with one forward of the policy and one of the initial model per micro-batch.
* ``UpdateConfig.max_completion_length``: dr_grpo divides by N x L_max, not by the batch's T.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from gradprobe.grpo.losses import token_weights
from gradprobe.grpo.step import UpdateConfig, grpo_step, loss_and_backward, policy_stat_sums
from gradprobe.logprobs import token_logprobs
from gradprobe.models import load_policy, use_attention
from gradprobe.training.metrics import logp_entropy, policy_stats
from gradprobe.types import RolloutBatch

torch.set_num_threads(1)

PROMPT_LENS = (7, 3, 1, 5)  # left-padded to P = 7: rows with 4 and 6 fully masked padding positions
COMPLETION_LENS = (5, 2, 6, 1)  # T = 6
TEMPERATURE = 0.7


def _batch(vocab: int, pad: int, seed: int = 0) -> RolloutBatch:
    from gradprobe.tasks.base import Problem

    gen = torch.Generator().manual_seed(seed)
    p, t, n = max(PROMPT_LENS), max(COMPLETION_LENS), len(PROMPT_LENS)
    ids = torch.full((n, p + t), pad, dtype=torch.long)
    am = torch.zeros((n, p + t), dtype=torch.long)
    for i, (lp, lc) in enumerate(zip(PROMPT_LENS, COMPLETION_LENS)):
        ids[i, p - lp:p + lc] = torch.randint(4, vocab, (lp + lc,), generator=gen)
        am[i, p - lp:p + lc] = 1
    mask = am[:, p:].bool()
    return RolloutBatch(problems=[Problem(str(i), "q", "1", {}) for i in range(n // 2)], group_size=2, input_ids=ids,
                        attention_mask=am, prompt_length=p, completion_mask=mask, completions=["x"] * n,
                        truncated=torch.zeros(n, dtype=torch.bool), scores=torch.zeros(n, dtype=torch.float64),
                        temperature=TEMPERATURE, prompt_token_ids=[[1]] * (n // 2))


@pytest.fixture()
def policy64():
    return load_policy("tiny-qwen2", dtype="float64", seed=3)


@pytest.fixture()
def batch(policy64):
    return _batch(policy64.model.config.vocab_size, policy64.tokenizer.pad_token_id)


def _advantages(batch, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch.completion_mask.shape, dtype=torch.float64, generator=gen) * batch.completion_mask


def _grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def test_left_padded_logprobs_under_sdpa_equal_each_row_alone(policy64, batch):
    model = policy64.model
    assert model.config._attn_implementation == "gradprobe_eager"
    p, mask = batch.prompt_length, batch.completion_mask
    with torch.no_grad():
        exact = token_logprobs(model, batch.input_ids, batch.attention_mask, p, temperature=TEMPERATURE)
        with use_attention(model, "sdpa"):
            assert model.config._attn_implementation == "sdpa"
            fast = token_logprobs(model, batch.input_ids, batch.attention_mask, p, temperature=TEMPERATURE)
            alone = [token_logprobs(model, batch.input_ids[i:i + 1, p - lp:], batch.attention_mask[i:i + 1, p - lp:],
                                    lp, temperature=TEMPERATURE)[0, :lc]
                     for i, (lp, lc) in enumerate(zip(PROMPT_LENS, COMPLETION_LENS))]
    assert model.config._attn_implementation == "gradprobe_eager"
    assert torch.isfinite(fast).all()  # padding positions too: no NaN from fully masked query rows
    for i, lc in enumerate(COMPLETION_LENS):
        torch.testing.assert_close(fast[i, :lc], alone[i], rtol=0, atol=1e-12)
    torch.testing.assert_close(fast[mask], exact[mask], rtol=0, atol=1e-12)
    assert float(exact[mask].abs().min()) > 0.1  # real log-probabilities, not a degenerate 0 == 0


def test_update_runs_under_sdpa_and_restores_the_model_attention(policy64, batch):
    model = policy64.model
    seen = []
    handle = model.register_forward_pre_hook(lambda m, a: seen.append(m.config._attn_implementation))
    try:
        adv = _advantages(batch)
        loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=2))
        assert seen == ["sdpa", "sdpa"] and model.config._attn_implementation == "gradprobe_eager"
        seen.clear()
        loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=4, attention=None))
        assert seen == ["gradprobe_eager"]
        with pytest.raises(ValueError, match=r"advantages has shape \(4, 2\)"):
            loss_and_backward(model, batch, adv[:, :2], UpdateConfig(micro_batch_size=4))
    finally:
        handle.remove()

    def fail_second(m, a):
        seen.append(m.config._attn_implementation)
        if len(seen) == 2:
            raise RuntimeError("out of memory (simulated)")

    seen.clear()
    handle = model.register_forward_pre_hook(fail_second)
    try:
        with pytest.raises(RuntimeError, match="simulated"):  # an error inside the update still restores it
            loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=2))
    finally:
        handle.remove()
    assert seen == ["sdpa", "sdpa"] and model.config._attn_implementation == "gradprobe_eager"


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_sdpa_update_gradient_equals_exact_eager_float64(policy64, batch, loss_type):
    model = policy64.model
    adv = _advantages(batch)
    grads, losses = {}, {}
    for attention in ("sdpa", "gradprobe_eager"):
        model.zero_grad(set_to_none=True)
        cfg = UpdateConfig(loss_type=loss_type, micro_batch_size=3, attention=attention, max_completion_length=16)
        losses[attention] = loss_and_backward(model, batch, adv, cfg)
        grads[attention] = _grads(model)
    assert torch.isfinite(grads["sdpa"]).all() and grads["sdpa"].norm() > 1e-3
    assert losses["sdpa"] == pytest.approx(losses["gradprobe_eager"], rel=1e-12, abs=1e-15)
    torch.testing.assert_close(grads["sdpa"], grads["gradprobe_eager"], rtol=0,
                               atol=1e-12 * float(grads["gradprobe_eager"].abs().max()))


def test_one_pass_stats_equal_the_two_pass_computation(policy64, batch):
    model = policy64.model
    init = load_policy("tiny-qwen2", dtype="float64", seed=4).model.requires_grad_(False)  # pi_init != pi_theta
    kl_ref, ent_ref = policy_stats(model, init, batch, 3)  # the old path: two no-grad forwards, eager attention
    assert kl_ref > 1e-3 and ent_ref > 1.0
    calls = {"model": 0, "init": 0}
    hooks = [model.register_forward_pre_hook(lambda m, a: calls.__setitem__("model", calls["model"] + 1)),
             init.register_forward_pre_hook(lambda m, a: calls.__setitem__("init", calls["init"] + 1))]
    try:
        stats: dict = {}
        loss_and_backward(model, batch, _advantages(batch), UpdateConfig(micro_batch_size=3), stats=stats,
                          init_model=init)
    finally:
        for h in hooks:
            h.remove()
    assert calls == {"model": 2, "init": 2}  # N = 4 rows, micro-batches of 3: one forward each, no second pass
    assert stats["kl_init"] == pytest.approx(kl_ref, rel=1e-12)
    assert stats["entropy"] == pytest.approx(ent_ref, rel=1e-12)
    assert stats["stats_seconds"] > 0
    assert init.config._attn_implementation == "gradprobe_eager"  # restored on the initial model too
    # an independent explicit formula: mean over completion tokens of exp(d) - d - 1 and H
    m = batch.completion_mask
    lp, ent = logp_entropy(model, batch, slice(0, 4))
    ilp, _ = logp_entropy(init, batch, slice(0, 4))
    d = (ilp - lp)[m]
    assert stats["kl_init"] == pytest.approx(float((torch.exp(d) - d - 1).mean()), rel=1e-12)
    assert stats["entropy"] == pytest.approx(float(ent[m].mean()), rel=1e-12)
    assert ent[m].max() <= math.log(model.config.vocab_size) + 1e-12


def test_grpo_step_stats_at_the_initial_policy_and_ledger(policy64, batch):
    from gradprobe.ledger import Ledger

    model = policy64.model
    init = copy.deepcopy(model).requires_grad_(False).eval()
    before = [p.detach().clone() for p in model.parameters()]
    _, ent_ref = policy_stats(model, init, batch, 4)
    ledger = Ledger()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = grpo_step(model, opt, batch, _advantages(batch), UpdateConfig(micro_batch_size=4), ledger=ledger,
                    init_model=init)
    # pi_theta == pi_init before the first update: k3 = 0 in exact arithmetic, but l_theta (the loss's
    # grad-enabled forward) and l_init (a no-grad forward of the copy) are separate float64 computations,
    # equal only to rounding (2.8e-32 was seen on a fresh environment): k3 ~ d^2 / 2 with |d| < 1e-12 nats
    assert 0.0 <= out["kl_init"] <= 1e-24 and out["kl_clamped_tokens"] == 0
    assert out["entropy"] == pytest.approx(ent_ref, rel=1e-12)  # measured BEFORE the optimizer step
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the step did update
    assert ledger.device_seconds["metrics"] == pytest.approx(out["stats_seconds"])
    assert ledger.device_seconds["training"] == pytest.approx(out["seconds"])
    assert not model.training and model.config._attn_implementation == "gradprobe_eager"
    with pytest.raises(ValueError, match="stats"):
        loss_and_backward(model, batch, _advantages(batch), UpdateConfig(), init_model=init)


def test_policy_stat_sums_hand_computed():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, 123.0]], dtype=torch.float64)
    init = torch.tensor([[-1.5, -2.0], [0.0, -7.0]], dtype=torch.float64)
    ent = torch.tensor([[0.5, 1.0], [2.0, float("nan")]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, False]])  # the padding position holds junk and NaN
    kl, h = policy_stat_sums(logp, init, ent, mask)
    assert kl == pytest.approx((math.exp(-0.5) + 0.5 - 1) + 0.0 + (math.exp(0.5) - 0.5 - 1), abs=1e-15)
    assert h == pytest.approx(3.5, abs=1e-15)
    # the same tensor twice: d = 0 bit for bit and expm1(0) - 0 = 0, so here 0 is exact
    assert policy_stat_sums(logp, logp.clone(), ent, mask)[0] == 0.0


def test_kl_init_clamps_extreme_log_ratios_as_verl_and_counts_them(policy64, batch, caplog):
    """|l_init - l_theta| > 20 nats: d is clamped to [-20, 20] (verl's low_var_kl), counted, warned about."""
    from gradprobe.grpo.step import kl_clamped_tokens

    logp = torch.tensor([[-801.0, -1.0, -2.0]], dtype=torch.float64)
    init = torch.tensor([[-1.0, -1.5, 5.0]], dtype=torch.float64)  # d = 800 overflowed exp to inf
    mask = torch.tensor([[True, True, False]])
    kl, _ = policy_stat_sums(logp, init, torch.ones_like(logp), mask)
    assert kl == pytest.approx(math.expm1(20.0) - 20.0 + math.expm1(-0.5) + 0.5, rel=1e-15)
    assert kl_clamped_tokens(logp, init, mask) == 1 and kl_clamped_tokens(logp, init, torch.ones_like(mask)) == 1

    model = policy64.model
    pi_init = copy.deepcopy(model).requires_grad_(False).eval()
    with torch.no_grad():
        pi_init.model.norm.weight.mul_(300.0)  # logits x300: log-probs hundreds of nats apart
    stats: dict = {}
    with caplog.at_level("WARNING", logger="gradprobe.grpo.step"):
        loss_and_backward(model, batch, _advantages(batch), UpdateConfig(micro_batch_size=3), stats=stats,
                          init_model=pi_init)
    m = batch.completion_mask
    lp, _ = logp_entropy(model, batch, slice(0, 4))
    ilp, _ = logp_entropy(pi_init, batch, slice(0, 4))
    d = (ilp - lp)[m]
    hits = int((d.abs() > 20).sum())
    assert hits > 0 and stats["kl_clamped_tokens"] == hits
    dc = d.clamp(-20, 20)
    assert math.isfinite(stats["kl_init"])
    assert stats["kl_init"] == pytest.approx(float((torch.expm1(dc) - dc).mean()), rel=1e-10)
    assert stats["kl_init"] < float((torch.expm1(d) - d).mean())  # a lower bound once clamped
    assert policy_stats(model, pi_init, batch, 3)[0] == pytest.approx(stats["kl_init"], rel=1e-10)
    assert f"{hits} of {int(m.sum())} completion tokens" in caplog.text and "clamped" in caplog.text


def test_dr_grpo_divides_by_the_configured_max_completion_length(policy64, batch):
    model = policy64.model
    adv = _advantages(batch)
    t = batch.completion_mask.shape[1]
    losses = {}
    for l_max in (None, t, 4 * t):
        model.zero_grad(set_to_none=True)
        losses[l_max] = loss_and_backward(model, batch, adv, UpdateConfig(loss_type="dr_grpo", micro_batch_size=4,
                                                                          max_completion_length=l_max))
    assert abs(losses[None]) > 1e-4
    assert losses[t] == losses[None]  # the fallback is T
    assert losses[4 * t] == pytest.approx(losses[None] / 4, rel=1e-12)
    w = token_weights(batch.completion_mask, "dr_grpo", max_completion_length=4 * t)
    assert float(w.max()) == pytest.approx(1 / (batch.num_rows * 4 * t), rel=1e-15)
    with pytest.raises(ValueError, match="exceeds UpdateConfig.max_completion_length"):
        loss_and_backward(model, batch, adv, UpdateConfig(loss_type="dr_grpo", max_completion_length=t - 1))
    # grpo / dapo ignore it (their normalisers do not involve L_max)
    model.zero_grad(set_to_none=True)
    a = loss_and_backward(model, batch, adv, UpdateConfig(loss_type="grpo", max_completion_length=t - 1))
    model.zero_grad(set_to_none=True)
    b = loss_and_backward(model, batch, adv, UpdateConfig(loss_type="grpo"))
    assert a == b


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_update_config_rejects_bad_max_completion_length(bad):
    with pytest.raises(ValueError, match="max_completion_length"):
        UpdateConfig(loss_type="dr_grpo", max_completion_length=bad)


def test_update_config_rejects_bad_attention():
    with pytest.raises(ValueError, match="attention"):
        UpdateConfig(attention="")
    assert UpdateConfig().attention == "sdpa" and UpdateConfig(attention=None).attention is None
