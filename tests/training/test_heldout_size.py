"""A plan's [heldout] prompts is refused above MAX_HELDOUT_PROMPTS (20,000) before anything is generated: a typo of
100000000 held a trial user's `gradprobe train` for minutes, growing to 5.4 GB, printing nothing (100,000 printed
nothing for 150 s)."""

import pytest

from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.plan_checks import MAX_HELDOUT_PROMPTS

from helpers_training import tiny_plan


@pytest.mark.parametrize("prompts", [MAX_HELDOUT_PROMPTS + 1, 100_000_000])
def test_a_held_out_set_too_large_is_refused_naming_the_field_and_the_limit(prompts):
    """Refused by parse_plan, which generates nothing (the set is made when a run starts)."""
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(heldout={"prompts": prompts}))
    assert str(e.value) == (f"heldout.prompts = {prompts:,} is above 20,000: the held-out set is generated and held "
                            "in memory before the first update, and every eval generates [eval] samples completions "
                            "for each of its prompts; the shipped studies use 1,000-4,000 (a typo? give at most "
                            "20,000)")


def test_the_limit_itself_is_accepted():
    assert parse_plan(tiny_plan(heldout={"prompts": MAX_HELDOUT_PROMPTS})).heldout.prompts == MAX_HELDOUT_PROMPTS
