"""probe.json reading, a tester's third round: what ``gradprobe.load_probe`` and ``forecast_section(raw, source=)``
read silently, crashed on or refused with a message that contradicts itself.

1. ``config.budget_tokens`` as text ("2500000"), ``true``, "inf" or a list passed ``load_probe`` and moved the
   forecast (mc_value's gain -4.625 -> -4.304 for "2500000", -0.023 for true); "inf" gave a bare ValueError ("updates n
   must be finite"), a list a TypeError. ``config.budget_seconds`` "abc" passed too.
2. Two reward entries of one name passed and moved the forecast (its reference became the former mc_value entry).
3. ``tokens_per_update`` "4477" or true: the section said ``is "4477", but ... give 4477`` (self-contradictory)
   where ``load_probe`` says it must be a finite number.
4. ``forecast_section(raw, source=file)``: a ``rewards`` object was read (``load_probe``: "no 'rewards' list"), a
   missing ``per_group`` / ``tokens_per_update`` was refused without the file or its fix, a top-level ``[]`` gave
   AttributeError.

(5. An edited ``snr`` is not checked: the probe's snr is |inner_product| / the sd of a bootstrap whose replicates the
file does not hold, so no recorded field gives it exactly; the module docstring of
:mod:`gradprobe.forecast.probe_input` says so. No test: nothing changed.)

Fixture: the shipped single-batch probe ``data/study_tiny/probe/probe.json`` (rewards outcome, mc_value,
mc_advantage, hybrid_0.5; ``config.budget_tokens`` 250000), copied to a probe folder of its own (its fix is
`gradprobe probe --out`), and for a multi-batch file two shipped probes pooled by the probe's ``combine_batches``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gradprobe
from gradprobe.forecast import forecast_section
from gradprobe.forecast.probe_input import PROBE_FIX, budget_of, check_entries
from gradprobe.layout import rerun_advice, restore_advice

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "study_tiny" / "probe" / "probe.json"
BUDGET_RULE = "it must be a finite number >= 1 of generated tokens (the probe's --budget-tokens)"


def _raw() -> dict:
    return json.loads(SHIPPED.read_text())


def _saved(tmp_path: Path, raw) -> Path:
    """``raw`` written as ``tmp_path/p/probe.json`` (a probe's own folder)."""
    folder = tmp_path / "p"
    folder.mkdir(exist_ok=True)
    (folder / "probe.json").write_text(json.dumps(raw))
    return folder / "probe.json"


def _load_refusal(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(path.parent)
    assert "\n" not in str(info.value)
    return str(info.value)


def _section_refusal(path: Path, source=True) -> str:
    with pytest.raises(ValueError) as info:
        forecast_section(json.loads(path.read_text()), source=path if source else None)
    assert "\n" not in str(info.value)
    return str(info.value)


# ----------------------------------------------------------------------------- 1. config.budget_tokens
@pytest.mark.parametrize("value, shown", [("2500000", '"2500000"'), (True, "true (a boolean is never read as 1 or 0)"),
                                          ("inf", '"inf"'), ([2500000], "[2500000]")],
                         ids=["text", "true", "inf", "list"])
def test_a_config_budget_that_is_no_number_is_refused_by_load_probe_and_the_forecast(tmp_path, value, shown):
    raw = _raw()
    raw["config"]["budget_tokens"] = value
    path = _saved(tmp_path, raw)
    expected = f"{path} field config.budget_tokens is {shown}: {BUDGET_RULE}; {rerun_advice(path.parent)}"
    assert _load_refusal(path) == expected  # was: loaded
    assert _section_refusal(path) == expected  # was: gains -4.304 ("2500000"), -0.023 (true), ValueError, TypeError
    assert _section_refusal(path, source=False) == (f"probe.json field config.budget_tokens is {shown}: "
                                                    f"{BUDGET_RULE}; {PROBE_FIX}")  # budget_of's own refusal


def test_a_config_budget_seconds_that_is_no_number_is_refused(tmp_path):
    raw = _raw()
    raw["config"]["budget_seconds"] = "abc"
    path = _saved(tmp_path, raw)
    assert _load_refusal(path) == (f"{path} field config.budget_seconds is \"abc\": it must be a finite number > 0 of "
                                   f"device-seconds (the probe's --budget-seconds); {rerun_advice(path.parent)}")


def test_budget_of_reads_a_number_and_refuses_text():
    assert budget_of(None, None, {"budget_tokens": 250000}) == ("tokens", 250000.0)
    assert budget_of(500000, None, {"budget_tokens": "x"}) == ("tokens", 500000.0)  # the asked budget wins
    with pytest.raises(ValueError) as info:
        budget_of(None, None, {"budget_tokens": "2500000"})  # was: ("tokens", 2500000.0)
    assert str(info.value) == f"probe.json field config.budget_tokens is \"2500000\": {BUDGET_RULE}; {PROBE_FIX}"
    with pytest.raises(ValueError) as info:
        budget_of(None, None, {"budget_tokens": "2500000"}, source=Path("/d/probe.json"))
    assert str(info.value) == (f"/d/probe.json field config.budget_tokens is \"2500000\": {BUDGET_RULE}; "
                               f"{rerun_advice(Path('/d'))}")


# ----------------------------------------------------------------------------- 2. two entries of one name
def test_two_entries_of_one_name_are_refused_naming_both_places(tmp_path):
    raw = _raw()
    raw["rewards"][1]["name"] = "outcome"
    path = _saved(tmp_path, raw)
    expected = (f"{path} field rewards[1].name is \"outcome\", as is rewards[0].name: each reward entry has its own "
                "name (the probe refuses a reward given twice), and the forecast would read one of the two by its "
                "name; the file was edited or damaged after the probe wrote it; " + restore_advice(path.parent))
    assert _load_refusal(path) == expected  # was: loaded
    assert _section_refusal(path) == expected  # was: 3 rows, the reference the former mc_value entry


def test_two_entries_of_one_name_in_a_batch_are_refused():
    rewards = [{"name": "outcome"}, {"name": "mc_value"}, {"name": "outcome"}]
    with pytest.raises(ValueError) as info:
        check_entries(rewards, "batches[1].", None)
    assert str(info.value) == ("probe.json field batches[1].rewards[2].name is \"outcome\", as is "
                               "batches[1].rewards[0].name: each reward entry has its own name (the probe refuses a "
                               "reward given twice), and the forecast would read one of the two by its name; the "
                               f"file was edited or damaged after the probe wrote it; restore the file, or {PROBE_FIX}")


# ----------------------------------------------------------------------------- 3. the number checks come first
@pytest.mark.parametrize("value, shown", [("4477", '"4477"'), (True, "true (a boolean is never read as 1 or 0)")],
                         ids=["text", "true"])
def test_a_tokens_per_update_that_is_no_number_is_refused_as_such_by_the_forecast(tmp_path, value, shown):
    raw = _raw()
    raw["rewards"][1]["tokens_per_update"] = value
    path = _saved(tmp_path, raw)
    text = _section_refusal(path)
    assert text == _load_refusal(path)  # was: 'is "4477", but ... give 4477 ...; restore the file, or re-run'
    assert text.startswith(f"{path} field rewards[1].tokens_per_update is {shown}: it must be a finite number >= 1 ")
    assert text.endswith(f"; {rerun_advice(path.parent)}") and ", but " not in text


# ----------------------------------------------------------------------------- 4. the section's gaps
def test_a_rewards_object_is_refused_by_the_section_as_by_load_probe(tmp_path):
    raw = _raw()
    raw["rewards"] = {e["name"]: e for e in raw["rewards"]}
    path = _saved(tmp_path, raw)
    expected = f"{path} has no 'rewards' list: not a probe.json of gradprobe probe; {rerun_advice(path.parent)}"
    assert _load_refusal(path) == expected
    assert _section_refusal(path) == expected  # was: read


@pytest.mark.parametrize("key", ["tokens_per_update", "per_group"])
@pytest.mark.parametrize("null", [False, True], ids=["missing", "null"])
def test_an_entry_without_a_forecast_field_is_refused_naming_the_file(tmp_path, key, null):
    raw = _raw()
    if null:
        raw["rewards"][1][key] = None
    else:
        del raw["rewards"][1][key]
    path = _saved(tmp_path, raw)
    assert _section_refusal(path) == (
        f"{path} field rewards[1].{key} is {'null' if null else 'missing'}: probe entry 'mc_value' lacks {key!r}, "
        f"which the forecast reads (the probe writes it in every entry); {rerun_advice(path.parent)}")
    # was: "probe entry 'mc_value' lacks '...'; re-run the probe with this gradprobe" (no file, no field)


def test_a_batch_entry_without_per_group_is_refused_by_the_section_naming_its_place(tmp_path):
    from gradprobe.probe.batches import combine_batches
    from gradprobe.probe.run import ProbeConfig

    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    raw = json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))
    del raw["batches"][1]["rewards"][2]["per_group"]
    path = _saved(tmp_path, raw)
    name = raw["batches"][1]["rewards"][2]["name"]
    assert _section_refusal(path) == (
        f"{path} field batches[1].rewards[2].per_group is missing: probe entry {name!r} lacks 'per_group', which "
        f"the forecast reads (the probe writes it in every entry); {rerun_advice(path.parent)}")


@pytest.mark.parametrize("value, shown", [([], "[]"), ("x", '"x"')], ids=["list", "text"])
def test_a_probe_json_that_is_no_object_is_refused_in_one_line(tmp_path, value, shown):
    path = _saved(tmp_path, value)
    assert _section_refusal(path) == (f"{path} holds {shown}, not a probe result (a JSON object with a 'rewards' "
                                      f"list, as gradprobe probe writes it); {rerun_advice(path.parent)}")
    # was: AttributeError: 'list' object has no attribute 'get'
