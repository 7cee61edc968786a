"""``gradprobe train``'s lines name ``--out`` escaped (:func:`gradprobe.tables.shown`, as ``gradprobe probe`` does): a
newline in the folder's name printed raw split the success line in two, the second part looking like a line of its
own; the error of a budget smaller than one update (:func:`gradprobe.training.budget.too_small_message`) named it
raw too. One update of the shipped tiny tier, B x G = 2 x 4."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.cli.train import interrupt_message

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def test_a_newline_in_out_is_printed_escaped_on_one_line(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(budget={"updates": 1_500_000}))
    out = tmp_path / "run\nnext"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                 "--updates", "1"]) == 0
    assert json.loads((out / "summary.json").read_text())["updates"] == 1  # the folder holds the newline itself
    lines = capsys.readouterr().out.splitlines()
    escaped = str(out).replace("\n", "\\n")
    assert len(lines) == 2, lines
    assert lines[0].startswith("grpo seed 0: 1 updates, stop: budget (updates), ")
    assert lines[0].endswith(f"; wrote {escaped}/summary.json")
    assert lines[1] == ("note: shortened from the command line (--updates 1); the plan's budget: updates 1,500,000; "
                        "this run is not comparable with the plan's full-budget runs")  # was: updates 1.5e+06


def test_the_rerun_advice_after_an_interruption_names_out_escaped(tmp_path):
    out = tmp_path / "run\tnext"
    out.mkdir()
    (out / "metrics.jsonl").write_text("".join(json.dumps({"update": u}) + "\n" for u in range(1, 1235)))
    said, escaped = interrupt_message(out, 2000), str(out).replace("\t", "\\t")
    assert said == (f"it stopped after 1,234 update(s), before the first checkpoint (checkpoint_every = 2,000 "
                    f"updates): "
                    f"there is nothing to resume from, so running the same command again starts this run over from "
                    f"update 0 (the 1,234 update(s) in {escaped} are discarded)")


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
