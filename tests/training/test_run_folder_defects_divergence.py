"""A diverging run (learning rate 1e30) stops with one line naming the divergence, the update, the learning rate,
what the run folder keeps and the fix, instead of torch's "probability tensor contains either `inf`, `nan` or
element < 0"; the samplers turn that torch error into :class:`~gradprobe.rollout.base.NonFiniteSamplingError`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.config import SamplingConfig
from gradprobe.rollout import NonFiniteSamplingError, make_sampler
from gradprobe.training.plan import Plan, parse_plan
from gradprobe.training.run import NonFiniteRunError, PolicyDivergedError, run_training

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

#: Three updates of the tiny tier, a checkpoint after each; at lr 1e30 update 2's step (update 1's groups all
#: score alike: no gradient) turns the weights into ones whose logits are not finite, so update 3's rollouts fail.
PLAN = tiny_plan(budget={"updates": 3}, train={"checkpoint_every": 1})


def _diverging(run):
    """``run`` at learning rate 1e30 (above what a plan may say, so built in code as a caller of the library can)."""
    return dataclasses.replace(run, train=dataclasses.replace(run.train, lr=1e30))


def _message(out: Path) -> str:
    return (f"update 3: the policy diverged: sampling its rollouts from the weights of update 2 met non-finite "
            f"logits/probabilities (NaN/inf) at learning rate 1e+30; {out} keeps metrics.jsonl and summary.json "
            f"(stop_reason \"policy_diverged\"); its last checkpoint, checkpoint-000002 (update 2), already holds "
            f"these diverged weights (resuming it diverges again); lower [train] lr (or arms.grpo.lr / lr_scale; RL "
            f"fine-tuning uses about 1e-6 to 1e-4) and rerun with a new --out")


@pytest.mark.parametrize("greedy", [False, True])
@pytest.mark.parametrize("backend", ["hf", "hf_paged"])
def test_sampling_from_non_finite_logits_raises_a_named_error(tiny_policy, backend, greedy):
    """Greedy decoding too: it returned [0, 0, 0, 0] from NaN weights without an error (argmax of a NaN row), so a
    diverged policy's greedy eval read as accuracy 0."""
    with torch.no_grad():
        for p in tiny_policy.model.parameters():
            p.fill_(float("nan"))
    sampler = make_sampler(backend, tiny_policy, seed=0, progress=False)
    with pytest.raises(NonFiniteSamplingError) as e:
        sampler.sample([[1, 5, 6]], num_samples=2, sampling=SamplingConfig(max_new_tokens=4), greedy=greedy)
    assert not tiny_policy.model.get_output_embeddings()._forward_hooks  # the check's hook is removed
    assert str(e.value) == (f"sampling with the {backend} backend failed: the policy's next-token probabilities are "
                            "not finite (NaN/inf logits), so its weights have diverged; lower the learning rate "
                            "that produced them")
    assert isinstance(e.value, RuntimeError)  # callers catching torch's RuntimeError still catch it


def test_a_diverged_run_says_so_with_the_update_and_the_learning_rate_and_keeps_its_data(tmp_path):
    out = tmp_path / "run"
    run = _diverging(parse_plan(PLAN).arm("grpo"))
    with pytest.raises(PolicyDivergedError) as e:
        run_training(run, out)
    assert isinstance(e.value, NonFiniteRunError) and e.value.update == 3
    assert str(e.value) == _message(out)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["stop_reason"], summary["failed_update"], summary["updates"],
            summary["last_checkpoint"], summary["error"]) == (False, "policy_diverged", 3, 2, 2, _message(out))
    assert [x["update"] for x in metric_lines(out) if not x.get("eval")] == [1, 2]
    assert json.loads((out / "checkpoint.json").read_text()) == {"checkpoint": "checkpoint-000002", "update": 2}
    with pytest.raises(PolicyDivergedError) as again:  # what the message says a resume does
        run_training(run, out)
    assert str(again.value) == _message(out)
    assert len(json.loads((out / "summary.json").read_text())["invocations"]) == 2


def test_gradprobe_train_prints_the_divergence_in_one_line_and_exits_2(tmp_path, capsys, monkeypatch):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    arm = Plan.arm
    monkeypatch.setattr(Plan, "arm", lambda self, *a, **kw: _diverging(arm(self, *a, **kw)))
    out = tmp_path / "run"
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"])
    assert train_main(args) == 2
    err = capsys.readouterr().err  # after transformers' "Loading weights" bar
    assert "Traceback" not in err and err.splitlines()[-1] == f"gradprobe train: error: {_message(out)}"


def test_an_initial_policy_with_non_finite_logits_is_named_at_update_0_not_blamed_on_the_learning_rate(
        tmp_path, tiny_policy):
    with torch.no_grad():
        for p in tiny_policy.model.parameters():
            p.fill_(float("nan"))
    run = parse_plan(tiny_plan(model={"name": "tiny-qwen2"})).arm("grpo")
    out = tmp_path / "run"
    with pytest.raises(PolicyDivergedError) as e:
        run_training(run, out, policy=tiny_policy)
    assert e.value.update == 0
    assert str(e.value) == (f"update 0: sampling the held-out eval from the initial policy met non-finite "
                            f"logits/probabilities (NaN/inf) before any update; {out} keeps metrics.jsonl and "
                            f"summary.json (stop_reason \"policy_diverged\"); check [model] name and dtype (float16 "
                            f"can overflow: use bfloat16 or float32) and rerun with a new --out")
    assert json.loads((out / "summary.json").read_text())["failed_update"] == 0


def test_a_diverged_run_without_a_checkpoint_says_there_is_nothing_to_resume(tmp_path):
    out = tmp_path / "run"
    run = _diverging(parse_plan(tiny_plan(budget={"updates": 3}, train={"checkpoint_every": 5})).arm("grpo"))
    with pytest.raises(PolicyDivergedError) as e:
        run_training(run, out)
    assert str(e.value) == (f"update 3: the policy diverged: sampling its rollouts from the weights of update 2 met "
                            f"non-finite logits/probabilities (NaN/inf) at learning rate 1e+30; {out} keeps "
                            f"metrics.jsonl and summary.json (stop_reason \"policy_diverged\"), and no checkpoint was "
                            f"written before it (nothing to resume); lower [train] lr (or arms.grpo.lr / lr_scale; RL "
                            f"fine-tuning uses about 1e-6 to 1e-4) and rerun with a new --out")
    assert not (out / "checkpoint.json").exists()
    assert json.loads((out / "summary.json").read_text())["last_checkpoint"] is None


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("backend", ["hf", "hf_paged"])
def test_one_non_finite_logit_stops_greedy_decoding(tiny_policy, backend, value):
    """One vocabulary entry's logit NaN (+inf) under otherwise finite weights: argmax would pick that token; the
    LM head's check stops the call instead. With the weights restored the same sampler decodes as before."""
    head = tiny_policy.model.get_output_embeddings()
    sampler = make_sampler(backend, tiny_policy, seed=0, progress=False)
    sampling = SamplingConfig(max_new_tokens=4)
    before = [s.token_ids for s in sampler.sample([[1, 5, 6]], num_samples=1, sampling=sampling, greedy=True)]
    saved = head.bias
    head.bias = torch.nn.Parameter(torch.zeros(head.out_features))
    with torch.no_grad():
        head.bias[7] = value
    try:
        with pytest.raises(NonFiniteSamplingError):
            sampler.sample([[1, 5, 6]], num_samples=1, sampling=sampling, greedy=True)
    finally:
        head.bias = saved
    assert not head._forward_hooks
    assert [s.token_ids for s in sampler.sample([[1, 5, 6]], num_samples=1, sampling=sampling, greedy=True)] == before
