"""The error of a run whose first update cost more than its budget (``gradprobe train --budget-flops 5e9`` on a plan
with ``[budget] flops = 6e10``) must give the fix that works: its folder keeps the stopped run's budget, so the old
advice, "raise --budget-flops", with the same ``--out`` was refused ("holds a run with a different configuration").
"""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.training.budget import too_small_message
from gradprobe.training.plan import parse_plan, shorten_budget

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

COST = 10_105_274_368.0  # the trial user's update 1 (FLOPs)
_LEAST = "update 1's cost: the least that buys one update; a useful run needs many updates' cost"


def _run(budget: dict, overrides: dict):
    return shorten_budget(parse_plan(tiny_plan(budget=budget)).arm("grpo"), overrides)


def test_a_flops_flag_below_one_update_says_rerun_with_a_new_out_and_a_larger_flag_or_none():
    run = _run({"flops": 6e10}, {"flops": 5e9})
    assert too_small_message(run, {"flops": (5e9, COST)}, "t_bad") == (
        "--budget-flops = 5,000,000,000 but one update of arm 'grpo' cost 10,105,274,368: the budget is smaller "
        "than one update (the run stopped after update 1, data kept in t_bad); to train, rerun with a new --out (or "
        "after deleting t_bad: a rerun into it with another budget is refused) and raise --budget-flops to at least "
        f"10_105_274_368 FLOPs ({_LEAST}), at most the plan's budget.flops = 60,000,000,000, or leave it out to use "
        "the plan's budget; or budget the run by --updates, --budget-seconds or --budget-tokens instead of "
        "--budget-flops")


def test_a_tokens_flag_names_its_own_flag_and_the_plan_limit():
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 20})
    message = too_small_message(run, {"generated_tokens": (20, 617)}, "run")
    assert message.startswith("--budget-tokens = 20 but one update of arm 'grpo' cost 617: ")
    assert message.endswith("rerun with a new --out (or after deleting run: a rerun into it with another budget is "
                            f"refused) and raise --budget-tokens to at least 617 tokens ({_LEAST}), at most the "
                            "plan's budget.generated_tokens = 250,000, or leave it out to use the plan's budget; or "
                            "budget the run by --updates, --budget-seconds or --budget-flops instead of "
                            "--budget-tokens")


def test_a_flag_for_a_kind_the_plan_does_not_set_has_no_upper_limit():
    run = _run({"generated_tokens": 250_000}, {"flops": 5e9})
    assert too_small_message(run, {"flops": (5e9, COST)}, "o").endswith(
        f"a rerun into it with another budget is refused) and raise --budget-flops to at least 10_105_274_368 FLOPs "
        f"({_LEAST}); or budget the run by --updates, --budget-seconds or --budget-tokens instead of --budget-flops")


def test_a_plan_budget_below_one_update_says_change_the_plan_and_use_a_new_out():
    run = _run({"flops": 5e9}, {})
    assert run.budget_override is None
    assert too_small_message(run, {"flops": (5e9, COST)}, "o") == (
        "budget.flops = 5,000,000,000 but one update of arm 'grpo' cost 10,105,274,368: the budget is smaller than "
        "one update (the run stopped after update 1, data kept in o); to train, rerun with a new --out (or after "
        "deleting o: a rerun into it with another budget is refused) and raise budget.flops in the plan to at least "
        f"10_105_274_368 FLOPs ({_LEAST}) (a changed plan)")


def test_a_flag_under_a_plan_budget_that_is_too_small_too_says_raise_the_plan():
    run = _run({"flops": 8e9}, {"flops": 5e9})  # the flag may not exceed the plan's 8e9, below one update
    assert too_small_message(run, {"flops": (5e9, COST)}, "o").endswith(
        "and leave out --budget-flops and raise budget.flops in the plan (its 8,000,000,000 is smaller than one "
        f"update too) to at least 10_105_274_368 FLOPs ({_LEAST})")  # no flag helps: the plan's 8e9 stays


def test_two_budgets_below_one_update_are_both_named():
    run = _run({"flops": 6e10, "generated_tokens": 250_000}, {"flops": 5e9})
    message = too_small_message(run, {"generated_tokens": (16, 600), "flops": (5e9, COST)}, "o")
    assert message.startswith("budget.generated_tokens = 16 but one update of arm 'grpo' cost 600; --budget-flops = "
                              "5,000,000,000 but one update of arm 'grpo' cost 10,105,274,368: ")
    assert "both budgets are smaller than one update" in message
    assert message.endswith(f"and fix both budgets: raise budget.generated_tokens in the plan to at least 600 tokens "
                            f"({_LEAST}) (a changed plan); raise --budget-flops to at least 10_105_274_368 FLOPs "
                            f"({_LEAST}), at most the plan's budget.flops = 60,000,000,000, or leave it out to use the "
                            "plan's budget")  # no flag helps: the plan's token budget stays too small


def test_gradprobe_train_prints_the_advice_and_following_it_works(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(task={"pool": 64}, train={"prompts_per_update": 4, "lr": None, "micro_batch_size": 16},
                              budget={"generated_tokens": 250_000}, eval={"at_updates": [], "sampled_at": "ends"}))
    bad = tmp_path / "t_bad"

    def train(out, *extra):
        return main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress", *extra])

    assert train(bad, "--budget-tokens", "20") == 2
    err = capsys.readouterr().err
    summary = json.loads((bad / "summary.json").read_text())
    assert summary["stop_reason"] == "budget_smaller_than_one_update"
    cost = summary["spent"]["generated_tokens"]
    assert err == (f"gradprobe train: error: --budget-tokens = 20 but one update of arm 'grpo' cost {cost:,}: the "
                   f"budget is smaller than one update (the run stopped after update 1, data kept in {bad}); to train, "
                   f"rerun with a new --out (or after deleting {bad}: a rerun into it with another budget is refused) "
                   f"and raise --budget-tokens to at least {cost:,} tokens ({_LEAST}), at most the plan's "
                   "budget.generated_tokens = 250,000, or leave it out to use the plan's budget; or budget the run "
                   "by --updates, --budget-seconds or --budget-flops instead of --budget-tokens\n")
    assert summary["error"] == err[len("gradprobe train: error: "):-1]
    assert train(bad, "--budget-tokens", str(3 * cost)) == 2  # the same --out: refused, as the advice says
    assert "differs in: budget, budget_override" in capsys.readouterr().err
    assert train(tmp_path / "t_good", "--budget-tokens", str(3 * cost)) == 0  # a new --out: trains
    assert json.loads((tmp_path / "t_good" / "summary.json").read_text())["updates"] >= 2
