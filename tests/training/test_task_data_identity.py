"""A run whose task reads a data file (``jsonl:PATH``, ``gsm8k:PATH``) records the file's resolved path and sha256 in
``config.json`` (``task_data``) and refuses to resume after the file was edited or removed, before anything is
loaded: a trial user's run resumed from its checkpoint on edited golds with no message (greedy accuracy 0.875 ->
0.25). A run from before the record resumes with one note; a task read from no file records nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gradprobe.tasks import task_data_files, task_data_identity
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import folder_files, killed_run, refused_before_loading, tiny_plan, train_tiny

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _rows(golds_shift: int = 0) -> str:
    """30 rows ``a + b =`` with their sums (``golds_shift`` added to every gold: the trial user's edit)."""
    return "".join(json.dumps({"question": f"{a} + {b} =", "answer": str(a + b + golds_shift)}) + "\n"
                   for a, b in ((i % 7 + 1, i // 7 + 2) for i in range(30)))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _killed(out: Path, spec: str):
    """Arm grpo of the tiny plan on task ``spec``, stopped after update 1's checkpoint (:func:`killed_run`)."""
    return killed_run(out, task={"name": spec, "pool": 8, "config": None})


def _notes(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]


def test_an_edited_or_missing_data_file_is_refused_on_resume_and_the_file_restored_resumes(tmp_path, capsys):
    data = tmp_path / "data" / "tasks.jsonl"
    data.parent.mkdir()
    data.write_text(_rows())
    spec, out = f"jsonl:{data}", tmp_path / "run"
    run = _killed(out, spec)
    v1 = _sha(data)
    assert json.loads((out / "config.json").read_text())["task_data"] == {
        spec: {"file": str(data.resolve()), "sha256": v1}}
    kept = folder_files(out)
    tail = (", so its remaining updates would train and evaluate on other data than its first ones; restore the data "
            f"file as it was ({data.resolve()}, sha256 {v1[:12]}), or start a new run under a new --out (not {out}); "
            "nothing was loaded or written")
    data.write_text(_rows(golds_shift=1))  # the golds edited
    v2 = _sha(data)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: task {spec!r} reads the data file {data.resolve()}, as when the run started, but "
        f"its content differs (sha256 {v1[:12]} then, {v2[:12]} now)" + tail)
    data.unlink()
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: task {spec!r} read the data file {data.resolve()} when the run started, and "
        f"{data.resolve()} is missing now (sha256 {v1[:12]} then, none now)" + tail.split(" than its first ones")[1])
    assert folder_files(out) == kept  # nothing written by the refusals
    data.write_text(_rows())  # the fix: the file as it was
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    assert _notes(capsys) == []


def test_a_run_from_before_the_record_resumes_with_one_note_and_a_damaged_record_is_refused(tmp_path, capsys):
    data = tmp_path / "tasks.jsonl"
    data.write_text(_rows())
    spec, out = f"jsonl:{data}", tmp_path / "run"
    run = _killed(out, spec)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "task_data": {"x": {"file": "x"}}}))
    assert refused_before_loading(run, out, DamagedRunFolderError) == (
        f"{out / 'config.json'} is damaged (field task_data is {{\"x\": {{\"file\": \"x\"}}}}, not an object "
        "of label (text) -> {\"file\": text, \"sha256\": 64 hex digits}): the data the run was trained on cannot be "
        f"checked; restore the file from a copy, or delete {out} to start the run over")
    del config["task_data"]  # as written before gradprobe recorded it
    (out / "config.json").write_text(json.dumps(config))
    data.write_text(_rows(golds_shift=1))  # cannot be told: accepted as before
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["resumed_from_update"] == [1]
    assert _notes(capsys) == [
        f"note: {out} was started before gradprobe recorded a task's data files and their sha256, so whether task "
        f"{spec!r} ({data.resolve()}) reads the data the run started with could not be checked; resuming"]


def test_the_same_content_at_another_path_resumes_with_a_note(tmp_path, capsys, monkeypatch):
    for d in ("a", "b"):
        (tmp_path / d / "data").mkdir(parents=True)
        (tmp_path / d / "data" / "t.jsonl").write_text(_rows())
    monkeypatch.chdir(tmp_path / "a")
    spec, out = "jsonl:data/t.jsonl", tmp_path / "run"
    run = _killed(out, spec)
    monkeypatch.chdir(tmp_path / "b")  # the project moved: the relative name finds a copy
    capsys.readouterr()
    assert run_training(run, out)["completed"]
    a, b = (tmp_path / d / "data" / "t.jsonl" for d in ("a", "b"))
    assert _notes(capsys) == [
        f"note: task 'jsonl:data/t.jsonl' reads the data file {b.resolve()}, not {a.resolve()} as when the run "
        f"started, with the same content (sha256 {_sha(a)[:12]}); resuming {out}"]


def test_a_generated_task_records_no_data(tmp_path):
    assert task_data_identity("chain_sum:min_terms=3,max_terms=4") == {}
    out = tmp_path / "run"
    assert train_tiny(out)["completed"]
    assert "task_data" not in json.loads((out / "config.json").read_text())


def test_which_files_each_task_spec_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.jsonl").write_text(_rows())
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "train.jsonl").write_text(_rows())
    f, train = (tmp_path / "f.jsonl").resolve(), (tmp_path / "dir" / "train.jsonl").resolve()
    assert task_data_files("jsonl:f.jsonl:question=q,answer=a") == {"jsonl:f.jsonl:question=q,answer=a": f}
    assert task_data_files("gsm8k:f.jsonl") == {"gsm8k:f.jsonl": f}
    assert task_data_files("jsonl:dir") == {"jsonl:dir [train.jsonl]": train}
    (tmp_path / "dir" / "test.jsonl").write_text(_rows(1))
    assert task_data_files("gsm8k:dir") == {"gsm8k:dir [train.jsonl]": train,
                                            "gsm8k:dir [test.jsonl]": train.parent / "test.jsonl"}
    assert task_data_files("jsonl:gone.jsonl") == {"jsonl:gone.jsonl": (tmp_path / "gone.jsonl").resolve()}
    for spec in ("chain_sum", "chain_sum:min_terms=2", "gsm8k", "hf:openai/gsm8k:main", "jsonl:", "basic_arithmetic"):
        assert task_data_files(spec) == {}, spec
    assert task_data_identity("jsonl:dir") == {
        "jsonl:dir [train.jsonl]": {"file": str(train), "sha256": _sha(train)},
        "jsonl:dir [test.jsonl]": {"file": str(train.parent / "test.jsonl"),
                                   "sha256": _sha(train.parent / "test.jsonl")}}
    assert task_data_identity("jsonl:gone.jsonl") == {
        "jsonl:gone.jsonl": {"file": str((tmp_path / "gone.jsonl").resolve()), "sha256": None}}
