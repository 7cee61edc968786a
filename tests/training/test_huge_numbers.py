"""Huge numbers and long text given to a run or a plan (a breaker): ``gradprobe.train(budget_tokens=10**400)`` raised a
bare OverflowError and ``updates=10**5000`` Python's "Exceeds the limit (4300 digits) for integer string conversion";
a plan holding a 5000-digit integer gave that same raw message, and a 5000-character string was echoed whole; a
``train()`` call with several misspelt keywords named only the first. Each error now names the keyword or the key,
the accepted range or choices, and the value shortened as the command line shortens a token count (its first 40
characters and its length)."""

from __future__ import annotations

import pytest

import gradprobe
from gradprobe.training.plan import PlanError, load_plan, parse_plan, shorten_budget

from helpers_training import tiny_plan

PLAN = tiny_plan(budget={"generated_tokens": 250_000})
TEN_400 = "1" + "0" * 39 + "... (401 characters)"  # 10**400 as echoed: its first 40 digits and its length
TEN_5000 = "1" + "0" * 39 + "... (5,001 characters)"
NINES = "9" * 5000  # a 5000-digit integer as a plan writes it
NINES_SHOWN = "9" * 40 + "... (5,000 characters)"
LONG = "x" * 5000
LONG_SHOWN = "'" + "x" * 40 + "'... (5,000 characters)"


@pytest.fixture()
def plan(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    return path


# --- 1: gradprobe.train's budget arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("keyword, value, message", [
    ("budget_tokens", 10**400, f"budget_tokens= must be a whole number in [1, 2**63 - 1], got {TEN_400}; give "
                               f"budget_tokens within that range or leave it out to use the plan's budget"),
    ("updates", 10**5000, f"updates= must be a whole number in [1, 2**63 - 1], got {TEN_5000}; give updates within "
                          f"that range"),
    ("updates", 2**63, "updates= must be a whole number in [1, 2**63 - 1], got 9223372036854775808; give updates "
                       "within that range"),
    ("budget_flops", 10**400, f"budget_flops= must be a finite number > 0 and at most 1.8e+308 (the largest float), "
                              f"got {TEN_400}; give budget_flops within that range"),
    ("budget_seconds", -10**5000, f"budget_seconds= must be a finite number > 0 (a budget the run can spend), got "
                                  f"-{TEN_5000[:39]}... (5,002 characters)"),
], ids=["tokens-10e400", "updates-10e5000", "updates-2e63", "flops-10e400", "seconds-minus-10e5000"])
def test_a_huge_budget_argument_names_the_keyword_the_range_and_the_value_shortened(plan, tmp_path, keyword, value,
                                                                                       message):
    out = tmp_path / "run"
    with pytest.raises(PlanError) as err:  # was OverflowError / ValueError (Python's digit limit)
        gradprobe.train(plan, out, arm="grpo", **{keyword: value})
    assert str(err.value) == message
    assert not out.exists()  # refused before anything is written


@pytest.mark.parametrize("value, shown", [(10**5000, TEN_5000), ("7" * 5000, f"'{'7' * 40}'... (5,000 characters)")],
                         ids=["int-10e5000", "str-5000"])
def test_a_huge_seed_of_train_names_the_range_and_the_value_shortened(plan, tmp_path, value, shown):
    with pytest.raises(ValueError) as err:  # 10**5000 was Python's digit-limit message, "7"*5000 echoed whole
        gradprobe.train(plan, tmp_path / "run", arm="grpo", seed=value)
    assert str(err.value) == (f"seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got "
                              f"{shown}")


def test_a_command_line_budget_above_an_int64_names_the_flag():
    run = parse_plan(tiny_plan(budget={"flops": 1e18})).arm("grpo")
    with pytest.raises(PlanError) as err:  # was accepted and written to config.json as a 20-digit budget
        shorten_budget(run, {"updates": 10**19})
    assert str(err.value) == ("--updates must be a whole number in [1, 2**63 - 1], got 10000000000000000000; give "
                              "--updates within that range")


# --- 2: a plan file -------------------------------------------------------------------------------------------------

def _fix(key: str) -> str:
    return (f"more than Python reads as a number (sys.get_int_max_str_digits() = 4300), and far outside the range of "
            f"any plan key; write the number {key} needs (seeds and budgets of updates or generated tokens are at most "
            f"2**63 - 1, 19 digits; a FLOP budget may be written as a float, e.g. 1e18)")


def test_a_5000_digit_integer_in_a_plan_names_its_key_line_and_the_fix(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.replace("[budget]\n", f"[budget]\nupdates = {NINES}\n"))
    line = PLAN.splitlines().index("[budget]") + 2
    with pytest.raises(PlanError) as err:  # was "Exceeds the limit (4300 digits) for integer string conversion..."
        load_plan(path)
    assert str(err.value) == (f"plan {path}: budget.updates (line {line}) holds an integer of 5,000 digits, "
                              f"{NINES_SHOWN}: {_fix('budget.updates')}")


def test_the_key_is_found_in_a_list_past_digits_inside_a_string():
    text = PLAN.replace("seeds = [0]", f'description = "{NINES}"\nseeds = [0, -{NINES}]')
    with pytest.raises(PlanError) as err:
        parse_plan(text, path="p.toml")
    assert str(err.value) == (f"plan p.toml: seeds[1] (line 2) holds an integer of 5,000 digits, -{NINES_SHOWN[:39]}"
                              f"... (5,001 characters): {_fix('seeds[1]')}")


def test_a_budget_above_an_int64_in_a_plan_names_the_key_and_the_maximum():
    with pytest.raises(PlanError) as err:  # was accepted
        parse_plan(tiny_plan(budget={"updates": 2**64}))
    assert str(err.value) == ("budget.updates = 18446744073709551616 is above 2**63 - 1, the most a run records (an "
                              "int64); give [budget] updates at most 9223372036854775807")


@pytest.mark.parametrize("old, new, message", [
    ('name = "tiny"\n', f'name = "tiny"\ndtype = "{LONG}"\n',
     f"[model] dtype = {LONG_SHOWN} is not one of float32, float64, bfloat16, float16; float32 is the default "
     f"(bfloat16 on a GPU)"),
    ("pool = 8", f'pool = "{NINES}"',
     f"task.pool must be an integer, got '{'9' * 40}'... (5,000 characters)"),
    ("[task]\n", f"[task]\n{LONG} = 1\n",
     f"unknown key 'task.{'x' * 35}'... (5,005 characters); valid keys in [task]: name, pool, config"),
    ("[budget]", f"[eval]\nsampled_at = '{LONG}'\n[budget]",
     f"eval.sampled_at {LONG_SHOWN} is not one of all, ends"),
], ids=["dtype", "quoted-pool", "unknown-key", "sampled_at"])
def test_a_5000_character_string_in_a_plan_is_echoed_shortened_with_the_key_and_the_fix(old, new, message):
    assert old in PLAN
    with pytest.raises(PlanError) as err:  # was the whole 5000 characters
        parse_plan(PLAN.replace(old, new))
    assert str(err.value) == message


def test_an_unknown_5000_character_reward_is_shortened_and_the_registered_ones_listed():
    with pytest.raises(PlanError) as err:
        parse_plan(PLAN.replace('reward = "outcome"', f'reward = "{LONG}"'))
    message = str(err.value)
    assert message.startswith(f"arms.grpo.reward: unknown reward {LONG_SHOWN}; valid: ")
    # the registered rewards follow (plug-ins an earlier test registered among them), not the 5000 characters
    assert "outcome, " in message and "x" * 41 not in message and message.count(LONG_SHOWN) == 1


# --- 3: misspelt train() keywords ------------------------------------------------------------------------------------

_ACCEPTED = ("run, out, arm, seed, device, updates, budget_tokens, budget_flops, budget_seconds, progress, "
             "report_to")


def test_every_misspelt_keyword_of_train_is_named_with_its_closest_accepted_one(tmp_path):
    with pytest.raises(TypeError) as err:  # was: only 'updatez'
        gradprobe.train(tmp_path / "plan.toml", tmp_path / "run", arm="grpo", updatez=1, budget_tokns=3, xyz=2)
    assert str(err.value) == ("train() got 3 unexpected keyword arguments: 'updatez' (did you mean updates=?), "
                              "'budget_tokns' (did you mean budget_tokens=?), 'xyz' (no accepted keyword is close) "
                              f"(it accepts: {_ACCEPTED})")
    assert list(tmp_path.iterdir()) == []


def test_a_long_unknown_keyword_is_shortened(tmp_path):
    with pytest.raises(TypeError) as err:
        gradprobe.train(tmp_path / "plan.toml", tmp_path / "run", arm="grpo", **{"q" * 5000: 1, "updats": 2})
    assert str(err.value) == (f"train() got 2 unexpected keyword arguments: '{'q' * 40}'... (5,000 characters) (no "
                              f"accepted keyword is close), 'updats' (did you mean updates=?) (it accepts: "
                              f"{_ACCEPTED})")


def test_a_5000_character_device_is_echoed_shortened():
    """A breaker: ``load_policy(..., device=<5,000 characters>)`` quoted the whole value."""
    from gradprobe.models import load_policy

    with pytest.raises(ValueError) as e:
        load_policy("tiny", device="x" * 5000)
    assert str(e.value) == (f"device (--device) '{'x' * 40}'... (5,000 characters) is not a torch device; use cpu, "
                            "cuda or cuda:N (or mps on Apple silicon)")


@pytest.mark.parametrize("key, text", [("flops", "1e400"), ("flops", "inf"), ("device_seconds", "1e400")])
def test_an_infinite_plan_budget_is_refused_when_the_plan_is_read(key, text):
    """A breaker: ``[budget] flops = 1e400`` (TOML reads it as infinity) passed the plan check and the preflight, then
    every run of the study failed with JSON's "Out of range float values are not JSON compliant: inf"."""
    plan = tiny_plan(budget={"updates": 1}).replace("updates = 1", f"updates = 1\n{key} = {text}", 1)
    assert f"{key} = {text}" in plan
    with pytest.raises(PlanError) as e:
        parse_plan(plan)
    assert str(e.value) == (f"budget.{key} must be a finite number, got inf (TOML reads inf, and a float beyond "
                            "1.8e308 such as 1e400, as infinity); give a finite value")


def test_numpy_budget_arguments_are_read_and_a_decimal_is_named_by_its_type(plan):
    """A breaker: ``budget_tokens=numpy.int64(...)`` was refused as "must be a whole number > 0, got 9223...", and a
    Decimal the same way: both whole and positive; only the type was wrong (and numpy's is a number)."""
    from decimal import Decimal

    import numpy as np

    run = load_plan(plan).arm("grpo")
    # 7 updates: the fewest that can spend 2,000 tokens (at most 2 * 4 * 40 = 320 each; 1 is refused as out of reach)
    short = shorten_budget(run, {"updates": np.int64(7), "generated_tokens": np.int64(2000)}, python=True)
    assert (short.budget.updates, short.budget.generated_tokens) == (7, 2000)
    assert type(short.budget.updates) is int and type(short.budget.generated_tokens) is int
    with pytest.raises(PlanError) as e:
        shorten_budget(run, {"updates": Decimal("1e5000")}, python=True)
    assert str(e.value) == ("updates= must be a whole number > 0 (an int or float), got Decimal('1E+5000') of type "
                            "Decimal; pass int(...) or float(...) of it")


def test_an_arm_name_too_long_for_a_folder_is_refused_when_the_plan_is_read():
    """A breaker: a 5000-character arm name was accepted; it names the folder runs/ARM/seedN, which no common file
    system takes (255 bytes)."""
    name = "a" * 5000
    with pytest.raises(PlanError) as e:
        parse_plan(tiny_plan(arm=name))
    assert str(e.value) == (f"arm name '{'a' * 40}'... (5,000 characters) is 5,000 bytes long (UTF-8); an arm names "
                            "its folder (runs/ARM/seedN), and gradprobe takes at most 200 bytes (a folder name is at "
                            "most 255 on common file systems): give the arm a shorter name")
    assert parse_plan(tiny_plan(arm="a" * 200)).arms  # at the limit: read


def test_a_pool_too_large_to_draw_is_refused_when_the_plan_is_read():
    """A breaker: ``[task] pool = 1e30`` (as an integer) passed the plan check and the study preflight hung drawing
    the pool's prompts."""
    plan = tiny_plan(task={"name": "chain_sum", "pool": 10**30})
    with pytest.raises(PlanError) as e:
        parse_plan(plan)
    assert str(e.value) == ("task.pool = 1000000000000000000000000000000 is more than 1,000,000 prompts: every prompt "
                            "of the pool is drawn before training starts (a generated task generates each), so a pool "
                            "this large would not start; give [task] pool at most 1,000,000 (a few thousand is the "
                            "usual size)")
