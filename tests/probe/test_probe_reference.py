"""Reference updates (held-out RLOO gradient, saved directions) and the Adam preconditioner."""

from functools import partial

import pytest
import torch

from gradprobe.grpo.losses import token_weights
from gradprobe.logprobs import token_logprobs
from gradprobe.probe import (
    DirectionMismatchError,
    adam_preconditioner,
    apply_preconditioner,
    direction_between,
    estimate_rewards,
    heldout_reference,
    load_direction,
    rloo_coefficients,
    save_direction,
    second_moment_from_minibatches,
    second_moment_from_optimizer,
    token_alignment,
    trainable_parameters,
)
from gradprobe.probe.references import dot, norm, reward_gradient

import probe_helpers as h

single_thread = h.single_thread  # autouse fixture: one intra-op thread for tiny models


def rel_diff(u, v):
    return norm({k: u[k] - v[k] for k in u}) / norm(v)


def sequence_logprob_gradient(model, batch, row):
    """grad_theta sum_t l_t of one completion, evaluated on the row alone with its padding removed."""
    keep = batch.attention_mask[row].bool()
    ids = batch.input_ids[row][keep][None]
    prompt_len = int(batch.attention_mask[row, :batch.prompt_length].sum())
    params = trainable_parameters(model)
    logp = token_logprobs(model, ids, torch.ones_like(ids), prompt_len, temperature=batch.temperature)
    grads = torch.autograd.grad(logp.sum(), list(params.values()))
    return dict(zip(params, grads))


def test_heldout_reference_matches_a_hand_computed_loop():
    model = h.tiny_model("tiny-qwen2")
    scores = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    batch = h.make_batch(num_prompts=2, group_size=3, completion_length=6, temperature=0.8, seed=50, scores=scores)
    v = heldout_reference(model, batch, micro_batch_size=4)

    expected = {k: torch.zeros_like(p) for k, p in trainable_parameters(model).items()}
    b, g = 2, 3
    for i in range(b):
        group = scores[i * g:(i + 1) * g]
        for j in range(g):
            others = [group[k] for k in range(g) if k != j]
            coef = (group[j] - sum(others) / len(others)) / (b * g)
            grad = sequence_logprob_gradient(model, batch, i * g + j)
            for k in expected:
                expected[k] += coef * grad[k]
    assert norm(expected) > 1e-2
    assert rel_diff(v, expected) < 1e-12
    assert torch.allclose(rloo_coefficients(batch.scores, 3),
                          torch.tensor([1.0, -0.5, -0.5, 0.5, 0.5, -1.0], dtype=torch.float64) / 6, rtol=1e-15)


def test_heldout_reference_is_micro_batch_invariant():
    model = h.tiny_model("tiny-llama")
    batch = h.make_batch(num_prompts=2, group_size=3, seed=51, scores=[1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    assert rel_diff(heldout_reference(model, batch, micro_batch_size=1),
                    heldout_reference(model, batch, micro_batch_size=6)) < 1e-12


@pytest.mark.parametrize("flat", [1.0, 0.0])
def test_zero_variance_groups_contribute_nothing(flat):
    model = h.tiny_model("tiny-qwen2")
    scores = [flat, flat, flat, 1.0, 0.0, 0.0]
    batch = h.make_batch(num_prompts=2, group_size=3, seed=52, scores=scores)
    v = heldout_reference(model, batch)
    # other tokens in the flat group: same v, bit for bit
    other = h.make_batch(num_prompts=2, group_size=3, seed=53, scores=scores)
    ids = batch.input_ids.clone()
    ids[:3] = other.input_ids[:3]
    swapped = type(batch)(**{**batch.__dict__, "input_ids": ids, "attention_mask": other.attention_mask.where(
        torch.arange(6)[:, None] < 3, batch.attention_mask), "completion_mask": other.completion_mask.where(
        torch.arange(6)[:, None] < 3, batch.completion_mask)})
    v_swapped = heldout_reference(model, swapped)
    assert all(torch.equal(v[k], v_swapped[k]) for k in v)
    # the flat group still counts as a prompt (B = 2): v is half of the informative group's own estimate
    alone = heldout_reference(model, batch.select_groups([1]))
    assert rel_diff(v, {k: 0.5 * x for k, x in alone.items()}) < 1e-12
    assert norm(v) > 0


def test_missing_scores_are_excluded_from_baselines_and_counts():
    nan = float("nan")
    scores = torch.tensor([1.0, nan, 0.0, nan, nan, 1.0, 0.0, 1.0, 1.0])
    coef = rloo_coefficients(scores, 3)
    # group 0: valid {1, 0}: c = (1 - 0) / (G'=2 * B'=2), (0 - 1) / 4; group 1: one valid score -> unusable;
    # group 2: valid {0, 1, 1}: c_j = (r_j - mean of the other two) / (3 * 2)
    expected = torch.tensor([0.25, 0.0, -0.25, 0.0, 0.0, 0.0, -1.0 / 6, 0.5 / 6, 0.5 / 6], dtype=torch.float64)
    assert torch.allclose(coef, expected, rtol=1e-15, atol=1e-17)
    assert torch.isfinite(coef).all()

    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=3, seed=54, scores=scores)
    v = heldout_reference(model, batch)
    assert all(torch.isfinite(x).all() for x in v.values()) and norm(v) > 0


def test_group_size_below_two_is_refused():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=1, seed=55)
    with pytest.raises(ValueError, match="group_size >= 2"):
        heldout_reference(model, batch)


def test_direction_files_round_trip_and_mismatches(tmp_path):
    model = h.tiny_model("tiny-qwen2")
    v = h.random_direction(model, seed=60)
    path = tmp_path / "v.safetensors"
    save_direction(v, path)
    loaded = load_direction(path, model)
    assert list(loaded) == list(v) and all(torch.equal(loaded[k], v[k]) for k in v)

    key = "model.layers.0.self_attn.q_proj.bias"
    save_direction({k: x for k, x in v.items() if k != key}, tmp_path / "missing.safetensors")
    with pytest.raises(DirectionMismatchError, match=key):
        load_direction(tmp_path / "missing.safetensors", model)
    save_direction(dict(v, **{key: torch.zeros(3, dtype=torch.float64)}), tmp_path / "shape.safetensors")
    with pytest.raises(DirectionMismatchError, match=rf"{key}.*shape \(3,\)"):
        load_direction(tmp_path / "shape.safetensors", model)
    save_direction(dict(v, extra=torch.zeros(1)), tmp_path / "extra.safetensors")
    with pytest.raises(DirectionMismatchError, match="extra"):
        load_direction(tmp_path / "extra.safetensors", model)
    with pytest.raises(FileNotFoundError):
        load_direction(tmp_path / "nope.safetensors", model)
    # a float32 file is cast to the model's float64
    save_direction({k: x.float() for k, x in v.items()}, tmp_path / "f32.safetensors")
    assert all(x.dtype == torch.float64 for x in load_direction(tmp_path / "f32.safetensors", model).values())


def test_direction_between_is_final_minus_initial():
    initial = h.tiny_model("tiny-qwen2")
    final = h.fresh_tiny_model("tiny-qwen2", seed=1)
    d = direction_between(final, initial)
    p0, p1 = trainable_parameters(initial), trainable_parameters(final)
    assert list(d) == list(p1)
    assert all(torch.equal(d[k], p1[k].detach() - p0[k].detach()) for k in d)
    with pytest.raises(DirectionMismatchError, match="q_proj.bias"):
        direction_between(h.tiny_model("tiny-llama"), initial)
    with pytest.raises(DirectionMismatchError, match="q_proj.bias"):
        direction_between(initial, h.tiny_model("tiny-llama"))


def test_second_moment_from_minibatches_matches_hand_computation():
    model = h.tiny_model("tiny-llama")
    batch = h.make_batch(num_prompts=4, group_size=2, seed=61)
    adv = h.random_advantages(batch, seed=62, per_token=False)
    weights_fn = partial(token_weights, loss_type="grpo")
    s = second_moment_from_minibatches(model, batch, adv, weights_fn, num_minibatches=2)
    g0 = reward_gradient(model, batch.select_groups([0, 1]), adv[:4], weights_fn(batch.completion_mask[:4]))
    g1 = reward_gradient(model, batch.select_groups([2, 3]), adv[4:], weights_fn(batch.completion_mask[4:]))
    expected = {k: (g0[k] ** 2 + g1[k] ** 2) / 2 for k in g0}
    assert rel_diff(s, expected) < 1e-12
    with pytest.raises(ValueError, match="num_minibatches"):
        second_moment_from_minibatches(model, batch, adv, weights_fn, num_minibatches=5)


def test_jvp_along_preconditioned_direction_equals_explicit_dot():
    model = h.tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=2, seed=63)
    v = h.random_direction(model, seed=64)
    outcome = h.random_advantages(batch, seed=65, per_token=False)
    dense = h.random_advantages(batch, seed=66)
    weights = token_weights(batch.completion_mask, "grpo")
    s = second_moment_from_minibatches(model, batch, outcome, partial(token_weights, loss_type="grpo"),
                                       num_minibatches=3)
    p = adam_preconditioner(s, eps=1e-8)
    u = apply_preconditioner(v, p)
    assert all(torch.equal(u[k], v[k] * p[k]) for k in v)

    a = token_alignment(model, batch, u)
    estimates = estimate_rewards(a, {"outcome": outcome, "dense": dense}, completion_mask=batch.completion_mask,
                                 group_size=2, lr=1e-6, tokens_per_update={"outcome": 1, "dense": 1},
                                 budget_tokens=1.0, n_bootstrap=0)
    for est, adv in zip(estimates, (outcome, dense)):
        g = reward_gradient(model, batch, adv, weights)
        explicit = dot(g, u)
        assert abs(explicit) > 0
        assert est.inner_product == pytest.approx(explicit, rel=1e-10)
        # <g, P v> = <P g, v>: the prediction of an Adam-preconditioned step along g
        assert dot(apply_preconditioner(g, p), v) == pytest.approx(explicit, rel=1e-12)


def test_adam_preconditioner_values():
    s = {"w": torch.tensor([0.0, 4.0, 1e-6], dtype=torch.float64)}
    p = adam_preconditioner(s, eps=1e-3)
    assert torch.allclose(p["w"], torch.tensor([1e3, 1 / 2.001, 1 / (1e-3 + 1e-3)], dtype=torch.float64), rtol=1e-14)
    with pytest.raises(DirectionMismatchError):
        apply_preconditioner({"w": torch.ones(3)}, {"x": torch.ones(3)})
    with pytest.raises(DirectionMismatchError):
        apply_preconditioner({"w": torch.ones(3)}, {"w": torch.ones(2)})


def test_second_moment_from_optimizer_matches_adamw_state():
    model = h.fresh_tiny_model("tiny-qwen2", seed=3)
    batch = h.make_batch(num_prompts=2, group_size=2, seed=70)
    params = trainable_parameters(model)
    lr, beta2, eps = 1e-3, 0.99, 1e-8
    opt = torch.optim.AdamW(params.values(), lr=lr, betas=(0.9, beta2), eps=eps, weight_decay=0.0)
    with pytest.raises(ValueError, match="no Adam state"):
        second_moment_from_optimizer(opt, model)

    grads = []
    for step, seed in enumerate((71, 72)):
        adv = h.random_advantages(batch, seed=seed)
        g = reward_gradient(model, batch, adv, token_weights(batch.completion_mask, "grpo"))
        grads.append(g)
        before = {k: p.detach().clone() for k, p in params.items()}
        for k, p in params.items():
            p.grad = -g[k].clone()  # the loss gradient is minus the ascent direction
        opt.step()
        s = second_moment_from_optimizer(opt, model)
        if step == 0:
            # one step: v_hat = g**2 and Adam's update is exactly lr * P g with P = 1 / (sqrt(v_hat) + eps)
            assert rel_diff(s, {k: x ** 2 for k, x in g.items()}) < 1e-12
            update = {k: params[k].detach() - before[k] for k in params}
            predicted = {k: lr * x for k, x in apply_preconditioner(g, adam_preconditioner(s, eps=eps)).items()}
            assert rel_diff(update, predicted) < 1e-10
    g1, g2 = grads
    expected = {k: ((1 - beta2) * beta2 * g1[k] ** 2 + (1 - beta2) * g2[k] ** 2) / (1 - beta2 ** 2) for k in g1}
    assert rel_diff(s, expected) < 1e-12
