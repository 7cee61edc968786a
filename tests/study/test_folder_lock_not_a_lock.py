"""A file named as gradprobe's lock file (a run folder's ``.lock``, a study's ``.study.lock``) that is no lock of
gradprobe's was overwritten: the lock is opened in append mode and its text replaced by ``pid N``, so a user's own
``.lock`` lost its content, and a ``.lock`` that is a symbolic link had the file it points to emptied. Both are now
refused before anything is written, naming the file and the fix; a lock file a killed run left (``pid N`` or empty)
is still taken over."""

from __future__ import annotations

import os

import pytest

import gradprobe.training.run as training_run
from gradprobe.cli import main
from gradprobe.study.folder import FolderLock, StudyError, hold_run_folder

from helpers_training import tiny_plan


def test_a_users_file_named_lock_is_refused_and_kept(tmp_path):
    (tmp_path / ".lock").write_text("my notes\n")
    with pytest.raises(StudyError) as e:
        with hold_run_folder(tmp_path):
            pass
    assert str(e.value) == (
        f"{tmp_path / '.lock'} holds text that is no lock's (gradprobe's lock file of a run folder holds 'pid N' or "
        f"nothing): gradprobe keeps the run folder's lock under this name and would overwrite it; move it out of "
        f"'{tmp_path}' (mv '{tmp_path / '.lock'}' SOMEWHERE), or choose another folder; nothing was written")
    assert (tmp_path / ".lock").read_text() == "my notes\n" and os.listdir(tmp_path) == [".lock"]


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    (tmp_path / "S").mkdir()
    (tmp_path / "S" / ".study.lock").symlink_to(tmp_path / "precious.txt")
    with pytest.raises(StudyError, match=r"\.study\.lock is a symbolic link \(gradprobe's lock file of a study "):
        FolderLock(tmp_path / "S", ".study.lock", wait=False, what="study folder")
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    (tmp_path / "S" / ".study.lock").unlink()
    (tmp_path / "S" / ".study.lock").symlink_to(tmp_path / "nowhere")  # a broken link: no file made through it
    with pytest.raises(StudyError, match="is a symbolic link"):
        FolderLock(tmp_path / "S", ".study.lock", wait=False, what="study folder")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("left", ["pid 4242", "", "pid 17\n"])
def test_a_lock_file_a_killed_run_left_is_taken_over(tmp_path, left):
    (tmp_path / ".lock").write_text(left)
    (tmp_path / "config.json").write_text("{}")  # beside the run's files: the lock file is kept, emptied
    with hold_run_folder(tmp_path):
        assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()}"
    assert (tmp_path / ".lock").read_text() == ""


def test_gradprobe_train_into_a_folder_with_a_users_lock_file_is_refused_before_compute(tmp_path, monkeypatch,
                                                                                        capsys):
    (tmp_path / "plan.toml").write_text(tiny_plan())
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".lock").write_text("my notes\n")
    monkeypatch.setattr(training_run, "run_training", lambda *a, **k: pytest.fail("trained"))
    status = main(["train", "--plan", str(tmp_path / "plan.toml"), "--arm", "grpo", "--out", str(tmp_path / "out"),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and "out/.lock holds text that is no lock's" in err and err.count("\n") == 1
    assert (tmp_path / "out" / ".lock").read_text() == "my notes\n" and os.listdir(tmp_path / "out") == [".lock"]


def test_a_lock_file_of_bytes_that_are_no_text_is_refused_naming_it(tmp_path):
    """Was: ``'utf-8' codec can't decode byte 0xff``, naming neither the file nor the fix."""
    (tmp_path / ".study.lock").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(StudyError, match=r"\.study\.lock holds text that is no lock's .* nothing was written$"):
        FolderLock(tmp_path, ".study.lock", wait=False, what="study folder")
    assert (tmp_path / ".study.lock").read_bytes() == b"\xff\xfe\x00binary"
