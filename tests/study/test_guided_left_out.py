"""A guided arm's probe whose every reward failed on its batch (probe/guided/<arm>, gradprobe.study.worker._probe) wrote
no probe.json, so every rerun of the study (``gradprobe study PLAN --out STUDY`` again, to resume) loaded the policy
and ran that probe again, to fail the same way. It now writes its record, probe/guided/<arm>/left_out.json (the
rewards left out, their errors and fix), which marks the probe done: a rerun runs no probe and says which reward failed,
why and the fix; the study forecast gives that arm no forecast and says why; ``--restart`` deletes the record as the
study's own file. A study folder from before the record (the guided folder empty) still runs that probe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gradprobe.layout import GUIDED_LEFT_OUT, run_dir
from gradprobe.probe import run as probe_run
from gradprobe.rewards.base import RewardFunctionError
from gradprobe.study import executors, worker
from gradprobe.study.folder import not_written_by_study
from gradprobe.study.freeze import freeze_plan
from gradprobe.study.probe_plan import pending_probes
from gradprobe.study.runner import run_study
from gradprobe.study.worker import left_out_fix
from gradprobe.training import run as training_run
from gradprobe.training.plan import load_plan

from study_helpers import toy_plan, write_plan

ROOT = Path(__file__).resolve().parents[2]
ARMS = ('[arms.grpo]\nreward = "outcome"\n'
        '[arms.guided]\nreward = "mc_value"\nguidance = {fraction = 0.5, prefix = 0.5}\n')
ERROR = "RewardFunctionError: reward 'mc_value' raised KeyError: 'hint'"


@pytest.fixture
def probes(monkeypatch) -> dict:
    """run_probe and the policy and task loads stubbed (no model): a guided probe's config fails with
    :data:`ERROR` on reward mc_value, as the probe raises a reward's own failure; the others write a probe.json of one
    entry per reward. Returns the counts of each kind of call (``guided``, ``shared``, ``policy``). Train tasks are
    refused: every run is finished by hand before the study runs."""
    calls = {"guided": 0, "shared": 0, "policy": 0}

    def fake_probe(config, out, **_):
        if config.guidance:
            calls["guided"] += 1
            error = RewardFunctionError("reward 'mc_value' raised KeyError: 'hint'")
            error.reward = "mc_value"
            raise error
        calls["shared"] += 1
        result = {"rewards": [{"name": n} for n in config.rewards]}
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "probe.json").write_text(json.dumps(result))
        return result

    def policy(*a, **k):
        calls["policy"] += 1

    def execute(task):
        assert task["kind"] == "probe", task  # the runs are finished: only the probe is run
        return worker.execute_task(task)

    monkeypatch.setattr(probe_run, "run_probe", fake_probe)
    monkeypatch.setattr(training_run, "load_run_policy", policy)
    monkeypatch.setattr(training_run, "load_run_task", lambda *a, **k: None)
    monkeypatch.setattr(executors, "execute_task", execute)
    return calls


def _finished_study(tmp_path: Path) -> tuple[Path, Path]:
    """(plan, study folder) of a toy plan with arms grpo and guided (seed 0), each run finished by hand."""
    plan = write_plan(tmp_path, toy_plan("guided_left_out", seeds=(0,), arms=ARMS))
    out = tmp_path / "study"
    for arm, seed in load_plan(plan).runs():
        d = run_dir(out, arm, seed)
        d.mkdir(parents=True)
        evals = [{"update": u, "eval": True, "generated_tokens": tok, "device_seconds": 0.5 * u, "flops": 1e6 * tok,
                  "greedy_accuracy": k / 16} for u, tok, k in ((0, 0, 4), (1, 260, 5), (2, 510, 6))]
        (d / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        (d / "summary.json").write_text(json.dumps({"completed": True, "updates": 2, "final_greedy_accuracy": 0.375}))
    return plan, out


def _run(plan: Path, out: Path, said: list):
    return run_study(plan, out, executor="inline", check=False, analyze=False, say=said.append)


def test_a_rerun_does_not_run_a_guided_probe_whose_every_reward_failed_and_says_why(tmp_path, probes):
    plan, out = _finished_study(tmp_path)
    said: list[str] = []
    first = _run(plan, out, said)
    assert probes == {"guided": 1, "shared": 1, "policy": 1}
    fix = left_out_fix(out)
    record = {"reward": "mc_value", "arms": ["guided"], "error": ERROR, "probe": "guided/guided", "fix": fix,
              "every_reward_failed": True}
    where = ("probe/guided/guided (every reward of that probe failed: no probe.json, its record "
             "probe/guided/guided/left_out.json)")
    state = (f"failed for arm guided: {ERROR}; that reward is left out of {where}, and the other arms' entries are "
             f"kept; {fix}")
    assert first.probe == state and not first.ok and f"probe {state}" in said
    folder = out / "probe" / "guided" / "guided"
    assert not (folder / "probe.json").exists()
    saved = json.loads((folder / GUIDED_LEFT_OUT).read_text())
    assert saved["probe"] == "guided/guided" and saved["left_out"] == [record]
    assert saved["note"] == (
        "every reward of this guided probe failed on its batch, so it wrote no probe.json and its arms have no probe "
        "entry; a rerun of the study does not probe it again while this file exists (delete it and rerun the study to "
        "probe the same rewards again, for a failure they may not repeat); a fixed reward gets its entry as each "
        "record's fix says")
    assert json.loads((out / "study.json").read_text())["probe"]["left_out"] == [record]
    assert pending_probes(load_plan(out / "plan.toml"), out / "probe") == []
    # the same command again: no policy loaded, no probe run; the state names the reward, its error and the fix
    again = _run(plan, out, said)
    assert probes == {"guided": 1, "shared": 1, "policy": 1}
    assert again.probe == (f"failed for arm guided: {ERROR}; that reward is left out of {where} (written by an earlier "
                           f"invocation, kept), and the other arms' entries are kept; {fix}") and not again.ok
    # a study stopped before study.json recorded the probe's report: the record is read from the guided folder
    study = json.loads((out / "study.json").read_text())
    study.pop("probe")
    (out / "study.json").write_text(json.dumps(study))
    assert _run(plan, out, said).probe == again.probe and probes["guided"] == 1


def test_a_study_from_before_the_record_runs_the_guided_probe_again(tmp_path, probes):
    plan, out = _finished_study(tmp_path)
    _run(plan, out, [])
    (out / "probe" / "guided" / "guided" / GUIDED_LEFT_OUT).unlink()  # as an older study left it: the folder empty
    assert pending_probes(load_plan(out / "plan.toml"), out / "probe") == ["guided/guided"]
    _run(plan, out, [])
    assert probes == {"guided": 2, "shared": 1, "policy": 2}


def _guided_study_without_its_probe(tmp_path: Path, record) -> Path:
    """A copy of the shipped guided study whose guided arm's probe failed on every reward: no probe.json in
    probe/guided/guided, ``record`` (text or JSON) as its left_out.json."""
    study = tmp_path / "study"
    shutil.copytree(ROOT / "data" / "study_tiny_guided", study,
                    ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    folder = study / "probe" / "guided" / "guided"
    (folder / "probe.json").unlink()
    (folder / GUIDED_LEFT_OUT).write_text(record if isinstance(record, str) else json.dumps(record))
    return study


def test_the_forecast_gives_that_arm_no_forecast_and_says_why(tmp_path):
    from gradprobe.forecast import study_forecasts

    full = study_forecasts(ROOT / "data" / "study_tiny_guided", n_draws=200).set_index("arm")
    record = {"probe": "guided/guided", "left_out": [
        {"reward": "outcome", "arms": ["guided"], "error": "RewardFunctionError: boom", "probe": "guided/guided",
         "fix": "fix the reward, then run the plan as a new study", "every_reward_failed": True}]}
    study = _guided_study_without_its_probe(tmp_path, record)
    t = study_forecasts(study, n_draws=200).set_index("arm")
    assert list(t.index) == list(full.index)
    assert t.loc["guided", "method"] == "no_probe_entry"
    assert t.loc["guided", "note"] == (
        f"no probe entry: its reward 'outcome' failed on the batch of its guided probe {study}/probe/guided/guided, as "
        "every reward of that probe did, so it has no probe.json (recorded in left_out.json: RewardFunctionError: "
        "boom); fix the reward, then run the plan as a new study")
    assert t.loc["guided", "forecast_probe"] != t.loc["guided", "forecast_probe"]  # NaN: no forecast
    assert t.loc["guided", "realized_gain"] == pytest.approx(full.loc["guided", "realized_gain"], abs=1e-12)
    assert t.loc["grpo", "forecast_probe"] == 0.0


def test_a_damaged_record_is_refused_naming_the_file_and_the_fix(tmp_path):
    from gradprobe.forecast import study_forecasts

    study = _guided_study_without_its_probe(tmp_path, '{"left_out": "x"}')
    with pytest.raises(ValueError) as info:
        study_forecasts(study, n_draws=200)
    path = study / "probe" / "guided" / "guided" / GUIDED_LEFT_OUT
    assert str(info.value) == (
        f"{path} (the record of a guided probe whose every reward failed) is not an object with a list of objects "
        f"left_out; restore it from a copy of the study ({study} has no runs/: resuming the study to probe again "
        "would train every run again)")


def test_restart_deletes_the_record_as_the_studys_own_file(tmp_path):
    tiny = ROOT / "data" / "study_tiny" / "plan.toml"
    out = tmp_path / "S"
    freeze_plan(tiny, out)
    folder = out / "probe" / "guided" / "ppo"
    folder.mkdir(parents=True)
    for name in (GUIDED_LEFT_OUT, f"{GUIDED_LEFT_OUT}.tmp"):
        (folder / name).write_text("{}")
    assert not_written_by_study(out, []) == []
    (out / "probe" / GUIDED_LEFT_OUT).write_text("{}")  # only a guided folder holds one: beside probe.json, a user's
    assert not_written_by_study(out, []) == [out / "probe" / GUIDED_LEFT_OUT]
    (out / "probe" / GUIDED_LEFT_OUT).unlink()
    freeze_plan(ROOT / "data" / "study_tiny_lr" / "plan.toml", out, restart=True)
    assert sorted(p.name for p in out.iterdir()) == ["plan.toml", "study.json"]


def test_the_advice_for_that_folder_says_to_delete_the_record_first(tmp_path, probes, capsys):
    """Was: "resume the study, which re-runs the missing probe", which a rerun no longer does while the record is
    there (``gradprobe probe --out`` into the folder, ``gradprobe.load_probe`` of it)."""
    import gradprobe
    from gradprobe.cli import main

    plan, out = _finished_study(tmp_path)
    _run(plan, out, [])
    folder = out / "probe" / "guided" / "guided"
    assert main(["probe", "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"to redo it delete {folder / GUIDED_LEFT_OUT} and resume the study with `gradprobe study" in err, err
    with pytest.raises(FileNotFoundError) as e:
        gradprobe.load_probe(folder)
    assert f"delete {folder / GUIDED_LEFT_OUT} and resume the study with `gradprobe study" in str(e.value)
