"""``gradprobe probe --probe-batches N --out D`` where a ``D/batch_K`` it writes is no earlier probe's is refused before
any compute, naming the entry, what it is or holds and the fix; nothing is moved or deleted. It used to write into a
user's ``batch_0/`` (replacing their ``tokens.jsonl`` beside their ``notes.txt``) or through a ``batch_0`` link into a
user's folder elsewhere, and to fail only after the compute of the batches before a broken ``batch_1`` link or a file
``batch_1``. A folder named as a probe's file (``D/report.html/``) failed after the compute too ("Is a directory").

An earlier probe's batch folder is a real folder of a probe's files only, among the ``batch_0`` .. ``batch_{n-1}`` its
``probe.json`` lists (``config.probe_batches``; none for one batch): it is replaced as before. Any other ``batch_K``
(a user's folder of probe file names beside a one-batch probe, say) is kept through the replace and its rollback; it
was moved aside with the earlier probe and deleted."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.outputs import OutputDirError, write_text_atomic
from gradprobe.probe.output import EARLIER, batch_folder_count, replacing_earlier_probe

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

# the tester's P
_P = ["--prompts", "2", "--group", "4", "--heldout-prompts", "2", "--heldout-group", "4", "--rewards", "outcome",
      "--max-new-tokens", "40", "--no-progress", "--threads", "1"]


def _tree(folder: Path) -> dict:
    """Every entry under ``folder``: a file's text, a link's target, ``None`` for a folder."""
    out = {}
    for p in sorted(folder.rglob("*")):
        key = p.relative_to(folder).as_posix()
        out[key] = os.readlink(p) if p.is_symlink() else (p.read_text() if p.is_file() else None)
    return out


def _probe_json(batches: int = 1) -> str:
    """A probe.json as gradprobe writes it (``versions``, ``config``; ``config.probe_batches`` for several batches)."""
    config = {"model": "tiny", "rewards": ["outcome"], **({"probe_batches": batches} if batches > 1 else {})}
    return json.dumps({"config": config, "versions": {"gradprobe": "0"}, "rewards": []})


def _earlier(out: Path, batches: int = 1) -> Path:
    """An earlier probe of ``batches`` batches in ``out`` (with its batch_K folders), beside a user's notes.txt."""
    out.mkdir()
    (out / "probe.json").write_text(_probe_json(batches))
    (out / "report.html").write_text("old report")
    (out / "notes.txt").write_text("mine")
    for k in range(batches if batches > 1 else 0):
        (out / f"batch_{k}").mkdir()
        for name in ("alignment.safetensors", "tokens.jsonl", "probe.json"):
            (out / f"batch_{k}" / name).write_text(f"old batch {k} {name}")
    return out


def _refused(out: Path, capsys, *flags: str) -> str:
    """Run the command into ``out``: exit 2; its one error line, without the prefix."""
    assert main(["probe", *_P, *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe probe: error: ") and err.count("\n") == 1, err
    return err.removeprefix("gradprobe probe: error: ").rstrip("\n")


def test_the_testers_batch_folder_of_a_users_files_is_refused_before_any_compute(tmp_path, capsys, no_compute,
                                                                               monkeypatch):
    """``mkdir -p K/batch_0; echo '{"user":"data"}' > K/batch_0/tokens.jsonl; echo mine > K/batch_0/notes.txt``."""
    monkeypatch.chdir(tmp_path)
    Path("K/batch_0").mkdir(parents=True)
    Path("K/batch_0/tokens.jsonl").write_text('{"user":"data"}\n')
    Path("K/batch_0/notes.txt").write_text("mine\n")
    before = _tree(Path("K"))
    assert _refused(Path("K"), capsys, "--probe-batches", "2") == (
        "--out 'K' holds batch_0/ (notes.txt, tokens.jsonl), where the probe writes batch 0 of its 2 probe batches, "
        "and it is no earlier probe's batch folder: it holds notes.txt, which no probe writes. The probe would "
        "overwrite tokens.jsonl and mix its files with notes.txt there. Move batch_0/ out of 'K' (or rename it), or "
        "choose another --out; nothing was moved")
    assert no_compute == [] and _tree(Path("K")) == before


def test_a_batch_folder_linked_to_a_users_folder_elsewhere_is_refused(tmp_path, capsys, no_compute):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "tokens.jsonl").write_text("my data")
    out = tmp_path / "K"
    out.mkdir()
    (out / "batch_0").symlink_to(mine)
    assert _refused(out, capsys, "--probe-batches", "2") == (
        f"--out {str(out)!r} holds batch_0 as a symbolic link to the folder {str(mine)!r}, where the probe writes "
        f"batch 0 of its 2 probe batches: it would write its files into that folder outside {str(out)!r}, over any of "
        f"its names there. Remove the link (rm {str(out / 'batch_0')!r}; the folder it points to is kept), or choose "
        "another --out; nothing was moved")
    assert no_compute == [] and _tree(mine) == {"tokens.jsonl": "my data"} and _tree(out) == {"batch_0": str(mine)}


def test_the_same_link_beside_an_earlier_two_batch_probe_is_no_earlier_probes(tmp_path, capsys, no_compute):
    """Was: moved aside as the earlier probe's batch folder and deleted (the link only), or written through."""
    out = _earlier(tmp_path / "K", batches=2)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "probe.json").write_text("my data")
    (out / "batch_1").rename(tmp_path / "old_batch_1")
    (out / "batch_1").symlink_to(mine)
    before = _tree(out)
    assert _refused(out, capsys, "--probe-batches", "2").startswith(
        f"--out {str(out)!r} holds batch_1 as a symbolic link to the folder {str(mine)!r}, where the probe writes "
        "batch 1 of its 2 probe batches")
    assert no_compute == [] and _tree(out) == before and _tree(mine) == {"probe.json": "my data"}


def test_a_broken_batch_link_is_refused_before_batch_0_is_computed(tmp_path, capsys, no_compute):
    """Was: refused after batch 0's compute (11-14 s on the tiny tier)."""
    out = tmp_path / "K"
    out.mkdir()
    (out / "batch_1").symlink_to("nowhere")
    assert _refused(out, capsys, "--probe-batches", "2") == (
        f"--out {str(out)!r} holds batch_1 as a symbolic link to 'nowhere', which does not exist (a broken link), "
        "where the probe writes batch 1 of its 2 probe batches: it could not make that folder and would fail there, "
        f"after computing batch 0. Remove the link (rm {str(out / 'batch_1')!r}), or choose another --out; nothing "
        "was moved")
    assert no_compute == [] and os.readlink(out / "batch_1") == "nowhere"


def test_a_file_named_as_a_batch_folder_is_refused(tmp_path, capsys, no_compute):
    out = tmp_path / "K"
    out.mkdir()
    (out / "batch_2").write_text("my batch_2 notes")
    assert _refused(out, capsys, "--probe-batches", "3") == (
        f"--out {str(out)!r} holds batch_2, a file, not a folder, where the probe writes batch 2 of its 3 probe "
        "batches: it could not make that folder and would fail there, after computing batches 0, 1. Move the file "
        f"out of {str(out)!r} (or rename it), or choose another --out; nothing was moved")
    assert no_compute == [] and _tree(out) == {"batch_2": "my batch_2 notes"}


@pytest.mark.parametrize("name", ["report.html", "probe.json", "tokens.jsonl.tmp"])
def test_a_folder_named_as_a_probe_file_is_refused_before_any_compute(tmp_path, capsys, no_compute, name):
    """Was (report.html): ``writing 'D1/report.html' failed (Is a directory)`` after the compute."""
    out = _earlier(tmp_path / "D1")
    (out / name).unlink(missing_ok=True)  # the folder in its place (probe.json: no earlier probe's then)
    (out / name).mkdir()
    (out / name / "inside.txt").write_text("mine")
    before = _tree(out)
    file = name.removesuffix(".tmp")
    via = f" through the temporary file {name}" if name != file else ""
    assert _refused(out, capsys) == (
        f"--out {str(out)!r} holds {name} as a folder, not a file, where a probe writes its {file}{via}: writing it "
        f"would fail after the probe's compute (Is a directory). Move {name} out of {str(out)!r} (or rename it), or "
        "choose another --out; nothing was moved")
    assert no_compute == [] and _tree(out) == before


def test_a_users_batch_folder_beside_a_one_batch_probe_is_no_earlier_probes(tmp_path, capsys, no_compute):
    """A batch_0 of a probe's file names only, beside a probe.json of one batch (which writes none): not its."""
    out = _earlier(tmp_path / "K")
    (out / "batch_0").mkdir()
    (out / "batch_0" / "tokens.jsonl").write_text("my tokens")
    before = _tree(out)
    assert _refused(out, capsys, "--probe-batches", "2") == (
        f"--out {str(out)!r} holds batch_0/ (tokens.jsonl), where the probe writes batch 0 of its 2 probe batches, and "
        "it is no earlier probe's batch folder: the earlier probe there wrote none, as its probe.json lists one probe "
        f"batch. The probe would overwrite tokens.jsonl there. Move batch_0/ out of {str(out)!r} (or rename it), or "
        "choose another --out; nothing was moved")
    assert no_compute == [] and _tree(out) == before


def test_a_batch_folder_beyond_the_earlier_probes_is_refused(tmp_path, capsys, no_compute):
    out = _earlier(tmp_path / "K", batches=2)
    (out / "batch_2").mkdir()
    (out / "batch_2" / "probe.json").write_text("my probe.json")
    before = _tree(out)
    assert _refused(out, capsys, "--probe-batches", "3") == (
        f"--out {str(out)!r} holds batch_2/ (probe.json), where the probe writes batch 2 of its 3 probe batches, and "
        "it is no earlier probe's batch folder: the earlier probe there wrote batch_0 to batch_1 only, as its "
        "probe.json lists 2. The probe would overwrite probe.json there. Move batch_2/ out of "
        f"{str(out)!r} (or rename it), or choose another --out; nothing was moved")
    assert no_compute == [] and _tree(out) == before


def test_the_python_api_refuses_before_any_compute_naming_its_argument(tmp_path, no_compute):
    out = tmp_path / "K"
    (out / "batch_1").mkdir(parents=True)
    (out / "batch_1" / "notes.txt").write_text("mine")
    with pytest.raises(OutputDirError) as refused:
        gradprobe.probe(out=out, probe_batches=2, rewards=["outcome"])
    assert str(refused.value).startswith(f"out {str(out)!r} holds batch_1/ (notes.txt), where the probe writes batch "
                                         "1 of its 2 probe batches")
    assert str(refused.value).endswith("or choose another out; nothing was moved")
    assert no_compute == [] and _tree(out) == {"batch_1": None, "batch_1/notes.txt": "mine"}


def test_batch_folder_count():
    assert [batch_folder_count(n) for n in (1, 2, 5)] == [0, 2, 5]
    assert [batch_folder_count(n, c) for n, c in ((1, 1), (1, 2), (3, 2))] == [2, 3, 9]
    assert [batch_folder_count(n) for n in (0, -1, "2", True)] == [0, 0, 0, 0]  # the probe refuses these itself


@pytest.mark.parametrize("notes", [False, True], ids=["probe-names-only", "with-notes"])
@pytest.mark.parametrize("fails", [False, True], ids=["replaced", "rolled-back"])
def test_a_users_batch_folder_beside_a_one_batch_probe_is_kept_by_the_replace(tmp_path, fails, notes):
    """``--probe-batches 1`` (no batch folders written): the user's batch_0 of a probe's file names only was moved
    aside with the earlier probe and deleted (or, after a failure, deleted by the rollback); one with the user's
    notes.txt too was refused as "an earlier probe whose batch folders batch_0/ also hold other files"."""
    out = _earlier(tmp_path / "K")
    (out / "batch_0").mkdir()
    (out / "batch_0" / "tokens.jsonl").write_text("my tokens")
    if notes:
        (out / "batch_0" / "notes.txt").write_text("my notes")
    before = _tree(out)
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with replacing_earlier_probe(out, say=pytest.fail) as folder:
            assert folder.earlier == ["probe.json", "report.html"] and folder.kept == ["batch_0"]
            write_text_atomic(out / "probe.json", "new probe")
            if fails:
                raise RuntimeError("the probe failed")
    if fails:
        assert _tree(out) == before
    else:
        mine = {"batch_0/notes.txt": "my notes"} if notes else {}
        assert _tree(out) == {"batch_0": None, "batch_0/tokens.jsonl": "my tokens", **mine, "notes.txt": "mine",
                              "probe.json": "new probe"}


def test_a_failed_probe_removes_its_batch_folders_and_keeps_a_users(tmp_path):
    out = _earlier(tmp_path / "K", batches=2)
    (out / "batch_7").mkdir()
    (out / "batch_7" / "alignment.safetensors").write_text("my file")
    before = _tree(out)
    with pytest.raises(RuntimeError):
        with replacing_earlier_probe(out, say=pytest.fail, batch_folders=3) as folder:
            assert folder.earlier == ["batch_0", "batch_1", "probe.json", "report.html"]
            for k in range(3):
                (out / f"batch_{k}").mkdir()
                (out / f"batch_{k}" / "tokens.jsonl").write_text("new")
            raise RuntimeError("the probe failed")
    assert _tree(out) == before


def test_a_killed_probes_leftover_is_restored_keeping_a_users_batch_folder(tmp_path):
    """A probe killed (SIGKILL) after it moved a one-batch probe aside: the next one deleted every batch_K of probe
    file names as the killed probe's unfinished files, the user's too."""
    out = tmp_path / "K"
    (out / EARLIER).mkdir(parents=True)
    (out / EARLIER / "probe.json").write_text(_probe_json())
    (out / EARLIER / "report.html").write_text("old report")
    (out / "tokens.jsonl").write_text("the killed probe's")
    (out / "batch_0").mkdir()
    (out / "batch_0" / "tokens.jsonl").write_text("my tokens")
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert folder.earlier == ["probe.json", "report.html"]
        write_text_atomic(out / "probe.json", "new probe")
    assert said == [f"restored the earlier probe in {out} from {EARLIER}/ (probe.json, report.html), left by a probe "
                    "that was killed; its unfinished files (tokens.jsonl) were deleted"]
    assert _tree(out) == {"batch_0": None, "batch_0/tokens.jsonl": "my tokens", "probe.json": "new probe"}


def _wrote(out_text: str) -> list[str]:
    line = [x for x in out_text.splitlines() if x.startswith("wrote ")][-1]
    return re.split(r", | and ", line.removeprefix("wrote "))


def _copies_check_the_batch_folders(probe, tmp_path: Path) -> None:
    """``ProbeResult.write`` of a 2-batch probe checks the batch folders it copies as the probe does: a user's
    ``batch_0`` (its own probe.json overwritten before), a ``batch_1`` linked to a folder elsewhere (written through
    before) and a file ``batch_0`` (a bare FileExistsError partway before) are refused, nothing written; into an empty
    folder both batch folders are copied."""
    mine, elsewhere, linked, filed = (tmp_path / name for name in ("mine", "elsewhere", "linked", "filed"))
    (mine / "batch_0").mkdir(parents=True)
    (mine / "batch_0" / "notes.txt").write_text("k")
    (mine / "batch_0" / "probe.json").write_text('{"mine": 1}')
    elsewhere.mkdir()
    (elsewhere / "probe.json").write_text("precious")
    linked.mkdir()
    (linked / "batch_1").symlink_to(elsewhere)
    filed.mkdir()
    (filed / "batch_0").write_text("a file")
    before = {dest: _tree(dest) for dest in (mine, elsewhere, linked, filed)}
    for dest in (mine, linked, filed):
        with pytest.raises(OutputDirError, match=r"^dir .* holds batch_[01]"):
            probe.write(dest)
    assert {dest: _tree(dest) for dest in before} == before
    assert sorted(p.name for p in linked.iterdir()) == ["batch_1"]
    copy = probe.write(tmp_path / "copy")
    assert sorted(p.name for p in copy.iterdir()) == ["batch_0", "batch_1", "probe.json", "report.html"]


def test_real_runs_replace_an_earlier_probes_batch_folders_and_keep_a_users(tmp_path, capsys):
    """Real probes of the tiny tier: a 2-batch probe, then again over it (its batch folders replaced, as its
    probe.json lists them), then one batch (they are removed); a user's batch_2 of a probe's file names stays."""
    out = tmp_path / "D"
    assert main(["probe", *_P, "--probe-batches", "2", "--out", str(out)]) == 0
    assert _wrote(capsys.readouterr().out) == [f"{out}/batch_0", f"{out}/batch_1", f"{out}/probe.json",
                                               f"{out}/report.html"]
    assert json.loads((out / "probe.json").read_text())["config"]["probe_batches"] == 2
    _copies_check_the_batch_folders(gradprobe.load_probe(out), tmp_path)
    (out / "batch_2").mkdir()
    (out / "batch_2" / "tokens.jsonl").write_text("my tokens")
    (out / "batch_1" / "probe.json").write_text("the first probe's, marked")

    assert main(["probe", *_P, "--probe-batches", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"replaced the earlier probe in {out}: its files (batch_0, batch_1, probe.json, "
                              "report.html) were removed")
    assert _wrote(printed) == [f"{out}/batch_0", f"{out}/batch_1", f"{out}/probe.json", f"{out}/report.html"]
    assert isinstance(json.loads((out / "batch_1" / "probe.json").read_text())["rewards"], list)  # the new one's
    assert (out / "batch_2" / "tokens.jsonl").read_text() == "my tokens"

    assert main(["probe", *_P, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"replaced the earlier probe in {out}: its files (batch_0, batch_1, probe.json, "
                              "report.html) were removed")
    assert _wrote(printed) == [f"{out}/alignment.safetensors", f"{out}/probe.json", f"{out}/report.html",
                               f"{out}/tokens.jsonl"]
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "batch_2", "probe.json", "report.html",
                                                     "tokens.jsonl"]
    assert _tree(out / "batch_2") == {"tokens.jsonl": "my tokens"}
