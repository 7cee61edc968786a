"""``hf:FOLDER`` naming a local folder (``datasets.load_dataset`` reads it) is recorded like ``jsonl:`` data: every
file under it that ``datasets`` would see, with its sha256, so a resume after a file was edited, or one was added,
is refused. Before, ``hf:`` recorded nothing, so a run on a local folder resumed on edited golds without a word."""

from __future__ import annotations

import hashlib
import json

import pytest

from gradprobe.tasks import task_data_files
from gradprobe.training import run as run_module
from gradprobe.training.errors import RunConfigMismatchError
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import killed_run

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _rows(shift: int = 0) -> str:
    return "".join(json.dumps({"question": f"{a} + {b} =", "answer": str(a + b + shift)}) + "\n"
                   for a, b in ((i % 7 + 1, i // 7 + 2) for i in range(30)))


def test_files_of_a_local_hf_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.jsonl").write_text(_rows())
    (folder / "README.md").write_text("---\nconfigs: []\n---\n")
    for hidden in (".DS_Store", ".git/HEAD", "__pycache__/x.pyc", "data/._train.jsonl"):
        (folder / hidden).parent.mkdir(parents=True, exist_ok=True)
        (folder / hidden).write_text("x")
    spec = "hf:ds:heldout_split=none"
    assert task_data_files(spec) == {f"{spec} [README.md]": (folder / "README.md").resolve(),
                                     f"{spec} [data/train.jsonl]": (folder / "data" / "train.jsonl").resolve()}
    for hub in ("hf:openai/gsm8k:main", "hf:missing_folder", "hf:", "hf:ds:a:b:c"):
        assert task_data_files(hub) == {}, hub


def test_a_run_on_a_local_hf_folder_refuses_to_resume_on_edited_data(tmp_path):
    pytest.importorskip("datasets")
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "train.jsonl").write_text(_rows())
    spec, out = f"hf:{folder}:heldout_split=none", tmp_path / "run"
    run = killed_run(out, task={"name": spec, "pool": 8, "config": None})
    sha = hashlib.sha256((folder / "train.jsonl").read_bytes()).hexdigest()
    label = f"{spec} [train.jsonl]"
    assert json.loads((out / "config.json").read_text())["task_data"] == {
        label: {"file": str((folder / "train.jsonl").resolve()), "sha256": sha}}
    (folder / "train.jsonl").write_text(_rows(shift=1))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(run_module, "_open_session", lambda *a, **k: pytest.fail("the policy was loaded before the refusal"))
        with pytest.raises(RunConfigMismatchError, match=r"its content differs \(sha256 " + sha[:12]):
            run_training(run, out)
    (folder / "train.jsonl").write_text(_rows())
    assert run_training(run, out)["completed"]
