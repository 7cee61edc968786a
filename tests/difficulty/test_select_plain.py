"""The ``plain`` selection rule: the plain prompt stream of an arm without ``selection``, called by the
training loop like every other rule, recording nothing and holding no state."""

from __future__ import annotations

import dataclasses

import pytest

from gradprobe.config import SamplingConfig
from gradprobe.difficulty.config import SelectionConfig, parse_selection
from gradprobe.difficulty.select import make_selector
from gradprobe.difficulty.select_plain import PlainRule
from gradprobe.streams import pool_indices
from gradprobe.tasks import Problem
from gradprobe.training.plan import PlanError, parse_plan

from helpers_selection import selection_plan


def _plain(pool, calls, selection=None, b=3):
    def collect(policy, task, problems, **kw):  # the run's rollout collection, recorded
        calls.append((problems, kw))
        return f"batch of {len(problems)}"

    return make_selector(selection, policy="policy", task="task", pool=pool, sampler="sampler",
                         sampling=SamplingConfig(max_new_tokens=4), group_size=2, prompts_per_update=b, seed=7,
                         collect=collect)


def test_no_selection_is_the_plain_rule_on_the_pools_per_seed_order():
    pool = [Problem(f"t/{i}", f"q{i}", "1") for i in range(5)]
    calls = []
    sel = _plain(pool, calls)
    assert isinstance(sel.rule, PlainRule) and sel.estimator is None and sel.state_dict() is None
    for update in range(3):  # 9 prompts from a pool of 5: the stream crosses into the second epoch
        batch, record = sel.next_batch(update, ledger="ledger")
        assert (batch, record) == ("batch of 3", None)
    assert [p.id for p in calls[2][0]] == [f"t/{i}" for i in pool_indices(2, 3, 5, 7)]
    assert calls[0][1] == {"group_size": 2, "sampler": "sampler", "sampling": SamplingConfig(max_new_tokens=4),
                           "ledger": "ledger", "category": "rollout"}
    # no candidate drawn, so no pool check: a pool smaller than B still streams (as before the rule existed)
    assert _plain(pool[:2], [], b=3).next_batch(0, None)[0] == "batch of 3"


def test_plain_resumes_only_a_checkpoint_without_selection():
    pool = [Problem(f"t/{i}", "q", "1") for i in range(4)]
    plain = _plain(pool, [])
    plain.load_state_dict(None)  # a run without selection checkpoints selector = None
    half = _plain(pool, [], selection={"rule": "half"}, b=2)
    with pytest.raises(ValueError, match="written with selection .*'rule': 'half'.*run's selection is none"):
        plain.load_state_dict(half.state_dict())
    with pytest.raises(ValueError, match="written with no selection, but the run's selection is .*'rule': 'half'"):
        half.load_state_dict(None)


def test_a_plan_may_spell_plain_and_gets_the_run_of_no_selection():
    assert parse_selection({"selection": "plain"}) is None
    plain_text = selection_plan(None, updates=1)
    spelled = parse_plan(plain_text.replace('reward = "outcome"', 'reward = "outcome"\nselection = "plain"', 1))
    spelled = spelled.arm("select_half")
    assert spelled.selection is None
    unset = parse_plan(plain_text).arm("select_half")  # the same run but for the plan text's hash
    assert dataclasses.replace(spelled, plan_sha256=unset.plan_sha256) == unset
    with pytest.raises(ValueError, match=r'decay set with selection = "plain" .* choose a selecting rule: half, '
                                         r'random, dynamic, greso'):
        parse_selection({"selection": "plain", "decay": 0.5})
    with pytest.raises(PlanError, match="candidates_multiplier set with selection"):
        parse_plan(selection_plan("plain", updates=1))  # the helper adds candidates_multiplier = 3
    with pytest.raises(ValueError, match='prior_strength set with selection = "plain"'):
        SelectionConfig(rule="plain", prior_strength=2.0)
