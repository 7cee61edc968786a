"""Updates of a training run that trained nothing, and why; torch-free (the study's analysis reads them too).

An update trained nothing when every advantage of its batch was 0: ``metrics.jsonl``'s ``advantage_abs_mean`` (mean
|A| over the completion tokens of the rows with a reward, :func:`gradprobe.training.metrics.advantage_stats`) is 0.
Then no group's rewards differed (every group flat: zero-variance), or the groups whose rewards differed overflowed
float64 group statistics (``reward_stats.nonfinite_groups``: advantage 0,
:func:`gradprobe.grpo.advantages.group_normalize`; in a hybrid, the part that overflowed gave those groups advantage 0
and the other part did too, ``reward_stats.nonfinite_part_groups``: :func:`overflowed_parts`), or the reward gave no
completion a reward (``reward_valid`` 0).
A line without a numeric ``advantage_abs_mean`` (written by an older gradprobe) counts as trained: nothing is
flagged that the run folder cannot show.

The cause of a set of such updates (:func:`cause`), the first that holds:

``"overflowed"``  some update had groups whose rewards overflowed (the reward is too large: rescale it);
``"no_reward"``   the reward gave no completion of any of them a reward (None, NaN or +-inf);
``"truncated"``   every completion of every one of them was cut at ``max_new_tokens`` (``truncation_rate`` 1.0),
                  so every completion of a prompt scored alike;
``"flat"``        otherwise: every group's rewards were equal.

Which lines of ``metrics.jsonl`` are update lines: one rule for every reader of this module and the study's
(:func:`metrics_line`, :func:`update_lines`; :func:`gradprobe.study.orchestrator.longest_untrained_row`). Blank lines
and eval lines (``"eval": true``) are skipped; the file's last line, when it has no newline and is no JSON object, is
a line still being written or cut by a killed run (the writer puts the newline last): skipped. Any other line that
is no JSON object (invalid UTF-8 or JSON, or JSON of another type) is damage: it may have been an update, so it counts
as one that does not say whether it trained (:func:`trained` None, :func:`unrewarded` False). No reader raises for it
and none claims across it: a row that trained nothing ends there (the warnings), the stop rule stops nothing
(:func:`stop_history`) and the run is not said to have never trained (:func:`untrained_history`).
A line longer than :data:`MAX_LINE_BYTES` (its newline not counted) is no line the trainer wrote (its lines are a few
KB at most; e.g. the NUL bytes a crash can leave at a file's end): it counts as no JSON object, told by its length
alone, so no reader reads or holds more than that of it. A UTF-8 byte-order mark at the very start of the file (an
editor's) is read as nothing; anywhere else it is a byte of its line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

from ..forecast.overflow_parts import names_text, overflow_parts

__all__ = ["CAUSES", "LINE_KINDS", "MAX_LINE_BYTES", "trained", "unrewarded", "cause", "describe", "max_abs_reward",
           "overflowed_parts", "advice", "metrics_line", "update_lines", "untrained_history", "stop_history",
           "untrained_tail", "never_trained"]

#: cause -> what it means, in the words of a report (:func:`describe` adds the figures)
CAUSES = {"overflowed": "the rewards of every group whose rewards differ overflowed float64 group statistics",
          "no_reward": "the reward gave no completion a reward (None, NaN or +-inf)",
          "truncated": "every completion was truncated (truncation_rate 1.0), so every group's rewards were equal",
          "flat": "every group's rewards were equal (all groups flat: zero variance)"}

#: the kinds of line of ``metrics.jsonl`` (:func:`metrics_line`; module docstring)
LINE_KINDS = ("blank", "eval", "update", "unfinished", "damaged")

#: bytes (newline not counted) above which a line of ``metrics.jsonl`` is no JSON object (module docstring)
MAX_LINE_BYTES = 1 << 20

_BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark


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


def overflowed_parts(lines: list[dict]) -> list[str]:
    """The parts of a hybrid reward that overflowed float64 group statistics in the update lines ``lines``: the names
    counted > 0 in ``reward_stats.nonfinite_part_groups`` (part -> groups,
    :func:`gradprobe.rewards.dense.hybrid_overflow_stats`; each line's read by
    :func:`gradprobe.forecast.overflow_parts.overflow_parts`), in the order first seen; [] for a plain
    reward or lines written without the key (the reward overflowed as a whole). Raises nothing."""
    names: list[str] = []
    for x in lines:
        parts = overflow_parts(x.get("reward_stats")) if isinstance(x, dict) else None
        names += [k for k, n in (parts or {}).items() if n > 0 and k not in names]
    return names


def describe(lines: list[dict], max_new_tokens: int | None = None) -> str:
    """One phrase for a report: :data:`CAUSES` of :func:`cause` with its figures (the largest |reward| that
    overflowed, and the hybrid's parts that overflowed: :func:`overflowed_parts`; ``max_new_tokens`` when known)."""
    why = cause(lines)
    if why == "overflowed":
        parts = overflowed_parts(lines)
        of = "" if not parts else (
            f"; of the hybrid's parts, {names_text(parts)} overflowed, so its advantage was 0 in those groups, and the "
            "other part gave them advantage 0 too" if len(parts) == 1 else
            f"; of the hybrid's parts, {names_text(parts)} overflowed, each with advantage 0 in the groups where it "
            "overflowed, and no part trained any group")
        return f"{CAUSES[why]} (|reward| up to {max_abs_reward(lines):.3g}{of})"
    if why == "truncated" and max_new_tokens is not None:
        return (f"every completion was truncated at max_new_tokens = {max_new_tokens} (truncation_rate 1.0), so "
                "every group's rewards were equal")
    return CAUSES[why]


def max_abs_reward(lines: list[dict]) -> float:
    """The largest |reward| of the groups that overflowed in ``lines`` (``reward_stats.overflow_max_abs_reward``)."""
    return max([_stat(x, "overflow_max_abs_reward") for x in lines] or [0.0])


def advice(why: str, reward: str, max_new_tokens: int | None = None, lines: list[dict] | None = None) -> str:
    """What the user can change for cause ``why`` (a key of :data:`CAUSES`) of reward ``reward``; for
    ``"overflowed"`` of a hybrid, the parts that overflowed in the update lines ``lines`` (:func:`overflowed_parts`)
    are named: only they need rescaling."""
    parts = overflowed_parts(lines or []) if why == "overflowed" else []
    what = (f"the part{'s' if len(parts) > 1 else ''} {names_text(parts)} of the reward {reward!r}" if parts else
            f"the reward {reward!r}")
    return {"overflowed": f"rescale {what} (keep |reward| far below 1e150, e.g. in [0, 1])",
            "no_reward": f"fix the reward {reward!r} (it must return a finite number for the completions it scores)",
            "truncated": f"raise [sampling] max_new_tokens (now {max_new_tokens}) so that completions can end",
            "flat": "give the policy prompts it solves sometimes but not always (the [task] config or a prompt "
                    "selection rule), or raise [train] group or [sampling] temperature; check that the reward "
                    f"{reward!r} tells completions apart"}[why]


def metrics_line(raw: bytes, ended: bool, first: bool = False) -> tuple[str, dict | None]:
    """What one line of ``metrics.jsonl`` is (module docstring): ``(kind, line)``, ``kind`` one of
    :data:`LINE_KINDS`, ``line`` the JSON object for ``"eval"`` and ``"update"``, else None.

    ``raw``: the line's bytes (its newline may be included), or any more than :data:`MAX_LINE_BYTES` of them for a
    longer line (a reader need not read it all); ``ended``: a newline ended it (False only for a file's last line
    without one); ``first``: it is the file's first line (a UTF-8 byte-order mark at its start is read as nothing).
    ``"blank"``: whitespace only; ``"eval"``: an object whose ``eval`` is true; ``"update"``: any other object;
    ``"unfinished"``: not ``ended`` and no JSON object; ``"damaged"``: ``ended`` and no JSON object (invalid UTF-8 or
    JSON, a JSON array, string, number or null, or longer than :data:`MAX_LINE_BYTES`). Raises nothing."""
    if len(raw) - raw.endswith(b"\n") > MAX_LINE_BYTES:
        return ("damaged" if ended else "unfinished"), None
    if first and raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    if not raw.strip():
        return "blank", None
    try:
        line = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError included; JSON nested too deep
        line = None
    if not isinstance(line, dict):
        return ("damaged" if ended else "unfinished"), None
    return ("eval" if line.get("eval") is True else "update"), line


def _lines(f) -> Iterator[tuple[bytes, bool, bool]]:
    """``(raw, ended, first)`` for :func:`metrics_line` of each line of the binary file ``f``, oldest first: a line
    longer than :data:`MAX_LINE_BYTES` as its first ``MAX_LINE_BYTES + 2`` bytes, the rest read past in blocks and
    not kept (memory bounded whatever the file)."""
    first = True
    while raw := f.readline(MAX_LINE_BYTES + 2):
        ended = raw.endswith(b"\n")
        if not ended and len(raw) > MAX_LINE_BYTES:  # too long to be the trainer's: read on to its newline
            while (more := f.readline(1 << 16)) and not more.endswith(b"\n"):
                pass
            ended = bool(more)
        yield raw, ended, first
        first = False


def _lines_from_end(f, block: int) -> Iterator[tuple[bytes, bool, bool]]:
    """``(raw, ended, first)`` for :func:`metrics_line` of each line of the binary file ``f``, newest first, read
    ``block`` bytes at a time from its end; each byte is read once and copied at most twice (linear time). A line
    longer than :data:`MAX_LINE_BYTES` is given (as its last ``MAX_LINE_BYTES`` + up to ``block`` bytes) as soon as
    that much of it is read, so a reader that stops at it reads no further; its earlier bytes are then read past,
    not kept."""
    pos, ended = f.seek(0, 2), False
    chunks, size = [], 0  # the line being read: its pieces, last first; its length so far (bytes)
    while pos > 0:
        step = min(block, pos)
        pos -= step
        f.seek(pos)
        data = f.read(step)
        end = len(data)
        while True:
            cut = data.rfind(b"\n", 0, end)  # -1: the line began before this block
            if size <= MAX_LINE_BYTES:
                chunks.append(data[cut + 1:end])
                size += end - cut - 1
                if size > MAX_LINE_BYTES:  # told by its length alone (module docstring)
                    yield b"".join(reversed(chunks)), ended, False
            if cut < 0:
                break
            if size <= MAX_LINE_BYTES:
                yield b"".join(reversed(chunks)), ended, False
            chunks, size, ended, end = [], 0, True, cut
    if size <= MAX_LINE_BYTES:
        yield b"".join(reversed(chunks)), ended, True


def update_lines(path: Path) -> Iterator[dict | None]:
    """The update lines of ``metrics.jsonl`` ``path``, oldest first, as :func:`metrics_line` tells them: each a dict,
    or None for a damaged line (an update that does not say: :func:`trained` None, :func:`unrewarded` False);
    blank, eval and unfinished lines skipped. A generator: a reader that stops early reads no further; it holds at
    most about :data:`MAX_LINE_BYTES` of a line.

    Raises OSError when the file cannot be opened or read."""
    with open(path, "rb") as f:
        for raw, ended, first in _lines(f):
            kind, line = metrics_line(raw, ended, first)
            if kind in ("update", "damaged"):
                yield line


def untrained_history(path: Path) -> list[dict] | None:
    """Every update line of ``metrics.jsonl`` ``path`` (:func:`update_lines`) when none of them trained
    (:func:`trained` False for each); None when one trained, does not say or is damaged, or the file cannot be read
    (reads up to the first such line)."""
    out = []
    try:
        for line in update_lines(Path(path)):
            if trained(line) is not False:
                return None
            out.append(line)
    except OSError:
        return None
    return out


def stop_history(path: Path) -> tuple[list[dict], bool, bool] | None:
    """``metrics.jsonl`` ``path`` read once for the stop rule of a run that trains nothing
    (:func:`gradprobe.training.update.check_untrained_stop`): ``(lines, no_reward, untrained)``.

    ``no_reward``: :func:`unrewarded` holds for every update line (:func:`update_lines`); ``untrained``:
    :func:`trained` is False for every update line (as :func:`untrained_history`); both True for a file without
    update lines, both False once a damaged line is read (it says neither). ``lines``: the update lines, oldest
    first: all of them unless both are False. Reading stops at the first line that rules out both, so a run that
    trained and was rewarded at update 1 costs one line. None when the file cannot be read (OSError): a run is
    stopped only when its file shows that it trained nothing, and never fails for its file."""
    lines, no_reward, untrained = [], True, True
    try:
        for line in update_lines(Path(path)):
            no_reward = no_reward and unrewarded(line)
            untrained = untrained and trained(line) is False
            if not (no_reward or untrained):
                break
            lines.append(line)
    except OSError:
        return None
    return lines, no_reward, untrained


def never_trained(path: Path, max_new_tokens: int | None = None) -> dict | None:
    """The record of a run that never trained, from its ``metrics.jsonl`` ``path``: ``{"cause", "why", "updates",
    "max_abs_reward", "grad_norm_max"}`` (:func:`cause` and :func:`describe`, with ``max_new_tokens`` when given;
    the number of update lines; the largest |reward| that overflowed, 0.0 if none; the largest ``grad_norm``, None
    when none is recorded). None when some update trained, a line does not say (an older gradprobe) or is damaged
    (:func:`update_lines`), the file has no update line or cannot be read."""
    lines = untrained_history(path)
    if not lines:
        return None
    norms = [v for v in (_number(x.get("grad_norm")) for x in lines) if v is not None]
    return {"cause": cause(lines), "why": describe(lines, max_new_tokens), "updates": len(lines),
            "max_abs_reward": max_abs_reward(lines), "grad_norm_max": max(norms) if norms else None}


def untrained_tail(path: Path, limit: int, block: int = 1 << 16) -> list[dict]:
    """The last update lines of ``metrics.jsonl`` ``path`` that trained nothing in a row (oldest first), at most
    ``limit``: read from the file's end, ``block`` bytes at a time, so a long run costs no more than a short one.
    Lines are told apart as :func:`update_lines` does (:func:`metrics_line`): a line that does not say
    (:func:`trained` None) or is damaged ends the row; an unfinished last line is skipped; a file that cannot be
    read gives []. Time linear in the bytes read; a damaged line longer than :data:`MAX_LINE_BYTES` is read no
    further than that (an unfinished one is read past to its start, holding no more of it)."""
    out = []
    try:
        with open(path, "rb") as f:
            for raw, ended, first in _lines_from_end(f, block):
                if _take(metrics_line(raw, ended, first), out, limit):
                    break
    except OSError:
        return []
    return out[::-1]


def _take(read: tuple[str, dict | None], out: list, limit: int) -> bool:
    """Add the update line of ``read`` (:func:`metrics_line`'s, newest first) to ``out`` when it trained nothing;
    True when the row ends here (a line that trained, does not say or is damaged, or ``limit`` lines taken)."""
    kind, line = read
    if kind not in ("update", "damaged"):
        return False
    if trained(line) is not False:
        return True
    out.append(line)
    return len(out) >= limit
