"""``gradprobe train --updates/--budget-tokens/--budget-flops/--budget-seconds``: shortening a run from the command
line, on the shipped tiny tier; the override is recorded, and bad values are refused naming the flag."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

# the shipped tiny tier on its frontier task, made small: B x G = 4 x 4, 4 held-out prompts
PLAN = tiny_plan(task={"pool": 64},
                 train={"prompts_per_update": 4, "lr": None, "micro_batch_size": 16, "checkpoint_every": 25},
                 budget={"generated_tokens": 250_000}, eval={"at_updates": [2, 5], "sampled_at": "ends"})

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture()
def plan(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    return path


def _train(plan, out, *extra):
    return main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress", *extra])


def test_updates_1_stops_the_tiny_tier_after_one_update_and_records_the_override(plan, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(plan, out, "--updates", "1") == 0
    printed = capsys.readouterr().out
    assert "grpo seed 0: 1 updates, stop: budget (updates)" in printed
    assert "shortened from the command line (--updates 1); the plan's budget: generated_tokens 250,000" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] and summary["updates"] == 1 and summary["budget_spent"] == "updates"
    assert summary["budget"] == {"generated_tokens": 250_000, "updates": 1}
    assert summary["budget_override"] == {"flags": {"--updates": 1}, "plan_budget": {"generated_tokens": 250_000}}
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["budget"] == {"generated_tokens": 250_000, "device_seconds": None, "flops": None, "updates": 1}
    assert run["budget_override"] == summary["budget_override"]
    assert [x["update"] for x in metric_lines(out) if not x.get("eval")] == [1]  # one update line, no second
    # the shortened folder is not resumed as the full plan's run (nor with another override)
    assert _train(plan, out) == 2
    err = capsys.readouterr().err
    assert "differs in: budget, budget_override: budget.updates: 1 then, null now; budget_override: {" in err
    assert _train(plan, out, "--updates", "2") == 2
    assert "differs in: budget, budget_override" in capsys.readouterr().err


def test_budget_tokens_shortens_the_token_budget(plan, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(plan, out, "--budget-tokens", "1500") == 0  # one update: 16 completions, ~600 tokens
    summary = json.loads((out / "summary.json").read_text())
    per_update = [x["update_charged_tokens"] for x in metric_lines(out) if not x.get("eval")]
    assert summary["budget_spent"] == "generated_tokens" and summary["budget"] == {"generated_tokens": 1500}
    assert summary["budget_override"]["flags"] == {"--budget-tokens": 1500}
    # stops before the first update that would start with the 1500 tokens spent: overshoot < one update
    spent = summary["spent"]["generated_tokens"]
    assert spent >= 1500 and spent - per_update[-1] < 1500 and summary["updates"] == len(per_update) >= 2
    assert sum(per_update) == spent


@pytest.mark.parametrize("flags, fragment", [
    (["--updates", "0"], "--updates must be a whole number > 0 (a budget the run can spend), got 0"),
    (["--updates", "-3"], "--updates must be a whole number > 0"),
    (["--budget-flops", "nan"], "--budget-flops must be a finite number > 0"),
    (["--budget-flops=-1e9"], "--budget-flops must be a finite number > 0"),
    (["--budget-seconds", "inf"], "--budget-seconds must be a finite number > 0"),
    (["--budget-tokens", "500000"], "--budget-tokens 500,000 is more than the plan's budget.generated_tokens = 250,000"),
    (["--budget-tokens", "15"], "--budget-tokens 15 is smaller than one update of arm 'grpo': B * G = 4 * 4"),
    (["--updates", "20", "--budget-tokens", "100"],
     "--updates 20 conflicts with --budget-tokens = 100: each update of arm 'grpo' costs at least B * G = 4 * 4 = 16 "
     "tokens (completions of one token or more) and an update starts only while fewer than 100 tokens are spent, so "
     "the run makes at most 7 updates (at least 7 * 16 = 112 tokens spent after the last)"),
    (["--updates", "20000"], "--updates 20,000 conflicts with the plan's budget.generated_tokens = 250,000"),
])
def test_bad_overrides_are_refused_naming_the_flag_before_anything_is_written(plan, tmp_path, capsys, flags, fragment):
    out = tmp_path / "run"
    assert _train(plan, out, *flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe train: error: ") and fragment in err, err
    assert not out.exists()


def test_shorten_budget_without_overrides_is_the_plan_and_combines_with_the_plan_budget():
    run = parse_plan(PLAN).arm("grpo")
    assert shorten_budget(run, {"updates": None, "generated_tokens": None}) is run
    both = shorten_budget(run, {"updates": 3, "generated_tokens": 1000, "flops": 2e9})
    assert both.budget.given() == {"generated_tokens": 1000, "flops": 2e9, "updates": 3}
    assert both.budget_override == {"flags": {"--updates": 3, "--budget-tokens": 1000, "--budget-flops": 2e9},
                                    "plan_budget": {"generated_tokens": 250_000}}
    with pytest.raises(PlanError, match="unknown budget kind"):
        shorten_budget(run, {"tokens": 5})
    with pytest.raises(PlanError, match="--updates must be a whole number > 0"):
        shorten_budget(run, {"updates": 1.5})


def test_a_token_override_below_one_update_names_the_flag_and_keeps_the_data(plan, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(plan, out, "--budget-tokens", "20") == 2  # passes the static 16-token minimum, not one update
    err = capsys.readouterr().err
    assert "--budget-tokens = 20 but one update of arm 'grpo' cost" in err and "raise --budget-tokens to" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "budget_smaller_than_one_update" and summary["updates"] == 1
    assert summary["budget_override"]["flags"] == {"--budget-tokens": 20}


@pytest.mark.parametrize("text, tokens", [("1.5k", 1500), ("2e3", 2000), ("100_000", 100_000)])
def test_a_token_budget_argument_may_be_written_as_the_command_line_writes_it(text, tokens):
    run = parse_plan(PLAN).arm("grpo")
    short = shorten_budget(run, {"generated_tokens": text}, python=True)  # gradprobe.train(budget_tokens="1.5k")
    assert short.budget.given() == {"generated_tokens": tokens}
    assert short.budget_override["flags"] == {"--budget-tokens": tokens}
    with pytest.raises(PlanError, match=r"^budget_tokens: expected a whole number of tokens: .*; got '1\.5k5'$"):
        shorten_budget(run, {"generated_tokens": "1.5k5"}, python=True)
    with pytest.raises(PlanError, match=r"^budget_tokens: '0\.5' is less than one token"):
        shorten_budget(run, {"generated_tokens": "0.5"}, python=True)
    with pytest.raises(PlanError, match="more than the plan's budget.generated_tokens = 250,000"):
        shorten_budget(run, {"generated_tokens": "1M"}, python=True)
