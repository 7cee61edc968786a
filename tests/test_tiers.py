"""The tiny tier's warm start: targets, determinism, cache reuse, atomic writes, reloading.

Builds use a toy :class:`TinyTierConfig` (a 1-layer model, 3 SFT steps); the real build
(``gradprobe warmstart --tier tiny``, minutes) is not run here.
"""

from __future__ import annotations

import argparse
import json
import re

import pytest
import torch

from gradprobe import tiers, warmstart
from gradprobe.cli import warmstart as warmstart_cli
from gradprobe.tasks import Problem, load_task
from gradprobe.tiers import TINY_FRONTIER_TASK, TINY_TASK, TierNotBuiltError, TinyTierConfig, chain_sum_target, tier_path
from gradprobe.warmstart import build_tier

SMALL = TinyTierConfig(hidden_size=16, layers=1, heads=2, kv_heads=1, intermediate_size=32, steps=3, batch_size=4,
                       micro_batch_size=2, warmup_steps=1, eval_prompts=3, eval_samples=2, eval_max_new_tokens=8)
STEP = re.compile(r"^-?\d+ [+-] \d+ = -?\d+$")


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch, tmp_path):
    torch.set_num_threads(1)
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


# ----------------------------------------------------------------------------- targets

def test_target_example():
    p = Problem(id="x", question="State the final answer to the following arithmetic problem: 12 + 7 - 3 =", answer="16")
    assert chain_sum_target(p) == "12 + 7 = 19\n19 - 3 = 16\n#### 16"
    neg = Problem(id="y", question="Compute: -5 + 3 - 10 =", answer="-12")
    assert chain_sum_target(neg) == "-5 + 3 = -2\n-2 - 10 = -12\n#### -12"
    with pytest.raises(ValueError, match="chain sum"):
        chain_sum_target(Problem(id="z", question="What is 3 * 4?", answer="12"))


@pytest.mark.parametrize("config", [{}, TINY_TASK], ids=["default", "tiny"])
def test_targets_verify_and_have_one_step_per_line(config):
    task = load_task("chain_sum", **config)
    for p in task.problems("train", 50, seed=3):
        target = chain_sum_target(p)
        assert task.score(target, p) == 1.0, (p.question, target)
        *steps, last = target.split("\n")
        assert last == f"#### {int(p.answer)}"
        assert len(steps) == p.metadata["num_terms"] - 1
        assert all(STEP.match(s) for s in steps), target
        assert chain_sum_target(Problem(id=p.id, question=p.question, answer=p.answer)) == target  # no metadata


def test_examples_mask_the_prompt():
    from gradprobe.char_tokenizer import char_tokenizer

    tok = char_tokenizer()
    probs = load_task("chain_sum", **TINY_TASK).problems("train", 3)
    ex = warmstart._examples(tok, probs)
    ids, labels, keep = warmstart._micro_batch(ex, tok.pad_token_id)
    for r, (x, p) in enumerate(ex):
        assert (labels[r, :p] == -100).all() and (labels[r, len(x):] == -100).all()
        assert tok.decode(labels[r, p: len(x)].tolist()) == chain_sum_target(probs[r]) + tok.eos_token
    assert keep == ids.shape[1] - min(p for _, p in ex) + 1


# ----------------------------------------------------------------------------- builds

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("tiers")
    return build_tier("tiny", config=SMALL, out=root / "a", progress=False)


def test_build_is_deterministic_for_a_seed(built, tmp_path):
    again = build_tier("tiny", config=SMALL, out=tmp_path / "b", progress=False)
    other = build_tier("tiny", config=SMALL, seed=1, out=tmp_path / "c", progress=False)
    w1, w2, w3 = _weights(built), _weights(again), _weights(other)
    assert w1.keys() == w2.keys()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert not all(torch.equal(w1[k], w3[k]) for k in w1)
    r1, r2 = (json.loads((p / "warmstart.json").read_text()) for p in (built, again))
    assert r1["sft_losses"] == r2["sft_losses"] and r1["eval"]["per_prompt"] == r2["eval"]["per_prompt"]


def test_record(built):
    record = json.loads((built / "warmstart.json").read_text())
    assert record["config"] == SMALL.to_dict() and record["seed"] == 0 and record["tier"] == "tiny"
    assert json.loads((built / "gradprobe_tier.json").read_text())["tier"] == "tiny"
    assert record["config_hash"] == tiers.config_hash(SMALL, 0)
    assert {"torch", "transformers", "gradprobe"} <= set(record["versions"])
    assert len(record["sft_losses"]) == SMALL.steps and record["final_sft_loss"] > 0
    ev = record["eval"]
    assert 0 <= ev["greedy_accuracy"] <= 1 and 0 <= ev["sampled_accuracy"] <= 1
    assert len(ev["per_prompt"]) == SMALL.eval_prompts and ev["samples"] == SMALL.eval_samples
    assert record["seconds"] >= record["train_seconds"] > 0


def test_cache_is_reused_without_retraining(monkeypatch):
    with pytest.raises(TierNotBuiltError, match="gradprobe warmstart --tier tiny"):
        tier_path("tiny", config=SMALL)
    calls = []
    real = warmstart._sft
    monkeypatch.setattr(warmstart, "_sft", lambda *a, **k: calls.append(1) or real(*a, **k))
    path = build_tier("tiny", config=SMALL, progress=False)
    assert path.parent == tiers.cache_root() and path.name == f"tiny-{tiers.config_hash(SMALL, 0)}"
    mtime = (path / "warmstart.json").stat().st_mtime_ns
    assert build_tier("tiny", config=SMALL, progress=False) == path
    assert tier_path("tiny", config=SMALL) == path
    assert calls == [1] and (path / "warmstart.json").stat().st_mtime_ns == mtime
    build_tier("tiny", config=SMALL, force=True, progress=False)
    assert calls == [1, 1]
    assert tiers.config_hash(SMALL, 1) != tiers.config_hash(SMALL, 0)
    assert tiers.config_hash(TinyTierConfig(steps=4), 0) != tiers.config_hash(TinyTierConfig(steps=5), 0)


def _fail(*args, **kwargs):
    raise RuntimeError("injected failure")


def test_failed_build_leaves_no_folder(monkeypatch):
    monkeypatch.setattr(warmstart, "measure_accuracy", _fail)  # fails after the weights were written
    with pytest.raises(RuntimeError, match="injected"):
        build_tier("tiny", config=SMALL, progress=False)
    root = tiers.cache_root()
    assert not root.exists() or list(root.iterdir()) == []


def test_failed_rebuild_keeps_the_old_build(built, monkeypatch):
    before = _weights(built)
    monkeypatch.setattr(warmstart, "_sft", _fail)
    with pytest.raises(RuntimeError, match="injected"):
        build_tier("tiny", config=SMALL, out=built, force=True, progress=False)
    assert sorted(p.name for p in built.parent.iterdir()) == ["a"]
    after = _weights(built)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_saved_tier_loads_and_generates(built):
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.config import SamplingConfig
    from gradprobe.models import load_policy
    from gradprobe.rollout import HFSampler
    from gradprobe.tasks import encode_prompt

    policy = load_policy(str(built))
    assert policy.model.config.model_type == "qwen2"
    assert type(policy.tokenizer).__name__ in ("PreTrainedTokenizerFast", "TokenizersBackend")
    tok = char_tokenizer("compact")
    question = "State the final answer to the following arithmetic problem: 12 + 7 - 3 ="
    prompt = encode_prompt(policy.tokenizer, question)
    assert prompt == encode_prompt(tok, question)  # the saved tokenizer is the compact character tokenizer
    assert policy.tokenizer.decode(prompt) == "<s>12 + 7 - 3 =\n"  # the instruction is not rendered
    assert policy.eos_token_ids == [tok.eos_token_id] and policy.tokenizer.pad_token_id == tok.pad_token_id
    samples = HFSampler(policy, progress=False).sample([prompt], num_samples=2,
                                                       sampling=SamplingConfig(max_new_tokens=6))
    assert len(samples) == 2 and all(1 <= len(s) <= 6 for s in samples)
    n = sum(p.numel() for p in policy.model.parameters())
    assert n == json.loads((built / "warmstart.json").read_text())["parameters"]


def test_cli(monkeypatch, capsys):
    monkeypatch.setitem(tiers.TIERS, "tiny", lambda: SMALL)
    parser = argparse.ArgumentParser()
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["warmstart", "--tier", "tiny", "--no-progress"])
    assert warmstart_cli.warmstart_main(args) == 0
    out = capsys.readouterr().out
    assert "greedy accuracy" in out and str(tier_path("tiny")) in out
    with pytest.raises(ValueError, match="valid tiers: tiny"):
        tier_path("huge")


def test_load_policy_alias_and_error_when_not_built(built, monkeypatch):
    from gradprobe.models import ModelNotFoundError, load_policy
    from gradprobe.training.plan import ModelSpec
    from gradprobe.training.run import load_run_policy

    monkeypatch.setitem(tiers.TIERS, "tiny", lambda: SMALL)
    for load in (lambda: load_policy("tiny"), lambda: load_run_policy(ModelSpec(name="tiny"))):
        with pytest.raises(TierNotBuiltError, match="run `gradprobe warmstart --tier tiny`") as err:
            load()
        assert isinstance(err.value, ModelNotFoundError) and isinstance(err.value, FileNotFoundError)
    path = build_tier("tiny", config=SMALL, progress=False)  # the same weights as `built` (same config, seed)
    for policy in (load_policy("tiny"), load_run_policy(ModelSpec(name="tiny"))):
        weights = _weights(built)
        assert all(torch.equal(p, weights[n]) for n, p in policy.model.named_parameters() if n in weights)
        assert policy.model.config.model_type == "qwen2"
    assert load_policy("tiny").name == "tiny"
    assert path != built and tier_path("tiny") == path


# ----------------------------------------------------------------------------- prompt and plan

def test_compact_prompt():
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.tasks import format_prompt

    compact, full = char_tokenizer("compact"), char_tokenizer()
    task = load_task("chain_sum", **TINY_TASK)
    for p in task.problems("train", 20, seed=1):
        expr = p.metadata["expression"]
        assert format_prompt(compact, p.question) == f"<s>{expr} =\n"
        assert len(encode_prompt_ids(compact, p.question)) == len(expr) + 4  # <s>, " =", newline
        assert len(encode_prompt_ids(full, p.question)) > 200  # what the compact template saves
    with pytest.raises(ValueError, match="valid: chat, compact"):
        char_tokenizer("short")


def test_compact_prompt_keeps_an_off_context_hint():
    # guided rollouts of the tiny tiers: the hint's lines follow the expression, as the tier's own solutions do
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.rollout.guidance import GuidanceConfig, hint_text, hinted_question
    from gradprobe.models import load_tokenizer
    from gradprobe.tasks import format_prompt

    task = load_task("chain_sum", **TINY_TASK)
    shipped = load_tokenizer("tiny")  # the tier's saved tokenizer, as load_policy gives it
    for tok in (char_tokenizer("compact"), shipped):
        for p in task.problems("train", 20, seed=2):
            expr, steps = p.metadata["expression"], chain_sum_target(p).splitlines()[:-1]
            half, whole = (hint_text(p, "chain_sum", GuidanceConfig(prefix=x)) for x in (0.5, 1.0))
            assert whole == "\n".join(steps) and half == "\n".join(steps[: len(steps) // 2])
            assert format_prompt(tok, hinted_question(p.question, whole)) == f"<s>{expr} =\n{whole}\n"
            if half:
                assert format_prompt(tok, hinted_question(p.question, half)) == f"<s>{expr} =\n{half}\n"
            assert format_prompt(tok, hinted_question(p.question, "")) == f"<s>{expr} =\n"


def encode_prompt_ids(tokenizer, question):
    from gradprobe.tasks import encode_prompt

    return encode_prompt(tokenizer, question)


def test_default_plan_matches_the_tier():
    from pathlib import Path

    from gradprobe.training.plan import load_plan

    plan = load_plan(Path(__file__).resolve().parents[1] / "plans" / "tiny.toml")
    assert plan.model.name == "tiny" and plan.task.name == TinyTierConfig().task
    assert TINY_TASK == TinyTierConfig().task_config and plan.task.config == TINY_FRONTIER_TASK
    # the plan's task lies inside the tier's warm-start distribution (no unseen shapes)
    assert TINY_TASK["min_terms"] <= plan.task.config["min_terms"] <= plan.task.config["max_terms"] <= TINY_TASK["max_terms"]
    assert TINY_TASK["min_digits"] <= plan.task.config["min_digits"] <= plan.task.config["max_digits"] <= TINY_TASK["max_digits"]
    assert {"grpo", "mc_value", "mc_advantage", "hybrid_0.5", "grpo_2xlr"} <= set(plan.arms)
    assert len(plan.seeds) == 4 and plan.heldout.prompts >= 1000
    assert plan.arm("grpo_2xlr").train.lr == 2 * plan.arm("grpo").train.lr
    assert plan.probe.prompts >= 1 and plan.probe.group >= 2 and plan.probe.continuations >= 1


def test_probe_section():
    from gradprobe.training.plan import PlanError, ProbeSpec, parse_plan

    base = ('[model]\nname = "tiny"\n[task]\nname = "chain_sum"\n[budget]\nupdates = 2\n'
            '[arms.grpo]\nreward = "outcome"\n')
    assert parse_plan(base).probe == ProbeSpec(prompts=16, group=8, heldout_prompts=16, heldout_group=16,
                                               continuations=4)
    plan = parse_plan(base + "[probe]\nprompts = 32\nheldout_group = 4\n")
    assert (plan.probe.prompts, plan.probe.group, plan.probe.heldout_group) == (32, 8, 4)
    with pytest.raises(PlanError, match="unknown key 'probe.lr'.*heldout_prompts"):
        parse_plan(base + "[probe]\nlr = 1e-4\n")
    with pytest.raises(PlanError, match=r"probe.group must be in \[2, 4096\]"):
        parse_plan(base + "[probe]\ngroup = 1\n")
    with pytest.raises(PlanError, match=r"probe.heldout_group must be in \[2, 4096\] \(group-relative advantages "
                                        r"need two completions; GRPO recipes use 8-64\), got 5000$"):
        parse_plan(base + "[probe]\nheldout_group = 5000\n")
    with pytest.raises(PlanError, match=r"probe.prompts must be at most 1,000,000 \(every one is sampled and held in "
                                        r"memory before any gradient\), got 1000000000$"):
        parse_plan(base + "[probe]\nprompts = 1000000000\n")
    with pytest.raises(PlanError, match="probe.prompts must be > 0"):
        parse_plan(base + "[probe]\nprompts = 0\n")


def test_shipped_tiny_tier_is_found_and_meets_its_targets(monkeypatch, tmp_path):
    """The default tier ships built: found without a cache, loads as ``tiny``, and its recorded
    warm-start accuracy on the training pool lies in the issue's band (0.2-0.6, with spread)."""
    from gradprobe.models import load_policy
    from gradprobe.tasks import encode_prompt

    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "empty-cache"))
    path = tier_path("tiny")
    assert path.parent == tiers.shipped_root() and path.name == f"tiny-{tiers.config_hash(TinyTierConfig(), 0)}"
    record = json.loads((path / "warmstart.json").read_text())
    assert 0.2 <= record["eval"]["greedy_accuracy"] <= 0.6 and 0.2 <= record["eval"]["sampled_accuracy"] <= 0.6
    assert record["eval"]["spread_fraction"] >= 0.2 and record["config"] == TinyTierConfig().to_dict()
    policy = load_policy("tiny")
    assert 500_000 < sum(p.numel() for p in policy.model.parameters()) < 5_000_000
    ids = encode_prompt(policy.tokenizer, "State the final answer to the following arithmetic problem: 12 + 7 - 3 =")
    assert len(ids) < 20  # the compact template: the expression only
    # a cache build of the same config takes precedence over the shipped copy
    cached = tmp_path / "empty-cache" / "tiers" / path.name
    cached.mkdir(parents=True)
    (cached / "warmstart.json").write_text("{}")
    assert tier_path("tiny") == cached


def test_every_shipped_tier_records_its_own_name():
    """warmstart.json and the marker of each shipped tier name the tier they were built as."""
    folders = sorted(p for p in tiers.shipped_root().iterdir() if (p / "warmstart.json").exists())
    assert {p.name.rsplit("-", 1)[0] for p in folders} >= {"tiny", "tiny-llama-sft"}
    for p in folders:
        name = p.name.rsplit("-", 1)[0]
        assert json.loads((p / "warmstart.json").read_text())["tier"] == name
        assert json.loads((p / "gradprobe_tier.json").read_text())["tier"] == name
