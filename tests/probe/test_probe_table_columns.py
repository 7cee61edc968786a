"""The probe's printed tables (per-reward table and forecast table) keep every column in line whatever the length
of a reward's name: columns are as wide as their longest entry (gradprobe.tables.format_columns)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gradprobe.forecast import forecast_section
from gradprobe.probe.run import format_table
from gradprobe.tables import format_columns

from forecast_helpers import probe_result, synthetic_curve

LONG = "hybrid_0.5_very_long_custom_reward_name"


def _cells(line: str) -> list[tuple[int, int]]:
    """(start, end) of each cell; cells are separated by two or more spaces (a cell holds at most single ones)."""
    return [m.span() for m in re.finditer(r"\S+(?: \S+)*", line)]


def _assert_lined_up(block: list[str], ncols: int, align: str) -> None:
    """Every line has ncols cells; left-aligned columns start, right-aligned ones end, at the header's offsets."""
    spans = [_cells(line) for line in block]
    assert all(len(s) == ncols for s in spans), [(len(s), line) for s, line in zip(spans, block)]
    for c, a in enumerate(align):
        edge = 0 if a == "<" else 1
        assert len({s[c][edge] for s in spans}) == 1, (c, [line for line in block])


def _result():
    g = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    res = probe_result({"outcome": g, LONG: 1.5 * g, "mc": 0.5 * g},
                       {"outcome": 4_000, LONG: 12_345, "mc": 20_000}, signal={"outcome": g ** 2, LONG: 2 * g ** 2,
                                                                             "mc": 3 * g ** 2}, model="other")
    res["config"].update(reference="heldout", precondition="adam")
    res["batch"] = {"mean_reward": 0.5, "truncation_rate": 0.0}
    res["ledger"]["generated_tokens"] = {"rollout": 4000, "continuation": 16000}
    res["costs"] = {"alignment_to_update_ratio": None}
    for i, r in enumerate(res["rewards"]):
        r.update(interval=[r["inner_product"] - 1.0, r["inner_product"] + 10.0 ** i], snr=2.5 + i,
                 predicted_gain_at_budget=r["predicted_gain_per_update"] * 250_000 / r["tokens_per_update"])
    res["forecast"] = forecast_section(res, curve=synthetic_curve(seeds=3, noise=0.3), curve_spec="mine.json",
                                       method="probe")
    return res


def test_a_long_reward_name_keeps_every_column_of_both_tables_in_line():
    text = format_table(_result())
    lines = text.splitlines()
    top = lines.index(next(x for x in lines if x.startswith("reward ")))
    block = lines[top: top + 4]
    assert [b.split()[0] for b in block] == ["reward", "outcome", LONG, "mc"]
    _assert_lined_up(block, 7, "<>>>>>>")
    head = lines.index(next(x for x in lines if x.startswith("arm ")))
    block = lines[head: head + 4]
    assert [b.split()[0] for b in block] == ["arm", "outcome", LONG, "mc"]
    _assert_lined_up(block, 14, "<>>>>>>>>>>>><")
    assert f"{LONG}: " in text  # its verdict line


def test_format_columns_widths_alignment_and_errors():
    lines = format_columns(["name", "x"], [["a", "1"], ["a_long_name", "12.5"]], "<>")
    assert lines == ["name            x", "a               1", "a_long_name  12.5"]
    assert format_columns(["a", "b"], [["xyz", "1"]], "><", sep=" | ") == ["  a | b", "xyz | 1"]
    with pytest.raises(ValueError, match="align must be 2 characters"):
        format_columns(["a", "b"], [], "<")
    with pytest.raises(ValueError, match="row 0 has 1 cells, the header 2"):
        format_columns(["a", "b"], [["x"]], "<>")
