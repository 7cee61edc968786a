"""A study records which data its task reads (study.json task_data: each file's resolved path and sha256) and
refuses, before any run, to train the rest of its runs on an edited data file: a trial user's study scored the same
initial policy 0.875 for seed 0 and 0.25 for seed 1 (the golds edited between the two) and averaged them. The same
content at another path is accepted; a study from before the record continues with one note; a generated task
records nothing."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_study

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _rows(golds_shift: int = 0) -> str:
    """30 rows ``a + b =`` with their sums (``golds_shift`` added to every gold: the trial user's edit)."""
    return "".join(json.dumps({"question": f"{a} + {b} =", "answer": str(a + b + golds_shift)}) + "\n"
                   for a, b in ((i % 7 + 1, i // 7 + 2) for i in range(30)))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _study(tmp_path, spec: str):
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(task={"name": spec, "pool": 8, "config": None}, seeds=[0, 1]))
    return plan_path, tmp_path / "study"


def _run(plan_path, out):
    return run_study(plan_path, out, executor="inline", probe=False, analyze=False)


def _notes(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]


def test_an_edited_data_file_is_refused_while_runs_remain_and_restored_continues(tmp_path, capsys):
    data = tmp_path / "tasks.jsonl"
    data.write_text(_rows())
    spec = f"jsonl:{data}"
    plan_path, out = _study(tmp_path, spec)
    assert _run(plan_path, out).ok
    assert json.loads((out / "study.json").read_text())["task_data"] == {
        spec: {"file": str(data.resolve()), "sha256": _sha(_rows())}}
    shutil.rmtree(out / "runs" / "grpo" / "seed1")  # seed 1 still to train
    data.write_text(_rows(golds_shift=1))
    v1, v2 = _sha(_rows())[:12], _sha(_rows(1))[:12]
    with pytest.raises(StudyError) as e:
        _run(plan_path, out)
    assert str(e.value) == (
        f"{out}: task {spec!r} reads the data file {data.resolve()}, as when the study started, but its content "
        f"differs (sha256 {v1} then, {v2} now) ({out / 'study.json'} task_data): its remaining runs would train and "
        "evaluate on other data than its finished ones, and the analysis would average the two; restore the data file "
        f"as it was ({data.resolve()}, sha256 {v1}), or run the plan as a new study under a new --out")
    assert not (out / "runs" / "grpo" / "seed1").exists()  # nothing was run
    data.unlink()  # a missing file: the study's preflight names it (loading the task), before the record's check
    with pytest.raises(StudyError) as e:
        _run(plan_path, out)
    assert f"JSONL source {data} does not exist" in str(e.value)
    data.write_text(_rows())  # the fix: the file as it was
    capsys.readouterr()
    assert _run(plan_path, out).ok
    assert (out / "runs" / "grpo" / "seed1" / "summary.json").is_file()
    assert _notes(capsys) == []


def test_same_content_elsewhere_is_accepted_and_an_old_study_continues_with_a_note(tmp_path, capsys, monkeypatch):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "t.jsonl").write_text(_rows())
    monkeypatch.chdir(tmp_path / "a")
    plan_path, out = _study(tmp_path, "jsonl:t.jsonl")
    assert _run(plan_path, out).ok
    study = json.loads((out / "study.json").read_text())
    shutil.rmtree(out / "runs" / "grpo" / "seed1")
    monkeypatch.chdir(tmp_path / "b")  # a copy of the same content
    capsys.readouterr()
    assert _run(plan_path, out).ok
    a, b = ((tmp_path / d / "t.jsonl").resolve() for d in ("a", "b"))
    assert _notes(capsys) == [
        f"note: task 'jsonl:t.jsonl' reads the data file {b}, not {a} as when the study started, with the same "
        f"content (sha256 {_sha(_rows())[:12]}); continuing the study in {out}"]
    assert json.loads((out / "study.json").read_text())["task_data"] == study["task_data"]  # the record kept
    # a study from before the record: not refused, one note, nothing recorded
    study = json.loads((out / "study.json").read_text())
    del study["task_data"]
    (out / "study.json").write_text(json.dumps(study))
    shutil.rmtree(out / "runs" / "grpo" / "seed1")
    (tmp_path / "b" / "t.jsonl").write_text(_rows(golds_shift=1))
    capsys.readouterr()
    assert _run(plan_path, out).ok
    assert _notes(capsys) == [
        f"note: {out} was started before gradprobe recorded a task's data files and their sha256, so whether task "
        f"'jsonl:t.jsonl' ({b}) reads the data its runs started with could not be checked; continuing the study"]
    assert "task_data" not in json.loads((out / "study.json").read_text())


def test_a_damaged_record_is_refused_and_a_generated_task_records_nothing(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text(_rows())
    plan_path, out = _study(tmp_path, f"jsonl:{data}")
    assert _run(plan_path, out).ok
    study = json.loads((out / "study.json").read_text())
    (out / "study.json").write_text(json.dumps({**study, "task_data": [1]}))
    with pytest.raises(StudyError) as e:
        _run(plan_path, out)
    assert str(e.value).startswith(
        f"{out / 'study.json'} field task_data is [1], not an object of label (text) -> {{\"file\": text, \"sha256\": "
        f"64 hex digits}}: the file is damaged, so whether task 'jsonl:{data}' reads the data the study's runs started "
        "with cannot be told; restore it from a copy")
    plan2 = tmp_path / "gen.toml"
    plan2.write_text(tiny_plan(seeds=[0]))
    assert _run(plan2, tmp_path / "gen").ok
    assert "task_data" not in json.loads((tmp_path / "gen" / "study.json").read_text())
