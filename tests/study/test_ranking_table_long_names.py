"""The rankings table widens its arm column to the longest arm name: names of 14 characters or more
(``process_hybrid_0.5`` in ``data/study_reward_granularity``) ran into the accuracy and pushed the next column out of
line; names under 14 keep the table as it was."""

from __future__ import annotations

import json
from pathlib import Path

from gradprobe.study.report import format_rankings

DATA = Path(__file__).resolve().parents[2] / "data"


def _rows(study: str) -> list[str]:
    lines = format_rankings(json.loads((DATA / study / "analysis.json").read_text())).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("rank  "))
    return lines[head:head + 6]


def test_long_arm_names_keep_the_columns_in_line():
    rows = _rows("study_reward_granularity")
    second = rows[0].index("at matched tokens")
    for row in rows[1:]:
        assert row[second - 2:second] == "  " and row[second] != " "  # each row's second cell starts under its head
        first = row[6:second].split()
        assert len(first) == 3 and first[1].replace(".", "").isdigit()  # name, accuracy, (gain): apart
    assert rows[1].startswith("1     process_hybrid_0.5  77.05 (+1.25)    process_hybrid_0.1  78.58 (+0.20)")


def test_short_arm_names_keep_the_table_as_it_was():
    rows = _rows("study_tiny")
    assert rows[0].index("at matched tokens") == 38  # 6 + 32
    assert rows[1].startswith("1     hybrid_0.5     74.12 (+0.80)    grpo           78.38 (+0.00)    ")
