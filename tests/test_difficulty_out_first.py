"""``rank-prompts``, ``difficulty-eval`` and ``gradprobe.rank_prompts`` refuse a bad ``--out`` before the pool.

Before, :func:`gradprobe.difficulty.rank.prepare_pool` loaded the task and built the whole pool (minutes on a large
pool) and only then created the output folder, so a file in the way, a symlink loop (``a -> a``) or an unwritable
parent was refused after that work, with the same message. The folder is now prepared first (as ``gradprobe probe``
and ``gradprobe train`` do): the task loader and the pool builder are never called on a bad ``--out``, and a folder
made for a call that is refused later (a bad pool) is removed again. The API also refuses ``out=''`` (the current
folder), as ``--out ''`` is refused on the command line.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from difficulty_calls import argv, refuse_loaders

import gradprobe
import gradprobe.difficulty.rank as rank
from gradprobe.cli import main
from gradprobe.outputs import OutputDirError

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

@pytest.fixture
def calls(monkeypatch):
    """The task, pool and model loaders, each recording its call and refusing to work
    (:func:`difficulty_calls.refuse_loaders`): ``calls == []`` means none of them ran."""
    return refuse_loaders(monkeypatch, "the bad out was refused")


def _tree(path: Path) -> list[str]:
    """Every entry under ``path`` (links not followed), relative, sorted."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))



def _loop_message(link: Path, out: Path, option: str = "--out") -> str:
    return (f"cannot create output folder {str(out)!r}: {str(link)!r} is a symlink loop ({str(link)!r} -> "
            f"{str(link)!r}: each link points to the next, so it leads to no folder, and none can be created through "
            f"it): remove the link (rm {str(link)!r}) so that {str(out)!r} is created as a folder, or point it at an "
            f"existing folder (ln -sfn FOLDER {str(link)!r}), or choose another {option}")


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
@pytest.mark.parametrize("under", ["", "run"])  # the file is --out itself, or a folder above it
def test_a_file_in_the_way_is_refused_before_the_pool_is_built(tmp_path, capsys, calls, command, under):
    (tmp_path / "f").write_text("mine")
    out = tmp_path / "f" / under if under else tmp_path / "f"
    assert main(argv(command, out)) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"gradprobe {command}: error: cannot create output folder {str(out)!r}: "
                            f"{str(tmp_path / 'f')!r} is a file, not a folder; choose another --out\n")
    assert captured.out == "" and calls == []
    assert _tree(tmp_path) == ["f"] and (tmp_path / "f").read_text() == "mine"


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
@pytest.mark.parametrize("under", ["", "run/deeper"])
def test_a_symlink_loop_is_refused_before_the_pool_is_built(tmp_path, capsys, calls, command, under):
    link = tmp_path / "a"
    link.symlink_to("a")  # a -> a
    out = link / under if under else link
    assert main(argv(command, out)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gradprobe {command}: error: {_loop_message(link, out)}\n"
    assert captured.out == "" and calls == []
    assert _tree(tmp_path) == ["a"] and os.readlink(link) == "a"  # the link is kept as it was


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
def test_an_unwritable_parent_is_refused_before_the_pool_is_built(tmp_path, capsys, calls, command, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    out = locked / "run"
    if os.access(locked, os.W_OK):  # root (CAP_DAC_OVERRIDE) writes into a read-only folder: its mkdir is refused
        real_mkdir = Path.mkdir  # as an unprivileged user's would be, with the same errno

        def mkdir(self, *args, **kwargs):
            if self == out:
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)
    try:
        assert main(argv(command, out)) == 2
    finally:
        locked.chmod(0o755)
    captured = capsys.readouterr()
    assert captured.err == (f"gradprobe {command}: error: creating/writing the output folder {str(out)!r} failed "
                            f"(Permission denied); make {str(out)!r} writable or choose another --out\n")
    assert calls == [] and _tree(tmp_path) == ["locked"]


def test_the_api_refuses_a_bad_out_before_the_pool_is_built(tmp_path, calls):
    (tmp_path / "f").write_text("mine")
    with pytest.raises(OutputDirError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=tmp_path / "f" / "run", progress=False)
    assert str(info.value) == (f"cannot create output folder {str(tmp_path / 'f' / 'run')!r}: "
                               f"{str(tmp_path / 'f')!r} is a file, not a folder; choose another out")
    link = tmp_path / "a"
    link.symlink_to("a")
    with pytest.raises(OutputDirError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=str(link), progress=False)
    assert str(info.value) == _loop_message(link, link, option="out")
    assert calls == [] and _tree(tmp_path) == ["a", "f"]


def test_the_api_names_its_out_argument_for_a_probe_folder(tmp_path, calls):
    """A folder holding a ``gradprobe probe``'s probe.json was refused before the pool already; the API's fix now
    names its argument (``choose another out``), as its other output fixes do, not the command line's ``--out``."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "probe.json").write_text('{"rewards": []}')
    with pytest.raises(OutputDirError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=probe, progress=False)
    assert str(info.value) == (
        f"out {str(probe)!r} holds a probe (`gradprobe probe`) (probe.json), not the output of `gradprobe "
        "rank-prompts`; a ranking there would mix its files into it: choose another out (an empty folder, or an "
        "earlier ranking's)")
    assert calls == [] and _tree(tmp_path) == ["probe", "probe/probe.json"]


@pytest.mark.parametrize("out", ["", "  "])
def test_the_api_refuses_an_empty_out_as_the_command_line_does(tmp_path, monkeypatch, calls, out):
    monkeypatch.chdir(tmp_path)  # restored by monkeypatch
    with pytest.raises(ValueError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=out, progress=False)
    assert str(info.value) == f"out is empty ({out!r}): give a path (out='.' is the current folder)"
    assert calls == [] and _tree(tmp_path) == []


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
def test_the_folder_is_made_before_the_pool_and_removed_when_the_pool_is_refused(tmp_path, capsys, monkeypatch,
                                                                              command):
    """The folder exists (made and proven writable) when the pool is built; a pool refused after it (here: an empty
    one) leaves no folder behind, its new parents included."""
    out = tmp_path / "new" / "run"
    seen = []

    def empty_pool(task, n, **kwargs):
        seen.append(out.is_dir())
        return []

    monkeypatch.setattr(rank, "pool_problems", empty_pool)
    assert main(argv(command, out)) == 2
    assert capsys.readouterr().err == (f"gradprobe {command}: error: task 'chain_sum' returned an empty pool for "
                                       "--pool 4\n")
    assert seen == [True] and _tree(tmp_path) == []


def test_a_good_out_still_ranks_with_the_folder_made_first(tmp_path, capsys, monkeypatch):
    """A new folder: made before the pool is built, then ranking.csv and rank.json written into it."""
    out = tmp_path / "new" / "rank"
    real, seen = rank.pool_problems, []

    def spy(*args, **kwargs):
        seen.append(out.is_dir())
        return real(*args, **kwargs)

    monkeypatch.setattr(rank, "pool_problems", spy)
    assert main(argv("rank-prompts", out)) == 0, capsys.readouterr().err
    assert seen == [True]
    assert _tree(tmp_path) == ["new", "new/rank", "new/rank/rank.json", "new/rank/ranking.csv"]
    assert len((out / "ranking.csv").read_text().splitlines()) == 1 + 4  # header and the 4 pool prompts
