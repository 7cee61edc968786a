"""gradprobe's one atomic writer (:func:`gradprobe.outputs.write_bytes_atomic`, and ``write_text_atomic`` on it)
refuses a target file that is a symbolic link in a loop (``self -> self``, ``a -> b -> a``, or a link into a looping
folder) with errno ELOOP, naming the loop, with nothing written: ``os.replace`` used to replace the link silently with
a regular file. The refusal lived in calib (``calib.files``), so only calib's writes had it; it is gradprobe's now
(:func:`gradprobe.outputs.refuse_looping_file`), which calib re-exports. A plain path and a link to an existing file
write as before (the link is replaced by the file: ``os.replace`` replaces a link, it does not write through it), at
the cost of one ``lstat``."""

from __future__ import annotations

import errno
import os

import pytest

import calib.files
from gradprobe import outputs
from gradprobe.outputs import OutputDirError, naming_out, write_bytes_atomic, write_text_atomic

WRITERS = [pytest.param(lambda p: write_bytes_atomic(p, b"data"), id="bytes"),
           pytest.param(lambda p: write_text_atomic(p, "data"), id="text")]


@pytest.fixture
def loops(tmp_path):
    """``self -> self`` and ``a -> b -> a`` (relative links) in a fresh folder."""
    (tmp_path / "self").symlink_to("self")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    return tmp_path


def _file_loop_text(path, chain: list, fix: str = "choose another --out") -> str:
    shown = " -> ".join(repr(str(x)) for x in chain)
    return (f"{str(path)!r} is a symlink loop ({shown}: each link points to the next, so it leads to no file, and the "
            f"write would replace the link with a regular file): remove the link (rm {str(path)!r}) so that the file "
            f"is written there, or point it at a file (ln -sfn FILE {str(path)!r}), or {fix}")


@pytest.mark.parametrize("write", WRITERS)
@pytest.mark.parametrize("name, chain", [("self", ["self", "self"]), ("a", ["a", "b", "a"])])
def test_a_looping_target_file_is_refused_and_the_link_kept(loops, write, name, chain):
    """Was: no error, the link replaced by a regular file holding b"data"."""
    with pytest.raises(OutputDirError) as refused:
        write(loops / name)
    assert refused.value.errno == errno.ELOOP
    assert str(refused.value) == _file_loop_text(loops / name, [loops / x for x in chain])
    assert (loops / name).is_symlink() and os.readlink(loops / name) == chain[1]
    assert sorted(os.listdir(loops)) == ["a", "b", "self"]  # no .tmp left, nothing written


def test_a_link_into_a_looping_folder_is_refused_as_leading_into_a_loop(loops):
    """``c -> a/sub`` with ``a <-> b``: no link repeats from ``c``; it leads into a loop, as the folder refusal says
    (the shared wording, ``gradprobe.outputs._loop_words``)."""
    (loops / "c").symlink_to("a/sub")
    with pytest.raises(OutputDirError) as refused:
        write_bytes_atomic(loops / "c", b"data")
    c = str(loops / "c")
    assert refused.value.errno == errno.ELOOP
    assert str(refused.value).startswith(f"{c!r} leads into a symlink loop ({c!r} -> 'a/sub', a path through links "
                                         "that point back to each other, so it leads to no file")
    assert os.readlink(loops / "c") == "a/sub" and sorted(os.listdir(loops)) == ["a", "b", "c", "self"]


@pytest.mark.parametrize("write", WRITERS)
def test_a_file_under_a_looping_folder_is_refused_in_the_folders_words(loops, write):
    """Was: ``writing '.../a/f.json' failed (Too many levels of symbolic links); ... so that '.../a/f.json' is
    created as a folder`` (a file named as the folder to create). Now the folder's refusal, as every ``--out``."""
    with pytest.raises(OutputDirError) as refused:
        write(loops / "a" / "f.json")
    with pytest.raises(OutputDirError) as folder:
        outputs.refuse_file_in_the_way(loops / "a")
    assert refused.value.errno == errno.ELOOP and str(refused.value) == str(folder.value)
    assert str(refused.value).startswith(f"cannot create output folder {str(loops / 'a')!r}: {str(loops / 'a')!r} is "
                                         "a symlink loop (")
    assert sorted(os.listdir(loops)) == ["a", "b", "self"]


def test_inside_the_python_api_the_fix_names_its_argument(loops):
    with naming_out("dir"):
        with pytest.raises(OutputDirError) as refused:
            write_text_atomic(loops / "self", "data")
        with pytest.raises(OutputDirError) as given:  # a caller's own fix wins
            outputs.refuse_looping_file(loops / "a", "choose another --validation-out")
    assert str(refused.value) == _file_loop_text(loops / "self", [loops / "self"] * 2, "choose another dir")
    assert str(given.value) == _file_loop_text(loops / "a", [loops / "a", loops / "b", loops / "a"],
                                               "choose another --validation-out")
    assert os.readlink(loops / "self") == "self"


def test_a_plain_path_and_a_link_to_a_file_write_as_before_for_one_lstat(tmp_path, monkeypatch):
    """No refusal: a plain path is written; a link to an existing file is replaced by the new file (``os.replace``
    replaces the link itself; its old target is left as it was). A plain path's write costs one ``lstat``."""
    target, link, plain = tmp_path / "target.txt", tmp_path / "link.txt", tmp_path / "plain.txt"
    target.write_text("old")
    link.symlink_to("target.txt")
    assert outputs.refuse_looping_file(plain) is None and outputs.refuse_looping_file(link) is None
    calls = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    write_bytes_atomic(plain, b"new")
    assert calls == ["lstat"]
    monkeypatch.undo()
    write_text_atomic(link, "new")
    assert plain.read_bytes() == b"new" and link.read_text() == "new"
    assert not link.is_symlink() and target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "plain.txt", "target.txt"]


def test_calib_writes_through_gradprobes_refusal():
    """calib.files keeps its names (calib.cli and calib.apply import them), now gradprobe's own."""
    assert calib.files.refuse_looping_file is outputs.refuse_looping_file
    assert calib.files.write_bytes_atomic is outputs.write_bytes_atomic
    assert calib.files.write_text_atomic is outputs.write_text_atomic


@pytest.mark.parametrize("stale", ["loop", "file elsewhere"])
def test_a_stale_temporary_link_is_replaced_never_followed(tmp_path, stale):
    """``PATH.tmp`` left as a symbolic link is the writer's own name: removed and written anew (O_NOFOLLOW), the file
    it pointed to untouched; before, ``open(PATH.tmp, 'wb')`` followed it and overwrote that file (or failed, ELOOP)."""
    outside = tmp_path / "precious.txt"
    outside.write_text("precious\n")
    tmp = tmp_path / "f.json.tmp"
    tmp.symlink_to(tmp if stale == "loop" else outside)
    write_text_atomic(tmp_path / "f.json", "{}\n")
    assert (tmp_path / "f.json").read_text() == "{}\n" and not (tmp_path / "f.json").is_symlink()
    assert outside.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json", "precious.txt"]
