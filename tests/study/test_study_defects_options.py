"""`gradprobe study` options that contradict each other are refused before anything is read or written; the report
says why a hypothesis has no p-value and that a study without a grpo arm has no gain vs grpo; a killed invocation's
wall time counts up to a heartbeat taken during the run, not only the one at its start. No training."""

from __future__ import annotations

import json
import time

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import analyze, format_rankings
from gradprobe.study.invocations import HEARTBEAT_JSON, HEARTBEAT_SECONDS, Invocation
from gradprobe.study.runner import run_study

from study_helpers import PLAN, make_study, toy_plan, write_plan


def _one_line_error(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("gradprobe study: error: ") and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- 4. contradictory options

def test_analyze_only_with_no_analysis_is_refused(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=2)
    assert cli_main(["study", "--analyze-only", "--no-analysis", "--out", str(study)]) == 2
    assert _one_line_error(capsys.readouterr().err) == (
        "gradprobe study: error: --analyze-only and --no-analysis contradict each other (--analyze-only only "
        "analyses; --no-analysis runs the study without analysing it): drop one of them")
    assert not (study / "analysis.json").exists() and not (study / "figures").exists()


def test_a_ray_address_without_the_ray_executor_is_refused(tmp_path, capsys):
    plan = write_plan(tmp_path, toy_plan("ray", seeds=(0,)))
    out = tmp_path / "study"
    assert cli_main(["study", str(plan), "--out", str(out), "--ray-address", "10.0.0.1:6379"]) == 2
    assert _one_line_error(capsys.readouterr().err) == (
        "gradprobe study: error: --ray-address 10.0.0.1:6379 goes with --executor ray (the local executor starts no "
        "Ray): add --executor ray or drop --ray-address")
    assert cli_main(["study", "--analyze-only", "--out", str(out), "--ray-address", "10.0.0.1:6379"]) == 2
    assert "--analyze-only runs nothing: drop --ray-address" in _one_line_error(capsys.readouterr().err)
    with pytest.raises(ValueError, match="--ray-address 10.0.0.1:6379 goes with --executor ray"):
        run_study(plan, out, executor="inline", ray_address="10.0.0.1:6379", check=False)
    assert not out.exists()


def test_analyze_only_refuses_a_plan_other_than_the_studys_frozen_one(tmp_path, capsys):
    study = make_study(tmp_path / "s", seeds=2)
    other = write_plan(tmp_path, (study / "plan.toml").read_text().replace("generated_tokens = 1000",
                                                                          "generated_tokens = 2000"), "other.toml")
    assert cli_main(["study", str(other), "--analyze-only", "--out", str(study)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith(f"gradprobe study: error: PLAN {other} (sha256 ")
    assert line.endswith(f"is not the plan of the study {study} (sha256 "
                         f"{line.split('(sha256 ')[2][:12]}); --analyze-only analyses {study} with its own frozen "
                         f"{study / 'plan.toml'}: drop the PLAN argument (or give --out the study folder of {other})")
    assert not (study / "analysis.json").exists()
    same = write_plan(tmp_path, (study / "plan.toml").read_text(), "same.toml")  # the frozen plan itself: accepted
    assert cli_main(["study", str(same), "--analyze-only", "--out", str(study)]) == 0
    assert (study / "analysis.json").exists()


# ----------------------------------------------------------------------------- 6. report text

def test_a_hypothesis_without_a_p_value_says_why(tmp_path):
    plan = PLAN.replace('test = "sign_flip"\narms = ["grpo", "initial"]',
                        'test = "paired_t"\narms = ["grpo", "initial"]')  # a paired t over one seed: no p-value
    study = make_study(tmp_path / "s", seeds=1, plan=plan)
    result = analyze(study, write=False, figures=False)
    (h,) = [h for h in result["hypotheses"] if h["name"] == "grpo_learns"]
    assert h["p_value"] is None and h["p_text"] is None and h["test"] == "paired t"
    text = format_rankings(result)
    (line,) = [x for x in text.splitlines() if x.startswith("  grpo_learns:")]
    assert line.endswith("two-way n/a, p n/a (one paired seed: no spread, no test; greater, alpha 0.05)")
    assert "None" not in text


def test_a_study_without_a_grpo_arm_says_once_that_no_gain_vs_grpo_is_computed(tmp_path):
    study = make_study(tmp_path / "s", seeds=2, items=False)
    head = PLAN.split("[[hypotheses]]")[0].replace("[arms.grpo]", "[arms.base]").replace("seeds = SEEDS",
                                                                                          "seeds = [0, 1]")
    (study / "plan.toml").write_text(head)
    csv = study / "runs.csv"
    csv.write_text("".join(("base" + x[4:]) if x.startswith("grpo,") else x for x in csv.read_text().splitlines(True)))
    result = analyze(study, write=False, figures=False)
    why = ("the study has no arm 'grpo', so no gain vs grpo is computed (analysis.json gain_vs_grpo is null; the gains "
           "vs the initial policy are kept)")
    assert result["control_arm"] == "grpo" and result["control_arm_missing"] == why
    assert result["arms"]["mc_value"]["generated_tokens"]["gain_vs_grpo"] is None
    text = format_rankings(result)
    assert text.count(why) == 1 and "gain vs grpo" not in text.replace(why, "")
    assert "(accuracy points; ranked: the arms read on every seed)" in text and "gains vs grpo (95%" not in text


# ----------------------------------------------------------------------------- 7. wall time of a killed invocation

def test_a_killed_invocation_counts_its_time_up_to_a_heartbeat_during_the_run(tmp_path):
    assert HEARTBEAT_SECONDS <= 2.0
    study: dict = {}
    first = Invocation(tmp_path)  # the default interval, as `gradprobe study` runs it
    first.begin(study)
    first.start()
    time.sleep(2 * HEARTBEAT_SECONDS + 0.5)
    first._stop.set()  # killed (SIGKILL) without an end: only its heartbeat is left
    first._thread.join()
    beat = json.loads((tmp_path / HEARTBEAT_JSON).read_text())
    assert beat["seconds"] >= HEARTBEAT_SECONDS and beat["heartbeat_seconds"] == HEARTBEAT_SECONDS
    (killed,) = Invocation(tmp_path).begin(json.loads(json.dumps(study)))
    assert killed["ended"] == "killed" and killed["seconds"] == beat["seconds"] >= HEARTBEAT_SECONDS
