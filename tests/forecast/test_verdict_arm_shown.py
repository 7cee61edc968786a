"""The verdict lines under ``gradprobe probe``'s forecast table name each arm as the table shows it: a control
character in a plug-in reward's name (a tab) escaped as ``repr`` does (:func:`gradprobe.tables.shown`), so the line
starts with ``a\\tb:`` as the table's row does, not with a raw tab (printed, it jumped to the next tab stop)."""

from __future__ import annotations

import numpy as np
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import forecast_section, format_forecast

C = 4_000


def test_a_tab_named_reward_is_shown_escaped_in_its_verdict_line():
    curve = synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    probe = probe_result({"outcome": o, "a\tb": 0.5 * o}, {"outcome": C, "a\tb": C},
                         signal={"outcome": o ** 2, "a\tb": 0.25 * o ** 2})
    text = format_forecast(forecast_section(probe, curve=curve, method="cost_only"))
    assert "\t" not in text  # no raw tab anywhere: not in the table, not in the verdicts
    rows = [x for x in text.splitlines() if x.startswith("a\\tb")]
    assert len(rows) == 2  # the table's row and the verdict line
    assert rows[1].startswith("a\\tb: ")
