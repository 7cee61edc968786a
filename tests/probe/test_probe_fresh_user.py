"""Fresh-user report: an unknown task fails before the model loads; probe.json's ledger has FLOPs."""

from __future__ import annotations

import json

import pytest
import torch

import gradprobe.probe.run
from gradprobe.cli import main
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import (JVP_FORWARDS, TRAIN_FORWARDS, batch_flops_per_token, forward_flops_per_token,
                              non_embedding_parameters)
from gradprobe.models import load_policy
from gradprobe.probe.run import ProbeConfig, run_probe
from gradprobe.rollout import Sample, build_batch
from gradprobe.tasks import encode_prompt, load_task
from gradprobe.tasks.base import TaskNotFoundError

torch.set_num_threads(1)

# tiny-qwen2 (gradprobe.models.tiny_config defaults): d = 64, 2 layers, 4 heads of 16, 2 KV heads,
# MLP 128, vocab 101, tied embeddings. Non-embedding parameters per layer: q 64*64 + 64 (bias),
# k and v 64*32 + 32 each, o 64*64, MLP 3*64*128, two RMSNorms 2*64; plus the final norm 64.
TINY_N = 2 * (64 * 64 + 64 + 2 * (64 * 32 + 32) + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
TINY_D, TINY_V, TINY_LAYERS = 64, 101, 2


def _tiny_fpt(context: float) -> float:
    """Kaplan et al. 2020, Table 1, plus the tied unembedding: 2 N + 2 d V + 2 n_layer n_ctx d."""
    return 2 * TINY_N + 2 * TINY_D * TINY_V + 2 * TINY_LAYERS * context * TINY_D


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded before the task spec was checked")


def test_unknown_task_fails_before_loading_the_model(monkeypatch, tmp_path):
    monkeypatch.setattr(gradprobe.probe.run, "load_policy", _no_model)
    config = ProbeConfig.from_dict(dict(model="tiny-qwen2", task="chain_summ", rewards=("outcome",), progress=False))
    with pytest.raises(TaskNotFoundError, match="chain_summ"):
        run_probe(config, out=tmp_path / "out")


def test_cli_unknown_task_exits_2_without_loading_the_model(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gradprobe.probe.run, "load_policy", _no_model)
    status = main(["probe", "--model", "tiny-qwen2", "--task", "chain_summ", "--out", str(tmp_path / "out"),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert "unknown task 'chain_summ'" in err and "chain_sum" in err  # the valid names are listed


def test_batch_flops_per_token_by_hand():
    policy = load_policy("tiny-qwen2", seed=0)
    assert non_embedding_parameters(policy.model) == TINY_N
    tok = policy.tokenizer
    prompts = [[1, 5, 6, 7], [1, 8]]  # mean prompt 3 tokens
    samples = [Sample([9] * 4, True), Sample([9, 2], False), Sample([9] * 6, True), Sample([2], False)]
    batch = build_batch(tok, [None, None], prompts, samples, group_size=2, temperature=1.0)
    context = 3 + (4 + 2 + 6 + 1) / 4 / 2  # mean prompt + half the mean completion, tokens
    assert batch_flops_per_token(policy.model, batch) == pytest.approx(_tiny_fpt(context), rel=1e-12)
    assert forward_flops_per_token(policy.model, context) == pytest.approx(_tiny_fpt(context), rel=1e-12)


def test_probe_json_ledger_has_flops(tmp_path):
    config = ProbeConfig.from_dict(dict(
        model="tiny-qwen2", task="chain_sum", rewards=("outcome", "mc_value"), prompts=2, group=2,
        heldout_prompts=2, heldout_group=2, sampling=SamplingConfig(max_new_tokens=8),
        mc=MCConfig(continuations=1, max_steps=2), n_bootstrap=20, progress=False, precondition="none", seed=0))
    task = load_task("chain_sum")
    policy = load_policy("tiny-qwen2", seed=0)
    out = tmp_path / "probe"
    run_probe(config, out=out, policy=policy, task=task)
    saved = json.loads((out / "probe.json").read_text())
    ledger = saved["ledger"]
    flops = ledger["flops"]
    assert set(flops) == {"generation", "probe"}
    prompt = [len(encode_prompt(policy.tokenizer, p.question)) for p in task.problems("train", 2, seed=0)]
    context = sum(prompt) / 2 + saved["batch"]["mean_completion_tokens"] / 2
    fpt = _tiny_fpt(context)
    assert ledger["generated_tokens"]["rollout"] == saved["batch"]["generated_tokens"] > 0
    # generation FLOPs cover every charged token: rollouts plus any MC continuations
    assert flops["generation"] == pytest.approx(ledger["charged_generated_tokens"] * fpt, rel=1e-9)
    assert flops["probe"] == pytest.approx(JVP_FORWARDS * saved["batch"]["generated_tokens"] * fpt, rel=1e-9)
    ref = saved["reference"]["ledger"]
    assert ref["generated_tokens"]["eval"] > 0
    assert ref["flops"]["eval"] > ref["generated_tokens"]["eval"] * 2 * TINY_N
    assert ref["flops"]["reference"] == pytest.approx(TRAIN_FORWARDS * ref["flops"]["eval"], rel=1e-12)
