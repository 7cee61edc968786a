"""``gradprobe probe --out D`` where a file the probe writes there (probe.json, tokens.jsonl, alignment.safetensors,
report.html, calibrated.json), a ``batch_K`` folder or D itself is a symbolic link in a loop (``D/probe.json -> x ->
D/probe.json``) is refused before anything moves or any compute runs, in the loop's words
(:func:`gradprobe.outputs.refuse_looping_file`), the link kept. It was refused as "--out 'D' holds probe.json but no
probe.json, so it is no earlier probe's" (nonsense), or, beside an earlier probe, the link was moved aside and deleted
with it. A ``probe.json`` that is a broken link (``D/probe.json -> x``, nothing at x) is named as one; a looping
``probe.json.tmp`` (the writer's own name) is removed as a killed probe's partial, as the message said it was."""

from __future__ import annotations

import errno
import os
import shlex

import pytest

from gradprobe.cli import main
from gradprobe.layout import PROBE_FILES, PROBE_JSON, UNFINISHED_PROBE
from gradprobe.outputs import OutputDirError
from gradprobe.probe.output import EARLIER, replacing_earlier_probe


def _loop(out, name: str) -> str:
    """``out/name -> ../x_name -> out/name`` (relative links, the loop the issue shows); returns the loop's chain as
    its refusal shows it."""
    (out / name).symlink_to(f"../x_{name}")
    (out.parent / f"x_{name}").symlink_to(f"{out.name}/{name}")
    path, other = str(out / name), str(out.parent / f"x_{name}")
    return f"{path!r} -> {other!r} -> {path!r}"


def _loop_text(path, chain: str, option: str = "--out") -> str:
    return (f"{str(path)!r} is a symlink loop ({chain}: each link points to the next, so it leads to no file, and the "
            f"write would replace the link with a regular file): remove the link (rm {str(path)!r}) so that the file "
            f"is written there, or point it at a file (ln -sfn FILE {str(path)!r}), or choose another {option}")


def _listing(folder) -> list:
    return sorted((p.name, os.readlink(p) if p.is_symlink() else p.read_text()) for p in folder.iterdir())


def _earlier_files(out, but: str) -> None:
    """An earlier probe's files in ``out`` (probe.json last), all but ``but``."""
    for name in PROBE_FILES:
        if name != but:
            (out / name).write_text('{"rewards": []}' if name == PROBE_JSON else f"old {name}")


def _refused(out, **kwargs) -> OutputDirError:
    with pytest.raises(OutputDirError) as refused:
        with replacing_earlier_probe(out, say=pytest.fail, **kwargs):
            pytest.fail("the probe ran")
    return refused.value


@pytest.mark.parametrize("earlier", [False, True], ids=["alone", "beside-earlier-files"])
@pytest.mark.parametrize("name", PROBE_FILES)
def test_a_looping_probe_file_is_refused_in_the_loops_words_before_anything_moves(tmp_path, name, earlier):
    """Was: "holds NAME but no probe.json" alone; beside an earlier probe, no refusal: the link moved aside and
    deleted with the earlier probe's files."""
    out = tmp_path / "out"
    out.mkdir()
    if earlier:
        _earlier_files(out, but=name)
    chain = _loop(out, name)
    before = _listing(out)
    refused = _refused(out)
    assert refused.errno == errno.ELOOP and str(refused) == _loop_text(out / name, chain)
    assert _listing(out) == before and not (out / EARLIER).exists()


def test_inside_the_python_api_the_fix_names_its_argument(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    chain = _loop(out, "report.html")
    assert str(_refused(out, label="dir")) == _loop_text(out / "report.html", chain, "dir")


def test_a_looping_batch_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _earlier_files(out, but="")
    (out / "batch_2").symlink_to("batch_2")
    before = _listing(out)
    refused = _refused(out)
    link = str(out / "batch_2")
    assert refused.errno == errno.ELOOP
    assert str(refused).startswith(f"cannot create output folder {link!r}: {link!r} is a symlink loop ({link!r} -> "
                                   f"{link!r}: each link points to the next")
    assert _listing(out) == before


def test_an_out_that_loops_is_refused(tmp_path):
    """Was: no refusal on entry (the folder is no folder: nothing to move aside)."""
    out = tmp_path / "out"
    out.symlink_to("out")
    refused = _refused(out)
    assert refused.errno == errno.ELOOP
    assert str(refused).startswith(f"cannot create output folder {str(out)!r}: {str(out)!r} is a symlink loop")
    assert os.readlink(out) == "out"


def test_a_broken_probe_json_link_is_named_as_one(tmp_path):
    """The issue's commands (``ln -s x out2/probe.json``: x relative to out2, which holds none) make a broken link;
    it was refused as "holds probe.json but no probe.json"."""
    out = tmp_path / "out2"
    out.mkdir()
    (out / PROBE_JSON).symlink_to("x")
    refused = _refused(out)
    assert refused.errno == errno.ENOENT
    assert str(refused) == (
        f"--out {str(out)!r} holds probe.json as a symbolic link to 'x', which does not exist (a broken link), so no "
        f"earlier probe's probe.json, and a probe there would replace the link with its own: remove the link (rm "
        f"{str(out / PROBE_JSON)!r}), or choose another --out; nothing was moved")
    start = str(refused).index("(rm ") + 1
    assert shlex.split(str(refused)[start:str(refused).index(")", start)]) == ["rm", str(out / PROBE_JSON)]
    assert os.readlink(out / PROBE_JSON) == "x"


def test_a_looping_tmp_partial_is_removed_as_said(tmp_path):
    """Was: said "removed what a probe killed before it was complete left ... (probe.json.tmp)", the link kept."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "probe.json.tmp").symlink_to("probe.json.tmp")
    said = []
    with replacing_earlier_probe(out, say=said.append):
        assert sorted(os.listdir(out)) == [UNFINISHED_PROBE]  # the probe's own record of what it writes
    assert said == [f"removed what a probe killed before it was complete left in {out} (probe.json.tmp)"]


def test_the_command_refuses_a_looping_probe_json_before_any_compute(tmp_path, capsys, no_compute):
    out = tmp_path / "out2"
    out.mkdir()
    chain = _loop(out, PROBE_JSON)
    assert main(["probe", "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"gradprobe probe: error: {_loop_text(out / PROBE_JSON, chain)}\n"
    assert no_compute == [] and os.readlink(out / PROBE_JSON) == f"../x_{PROBE_JSON}"


def test_the_issues_commands_are_refused_in_words_that_hold(tmp_path, capsys, monkeypatch, no_compute):
    """``mkdir out2; ln -s x out2/probe.json; ln -s out2/probe.json x`` in the current folder."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("out2")
    os.symlink("x", "out2/probe.json")
    os.symlink("out2/probe.json", "x")
    assert main(["probe", "--out", "out2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "but no probe.json" not in err
    assert err.startswith("gradprobe probe: error: --out 'out2' holds probe.json as a symbolic link to 'x', which "
                          "does not exist (a broken link)")
    assert no_compute == []
