"""Updates of a training run that trained nothing, and why; torch-free (the study's analysis reads them too).

An update trained nothing when every advantage of its batch was 0: ``metrics.jsonl``'s ``advantage_abs_mean`` (mean
|A| over the completion tokens of the rows with a reward, :func:`gradprobe.training.metrics.advantage_stats`) is 0.
Then no group's rewards differed (every group flat: zero-variance), or the groups whose rewards differed overflowed
float64 group statistics (``reward_stats.nonfinite_groups``: advantage 0,
:func:`gradprobe.grpo.advantages.group_normalize`), or the reward gave no completion a reward (``reward_valid`` 0).
A line without a numeric ``advantage_abs_mean`` (written by an older gradprobe) counts as trained: nothing is
flagged that the run folder cannot show.

The cause of a set of such updates (:func:`cause`), the first that holds:

``"overflowed"``  some update had groups whose rewards overflowed (the reward is too large: rescale it);
``"no_reward"``   the reward gave no completion of any of them a reward (None, NaN or +-inf);
``"truncated"``   every completion of every one of them was cut at ``max_new_tokens`` (``truncation_rate`` 1.0),
                  so every completion of a prompt scored alike;
``"flat"``        otherwise: every group's rewards were equal.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["CAUSES", "trained", "unrewarded", "cause", "describe", "max_abs_reward", "advice", "untrained_history",
           "stop_history", "untrained_tail", "never_trained"]

#: cause -> what it means, in the words of a report (:func:`describe` adds the figures)
CAUSES = {"overflowed": "the rewards of every group whose rewards differ overflowed float64 group statistics",
          "no_reward": "the reward gave no completion a reward (None, NaN or +-inf)",
          "truncated": "every completion was truncated (truncation_rate 1.0), so every group's rewards were equal",
          "flat": "every group's rewards were equal (all groups flat: zero variance)"}


def _number(v) -> float | None:
    """``v`` as a float when it is a JSON number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def trained(line: dict) -> bool | None:
    """Whether the update line ``line`` of ``metrics.jsonl`` trained some group (``advantage_abs_mean`` > 0); None
    when the line does not say (no finite ``advantage_abs_mean``: an older gradprobe, or a NaN written as null)."""
    a = _number(line.get("advantage_abs_mean")) if isinstance(line, dict) else None
    return None if a is None or not math.isfinite(a) else a > 0


def unrewarded(line) -> bool:
    """Whether the update line ``line`` of ``metrics.jsonl`` surely gave no completion a reward: its ``reward_valid``
    (a count of completions) is an integer <= 0. A line without one (written by an older gradprobe) or that is no
    JSON object counts as rewarded: a run is stopped only when it surely trained nothing."""
    return isinstance(line, dict) and isinstance(line.get("reward_valid"), int) and line["reward_valid"] <= 0


def _stat(line: dict, key: str) -> float:
    """``line["reward_stats"][key]`` as a float (0.0 when absent or not a number)."""
    st = line.get("reward_stats")
    return (_number(st.get(key)) or 0.0) if isinstance(st, dict) else 0.0


def cause(lines: list[dict]) -> str:
    """The cause (a key of :data:`CAUSES`, module docstring) of the update lines ``lines``, which trained nothing."""
    if any(_stat(x, "nonfinite_groups") > 0 for x in lines):
        return "overflowed"
    if lines and all(_number(x.get("reward_valid")) == 0 for x in lines):
        return "no_reward"
    if lines and all((_number(x.get("truncation_rate")) or 0.0) >= 1.0 for x in lines):
        return "truncated"
    return "flat"


def describe(lines: list[dict], max_new_tokens: int | None = None) -> str:
    """One phrase for a report: :data:`CAUSES` of :func:`cause` with its figures (the largest |reward| that
    overflowed; ``max_new_tokens`` when known)."""
    why = cause(lines)
    if why == "overflowed":
        return f"{CAUSES[why]} (|reward| up to {max_abs_reward(lines):.3g})"
    if why == "truncated" and max_new_tokens is not None:
        return (f"every completion was truncated at max_new_tokens = {max_new_tokens} (truncation_rate 1.0), so "
                "every group's rewards were equal")
    return CAUSES[why]


def max_abs_reward(lines: list[dict]) -> float:
    """The largest |reward| of the groups that overflowed in ``lines`` (``reward_stats.overflow_max_abs_reward``)."""
    return max([_stat(x, "overflow_max_abs_reward") for x in lines] or [0.0])


def advice(why: str, reward: str, max_new_tokens: int | None = None) -> str:
    """What the user can change for cause ``why`` (a key of :data:`CAUSES`) of reward ``reward``."""
    return {"overflowed": f"rescale the reward {reward!r} (keep |reward| far below 1e150, e.g. in [0, 1])",
            "no_reward": f"fix the reward {reward!r} (it must return a finite number for the completions it scores)",
            "truncated": f"raise [sampling] max_new_tokens (now {max_new_tokens}) so that completions can end",
            "flat": "give the policy prompts it solves sometimes but not always (the [task] config or a prompt "
                    "selection rule), or raise [train] group or [sampling] temperature; check that the reward "
                    f"{reward!r} tells completions apart"}[why]


def _update_lines(path: Path):
    """The update lines of ``metrics.jsonl`` ``path`` in order (eval lines and blank lines skipped).

    Raises OSError, UnicodeDecodeError or ValueError (a line that is no JSON) as reading does."""
    with open(path, encoding="utf-8") as f:
        for text in f:
            if text.strip():
                line = json.loads(text)
                if isinstance(line, dict) and line.get("eval") is not True:
                    yield line


def untrained_history(path: Path) -> list[dict] | None:
    """Every update line of ``metrics.jsonl`` ``path`` when none of them trained (:func:`trained` False for each);
    None when one trained or does not say, or the file cannot be read (reads up to the first such line)."""
    out = []
    try:
        for line in _update_lines(Path(path)):
            if trained(line) is not False:
                return None
            out.append(line)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return out


def stop_history(path: Path) -> tuple[list[dict], bool, bool] | None:
    """``metrics.jsonl`` ``path`` read once for the stop rule of a run that trains nothing
    (:func:`gradprobe.training.update.check_untrained_stop`): ``(lines, no_reward, untrained)``.

    ``no_reward``: :func:`unrewarded` holds for every update line; ``untrained``: :func:`trained` is False for every
    update line that is a JSON object (as :func:`untrained_history`); both True for a file without update lines.
    ``lines``: the update lines (JSON objects), oldest first: all of them unless both are False. Reading stops at the
    first line that rules out both (eval and blank lines skipped), so a run that trained and was rewarded at update 1
    costs one line. None when the file cannot be read or a line read is no JSON (OSError, UnicodeDecodeError
    or ValueError): a run is stopped only when its file shows that it trained nothing."""
    lines, no_reward, untrained = [], True, True
    try:
        with open(path, encoding="utf-8") as f:
            for text in f:
                if not text.strip():
                    continue
                line = json.loads(text)
                if isinstance(line, dict) and line.get("eval") is True:  # an eval line (parsed: never by its text)
                    continue
                no_reward = no_reward and unrewarded(line)
                untrained = untrained and (not isinstance(line, dict) or trained(line) is False)
                if not (no_reward or untrained):
                    break
                if isinstance(line, dict):
                    lines.append(line)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return lines, no_reward, untrained


def never_trained(path: Path, max_new_tokens: int | None = None) -> dict | None:
    """The record of a run that never trained, from its ``metrics.jsonl`` ``path``: ``{"cause", "why", "updates",
    "max_abs_reward", "grad_norm_max"}`` (:func:`cause` and :func:`describe`, with ``max_new_tokens`` when given;
    the number of update lines; the largest |reward| that overflowed, 0.0 if none; the largest ``grad_norm``, None
    when none is recorded). None when some update trained, a line does not say (an older gradprobe), the file has
    no update line or cannot be read."""
    lines = untrained_history(path)
    if not lines:
        return None
    norms = [v for v in (_number(x.get("grad_norm")) for x in lines) if v is not None]
    return {"cause": cause(lines), "why": describe(lines, max_new_tokens), "updates": len(lines),
            "max_abs_reward": max_abs_reward(lines), "grad_norm_max": max(norms) if norms else None}


def untrained_tail(path: Path, limit: int, block: int = 1 << 16) -> list[dict]:
    """The last update lines of ``metrics.jsonl`` ``path`` that trained nothing in a row (oldest first), at most
    ``limit``: read from the file's end, ``block`` bytes at a time, so a long run costs no more than a short one.
    A line that does not say (:func:`trained` None) ends the row; a file that cannot be read gives []."""
    try:
        with open(path, "rb") as f:
            pos, rest, out = f.seek(0, 2), b"", []
            while pos > 0:
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                parts = (f.read(step) + rest).split(b"\n")
                rest = parts.pop(0) if pos > 0 else b""  # a line cut by the block's start: read with the next block
                for text in reversed(parts):
                    stop = _take(text, out, limit)
                    if stop:
                        return out[::-1]
    except (OSError, ValueError):
        return []
    return out[::-1]


def _take(text: bytes, out: list, limit: int) -> bool:
    """Add the update line ``text`` (newest first) to ``out`` when it trained nothing; True when the row ends here
    (a line that trained or does not say, or ``limit`` lines taken). Eval and blank lines are skipped.

    Raises ValueError (UnicodeDecodeError included) for a line that is no JSON."""
    if not text.strip():
        return False
    line = json.loads(text.decode("utf-8"))
    if not isinstance(line, dict) or line.get("eval") is True:
        return False
    if trained(line) is not False:
        return True
    out.append(line)
    return len(out) >= limit
