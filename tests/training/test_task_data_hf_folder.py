"""``hf:FOLDER`` naming a local folder (``datasets.load_dataset`` reads it) is recorded like ``jsonl:`` data: the data
files ``datasets`` resolves for it and the card files that choose them, with their sha256, so a resume after a file
was edited, or one was added, is refused. Before, ``hf:`` recorded nothing, so a run on a local folder resumed on
edited golds without a word."""

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
    (folder / "notes.txt").write_text("not data: datasets reads the .jsonl files")
    spec = "hf:ds:heldout_split=none"
    assert task_data_files(spec) == {f"{spec} [README.md]": (folder / "README.md").resolve(),
                                     f"{spec} [data/train.jsonl]": (folder / "data" / "train.jsonl").resolve()}
    # a card's configs choose the files, in a hidden folder or outside the folder too
    (tmp_path / "shared.jsonl").write_text(_rows())
    (folder / ".huggingface.yaml").write_text("configs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                              "    path: ../shared.jsonl\n")
    assert task_data_files(spec) == {f"{spec} [.huggingface.yaml]": (folder / ".huggingface.yaml").resolve(),
                                     f"{spec} [../shared.jsonl]": (tmp_path / "shared.jsonl").resolve(),
                                     f"{spec} [README.md]": (folder / "README.md").resolve()}
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


def test_an_edited_local_hf_folder_is_read_anew(tmp_path, capfd):
    """datasets' cache of a local folder with a card's configs outlived an edit of its files: the run trained on the
    old rows while recording the new file's sha256."""
    pytest.importorskip("datasets")
    from gradprobe.tasks import load_task

    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                      "    path: data/train.jsonl\n---\n")
    (folder / "data" / "train.jsonl").write_text(_rows())
    spec = f"hf:{folder}:heldout_split=none"
    assert [p.answer for p in load_task(spec).split_rows("train")[:2]] == ["3", "4"]
    (folder / "data" / "train.jsonl").write_text(_rows(shift=100))
    assert [p.answer for p in load_task(spec).split_rows("train")[:2]] == ["103", "104"]
    assert "Generating" not in capfd.readouterr().err  # read anew each time: without datasets' progress bars
    import datasets

    assert datasets.is_progress_bar_enabled()  # the setting is restored


def test_a_relative_hf_folder_resumed_from_another_directory_is_refused(tmp_path, monkeypatch):
    """From another working directory ``hf:ds`` names no local folder (datasets would read the hub, or its cache of
    a dataset named ``ds``, perhaps another folder's), so nothing was checked and the run resumed on other data."""
    pytest.importorskip("datasets")
    first, other = tmp_path / "first", tmp_path / "other"
    (first / "ds").mkdir(parents=True)
    other.mkdir()
    (first / "ds" / "train.jsonl").write_text(_rows())
    monkeypatch.chdir(first)
    spec, out = "hf:ds:heldout_split=none", tmp_path / "run"
    run = killed_run(out, task={"name": spec, "pool": 8, "config": None})
    monkeypatch.chdir(other)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(run_module, "_open_session", lambda *a, **k: pytest.fail("the policy was loaded before the refusal"))
        with pytest.raises(RunConfigMismatchError) as e:
            run_training(run, out)
    assert str(e.value).startswith(
        f"{out} cannot be resumed: task {spec!r} read the local data files {(first / 'ds' / 'train.jsonl').resolve()} "
        "when the run started (unchanged there), but from this working directory it names no local data (datasets "
        "would read the hub, or its cache of a dataset of that name)")
    assert "run the command from the working directory it was first run in" in str(e.value)
    monkeypatch.chdir(first)
    assert run_training(run, out)["completed"]


def test_a_study_on_a_relative_hf_folder_from_another_directory_is_refused(tmp_path, monkeypatch):
    """A study stopped before any run, resumed from a directory where ``hf:ds`` names no local folder, recorded
    nothing anew and went on with the hub or datasets' cache; and --reuse-runs copied runs trained on local data."""
    pytest.importorskip("datasets")
    from gradprobe.study.folder import StudyError
    from gradprobe.study.runner import run_study

    from helpers_training import tiny_plan
    from study_helpers import stopped_before_any_run

    first, other = tmp_path / "first", tmp_path / "other"
    (first / "ds").mkdir(parents=True)
    other.mkdir()
    (first / "ds" / "train.jsonl").write_text(_rows())
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(task={"name": "hf:ds:heldout_split=none", "pool": 8, "config": None}, seeds=[0]))
    monkeypatch.chdir(first)
    stopped_before_any_run(plan, tmp_path / "S")
    recorded = json.loads((tmp_path / "S" / "study.json").read_text())["task_data"]
    assert list(recorded) == ["hf:ds:heldout_split=none [train.jsonl]"]
    monkeypatch.chdir(other)
    with pytest.raises(StudyError, match="from this working directory it names no local data"):
        run_study(plan, tmp_path / "S", executor="inline", probe=False, analyze=False)
    assert json.loads((tmp_path / "S" / "study.json").read_text())["task_data"] == recorded
    monkeypatch.chdir(first)
    assert run_study(plan, tmp_path / "S", executor="inline", probe=False, analyze=False).ok
    monkeypatch.chdir(other)
    (other / "ds").mkdir()  # another folder of the same name: other data
    (other / "ds" / "train.jsonl").write_text(_rows(shift=1))
    said = []
    assert run_study(plan, tmp_path / "B", executor="inline", probe=False, analyze=False, reuse_from=[tmp_path / "S"],
                     say=said.append).ok
    line = next(s for s in said if s.startswith("--reuse-runs"))
    assert "reused 0 finished run(s)" in line and "trained on other task data" in line


def test_a_missing_hf_name_says_no_local_folder_exists_either(tmp_path, monkeypatch):
    """``hf:typo_dir`` said only "Couldn't reach 'typo_dir' on the Hub", never that no such local folder exists."""
    datasets = pytest.importorskip("datasets")
    from gradprobe.tasks import load_task

    def unreachable(name, *args, **kwargs):
        raise ConnectionError(f"Couldn't reach {name!r} on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConnectionError) as e:
        load_task("hf:typo_dir").split_rows("train")
    assert str(e.value).startswith(
        "hf:typo_dir: Couldn't reach 'typo_dir' on the Hub (LocalEntryNotFoundError); and no local folder "
        f"{tmp_path.resolve() / 'typo_dir'} exists (hf:NAME names a hub dataset, or a local folder that datasets "
        f"reads; a relative path is read from the working directory, {tmp_path}")


def test_a_record_of_every_file_in_the_folder_still_resumes(tmp_path, monkeypatch):
    """A run recorded before the record followed datasets' data files holds every file of the folder (a LICENSE,
    notes): such a file, unchanged and no longer read, is no data; one edited still counts."""
    pytest.importorskip("datasets")
    from gradprobe.tasks import task_data_identity
    from gradprobe.training.run_folder import task_data_mismatch

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "train.jsonl").write_text(_rows())
    (tmp_path / "ds" / "LICENSE").write_text("MIT\n")
    spec = "hf:ds:heldout_split=none"
    now = task_data_identity(spec)
    assert list(now) == [f"{spec} [train.jsonl]"]
    lic = tmp_path.resolve() / "ds" / "LICENSE"
    then = {**now, f"{spec} [LICENSE]": {"file": str(lic), "sha256": hashlib.sha256(b"MIT\n").hexdigest()}}
    assert task_data_mismatch(spec, then, now) is None
    (tmp_path / "ds" / "LICENSE").write_text("edited\n")
    assert "LICENSE" in task_data_mismatch(spec, then, now)[0]
