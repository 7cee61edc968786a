"""A read whose bracketing evals straddle an eval the plan promised and runs.csv lost is refused (DESIGN.md: "never
read a value across missing evals"), even when the bracket fits the promised gap plus one update."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from gradprobe.study.reading import _runs, frozen_plan, load_runs, read_runs

STUDY = Path(__file__).resolve().parents[2] / "data" / "study_tiny_lr"


@pytest.fixture
def lost(tmp_path):
    d = tmp_path / "lr1"
    shutil.copytree(STUDY, d)
    csv = d / "runs.csv"
    lines = csv.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.startswith("grpo,0,20,")]
    assert len(kept) == len(lines) - 1
    csv.write_text("".join(kept))
    return d


def _reads(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = _runs(load_runs(d))
    return read_runs(runs, "updates", 20.0, plan=frozen_plan(d))


def test_the_lost_promised_eval_is_not_read_across(lost):
    r = _reads(lost)[("grpo", 0)]
    assert r["updates"] == [14, 29] and r["gap"] == 15.0  # within the promised 15 + 1: the gap alone allows it
    assert (r["status"], r["value"]) == ("gap_exceeded", None)


def test_the_other_runs_and_the_shipped_study_read_as_before(lost):
    shipped, cut = _reads(STUDY), _reads(lost)
    assert shipped[("grpo", 0)]["status"] == "exact" and shipped[("grpo", 0)]["value"] == pytest.approx(77.5)
    for key, r in shipped.items():
        if key != ("grpo", 0):
            assert (cut[key]["status"], cut[key]["value"]) == (r["status"], r["value"])
