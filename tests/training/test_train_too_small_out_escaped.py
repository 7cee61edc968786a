"""``gradprobe train --budget-tokens 10 --out $'x\\ty'``: the error of a budget smaller than one update (the run
stopped after update 1, :func:`gradprobe.training.budget.too_small_message`) named ``--out`` raw, a tab in it printed
as a tab. The command prints the one-line message escaped (:func:`gradprobe.tables.shown`), as its other lines name
``--out``. One update of the shipped tiny tier, B x G = 2 x 4."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def test_the_budget_smaller_than_one_update_error_names_out_escaped(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(budget={"generated_tokens": 250_000}))
    out = tmp_path / "x\ty"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                 "--budget-tokens", "10"]) == 2
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "budget_smaller_than_one_update"
    err = capsys.readouterr().err
    escaped = str(out).replace("\t", "\\t")
    assert "\t" not in err and err.count("\n") == 1 and err.startswith("gradprobe train: error: --budget-tokens = 10 ")
    assert f"(the run stopped after update 1, data kept in {escaped}); to train, rerun with a new --out (or after " \
           f"deleting {escaped}: a rerun into it with another budget is refused)" in err
