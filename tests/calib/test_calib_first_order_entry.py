"""``calib.probe_input.first_order_gain`` (version-1 calibrations): a probe entry's per-update fields are read by the
one JSON-number rule, so ``true`` is never 1 token or 1 point per update."""

from __future__ import annotations

import math

import pytest

from calib.probe_input import CalibrationApplyError, first_order_gain

ENTRY = {"name": "mc_value", "predicted_gain_per_update": 2.0, "tokens_per_update": 1000, "seconds_per_update": 4.0}


def test_a_valid_entry_gives_the_budgets_number_of_updates_times_the_gain_per_update():
    assert first_order_gain(ENTRY, "tokens", 250_000) == pytest.approx(500.0)
    assert first_order_gain(ENTRY, "time", 40.0, lr_scale=0.5) == pytest.approx(10.0)
    assert math.isnan(first_order_gain({**ENTRY, "predicted_gain_per_update": None}, "updates", 3))


@pytest.mark.parametrize("field, value, says", [
    ("tokens_per_update", True, "field tokens_per_update is true (a boolean is never read as 1 or 0): it must be a "
                                "finite number >= 1 of generated tokens per update"),
    ("tokens_per_update", 0, "field tokens_per_update is 0: it must be a finite number >= 1"),
    ("tokens_per_update", 1e-300, "field tokens_per_update is 1e-300: it must be a finite number >= 1"),
    ("tokens_per_update", None, "field tokens_per_update is null: a token budget needs it"),
    ("tokens_per_update", "1000", 'field tokens_per_update is "1000": it must be a finite number >= 1'),
    ("predicted_gain_per_update", True, "field predicted_gain_per_update is true: it is not a number"),
    ("predicted_gain_per_update", "2.0", 'field predicted_gain_per_update is "2.0": it is not a number'),
    ("predicted_gain_per_update", "inf", 'field predicted_gain_per_update is "inf": it is infinite'),
    ("predicted_gain_per_update", 10 ** 400, "it is too large for a float")])
def test_a_per_update_field_that_is_no_number_is_refused_naming_the_entry_and_field(field, value, says):
    with pytest.raises(CalibrationApplyError) as e:
        first_order_gain({**ENTRY, field: value}, "tokens", 250_000)
    assert str(e.value).startswith("probe entry 'mc_value' ") and says in str(e.value)
    assert "re-run `gradprobe probe`" in str(e.value) and "\n" not in str(e.value)
