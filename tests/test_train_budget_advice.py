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
#: B * G tokens is a lower bound only (brk55: "minimum: 128", and 128 stopped after update 1 costing 4,409)
_BOUND = ("a lower bound only: one update costs about B * G * the mean completion length, up to 2 * 4 * max_new_tokens "
          "40 = 320 rollout tokens, and a budget below update 1's cost stops after update 1; a useful run needs many "
          "updates")


def _run(budget: dict, overrides: dict):
    return shorten_budget(parse_plan(tiny_plan(budget=budget)).arm("grpo"), overrides)


def test_a_token_flag_names_its_flag_the_tokens_of_one_update_and_the_other_kinds_as_alternatives():
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 20})
    message = too_small_message(run, {"generated_tokens": (20, 617)}, "run", python=False)
    assert message == (
        "--budget-tokens = 20 but one update of arm 'grpo' cost 617: the budget is smaller than one update (the run "
        "stopped after update 1, data kept in run); to train, rerun with a new --out (or after deleting run: a rerun "
        f"into it with another budget is refused) and raise --budget-tokens to at least 617 tokens ({_LEAST}), at "
        "most the plan's budget.generated_tokens = 250,000, or leave it out to use the plan's budget; or budget the "
        "run by --updates, --budget-seconds or --budget-flops instead of --budget-tokens")
    assert "\n" not in message


def test_train_arguments_are_named_as_arguments():
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 20})
    message = too_small_message(run, {"generated_tokens": (20, 617)}, "run", python=True)
    assert message.startswith("budget_tokens=20 but one update of arm 'grpo' cost 617: ")
    assert message.endswith(
        f"and raise budget_tokens= to at least 617 tokens ({_LEAST}), at most the plan's budget.generated_tokens = "
        "250,000, or leave it out to use the plan's budget; or budget the run by updates=, budget_seconds= or "
        "budget_flops= instead of budget_tokens=")


def test_a_flop_flag_names_flops_rounded_up_and_no_plan_limit():
    run = _run({"generated_tokens": 250_000}, {"flops": 5e9})
    assert too_small_message(run, {"flops": (5e9, 10_105_274_368.4)}, "o", python=False).endswith(
        f"and raise --budget-flops to at least 10_105_274_369 FLOPs ({_LEAST}); or budget the run by --updates, "
        "--budget-seconds or --budget-tokens instead of --budget-flops")


def test_a_plan_budget_names_the_plan_and_no_alternative_flag():
    run = _run({"flops": 5e9}, {})
    assert too_small_message(run, {"flops": (5e9, 6e9)}, "o", python=False).endswith(
        f"and raise budget.flops in the plan to at least 6_000_000_000 FLOPs ({_LEAST}) (a changed plan)")


def test_a_token_budget_below_b_times_g_says_what_one_update_costs():
    try:
        _run({"generated_tokens": 250_000}, {"generated_tokens": 1})
    except PlanError as e:
        message = str(e)
    else:
        raise AssertionError("budget of 1 token accepted")
    assert message == (
        "--budget-tokens 1 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least one token "
        f"each; give --budget-tokens at least 8 ({_BOUND}); or budget the run by --updates, --budget-seconds or "
        "--budget-flops instead of --budget-tokens")


def _refusal(overrides: dict, python: bool = False) -> str:
    run = parse_plan(tiny_plan(budget={"generated_tokens": 250_000})).arm("grpo")
    try:
        shorten_budget(run, overrides, python=python)
    except PlanError as e:
        return str(e)
    raise AssertionError(f"{overrides} accepted")


def test_the_token_lower_bound_leaves_out_the_budget_kinds_given_with_it():
    # brk55: --budget-tokens 1 --budget-flops 1 --budget-seconds 0.001 was offered --budget-seconds and --budget-flops
    message = _refusal({"generated_tokens": 1, "flops": 1, "device_seconds": 0.001})
    assert message == (
        "--budget-tokens 1 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least one token "
        f"each; give --budget-tokens at least 8 ({_BOUND}); or budget the run by --updates instead of "
        "--budget-tokens")
    assert _refusal({"generated_tokens": 1, "flops": 1}, python=True).endswith(
        "or budget the run by updates= or budget_seconds= instead of budget_tokens=")


def test_the_token_lower_bound_offers_nothing_when_every_kind_was_given():
    message = _refusal({"generated_tokens": 1, "flops": 1, "device_seconds": 0.001, "updates": 1})
    assert message == (
        "--budget-tokens 1 is smaller than one update of arm 'grpo': B * G = 2 * 4 completions of at least one token "
        f"each; give --budget-tokens at least 8 ({_BOUND})")


def test_two_flags_below_one_update_get_one_clause_each_and_no_flag_given_as_an_alternative():
    # brk55: "... or leave it out to use the plan's budget and raise --budget-flops ..." read as one choice
    run = _run({"generated_tokens": 250_000}, {"generated_tokens": 200, "flops": 1, "device_seconds": 0.001})
    message = too_small_message(run, {"generated_tokens": (200, 4409), "flops": (1, 38_113_582_864)}, "r",
                                python=False)
    assert message == (
        "--budget-tokens = 200 but one update of arm 'grpo' cost 4,409; --budget-flops = 1 but one update of arm "
        "'grpo' cost 38,113,582,864: both budgets are smaller than one update (the run stopped after update 1, data "
        "kept in r); to train, rerun with a new --out (or after deleting r: a rerun into it with another budget is "
        f"refused) and fix both budgets: raise --budget-tokens to at least 4_409 tokens ({_LEAST}), at most the "
        "plan's budget.generated_tokens = 250,000, or leave it out to use the plan's budget; raise --budget-flops to "
        f"at least 38_113_582_864 FLOPs ({_LEAST}); or budget the run by --updates instead of --budget-tokens and "
        "--budget-flops")


def test_a_flag_given_beside_the_one_too_small_is_no_alternative():
    run = _run({"generated_tokens": 250_000}, {"flops": 5e9, "device_seconds": 60.0, "updates": 9})
    assert too_small_message(run, {"flops": (5e9, 6e9)}, "o", python=True).endswith(
        f"and raise budget_flops= to at least 6_000_000_000 FLOPs ({_LEAST}); or budget the run by budget_tokens= "
        "instead of budget_flops=")
    # 2,000 tokens: 9 updates of at most 2 * 4 * 40 = 320 tokens can spend them (100,000 is now refused: out of reach)
    every = _run({"generated_tokens": 250_000}, {"flops": 5e9, "device_seconds": 60.0, "updates": 9,
                                                 "generated_tokens": 2_000})
    assert too_small_message(every, {"flops": (5e9, 6e9)}, "o", python=False).endswith(
        f"and raise --budget-flops to at least 6_000_000_000 FLOPs ({_LEAST})")  # no alternative is left
