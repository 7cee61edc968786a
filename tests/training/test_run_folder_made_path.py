"""``gradprobe train --out DIR`` decides about ``DIR`` before anything is computed; three ways the decision went wrong:

- ``--out new7/../R1`` with ``new7`` not there yet: every read of ``new7/../R1/...`` fails (ENOENT) until
  ``mkdir -p`` makes ``new7``, so the run folder ``R1`` of this very run was taken for a new run's (an out-of-reach plan
  refused instead of resumed), and a folder of a user's ``metrics.jsonl``, or one inside a study, was accepted. The
  folder is now read where the system will find it once its missing folders are made
  (:func:`gradprobe.outputs.as_made`); a failed run removes ``new7`` again and never ``R1``, a finished one keeps
  ``new7`` as ``mkdir -p`` does.
- a ``config.json`` that is a symbolic link to this run's record elsewhere counted as the run being resumed, and the
  run wrote its metrics and checkpoints beside the link: it is refused before compute, naming the link and the fix.
- a refused run in a folder holding other files left a 0-byte ``.lock`` there: the lock file it made is removed, one
  that was there before is kept.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import gradprobe.training.run as training_run
from gradprobe.cli import main
from gradprobe.study.folder import hold_run_folder
from gradprobe.training.budget import OutOfReachWarning
from gradprobe.training.plan import parse_plan
from gradprobe.training.run_folder import records_run

from helpers_training import tiny_plan


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory holding ``oor.toml``, a plan whose token budget is out of reach of its 10 updates (refused
    for a new run, warned about for a run it started before), and ``ok.toml``, a plan of one update."""
    (tmp_path / "oor.toml").write_text(tiny_plan(budget={"updates": 10, "generated_tokens": 250_000}))
    (tmp_path / "ok.toml").write_text(tiny_plan())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _arm(plan: Path, seed: int = 0):
    """The plan's grpo run at ``seed`` (its budget out of reach or not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfReachWarning)
        return parse_plan(plan.read_text(), path=str(plan), check_reach=False).arm("grpo", seed=seed)


def _record(plan: Path, seed: int = 0) -> str:
    """``config.json`` of the plan's grpo run at ``seed``, as the run writes it first."""
    return json.dumps({"run": _arm(plan, seed).to_dict()})


def _run_folder(where: Path, plan: Path, seed: int = 0) -> Path:
    where.mkdir(parents=True)
    (where / "config.json").write_text(_record(plan, seed))
    return where


class _Trained:
    """What the replaced ``run_training`` did: ``calls``, the resolved folder of each call; ``fail``: raise."""

    def __init__(self):
        self.calls, self.fail = [], False

    def __call__(self, run, out, **kwargs):
        self.calls.append(os.path.realpath(out))
        assert training_run._check_existing(Path(out), run) is None  # the resume's own check, before loading
        if self.fail:
            raise RuntimeError("the run failed (test)")
        (Path(out) / "metrics.jsonl").write_text("{}\n")
        return {"updates": 0, "stop_reason": "resumed (test)", "budget_spent": None, "overshoot": 0}


@pytest.fixture
def trained(monkeypatch):
    """``run_training`` replaced (:class:`_Trained`): a resume's check of the folder is made, as the run makes it
    before loading anything, then one metrics line written (``fail``: it raises instead, writing nothing)."""
    replaced = _Trained()
    monkeypatch.setattr(training_run, "run_training", replaced)
    return replaced


def _train(plan: str, out: str, *extra: str) -> tuple[int, list]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = main(["train", "--plan", plan, "--arm", "grpo", "--out", out, "--no-progress", *extra])
    return status, [w.category for w in caught]


def test_the_run_folder_reached_through_a_missing_folder_is_resumed(here, trained, capsys):
    r1 = _run_folder(here / "R1", here / "oor.toml")
    assert records_run("new7/../R1", _arm(here / "oor.toml"))
    status, caught = _train("oor.toml", "new7/../R1")
    err = capsys.readouterr().err
    assert status == 0, err  # was: refused as a new run's plan (its token budget out of reach)
    assert trained.calls == [str(r1)] and caught == [OutOfReachWarning]
    assert sorted(os.listdir(here)) == ["R1", "new7", "ok.toml", "oor.toml"]  # new7 kept, as mkdir -p keeps it
    assert sorted(os.listdir(r1)) == [".lock", "config.json", "metrics.jsonl"]
    _run_folder(here / "R2", here / "oor.toml", seed=1)  # another run's folder: the plan refused as a new run's
    status, caught = _train("oor.toml", "new8/../R2")
    err = capsys.readouterr().err
    assert status == 2 and "is out of reach of budget.updates = 10" in err and caught == []
    assert trained.calls == [str(r1)] and sorted(os.listdir(here)) == ["R1", "R2", "new7", "ok.toml", "oor.toml"]


def test_a_failed_resume_through_a_missing_folder_removes_it_and_keeps_the_run_folder(here, trained, capsys):
    r1 = _run_folder(here / "R1", here / "oor.toml")
    before = (r1 / "config.json").read_bytes()
    trained.fail = True
    status, caught = _train("oor.toml", "new7/../R1")
    assert status == 2 and "the run failed (test)" in capsys.readouterr().err
    assert trained.calls == [str(r1)] and caught == [OutOfReachWarning]
    assert sorted(os.listdir(here)) == ["R1", "ok.toml", "oor.toml"]  # new7, made to pass through, removed
    assert os.listdir(r1) == ["config.json"] and (r1 / "config.json").read_bytes() == before


def test_a_users_files_through_a_missing_folder_are_refused_before_anything_is_made(here, trained, capsys):
    (here / "mine").mkdir()
    (here / "mine" / "metrics.jsonl").write_text("my numbers\n")
    status, _ = _train("ok.toml", "new7/../mine")
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("gradprobe train: error: new7/../mine holds metrics.jsonl but no run's "
                                          "config.json")  # was: accepted, and the run truncated it
    assert trained.calls == [] and sorted(os.listdir(here)) == ["mine", "ok.toml", "oor.toml"]
    assert os.listdir(here / "mine") == ["metrics.jsonl"]
    assert (here / "mine" / "metrics.jsonl").read_text() == "my numbers\n"


def test_a_folder_inside_a_study_through_a_missing_folder_is_refused(here, trained, capsys):
    (here / "S" / "runs").mkdir(parents=True)
    (here / "S" / "study.json").write_text("{}")
    status, _ = _train("ok.toml", "new7/../S/runs/mine")
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"gradprobe train: error: new7/../S/runs/mine is inside the study "
                                          f"{here / 'S'} (study.json)")
    assert trained.calls == [] and sorted(os.listdir(here)) == ["S", "ok.toml", "oor.toml"]
    assert os.listdir(here / "S" / "runs") == []


def test_a_config_json_linked_to_this_runs_record_is_refused_before_compute(here, trained, capsys):
    r1 = _run_folder(here / "R1", here / "ok.toml")
    (here / "linked").mkdir()
    os.symlink("../R1/config.json", here / "linked" / "config.json")
    run = _arm(here / "ok.toml")
    assert records_run("R1", run) and not records_run("linked", run)
    for out in ("linked", "new7/../linked"):
        status, _ = _train("ok.toml", out)
        err = capsys.readouterr().err
        assert status == 2 and err == (
            f"gradprobe train: error: {out}/config.json is a symbolic link (to '../R1/config.json'), not a run's own "
            "config.json: a run there would write its checkpoints, metrics.jsonl and summary.json beside a record "
            f"kept elsewhere; put a copy of the file in its place (rm '{out}/config.json' && cp "
            f"'{r1 / 'config.json'}' '{out}/config.json'), or choose the folder it links into as --out (to resume "
            "that run), or another --out; nothing was written\n")  # was: resumed, writing metrics beside the link
        assert trained.calls == [] and os.listdir(here / "linked") == ["config.json"]
        assert sorted(os.listdir(here)) == ["R1", "linked", "ok.toml", "oor.toml"]
    assert os.listdir(r1) == ["config.json"]


def test_a_refused_run_in_a_folder_of_other_files_leaves_no_lock_file(here, capsys):
    """A real refusal after the lock was taken: the folder holds another run's ``config.json`` (seed 1) beside a
    user's notes; the folder is left as it was."""
    other = _run_folder(here / "other", here / "ok.toml", seed=1)
    (other / "notes.txt").write_text("mine\n")
    status, _ = _train("ok.toml", "other")
    assert status == 2 and "holds a run with a different configuration" in capsys.readouterr().err
    assert sorted(os.listdir(other)) == ["config.json", "notes.txt"]  # was: a 0-byte .lock beside them


def test_holding_a_folder_of_other_files_removes_only_the_lock_file_it_made(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    with pytest.raises(RuntimeError, match="refused"):
        with hold_run_folder(mine):
            assert sorted(os.listdir(mine)) == [".lock", "notes.txt"]
            raise RuntimeError("refused")
    assert os.listdir(mine) == ["notes.txt"]
    with hold_run_folder(mine):  # nothing written, no error: left as it was too
        pass
    assert os.listdir(mine) == ["notes.txt"]
    (mine / ".lock").write_text("")  # there before (a killed run's): kept
    with pytest.raises(RuntimeError, match="refused"):
        with hold_run_folder(mine):
            raise RuntimeError("refused")
    assert sorted(os.listdir(mine)) == [".lock", "notes.txt"]
    (mine / ".lock").unlink()
    with hold_run_folder(mine):  # a run that wrote its files keeps its lock file, as before
        (mine / "config.json").write_text("{}")
    assert sorted(os.listdir(mine)) == [".lock", "config.json", "notes.txt"]


def test_the_api_resumes_the_run_folder_reached_through_a_missing_folder(here, trained):
    """``gradprobe.train`` as ``gradprobe train``: was refused as a new run's out-of-reach plan."""
    import gradprobe

    r1 = _run_folder(here / "R1", here / "oor.toml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = gradprobe.train("oor.toml", "new7/../R1", arm="grpo", progress=False)
    assert [w.category for w in caught] == [OutOfReachWarning]
    assert trained.calls == [str(r1)] and result.summary["stop_reason"] == "resumed (test)"
    with pytest.raises(Exception, match="is out of reach of budget.updates = 10"):
        gradprobe.train("oor.toml", "new8/../R2", arm="grpo", progress=False)  # no run there: refused
    assert trained.calls == [str(r1)] and sorted(os.listdir(here)) == ["R1", "new7", "ok.toml", "oor.toml"]


@pytest.mark.parametrize("name", ["metrics.jsonl", "summary.json", "checkpoint-000001", "weights"])
def test_a_run_file_that_is_a_link_is_refused_and_its_target_kept(here, trained, capsys, name):
    """Was: the resume appended its lines to (or wrote its checkpoint into) the file or folder the link points to."""
    r1 = _run_folder(here / "R1", here / "ok.toml")
    target = here / f"elsewhere_{name}"
    target.mkdir() if name.startswith(("checkpoint", "weights")) else target.write_text("theirs\n")
    os.symlink(target, r1 / name)
    status, _ = _train("ok.toml", "R1")
    err = capsys.readouterr().err
    assert status == 2 and err == (
        f"gradprobe train: error: R1/{name} is a symbolic link (to '{target}'), not the run's own file: a run there "
        f"would write into what it points to; put a copy in its place (rm 'R1/{name}' && cp -r '{target}' "
        f"'R1/{name}') or remove it (rm 'R1/{name}'), or choose another --out; nothing was written\n")
    assert trained.calls == [] and sorted(os.listdir(r1)) == sorted(["config.json", name])
    assert os.listdir(target) == [] if target.is_dir() else target.read_text() == "theirs\n"


def test_the_api_refusal_names_its_argument_out(here, trained):
    """Was: ``gradprobe.train(...)`` told to "choose another --out", an option the API has not."""
    import gradprobe

    r1 = _run_folder(here / "R1", here / "ok.toml")
    os.symlink(here / "elsewhere.jsonl", r1 / "metrics.jsonl")
    with pytest.raises(OSError) as e:
        gradprobe.train("ok.toml", "R1", arm="grpo", progress=False)
    assert str(e.value).endswith("points to; remove it (rm 'R1/metrics.jsonl'), or choose another out; nothing was "
                                 "written")  # a broken link: no copy advised
    assert "--out" not in str(e.value) and trained.calls == []
