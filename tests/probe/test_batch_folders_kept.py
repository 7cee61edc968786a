"""A probe into a folder whose earlier probe's ``batch_K/`` folders also hold a user's file is refused before anything
moves, naming the folders' other files and the fix: such a folder cannot be moved aside whole, and a new probe would
write its batches over the earlier probe's there (a failed one leaving its own files in place of the earlier
probe's). It used to keep them silently, stale ``batch_0/probe.json`` included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.outputs import OutputDirError, write_text_atomic
from gradprobe.probe.output import replacing_earlier_probe

_BATCH = ("alignment.safetensors", "probe.json", "tokens.jsonl")


def _earlier(out: Path) -> None:
    """An earlier 2-batch probe in ``out`` (its probe.json as gradprobe writes it: versions, config.probe_batches), with
    the user's mydata.csv in each batch folder."""
    out.mkdir()
    for name in ("report.html", "tokens.jsonl", "alignment.safetensors"):
        (out / name).write_text(f"old {name}")
    (out / "probe.json").write_text(json.dumps({"versions": {"gradprobe": "0"}, "config": {"probe_batches": 2}}))
    for k in (0, 1):
        (out / f"batch_{k}").mkdir()
        for name in _BATCH:
            (out / f"batch_{k}" / name).write_text(f"old batch {k} {name}")
        (out / f"batch_{k}" / "mydata.csv").write_text(f"user data {k}")


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_batch_folders_holding_a_users_files_are_refused_and_nothing_moves(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    before = _tree(out)
    with pytest.raises(OutputDirError) as info:
        with replacing_earlier_probe(out, say=lambda line: None):
            raise AssertionError("the probe must not start")
    assert str(info.value) == (
        f"--out {str(out)!r} holds an earlier probe whose batch folders batch_0/, batch_1/ also hold other files "
        "(batch_0/mydata.csv, batch_1/mydata.csv): a probe moves its earlier batch folders aside whole and never moves "
        "or deletes other files, so it would mix its batches with the earlier probe's there. Move batch_0/mydata.csv, "
        "batch_1/mydata.csv out of the batch folders, or choose another --out; nothing was moved")
    assert _tree(out) == before and not (out / ".earlier-probe").exists()


def test_once_the_users_files_are_moved_out_the_earlier_batches_are_replaced(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    for k in (0, 1):
        (out / f"batch_{k}" / "mydata.csv").unlink()
    with replacing_earlier_probe(out, say=lambda line: None) as folder:
        assert folder.earlier == ["alignment.safetensors", "batch_0", "batch_1", "probe.json", "report.html",
                                  "tokens.jsonl"]
        write_text_atomic(out / "probe.json", "new probe")
    assert _tree(out) == {"probe.json": "new probe"}


def test_a_batch_folder_of_the_users_files_only_is_not_the_probes(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    for k in (0, 1):
        for name in _BATCH:
            (out / f"batch_{k}" / name).unlink()
    with replacing_earlier_probe(out, say=lambda line: None) as folder:
        assert folder.earlier == ["alignment.safetensors", "probe.json", "report.html", "tokens.jsonl"]
        write_text_atomic(out / "probe.json", "new probe")
    assert _tree(out) == {"batch_0/mydata.csv": "user data 0", "batch_1/mydata.csv": "user data 1",
                          "probe.json": "new probe"}
