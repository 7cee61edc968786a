"""A calibration file that cannot be parsed is named for what it is, with its fix, by the shared reader of JSON sources
(``gradprobe.forecast.text_files``, as the reference-curve reader): an empty or whitespace-only file (nothing written),
a truncated one (re-copy it, or refit it), UTF-16 text (convert it with iconv), a gzip file (decompress it), a write cut
short by NUL bytes; "damaged: not valid JSON" with the refit stays for JSON that is wrong inside. Each was called
"damaged: not valid JSON ('utf-8' codec can't decode byte 0x8b ...)" and told to refit."""

from __future__ import annotations

import gzip
import shlex
from pathlib import Path

import pytest

from calib.cli import main as calib_main
from calib.model import CalibrationFileError, default_path, load_calibration

ROWS = Path(__file__).resolve().parents[2] / "data" / "calibration" / "rows.csv"

DEFAULT_TEXT = default_path().read_text(encoding="utf-8")
REFIT = "refit it with `calib fit ROWS.csv --forecaster FORECASTER --out "


def _refused(path) -> str:
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    return str(info.value)


def test_an_empty_or_blank_file_is_said_to_hold_nothing(tmp_path):
    empty, blank = tmp_path / "empty.json", tmp_path / "blank.json"
    empty.write_bytes(b"")
    blank.write_bytes(b"   \n")
    message = _refused(empty)
    assert message.startswith(f"calibration file {empty} is empty (0 bytes): no calibration was written to it (a write "
                              f"that never happened, or a copy of nothing); re-copy it, or {REFIT}{empty}`")  # in place
    assert "damaged" not in message and "not valid JSON" not in message
    message = _refused(blank)
    assert message.startswith(f"calibration file {blank} holds only whitespace (4 bytes): no calibration was written "
                              f"to it (a write that never happened, or a copy of nothing); re-copy it, or {REFIT}"
                              f"{blank}`")  # in place, as the empty one (was a new calibration.json beside it)


def test_calib_fit_writes_over_a_blank_file_as_its_fix_says(tmp_path, capsys):
    """The fix refits a whitespace-only file under its own name: calib fit writes over it (nothing to lose), as over
    an empty file, and still refuses a file holding text."""
    blank, kept = tmp_path / "blank.json", tmp_path / "notes.json"
    blank.write_bytes(b"\xef\xbb\xbf \n\t\n")
    kept.write_text("my notes\n", encoding="utf-8")
    fit = ["fit", str(ROWS), "--forecaster", "forecast_cost_only", "--out"]
    assert calib_main([*fit, str(blank)]) == 0  # was refused: "exists and is no calibration file but blank text"
    assert load_calibration(blank).forecaster == "forecast_cost_only"
    assert calib_main([*fit, str(kept)]) == 2 and kept.read_text(encoding="utf-8") == "my notes\n"
    assert "exists and is no calibration file (`calib fit`) but a text file" in capsys.readouterr().err


def test_a_truncated_file_is_said_to_be_truncated_and_json_wrong_inside_damaged(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(DEFAULT_TEXT[:15836], encoding="utf-8")
    message = _refused(path)
    assert ("the file is truncated (it ends mid-value: a copy cut short, or taken while it was being written); "
            f"re-copy it from where it was copied, or {REFIT}{path}`") in message
    assert message.startswith(f"calibration file {path} is damaged: not valid JSON (")
    edited = tmp_path / "edited.json"  # JSON wrong inside: damaged, with the refit, and no word of truncation
    edited.write_text(DEFAULT_TEXT.replace('"format_version"', '"format_version" 2,', 1), encoding="utf-8")
    message = _refused(edited)
    assert message.startswith(f"calibration file {edited} is damaged: not valid JSON (Expecting ':' delimiter")
    assert "the file is truncated" not in message and f"; {REFIT}{edited}`" in message


def test_utf16_and_gzip_files_get_their_conversion(tmp_path):
    utf16, packed = tmp_path / "utf16.json", tmp_path / "packed.json"
    utf16.write_text(DEFAULT_TEXT, encoding="utf-16")
    packed.write_bytes(gzip.compress(DEFAULT_TEXT.encode()))
    out16, outgz = tmp_path / "utf16_utf8.json", tmp_path / "packed_utf8.json"
    assert _refused(utf16).startswith(
        f"calibration file {utf16} cannot be read as JSON: it is UTF-16 text; convert it (`iconv -f utf-16 -t utf-8 "
        f"{shlex.quote(str(utf16))} > {shlex.quote(str(out16))}`); or refit it with `calib fit")
    message = _refused(packed)
    assert message.startswith(f"calibration file {packed} cannot be read as JSON: it is gzip-compressed; decompress it "
                              f"(`gunzip -c {shlex.quote(str(packed))} > {shlex.quote(str(outgz))}`); or refit it")
    assert "codec" not in message and "damaged" not in message and "ReferenceCurve" not in message


def test_a_write_cut_short_by_nul_bytes_is_named(tmp_path):
    path = tmp_path / "nul.json"
    path.write_bytes(DEFAULT_TEXT[:3000].encode() + b"\x00" * 5)
    message = _refused(path)
    line = DEFAULT_TEXT[:3000].count("\n") + 1
    assert message.startswith(f"calibration file {path} cannot be read as JSON: it ends in 5 NUL bytes from line "
                              f"{line} (byte 3000): a write cut short when the machine stopped; the text before them "
                              "is a calibration cut short, not one: re-copy it from where it was copied, or "
                              f"{REFIT}{path}`")  # in place: it opens as a calibration file
    assert "head -c" not in message and "keep the text" not in message  # its text before the NULs is truncated JSON


def test_calib_apply_names_the_problem_and_exits_2(tmp_path, capsys):
    path = tmp_path / "packed.json"
    path.write_bytes(gzip.compress(DEFAULT_TEXT.encode()))
    assert calib_main(["apply", str(tmp_path), "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"calib apply: error: calibration file {path} cannot be read as JSON: it is gzip-compressed; "
                          "decompress it (`gunzip -c ")
