"""Off-context guidance (gradprobe.rollout.guided): settings, hints, importance weights, ledger, plans, a run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gradprobe.config import SamplingConfig
from gradprobe.grpo.losses import policy_loss, token_weights, truncated_is_weights
from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.ledger import Ledger, forward_flops_per_token
from gradprobe.logprobs import token_logprobs
from gradprobe.models import load_policy
from gradprobe.rollout import HFSampler
from gradprobe.rollout.guided import (HINT_HEADER, GuidanceConfig, GuidanceError, collect_guided_rollouts,
                                      guidance_stats, guided_logprobs, hint_text, hinted_question, parse_guidance)
from gradprobe.tasks import encode_prompt, load_task
from gradprobe.tasks.base import Problem
from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_tasks import ScoredTask

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

PLAN = """
seeds = [0]
[model]
name = "tiny-qwen2"
[task]
name = "{task}"
pool = 16
[heldout]
prompts = 4
[sampling]
max_new_tokens = 12
[train]
prompts_per_update = 2
group = 4
lr = 1e-3
micro_batch_size = 4
[budget]
updates = 2
[arms.grpo]
reward = "outcome"
[arms.guided]
reward = "outcome"
guidance = {guidance}
"""


def _plan(task="chain_sum", guidance="{fraction = 0.5, prefix = 0.5}", extra=""):
    return parse_plan(PLAN.format(task=task, guidance=guidance) + extra)


# ----------------------------------------------------------------------------- settings and plans

def test_config_counts_rows_and_lines():
    c = GuidanceConfig(fraction=0.25, prefix=0.5)
    assert [c.guided_per_group(g) for g in (2, 4, 8, 16)] == [1, 1, 2, 4]  # floor(0.25 G + 1/2)
    assert [c.prefix_lines(s) for s in (0, 1, 2, 3, 4)] == [0, 0, 1, 1, 2]  # floor(0.5 S)
    assert GuidanceConfig(fraction=1.0).guided_per_group(4) == 4
    assert GuidanceConfig(fraction=0.0).guided_per_group(8) == 0
    assert GuidanceConfig(prefix=1.0).prefix_lines(3) == 3


@pytest.mark.parametrize("key,value", [("fraction", 1.5), ("fraction", -0.1), ("prefix", 2.0), ("prefix", -1.0)])
def test_plan_refuses_a_share_outside_0_1_naming_the_key(key, value):
    other = "prefix" if key == "fraction" else "fraction"
    with pytest.raises(PlanError, match=rf"arms\.guided\.guidance\.{key} must lie in \[0, 1\] \(.*\), got {value}"):
        _plan(guidance=f"{{{key} = {value}, {other} = 0.5}}")


def test_plan_refuses_bad_guidance_tables():
    with pytest.raises(PlanError, match=r"unknown key arms\.guided\.guidance\.'share'; valid keys: fraction, prefix"):
        _plan(guidance="{share = 0.5}")
    with pytest.raises(PlanError, match=r"arms\.guided\.guidance\.fraction must be a finite number"):
        _plan(guidance='{fraction = "half"}')
    with pytest.raises(PlanError, match=r"arms\.guided\.guidance\.cap .* must be > 0"):
        _plan(guidance="{cap = 0.0}")
    with pytest.raises(PlanError, match=r"sets both guidance and selection"):
        _plan(extra='selection = "half"\n')


def test_plan_refuses_a_guided_arm_whose_task_has_no_reference_solution():
    with pytest.raises(PlanError, match=r"arms\.guided\.guidance: task 'basic_arithmetic' has no reference solution"):
        _plan(task="basic_arithmetic")
    # the same plan without the guided arm is fine: only guided arms need reference solutions
    text = PLAN.format(task="basic_arithmetic", guidance="{}").split("[arms.guided]")[0]
    assert parse_plan(text).arm("grpo").guidance is None


def test_plan_resolves_guidance_into_the_run_config():
    plan = _plan(task="gsm8k:tests/data/gsm8k", guidance="{fraction = 0.25, prefix = 0.5}")
    run = plan.arm("guided")
    assert run.guidance == {"fraction": 0.25, "prefix": 0.5, "cap": 2.0}
    assert plan.arm("grpo").guidance is None
    assert run.to_dict()["guidance"] == {"fraction": 0.25, "prefix": 0.5, "cap": 2.0}
    assert parse_guidance({"fraction": 1, "prefix": 0, "cap": 5}) == {"fraction": 1, "prefix": 0, "cap": 5}


# ----------------------------------------------------------------------------- hints

def test_hints_are_prefixes_of_the_reference_solution_without_the_answer_line():
    p = Problem("chain_sum/train/0", "State the final answer: 12 + 7 - 3 =", "16", {"expression": "12 + 7 - 3"})
    assert hint_text(p, "chain_sum", GuidanceConfig(prefix=0.5)) == "12 + 7 = 19"
    assert hint_text(p, "chain_sum", GuidanceConfig(prefix=1.0)) == "12 + 7 = 19\n19 - 3 = 16"
    assert hint_text(p, "chain_sum", GuidanceConfig(prefix=0.0)) == ""
    gsm = load_task("gsm8k:tests/data/gsm8k").problems("train", 1)[0]
    lines = [x for x in gsm.metadata["solution"].splitlines() if not x.startswith("####")]
    hint = hint_text(gsm, "gsm8k", GuidanceConfig(prefix=1.0))
    assert hint.count("\n") == len(lines) - 1 and "<<" not in hint and "####" not in hint
    assert hint.splitlines()[0] == lines[0].split("<<")[0] + lines[0].split(">>")[1]  # calculator notes dropped
    with pytest.raises(GuidanceError, match=r"problem jsonl/0 of task 'jsonl' has no reference solution"):
        hint_text(Problem("jsonl/0", "q", "1", {}), "jsonl", GuidanceConfig())
    assert hinted_question("What is 1 + 2?", "") == "What is 1 + 2?"
    assert hinted_question("What is 1 + 2?", "1 + 2 = 3") == f"What is 1 + 2?\n\n{HINT_HEADER}\n1 + 2 = 3"


# ----------------------------------------------------------------------------- rollouts, weights, ledger

@pytest.fixture(scope="module")
def policy64():
    return load_policy("tiny-qwen2", dtype="float64")


@pytest.fixture(scope="module")
def chain_task():
    return load_task("chain_sum", min_terms=3, max_terms=3, max_digits=2)  # two reasoning lines each


def _collect(policy, task, config, *, b=2, g=4, ledger=None, seed=0):
    problems = task.problems("train", b)
    sampling = SamplingConfig(max_new_tokens=10)
    batch = collect_guided_rollouts(policy, task, problems, group_size=g, sampler=HFSampler(policy, seed=seed),
                                    sampling=sampling, guidance=config, kind="chain_sum", ledger=ledger)
    return problems, batch


def test_weights_are_one_with_an_empty_prefix(policy64, chain_task):
    _, batch = _collect(policy64, chain_task, GuidanceConfig(fraction=0.5, prefix=0.0))
    info = batch.metadata["guidance"]
    assert info["guided_rows"] == [2, 3, 6, 7] and info["hint_tokens"] == [0, 0] and info["charged_hint_tokens"] == 0
    train = token_logprobs(policy64.model, batch.input_ids, batch.attention_mask, batch.prompt_length,
                           temperature=batch.temperature).detach()
    mask = batch.completion_mask
    # as trained: an empty hint leaves the context x itself, no forward, weight exactly 1
    skipped = guided_logprobs(policy64.model, batch, attention=None)
    assert torch.isnan(skipped).all()
    w = truncated_is_weights(train, skipped, mask, cap=2.0)
    assert w.dtype == torch.float64 and torch.equal(w, torch.ones_like(w))
    # scored anyway (hinted context = x): 1 up to float64 rounding of the different padding
    scored = guided_logprobs(policy64.model, batch, attention=None, skip_empty_hints=False)
    rows = info["guided_rows"]
    assert not torch.isnan(scored[rows][mask[rows]]).any()
    w = truncated_is_weights(train, scored, mask, cap=2.0)
    assert torch.allclose(w, torch.ones_like(w), rtol=0, atol=1e-12)


def test_guided_rows_are_trained_under_the_unguided_context(policy64, chain_task):
    model, tok = policy64.model, policy64.tokenizer
    problems, batch = _collect(policy64, chain_task, GuidanceConfig(fraction=0.5, prefix=0.5, cap=50.0))
    info, p, g = batch.metadata["guidance"], batch.prompt_length, batch.group_size
    guided_logp = guided_logprobs(model, batch, attention=None)
    direct_plain, direct_hinted = torch.zeros_like(guided_logp), torch.full_like(guided_logp, math.nan)
    for r in range(batch.num_rows):
        prob = problems[r // g]
        plain = encode_prompt(tok, prob.question)
        k = int(batch.completion_mask[r].sum())
        completion = batch.input_ids[r, p: p + k].tolist()
        assert batch.input_ids[r, p - len(plain): p].tolist() == plain  # every row stored with the plain prompt
        ids = torch.tensor([plain + completion])
        direct_plain[r, :k] = token_logprobs(model, ids, torch.ones_like(ids), len(plain),
                                             temperature=batch.temperature)[0].detach()
        if r in info["guided_rows"]:
            hinted = encode_prompt(tok, hinted_question(prob.question, hint_text(prob, "chain_sum",
                                                                                  GuidanceConfig(prefix=0.5))))
            assert hinted == info["prompt_ids"][r // g] and len(hinted) > len(plain)
            ids = torch.tensor([hinted + completion])
            direct_hinted[r, :k] = token_logprobs(model, ids, torch.ones_like(ids), len(hinted),
                                                  temperature=batch.temperature)[0].detach()
    mask = batch.completion_mask
    assert torch.allclose(guided_logp[mask], direct_hinted[mask], rtol=0, atol=1e-12, equal_nan=True)
    rows = info["guided_rows"]
    ratio = torch.exp(direct_plain - direct_hinted)[rows][mask[rows]]
    assert (ratio - 1).abs().max() > 1e-4  # the hint changes the distribution: the weights are not trivially 1

    # the loss: l(y | x) of the direct calls, times min(pi(y|x) / pi(y|x, hint), C); advantages +-1
    adv = torch.where(torch.arange(batch.num_rows)[:, None] % 2 == 0, 1.0, -1.0).double() * mask
    model.zero_grad(set_to_none=True)
    stats = {}
    loss_and_backward(model, batch, adv, UpdateConfig(importance_sampling="tis", is_cap=50.0, attention=None),
                      sampler_logp=guided_logp, stats=stats)
    got = [q.grad.clone() for q in model.parameters()]
    model.zero_grad(set_to_none=True)
    terms = []
    for r in range(batch.num_rows):
        prob = problems[r // g]
        plain = encode_prompt(tok, prob.question)
        k = int(mask[r].sum())
        ids = torch.tensor([plain + batch.input_ids[r, p: p + k].tolist()])
        l_r = token_logprobs(model, ids, torch.ones_like(ids), len(plain), temperature=batch.temperature)[0]
        w_r = torch.ones(k, dtype=torch.float64)
        if r in rows:
            w_r = torch.exp(l_r.detach() - direct_hinted[r, :k]).clamp(max=50.0)
        weights = token_weights(mask, "grpo")[r, :k]
        terms.append(policy_loss(l_r[None], adv[r, :k][None], weights[None], is_weights=w_r[None]))
    torch.stack(terms).sum().backward()
    want = [q.grad for q in model.parameters()]
    assert all(torch.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(got, want))
    assert stats["sampler_mismatch"]["tokens"] == int(mask[rows].sum())  # only guided tokens are compared
    model.zero_grad(set_to_none=True)


def test_hint_tokens_are_charged(policy64, chain_task):
    model, tok = policy64.model, policy64.tokenizer
    ledger = Ledger()
    problems, batch = _collect(policy64, chain_task, GuidanceConfig(fraction=0.25, prefix=1.0), g=8, ledger=ledger)
    info = batch.metadata["guidance"]
    plain = [encode_prompt(tok, q.question) for q in problems]
    hinted = [encode_prompt(tok, hinted_question(q.question, hint_text(q, "chain_sum", GuidanceConfig(prefix=1.0))))
              for q in problems]
    h = [len(a) - len(b) for a, b in zip(hinted, plain)]
    assert info["hint_tokens"] == h and min(h) > 0
    assert info["guided_rows"] == [6, 7, 14, 15] and info["charged_hint_tokens"] == 2 * sum(h)  # k = 2 per group
    # completions: ordinary rollout tokens; hint tokens: prefill FLOPs of every guided completion
    assert ledger.generated_tokens["rollout"] == batch.generated_tokens and ledger.trained_tokens == 0
    ctx = sum(len(a) + x / 2 for a, x in zip(plain, h)) / len(plain)
    assert ledger.flops["generation"] == pytest.approx(2 * sum(h) * forward_flops_per_token(model, ctx), rel=1e-12)
    assert ledger.device_seconds["generation"] > 0
    # the hinted forward of the weights: (hint + completion tokens) x forward FLOPs, as training work
    guided_logprobs(model, batch, attention=None, ledger=ledger)
    rows = info["guided_rows"]
    completion = int(batch.completion_mask[rows].sum())
    ctx = sum(len(hinted[r // 8]) for r in rows) / 4 + completion / 4 / 2
    assert ledger.flops["training"] == pytest.approx((2 * sum(h) + completion) * forward_flops_per_token(model, ctx),
                                                     rel=1e-12)
    assert ledger.device_seconds["training"] > 0
    stats = guidance_stats(batch)
    assert stats["guided_rows"] == 4 and stats["hint_tokens"] == 2 * sum(h) and stats["empty_hint_rows"] == 0


def test_no_guided_rows_is_plain_collection(policy64, chain_task):
    ledger = Ledger()
    _, batch = _collect(policy64, chain_task, GuidanceConfig(fraction=0.1, prefix=1.0), ledger=ledger)  # k = 0
    assert batch.metadata["guidance"]["guided_rows"] == [] and "generation" not in ledger.flops
    assert torch.isnan(guided_logprobs(policy64.model, batch)).all()


# ----------------------------------------------------------------------------- a short run

def test_a_guided_arm_trains_and_records_guidance(tmp_path):
    run = _plan(guidance="{fraction = 0.5, prefix = 1.0}").arm("guided")
    task = ScoredTask("digit3", train_size=16)
    summary = run_training(run, tmp_path, policy=load_policy("tiny-qwen2"), task=task)
    assert summary["completed"] and summary["stop_reason"] == "budget" and summary["updates"] == 2
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    updates = [x for x in lines if not x.get("eval")]
    assert [x["update"] for x in updates] == [1, 2]
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["run"]["guidance"] == {"fraction": 0.5, "prefix": 1.0, "cap": 2.0}
    for x in updates:
        gd = x["guidance"]
        assert gd["guided_rows"] == 4 and gd["empty_hint_rows"] == 0 and gd["hint_tokens"] > 0
        assert gd["is_weight"]["cap"] == 2.0 and 0 < gd["is_weight"]["min"] <= 1 <= gd["is_weight"]["max"] <= 2.0
        assert gd["logp_shift"]["tokens"] > 0 and gd["logp_shift"]["max_abs_diff"] > 0
        assert 0 <= gd["guided_reward_mean"] <= 1 and 0 <= gd["unguided_reward_mean"] <= 1
        assert math.isfinite(x["loss"]) and x["update_generated_tokens"]["rollout"] > 0
    assert summary["ledger"]["flops"]["training"] > 0 and summary["ledger"]["flops"]["generation"] > 0


def test_a_learning_rate_sweep_never_groups_guided_and_unguided_arms():
    from gradprobe.study.lr_sweep import sweep_groups

    extra = ('[arms.grpo_2xlr]\nreward = "outcome"\nlr_scale = 2.0\n[arms.guided_2xlr]\nreward = "outcome"\n'
             'lr_scale = 2.0\nguidance = {fraction = 0.5, prefix = 0.5}\n')
    groups = sweep_groups(_plan(extra=extra))
    assert [g["arms"] for g in groups] == [["grpo", "grpo_2xlr"], ["guided", "guided_2xlr"]]
    assert "guidance" not in groups[0]["shared"] and groups[1]["shared"]["guidance"]["fraction"] == 0.5


# ----------------------------------------------------------------------------- a prompt format that drops the hint

def test_a_template_that_drops_the_hint_is_refused_at_collection(chain_task):
    # a template that keeps only the first paragraph's expression: a hinted prompt would encode to the
    # plain ids and every guided row be a plain sample with weight 1 (GRPO under another name)
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.rollout.guided import check_hint_reaches_prompt
    from helpers_templates import hint_dropping_tokenizer

    compact, full = hint_dropping_tokenizer(), char_tokenizer("chat")
    p = chain_task.problems("train", 1)[0]
    hint = hint_text(p, "chain_sum", GuidanceConfig(prefix=0.5))
    assert hint and encode_prompt(compact, hinted_question(p.question, hint)) == encode_prompt(compact, p.question)
    with pytest.raises(GuidanceError, match="drops the hint.*remove guidance"):
        check_hint_reaches_prompt(compact, p, hint)
    check_hint_reaches_prompt(full, p, hint)  # the full chat template carries it
    check_hint_reaches_prompt(compact, p, "")  # an empty hint (prefix 0) is not a dropped one
    policy = load_policy("tiny-qwen2")
    policy.tokenizer = compact
    with pytest.raises(GuidanceError, match="drops the hint"):
        _collect(policy, chain_task, GuidanceConfig(fraction=0.5, prefix=0.5))


def test_the_study_preflight_refuses_a_guided_arm_the_model_cannot_read(tmp_path, monkeypatch):
    from gradprobe.study import preflight

    plan = _plan()
    report = preflight.check_plan_inputs(plan)  # tiny-qwen2's chat template renders the whole message
    assert report.prompt_tokens > 0
    from helpers_templates import hint_dropping_tokenizer

    monkeypatch.setattr(preflight, "_resolve_model", lambda spec, offline: ("tiny-qwen2", hint_dropping_tokenizer()))
    with pytest.raises(preflight.PreflightError, match=r"\[arms.guided\] guidance: .*drops the hint"):
        preflight.check_plan_inputs(plan)
