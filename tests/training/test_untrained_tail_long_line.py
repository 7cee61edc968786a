"""A line of metrics.jsonl longer than gradprobe.training.untrained.MAX_LINE_BYTES (e.g. the NUL bytes a crash can
leave at a file's end) is no line the trainer wrote: every reader tells it by its length alone (damaged, or skipped as
unfinished when it is the last line without its newline), holds no more than about that much of it, and
untrained_tail, which reads from the file's end on every tick of the study's watch, reads it in linear time and stops
at a damaged one after about MAX_LINE_BYTES (on the old code: a 50 MB NUL tail took 20 s, quadratic in its length).

Not timed: the bytes read (a counting file) and the peak memory (tracemalloc) are asserted."""

from __future__ import annotations

import json
import tracemalloc

import pytest

import gradprobe.training.untrained as untrained
from gradprobe.study.orchestrator import longest_untrained_row
from gradprobe.training.untrained import (MAX_LINE_BYTES, metrics_line, stop_history, untrained_history,
                                          untrained_tail, update_lines)

BIG = 20 << 20  # a 20 MB line


def _u(update: int, pad: int = 0) -> bytes:
    """An update line (with its newline) that trained nothing and gave no reward; ``pad``: its length without the
    newline, when given."""
    line = {"update": update, "advantage_abs_mean": 0.0, "reward_valid": 0, "note": ""}
    short = len(json.dumps(line))
    if pad:
        line["note"] = "x" * (pad - short)
    text = (json.dumps(line) + "\n").encode()
    assert not pad or len(text) == pad + 1
    return text


def _numbers(lines):
    return None if lines is None else [None if x is None else x["update"] for x in lines]


def _four(path, block: int) -> dict:
    """What the four readers of the update lines return (update numbers; None for a damaged line)."""
    history = stop_history(path)
    return {"update_lines": _numbers(update_lines(path)), "untrained_history": _numbers(untrained_history(path)),
            "stop_history": (_numbers(history[0]), history[1], history[2]),
            "untrained_tail": _numbers(untrained_tail(path, 100, block=block)),
            "longest_untrained_row": _numbers(longest_untrained_row(path))}


# the file -> what the four readers find: the bound is the line's bytes without its newline
CASES = {
    "a line of MAX_LINE_BYTES in the middle: an update": (
        _u(1) + _u(2, pad=MAX_LINE_BYTES) + _u(3),
        {"update_lines": [1, 2, 3], "untrained_history": [1, 2, 3], "stop_history": ([1, 2, 3], True, True),
         "untrained_tail": [1, 2, 3], "longest_untrained_row": [1, 2, 3]}),
    "a longer one in the middle: damaged": (
        _u(1) + _u(2, pad=MAX_LINE_BYTES + 1) + _u(3),
        {"update_lines": [1, None, 3], "untrained_history": None, "stop_history": ([1], False, False),
         "untrained_tail": [3], "longest_untrained_row": [1]}),
    "a longer last line without its newline: unfinished": (
        _u(1) + _u(2) + _u(3, pad=MAX_LINE_BYTES + 1)[:-1],
        {"update_lines": [1, 2], "untrained_history": [1, 2], "stop_history": ([1, 2], True, True),
         "untrained_tail": [1, 2], "longest_untrained_row": [1, 2]}),
    "a last line of MAX_LINE_BYTES without its newline: an update": (
        _u(1) + _u(2, pad=MAX_LINE_BYTES)[:-1],
        {"update_lines": [1, 2], "untrained_history": [1, 2], "stop_history": ([1, 2], True, True),
         "untrained_tail": [1, 2], "longest_untrained_row": [1, 2]}),
    "a longer first line: damaged": (
        _u(1, pad=MAX_LINE_BYTES + 5) + _u(2) + _u(3),
        {"update_lines": [None, 2, 3], "untrained_history": None, "stop_history": ([], False, False),
         "untrained_tail": [2, 3], "longest_untrained_row": [2, 3]}),
    "a long blank line: damaged": (
        _u(1) + b" " * (MAX_LINE_BYTES + 1) + b"\n" + _u(2),
        {"update_lines": [1, None, 2], "untrained_history": None, "stop_history": ([1], False, False),
         "untrained_tail": [2], "longest_untrained_row": [1]}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("block", [1 << 16, 4096, 1000])
def test_the_readers_agree_at_the_bound(tmp_path, case, block):
    content, expected = CASES[case]
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(content)
    assert _four(path, block) == expected


def test_metrics_line_tells_a_longer_line_by_its_length():
    line = _u(1, pad=MAX_LINE_BYTES + 1)
    assert metrics_line(line, True) == ("damaged", None)
    assert metrics_line(line[:-1], False) == ("unfinished", None)
    assert metrics_line(_u(1, pad=MAX_LINE_BYTES), True)[0] == "update"
    assert metrics_line(b"\0" * (MAX_LINE_BYTES + 1), True) == ("damaged", None)


class _Counting:
    """A binary file that counts the bytes read from it."""

    def __init__(self, f, counter: list):
        self.f, self.counter = f, counter

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def seek(self, *a):
        return self.f.seek(*a)

    def read(self, *a):
        data = self.f.read(*a)
        self.counter[0] += len(data)
        return data

    def readline(self, *a):
        data = self.f.readline(*a)
        self.counter[0] += len(data)
        return data


def _peak(fn):
    """fn()'s value and the peak of the memory it allocated (bytes, tracemalloc)."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_tail_stops_at_a_long_damaged_line_without_reading_it_all(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    after = _u(3) + _u(4)
    path.write_bytes(_u(1) + _u(2) + b"\0" * BIG + b"\n" + after)
    counter = [0]
    monkeypatch.setattr(untrained, "open", lambda *a, **k: _Counting(open(*a, **k), counter), raising=False)
    block = 1 << 16
    tail, peak = _peak(lambda: untrained_tail(path, 100, block=block))
    assert _numbers(tail) == [3, 4]
    assert counter[0] <= len(after) + MAX_LINE_BYTES + 2 * block  # not the 20 MB
    assert peak < 4 * MAX_LINE_BYTES  # about 2 MB here; the old code: 20 to 60 MB


def test_the_tail_reads_past_a_long_unfinished_line_in_bounded_memory(tmp_path, monkeypatch):
    """A 20 MB NUL tail without a newline (a crash) is skipped, as every reader skips it: reading back to its start
    reads each byte once and holds at most about MAX_LINE_BYTES of it (the old code held, and copied, all of it on
    every block)."""
    path = tmp_path / "metrics.jsonl"
    before = _u(1) + _u(2)
    path.write_bytes(before + b"\0" * BIG)
    counter = [0]
    monkeypatch.setattr(untrained, "open", lambda *a, **k: _Counting(open(*a, **k), counter), raising=False)
    tail, peak = _peak(lambda: untrained_tail(path, 100))
    assert _numbers(tail) == [1, 2]
    assert counter[0] == len(before) + BIG
    assert peak < 4 * MAX_LINE_BYTES  # about 2 MB here; the old code: 20 to 60 MB


def test_update_lines_holds_no_more_of_a_long_line_than_the_bound(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_u(1) + _u(2) + b"\0" * BIG + b"\n" + _u(3) + _u(4) + b"\0" * BIG)
    lines, peak = _peak(lambda: list(update_lines(path)))
    assert _numbers(lines) == [1, 2, None, 3, 4]
    assert peak < 4 * MAX_LINE_BYTES  # about 2 MB here; the old code: 20 to 60 MB
