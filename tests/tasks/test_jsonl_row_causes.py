"""A JSONL row that the loader read wrongly or refused without its cause: a key given twice (json.loads kept the last
value without a word: every gold could be wrong), a boolean answer ("its value is empty"), a CSV file given as
jsonl:PATH, a tail of NUL bytes a crash left and CR-only line endings (all "not valid JSON")."""

import json
import warnings

import pytest

from gradprobe.tasks import load_task
from gradprobe.tasks.base import DatasetFormatError
from gradprobe.tasks.gsm8k import GSM8KTask

SKIP = ("; fix or delete the row, or skip such rows (command line: '...:skip_malformed=true' or --skip-malformed; "
        "plans: skip_malformed = true under [task.config]; Python: skip_malformed=True)")
ROWS = [{"question": f"{i} + 1 = ?", "answer": str(i + 1)} for i in range(6)]


def _refusal(spec: str) -> str:
    with pytest.raises(DatasetFormatError) as e:
        load_task(spec).split_rows("train")
    return str(e.value)


def _good_bytes() -> bytes:
    return "".join(json.dumps(r) + "\n" for r in ROWS).encode()


@pytest.mark.parametrize(("second", "said"), [('"0"', '"15", then "0"'), ('"15"', 'both "15"'),
                                              ("15", '"15", then 15')])
def test_a_key_given_twice_is_refused(tmp_path, second, said):
    """Equal values are refused too: RFC 8259 asks for unique names and readers differ on which value they keep."""
    f = tmp_path / "dup.jsonl"
    f.write_bytes(_good_bytes() + f'{{"question": "7 + 7 + 1 = ?", "answer": "15", "answer": {second}}}\n'.encode())
    assert _refusal(f"jsonl:{f}") == (
        f"{f}, line 7: the row names the key \"answer\" twice ({said}): JSON readers keep one of the two (Python's "
        "json the last, silently), so which value was meant cannot be told; give each key once in the row" + SKIP)


def test_a_key_given_twice_is_skipped_with_skip_malformed_and_in_gsm8k(tmp_path):
    f = tmp_path / "dup.jsonl"
    f.write_bytes(_good_bytes() + b'{"question": "q", "answer": "#### 15", "answer": "#### 0"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = load_task(f"jsonl:{f}:skip_malformed=true")
        rows = task.split_rows("train") + task.split_rows("heldout")
    assert task.skipped == 1 and sorted(p.answer for p in rows) == [str(i + 1) for i in range(6)]
    assert any('line 7: the row names the key "answer" twice' in str(w.message) for w in caught)
    g = tmp_path / "gsm8k.jsonl"
    g.write_text('{"question": "q0", "answer": "#### 1"}\n{"question": "q", "answer": "#### 15", "answer": "#### 0"}\n')
    with pytest.raises(DatasetFormatError) as e:
        GSM8KTask(g).split_rows("train")
    assert str(e.value).startswith(f'{g}, line 2: the row names the key "answer" twice ("#### 15", then "#### 0"): '
                                   "JSON readers keep one of the two (Python's json the last, silently), so which "
                                   "value was meant cannot be told; give each key once in the row. Each line must")


def test_a_nested_key_given_twice_and_the_parser_alone():
    from gradprobe.tasks.base import parse_json_row
    assert parse_json_row('{"a": 1, "b": 2}\n', 1) == ({"a": 1, "b": 2}, None)
    value, why = parse_json_row('{"prompt": [{"role": "user", "role": "system", "content": "x"}]}', 3)
    assert value is None and why.startswith('the row names the key "role" twice ("user", then "system")')


def test_a_boolean_answer_is_named_as_a_boolean(tmp_path):
    f = tmp_path / "b.jsonl"
    f.write_text('{"question": "7 + 7 + 1 = ?", "answer": true}\n' * 3)
    assert _refusal(f"jsonl:{f}") == (
        f"{f}, line 1: column 'answer' (answer=) gives no gold answer holding a number (its value is a boolean (true), "
        "not text or a number: give the answer itself (a yes/no answer as text, e.g. \"yes\"); verifier=hash reads "
        "the gold's one number as it reads a completion's; use verifier=exact for text answers)" + SKIP)
    f.write_text('{"question": "Is 7 odd?", "answer": false}\n' * 3)
    assert _refusal(f"jsonl:{f}:verifier=exact") == (
        f"{f}, line 1: column 'answer' (answer=) gives no gold answer (its value is a boolean (false), not text or a "
        "number: give the answer itself (a yes/no answer as text, e.g. \"yes\"))" + SKIP)


HF_HINT = ("looks like {what}, which jsonl:PATH does not read (one JSON object per line): put it in a folder of its "
           "own and give hf:FOLDER:heldout_split=none (datasets reads a folder's CSV and parquet files; "
           "heldout_fraction of its rows are held out), or convert it to JSONL")


@pytest.mark.parametrize("name", ["data.csv", "data.jsonl"])
def test_a_csv_file_given_as_jsonl_points_to_hf_folder(tmp_path, name):
    f = tmp_path / name
    f.write_text("question,answer\n7 + 7 + 1 = ?,15\n5 + 9 + 8 = ?,22\n")
    assert _refusal(f"jsonl:{f}") == (f"{f}, line 1: not valid JSON (Expecting value); {f} "
                                      + HF_HINT.format(what="CSV (comma-separated lines)") + SKIP)


def test_a_parquet_file_given_as_jsonl_points_to_hf_folder(tmp_path):
    f = tmp_path / "train.parquet"
    f.write_bytes(b"PAR1\x15\x04\x15\x8c\x01\n")
    said = _refusal(f"jsonl:{f}")
    assert said.startswith(f"{f}, line 1: not valid UTF-8 (byte 0x8c")
    assert said.endswith(f"; {f} " + HF_HINT.format(what="a parquet file") + SKIP)


def test_a_csv_like_later_line_or_a_json_file_gets_no_hint(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_bytes(_good_bytes() + b"a,b\n")
    assert _refusal(f"jsonl:{f}") == f"{f}, line 7: not valid JSON (Expecting value)" + SKIP


@pytest.mark.parametrize("pad", [b"", b"\n"])
def test_a_tail_of_nul_bytes_is_named(tmp_path, pad):
    """A crash leaves a file padded with NUL bytes: on a line of their own, or after the last row."""
    f = tmp_path / "nul.jsonl"
    f.write_bytes(_good_bytes().rstrip(b"\n") + pad + b"\x00" * 50)
    line, after = (7, "") if pad else (6, f", after {json.dumps(ROWS[-1])[-30:]!r}")
    column = 1 if pad else len(json.dumps(ROWS[-1])) + 1
    assert _refusal(f"jsonl:{f}") == (
        f"{f}, line {line}: NUL bytes (0x00) from character {column} of the line on (50 of them{after}): the file was "
        f"cut short and padded with NUL bytes from line {line} on (a crash while it was written leaves such a tail); "
        f"restore the file from a good copy, or delete its NUL bytes from line {line} on (and a row they cut short)"
        + SKIP)


def test_nul_bytes_inside_the_text_name_utf16(tmp_path):
    f = tmp_path / "u16.jsonl"
    f.write_bytes(_good_bytes().decode().encode("utf-16-le"))
    said = _refusal(f"jsonl:{f}")
    assert said.startswith(f"{f}, line 1: NUL bytes (0x00) inside its text (") and "iconv -f UTF-16 -t UTF-8" in said


def test_cr_only_line_endings_are_named(tmp_path):
    f = tmp_path / "cr.jsonl"
    f.write_bytes(_good_bytes().replace(b"\n", b"\r"))
    expected = (f"{f}, line 1: not valid JSON (Extra data): the line holds 6 rows separated by a carriage return (CR) "
                "alone, which is no line break in JSONL (the file has CR-only line endings); convert its line endings "
                "to LF or CRLF (e.g. tr '\\r' '\\n' < FILE > FIXED.jsonl)")
    assert _refusal(f"jsonl:{f}") == expected + SKIP
    with pytest.raises(DatasetFormatError) as e:
        GSM8KTask(f).split_rows("train")
    assert str(e.value).startswith(expected + ". Each line must be a JSON object")


def test_crlf_and_good_files_still_load(tmp_path):
    f = tmp_path / "crlf.jsonl"
    f.write_bytes(_good_bytes().replace(b"\n", b"\r\n"))
    task = load_task(f"jsonl:{f}")
    assert sorted(p.answer for p in task.split_rows("train") + task.split_rows("heldout")) == [str(i + 1)
                                                                                             for i in range(6)]


def test_a_row_nested_too_deep_is_named_with_its_line(tmp_path):
    import sys

    f = tmp_path / "deep.jsonl"
    f.write_bytes(_good_bytes() + b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b', "answer": "#### 2"}\n')
    with pytest.raises(DatasetFormatError) as e:
        load_task(f"jsonl:{f}").split_rows("train")
    assert str(e.value).startswith(
        f"{f}, line 7: its arrays or objects nest deeper than Python's JSON parser reads (its recursion limit, "
        f"{sys.getrecursionlimit()} levels), where a row nests a few levels: the row is damaged; ")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        task = load_task(f"jsonl:{f}:skip_malformed=true")
        rows = task.split_rows("train") + task.split_rows("heldout")
    assert task.skipped == 1 and sorted(p.answer for p in rows) == [str(i + 1) for i in range(6)]


def test_a_raw_carriage_return_inside_a_string_is_no_row_separator(tmp_path):
    f = tmp_path / "cr_in_string.jsonl"
    f.write_bytes(_good_bytes() + b'{"question": "a\rb = ?", "answer": "#### 2"}\n')
    assert _refusal(f"jsonl:{f}") == f"{f}, line 7: not valid JSON (Invalid control character at)" + SKIP


@pytest.mark.parametrize("encoding, mark", [("utf-16", "0xff 0xfe"), ("utf-16-be", None)])
def test_utf16_text_is_named_with_or_without_its_byte_order_mark(tmp_path, encoding, mark):
    f = tmp_path / "u16.jsonl"
    f.write_bytes(_good_bytes().decode().encode(encoding))
    said = _refusal(f"jsonl:{f}")
    if mark:  # Notepad's "Unicode", Python's "utf-16": the mark opens the file
        assert said == (f"{f}, line 1: not valid UTF-8: the file is UTF-16 text (its byte-order mark, {mark}, opens "
                        "it); save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)" + SKIP)
    else:
        assert said.startswith(f"{f}, line 1: NUL bytes (0x00) inside its text (") and "looks like CSV" not in said


def test_a_comment_line_with_commas_is_not_called_csv(tmp_path):
    f = tmp_path / "commented.jsonl"
    f.write_bytes(b"# question, answer\n" + _good_bytes())
    assert "looks like CSV" not in _refusal(f"jsonl:{f}")
