"""``--updates N`` beside a token budget T is refused only when no run can reach update N: a run starts an update
while fewer than T tokens are spent (:func:`gradprobe.training.state.exhausted`) and each update costs at least
B x G tokens (completions of one token), so at most ceil(T / (B x G)) updates are made. It used to refuse
N x B x G > T and advise floor(T / (B x G)): ``--budget-tokens 200 --updates 2`` (B x G = 128) was refused though
update 2 starts at 128 < 200 spent, and ``--updates 3`` was told "at most 1"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.ledger import Ledger
from gradprobe.training.budget import reachable_updates
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget
from gradprobe.training.specs import BudgetSpec
from gradprobe.training.state import exhausted

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

REPO = Path(__file__).resolve().parents[2]
M = 128  # B x G of plans/tiny.toml's grpo arm: 16 x 8
_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _stops(budget: BudgetSpec, cost: int) -> tuple[int, str]:
    """Updates made and the budget spent under the run loop's own rule (gradprobe.training.run._train: an update
    starts while ``exhausted`` is None), each update charging ``cost`` rollout tokens."""
    ledger, updates = Ledger(), 0
    while (reason := exhausted(budget, ledger, updates)) is None:
        ledger.add_generated("rollout", cost)
        updates += 1
    return updates, reason


def _tiny_run():
    return parse_plan((REPO / "plans" / "tiny.toml").read_text()).arm("grpo")


@pytest.mark.parametrize(("tokens", "most"), [(3 * M - 1, 3), (3 * M, 3), (3 * M + 1, 4),
                                              (M, 1), (M + 1, 2), (2 * M - 1, 2), (2 * M, 2), (2 * M + 1, 3)])
def test_the_most_updates_allowed_is_what_the_stopping_rule_reaches(tokens, most):
    assert reachable_updates(tokens, M) == most
    assert _stops(BudgetSpec(generated_tokens=tokens), M) == (most, "generated_tokens")  # cheapest updates
    assert _stops(BudgetSpec(generated_tokens=tokens), M + 7)[0] <= most  # longer completions: no more
    # N = most is accepted and reached; N = most + 1 is refused, and indeed stops on tokens before update N
    run = _tiny_run()
    assert shorten_budget(run, {"generated_tokens": tokens, "updates": most}).budget.given() == {
        "generated_tokens": tokens, "updates": most}
    assert _stops(BudgetSpec(generated_tokens=tokens, updates=most), M)[0] == most
    assert _stops(BudgetSpec(generated_tokens=tokens, updates=most + 1), M) == (most, "generated_tokens")
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"generated_tokens": tokens, "updates": most + 1})
    when = ("update 1 always starts" if most == 1 else
            f"reached only if {'update 1 spends' if most == 2 else f'the first {most - 1} updates spend'} fewer than "
            f"{tokens:,} tokens: completions of about one token")
    assert f"stops on tokens before update {most + 1}; give --updates at most {most} ({when})" in str(e.value)


def test_the_advice_of_the_tiny_plan_with_200_tokens(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["train", "--plan", str(REPO / "plans" / "tiny.toml"), "--arm", "grpo", "--out", str(out),
                 "--budget-tokens", "200", "--updates", "3", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "gradprobe train: error: --updates 3 conflicts with --budget-tokens = 200: each update of arm 'grpo' costs at "
        "least B * G = 16 * 8 = 128 tokens (completions of one token or more) and an update starts only while fewer "
        "than 200 tokens are spent, so the run makes at most 2 updates (at least 2 * 128 = 256 tokens spent after "
        "the last) and always stops on tokens before update 3; give --updates at most 2 (reached only if update 1 "
        "spends fewer than 200 tokens: completions of about one token) or only one of the two\n")
    assert not out.exists()


def test_the_plan_budget_and_a_huge_budget_are_counted_exactly():
    run = _tiny_run()  # [budget] generated_tokens = 250,000: 1953 * 128 = 249,984 < 250,000, so update 1954 starts
    with pytest.raises(PlanError, match=r"the plan's budget.generated_tokens = 250,000: .* at most 1,954 updates \(at "
                                        r"least 1,954 \* 128 = 250,112 tokens spent after the last\)"):
        shorten_budget(run, {"updates": 1955})
    assert shorten_budget(run, {"updates": 1954}).budget.updates == 1954
    assert reachable_updates(2**63 - 1, 3) == 3074457345618258603  # exact: no float rounding
    assert reachable_updates(1, 1) == 1 and reachable_updates(128, 128) == 1 and reachable_updates(129, 128) == 2


def test_the_tiny_tier_makes_the_update_the_old_check_refused(tmp_path, capsys):
    # max_new_tokens = 1: every update costs exactly B x G = 4 x 4 = 16 tokens; 17 tokens buy 2 updates
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(task={"pool": 64}, sampling={"max_new_tokens": 1},
                              train={"prompts_per_update": 4, "lr": None, "micro_batch_size": 16},
                              budget={"generated_tokens": 250_000}, eval={"sampled_at": "ends"}))
    out = tmp_path / "run"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                 "--budget-tokens", "17", "--updates", "2"]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == 2 and summary["budget_spent"] == "generated_tokens"
    assert [x["update_charged_tokens"] for x in metric_lines(out) if not x.get("eval")] == [16, 16]
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(tmp_path / "r3"), "--no-progress",
                 "--budget-tokens", "17", "--updates", "3"]) == 2
    assert "so the run makes at most 2 updates" in capsys.readouterr().err and not (tmp_path / "r3").exists()
