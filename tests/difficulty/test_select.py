"""Selection arms inside a training run: charges in the ledger and the budgets, fallbacks, bad input, resume."""

from __future__ import annotations

import logging

import pytest

from gradprobe.difficulty.config import SELECTION_RULE_CLASSES, SELECTION_RULES, parse_selection
from gradprobe.difficulty.estimator import DuplicatePromptError
from gradprobe.difficulty.select import PromptSelector, SelectionConfig
from gradprobe.tasks import Problem
from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_selection import Killed, kill_at, selection_plan, selection_records
from helpers_tasks import ScoredTask
from helpers_training import metric_lines


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def test_select_half_charges_selection_and_counts_it_in_the_budgets(tmp_path):
    run = parse_plan(selection_plan("half", updates=2)).arm("select_half")
    summary = run_training(run, tmp_path / "r", task=ScoredTask(train_size=16))
    updates = [x for x in metric_lines(tmp_path / "r") if not x.get("eval")]
    assert len(updates) == 2
    led = summary["ledger"]
    sel = [u["selection"] for u in updates]
    # each update reads its 3 x 2 = 6 candidate prompts: the tokens, FLOPs and seconds are charged
    assert all(s["candidates"] == 6 and s["selection_tokens"] > 0 and s["selection_flops"] > 0 for s in sel)
    assert led["generated_tokens"]["selection"] == sum(s["selection_tokens"] for s in sel)
    assert led["flops"]["selection"] == pytest.approx(sum(s["selection_flops"] for s in sel))
    assert updates[0]["update_generated_tokens"]["selection"] == sel[0]["selection_tokens"]
    # the budgets see every selection cost
    spent = summary["spent"]
    assert spent["generated_tokens"] == sum(led["generated_tokens"][c] for c in ("rollout", "continuation", "selection"))
    assert spent["flops"] == pytest.approx(led["flops"]["generation"] + led["flops"]["training"] + led["flops"]["selection"])
    assert spent["device_seconds"] == pytest.approx(led["device_seconds"]["generation"] + led["device_seconds"]["training"]
                                                    + led["device_seconds"]["selection"] + led["device_seconds"]["reward"])
    # generation FLOPs are charged for rollout tokens only (selection tokens carry their own FLOPs): per
    # rollout token at most one forward at the longest context (with selection tokens it would be ~20x)
    from gradprobe.ledger import forward_flops_per_token
    from gradprobe.models import load_policy

    bound = forward_flops_per_token(load_policy("tiny-qwen2").model, 400 + 10)
    assert led["generated_tokens"]["selection"] > 5 * led["generated_tokens"]["rollout"]
    assert led["flops"]["generation"] <= led["generated_tokens"]["rollout"] * bound
    # update 1 has no outcomes yet: random fallback; update 2 ranks, verdict and mean p_hat recorded
    assert sel[0]["fallback"] == "random" and sel[1]["fallback"] is None
    assert 0 < sel[1]["candidates_mean_p_hat"] < 1 and isinstance(sel[1]["fail_more_often"], bool)
    assert sel[1]["fail_more_often"] == (sel[1]["candidates_mean_p_hat"] < 0.5)


def test_select_half_resumes_exactly(tmp_path):
    run = parse_plan(selection_plan("half", updates=3)).arm("select_half")
    with pytest.raises(Killed):
        run_training(run, tmp_path / "killed", task=ScoredTask(train_size=16), after_update=kill_at(2))
    resumed = run_training(run, tmp_path / "killed", task=ScoredTask(train_size=16))
    straight = run_training(run, tmp_path / "straight", task=ScoredTask(train_size=16))
    a = selection_records(tmp_path / "killed")
    b = selection_records(tmp_path / "straight")
    drop = ("selection_seconds",)
    assert [{k: v for k, v in x.items() if k not in drop} for x in a] == \
        [{k: v for k, v in x.items() if k not in drop} for x in b]
    assert resumed["ledger"]["generated_tokens"] == straight["ledger"]["generated_tokens"]


@pytest.mark.parametrize("rule", ["never", "always"])
def test_no_signal_falls_back_to_random_with_a_warning(tmp_path, rule, caplog):
    run = parse_plan(selection_plan("half", updates=3)).arm("select_half")
    with caplog.at_level(logging.WARNING, logger="gradprobe.difficulty.select"):
        run_training(run, tmp_path / "r", task=ScoredTask(rule, train_size=16))
    sel = selection_records(tmp_path / "r")
    assert [s["fallback"] for s in sel] == ["random"] * 3
    assert all(s["estimator_degenerate"] for s in sel[1:])
    assert sum("selecting at random" in r.message for r in caplog.records) == 1  # said once per run


def test_dynamic_sampling_drops_zero_variance_groups_and_charges_them(tmp_path):
    run = parse_plan(selection_plan("dynamic", updates=2)).arm("select_half")
    summary = run_training(run, tmp_path / "r", task=ScoredTask("never", train_size=16))
    sel = selection_records(tmp_path / "r")
    # never solved: every group is uninformative; all 3 x 2 candidates are drawn, 2 are filled back in
    assert all(s["drawn_groups"] == 6 and s["filled"] == 2 and s["dropped_groups"] == 4 for s in sel)
    led = summary["ledger"]
    assert led["generated_tokens"]["selection"] == sum(s["selection_tokens"] for s in sel) > 0
    assert led["flops"]["selection"] > 0 and led["device_seconds"]["selection"] > 0


def test_random_arm_pays_the_same_feature_cost_as_half(tmp_path):
    half = run_training(parse_plan(selection_plan("half", updates=1)).arm("select_half"), tmp_path / "h",
                        task=ScoredTask(train_size=16))
    rnd = run_training(parse_plan(selection_plan("random", updates=1)).arm("select_half"), tmp_path / "r",
                       task=ScoredTask(train_size=16))
    assert half["ledger"]["generated_tokens"]["selection"] == rnd["ledger"]["generated_tokens"]["selection"]
    assert half["ledger"]["flops"]["selection"] == pytest.approx(rnd["ledger"]["flops"]["selection"])


def _selector(pool, b=2, rule="half", policy=None):
    from gradprobe.config import SamplingConfig

    return PromptSelector(SelectionConfig(rule=rule), policy=policy, task=None, pool=pool, sampler=None,
                          sampling=SamplingConfig(max_new_tokens=4), group_size=2, prompts_per_update=b, seed=0)


def test_bad_pools_are_refused():
    probs = [Problem(f"t/{i}", "q", "1") for i in range(3)]
    with pytest.raises(ValueError, match="non-empty pool"):
        _selector([])
    with pytest.raises(ValueError, match="3 prompts, fewer than prompts_per_update = 4"):
        _selector(probs, b=4)
    with pytest.raises(DuplicatePromptError, match="'t/1'"):
        _selector(probs + [Problem("t/1", "other", "2")])


def test_parse_selection_and_plan_errors():
    assert parse_selection({"reward": "outcome"}) is None
    cfg = parse_selection({"selection": "half", "candidates_multiplier": 2, "decay": 1})
    assert cfg == {"rule": "half", "candidates_multiplier": 2, "prior_strength": 8.0, "decay": 1.0,
                   "feature_batch_size": 32}
    with pytest.raises(ValueError, match="not one of plain, half, random, dynamic"):
        parse_selection({"selection": "nearest"})
    with pytest.raises(ValueError, match="without selection"):
        parse_selection({"candidates_multiplier": 4})
    with pytest.raises(ValueError, match="candidates_multiplier must be an integer"):
        parse_selection({"selection": "half", "candidates_multiplier": 2.5})
    with pytest.raises(PlanError, match=r"\[arms.select_half\] selection: .*decay"):
        parse_plan(selection_plan("half", updates=1, decay=1.5))
    plain = parse_plan(selection_plan(None, updates=1))
    assert plain.arm("select_half").selection is None
    assert parse_plan(selection_plan("dynamic", updates=1)).arm("select_half").selection["rule"] == "dynamic"


def test_every_registered_rule_resolves_to_its_rule_object_and_plans_accept_exactly_the_registry(monkeypatch):
    from gradprobe.difficulty import config as selection_config
    from gradprobe.difficulty.select import rule_class
    from gradprobe.difficulty.select_common import SelectionRule

    assert SELECTION_RULES == ("plain", "half", "random", "dynamic", "greso") == tuple(SELECTION_RULE_CLASSES)
    for name in SELECTION_RULES:
        cls = rule_class(name)
        assert issubclass(cls, SelectionRule) and cls.name == name
    probs = [Problem(f"t/{i}", "q", "1") for i in range(4)]
    assert type(_selector(probs, rule="greso").rule).__name__ == "GresoRule"
    assert _selector(probs, rule="greso").greso is not None and _selector(probs, rule="half").greso is None
    with pytest.raises(ValueError, match="selection 'nearest' is not one of plain, half, random, dynamic, greso"):
        rule_class("nearest")
    # plans validate against the registry's names: a rule added there is accepted by a plan's arm
    monkeypatch.setitem(selection_config.SELECTION_RULE_CLASSES, "nearest", "gradprobe.difficulty.select_estimated:HalfRule")
    assert parse_selection({"selection": "nearest"})["rule"] == "nearest"
    assert rule_class("nearest").name == "half"


def test_more_candidates_than_the_pool_holds_is_warned_with_the_multiplier_in_effect():
    """A trial user's selection arm with candidates_multiplier = 2, B = 16 and a pool of 20 drew 20 candidates per
    update, not 32, without a word (candidates() caps m x B at the pool size)."""
    from gradprobe.difficulty.select import SelectionPoolWarning

    probs = [Problem(f"t/{i}", f"q{i}", "1") for i in range(6)]
    with pytest.warns(SelectionPoolWarning) as caught:
        selector = _selector(probs, b=2)  # m = 4 (the default): 8 candidates asked, 6 in the pool
    assert str(caught[0].message) == (
        "selection candidates_multiplier = 4 asks for m x B = 8 candidates per update, more than the pool's 6 "
        "prompts: every update draws all 6 (m = 3 in effect); raise task.pool or lower candidates_multiplier")
    assert len(selector.candidates(0)) == 6
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionPoolWarning)
        _selector(probs[:5] + [Problem("t/9", "q9", "1"), Problem("t/8", "q8", "1"), Problem("t/7", "q7", "1")], b=2)
