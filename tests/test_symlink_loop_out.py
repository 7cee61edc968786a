"""An output folder (``--out``) that is a symbolic link in a loop (``a -> b -> a``), or lies under one, is refused as
"a symlink loop" naming the chain and the fix (remove the link, or point it at an existing folder). It used to be
described as a broken link whose target to create ("create the folder it points to (mkdir -p 'b')"), which fails:
``b`` exists, as a link back to ``a``. A broken link (to nothing) keeps its own message (tests/test_dangling_out.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.outputs import OutputDirError, dangling_link, link_loop, output_error, prepare_output_dir


def _loop(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    return a, b


def _loop_words(link, chain: list, out) -> list[str]:
    shown = " -> ".join(repr(str(x)) for x in chain)
    return [f"{str(link)!r} is a symlink loop ({shown}: each link points to the next, so it leads to no folder",
            f"remove the link (rm {str(link)!r}) so that {str(out)!r} is created as a folder",
            f"point it at an existing folder (ln -sfn FOLDER {str(link)!r})"]


def test_prepare_output_dir_names_a_symlink_loop_not_a_broken_link(tmp_path):
    a, b = _loop(tmp_path)
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(a)
    assert e.value.errno == errno.ELOOP
    assert str(e.value).startswith(f"cannot create output folder {str(a)!r}: ")
    for words in _loop_words(a, [a, b, a], a):
        assert words in str(e.value), str(e.value)
    assert "broken link" not in str(e.value) and "mkdir -p" not in str(e.value)
    assert a.is_symlink() and b.is_symlink()  # nothing created or removed


def test_a_folder_under_a_relative_loop_of_three_links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("b", "a")
    os.symlink("c", "b")
    os.symlink("b", "c")  # a -> b -> c -> b: the loop does not pass through a
    assert link_loop("a") == ["a", "b", "c", "b"]
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(tmp_path.joinpath("a/run").relative_to(tmp_path))
    assert e.value.errno == errno.ELOOP
    for words in _loop_words("a", ["a", "b", "c", "b"], "a/run"):
        assert words in str(e.value), str(e.value)


def test_output_error_of_a_mkdir_site_names_the_loop(tmp_path):
    a, b = _loop(tmp_path)
    with pytest.raises(OSError) as raised:
        (a / "run").mkdir(parents=True, exist_ok=True)
    err = output_error("creating/writing the output folder", a / "run", raised.value)
    assert str(err).startswith(f"creating/writing the output folder {str(a / 'run')!r} failed (Too many levels of "
                               f"symbolic links); ")
    for words in _loop_words(a, [a, b, a], a / "run"):
        assert words in str(err), str(err)
    assert "broken link" not in str(err)


def test_a_broken_link_and_a_good_link_are_no_loop(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "real").mkdir()
    (tmp_path / "good").symlink_to(tmp_path / "real")
    assert link_loop(tmp_path / "dangling") is None and link_loop(tmp_path / "good") is None
    assert link_loop(tmp_path / "missing") is None
    assert dangling_link(tmp_path / "dangling" / "run") == (tmp_path / "dangling", str(tmp_path / "nowhere"))
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(tmp_path / "dangling")
    assert e.value.errno == errno.ENOENT and "(a broken link)" in str(e.value) and "loop" not in str(e.value)


def test_gradprobe_train_refuses_a_looping_out(tmp_path, capsys):
    a, b = _loop(tmp_path)
    plan = tmp_path / "plan.toml"
    from helpers_training import tiny_plan
    plan.write_text(tiny_plan(budget={"updates": 1}))
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(a), "--no-progress"]) == 2
    err = capsys.readouterr().err
    for words in _loop_words(a, [a, b, a], a):
        assert words in err, err
    assert a.is_symlink() and b.is_symlink()


def test_probe_result_write_through_a_symlink_loop_is_refused_as_one(tmp_path):
    """ProbeResult.write(dir) where dir is a symlink loop: an OutputDirError (ELOOP) naming the loop, not the
    RuntimeError pathlib's resolve raises on a loop (Python 3.11); nothing is written."""
    import gradprobe

    result = gradprobe.load_probe(Path(__file__).resolve().parents[1] / "data" / "study_tiny" / "probe")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "self").symlink_to(tmp_path / "self")
    for out in (tmp_path / "a", tmp_path / "self", tmp_path / "a" / "deeper"):
        with pytest.raises(OutputDirError) as refused:
            result.write(out)
        assert refused.value.errno == errno.ELOOP and "is a symlink loop" in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "self"]


def test_a_link_into_a_loop_is_not_called_a_loop_itself(tmp_path):
    """c -> a/sub with a <-> b: c is no loop (no link repeats from it), it leads into one; the refusal says so."""
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "c").symlink_to("a/sub")
    with pytest.raises(OutputDirError) as refused:
        prepare_output_dir(tmp_path / "c" / "run")
    c = str(tmp_path / "c")
    assert refused.value.errno == errno.ELOOP
    assert f"{c!r} leads into a symlink loop ({c!r} -> 'a/sub', a path through links that point back" in str(
        refused.value)
    assert "is a symlink loop" not in str(refused.value)


def test_the_python_api_names_its_argument_in_output_fixes_and_the_command_line_its_flag(tmp_path, capsys):
    """A notebook user passed `out=` / `dir=`, not --out: gradprobe.train and ProbeResult.write refusals of a file or
    a symlink loop in the way say "choose another out" / "choose another dir"; the command line keeps --out, and the
    name is back to --out after the call (naming_out)."""
    import gradprobe
    from gradprobe.outputs import naming_out, out_option

    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(OutputDirError, match=r"is a file, not a folder; choose another out$"):
        gradprobe.train(Path(__file__).resolve().parents[1] / "plans" / "tiny.toml", afile / "run", arm="grpo",
                        updates=1)
    (tmp_path / "self").symlink_to(tmp_path / "self")
    result = gradprobe.load_probe(Path(__file__).resolve().parents[1] / "data" / "study_tiny" / "probe")
    with pytest.raises(OutputDirError, match=r"or choose another dir$"):
        result.write(tmp_path / "self")
    assert out_option() == "--out"
    with naming_out("out"):
        assert out_option() == "out"
    assert out_option() == "--out" and afile.read_text() == "mine"
    assert main(["train", "--plan", str(Path(__file__).resolve().parents[1] / "plans" / "tiny.toml"), "--arm", "grpo",
                 "--out", str(tmp_path / "self"), "--updates", "1"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("or choose another --out")
