"""A plan's ``[budget]`` too small for one update says what ``gradprobe train --budget-tokens`` says (292007a): B x G
tokens as a lower bound only, one update's upper cost B x G x max_new_tokens beside it, and the plan field
``[budget] generated_tokens`` to raise, with the budget kinds the plan does not set as alternatives. It said
"...; minimum: 8 (a realistic budget is many updates of B * G * mean length)" and "budget.updates = 0 is smaller than
one update; minimum: 1"; and it named the first arm too small, not the one with the largest B x G, so raising the
budget to that minimum met the next arm's refusal."""

from __future__ import annotations

import pytest

from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_training import tiny_plan

#: the words of the lower bound, as the --budget-tokens message of tests/test_train_budget_advice.py gives them
_BOUND = ("a lower bound only: one update costs about B * G * the mean completion length, up to 2 * 4 * max_new_tokens "
          "40 = 320 rollout tokens, and a budget below update 1's cost stops after update 1; a useful run needs many "
          "updates")


def _refusal(**kwargs) -> str:
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(**kwargs))
    return str(e.value)


def test_a_plan_token_budget_below_one_update_says_what_the_flag_says():
    assert _refusal(budget={"generated_tokens": 7}) == (
        "budget.generated_tokens = 7 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least "
        f"one token each; give [budget] generated_tokens at least 8 ({_BOUND}); or budget the run by [budget] "
        "updates, [budget] device_seconds or [budget] flops instead of [budget] generated_tokens")
    # the same facts as the command line's refusal of the same number
    run = parse_plan(tiny_plan(budget={"generated_tokens": 250_000})).arm("grpo")
    with pytest.raises(PlanError) as flag:
        shorten_budget(run, {"generated_tokens": 7})
    assert f"give --budget-tokens at least 8 ({_BOUND})" in str(flag.value)


def test_the_kinds_the_plan_sets_are_no_alternative():
    assert _refusal(budget={"generated_tokens": 7, "updates": 3, "flops": 1e12}).endswith(
        f"give [budget] generated_tokens at least 8 ({_BOUND}); or budget the run by [budget] device_seconds "
        "instead of [budget] generated_tokens")
    assert _refusal(budget={"generated_tokens": 7, "updates": 3, "flops": 1e12, "device_seconds": 60.0}).endswith(
        f"give [budget] generated_tokens at least 8 ({_BOUND})")


def test_the_arm_with_the_largest_b_times_g_is_named():
    arms = {"small": {"reward": "outcome", "group": 2}, "grpo": {"reward": "outcome"}}  # B * G = 2 * 2, 2 * 4
    assert _refusal(arms=arms, budget={"generated_tokens": 3}).startswith(
        "budget.generated_tokens = 3 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least "
        "one token each; give [budget] generated_tokens at least 8 (")


def test_zero_updates_is_named_as_the_flag_names_it_with_the_plan_fix():
    assert _refusal(budget={"updates": 0}) == (
        "budget.updates must be a whole number > 0 (a budget the run can spend), got 0; give [budget] updates at "
        "least 1 (one update)")
    assert _refusal(budget={"updates": -2}).startswith("budget.updates must be a whole number > 0 (a budget the run "
                                                       "can spend), got -2; ")
