"""``[model] gradient_checkpointing``: parsed by plans, enabled by training runs, same gradients."""

from __future__ import annotations

import json

import pytest
import torch

from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.run import enable_gradient_checkpointing, run_training

from helpers_rollout import one_thread

PLAN = """
seeds = [0]
[model]
name = "tiny-qwen2"
gradient_checkpointing = {gc}
[task]
name = "chain_sum"
pool = 8
[heldout]
prompts = 2
[sampling]
max_new_tokens = 8
[train]
prompts_per_update = 2
group = 2
lr = 1e-3
micro_batch_size = 2
[budget]
updates = 1
[eval]
sampled = false
[arms.grpo]
reward = "outcome"
"""


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def test_plan_key_parsed_and_checked():
    assert parse_plan(PLAN.format(gc="true")).model.gradient_checkpointing is True
    assert parse_plan(PLAN.format(gc="false")).model.gradient_checkpointing is False
    assert parse_plan(PLAN.replace("gradient_checkpointing = {gc}\n", "")).model.gradient_checkpointing is False
    with pytest.raises(PlanError, match="model.gradient_checkpointing must be true or false"):
        parse_plan(PLAN.format(gc='"yes"'))


def _batch(b=2, g=2, p=4, t=6):
    from gradprobe.tasks.base import Problem
    from gradprobe.types import RolloutBatch

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 90, (b * g, p + t), generator=gen)
    am = torch.ones_like(ids)
    mask = torch.ones(b * g, t, dtype=torch.bool)
    mask[2, 3:] = False
    am[:, p:] = mask.long()
    return RolloutBatch(problems=[Problem(str(i), "q", "1", {}) for i in range(b)], group_size=g, input_ids=ids,
                        attention_mask=am, prompt_length=p, completion_mask=mask, completions=["x"] * (b * g),
                        truncated=torch.zeros(b * g, dtype=torch.bool), scores=torch.zeros(b * g, dtype=torch.float64),
                        temperature=1.0, prompt_token_ids=[[1]] * b)


def test_same_gradient_with_recomputation(tiny_policy):
    model = tiny_policy.model.double().train()
    batch = _batch()
    adv = torch.randn(batch.completion_mask.shape, dtype=torch.float64,
                      generator=torch.Generator().manual_seed(1)) * batch.completion_mask

    def grads():
        model.zero_grad()
        loss = loss_and_backward(model, batch, adv, UpdateConfig(micro_batch_size=2))
        return loss, torch.cat([p.grad.flatten() for p in model.parameters()])

    loss0, g0 = grads()
    enable_gradient_checkpointing(model)
    layer = model.model.layers[0]
    checkpoint, runs = layer._gradient_checkpointing_func, []

    def counted(fn, *args, **kwargs):  # counts executions of the layer's forward, recomputation included
        def run(*a, **k):
            runs.append(1)
            return fn(*a, **k)
        return checkpoint(run, *args, **kwargs)

    layer._gradient_checkpointing_func = counted
    loss1, g1 = grads()
    assert len(runs) == 4  # two micro-batches, each: the forward, then its recomputation in the backward
    assert loss1 == pytest.approx(loss0, abs=1e-14)
    assert torch.allclose(g0, g1, rtol=0, atol=1e-13) and g0.abs().sum() > 0


def test_unsupported_model_is_refused():
    class NoGC(torch.nn.Module):
        supports_gradient_checkpointing = False

    with pytest.raises(PlanError, match="gradient_checkpointing = false"):
        enable_gradient_checkpointing(NoGC())


def test_run_with_checkpointing_matches_run_without(tmp_path):
    out = {}
    for gc in ("false", "true"):
        plan = parse_plan(PLAN.format(gc=gc))
        summary = run_training(plan.arm("grpo"), tmp_path / gc)
        assert summary["completed"] and summary["updates"] == 1
        line = [json.loads(x) for x in (tmp_path / gc / "metrics.jsonl").read_text().splitlines()
                if '"eval": true' not in x][0]
        out[gc] = line
    assert out["true"]["loss"] == pytest.approx(out["false"]["loss"], rel=1e-5, abs=1e-7)
    assert out["true"]["grad_norm"] == pytest.approx(out["false"]["grad_norm"], rel=1e-5)
    assert out["true"]["generated_tokens"] == out["false"]["generated_tokens"]
