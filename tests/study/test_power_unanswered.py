"""`gradprobe study --power` for a plan whose hypotheses name an arm the pilot did not run: the rows are the pilot's
own arms vs grpo, which it printed as if they were the plan's comparisons (a trial user's plan of grpo and a plug-in
arm `brev`, sized from data/study_tiny). Each unanswered hypothesis is now named with the arm the pilot lacks, and
the rows and the `needed:` line say they stand in for the plan's."""

from __future__ import annotations

from gradprobe.study.power import format_power, power_analysis
from gradprobe.training.plan import parse_plan

from study_helpers import ITEMS, PLAN, make_study

_HEAD = PLAN.replace("seeds = SEEDS", "seeds = [0, 1]").split("[arms.grpo]")[0]
_ARMS = '[arms.grpo]\nreward = "outcome"\n[arms.brev]\nreward = "outcome"\n'
_HYPOTHESIS = ('\n[[hypotheses]]\nname = "brev_vs_grpo"\nstatement = "brev differs"\ntest = "sign_flip"\n'
               'arms = ["brev", "grpo"]\nalternative = "two-sided"\n')
_POWER = '\n[power]\nmin_effect = 1.5\npilot = "pilot"\n'


def _analysis(tmp_path, text):
    make_study(tmp_path / "pilot")
    (tmp_path / "plan.toml").write_text(text)
    return power_analysis(parse_plan(text, path=str(tmp_path / "plan.toml")), workers=2, heldout_sizes=[ITEMS])


def test_a_hypothesis_on_an_arm_the_pilot_did_not_run_is_named_and_the_rows_stand_in(tmp_path):
    res = _analysis(tmp_path, _HEAD + _ARMS + _HYPOTHESIS + _POWER)
    assert {(r["treatment"], r["control"]) for r in res["rows"]} == {("mc_value", "grpo"), ("grpo_2xlr", "grpo")}
    assert res["stand_in"] is True
    assert res["notes"][:2] == [
        "hypothesis brev_vs_grpo (brev vs grpo) is not sized: the pilot ran no brev (its arms: grpo, mc_value, "
        "grpo_2xlr)",
        "the rows are the pilot's own arms vs grpo, not the plan's comparisons: their seed-to-seed spread stands in "
        "for the plan's only if its arms vary as much; a pilot that runs the plan's arms sizes them"]
    needed = next(line for line in format_power(res).splitlines() if line.startswith("needed:"))
    assert "; the pilot's arms standing in for the plan's: see the notes)" in needed


def test_a_plan_with_one_answerable_hypothesis_sizes_it_and_names_the_other(tmp_path):
    answerable = ('\n[[hypotheses]]\nname = "dense"\nstatement = "mc_value differs"\ntest = "sign_flip"\n'
                  'arms = ["mc_value", "grpo"]\n')
    arms = _ARMS + '[arms.mc_value]\nreward = "mc_value"\n'
    res = _analysis(tmp_path, _HEAD + arms + _HYPOTHESIS + answerable + _POWER)
    assert {(r["treatment"], r["control"]) for r in res["rows"]} == {("mc_value", "grpo")}
    assert res["stand_in"] is False and len([n for n in res["notes"] if "stands in" in n]) == 0
    assert res["notes"][0].startswith("hypothesis brev_vs_grpo (brev vs grpo) is not sized: the pilot ran no brev")
    assert "standing in" not in format_power(res)
