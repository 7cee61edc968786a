"""``gradprobe train`` and ``gradprobe study`` neither truncate nor delete a user's files of their names.

T1: ``gradprobe train --out D`` where D held only the user's ``metrics.jsonl`` took D for a run's folder: it ran
and truncated the file (a lone ``summary.json`` was deleted as "a stopped run's summary"). A run writes its
``config.json`` (with a ``"run"`` record) before any other file, so those names without it are refused, named with
the fix, and kept (:func:`gradprobe.training.run_folder.foreign_run_files`).
T2: ``gradprobe study --out D`` where D held the user's ``plan.toml``, ``runs.csv``, ``figures/`` and ``probe/`` (no
``study.json``) took D for a study: the frozen-plan check suggested ``--restart``, which deleted all of them while
its message named only "probe, study.json". Without ``study.json`` those names are refused now
(:func:`gradprobe.study.folder.foreign_study_files`) except what a study leaves itself (a killed freeze's lone
``plan.toml``; ``plan.toml`` beside a ``runs/`` of gradprobe's run folders, a deleted ``study.json`` being rebuilt), and
``--restart`` lists everything it deletes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.cli import train as train_cli
from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.layout import run_dir
from gradprobe.outputs import OutputDirError
from gradprobe.study import folder as study_folder
from gradprobe.study.freeze import STUDY_OUTPUTS, freeze_plan
from gradprobe.study.invocations import HEARTBEAT_JSON
from gradprobe.training import run_folder

from helpers_training import tiny_plan
from study_helpers import toy_plan, write_plan

TOY = toy_plan("safety", seeds=(0,), generated_tokens=200, checkpoint_every=None)


def _tree(path: Path) -> dict:
    """Every file under ``path`` (relative name -> bytes) and every folder (name -> None)."""
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None) for p in sorted(path.rglob("*"))}


def _train_args(plan: Path, out: Path):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--updates", "1", "--out", str(out),
                              "--no-progress"])


@pytest.mark.parametrize("files, named", [
    ({"metrics.jsonl": "my own notes\n"}, "metrics.jsonl but no run's config.json"),
    ({"summary.json": '{"mine": 1}'}, "summary.json but no run's config.json"),
    ({"eval_items.jsonl": "x\n", "checkpoint.json": "{}"}, "checkpoint.json, eval_items.jsonl but no run's"),
    ({"checkpoint-000003/notes.txt": "x"}, "checkpoint-000003 but no run's config.json"),
    ({"config.json": '{"model_type": "mine"}', "metrics.jsonl": "x\n"}, "metrics.jsonl but no run's config.json"),
])
def test_train_refuses_a_users_files_of_a_runs_names_and_keeps_them(tmp_path, capsys, monkeypatch, files, named):
    out = tmp_path / "mine"
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = _tree(out)
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(budget={"updates": 1}))
    monkeypatch.setattr(train_cli, "run_in_folder", lambda *a, **k: pytest.fail("the plan was read before the refusal"))
    assert train_main(_train_args(plan, out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe train: error: {out} holds {named}") and len(err.splitlines()) == 1, err
    assert "choose another --out" in err and "move " in err and err.rstrip().endswith("nothing was written")
    assert _tree(out) == before  # nothing truncated, deleted or added (no .lock)
    with pytest.raises(OutputDirError, match="not a training run's"):  # the library refuses too
        run_folder.refuse_other_output(out)
    assert _tree(out) == before


def test_a_runs_own_folder_and_a_killed_runs_leftovers_are_still_accepted(tmp_path):
    out = tmp_path / "run"
    (out / "checkpoint-000002").mkdir(parents=True)
    (out / "metrics.jsonl").write_text('{"update": 1}\n')
    with pytest.raises(OutputDirError):  # no config.json: not a run's (the old code accepted it)
        run_folder.refuse_other_output(out)
    (out / "config.json").write_text(json.dumps({"run": {"arm": "grpo"}, "plan_sha256": "0" * 64}))
    run_folder.refuse_other_output(out)  # a run's own folder: a resume
    assert run_folder.foreign_run_files(out) == []
    (out / "config.json").write_text("garbage")  # a damaged config.json: left to the resume, which names it
    assert run_folder.foreign_run_files(out) == []
    killed = tmp_path / "killed"  # killed before config.json: a run had written nothing else (.lock, a tracker's tb/)
    (killed / "tb").mkdir(parents=True)
    (killed / ".lock").write_text("")
    run_folder.refuse_other_output(killed)


def _users_folder(tmp_path: Path) -> Path:
    out = tmp_path / "mine"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "fig1.png").write_bytes(b"png")
    (out / "probe").mkdir()
    (out / "probe" / "notes.md").write_text("mine")
    (out / "plan.toml").write_text("# my own plan\n")
    (out / "runs.csv").write_text("arm,seed\nmine,0\n")
    return out


def test_study_refuses_a_users_plan_runs_csv_figures_and_probe_and_restart_deletes_nothing(tmp_path, capsys):
    out = _users_folder(tmp_path)
    before = _tree(out)
    plan = write_plan(tmp_path, TOY, "toy.toml")
    for extra in ([], ["--restart"]):
        assert cli_main(["study", str(plan), "--out", str(out), "--executor", "inline", *extra]) == 2
        err = capsys.readouterr().err
        assert (f"--out {out} holds plan.toml, runs.csv, figures/, probe/ but no study.json" in err
                and "choose another --out" in err and "move them" in err and "nothing was written" in err), err
        assert _tree(out) == before  # no study.json, no lock, nothing deleted
    with pytest.raises(OutputDirError, match="not a study's"):
        study_folder.refuse_other_output(out)


@pytest.mark.parametrize("names, shown", [
    ({"figures/a.png": "x"}, "figures/"),
    ({"plan.toml": "# mine\n", "analysis.json": "{}"}, "plan.toml, analysis.json"),
    ({"runs/notes.txt": "x"}, "runs/"),
    ({"plan.toml": "# mine\n", "probe/x.txt": "x"}, "plan.toml, probe/"),
])
def test_study_refuses_any_study_name_without_study_json(tmp_path, names, shown):
    out = tmp_path / "mine"
    for name, text in names.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    with pytest.raises(OutputDirError) as info:
        study_folder.refuse_other_output(out)
    assert f"--out {out} holds {shown} but no study.json" in str(info.value)
    assert study_folder.foreign_study_files(out) == [s.strip() for s in shown.split(",")]


def test_a_killed_freeze_and_a_study_rebuilding_its_study_json_are_still_accepted(tmp_path):
    plan = write_plan(tmp_path, TOY, "toy.toml")
    killed = tmp_path / "killed"  # freeze_plan writes plan.toml, then study.json: killed in between
    killed.mkdir()
    (killed / "plan.toml").write_bytes(plan.read_bytes())
    study_folder.refuse_other_output(killed)
    assert freeze_plan(plan, killed)[1]["plan_sha256"] == json.loads((killed / "study.json").read_text())["plan_sha256"]
    rebuilt = tmp_path / "rebuilt"  # a damaged study.json deleted to rebuild it from runs/ (study_json_fix)
    (rebuilt / "figures").mkdir(parents=True)
    (rebuilt / "plan.toml").write_bytes(plan.read_bytes())
    (rebuilt / "runs.csv").write_text("arm,seed\n")
    run_dir(rebuilt, "grpo", 0).mkdir(parents=True)
    (run_dir(rebuilt, "grpo", 0) / "config.json").write_text(json.dumps({"run": {}}))
    study_folder.refuse_other_output(rebuilt)
    (run_dir(rebuilt, "grpo", 0) / "config.json").write_text(json.dumps({"model_type": "mine"}))  # not a run's
    with pytest.raises(OutputDirError, match=r"holds plan\.toml, runs\.csv, figures/, runs/ but no study\.json"):
        study_folder.refuse_other_output(rebuilt)


def test_restart_names_everything_it_deletes(tmp_path, capsys):
    a = write_plan(tmp_path, TOY, "a.toml")
    b = write_plan(tmp_path, TOY.replace("lr = 1e-3", "lr = 2e-3"), "b.toml")
    out = tmp_path / "study"
    freeze_plan(a, out)
    run_dir(out, "grpo", 0).mkdir(parents=True)
    (run_dir(out, "grpo", 0) / "metrics.jsonl").write_text('{"update": 1}\n')
    (out / "figures").mkdir()
    (out / "runs.csv").write_text("arm,seed\n")
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    freeze_plan(b, out, restart=True)
    err = capsys.readouterr().err
    assert "(plan.toml, study.json, runs.csv, figures/, runs/; 1 run folder(s) in runs/)" in err, err
    assert not (out / "figures").exists() and not (out / "runs.csv").exists() and not (out / "runs").exists()
    assert (out / "notes.txt").read_text() == "mine"  # not a study output: kept
    assert HEARTBEAT_JSON in STUDY_OUTPUTS and STUDY_OUTPUTS is study_folder.STUDY_OUTPUTS  # one list, both rules
