"""A probe of a reward whose plug-in file name has a byte that is not UTF-8 (``r\\xff.py``: the reward is
``r\\udcff.py:fn``, a lone surrogate) on the default tiny tier, which has a shipped reference curve, so the probe
forecasts its rewards: the forecast's table (pandas' text columns store UTF-8, which has no form for a lone
surrogate) stopped the command after the whole compute (exit 2, nothing written). The columns holding such a name are
now built as objects (:func:`gradprobe.forecast.budget_forecast.forecast_table`), so the forecast, the report and
probe.json complete. A real run of a small probe (2x4 completions of at most 40 tokens)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from plugin_helpers import UNDECODABLE_NAMES, undecodable_plugin_folder

from gradprobe.cli import main
from gradprobe.forecast.budget_forecast import forecast_table

#: a TRL-style reward: 0, 1, 0, 1 down the batch (every group of 4 has a gradient)
ODD_ROWS = "def fn(completions, **kwargs):\n    return [float(i % 2) for i, _ in enumerate(completions)]\n"
NAME = "r\udcff.py:fn"  #: the reward's name (its spec), as probe.json keeps it
SHOWN = "r\\udcff.py:fn"  #: how the printed tables and the page write it


pytestmark = UNDECODABLE_NAMES


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working directory holding ``r\\xff.py`` (:func:`plugin_helpers.undecodable_plugin_folder`)."""
    with undecodable_plugin_folder(tmp_path, monkeypatch, ODD_ROWS) as where:
        yield where


def test_a_probe_with_a_forecast_of_such_a_reward_completes(folder, capsys):
    out = folder / "hA"
    rc = main(["probe", "--prompts", "2", "--group", "4", "--heldout-prompts", "2", "--heldout-group", "4",
               "--max-new-tokens", "40", "--no-progress", "--threads", "1", "--rewards", f"outcome,{NAME}",
               "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "probe.json", "report.html",
                                                     "tokens.jsonl"]
    forecast = json.loads((out / "probe.json").read_text())["forecast"]
    assert forecast["available"] is True
    assert [(r["arm"], r["reward"]) for r in forecast["rows"]] == [("outcome", "outcome"), (NAME, NAME)]
    assert forecast["rows"][1]["tokens_per_update"] == forecast["rows"][0]["tokens_per_update"]
    # the printed forecast table has the reward's row, its name escaped
    lines = captured.out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("forecast vs grpo at 250k tokens"))
    assert any(line.startswith(SHOWN + " ") for line in lines[title:])
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "forecaster" in page and f"<td>{SHOWN}</td><td>{SHOWN}</td>" in page


def test_only_the_columns_holding_such_a_name_are_objects():
    rows = [{"arm": "outcome", "reward": "outcome", "gain": 0.5, "note": "a"},
            {"arm": NAME, "reward": NAME, "gain": None, "note": "b"}]
    table = forecast_table(rows, ["arm", "reward", "gain", "note"])
    assert table["arm"].dtype == object and table["reward"].dtype == object
    assert table["arm"].tolist() == ["outcome", NAME] and table["reward"].tolist() == ["outcome", NAME]
    plain = pd.DataFrame([{k: v for k, v in r.items() if k not in ("arm", "reward")} for r in rows])
    assert table["gain"].dtype == plain["gain"].dtype == "float64" and table["note"].dtype == plain["note"].dtype
    assert table["gain"].tolist()[0] == 0.5 and pd.isna(table["gain"].tolist()[1])
    # a table without such a name is pandas' own, text columns included
    same = forecast_table(rows[:1], ["arm", "reward", "gain", "note"])
    pd.testing.assert_frame_equal(same, pd.DataFrame(rows[:1], columns=["arm", "reward", "gain", "note"]))
