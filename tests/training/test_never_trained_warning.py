"""A run in which UNTRAINED_WARN_UPDATES updates in a row trained no group (every advantage 0) warns once on stderr,
naming the cause (every completion truncated at max_new_tokens, every group flat, the rewards overflowed) and what to
change, once more at ten times as many, never on every update; the run goes on to its budget."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import pytest

from gradprobe.training.update import UNTRAINED_WARN_UPDATES, warn_untrained
from gradprobe.training.untrained import untrained_tail

from helpers_rollout import one_thread
from helpers_training import metric_lines, train_tiny

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

AGAIN = "the run goes on (GRPO learns only from groups whose rewards differ), said once more if it lasts 30 updates"


def _untrained(warned) -> list[str]:
    return [str(w.message) for w in warned if "no group trained" in str(w.message)]


def test_every_completion_truncated_warns_once_naming_max_new_tokens(tmp_path):
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        summary = train_tiny(out, budget={"updates": 4}, sampling={"max_new_tokens": 1}, eval={"sampled": False})
    assert (summary["completed"], summary["stop_reason"], summary["updates"]) == (True, "budget", 4)
    updates = [x for x in metric_lines(out) if not x.get("eval")]
    assert [(x["truncation_rate"], x["advantage_abs_mean"], x["grad_norm"]) for x in updates] == [(1.0, 0.0, 0.0)] * 4
    assert UNTRAINED_WARN_UPDATES == 3 and _untrained(warned) == [
        "updates 1-3: no group trained in 3 updates in a row (every advantage 0): every completion was truncated at "
        "max_new_tokens = 1 (truncation_rate 1.0), so every group's rewards were equal; raise [sampling] "
        f"max_new_tokens (now 1) so that completions can end; {AGAIN}"]


# ----------------------------------------------------------------------------- fabricated metrics.jsonl

def _line(update: int, adv=0.0, **more) -> dict:
    return {"update": update, "advantage_abs_mean": adv, "reward_valid": 8, "truncation_rate": 0.5,
            "reward_stats": {"groups": 2, "zero_variance_groups": 2, "nonfinite_groups": 0}, **more}


def _append_and_warn(s, line: dict) -> list[str]:
    with open(s.out / "metrics.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n" + (json.dumps({"update": line["update"], "eval": True}) + "\n"
                                           if line["update"] % 4 == 0 else ""))
    s.state.update = line["update"]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        warn_untrained(s, line)
    return [f"{line['update']}: {m}" for m in _untrained(warned)]


def test_the_warning_comes_at_3_and_30_updates_in_a_row_not_every_update(tmp_path):
    run = SimpleNamespace(reward="outcome", sampling=SimpleNamespace(max_new_tokens=80))
    s = SimpleNamespace(out=tmp_path, run=run, state=SimpleNamespace(update=0))
    said = []
    for u in range(1, 36):  # 35 flat updates (eval lines between some)
        said += _append_and_warn(s, _line(u))
    said += _append_and_warn(s, _line(36, adv=0.4))  # trains: the row ends
    said += [x for u in range(37, 40) for x in _append_and_warn(s, _line(u))]  # a new row of 3
    flat = ("every group's rewards were equal (all groups flat: zero variance); give the policy prompts it solves "
            "sometimes but not always (the [task] config or a prompt selection rule), or raise [train] group or "
            "[sampling] temperature; check that the reward 'outcome' tells completions apart")
    assert said == [f"3: updates 1-3: no group trained in 3 updates in a row (every advantage 0): {flat}; {AGAIN}",
                    f"30: updates 1-30: no group trained in 30 updates in a row (every advantage 0): {flat}; the run "
                    "goes on (GRPO learns only from groups whose rewards differ), not said again for these updates",
                    f"39: updates 37-39: no group trained in 3 updates in a row (every advantage 0): {flat}; {AGAIN}"]


def test_the_cause_overflow_and_a_line_of_an_older_gradprobe(tmp_path):
    run = SimpleNamespace(reward="big.py:r", sampling=SimpleNamespace(max_new_tokens=80))
    s = SimpleNamespace(out=tmp_path, run=run, state=SimpleNamespace(update=0))
    big = {"groups": 2, "zero_variance_groups": 1, "nonfinite_groups": 1, "overflow_max_abs_reward": 4e170}
    said = _append_and_warn(s, _line(1, reward_stats=big)) + _append_and_warn(s, _line(2))
    said += _append_and_warn(s, {"update": 3, "reward_valid": 8})  # no advantage_abs_mean: does not say, no warning
    said += [x for u in (4, 5) for x in _append_and_warn(s, _line(u, reward_stats=big))]
    assert said == []  # the line of update 3 ended the row: updates 4-5 are two in a row
    said = _append_and_warn(s, _line(6))
    assert said == ["6: updates 4-6: no group trained in 3 updates in a row (every advantage 0): the rewards of every "
                    "group whose rewards differ overflowed float64 group statistics (|reward| up to 4e+170); rescale "
                    f"the reward 'big.py:r' (keep |reward| far below 1e150, e.g. in [0, 1]); {AGAIN}"]


@pytest.mark.parametrize("block", [7, 64, 1 << 16])
def test_the_tail_is_read_from_the_end_block_by_block(tmp_path, block):
    path = tmp_path / "metrics.jsonl"
    lines = [_line(1, adv=0.2), *(_line(u, note="x" * (u * 13)) for u in range(2, 12))]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "\n")
    assert [x["update"] for x in untrained_tail(path, 31, block=block)] == list(range(2, 12))
    assert [x["update"] for x in untrained_tail(path, 4, block=block)] == [8, 9, 10, 11]
    assert untrained_tail(tmp_path / "none.jsonl", 3) == []
