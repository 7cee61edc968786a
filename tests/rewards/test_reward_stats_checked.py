"""A native reward's output is checked where it enters the probe and training (gradprobe.rewards.base.checked_output,
which plug-ins, Python pairs and registered rewards all pass through):

- ``stats`` must hold what gradprobe writes to ``probe.json`` and ``metrics.jsonl`` (numbers, strings, bools, None,
  lists and dicts of them; numpy and torch scalars become Python numbers, as gradprobe.outputs.json_safe writes
  them). A numpy array there passed the checks; ``gradprobe probe`` then ran the whole compute and ended in
  "internal error" (TypeError: Object of type ndarray is not JSON serializable), deleting its output, and
  ``gradprobe train`` raised a raw traceback at the first metrics.jsonl write. It is now refused at the update the
  reward returned it, naming the reward, the key, the type and the fix.
- advantages with ``requires_grad=True`` (a reward computed with a model outside ``torch.no_grad()``) gave "error:
  Can't call numpy() on Tensor that requires grad", naming no reward. They are data, constants of the policy-gradient
  loss, so they are detached: the probe runs.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from gradprobe.cli import main
from gradprobe.rewards.base import RewardFunctionError, checked_output

from helpers_rollout import make_batch, one_thread
from helpers_training import metric_lines, tiny_plan
from plugin_helpers import plugin_module

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

MODULE = '''
import numpy as np
import torch
from gradprobe.rewards import RewardOutput

def _out(batch, stats, weight=None):
    m = batch.completion_mask
    r = m.sum(1).double().view(-1, batch.group_size)
    adv = (r - r.mean(1, keepdim=True)).reshape(-1, 1) * m
    return RewardOutput("x", adv if weight is None else adv * weight, torch.ones(batch.num_rows, dtype=torch.bool),
                        stats=stats)

def array_stats(batch, ctx):
    r = batch.completion_mask.sum(1).double().view(-1, batch.group_size)
    return _out(batch, {"missing": 0, "group_means": r.mean(1).numpy()})

def nested_tensor(batch, ctx):
    return _out(batch, {"per_group": [1.0, torch.tensor([2.0, 3.0])]})

def a_set(batch, ctx):
    return _out(batch, {"labels": {"a"}})

def bytes_in_dict(batch, ctx):
    return _out(batch, {"info": {"raw": b"x"}})

def complex_scalar(batch, ctx):
    return _out(batch, {"z": torch.tensor(1 + 2j)})

def scalars(batch, ctx):
    return _out(batch, {"np": np.float32(0.5), "t": torch.tensor(2.0, requires_grad=True) * 1, "n": np.int64(3),
                        "b": np.bool_(True), "nested": {"x": [np.float64(1.5), (torch.tensor(4),)]},
                        "nan": float("nan"), "s": "ok", "none": None, 7: "int key"})

def graph(batch, ctx):
    return _out(batch, {}, weight=torch.ones((), dtype=torch.float64, requires_grad=True))
'''

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)  # N = 4 completions, B = 2 groups
WRITE = ("which gradprobe cannot write (a reward's stats go to probe.json and metrics.jsonl as JSON: numbers, strings, "
         "bools, None, and lists or dicts of them); ")
ARRAY_FIX = "convert it: x.tolist() (a list of numbers) for an array or tensor, float(x) or x.item() for one value"


def _checked(plugins, name: str):
    """Plug-in ``name``'s output on :data:`BATCH`, as it enters the probe and training."""
    return checked_output(plugins(name)(BATCH, None), f"stats_mod:{name}", BATCH)


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """``stats_mod.py`` in a fresh working directory; the registry and import cache restored after."""
    with plugin_module(tmp_path, monkeypatch, "stats_mod", MODULE) as get:
        yield get


@pytest.mark.parametrize("name, message", [
    ("array_stats", f"stats['group_means'] of type numpy.ndarray (shape (2,)), {WRITE}{ARRAY_FIX}"),
    ("nested_tensor", f"stats['per_group'][1] of type torch.Tensor (shape (2,)), {WRITE}{ARRAY_FIX}"),
    ("a_set", f"stats['labels'] of type set, {WRITE}convert it: sorted(x) or list(x)"),
    ("bytes_in_dict", f"stats['info']['raw'] of type bytes, {WRITE}convert it: x.decode() (text)"),
    ("complex_scalar", f"stats['z'] of type complex, {WRITE}convert it: x.real and x.imag as two numbers, or abs(x)"),
])
def test_a_stat_gradprobe_cannot_write_is_refused_naming_reward_key_type_and_fix(plugins, name, message):
    with pytest.raises(RewardFunctionError) as e:
        _checked(plugins, name)
    assert str(e.value) == f"reward 'stats_mod:{name}' returned {message}"
    from gradprobe.rewards.output import UnwritableStatError  # new with this check

    assert isinstance(e.value.__cause__, UnwritableStatError)


def test_scalars_become_python_values_and_what_json_holds_is_kept(plugins):
    stats = _checked(plugins, "scalars").stats
    assert stats["np"] == 0.5 and type(stats["np"]) is float
    assert stats["t"] == 2.0 and type(stats["t"]) is float  # a 0-d tensor, grad and all: its value
    assert stats["n"] == 3 and type(stats["n"]) is int
    assert stats["b"] is True
    assert stats["nested"] == {"x": [1.5, (4,)]} and type(stats["nested"]["x"][1][0]) is int
    assert math.isnan(stats["nan"]) and stats["s"] == "ok" and stats["none"] is None and stats[7] == "int key"
    json.dumps(stats)  # what the writers then do with it (json_safe encodes the NaN)


def test_a_list_that_holds_itself_is_refused_by_its_place():
    from gradprobe.rewards.output import UnwritableStatError, writable_stats  # new with this check

    loop: list = [1.0]
    loop.append(loop)
    with pytest.raises(UnwritableStatError) as e:
        writable_stats({"loop": loop})
    assert str(e.value) == (f"stats['loop'][1] of type list that holds itself, {WRITE}return a copy that does not "
                            "hold itself")
    assert writable_stats({"same": [loop[0], loop[0]], "twice": [[1], [1]]}) == {"same": [1.0, 1.0],
                                                                                   "twice": [[1], [1]]}


def test_advantages_with_a_graph_are_detached_with_their_values(plugins):
    out = _checked(plugins, "graph")
    assert out.advantages.requires_grad is False and out.advantages.grad_fn is None
    r = BATCH.completion_mask.sum(1).double().view(-1, 2)
    expected = (r - r.mean(1, keepdim=True)).reshape(-1, 1) * BATCH.completion_mask
    assert torch.equal(out.advantages, expected) and out.advantages.abs().sum() > 0


def _probe(tmp_path, rewards: str) -> list[str]:
    return ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", rewards, "--prompts", "2",
            "--group", "4", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8",
            "--bootstrap", "50", "--out", str(tmp_path / "p"), "--no-progress"]


def test_gradprobe_probe_refuses_array_stats_naming_reward_and_key(plugins, tmp_path, capsys):
    """Before: the whole compute, then "internal error" (exit 1) at probe.json, its output deleted."""
    assert main(_probe(tmp_path, "outcome,stats_mod.py:array_stats")) == 2
    err = capsys.readouterr().err
    assert err == (f"gradprobe probe: error: reward 'stats_mod.py:array_stats' returned stats['group_means'] of type "
                   f"numpy.ndarray (shape (2,)), {WRITE}{ARRAY_FIX}\n")
    assert not (tmp_path / "p").exists()


def test_gradprobe_probe_runs_a_reward_whose_advantages_have_a_graph(plugins, tmp_path, capsys):
    """Before: "error: Can't call numpy() on Tensor that requires grad", naming no reward."""
    assert main(_probe(tmp_path, "outcome,stats_mod.py:graph")) == 0, capsys.readouterr().err
    entries = {r["name"]: r for r in json.loads((tmp_path / "p" / "probe.json").read_text())["rewards"]}
    assert entries["stats_mod.py:graph"]["valid_completions"] == 4 * 2


def test_gradprobe_train_refuses_array_stats_at_the_first_update(plugins, tmp_path, capsys):
    """Before: a raw TypeError traceback at the first update's metrics.jsonl line."""
    (tmp_path / "plan.toml").write_text(tiny_plan(reward="stats_mod:array_stats"))
    run = tmp_path / "run"
    assert main(["train", "--plan", str(tmp_path / "plan.toml"), "--arm", "grpo", "--out", str(run),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe train: error: reward 'stats_mod:array_stats' returned stats['group_means'] of "
                          f"type numpy.ndarray (shape (2,)), {WRITE}{ARRAY_FIX}; the run kept no checkpoint"), err
    assert [line["update"] for line in metric_lines(run) if not line.get("eval")] == []  # no update line written


@pytest.mark.parametrize("key, value, kind", [
    ("missing", "two", "a count, a whole number >= 0; return an int"),
    ("zero_variance_groups", -1, "a count, a whole number >= 0; return an int"),
    ("nonfinite_groups", 1.5, "a count, a whole number >= 0; return an int"),
    ("groups", True, "a count, a whole number >= 0; return an int"),
    ("overflow_max_abs_reward", float("nan"), "a number; return a float"),
])
def test_a_stat_gradprobe_reads_itself_must_be_its_kind(key, value, kind):
    from gradprobe.rewards.base import RewardOutput

    out = RewardOutput("x", torch.zeros(BATCH.completion_mask.shape, dtype=torch.float64),
                       torch.ones(BATCH.num_rows, dtype=torch.bool), stats={key: value})
    with pytest.raises(RewardFunctionError) as e:
        checked_output(out, "mine", BATCH)
    assert str(e.value) == (f"reward 'mine' returned stats[{key!r}] = {value!r} ({type(value).__name__}): gradprobe "
                            f"reads that key as {kind}, or name your statistic otherwise")
    fine = {"missing": 2, "zero_variance_groups": 0, "nonfinite_groups": None, "groups": 2.0,
            "overflow_max_abs_reward": float("inf")}
    assert checked_output(RewardOutput("x", out.advantages, out.valid, stats=fine), "mine", BATCH).stats == fine
