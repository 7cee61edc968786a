"""probe.json reading, a tester's second round: what ``gradprobe.load_probe`` read silently or crashed on.

1. A single-batch entry's ``tokens_per_update`` (all the cost-only forecast reads) was never checked: x1.05 moved
   every forecast. It is the batch's generated tokens plus the entry's charged ones (x the update's batch over the
   probe's), as ``gradprobe.probe.result.per_update_costs`` writes it; ``predicted_gain_at_budget`` is
   ``budget_tokens / tokens_per_update x`` the gain; the entry's ``lr`` and ``budget_tokens`` are ``config``'s.
2. ``per_group`` values of 1e308 overflowed ``math.fsum`` (OverflowError).
3. A null ``predicted_gain_per_update`` was read and crashed the forecast (np.mean of None); a missing field the
   table reads crashed ``.table`` (KeyError), an ``interval`` that is a number too (TypeError).
4. ``batches`` set to [], null, "x" or {} while ``config.probe_batches`` is 2 read the pooled entries as one batch.
5. An entry's ``lr`` of "abc", a list, NaN or 1e308 was accepted.
6. A probe.json with a UTF-8 byte-order mark (and CRLF line ends) was "not valid JSON".
7. ``load_probe`` claimed its table never shows what the forecast refuses, but the stored ``forecast`` section was
   not checked; a section of the wrong shape crashed ``.table``.

Fixtures: the shipped single-batch probe ``data/study_tiny_heldout4k/probe/probe.json`` (rewards outcome, mc_value,
hybrid_0.5; 4477 generated tokens, mc_value's continuations 21043) and, for a multi-batch file, it pooled with
``study_tiny_hard_heldout4k``'s by the probe's own ``combine_batches``.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeResult
from gradprobe.forecast.probe_input import probe_batches_of
from gradprobe.layout import rerun_advice

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json"
#: how a refusal of an edited value ends, before the fix
EDITED = ("the file was edited or damaged after the probe wrote it, so a forecast from it would not be the probe's; "
          "restore the file, or ")


def _raw() -> dict:
    return json.loads(SHIPPED.read_text())


def _saved(tmp_path: Path, raw: dict, name: str = "p") -> Path:
    """``raw`` written as ``tmp_path/name/probe.json`` (a probe's own folder: its fix is `gradprobe probe --out`)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "probe.json").write_text(json.dumps(raw))
    return folder / "probe.json"


def _refusal(tmp_path: Path, raw: dict, name: str = "p") -> tuple[str, Path]:
    """The one-line message with which load_probe refuses ``raw`` saved as a probe folder, and the file."""
    path = _saved(tmp_path, raw, name)
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(path.parent)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path} field ")
    return text, path


def _forecast_refuses_alike(path: Path, text: str) -> None:
    """The forecast's reader (probe_batches_of) refuses the file at ``path`` with load_probe's ``text``."""
    with pytest.raises(ValueError) as info:
        probe_batches_of(json.loads(path.read_text()), source=path)
    assert str(info.value) == text


def _pooled() -> dict:
    """The two shipped single-batch probes pooled by combine_batches (a --probe-batches 2 probe.json), as JSON."""
    from gradprobe.probe.batches import combine_batches
    from gradprobe.probe.run import ProbeConfig

    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    return json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))


# ----------------------------------------------------------------------------- 1. tokens_per_update and friends

def test_an_edited_tokens_per_update_is_refused_naming_the_batchs_tokens_and_the_rule(tmp_path):
    raw = _raw()
    entry = raw["rewards"][1]
    assert (raw["batch"]["generated_tokens"], entry["generated_tokens"], entry["tokens_per_update"]) == (
        4477, {"continuation": 21043}, 25520)  # 4477 + 21043
    gradprobe.load_probe(_saved(tmp_path, raw, "intact").parent)  # as the probe wrote it: read
    entry["tokens_per_update"] = round(1.05 * 25520)  # the tester's edit: read everywhere, moved every forecast
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field rewards[1].tokens_per_update (reward 'mc_value') is 26796, but "
                    "batch.generated_tokens and rewards[1].generated_tokens give 25520 (tokens_per_update = "
                    "round((batch.generated_tokens + "
                    "its generated_tokens of the kinds training charges: rollout, continuation, selection) x s) = "
                    "round((4477 + 21043 continuation) x 1.0), s = config's (update_prompts or prompts) x "
                    "(update_group or group) / (prompts x group): gradprobe.probe.result.per_update_costs, as the "
                    f"probe writes it): {EDITED}{rerun_advice(path.parent)}")
    raw = _raw()
    raw["rewards"][0]["tokens_per_update"] = 4478  # one token off is no rounding of 4477 x 1
    assert "rewards[0].tokens_per_update (reward 'outcome') is 4478, but" in _refusal(tmp_path, raw)[0]


def test_tokens_per_update_is_read_at_the_updates_batch_over_the_probes(tmp_path):
    raw = _raw()  # --update-prompts 32: an update of twice the probe's batch costs twice its tokens
    raw["config"]["update_prompts"] = 32
    for e in raw["rewards"]:
        e["tokens_per_update"] *= 2
        e["predicted_gain_at_budget"] /= 2
    gradprobe.load_probe(_saved(tmp_path, raw, "scaled").parent)
    raw["rewards"][1]["tokens_per_update"] = 25520  # the probe batch's, not the update's
    text = _refusal(tmp_path, raw)[0]
    assert "is 25520, but batch.generated_tokens and rewards[1].generated_tokens give 51040 (" in text
    assert "round((4477 + 21043 continuation) x 2.0)" in text


def test_a_multi_batch_files_batch_tokens_are_checked_against_that_batch(tmp_path):
    raw = _pooled()
    assert [b["batch"]["generated_tokens"] for b in raw["batches"]] == [4477, 4814]
    gradprobe.load_probe(_saved(tmp_path, raw, "intact").parent)
    raw["batches"][1]["rewards"][1]["tokens_per_update"] = 2 * raw["batches"][1]["rewards"][1]["tokens_per_update"]
    text = _refusal(tmp_path, raw)[0]
    assert ("field batches[1].rewards[1].tokens_per_update (reward 'mc_value') is 54460, but batches[1].batch."
            "generated_tokens and batches[1].rewards[1].generated_tokens give 27230 (") in text


def test_a_gain_at_budget_its_budget_tokens_and_gain_contradict_is_refused(tmp_path):
    raw = _raw()
    entry = raw["rewards"][1]
    expected = 250000 / 25520 * (100 * 1e-4 * math.fsum(entry["per_group"]))
    assert entry["predicted_gain_at_budget"] == pytest.approx(expected, rel=1e-12)
    entry["predicted_gain_at_budget"] *= 1.05
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field rewards[1].predicted_gain_at_budget (reward 'mc_value') is "
                    f"{entry['predicted_gain_at_budget']!r}, but rewards[1]'s per-group lists, lr and "
                    f"tokens_per_update give {expected!r} (predicted_gain_at_budget = budget_tokens / "
                    f"tokens_per_update x predicted_gain_per_update, budget_tokens = 250000, as the probe writes it): "
                    f"{EDITED}"
                    f"{rerun_advice(path.parent)}")
    _forecast_refuses_alike(path, text)  # the forecast's reader refuses it too


@pytest.mark.parametrize("where, key, value, recorded, stated", [
    ("rewards[1]", "budget_tokens", 500000, 500000, 250000),
    ("config", "lr", 2e-4, 0.0001, 0.0002)], ids=["entry-budget-x2", "config-lr-x2"])
def test_an_entrys_setting_that_is_not_configs_is_refused(tmp_path, where, key, value, recorded, stated):
    raw = _raw()
    (raw["rewards"][1] if where == "rewards[1]" else raw["config"])[key] = value
    text, path = _refusal(tmp_path, raw)
    entry, reward = ("rewards[1]", "mc_value") if where == "rewards[1]" else ("rewards[0]", "outcome")
    assert text == (f"{path} field {entry}.{key} (reward {reward!r}) is {recorded}, but config.{key} is {stated} (the "
                    f"probe writes its {key} into config and into every entry, as estimate_rewards records it): "
                    f"{EDITED}{rerun_advice(path.parent)}")


def test_an_entry_without_lr_has_its_gain_checked_at_configs(tmp_path):
    raw = _raw()
    raw["rewards"][1]["lr"] = None  # and the gain doubled: was read, its table showing 7.58 per update
    raw["rewards"][1]["predicted_gain_per_update"] *= 2
    text = _refusal(tmp_path, raw)[0]
    assert "field rewards[1].predicted_gain_per_update (reward 'mc_value') is 7.577306324812448, but" in text
    assert "(predicted_gain_per_update = 100 x lr x sum(per_group), lr = 0.0001, as the probe writes it)" in text


# ----------------------------------------------------------------------------- 2. a sum that overflows

def test_per_group_values_whose_sum_overflows_are_refused_in_one_line(tmp_path):
    raw = _raw()
    raw["rewards"][1]["per_group"][0:2] = [1e308, 1e308]  # was OverflowError in math.fsum
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field rewards[1].per_group holds values so large that their sum overflows a float "
                    "(rewards[1].per_group[0] is 1e+308; sum(per_group) is inner_product): the file was edited or "
                    f"damaged after the probe wrote it; restore the file, or {rerun_advice(path.parent)}")
    _forecast_refuses_alike(path, text)


# ----------------------------------------------------------------------------- 3. fields missing, null or misshapen

@pytest.mark.parametrize("key, state, why", [
    ("predicted_gain_per_update", "null",
     "the table and the forecasts need it (the first-order gain per update, the table's gain_per_update)"),
    ("inner_product", "missing", "the table needs it (its inner_product column)"),
    ("inner_product", "null", "the table needs it (its inner_product column)"),
    ("tokens_per_update", "null",
     "the forecasts need it (the generated tokens per update, which the token budget is divided by)"),
    ("predicted_gain_at_budget", "missing", "the table needs it (its gain_at_budget column)"),
    ("per_group", "missing",
     "the forecasts need it (the per-group alignments the entry's efficiency is measured from)")], ids=[
    "gain-null", "inner-product-missing", "inner-product-null", "tokens-null", "gain-at-budget-missing",
    "per-group-missing"])
def test_a_field_every_entry_holds_missing_or_null_is_refused_naming_it(tmp_path, key, state, why):
    raw = _raw()
    if state == "null":
        raw["rewards"][1][key] = None
    else:
        del raw["rewards"][1][key]
    text, path = _refusal(tmp_path, raw)
    assert text == f"{path} field rewards[1].{key} is {state}: {why}; {rerun_advice(path.parent)}"
    if key != "per_group":  # the table of a result made in memory says the same (was KeyError / TypeError)
        with pytest.raises(ValueError) as info:
            _ = ProbeResult(raw, path.parent).table
        assert str(info.value) == text


def test_a_batch_entry_without_per_group_is_refused_naming_its_place(tmp_path):
    raw = _pooled()
    del raw["batches"][0]["rewards"][1]["per_group"]  # the forecast said "probe entry 'mc_value' lacks 'per_group'"
    assert _refusal(tmp_path, raw)[0].startswith(f"{tmp_path / 'p' / 'probe.json'} field batches[0].rewards[1]."
                                                  "per_group is missing: ")


def test_a_null_first_order_gain_does_not_crash_the_forecast():
    from gradprobe.forecast.budget_forecast import _first_order_gains

    batches = probe_batches_of(_raw())
    batches[0]["rewards"]["mc_value"]["predicted_gain_per_update"] = None  # was np.mean([None]): TypeError
    gains = _first_order_gains(batches, ["outcome", "mc_value"])
    assert gains["outcome"] == 1.1161999653942074 and math.isnan(gains["mc_value"])


@pytest.mark.parametrize("value", [1e308, 0, "abc", [1.0, 2.0, 3.0]], ids=["number", "zero", "text", "three"])
def test_an_interval_that_is_no_pair_is_refused_in_one_line(tmp_path, value):
    raw = _raw()
    raw["rewards"][1]["interval"] = value  # a number was TypeError in .table; 0 was read as no interval
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field rewards[1].interval is {json.dumps(value)}: it must be [low, high], two numbers "
                    f"(null without a bootstrap); {rerun_advice(path.parent)}")


# ----------------------------------------------------------------------------- 4. batches against probe_batches

@pytest.mark.parametrize("batches, shown", [([], "[]"), (None, "null"), ("x", '"x"'), ({"0": 1}, '{"0": 1}')])
def test_a_multi_batch_file_without_its_batches_is_refused(tmp_path, batches, shown):
    raw = _pooled()
    assert raw["config"]["probe_batches"] == 2
    raw["batches"] = batches  # was read as one batch: the pooled entries, unchecked
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field config.probe_batches is 2, but the file holds 0 batches (batches {shown}; "
                    "gradprobe.probe.batches.combine_batches writes the list of its batch objects, which the forecast "
                    f"reads): {EDITED}{rerun_advice(path.parent)}")
    _forecast_refuses_alike(path, text)


# ----------------------------------------------------------------------------- 5. lr

@pytest.mark.parametrize("value, shown", [("abc", '"abc"'), ([1, 2], "[1, 2]"), (math.nan, "NaN"),
                                          (1e308, "1e+308"), (True, "true (a boolean is never read as 1 or 0)")])
def test_an_entrys_lr_that_is_no_usable_rate_is_refused(tmp_path, value, shown):
    raw = _raw()
    raw["rewards"][1]["lr"] = value
    text, path = _refusal(tmp_path, raw)
    assert text == (f"{path} field rewards[1].lr is {shown}: it must be a finite number > 0 and at most 1 (the "
                    f"probe's --lr); {rerun_advice(path.parent)}")


# ----------------------------------------------------------------------------- 6. a byte-order mark

def test_a_probe_json_with_a_byte_order_mark_and_crlf_is_read(tmp_path):
    text = SHIPPED.read_text()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "probe.json").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    result = gradprobe.load_probe(tmp_path / "p")  # was "not valid JSON (Unexpected UTF-8 BOM ...)"
    assert result.raw == json.loads(text) and result.table.loc["mc_value", "tokens_per_update"] == 25520


# ----------------------------------------------------------------------------- 7. the forecast section

@pytest.mark.parametrize("section, field, shown, what", [
    ("none", "forecast", '"none"', "it must be the forecast section (an object) or null"),
    ({"available": True, "rows": None}, "forecast.rows", "null", "an available forecast section holds a list of rows"),
    ({"available": True, "rows": [None]}, "forecast.rows[0]", "null", "it must be a forecast row (an object)"),
    ({"available": True, "rows": [{"arm": ["mc_value"]}]}, "forecast.rows[0].arm", '["mc_value"]', "it must be text"),
    ({"available": True, "rows": [{"arm": "mc_value", "gain_interval": "x"}]}, "forecast.rows[0].gain_interval",
     '"x"', "it must be [low, high], two numbers, or null")], ids=["text", "rows-null", "row-null", "arm-list",
                                                                    "interval-text"])
def test_a_forecast_section_of_the_wrong_shape_is_refused_by_load_probe(tmp_path, section, field, shown, what):
    raw = _raw()
    raw["forecast"] = section  # each crashed .table (AttributeError, TypeError) after a silent load
    text, path = _refusal(tmp_path, raw)
    assert text == f"{path} field {field} is {shown}: {what}; {rerun_advice(path.parent)}"


def test_load_probes_docstring_says_the_stored_forecast_numbers_are_calibs_to_check(tmp_path):
    doc = " ".join(gradprobe.load_probe.__doc__.split())
    assert "never shows numbers the forecast would refuse" not in doc
    assert ("The stored ``forecast`` section's numbers (``forecast_gain``, ``rho``, the verdict) are not checked "
            "against a forecast of the entries: that recompute (about 0.3 s) is ``calib apply``'s "
            "(``calib.probe_input.check_forecast_section``)") in doc
    raw = copy.deepcopy(_raw())
    raw["forecast"] = {"available": True, "rows": [{"arm": "mc_value", "forecast_gain": 99.0}]}
    table = gradprobe.load_probe(_saved(tmp_path, raw).parent).table  # as documented: shown as stored
    assert table.loc["mc_value", "forecast_gain"] == 99.0
