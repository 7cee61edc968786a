"""``rank-prompts`` and ``difficulty-eval`` refuse an output file of theirs that is a symbolic link in a loop
before any compute, and keep the link.

Before, the folder check (:func:`gradprobe.difficulty.folder.check_output_folder`) tested each file with
``Path.exists()``, False for a looping link: a loop at ``ranking.csv`` was silently replaced by a regular file
(``to_csv`` and ``Path.replace``), a loop at ``rank.json`` or ``metrics.json`` was refused only after the compute and
then deleted by the writer's cleanup (so the message's ``rm`` named nothing), and a loop at ``reliability.png`` gave
matplotlib's bare ``[Errno 40] Too many levels of symbolic links``. Each is now refused in
:func:`gradprobe.outputs.refuse_looping_file`'s words before the task, the pool or the model is loaded.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest
from difficulty_calls import argv, refuse_loaders

import gradprobe
from gradprobe.cli import main
from gradprobe.difficulty.rank_pool import write_ranking
from gradprobe.difficulty.reliability_plot import plot_reliability
from gradprobe.outputs import OutputDirError

@pytest.fixture
def calls(monkeypatch):
    """The task, pool and model loaders, each recording its call and refusing to work
    (:func:`difficulty_calls.refuse_loaders`): ``calls == []`` means none of them ran."""
    return refuse_loaders(monkeypatch, "the looping output file was refused")



def _loop(out: Path, name: str) -> Path:
    """``out/name -> name``: a self-loop in an existing folder ``out``."""
    out.mkdir(exist_ok=True)
    link = out / name
    link.symlink_to(name)
    return link


def _message(link: Path, option: str = "--out") -> str:
    return (f"{str(link)!r} is a symlink loop ({str(link)!r} -> {str(link)!r}: each link points to the next, so it "
            f"leads to no file, and the write would replace the link with a regular file): remove the link "
            f"(rm {str(link)!r}) so that the file is written there, or point it at a file "
            f"(ln -sfn FILE {str(link)!r}), or choose another {option}")


def _kept(out: Path, link: Path) -> None:
    """The folder holds the link alone, still a link to itself."""
    assert sorted(p.name for p in out.iterdir()) == [link.name]
    assert link.is_symlink() and os.readlink(link) == link.name


@pytest.mark.parametrize("command, name", [("rank-prompts", "ranking.csv"), ("rank-prompts", "rank.json"),
                                           ("difficulty-eval", "metrics.json"),
                                           ("difficulty-eval", "reliability.png")])
def test_a_looping_output_file_is_refused_before_the_compute(tmp_path, capsys, calls, command, name):
    out = tmp_path / "o"
    link = _loop(out, name)
    assert main(argv(command, out)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gradprobe {command}: error: {_message(link)}\n"
    assert captured.out == "" and calls == []
    _kept(out, link)


def test_a_stale_temporary_name_that_is_a_link_is_replaced_not_followed(tmp_path):
    """``ranking.csv.tmp`` / ``rank.json.tmp`` left as links (a loop; a link to a user's file elsewhere): the writer's
    own names, removed and written anew (gradprobe.outputs.open_temporary); following the second link overwrote the
    user's file with the ranking."""
    outside = tmp_path / "precious.txt"
    outside.write_text("precious\n")
    out = tmp_path / "o"
    _loop(out, "ranking.csv.tmp")
    (out / "rank.json.tmp").symlink_to(outside)
    write_ranking(out, pd.DataFrame({"prompt_id": [1, 2]}), {"command": "rank-prompts"})
    assert outside.read_text() == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == ["rank.json", "ranking.csv"]
    assert not (out / "rank.json").is_symlink() and not (out / "ranking.csv").is_symlink()
    assert (out / "ranking.csv").read_text() == "prompt_id\n1\n2\n"


def test_the_api_names_its_out_argument(tmp_path, calls):
    out = tmp_path / "o"
    link = _loop(out, "rank.json")
    with pytest.raises(OutputDirError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, out=out, progress=False)
    assert str(info.value) == _message(link, option="out") and info.value.errno == errno.ELOOP
    assert calls == []
    _kept(out, link)


def test_write_ranking_refuses_a_loop_made_during_the_compute(tmp_path):
    """The writer itself (a loop made after the folder check): nothing written, the link not removed by its
    cleanup."""
    link = _loop(tmp_path, "rank.json")
    with pytest.raises(OutputDirError) as info:
        write_ranking(tmp_path, pd.DataFrame({"prompt_id": [1]}), {"command": "rank-prompts"})
    assert str(info.value) == _message(link)
    _kept(tmp_path, link)


def test_plot_reliability_refuses_a_looping_path(tmp_path):
    link = _loop(tmp_path, "reliability.png")
    with pytest.raises(OutputDirError) as info:
        plot_reliability({"estimators": {}, "baselines": {}}, link)
    assert str(info.value) == _message(link)
    _kept(tmp_path, link)
