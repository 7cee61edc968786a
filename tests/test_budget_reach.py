"""Budgets that combine (the run stops at the first one spent).

1. A token budget that the updates budget never lets a run spend: ``[budget] updates = 10`` beside ``generated_tokens =
   250_000`` loaded silently though 10 updates of the tiny plan's grpo arm (B * G * max_new_tokens = 2 * 4 * 40 = 320
   tokens each at most) spend at most 3,200 tokens, so every run stopped on updates and the arms were not matched on
   tokens as the plan says; ``--budget-tokens 100000 --updates 9`` (``budget_tokens=``, ``updates=``) likewise.
2. The alternatives a budget smaller than update 1 was offered ("or budget the run by --updates ... instead") were
   offered where no flag could replace it (the plan's own budget of that kind too small too: it stays whatever flag is
   added) and did not say what they replace; they now end "instead of --budget-tokens".
"""

from __future__ import annotations

import json
import re

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.rewards import get_reward
from gradprobe.training.budget import (ROLLOUT_ONLY_REWARDS, OutOfReachWarning, most_tokens_per_update,
                                       too_small_message)
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_training import tiny_plan

#: the tiny plan's grpo arm: prompts_per_update 2, group 4, max_new_tokens 40
_PER = "B * G * max_new_tokens = 2 * 4 * 40 = 320 tokens"
_FEWEST = ("the fewest with which the token budget can be spent at all, and then only by completions of max_new_tokens "
           "tokens each; shorter completions need more")
_LEAST = "update 1's cost: the least that buys one update; a useful run needs many updates' cost"


def _plan_refusal(**kwargs) -> str:
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(**kwargs))
    return str(e.value)


def test_a_plan_token_budget_out_of_reach_of_its_updates_is_refused_naming_both_and_the_fix():
    assert _plan_refusal(budget={"generated_tokens": 250_000, "updates": 10}) == (
        "budget.generated_tokens = 250,000 is out of reach of budget.updates = 10: one update of arm 'grpo' (reward "
        f"'outcome': rollout tokens only) generates at most {_PER} (train.prompts_per_update * train.group * "
        "sampling.max_new_tokens), so 10 updates generate at most 3,200 < 250,000 tokens: every run of the arm stops "
        "on updates with the token budget unspent, not matched on generated tokens as the plan says; raise [budget] "
        f"updates to at least 782 (ceil(250,000 / 320): {_FEWEST}) or drop [budget] updates or [budget] "
        "generated_tokens")


def test_the_bound_is_exact_and_following_the_fix_loads():
    # 10 updates of at most 320 tokens can spend 3,200 (then both budgets are spent after update 10): a cap, accepted
    assert parse_plan(tiny_plan(budget={"generated_tokens": 3_200, "updates": 10})).budget.updates == 10
    assert _plan_refusal(budget={"generated_tokens": 3_201, "updates": 10}).startswith(
        "budget.generated_tokens = 3,201 is out of reach of budget.updates = 10: ")
    assert "so 10 updates generate at most 3,200 < 3,201 tokens: " in _plan_refusal(
        budget={"generated_tokens": 3_201, "updates": 10})
    assert f"raise [budget] updates to at least 11 (ceil(3,201 / 320): {_FEWEST})" in _plan_refusal(
        budget={"generated_tokens": 3_201, "updates": 10})
    assert parse_plan(tiny_plan(budget={"generated_tokens": 250_000, "updates": 782})).budget.updates == 782
    assert _plan_refusal(budget={"generated_tokens": 250_000, "updates": 781}).startswith(
        "budget.generated_tokens = 250,000 is out of reach of budget.updates = 781: ")


def test_the_arm_with_the_fewest_tokens_per_update_is_named_by_its_own_keys_and_unbounded_arms_are_not_checked():
    arms = {"big": {"reward": "outcome"},  # 2 * 4 * 40 = 320 tokens per update at most
            "grpo": {"reward": "outcome", "group": 2},  # 2 * 2 * 40 = 160: the one the updates must cover
            "mc": {"reward": "mc_value"},  # continuations: no bound, not checked
            "half": {"reward": "outcome", "selection": "half"}}  # candidate rollouts: no bound, not checked
    message = _plan_refusal(arms=arms, budget={"generated_tokens": 2_000, "updates": 10})
    assert message == (
        "budget.generated_tokens = 2,000 is out of reach of budget.updates = 10: one update of arm 'grpo' (reward "
        "'outcome': rollout tokens only) generates at most B * G * max_new_tokens = 2 * 2 * 40 = 160 tokens "
        "(train.prompts_per_update * arms.grpo.group * sampling.max_new_tokens), so 10 updates generate at most "
        "1,600 < 2,000 tokens: every run of the arm stops on updates with the token budget unspent, not matched on "
        "generated tokens as the plan says; raise [budget] updates to at least 13 (ceil(2,000 / 160): "
        f"{_FEWEST}) or drop [budget] updates or [budget] generated_tokens")
    unbounded = {k: v for k, v in arms.items() if k in ("mc", "half")}
    plan = parse_plan(tiny_plan(arms=unbounded, budget={"generated_tokens": 2_000, "updates": 10}))
    assert sorted(plan.arms) == ["half", "mc"]


def test_the_rollout_only_rewards_are_registered_rewards_that_generate_nothing_themselves():
    assert most_tokens_per_update("outcome", None, 2, 4, 40) == 320
    assert most_tokens_per_update("outcome", {"rule": "half"}, 2, 4, 40) is None
    assert most_tokens_per_update("mc_value", None, 2, 4, 40) is None
    assert most_tokens_per_update("hybrid_0.5", None, 2, 4, 40) is None
    # each is defined where no reward samples (the MC rewards are gradprobe.rewards.dense's)
    modules = {name: get_reward(name).__module__ for name in sorted(ROLLOUT_ONLY_REWARDS)}
    assert set(modules.values()) <= {"gradprobe.rewards.outcome", "gradprobe.rewards.counterfactual",
                                     "gradprobe.rewards.majority", "gradprobe.rewards.process"}, modules


def _shortened(overrides: dict, python: bool = False):
    run = parse_plan(tiny_plan(budget={"generated_tokens": 250_000})).arm("grpo")
    return shorten_budget(run, overrides, python=python)


def test_budget_tokens_out_of_reach_of_updates_is_refused_naming_the_flags_or_the_arguments():
    with pytest.raises(PlanError) as e:
        _shortened({"generated_tokens": 100_000, "updates": 9})
    assert str(e.value) == (
        "--budget-tokens 100,000 is out of reach of --updates 9: one update of arm 'grpo' (reward 'outcome': rollout "
        f"tokens only) generates at most {_PER}, so 9 updates generate at most 2,880 < 100,000 tokens: the run always "
        f"stops on updates with the token budget unspent; give --updates at least 313 (ceil(100,000 / 320): "
        f"{_FEWEST}) or only one of the two")
    with pytest.raises(PlanError) as e:
        _shortened({"generated_tokens": 100_000, "updates": 9}, python=True)
    assert str(e.value).startswith("budget_tokens=100,000 is out of reach of updates=9: one update of arm 'grpo' ")
    assert str(e.value).endswith(f"give updates= at least 313 (ceil(100,000 / 320): {_FEWEST}) or only one of the two")
    # the bound itself is accepted, and --updates alone beside the plan's token budget is the shortening it asks for
    assert _shortened({"generated_tokens": 2_880, "updates": 9}).budget.given() == {"generated_tokens": 2_880,
                                                                                     "updates": 9}
    assert _shortened({"updates": 1}).budget.given() == {"generated_tokens": 250_000, "updates": 1}


def test_gradprobe_train_and_train_refuse_it_before_anything_is_written(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(budget={"generated_tokens": 250_000}))
    out = tmp_path / "run"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                 "--budget-tokens", "5k", "--updates", "3"]) == 2
    assert capsys.readouterr().err == (
        "gradprobe train: error: --budget-tokens 5,000 is out of reach of --updates 3: one update of arm 'grpo' "
        f"(reward 'outcome': rollout tokens only) generates at most {_PER}, so 3 updates generate at most 960 < 5,000 "
        f"tokens: the run always stops on updates with the token budget unspent; give --updates at least 16 "
        f"(ceil(5,000 / 320): {_FEWEST}) or only one of the two\n")
    with pytest.raises(PlanError, match=r"^budget_tokens=5,000 is out of reach of updates=1: .* so 1 update generates "
                                        r"at most 320 < 5,000 tokens: .*; give updates= at least 16 "):
        gradprobe.train(plan, out, arm="grpo", updates=1, budget_tokens=5_000)
    assert not out.exists()


def _too_small(plan_budget: dict, overrides: dict, over: dict, python: bool = False) -> str:
    run = shorten_budget(parse_plan(tiny_plan(budget=plan_budget)).arm("grpo"), overrides)
    return too_small_message(run, over, "o", python=python)


def test_no_alternative_is_offered_where_the_plans_own_budget_of_that_kind_is_too_small_too():
    # the plan's 100 tokens stay whatever flag is added (budgets combine); --updates, which the plan sets, was offered
    message = _too_small({"generated_tokens": 100, "updates": 10}, {"generated_tokens": 20},
                         {"generated_tokens": (20, 617)})
    assert message == (
        "--budget-tokens = 20 but one update of arm 'grpo' cost 617: the budget is smaller than one update (the run "
        "stopped after update 1, data kept in o); to train, rerun with a new --out (or after deleting o: a rerun into "
        "it with another budget is refused) and leave out --budget-tokens and raise budget.generated_tokens in the "
        f"plan (its 100 is smaller than one update too) to at least 617 tokens ({_LEAST})")
    # a plan budget of exactly update 1's cost is spent by update 1 too: still no alternative
    assert _too_small({"generated_tokens": 617}, {"generated_tokens": 20}, {"generated_tokens": (20, 617)}).endswith(
        f"(its 617 is smaller than one update too) to at least 617 tokens ({_LEAST})")


def test_no_alternative_is_offered_beside_a_plan_budget_too_small():
    message = _too_small({"generated_tokens": 100, "flops": 6e10}, {"flops": 5e9},
                         {"generated_tokens": (100, 617), "flops": (5e9, 1e10)})
    assert message.endswith(
        "fix both budgets: raise budget.generated_tokens in the plan to at least 617 tokens "
        f"({_LEAST}) (a changed plan); raise --budget-flops to at least 10_000_000_000 FLOPs ({_LEAST}), at most the "
        "plan's budget.flops = 60,000,000,000, or leave it out to use the plan's budget")


def test_the_alternatives_say_what_they_replace_and_leave_out_the_kinds_given():
    message = _too_small({"generated_tokens": 250_000, "updates": 1_000}, {"generated_tokens": 20, "updates": 2},
                         {"generated_tokens": (20, 617)})
    assert message.endswith("or leave it out to use the plan's budget; or budget the run by --budget-seconds or "
                            "--budget-flops instead of --budget-tokens")
    both = _too_small({"generated_tokens": 250_000, "flops": 6e10}, {"generated_tokens": 20, "flops": 5e9},
                      {"generated_tokens": (20, 617), "flops": (5e9, 1e10)}, python=True)
    assert both.endswith("or leave it out to use the plan's budget; or budget the run by updates= or budget_seconds= "
                         "instead of budget_tokens= and budget_flops=")
    assert _plan_refusal(budget={"generated_tokens": 7}).endswith(
        "or budget the run by [budget] updates, [budget] device_seconds or [budget] flops instead of [budget] "
        "generated_tokens")


# ------------------------------------------------------------------ frozen plans: the reach check is for new plans

_OUT_OF_REACH = {"generated_tokens": 250_000, "updates": 10}
_WARNED = ("plan frozen/plan.toml: budget.generated_tokens = 250,000 is out of reach of budget.updates = 10: one "
           "update of arm 'grpo' (reward "
           f"'outcome': rollout tokens only) generates at most {_PER} (train.prompts_per_update * train.group * "
           "sampling.max_new_tokens), so 10 updates generate at most 3,200 < 250,000 tokens: the frozen plan's runs "
           "stop on updates with the token budget unspent (a new plan with this budget is refused)")


def test_a_frozen_plan_read_without_the_new_checks_loads_with_a_warning_and_a_new_one_is_refused():
    text = tiny_plan(budget=_OUT_OF_REACH)
    with pytest.warns(OutOfReachWarning) as caught:  # a UserWarning, named by the plan's file
        plan = parse_plan(text, path="frozen/plan.toml", check_schedule=False)
    assert [str(w.message) for w in caught] == [_WARNED]
    assert issubclass(OutOfReachWarning, UserWarning) and caught[0].filename == __file__  # the caller's line
    assert plan.budget.given() == _OUT_OF_REACH
    assert _plan_refusal(budget=_OUT_OF_REACH).startswith("budget.generated_tokens = 250,000 is out of reach of ")


def _old_study(tmp_path):
    """A finished study (study_helpers.make_study: runs.csv, study.json, no training) whose frozen plan sets a token
    budget out of reach of its updates (5 updates x 2 x 4 x 16 tokens = 640 < 1,000), as made before the check."""
    import hashlib

    from study_helpers import PLAN, make_study
    plan = PLAN.replace("[budget]\n", "[budget]\nupdates = 5\n", 1).replace("[eval]\n",
                                                                            "[sampling]\nmax_new_tokens = 16\n[eval]\n")
    study = make_study(tmp_path / "old", plan=plan)
    record = json.loads((study / "study.json").read_text())
    sha = hashlib.sha256((study / "plan.toml").read_bytes()).hexdigest()
    (study / "study.json").write_text(json.dumps({**record, "plan_sha256": sha}))
    return study


def test_an_old_study_of_such_a_plan_is_analysed_loaded_and_resumable_and_a_new_study_of_it_is_refused(tmp_path,
                                                                                                       capsys):
    study = _old_study(tmp_path)
    with pytest.warns(UserWarning, match=r"^plan \S+/plan\.toml: budget\.generated_tokens = 1,000 is out of reach of "
                                         r"budget\.updates = 5: "):
        assert main(["study", "--analyze-only", "--out", str(study), "--overwrite-analysis"]) == 0
    assert "gradprobe study: error" not in capsys.readouterr().err
    assert (study / "analysis.json").is_file()
    with pytest.warns(UserWarning, match=r"so 5 updates generate at most 640 < 1,000 tokens: the frozen plan's "):
        assert sorted(gradprobe.load_study(study).plan.arms) == ["grpo", "grpo_2xlr", "mc_value"]
    # resuming (`gradprobe study PLAN --out STUDY`, gradprobe.run_study) loads its plan by load_study_plan
    from gradprobe.study.freeze import load_study_plan
    copy = tmp_path / "plan.toml"
    copy.write_bytes((study / "plan.toml").read_bytes())
    with pytest.warns(UserWarning, match=rf"^plan {re.escape(str(copy))}: budget\.generated_tokens = 1,000 is out "
                                         r"of reach "):
        assert load_study_plan(copy, study).budget.updates == 5
    with pytest.raises(PlanError, match=r"^budget\.generated_tokens = 1,000 is out of reach of budget\.updates = 5: "):
        load_study_plan(copy, tmp_path / "new")  # a new study of it
    assert main(["study", str(copy), "--out", str(tmp_path / "new")]) == 2
    assert "out of reach of budget.updates = 5" in capsys.readouterr().err
    assert not (tmp_path / "new" / "study.json").exists()
    # a folder that only holds the plan as plan.toml (kept in its own output folder: no study.json) is no study yet
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "plan.toml").write_bytes(copy.read_bytes())
    with pytest.raises(PlanError, match=r"^budget\.generated_tokens = 1,000 is out of reach of budget\.updates = 5: "):
        load_study_plan(kept / "plan.toml", kept)
    assert main(["study", str(kept / "plan.toml"), "--out", str(kept)]) == 2
    assert "out of reach of budget.updates = 5" in capsys.readouterr().err
    assert sorted(p.name for p in kept.iterdir()) == ["plan.toml"]


def test_budget_tokens_alone_that_the_plans_updates_never_spend_is_refused_as_a_no_op():
    run = parse_plan(tiny_plan(budget={"updates": 10})).arm("grpo")
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"generated_tokens": 100_000})
    assert str(e.value) == (
        "--budget-tokens 100,000 is out of reach of the plan's budget.updates = 10: one update of arm 'grpo' (reward "
        f"'outcome': rollout tokens only) generates at most {_PER}, so 10 updates generate at most 3,200 < 100,000 "
        "tokens: the run always stops on updates with the token budget unspent; the flag is a no-op; give "
        "--budget-tokens at most 3_200 (below which it can bind) or leave it out")
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"generated_tokens": 100_000}, python=True)
    assert str(e.value).startswith("budget_tokens=100,000 is out of reach of the plan's budget.updates = 10: ")
    assert str(e.value).endswith("give budget_tokens= at most 3_200 (below which it can bind) or leave it out")
    assert shorten_budget(run, {"generated_tokens": 3_200}).budget.given() == {"generated_tokens": 3_200, "updates": 10}
    # a run folder resumed with the flags it was started with (before the check) is warned about, not refused
    with pytest.warns(OutOfReachWarning, match=r"^--budget-tokens 100,000 is out of reach of the plan's "):
        resumed = shorten_budget(run, {"generated_tokens": 100_000}, resumed_flags={"--budget-tokens": 100_000})
    assert resumed.budget.generated_tokens == 100_000


def test_both_flags_where_the_fewest_updates_exceed_the_plans_offer_a_smaller_token_flag_instead():
    run = parse_plan(tiny_plan(budget={"updates": 100})).arm("grpo")
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"generated_tokens": 100_000, "updates": 9})
    assert str(e.value) == (
        "--budget-tokens 100,000 is out of reach of --updates 9: one update of arm 'grpo' (reward 'outcome': rollout "
        f"tokens only) generates at most {_PER}, so 9 updates generate at most 2,880 < 100,000 tokens: the run always "
        "stops on updates with the token budget unspent; --updates at least 313 would exceed the plan's "
        "budget.updates = 100 (the flags only shorten a run); give --budget-tokens at most 2_880 (below which it can "
        "bind) or leave out --budget-tokens (alone it would be a no-op beside the plan's updates)")
    # each fix the message gives is accepted
    assert shorten_budget(run, {"generated_tokens": 2_880, "updates": 9}).budget.generated_tokens == 2_880
    assert shorten_budget(run, {"updates": 9}).budget.updates == 9
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"generated_tokens": 100_000, "updates": 9}, python=True)
    assert str(e.value).endswith("updates= at least 313 would exceed the plan's budget.updates = 100 (the flags only "
                                 "shorten a run); give budget_tokens= at most 2_880 (below which it can bind) or leave "
                                 "out budget_tokens (alone it would be a no-op beside the plan's updates)")
