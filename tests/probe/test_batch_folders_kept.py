"""A probe into a folder whose earlier probe's ``batch_K/`` folders also hold a user's file keeps those folders and
the user's file, deletes the earlier probe's own files inside them (they would be read as this probe's batches) and
says so, naming the folders, the kept files and the deleted ones. It used to keep them silently, stale
``batch_0/probe.json`` included."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradprobe.outputs import write_text_atomic
from gradprobe.probe.output import replacing_earlier_probe

_BATCH = ("alignment.safetensors", "probe.json", "tokens.jsonl")


def _earlier(out: Path) -> None:
    """An earlier 2-batch probe in ``out``, with the user's mydata.csv in each batch folder."""
    out.mkdir()
    for name in ("probe.json", "report.html", "tokens.jsonl", "alignment.safetensors"):
        (out / name).write_text(f"old {name}")
    for k in (0, 1):
        (out / f"batch_{k}").mkdir()
        for name in _BATCH:
            (out / f"batch_{k}" / name).write_text(f"old batch {k} {name}")
        (out / f"batch_{k}" / "mydata.csv").write_text(f"user data {k}")


def test_one_batch_probe_deletes_stale_batch_files_and_keeps_user_files(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert folder.earlier == ["alignment.safetensors", "probe.json", "report.html", "tokens.jsonl"]
        write_text_atomic(out / "probe.json", "new probe")
    assert sorted(p.name for p in (out / "batch_0").iterdir()) == ["mydata.csv"]
    assert sorted(p.name for p in (out / "batch_1").iterdir()) == ["mydata.csv"]
    assert (out / "batch_0" / "mydata.csv").read_text() == "user data 0"
    assert (out / "probe.json").read_text() == "new probe"
    assert len(said) == 1
    line = said[0]
    assert f"kept the earlier probe's batch folders batch_0/, batch_1/ in {out}" in line
    assert "they hold other files (batch_0/mydata.csv, batch_1/mydata.csv)" in line
    assert ("the earlier probe's own files in them (batch_0/alignment.safetensors, batch_0/probe.json, "
            "batch_0/tokens.jsonl, batch_1/alignment.safetensors, batch_1/probe.json, batch_1/tokens.jsonl) "
            "were deleted") in line


def test_files_the_new_probe_rewrote_in_a_kept_batch_stay(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    said = []
    with replacing_earlier_probe(out, say=said.append):
        for name in _BATCH:  # a new 1st batch written into the kept batch_0/
            write_text_atomic(out / "batch_0" / name, f"new {name}")
        write_text_atomic(out / "probe.json", "new probe")
    assert {p.name: p.read_text() for p in (out / "batch_0").iterdir()} == {
        "alignment.safetensors": "new alignment.safetensors", "probe.json": "new probe.json",
        "tokens.jsonl": "new tokens.jsonl", "mydata.csv": "user data 0"}
    assert sorted(p.name for p in (out / "batch_1").iterdir()) == ["mydata.csv"]
    assert "(batch_1/alignment.safetensors, batch_1/probe.json, batch_1/tokens.jsonl) were deleted" in said[0]


def test_a_failed_probe_leaves_the_kept_batch_folders_as_they_were(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    said = []
    with pytest.raises(RuntimeError), replacing_earlier_probe(out, say=said.append):
        raise RuntimeError("boom")
    assert said == []
    assert (out / "batch_1" / "probe.json").read_text() == "old batch 1 probe.json"
    assert (out / "probe.json").read_text() == "old probe.json"
    assert sorted(p.name for p in (out / "batch_0").iterdir()) == ["alignment.safetensors", "mydata.csv",
                                                                  "probe.json", "tokens.jsonl"]


def test_batch_folders_of_probe_files_only_move_as_before(tmp_path):
    out = tmp_path / "D"
    _earlier(out)
    (out / "batch_1" / "mydata.csv").unlink()
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert "batch_1" in folder.earlier and "batch_0" not in folder.earlier
        write_text_atomic(out / "probe.json", "new probe")
    assert not (out / "batch_1").exists()
    assert sorted(p.name for p in (out / "batch_0").iterdir()) == ["mydata.csv"]
    assert "batch folders batch_0/ in" in said[0] and "batch_1" not in said[0]
