"""A ``gradprobe train`` / ``gradprobe.train`` budget too small to buy one update names the budget the user set and
the least value that buys one update in that budget's unit (update 1's cost: tokens for a token budget, FLOPs for a
FLOP budget), and the other budget kinds only as alternatives, in one line (it said "to many updates' cost", no
number); a token budget below B * G completions (refused before the run) says what one update costs at most.
"""

from __future__ import annotations

from gradprobe.training.budget import too_small_message
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_training import tiny_plan

_LEAST = "update 1's cost: the least that buys one update; a useful run needs many updates' cost"


def _run(budget: dict, overrides: dict):
    return shorten_budget(parse_plan(tiny_plan(budget=budget)).arm("grpo"), overrides)


def test_a_token_flag_names_its_flag_the_tokens_of_one_update_and_the_other_kinds_as_alternatives():
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 20})
    message = too_small_message(run, {"generated_tokens": (20, 617)}, "run", python=False)
    assert message == (
        "--budget-tokens = 20 but one update of arm 'grpo' cost 617: the budget is smaller than one update (the run "
        "stopped after update 1, data kept in run); to train, rerun with a new --out (or after deleting run: a rerun "
        f"into it with another budget is refused) and raise --budget-tokens to at least 617 tokens ({_LEAST}), at "
        "most the plan's budget.generated_tokens = 250,000, or leave it out to use the plan's budget; or shorten the "
        "run by --updates, --budget-seconds or --budget-flops instead")
    assert "\n" not in message


def test_train_arguments_are_named_as_arguments():
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 20})
    message = too_small_message(run, {"generated_tokens": (20, 617)}, "run", python=True)
    assert message.startswith("budget_tokens=20 but one update of arm 'grpo' cost 617: ")
    assert message.endswith(
        f"and raise budget_tokens= to at least 617 tokens ({_LEAST}), at most the plan's budget.generated_tokens = "
        "250,000, or leave it out to use the plan's budget; or budget the run by updates=, budget_seconds= or "
        "budget_flops= instead")


def test_a_flop_flag_names_flops_rounded_up_and_no_plan_limit():
    run = _run({"generated_tokens": 250_000}, {"flops": 5e9})
    assert too_small_message(run, {"flops": (5e9, 10_105_274_368.4)}, "o", python=False).endswith(
        f"and raise --budget-flops to at least 10,105,274,369 FLOPs ({_LEAST}); or budget the run by --updates, "
        "--budget-seconds or --budget-tokens instead")


def test_a_plan_budget_names_the_plan_and_no_alternative_flag():
    run = _run({"flops": 5e9}, {})
    assert too_small_message(run, {"flops": (5e9, 6e9)}, "o", python=False).endswith(
        f"and raise budget.flops in the plan to at least 6,000,000,000 FLOPs ({_LEAST}) (a changed plan)")


def test_a_token_budget_below_b_times_g_says_what_one_update_costs():
    try:
        _run({"generated_tokens": 250_000}, {"generated_tokens": 1})
    except PlanError as e:
        message = str(e)
    else:
        raise AssertionError("budget of 1 token accepted")
    assert message == (
        "--budget-tokens 1 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least one token "
        "each; minimum: 8 (one update costs B * G * the mean completion length, up to 2 * 4 * max_new_tokens 40 = "
        "320 rollout tokens; a useful run needs many updates); or budget the run by --updates, --budget-seconds or "
        "--budget-flops instead")
