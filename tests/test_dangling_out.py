"""An output folder (``--out``) that is a broken symbolic link (to nothing), or lies under one, is refused naming the
link, its target and the fix (create the target folder, or remove the link), by every command: the check is in
:func:`gradprobe.outputs.refuse_file_in_the_way` (:func:`~gradprobe.outputs.prepare_output_dir` calls it) and in
:func:`~gradprobe.outputs.output_error`'s fix. It used to say only "creating/writing the output folder 'dangling'
failed (File exists)"."""

from __future__ import annotations

import errno
import os

import pytest

from gradprobe.cli import main
from gradprobe.outputs import OutputDirError, dangling_link, output_error, prepare_output_dir


def _fix_words(link, target) -> list[str]:
    return [f"{str(link)!r} is a symbolic link to {str(target)!r}, which does not exist (a broken link)",
            f"create the folder it points to (mkdir -p {str(target)!r})", f"remove the link (rm {str(link)!r})"]


def test_prepare_output_dir_names_the_broken_link_and_its_target(tmp_path):
    link, target = tmp_path / "dangling", tmp_path / "nowhere"
    link.symlink_to(target)
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(link)
    assert e.value.errno == errno.ENOENT
    assert str(e.value).startswith(f"cannot create output folder {str(link)!r}: ")
    for words in _fix_words(link, target):
        assert words in str(e.value)
    assert link.is_symlink() and not target.exists()  # nothing created or removed


def test_a_folder_under_a_relative_broken_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("nowhere", "dangling")
    assert dangling_link("dangling/run/a") == (tmp_path.joinpath("dangling").relative_to(tmp_path), "nowhere")
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(tmp_path.joinpath("dangling/run").relative_to(tmp_path))
    assert "'dangling' is a symbolic link to 'nowhere'" in str(e.value)
    assert "(mkdir -p 'nowhere')" in str(e.value)


def test_output_error_of_a_mkdir_site_names_the_link(tmp_path):
    link, target = tmp_path / "dangling", tmp_path / "nowhere"
    link.symlink_to(target)
    with pytest.raises(FileExistsError) as raised:
        link.mkdir(parents=True, exist_ok=True)
    err = output_error("creating/writing the output folder", link, raised.value)
    assert str(err).startswith(f"creating/writing the output folder {str(link)!r} failed (File exists); ")
    for words in _fix_words(link, target):
        assert words in str(err)


def test_no_link_no_change(tmp_path):
    assert dangling_link(tmp_path / "missing" / "run") is None
    (tmp_path / "real").mkdir()
    (tmp_path / "good").symlink_to(tmp_path / "real")
    assert dangling_link(tmp_path / "good" / "run") is None
    assert prepare_output_dir(tmp_path / "good" / "run") == tmp_path / "good" / "run"
    assert (tmp_path / "real" / "run").is_dir()


def test_gradprobe_train_refuses_a_broken_link_out(tmp_path, capsys):
    link, target = tmp_path / "dangling", tmp_path / "nowhere"
    link.symlink_to(target)
    plan = tmp_path / "plan.toml"
    from helpers_training import tiny_plan
    plan.write_text(tiny_plan(budget={"updates": 1}))
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(link), "--no-progress"]) == 2
    err = capsys.readouterr().err
    for words in _fix_words(link, target):
        assert words in err
    assert link.is_symlink() and not target.exists()
