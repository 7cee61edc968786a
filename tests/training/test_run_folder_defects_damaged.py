"""Damaged files of a run folder (an empty or cut ``model.safetensors`` or ``state.pt``, a garbage
``checkpoint.json``, ``config.json`` or ``summary.json``): ``gradprobe train`` refuses the folder with one line
naming the file and the fix, exit 2, no traceback, before the model is loaded, and removes nothing."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import torch

from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.training.checkpoint import load_checkpoint
from gradprobe.training.errors import DamagedRunFolderError
from gradprobe.training.loading import load_run_policy
from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

PLAN = tiny_plan(budget={"updates": 3}, train={"checkpoint_every": 1})
CKPT = "checkpoint-000002"


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """A run of PLAN killed after update 2: checkpoint-000002, no summary.json."""
    out = tmp_path_factory.mktemp("stopped") / "run"

    def kill(update):
        if update == 2:
            raise Killed

    with pytest.raises(Killed):
        run_training(parse_plan(PLAN).arm("grpo"), out, after_update=kill)
    assert json.loads((out / "checkpoint.json").read_text())["checkpoint"] == CKPT
    return out


def _args(plan: Path, out: Path):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"])


def _listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and p.name != ".lock"}


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


KEEP = "restore the file from a copy, or delete {out} to start the run over"
DAMAGES = {
    "empty weights": (lambda out: (out / CKPT / "model.safetensors").write_bytes(b""),
                      "{out}/" + CKPT + "/model.safetensors is damaged (SafetensorError: Error while deserializing "
                      "header: header too small): the run's current checkpoint cannot be loaded from it; " + KEEP),
    "cut weights": (lambda out: _cut(out / CKPT / "model.safetensors"),
                    "{out}/" + CKPT + "/model.safetensors is damaged (SafetensorError: Error while deserializing "
                    "header: incomplete metadata, file not fully covered): the run's current checkpoint cannot be "
                    "loaded from it; " + KEEP),
    "cut state": (lambda out: _cut(out / CKPT / "state.pt"),
                  "{out}/" + CKPT + "/state.pt is damaged (BadZipFile: File is not a zip file): the run's current "
                  "checkpoint cannot be loaded from it; " + KEEP),
    "garbage pointer": (lambda out: (out / "checkpoint.json").write_text("{garbage"),
                        "{out}/checkpoint.json is damaged (JSONDecodeError: Expecting property name enclosed in "
                        "double quotes: line 1 column 2 (char 1)): it names the run's current checkpoint; write "
                        '{{"checkpoint": "' + CKPT + '", "update": 2}} into it to resume from ' + CKPT + ", or "
                        "delete {out} to start the run over"),
    "pointer not an object": (lambda out: (out / "checkpoint.json").write_text("[]"),
                              '{out}/checkpoint.json is damaged (no {{"checkpoint": "checkpoint-UUUUUU", "update": '
                              'U}} object): it names the run\'s current checkpoint; write {{"checkpoint": "' + CKPT +
                              '", "update": 2}} into it to resume from ' + CKPT + ", or delete {out} to start the "
                              "run over"),
    "garbage config": (lambda out: (out / "config.json").write_text("garbage"),
                       "{out}/config.json is damaged (JSONDecodeError: Expecting value: line 1 column 1 (char 0)): "
                       "the run's configuration is lost, so a resume cannot be checked against the plan; " + KEEP),
    "garbage summary": (lambda out: (out / "summary.json").write_text('{"completed": tr'),
                        "{out}/summary.json is damaged (JSONDecodeError: Expecting value: line 1 column 15 (char "
                        "14)): whether the run finished cannot be told; delete the file to resume the run from its "
                        "last checkpoint (a finished run is only finished again), or delete {out} to start the run "
                        "over"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_file_is_named_with_its_fix_before_the_model_is_loaded(damage, stopped_run, tmp_path, capsys,
                                                                         monkeypatch):
    out = tmp_path / "run"
    shutil.copytree(stopped_run, out)
    spoil, message = DAMAGES[damage]
    spoil(out)
    before = _listing(out)
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)

    def no_model(spec, **kw):
        raise AssertionError("the model was loaded before the damaged file was found")

    monkeypatch.setattr("gradprobe.training.run.load_run_policy", no_model)
    assert train_main(_args(plan, out)) == 2
    err = capsys.readouterr().err
    assert err == f"gradprobe train: error: {message.format(out=out)}\n"
    assert _listing(out) == before  # nothing removed or rewritten


def test_the_fixes_the_messages_name_resume_the_run(stopped_run, tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    out = tmp_path / "run"
    shutil.copytree(stopped_run, out)
    (out / "checkpoint.json").write_text("{garbage")
    (out / "summary.json").write_text('{"completed": tr')
    assert train_main(_args(plan, out)) == 2
    assert capsys.readouterr().err.startswith(f"gradprobe train: error: {out}/summary.json is damaged")
    (out / "summary.json").unlink()  # "delete the file to resume the run from its last checkpoint"
    assert train_main(_args(plan, out)) == 2
    assert capsys.readouterr().err.startswith(f"gradprobe train: error: {out}/checkpoint.json is damaged")
    (out / "checkpoint.json").write_text('{"checkpoint": "' + CKPT + '", "update": 2}')  # the content named
    assert train_main(_args(plan, out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] and summary["updates"] == 3 and summary["resumed_from_update"] == [2]


def test_load_checkpoint_names_a_file_damaged_after_the_early_check(stopped_run, tmp_path):
    model = load_run_policy(parse_plan(PLAN).arm("grpo").model).model  # the run's own model (the tiny tier)
    ckpt = tmp_path / "run" / CKPT
    shutil.copytree(stopped_run / CKPT, ckpt)
    (ckpt / "model.safetensors").write_bytes(b"")
    with pytest.raises(DamagedRunFolderError) as e:
        load_checkpoint(ckpt, model)
    assert str(e.value) == (f"{ckpt}/model.safetensors is damaged (SafetensorError: Error while deserializing header: "
                            f"header too small): the run's current checkpoint cannot be loaded from it; "
                            f"{KEEP.format(out=ckpt.parent)}")
    shutil.copy(stopped_run / CKPT / "model.safetensors", ckpt / "model.safetensors")
    torch.save({"update": 2}, ckpt / "state.pt")  # a readable file without the run's state
    with pytest.raises(DamagedRunFolderError) as e:
        load_checkpoint(ckpt, model)
    assert str(e.value) == (f"{ckpt}/state.pt is damaged (no optimizer, scheduler, rng, sampler_calls, ledger, "
                            f"next_eval, last_eval, last_cost, metrics_bytes): the run's current checkpoint cannot be "
                            f"loaded from it; {KEEP.format(out=ckpt.parent)}")
