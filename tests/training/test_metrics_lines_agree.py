"""The four readers of a run's metrics.jsonl that pick its update lines (gradprobe.training.untrained: untrained_history
behind never_trained, stop_history behind the stop rule, untrained_tail behind the run's and the study's warnings;
gradprobe.study.orchestrator.longest_untrained_row behind the study's line when a run ends) agree on which lines are
update lines, by one rule (gradprobe.training.untrained.metrics_line): blank and eval lines skipped; the file's last
line without its newline that is no JSON object (being written, or cut by a killed run) skipped; any other line that
is no JSON object (invalid JSON or UTF-8, a JSON array, string, number or null, JSON nested too deep) is damage, an
update that does not say whether it trained: no reader raises for it or claims a row, a stop or a never-trained run
across it.

Every case is one small metrics.jsonl, every update line of which trained nothing and gave no reward
(advantage_abs_mean 0, reward_valid 0), written with the update numbers (``?`` for a damaged line) every reader must
find; what each reader returns follows from that list (``_expected``)."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import pytest

from gradprobe.ledger import Ledger
from gradprobe.study.orchestrator import UntrainedWatch, longest_untrained_row
from gradprobe.training import update as update_module
from gradprobe.training.specs import BudgetSpec
from gradprobe.training.untrained import (CAUSES, metrics_line, never_trained, stop_history, untrained_history,
                                        untrained_tail)

DAMAGED = "?"


def _u(update: int, **more) -> bytes:
    """An update line (with its newline) that trained nothing and gave no reward."""
    return (json.dumps({"update": update, "advantage_abs_mean": 0.0, "reward_valid": 0, "truncation_rate": 0.5,
                        **more}, ensure_ascii=False) + "\n").encode("utf-8")


EVAL = b'{"update": 0, "eval": true, "greedy_accuracy": 0.25}\n'
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: nothing at the file's very start (an editor's), a byte elsewhere

# case -> (the file's bytes, the update lines every reader finds in it, in order: update numbers, "?" damaged)
CASES = {
    "blank lines": (b"\n" + _u(1) + b"   \n" + _u(2) + b"\t\r\n\n" + _u(3), [1, 2, 3]),
    "eval lines": (EVAL + _u(1) + EVAL.replace(b"0,", b"1,", 1) + _u(2) + b'{"update": 3, "eval": false, '
                   b'"advantage_abs_mean": 0.0, "reward_valid": 0}\n' + EVAL, [1, 2, 3]),
    "empty file": (b"", []),
    "only an unfinished line": (b'{"update": 1, "adv', []),
    "JSON array in the middle": (_u(1) + b"[1, 2]\n" + _u(2) + _u(3), [1, DAMAGED, 2, 3]),
    "JSON string, number, null": (_u(1) + _u(2) + b'"text"\n' + _u(3) + b"7\n" + b"null\n" + _u(4),
                                  [1, 2, DAMAGED, 3, DAMAGED, DAMAGED, 4]),
    "truncated last line (killed run)": (_u(1) + _u(2) + _u(3) + b'{"update": 4, "advantage_abs', [1, 2, 3]),
    "last line cut inside a UTF-8 character": (_u(1) + _u(2) + _u(3, note="café")[:-4], [1, 2]),
    "complete last line without its newline": (_u(1) + _u(2)[:-1], [1, 2]),
    "invalid line in the middle": (_u(1) + b'{"update": 2, "advantage_abs\n' + _u(3), [1, DAMAGED, 3]),
    "invalid UTF-8 in the middle": (_u(1) + _u(2) + b'{"update": 3, "note": "\xff"}\n' + _u(4), [1, 2, DAMAGED, 4]),
    "JSON nested too deep in the middle": (_u(1) + b"[" * 100_000 + b"\n" + _u(2), [1, DAMAGED, 2]),
    "invalid last line with its newline": (_u(1) + _u(2) + b'{"update": 3\n', [1, 2, DAMAGED]),
    "everything": (EVAL + b"\n" + _u(1) + b"[]\n" + _u(2) + _u(3) + EVAL + b"oops\n" + _u(4) + b"\n" + _u(5) + _u(6)
                   + _u(7) + b'{"update": 8, "advantage_abs_mean": 0.', [1, DAMAGED, 2, 3, DAMAGED, 4, 5, 6, 7]),
    "byte-order mark at the start": (BOM + _u(1) + _u(2) + _u(3) + _u(4) + _u(5), [1, 2, 3, 4, 5]),
    "byte-order mark, then an eval line": (BOM + EVAL + _u(1) + _u(2), [1, 2]),
    "byte-order mark, then a blank line": (BOM + b"\n" + _u(1) + _u(2), [1, 2]),
    "byte-order mark and a line without its newline": (BOM + _u(1)[:-1], [1]),
    "byte-order mark and an unfinished line": (BOM + b'{"update": 1, "adv', []),
    "byte-order mark, then damage": (BOM + b"oops\n" + _u(1), [DAMAGED, 1]),
    "byte-order mark on a later line": (_u(1) + BOM + _u(2) + _u(3), [1, DAMAGED, 3]),
    "two byte-order marks at the start": (BOM + BOM + _u(1) + _u(2), [DAMAGED, 2]),
}


def _segments(found: list) -> list[list[int]]:
    """The rows of update numbers between damaged lines."""
    rows = [[]]
    for x in found:
        if x == DAMAGED:
            rows.append([])
        else:
            rows[-1].append(x)
    return rows


def _expected(found: list) -> dict:
    """What each reader returns for a file whose update lines are ``found`` (each trained nothing and gave no reward;
    a damaged line does not say)."""
    rows = _segments(found)
    damaged = DAMAGED in found
    return {"untrained_history": None if damaged else rows[0],
            "stop_history": (rows[0], not damaged, not damaged),
            "untrained_tail": rows[-1],
            "longest_untrained_row": max(rows, key=len)}  # max: the first of equal ones


def _numbers(lines):
    return None if lines is None else [x["update"] for x in lines]


@pytest.mark.parametrize("case", list(CASES))
def test_the_four_readers_agree_on_the_update_lines(tmp_path, case):
    content, found = CASES[case]
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(content)
    expected = _expected(found)
    history = stop_history(path)
    got = {"untrained_history": _numbers(untrained_history(path)),
           "stop_history": None if history is None else (_numbers(history[0]), history[1], history[2]),
           "untrained_tail": _numbers(untrained_tail(path, 100)),
           "longest_untrained_row": _numbers(longest_untrained_row(path))}
    assert got == expected
    for block in (1, 5, 64):  # read from the end in small blocks: lines cut by a block's start, the same answer
        assert _numbers(untrained_tail(path, 100, block=block)) == expected["untrained_tail"], block
    tail = expected["untrained_tail"]
    assert _numbers(untrained_tail(path, 2, block=7)) == tail[-2:]  # at most `limit` lines, the newest


@pytest.mark.parametrize("raw, ended, kind", [
    (b"", False, "blank"), (b" \t\r\n", True, "blank"),
    (EVAL, True, "eval"), (EVAL[:-1], False, "eval"),
    (_u(1), True, "update"), (_u(1)[:-1], False, "update"), (b'{"eval": 1}\n', True, "update"),
    (b'{"update": 1, "adv', False, "unfinished"), (_u(1, note="é")[:-4], False, "unfinished"),
    (b"7", False, "unfinished"),
    (b'{"update": 1, "adv\n', True, "damaged"), (b"[1]\n", True, "damaged"), (b"null\n", True, "damaged"),
    (b'"x"\n', True, "damaged"), (b'{"a": "\xff"}\n', True, "damaged"), (b"[" * 100_000 + b"\n", True, "damaged")])
def test_one_line_is_told_apart_by_one_rule(raw, ended, kind):
    assert metrics_line(raw, ended)[0] == kind
    assert (metrics_line(raw, ended)[1] is not None) == (kind in ("eval", "update"))


@pytest.mark.parametrize("raw, ended, kind", [
    (BOM + _u(1), True, "update"), (BOM + _u(1)[:-1], False, "update"), (BOM + EVAL, True, "eval"),
    (BOM, False, "blank"), (BOM + b"\n", True, "blank"), (BOM + b'{"update": 1, "adv', False, "unfinished"),
    (BOM + b"[1]\n", True, "damaged"), (BOM + BOM + _u(1), True, "damaged")])
def test_a_byte_order_mark_is_nothing_at_the_start_of_the_first_line_only(raw, ended, kind):
    assert metrics_line(raw, ended, first=True)[0] == kind
    assert (metrics_line(raw, ended, first=True)[1] == json.loads(_u(1))) == (kind == "update")
    assert metrics_line(raw, ended)[0] == ("damaged" if ended else "unfinished")  # not the first line: a byte


def test_a_byte_order_mark_does_not_hide_a_run_that_never_trained(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(BOM + _u(1) + _u(2) + _u(3))
    assert never_trained(path, 8) == {"cause": "no_reward", "why": CAUSES["no_reward"], "updates": 3,
                                      "max_abs_reward": 0.0, "grad_norm_max": None}


# ----------------------------------------------------------------------------- the callers do not fail on damage


@pytest.fixture
def finished(monkeypatch):
    """The summaries finish() would write: (stop_reason, extra) per call."""
    calls = []
    monkeypatch.setattr(update_module, "finish", lambda s, reason, extra: calls.append((reason, extra)))
    return calls


def _session(tmp_path, content: bytes, update: int):
    (tmp_path / "metrics.jsonl").write_bytes(content)
    run = SimpleNamespace(budget=BudgetSpec(updates=10), reward="r.py:r", arm="a",
                          sampling=SimpleNamespace(max_new_tokens=8))
    return SimpleNamespace(out=tmp_path, run=run, state=SimpleNamespace(update=update, ledger=Ledger()))


@pytest.mark.parametrize("damage", [b"[" * 100_000 + b"\n", b"oops\n", b'{"note": "\xff"}\n', b"[1]\n"])
def test_a_damaged_line_neither_fails_nor_stops_nor_warns_a_run_across_it(tmp_path, finished, damage):
    """Updates 1, 3 and 4 gave no reward and trained nothing, with a damaged line between 1 and 3: the stop rule
    (3 such updates stop a run) cannot show that every update gave no reward, so the run goes on; the warning
    (3 in a row) sees 2 in a row after the damage; nothing raises."""
    s = _session(tmp_path, _u(1) + damage + _u(3) + _u(4), 4)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        update_module.check_untrained_stop(s, json.loads(_u(4)))
        update_module.warn_untrained(s, json.loads(_u(4)))
    assert finished == [] and [str(w.message) for w in warned] == []
    (tmp_path / "metrics.jsonl").write_bytes(_u(1) + _u(2) + _u(3) + _u(4))  # the same run undamaged: stopped
    with pytest.raises(update_module.NoValidRewardError):
        update_module.check_untrained_stop(s, json.loads(_u(4)))
    assert [reason for reason, _ in finished] == ["no_valid_reward"]


def test_the_study_watch_reads_past_a_damaged_line_and_a_killed_runs_last_line(tmp_path):
    said = []
    folder = tmp_path / "runs" / "a" / "seed0"
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_bytes(_u(1) + b"[" * 100_000 + b"\n" + _u(2) + _u(3) + _u(4) + b'{"upd')
    watch = UntrainedWatch(tmp_path, [("a", 0)], said.append, every=0)
    watch.poll()
    watch.finished("a", 0)
    assert said == ["warning: run a seed 0: 3 updates in a row trained no group (updates 2-4, every advantage 0): "
                    "the reward gave no completion a reward (None, NaN or +-inf); the run goes on; see "
                    "runs/a/seed0/train.log for what to change"]
