"""The Python API's messages speak Python (a tester): ``gradprobe.train(budget_tokens=...)``'s budget smaller than
one update said "--budget-tokens = 1,000 ... rerun with a new --out ... raise --budget-tokens", and a misspelt
keyword (``updatez=1``) got Python's bare TypeError, which names no accepted keyword."""

from __future__ import annotations

import inspect
import json

import pytest

import gradprobe
from gradprobe.training.budget import named_as_arguments, too_small_message
from gradprobe.training.errors import BudgetTooSmallError
from gradprobe.training.plan import parse_plan, shorten_budget

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

_ACCEPTED = ("run, out, arm, seed, device, updates, budget_tokens, budget_flops, budget_seconds, progress, "
             "report_to")


def test_train_names_its_argument_when_the_budget_is_smaller_than_one_update(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(task={"pool": 64}, train={"prompts_per_update": 4, "lr": None, "micro_batch_size": 16},
                              budget={"generated_tokens": 250_000}, eval={"at_updates": [], "sampled_at": "ends"}))
    out = tmp_path / "run"
    with pytest.raises(BudgetTooSmallError) as err:
        gradprobe.train(plan, out, arm="grpo", budget_tokens=20)
    summary = json.loads((out / "summary.json").read_text())
    cost = summary["spent"]["generated_tokens"]
    assert str(err.value) == (
        f"budget_tokens=20 but one update of arm 'grpo' cost {cost:,}: the budget is smaller than one update (the "
        f"run stopped after update 1, data kept in {out}); to train, call gradprobe.train again with a new out= (or "
        f"after deleting {out}: a rerun into it with another budget is refused) and raise budget_tokens= to at least "
        f"{cost:,} tokens (update 1's cost: the least that buys one update; a useful run needs many updates' cost), "
        "at most the plan's budget.generated_tokens = 250,000, or leave it out to use the plan's budget; or budget "
        "the run by updates=, budget_seconds= or budget_flops= instead of budget_tokens=")
    assert summary["error"] == str(err.value)
    # the record keeps the flags' names, as from the command line: the folder compares with a CLI run's
    assert json.loads((out / "config.json").read_text())["run"]["budget_override"]["flags"] == {"--budget-tokens": 20}
    run = shorten_budget(parse_plan(plan.read_text()).arm("grpo"), {"generated_tokens": 20})
    assert too_small_message(run, {"generated_tokens": (20, cost)}, "o").startswith(  # after train(): flags again
        f"--budget-tokens = 20 but one update of arm 'grpo' cost {cost:,}: ")


def test_named_as_arguments_names_the_arguments_only_inside_its_block():
    run = shorten_budget(parse_plan(tiny_plan(budget={"flops": 6e10})).arm("grpo"), {"flops": 5e9})
    with named_as_arguments():
        inside = too_small_message(run, {"flops": (5e9, 1e10)}, "o")
    assert inside == (
        "budget_flops=5,000,000,000 but one update of arm 'grpo' cost 10,000,000,000: the budget is smaller than one "
        "update (the run stopped after update 1, data kept in o); to train, call gradprobe.train again with a new out= "
        "(or after deleting o: a rerun into it with another budget is refused) and raise budget_flops= to at least "
        "10_000_000_000 FLOPs (update 1's cost: the least that buys one update; a useful run needs many updates' "
        "cost), at most the plan's budget.flops = 60,000,000,000, or leave it out to use the plan's budget; or budget "
        "the run by updates=, budget_seconds= or budget_tokens= instead of budget_flops=")
    assert too_small_message(run, {"flops": (5e9, 1e10)}, "o").startswith("--budget-flops = 5,000,000,000 but ")
    assert too_small_message(run, {"flops": (5e9, 1e10)}, "o", python=True) == inside


@pytest.mark.parametrize("keyword, hint", [("updatez", "; did you mean updates=?"),
                                           ("budget_token", "; did you mean budget_tokens=?"),
                                           ("report", "; did you mean report_to=?"), ("xyz", "")])
def test_an_unknown_keyword_of_train_names_the_closest_and_every_accepted_one(tmp_path, keyword, hint):
    with pytest.raises(TypeError) as err:
        gradprobe.train(tmp_path / "plan.toml", tmp_path / "run", arm="grpo", **{keyword: 1})
    assert str(err.value) == (f"train() got an unexpected keyword argument {keyword!r}{hint} (it accepts: "
                              f"{_ACCEPTED})")
    assert list(tmp_path.iterdir()) == []  # refused before anything is read or written


def test_train_keeps_its_signature_name_and_docstring():
    assert ", ".join(inspect.signature(gradprobe.train).parameters) == _ACCEPTED
    assert gradprobe.train.__name__ == "train" and gradprobe.train.__module__ == "gradprobe.api.study"
    assert gradprobe.train.__doc__.startswith("One GRPO run until its budget is spent")
