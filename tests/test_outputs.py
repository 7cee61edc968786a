"""gradprobe.outputs and gradprobe.layout: the one JSON encoding, the one atomic writer, the file names."""

from __future__ import annotations

import json
import math
import os

import pytest

from gradprobe import layout
from gradprobe.outputs import (OutputDirError, json_float, json_safe, write_bytes_atomic, write_json_atomic,
                               write_text_atomic)


def test_json_safe_is_lossless_for_nan_and_inf():
    data = {"a": float("nan"), "b": [float("inf"), -math.inf, 1.5, (2.0, float("nan"))], "c": "x", "d": None,
            "e": {"f": float("-inf")}, "g": 3}
    text = json.dumps(json_safe(data), allow_nan=False)  # strict JSON accepts it
    back = json.loads(text)
    assert back == {"a": None, "b": ["inf", "-inf", 1.5, [2.0, None]], "c": "x", "d": None, "e": {"f": "-inf"},
                    "g": 3}
    assert math.isnan(json_float(back["a"]))
    assert json_float(back["b"][0]) == math.inf and json_float(back["b"][1]) == -math.inf
    assert json_float(back["b"][2]) == 1.5 and json_float(back["g"]) == 3.0
    assert json_float(back["e"]["f"]) == -math.inf


def test_json_float_refuses_other_strings():
    with pytest.raises(ValueError, match="'abc' is not a number"):
        json_float("abc")
    with pytest.raises(ValueError, match="not a number"):
        json_float("")


def test_write_json_atomic_refuses_nan_and_writes_nothing(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(ValueError):
        write_json_atomic(path, {"a": float("nan")})
    assert not path.exists() and list(tmp_path.iterdir()) == []
    write_json_atomic(path, json_safe({"a": float("nan")}))
    assert json.loads(path.read_text()) == {"a": None}


def test_atomic_writers_replace_whole_files(tmp_path):
    path = tmp_path / "f.bin"
    write_bytes_atomic(path, b"\x00\x01old")
    write_bytes_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    write_text_atomic(path, "\u00e9t\u00e9")
    assert path.read_bytes() == "\u00e9t\u00e9".encode("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]  # no temporary file left


def test_failed_write_names_the_path_and_keeps_the_old_file(tmp_path):
    if os.geteuid() == 0:  # root writes into read-only folders: use a file in the way instead
        blocker = tmp_path / "not_a_folder"
        blocker.write_text("x")
        with pytest.raises(OutputDirError, match="not_a_folder"):
            write_bytes_atomic(blocker / "f.json", b"{}")
        assert blocker.read_text() == "x"
        return
    path = tmp_path / "f.json"
    path.write_text("old")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(OutputDirError, match="f.json"):
            write_bytes_atomic(path, b"new")
    finally:
        tmp_path.chmod(0o700)
    assert path.read_text() == "old"


def test_layout_names_the_folders():
    assert layout.run_dir("S", "grpo", 2).as_posix() == "S/runs/grpo/seed2"
    assert layout.probe_dir("S").as_posix() == "S/probe"
    assert layout.RUNS_CSV_COLUMNS[:3] == ("arm", "seed", "update")
    names = [getattr(layout, n) for n in layout.__all__ if n.isupper() and isinstance(getattr(layout, n), str)]
    assert len(names) == len(set(names)) >= 15  # every file name once


def test_output_dir_error_reads_without_errno_prefix(tmp_path):
    from gradprobe.outputs import prepare_output_dir

    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(OutputDirError) as e:
        prepare_output_dir(blocker)
    assert str(e.value).startswith("cannot create output folder") and "[Errno" not in str(e.value)
    assert e.value.errno == 20  # ENOTDIR kept for callers


def test_a_refused_probe_leaves_no_parent_folder_of_its_out(tmp_path, capsys):
    """`gradprobe probe --task nosuchtask --out deep/x/y` is refused once its folder exists (the task is built
    after it); deep/x was left behind."""
    from gradprobe.cli import main

    out = tmp_path / "deep" / "x" / "y"
    assert main(["probe", "--task", "nosuchtask", "--no-progress", "--out", str(out)]) == 2
    assert "nosuchtask" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
