"""``[train] save_weights_at``: a run keeps its policy's weights after the listed updates (the reference run
that ``gradprobe probe --checkpoints`` probes along), without changing what it trains."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from gradprobe.models import load_policy
from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.run import run_training

from helpers_tasks import ScoredTask

PLAN = """
seeds = [0]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[heldout]
prompts = 4
[sampling]
max_new_tokens = 16
[train]
prompts_per_update = 2
group = 4
lr = 1e-3
micro_batch_size = 8
checkpoint_every = 1000
{extra}
[budget]
updates = 3
[arms.grpo]
reward = "outcome"
"""


def _run(out, extra=""):
    return run_training(parse_plan(PLAN.format(extra=extra)).arm("grpo"), out, policy=load_policy("tiny-qwen2"),
                        task=ScoredTask("digit3", train_size=16))


def test_kept_weights_are_the_policy_after_those_updates_and_change_nothing(tmp_path):
    _run(tmp_path / "plain")
    _run(tmp_path / "kept", "save_weights_at = [1, 3]")
    kept = sorted(p.name for p in (tmp_path / "kept" / "weights").iterdir())
    assert kept == ["update-000001.safetensors", "update-000003.safetensors"]
    final = {name: json.loads((tmp_path / name / "checkpoint.json").read_text())["checkpoint"] for name in ("plain", "kept")}
    assert final == {"plain": "checkpoint-000003", "kept": "checkpoint-000003"}
    plain = load_file(tmp_path / "plain" / final["plain"] / "model.safetensors")
    last = load_file(tmp_path / "kept" / "weights" / "update-000003.safetensors")
    first = load_file(tmp_path / "kept" / "weights" / "update-000001.safetensors")
    assert plain.keys() == last.keys() and all(torch.equal(plain[k], last[k]) for k in plain)  # same training
    assert any(not torch.equal(first[k], last[k]) for k in first)  # update 1 is another policy
    initial = load_policy("tiny-qwen2").model.state_dict()
    assert any(not torch.equal(first[k], initial[k]) for k in first)


@pytest.mark.parametrize("value", ["[0, 5]", "[-1]"])
def test_updates_below_one_are_refused_naming_the_key(value):
    with pytest.raises(PlanError, match=r"train\.save_weights_at .*>= 1"):
        parse_plan(PLAN.format(extra=f"save_weights_at = {value}"))


def test_an_update_listed_twice_is_refused_naming_it():
    with pytest.raises(PlanError, match=r"train\.save_weights_at must list distinct updates: 2 is listed more than once"):
        parse_plan(PLAN.format(extra="save_weights_at = [2, 5, 2]"))
