"""A JSONL row holding bytes that are not UTF-8 is a malformed row like the others: refused naming the
file, the row, the bad byte and the fix, or skipped, counted and warned with ``skip_malformed``; the
rows around it are read (``jsonl:`` and ``gsm8k:`` files)."""

from __future__ import annotations

import json

import pytest

from gradprobe.cli import main
from gradprobe.tasks import DatasetFormatError, load_task
from gradprobe.tasks.base import decode_row

ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(10)]


def _file(tmp_path, bad_at: int, rows=ROWS, name="pool.jsonl"):
    """``rows`` as JSONL, with row ``bad_at`` (1-based) holding the bytes ff fe inside its question."""
    lines = [json.dumps(r).encode() for r in rows]
    lines[bad_at - 1] = lines[bad_at - 1].replace(b"What is", b"What\xff\xfe is")
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_decode_row_names_the_byte_its_position_and_the_fix():
    assert decode_row(b'{"a": "\xc3\xa9"}\n') == ('{"a": "\u00e9"}\n', None)
    text, why = decode_row(b'{"question": "What\xff\xfe is 1?"}')
    assert text is None
    assert why.startswith("not valid UTF-8 (byte 0xff at byte 19 of the row, after '{\"question\": \"What': "
                          "invalid start byte); save the file as UTF-8")


@pytest.mark.parametrize("line", [1, 4])
def test_a_non_utf8_row_is_refused_naming_file_row_and_fix(tmp_path, line):
    path = _file(tmp_path, line)
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"jsonl:{path}").problems("train", 1)
    msg = str(info.value)
    assert msg.startswith(f"{path}, line {line}: not valid UTF-8 (byte 0xff at byte 19 of the row")
    assert "save the file as UTF-8" in msg and "--skip-malformed" in msg
    assert "codec can't decode" not in msg


def test_skip_malformed_skips_and_counts_a_non_utf8_row(tmp_path):
    path = _file(tmp_path, 3)
    task = load_task(f"jsonl:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match=r"skipping malformed row: .*pool.jsonl, line 3: not valid UTF-8"):
        rows = task.split_rows("train") + task.split_rows("heldout")
    assert task.skipped == 1
    assert sorted(int(p.answer) for p in rows) == [i + 1 for i in range(10) if i != 2]


def test_gsm8k_file_treats_a_non_utf8_row_the_same(tmp_path):
    rows = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(10)]
    path = _file(tmp_path, 2, rows, name="g.jsonl")
    with pytest.raises(DatasetFormatError, match=r"g.jsonl, line 2: not valid UTF-8 \(byte 0xff at byte 19"):
        load_task(f"gsm8k:{path}").problems("train", 1)
    task = load_task(f"gsm8k:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match=r"g.jsonl, line 2: not valid UTF-8"):
        n = len(task.split_rows("train") + task.split_rows("heldout"))
    assert task.skipped == 1 and n == 9


def test_rank_prompts_reports_the_row_not_the_codec(tmp_path, capsys):
    path = _file(tmp_path, 4)
    rc = main(["rank-prompts", "--model", "tiny-qwen2", "--task", f"jsonl:{path}", "--pool", "4",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{path}, line 4: not valid UTF-8" in err and "codec can't decode" not in err


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
def test_a_byte_order_mark_opening_the_file_is_no_part_of_its_first_row(tmp_path, kind):
    """A file saved with a UTF-8 byte-order mark (Windows editors) refused its first row: "not valid JSON
    (Unexpected UTF-8 BOM (decode using utf-8-sig))"."""
    rows = ROWS if kind == "jsonl" else [{"question": r["question"], "answer": f"#### {r['answer']}"} for r in ROWS]
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    read = [load_task(f"{kind}:{p}") for p in (plain, marked)]
    got = [[(x.question, x.answer) for x in t.split_rows("train") + t.split_rows("heldout")] for t in read]
    assert got[0] == got[1] and len(got[1]) == len(rows)
    assert read[1].skipped == 0
