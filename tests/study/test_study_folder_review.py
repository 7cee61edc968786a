"""Review of the study folder's refusal of a user's files (commit 5e464a0): three defects.

1. ``--restart`` deleted all of ``runs/``, a user's run of another arm included (any ``runs/*/seed*`` with a
   ``metrics.jsonl`` counted as the study's): it now deletes only the frozen plan's run folders and refuses,
   deleting nothing, when ``runs/`` holds anything else (:func:`gradprobe.study.freeze._restart_study`).
2. A user's own ``plan.toml`` was accepted as a killed freeze's and replaced by ``--restart``: a ``plan.toml`` is now
   a study's only when it loads as a plan (:func:`gradprobe.study.folder.foreign_study_files`).
3. A study rebuilt from run folders started before ``config.json`` (``.lock``, ``train.log``) beside its
   ``invocation.json`` was refused (:func:`gradprobe.study.folder.holds_study_runs`).
"""

import json
from pathlib import Path

import pytest

from gradprobe.layout import run_dir
from gradprobe.outputs import OutputDirError
from gradprobe.study.folder import StudyError, foreign_study_files, holds_study_runs, refuse_other_output
from gradprobe.study.freeze import freeze_plan

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "data" / "study_tiny" / "plan.toml"  # arms grpo, mc_value, ...; seeds 0-3
TINY_LR = ROOT / "data" / "study_tiny_lr" / "plan.toml"


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def test_restart_keeps_a_users_run_of_another_arm_and_deletes_nothing(tmp_path, capsys):
    out = tmp_path / "D"
    mine = out / "runs" / "my_exp" / "seed1" / "metrics.jsonl"
    mine.parent.mkdir(parents=True)
    mine.write_text('{"update": 1}\n')
    refuse_other_output(out)  # runs in a study's layout: taken up, as before
    freeze_plan(TINY, out)
    (run_dir(out, "grpo", 0)).mkdir(parents=True)  # a partial run of the frozen plan
    (run_dir(out, "grpo", 0) / "metrics.jsonl").write_text('{"update": 1}\n')
    before = _tree(out)
    with pytest.raises(StudyError) as info:
        freeze_plan(TINY_LR, out, restart=True)
    msg = str(info.value)
    assert msg.startswith("--restart refused: ") and "runs/my_exp, which is not a run folder of the frozen plan" in msg
    assert "nothing was deleted" in msg and "move it out of" in msg, msg
    assert mine.read_text() == '{"update": 1}\n'
    assert _tree(out) == before  # the frozen plan, study.json and its own run folder kept too
    capsys.readouterr()


def test_restart_refuses_a_seed_the_frozen_plan_lacks_and_deletes_only_its_own_run_folders(tmp_path, capsys):
    out = tmp_path / "D"
    freeze_plan(TINY, out)
    extra = run_dir(out, "grpo", 9)  # arm of the plan, seed it lacks: not the study's
    extra.mkdir(parents=True)
    (extra / "metrics.jsonl").write_text('{"update": 2}\n')
    with pytest.raises(StudyError, match=r"runs/grpo/seed9, which is not a run folder"):
        freeze_plan(TINY_LR, out, restart=True)
    assert (extra / "metrics.jsonl").read_text() == '{"update": 2}\n'
    (extra / "metrics.jsonl").unlink()
    extra.rmdir()
    for arm, seed in [("grpo", 0), ("mc_value", 3)]:
        run_dir(out, arm, seed).mkdir(parents=True)
        (run_dir(out, arm, seed) / "metrics.jsonl").write_text('{"update": 1}\n')
    capsys.readouterr()
    plan, study = freeze_plan(TINY_LR, out, restart=True)
    assert "2 run folder(s) in runs/" in capsys.readouterr().err
    assert not (out / "runs").exists() and study["plan_sha256"] == plan.sha256
    assert (out / "plan.toml").read_bytes() == TINY_LR.read_bytes()


@pytest.mark.parametrize("with_runs", [False, True])
def test_a_users_plan_toml_is_refused_by_name(tmp_path, with_runs):
    out = tmp_path / "F"
    out.mkdir()
    (out / "plan.toml").write_text("# my notes\nlr = 1\n")
    if with_runs:  # a study's run beside it does not make the file a plan
        run_dir(out, "grpo", 0).mkdir(parents=True)
        (run_dir(out, "grpo", 0) / "metrics.jsonl").write_text('{"update": 1}\n')
    assert foreign_study_files(out) == ["plan.toml"]
    with pytest.raises(OutputDirError) as info:
        refuse_other_output(out)
    assert f"--out {out} holds plan.toml but no study.json" in str(info.value)
    assert "(plan.toml does not load as a plan: unknown key 'lr'" in str(info.value)
    assert (out / "plan.toml").read_text() == "# my notes\nlr = 1\n"


def test_a_killed_freezes_real_plan_toml_is_still_accepted(tmp_path):
    out = tmp_path / "K"
    out.mkdir()
    (out / "plan.toml").write_bytes(TINY.read_bytes())
    assert foreign_study_files(out) == []
    refuse_other_output(out)


@pytest.mark.parametrize("started", [".lock", "train.log"])
def test_a_study_rebuilt_from_runs_started_before_config_json_is_accepted(tmp_path, started):
    out = tmp_path / "R"
    freeze_plan(TINY, out)
    run_dir(out, "grpo", 0).mkdir(parents=True)
    (run_dir(out, "grpo", 0) / started).write_text("")
    (out / "invocation.json").write_text(json.dumps({"pid": 1}))
    (out / "study.json").unlink()  # a damaged study.json deleted, as study_json_fix advises
    assert holds_study_runs(out)
    assert foreign_study_files(out) == []
    refuse_other_output(out)
    plan, study = freeze_plan(TINY, out)  # the same plan: resumed, study.json rebuilt
    assert study["plan_sha256"] == plan.sha256 and (out / "study.json").exists()


def test_invocation_json_beside_a_lone_plan_toml_is_accepted(tmp_path):
    out = tmp_path / "I"
    out.mkdir()
    (out / "plan.toml").write_bytes(TINY.read_bytes())
    (out / "invocation.json").write_text("{}")
    (out / "runs").mkdir()
    assert foreign_study_files(out) == []
