"""A reviewer's cases of the task-data record (``task_data`` in ``config.json``/``study.json``):

- ``--reuse-runs`` copied a run trained on other data into a study that records the new data;
- a study stopped before any run started was refused after its data was fixed (nothing had read the old data);
- a run resumed from another working directory (its relative data path names another file) was told its data was
  missing and would train on other data, while the file was intact where the run started;
- a study run's budget-too-small advice said to delete the run folder and edit the plan, which the study refuses;
- ``~`` was expanded when hashing, not when loading (the file hashed was not the file read).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.study.runner import run_study
from gradprobe.tasks import task_data_files
from gradprobe.training.errors import RunConfigMismatchError
from gradprobe.training.plan import parse_plan
from gradprobe.training.run import run_training
from helpers_rollout import one_thread
from helpers_training import tiny_plan
from study_helpers import stopped_before_any_run


def _rows(shift: int = 0) -> str:
    return "".join(json.dumps({"question": f"{a} + {b} =", "answer": str(a + b + shift)}) + "\n"
                   for a in range(1, 6) for b in range(2, 8))


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _plan(tmp_path: Path, data: Path) -> Path:
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(task={"name": f"jsonl:{data}", "pool": 8, "config": None}, seeds=[0]))
    return plan


def test_reuse_runs_refuses_a_run_trained_on_other_data(tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text(_rows())
    plan = _plan(tmp_path, data)
    assert run_study(plan, tmp_path / "A", executor="inline", probe=False, analyze=False).ok
    data.write_text(_rows(1))  # golds edited
    said = []
    result = run_study(plan, tmp_path / "B", executor="inline", probe=False, analyze=False,
                       reuse_from=[tmp_path / "A"], say=said.append)
    assert result.ok and not (tmp_path / "B" / "runs" / "grpo" / "seed0" / "reused_from.json").exists()
    line = next(s for s in said if s.startswith("--reuse-runs"))
    assert "reused 0 finished run(s)" in line and "not reused: grpo seed 0 (trained on other task data: task " in line
    assert "but its content differs (sha256 " in line
    b_run = json.loads((tmp_path / "B" / "runs" / "grpo" / "seed0" / "config.json").read_text())["task_data"]
    b_study = json.loads((tmp_path / "B" / "study.json").read_text())["task_data"]
    assert b_run == b_study  # trained anew, on the data the study records


def test_a_study_stopped_before_any_run_records_its_fixed_data(tmp_path, capsys):
    data = tmp_path / "t.jsonl"
    data.write_text(_rows(1))  # wrong golds at first
    plan = _plan(tmp_path, data)
    stopped_before_any_run(plan, tmp_path / "S")
    first = json.loads((tmp_path / "S" / "study.json").read_text())["task_data"]
    data.write_text(_rows())  # fixed before any run read it
    capsys.readouterr()
    assert run_study(plan, tmp_path / "S", executor="inline", probe=False, analyze=False).ok
    now = json.loads((tmp_path / "S" / "study.json").read_text())["task_data"]
    assert now != first and now == json.loads((tmp_path / "S" / "runs" / "grpo" / "seed0" / "config.json")
                                              .read_text())["task_data"]
    assert "changed since" in capsys.readouterr().err


def test_a_relative_path_resumed_from_another_folder_says_to_run_from_the_first(tmp_path, monkeypatch):
    (tmp_path / "a" / "data").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "data" / "t.jsonl").write_text(_rows())
    monkeypatch.chdir(tmp_path / "a")
    run = parse_plan(tiny_plan(task={"name": "jsonl:data/t.jsonl", "pool": 8, "config": None}, budget={"updates": 2},
                               train={"checkpoint_every": 1}, eval={"sampled": False})).arm("grpo")

    class Stop(Exception):
        pass

    def stop(update):
        if update == 1:
            raise Stop

    out = tmp_path / "run"
    with pytest.raises(Stop):
        run_training(run, out, after_update=stop)
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(RunConfigMismatchError) as e:
        run_training(run, out)
    first, here = tmp_path / "a" / "data" / "t.jsonl", tmp_path / "b" / "data" / "t.jsonl"
    assert str(e.value) == (
        f"{out} cannot be resumed: task 'jsonl:data/t.jsonl' read the data file {first} when the run started, and it "
        f"is unchanged there, but from this working directory its relative path names {here}, which does not exist; "
        f"run the command from the working directory it was first run in (where that path names {first}), or start "
        f"a new run under a new --out (not {out}); nothing was loaded or written")
    monkeypatch.chdir(tmp_path / "a")
    assert run_training(run, out)["updates"] == 2


def test_a_study_runs_budget_advice_names_a_new_study(tmp_path):
    from gradprobe.training.budget import too_small_message

    (tmp_path / "S").mkdir()
    (tmp_path / "S" / "study.json").write_text("{}")
    run = parse_plan(tiny_plan(budget={"generated_tokens": 9})).arm("grpo")
    out = tmp_path / "S" / "runs" / "grpo" / "seed0"
    msg = too_small_message(run, {"generated_tokens": (9, 280)}, out)
    assert msg == (f"budget.generated_tokens = 9 but one update of arm 'grpo' cost 280: the budget is smaller than one "
                   f"update (the run stopped after update 1, data kept in {out}); raise budget.generated_tokens to at "
                   "least 280 tokens in the plan (update 1's cost: the least that buys one update; a useful run needs "
                   "many updates' cost) and run the changed plan as a new study under a new --out (or into "
                   f"{tmp_path / 'S'} with --restart while none of its runs has finished)")


def test_a_tilde_path_is_hashed_as_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # the loader reads ~/x.jsonl as the home folder's file (as a shell does), so that is the file recorded and hashed
    assert task_data_files("jsonl:~/x.jsonl") == {"jsonl:~/x.jsonl": tmp_path / "home" / "x.jsonl"}
