"""``ledger.jsonl`` of the TRL callback: one whole JSONL line per logged window (issue 15)."""

from __future__ import annotations

import json

import pytest

from gradprobe.integrations import trl_tokens
from gradprobe.integrations.trl_tokens import append_jsonl_line
from gradprobe.outputs import OutputDirError


class _Recording:
    """A text file stand-in that records each ``write`` call and whether it was flushed after."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def write(self, text):
        self.calls.append(["write", text])
        return self.real.write(text)

    def flush(self):
        self.calls.append(["flush"])
        self.real.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


def test_each_window_is_one_write_of_a_whole_line_then_flushed(tmp_path, monkeypatch):
    path = tmp_path / "ledger.jsonl"
    files = []
    real_open = open

    def spy_open(p, mode="r", *a, **k):
        f = _Recording(real_open(p, mode, *a, **k))
        files.append((mode, f))
        return f

    monkeypatch.setattr(trl_tokens, "open", spy_open, raising=False)
    windows = [{"step": 2, "steps": 2, "rollout_tokens": 96, "reward_tokens": {}},
               {"step": 4, "steps": 2, "rollout_tokens": 120, "reward_tokens": {"continuation": 7}}]
    for w in windows:
        append_jsonl_line(path, w)
    assert [mode for mode, _ in files] == ["a", "a"]  # appends: earlier windows are never rewritten
    for (_, f), w in zip(files, windows):
        assert f.calls == [["write", json.dumps(w) + "\n"], ["flush"]]
    assert [json.loads(line) for line in path.read_text().splitlines()] == windows
    assert path.read_text() == "".join(json.dumps(w) + "\n" for w in windows)


def test_an_unwritable_log_names_the_path(tmp_path):
    blocked = tmp_path / "ledger.jsonl"
    blocked.mkdir()  # a folder where the log should be: open(..., "a") fails
    with pytest.raises(OutputDirError, match="ledger.jsonl"):
        append_jsonl_line(blocked, {"step": 1})
