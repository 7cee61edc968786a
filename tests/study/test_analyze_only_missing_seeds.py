"""``gradprobe study --analyze-only`` on a study whose runs.csv lost a run: each missing (arm, seed) of the plan
is named (stderr and analysis.json ``missing_runs``), and a re-analysis beside a shipped analysis.json that no
longer matches runs.csv warns, naming ``--overwrite-analysis``."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from gradprobe.cli import main as cli_main
from gradprobe.study.coverage import missing_runs, stale_analysis
from gradprobe.study.reading import _load_plan, load_runs

from study_helpers import make_study

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "study_tiny"


def _drop(study: Path, arm: str, seed: int) -> None:
    """Delete every runs.csv row of run (arm, seed), as a hand edit or a bad copy would."""
    with open(study / "runs.csv", newline="") as f:
        rows = list(csv.reader(f))
    kept = [r for r in rows[1:] if not (r[0] == arm and r[1] == str(seed))]
    assert len(kept) < len(rows) - 1
    with open(study / "runs.csv", "w", newline="") as f:
        csv.writer(f).writerows([rows[0], *kept])


def test_a_seed_lost_from_runs_csv_is_named_and_the_stale_shipped_analysis_is_warned_about(tmp_path, capsys):
    study = Path(shutil.copytree(SHIPPED, tmp_path / "study_tiny"))
    shipped = (study / "analysis.json").read_bytes()
    _drop(study, "mc_value", 2)
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    err = capsys.readouterr().err
    assert (f"gradprobe study: warning: run mc_value seed 2 of the plan is missing from {study}/runs.csv: study.json "
            "records it as done, but runs.csv holds no row of it") in err
    assert err.count("of the plan is missing from") == 1
    assert (f"gradprobe study: warning: {study}/analysis.json does not match {study}/runs.csv (mc_value: 4 seed(s) "
            "in analysis.json, 3 in runs.csv (seeds [0, 1, 3]))") in err
    assert f"--analyze-only --out '{study}' --overwrite-analysis" in err
    redo = json.loads((study / "reanalysis" / "analysis.json").read_text())
    assert [(r["arm"], r["seed"]) for r in redo["missing_runs"]] == [("mc_value", 2)]
    assert "records it as done" in redo["missing_runs"][0]["reason"]
    assert redo["arms"]["mc_value"]["seeds"] == 3 and redo["excluded_runs"] == []
    assert (study / "analysis.json").read_bytes() == shipped  # the shipped analysis is kept


def test_a_complete_study_reports_no_missing_run_and_no_stale_analysis(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=3)
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    analysis = json.loads((study / "analysis.json").read_text())
    assert analysis["missing_runs"] == []
    record = json.loads((study / "study.json").read_text())  # make_study's study.json names no real plan sha256
    (study / "study.json").write_text(json.dumps({**record, "plan_sha256": analysis["plan_sha256"]}))
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0  # a re-analysis beside a matching one
    assert "warning" not in capsys.readouterr().err
    assert stale_analysis(study, load_runs(study)) == []


def test_missing_runs_name_the_status_study_json_gives(tmp_path):
    study = make_study(tmp_path / "s", seeds=3)
    _drop(study, "grpo", 1)
    _drop(study, "grpo_2xlr", 0)
    record = json.loads((study / "study.json").read_text())
    for r in record["runs"]:
        if (r["arm"], r["seed"]) == ("grpo_2xlr", 0):
            r.update(status="failed", error="boom")
    record["runs"] = [r for r in record["runs"] if (r["arm"], r["seed"]) != ("grpo", 1)]
    (study / "study.json").write_text(json.dumps(record))
    got = missing_runs(study, load_runs(study), _load_plan(study))
    assert [(r["arm"], r["seed"], r["reason"]) for r in got] == [
        ("grpo", 1, "study.json lists no such run (not run)"),
        ("grpo_2xlr", 0, "its status in study.json is 'failed' (boom)")]
