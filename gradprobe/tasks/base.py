"""The task plug-in point: a source of problems plus the verifier that scores them.

A :class:`Task` hands out :class:`Problem` objects for two splits, ``"train"``
(the prompt pool training draws from) and ``"heldout"`` (evaluation), and
scores a completion against a problem with the single extraction rule of
:mod:`gradprobe.tasks.verify` (the reward is a method on the task, as in
nanochat). Scores are exact: 1.0 or 0.0, never partial credit.
"""

from __future__ import annotations

import abc
import functools
import json
import numbers
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gradprobe.outputs import first_repeated_key, json_short
from gradprobe.tasks.verify import (
    answers_match,
    extract_answer,
    looks_like_latex,
    normalize_number,
)

__all__ = [
    "Problem",
    "Task",
    "SPLITS",
    "TRAIN_ONLY_FOLDER",
    "TaskNotFoundError",
    "TaskConfigError",
    "DatasetFormatError",
    "decode_row",
    "decoded_rows",
    "parse_json_row",
    "unencodable_text",
    "JSON_SURROGATE_FIX",
    "PYTHON_SURROGATE_FIX",
    "text_cell_problem",
    "prompt_place",
    "data_row",
    "prompt_key",
    "repeated_prompts",
    "drop_train_prompts",
    "removed_heldout_note",
    "warn_repeated_train_prompts",
    "no_rows_error",
    "check_seed",
    "PROGRESS_UNITS",
    "file_lines",
    "known_length",
]

SPLITS = ("train", "heldout")

#: How to train on every row of one JSONL file (said when its train share is too small for a request).
TRAIN_ONLY_FOLDER = (", so to use every row for training, put the file in a folder as train.jsonl and give "
                     "{kind}:FOLDER (a folder without test.jsonl holds nothing out)")


class TaskNotFoundError(ValueError):
    """The task spec names no known task (the message lists the valid ones)."""


class TaskConfigError(ValueError):
    """A task was given an unknown or invalid configuration value."""


class DatasetFormatError(ValueError):
    """A dataset row cannot be used (the message names file, line and fix)."""


def decode_row(raw: bytes) -> tuple[str | None, str | None]:
    """One JSONL row's bytes as UTF-8 text, or why not (JSONL files are read row by row as bytes, so
    that a row with invalid UTF-8 is a malformed row of its own, named and skippable, and not an
    error about the whole file).

    Parameters
    ----------
    raw : bytes
        The row as read from the file (its newline included or not).

    Returns
    -------
    (str, None)
        The decoded row.
    (None, str)
        When it is not valid UTF-8: what is wrong (the first bad byte, its position in the row, the
        text before it) and the fix, to be reported with the file and row.
    """
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as err:
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16's byte-order mark (Notepad's "Unicode")
            return None, (f"not valid UTF-8: the file is UTF-16 text (its byte-order mark, 0x{raw[0]:02x} "
                          f"0x{raw[1]:02x}, opens it); save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)")
        before = raw[:err.start].decode("utf-8", errors="replace")[-30:]
        bad = " ".join(f"0x{b:02x}" for b in raw[err.start:err.end])
        return None, (f"not valid UTF-8 (byte {bad} at byte {err.start + 1} of the row, after {before!r}: "
                      f"{err.reason}); save the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8 if it is Latin-1)")


def decoded_rows(records, on_bad):
    """``(line, raw)`` pairs of a JSONL reader with every ``bytes`` row decoded (:func:`decode_row`); a row that
    is not UTF-8 goes to ``on_bad(line, why)`` (the task's malformed-row handling: raise, or skip and count)
    instead of being yielded. Rows that are already text or dicts (a hub dataset) pass as they are. A UTF-8
    byte-order mark opening line 1 (Windows editors write one) is dropped: it is no part of the first row."""
    for line, raw in records:
        if line == 1 and isinstance(raw, bytes) and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if isinstance(raw, bytes):
            raw, why = decode_row(raw)
            if raw is None:
                on_bad(line, why)
                continue
        yield line, raw


class _RepeatedKey(ValueError):
    """Raised by :func:`_unique_keys` (inside ``json.loads``): ``why`` says which key came twice, with both values."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _unique_keys(pairs: list) -> dict:
    """The ``object_pairs_hook`` of :func:`parse_json_row` (as the reference-curve reader's): the object of ``pairs``
    ((key, value) in file order), refused when one key comes twice, with equal values too
    (:func:`gradprobe.outputs.first_repeated_key`: readers differ on which value they keep, Python's json the last)."""
    repeated = first_repeated_key(pairs)
    if repeated is None:
        return dict(pairs)
    key, first, then = repeated
    both = (f"both {json_short(then, 40)}" if first == then and type(first) is type(then)
            else f"{json_short(first, 40)}, then {json_short(then, 40)}")
    raise _RepeatedKey(f"the row names the key {json.dumps(key)} twice ({both}): JSON readers keep one of the two "
                       "(Python's json the last, silently), so which value was meant cannot be told; give each key "
                       "once in the row")


def _nul_cause(text: str, line: int) -> str:
    """Why a row holding NUL bytes is not JSON: a tail of them (a file cut short by a crash and padded) or NULs
    inside its text (UTF-16 text, or damage), with the fix."""
    body = text.rstrip("\r\n")
    start, count = body.index("\x00"), body.count("\x00")
    if "\x00" not in body.rstrip("\x00"):  # NULs to the end of the line: the tail a crash leaves
        return (f"NUL bytes (0x00) from character {start + 1} of the line on ({count} of them"
                + (f", after {_cut(body[:start][-30:])}" if start else "") + f"): the file was cut short and padded "
                f"with NUL bytes from line {line} on (a crash while it was written leaves such a tail); restore the "
                f"file from a good copy, or delete its NUL bytes from line {line} on (and a row they cut short)")
    return (f"NUL bytes (0x00) inside its text ({count} of them, the first at character {start + 1}): a file saved "
            "as UTF-16 has one beside each character (save it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8), a damaged "
            "one has them where its text was lost (restore it from a good copy)")


def _cr_separated_rows(body: str) -> bool:
    """Whether ``body`` (a line that is not JSON) is several JSON rows a carriage return alone separates (a file with
    CR-only line endings): at least two parts, each JSON on its own. A raw CR inside a string (invalid JSON too) is
    no separator: splitting there leaves parts that are not JSON."""
    parts = [part for part in body.split("\r") if part.strip()]
    if len(parts) < 2:
        return False
    for part in parts:
        try:
            json.loads(part)
        except (ValueError, RecursionError):
            return False
    return True


def parse_json_row(text: str, line: int) -> tuple[object, str | None]:
    """One JSONL row's text (line ``line`` of its file, counting from 1) parsed as JSON: ``(value, None)``, or
    ``(None, why)`` when it cannot be read, ``why`` naming the cause and the fix for the task to report with its
    file and line:

    - a key given twice in an object (``{"answer": "15", "answer": "0"}``): ``json.loads`` keeps the last value
      without a word, so every gold could be wrong; refused whatever the values (:func:`_unique_keys`);
    - NUL bytes: a tail of them (a file cut short by a crash and padded) or NULs inside the text (UTF-16);
    - carriage returns alone between rows (a file with CR-only line endings reads as one line of several rows);
    - arrays or objects nested deeper than Python's JSON parser reads (its recursion limit), where a row nests a
      few levels;
    - otherwise ``not valid JSON (<the parser's message>)``.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys), None
    except _RepeatedKey as err:
        return None, err.why
    except RecursionError:
        return None, (f"its arrays or objects nest deeper than Python's JSON parser reads (its recursion limit, "
                      f"{sys.getrecursionlimit()} levels), where a row nests a few levels: the row is damaged")
    except json.JSONDecodeError as err:
        if "\x00" in text:
            return None, _nul_cause(text, line)
        body = text.rstrip("\r\n")
        if _cr_separated_rows(body):  # rows a carriage return alone separates: CR-only line endings
            rows = sum(1 for part in body.split("\r") if part.strip())
            return None, (f"not valid JSON ({err.msg}): the line holds {rows} rows separated by a carriage return "
                          "(CR) alone, which is no line break in JSONL (the file has CR-only line endings); convert "
                          "its line endings to LF or CRLF (e.g. tr '\\r' '\\n' < FILE > FIXED.jsonl)")
        return None, f"not valid JSON ({err.msg})"


#: The fix :func:`unencodable_text` names for a data file's row (JSON text, whose escapes pair up).
JSON_SURROGATE_FIX = ("(a JSON escape \\ud800-\\udbff must be followed by its \\udc00-\\udfff pair, e.g. "
                      "\\ud83d\\ude00 for one emoji); write the whole character (or its pair of escapes), or delete "
                      "the escape")
#: The fix named for text built in Python (a :class:`Problem` made by hand, a prompt given to
#: :func:`gradprobe.tasks.prompts.encode_prompt`): a Python string keeps the two halves of a pair apart.
PYTHON_SURROGATE_FIX = ("(in a Python string the escapes '\\ud83d\\ude00' are two halves, not one emoji); write the "
                        "whole character ('\\U0001f600' or the character itself; text.encode('utf-16', "
                        "'surrogatepass').decode('utf-16') joins a string's pairs of halves), or delete the half")


def _unencodable(text: str, field: str, fix: str = JSON_SURROGATE_FIX) -> str | None:
    """Why ``text`` (a row's ``field``) is not UTF-8 text, or None (:func:`unencodable_text`); ``fix`` ends it."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as err:
        bad = text[err.start]
        return (f"field {field} holds \\u{ord(bad):04x} (character {err.start + 1}, after "
                f"{text[max(0, err.start - 30):err.start]!r}), an unpaired UTF-16 surrogate: half of a character, "
                f"which no UTF-8 text can hold {fix}")



def data_row(prob) -> float:
    """A problem's 0-based row in its data file or hub split (``metadata["row"]``, set by the loaders); inf when it
    has none (a generated task's problem), so that a sort by it names data rows first, in file order."""
    row = (getattr(prob, "metadata", None) or {}).get("row")
    ok = isinstance(row, numbers.Real) and not isinstance(row, bool) and row == row and abs(row) != float("inf")
    return float(row) if ok and row >= 0 else float("inf")


def prompt_place(prob) -> str:
    """How a message names a problem: ``"prompt jsonl/pool/7 (line 8) of pool.jsonl"``, its id and, for a data
    file's row, its line (counting from 1) and file (``(row 8) of`` a hub split); ``"prompt p3"`` for a problem
    with no data row (:func:`data_row`) or source."""
    source = (getattr(prob, "metadata", None) or {}).get("source")
    row = data_row(prob)
    where = (f" ({'line' if str(source).endswith('.jsonl') else 'row'} {int(row) + 1}) of {source}"
             if source and row != float("inf") else "")
    return f"prompt {getattr(prob, 'id', '?')}{where}"

def unencodable_text(row, field: str = "", fix: str = JSON_SURROGATE_FIX) -> str | None:
    """Why a parsed row cannot be used as text, or None: the first string in it (a value or a key, in nested
    lists and objects too) that UTF-8 cannot encode. JSON text may hold an unpaired UTF-16 surrogate escape
    (``"\\ud800"``): the file is valid UTF-8 and valid JSON, but the decoded string holds half a character,
    which a tokenizer (or any UTF-8 writer) refuses when the prompt is first used, long after loading. Checked
    on every row a task reads (JSONL rows and hub rows alike), next to :func:`decode_row`'s check of the bytes.

    Parameters
    ----------
    row : dict, list or str
        The row as parsed (other values hold no text and pass).
    field : str
        The path of ``row`` inside the top-level row, for the message ("" for the row itself).
    fix : str
        How the message ends: the fix, after the words "which no UTF-8 text can hold" (:data:`JSON_SURROGATE_FIX`
        for a file's row; :data:`PYTHON_SURROGATE_FIX` for text built in Python).

    Returns
    -------
    str or None
        What is wrong (the field, e.g. ``'question'`` or ``'prompt'[1]['content']``, the character, its position
        and the text before it) and the fix; None when every string in the row is valid text.
    """
    if isinstance(row, str):
        return _unencodable(row, field or "the row", fix)
    if isinstance(row, dict):
        for key, value in row.items():
            if isinstance(key, str) and (why := _unencodable(key, f"name {key!r}", fix)):
                return why
            if why := unencodable_text(value, f"{field}[{key!r}]" if field else repr(key), fix):
                return why
    elif isinstance(row, (list, tuple)):
        for i, value in enumerate(row):
            if why := unencodable_text(value, f"{field}[{i}]", fix):
                return why
    return None


def text_cell_problem(row: dict, column: str, said: str = "") -> str | None:
    """Why ``row[column]`` cannot be a question's, prompt's or answer's text, or None: the column is absent,
    null, not a string, or empty or whitespace only (a blank prompt would be trained on as a real one). One
    check for every task that reads text from rows (``gsm8k:``, ``jsonl:``, ``hf:``), so they refuse alike.

    Parameters
    ----------
    row : dict
        The parsed row.
    column : str
        The column read, e.g. ``"question"``.
    said : str
        How the option that maps the column is named after it, e.g. ``" (question=)"`` (``jsonl:``/``hf:``);
        "" where the column is fixed (``gsm8k:``).

    Returns
    -------
    str or None
        E.g. ``"column 'question' is empty"`` (the task adds its file, line and fix); None when the text is usable.
    """
    if column not in row:
        return f"no {column!r} key"
    value = row[column]
    name = f"column {column!r}{said}"
    if value is None:
        return f"{name} is null"
    if not isinstance(value, str):
        return f"{name} is not a string (got {type(value).__name__})"
    if not value.strip():
        return f"{name} is empty" + (f" (whitespace only: {value!r})" if value else "")
    return None


@dataclass(frozen=True)
class Problem:
    """One problem of a task.

    Attributes
    ----------
    id : str
        Stable identifier, ``"<task>/<split>/<index>"``, e.g.
        ``"chain_sum/train/17"`` or ``"gsm8k/test/12"``.
    question : str
        The question text, without any instruction or chat formatting
        (see :func:`gradprobe.tasks.prompts.format_prompt`).
    answer : str
        The gold final answer.
    metadata : dict
        Task metadata; JSON-serialisable (plain dicts, lists, str, numbers).
        Excluded from the hash, so problems can be set members / dict keys.

    Raises
    ------
    ValueError
        ``question`` (its text, or a :class:`~gradprobe.tasks.columns.PromptText`'s messages or instruction) or
        ``answer`` holds an unpaired UTF-16 surrogate (e.g. ``"\\ud800"``), which no tokenizer can encode: the
        message names the problem's id, the field, the character and its place, and the fix
        (:func:`unencodable_text`). Rows read from a task's files are refused before, naming their line.
    """

    id: str
    question: str
    answer: str
    metadata: dict = field(default_factory=dict, hash=False)

    def __post_init__(self):
        q = self.question
        parts = [("'question'", q), ("'question'.messages", getattr(q, "messages", None)),
                 ("'question'.instruction", getattr(q, "instruction", None)), ("'answer'", self.answer)]
        for name, value in parts:
            if why := unencodable_text(value, name, PYTHON_SURROGATE_FIX):
                raise ValueError(f"Problem {self.id!r} cannot be encoded for a model: {why}")


def prompt_key(question) -> str:
    """A question's text with its whitespace runs collapsed to one space: two questions that differ only
    in spacing or line breaks are the same prompt (the held-out split drops those seen in train by it)."""
    return " ".join(str(question).split())


def repeated_prompts(problems) -> list[list[str]]:
    """The ids of each set of problems that share one prompt (:func:`prompt_key`), each set in the given
    order and the sets in the order of their first member; empty when every prompt is distinct.

    Parameters
    ----------
    problems : sequence of Problem, length N
    """
    return [[p.id for p in ps] for ps in _same_prompt(problems)]


def _same_prompt(problems) -> list[list[Problem]]:
    """The problems of each prompt (:func:`prompt_key`) held more than once, as :func:`repeated_prompts`."""
    by_key: dict[str, list] = {}
    for p in problems:
        by_key.setdefault(prompt_key(p.question), []).append(p)
    return [ps for ps in by_key.values() if len(ps) > 1]


def _line_of(problem, unit: str, named: bool = False) -> str:
    """Where a data row is, counting from 1 (``line 4``; ``test.jsonl line 4`` with ``named``), from its
    ``metadata["row"]`` (0-based) and ``["source"]``; its id when it has no row."""
    meta = problem.metadata or {}
    if not isinstance(meta.get("row"), int):
        return str(problem.id)
    source = str(meta.get("source") or "")
    return (f"{Path(source).name} " if named and source else "") + f"{unit} {meta['row'] + 1}"


def drop_train_prompts(rows, train) -> tuple[list, list]:
    """The held-out ``rows`` whose prompt (:func:`prompt_key`) no ``train`` row has, and the others.

    Parameters
    ----------
    rows, train : sequence of Problem
        A held-out split's rows and the training split's, in source order.

    Returns
    -------
    (kept, removed)
        ``kept``: the rows to hold out, in order; ``removed``: ``[(row, train_row), ...]``, each removed row with
        the first training row of its prompt, in order.

    Raises nothing.
    """
    first: dict[str, Problem] = {}
    for p in train:
        first.setdefault(prompt_key(p.question), p)
    kept, removed = [], []
    for p in rows:
        seen = first.get(prompt_key(p.question))
        if seen is None:
            kept.append(p)
        else:
            removed.append((p, seen))
    return kept, removed


def removed_heldout_note(removed, kept: int, unit: str = "line") -> str:
    """Why a held-out split is smaller than its rows: how many were removed as repeats of a training prompt
    (:func:`drop_train_prompts`), with up to 3 examples (``line 4 repeats line 1``, counting from 1), for the
    message of a request the split cannot fill. ``unit``: ``line`` (a JSONL file) or ``row`` (a hub split); a removed
    row from another file than its training row (a folder's test.jsonl) is named with its file. Raises nothing."""
    named = any((p.metadata or {}).get("source") != (t.metadata or {}).get("source") for p, t in removed)
    shown = "; ".join(f"{_line_of(p, unit, named)} repeats {_line_of(t, unit, named)}" for p, t in removed[:3])
    return (f"{len(removed)} of the {len(removed) + kept} held-out rows were removed because their prompt is also a "
            f"training prompt ({shown}{'; ...' if len(removed) > 3 else ''}), and a held-out score must not count "
            f"prompts trained on; give the data distinct prompts")


def warn_repeated_train_prompts(rows, where: str, unit: str = "line") -> None:
    """One warning when training ``rows`` repeat a prompt (:func:`prompt_key`): how many rows repeat an earlier
    one's, and up to 3 of those prompts (their text, cut at 40 characters) with the first 4 of their lines or
    rows (``unit``, counting from 1). Each copy is drawn as a prompt of its own, so one batch can hold several
    groups of one question (GRPO's baseline is each group's mean reward, so two groups of one question split what
    would be one group of 2G completions) and fewer distinct questions than prompts. The rows are kept.

    Warns
    -----
    UserWarning
        ``where``: the task's name; a second one when repeated prompts have different gold answers (``answer``),
        naming up to 3 with their golds and lines. Raises nothing.
    """
    groups = _same_prompt(rows)
    if not groups:
        return
    shown = "; ".join(f"{_cut(prompt_key(ps[0].question))} on {unit}s "
                      f"{', '.join(_line_of(p, unit).split()[-1] for p in ps[:4])}"
                      f"{', ...' if len(ps) > 4 else ''} ({len(ps)} rows)" for ps in groups[:3])
    warnings.warn(f"{where}: {sum(len(ps) - 1 for ps in groups)} training row(s) repeat an earlier row's prompt "
                  f"({len(groups)} prompt(s) on several {unit}s: {shown}{'; ...' if len(groups) > 3 else ''}): "
                  f"each copy is drawn as a prompt of its own, so a batch can hold several groups of one question "
                  f"and fewer distinct questions than prompts; keep one row per prompt", stacklevel=4)
    conflicts = [ps for ps in groups if _golds_differ([p.answer for p in ps])]
    if conflicts:
        shown = "; ".join(f"{_cut(prompt_key(ps[0].question))}: " + ", ".join(
            f"{p.answer!r} on {unit} {_line_of(p, unit).split()[-1]}" for p in ps[:4]) for ps in conflicts[:3])
        warnings.warn(f"{where}: {len(conflicts)} repeated training prompt(s) have different gold answers "
                      f"({shown}{'; ...' if len(conflicts) > 3 else ''}): at most one gold can be right, so the same "
                      "correct completion is rewarded 1 on one row and 0 on another; fix the golds (keep one row per "
                      "prompt)", stacklevel=4)


def _golds_differ(golds: list) -> bool:
    """Whether two of ``golds`` are told apart by the verifier's comparison (:func:`gradprobe.tasks.verify.
    answers_match`, either way round): ``$5`` and ``5``, or ``0.5`` and ``1/2``, are one answer."""
    texts = [str(g) for g in dict.fromkeys(golds)]
    return any(not (answers_match(a, b) or answers_match(b, a)) for i, a in enumerate(texts) for b in texts[i + 1:])


def _cut(text: str, width: int = 40) -> str:
    """``text``'s repr, cut to ``width`` characters with ``...``."""
    return repr(text) if len(text) <= width else repr(text[:width - 3] + "...")


def no_rows_error(file, example: str) -> DatasetFormatError:
    """The error for a JSONL ``file`` with no row at all (empty, or blank lines only), naming it, what it holds
    and what a row looks like (``example``, a JSON object of the task's columns): returned, for the loader to raise.

    Raises
    ------
    OSError
        ``file`` cannot be read (it is read again to count its blank lines).
    """
    data = Path(file).read_bytes().removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is no line (decoded_rows)
    blank = (data.count(b"\n") + (not data.endswith(b"\n"))) if data else 0
    what = f"holds {blank} blank line(s) and no row" if blank else "is empty"
    return DatasetFormatError(f"{file} {what}: a JSONL file holds one row per line, each a JSON object such as "
                              f"{example}; add rows to it (or give another file)")


#: The units in which a task reports the building of a pool (:attr:`Task.progress_unit`, :meth:`Task.report_progress`).
PROGRESS_UNITS = ("prompt", "line", "row")


def file_lines(file) -> int:
    """The lines of ``file`` as a JSONL reader sees them: its newline bytes, plus 1 for a last line without a final
    newline (which is read as a row too); 0 for an empty file. Read in 1 MiB chunks (cheap next to a JSON parse).

    Raises
    ------
    OSError
        ``file`` cannot be read.
    """
    lines, last = 0, b"\n"
    with open(file, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            lines, last = lines + chunk.count(b"\n"), chunk[-1:]
    return lines + (last != b"\n")


def known_length(ds) -> int | None:
    """The rows of a loaded hub split or any sized sequence of rows (``len(ds)``, a ``datasets.Dataset``'s
    ``num_rows``), or None when it cannot tell (a streamed ``datasets.IterableDataset`` has no length). Raises
    nothing."""
    try:
        return int(len(ds))
    except TypeError:
        rows = getattr(ds, "num_rows", None)
        return rows if isinstance(rows, int) and not isinstance(rows, bool) else None


class Task(abc.ABC):
    """Abstract task: problems for two disjoint splits and an exact-match score.

    Subclasses implement :meth:`problems`; :meth:`score` and
    :meth:`format_rate` use :mod:`gradprobe.tasks.verify`.

    Progress: a task may say how far the building of a training pool has got (``gradprobe rank-prompts`` and
    ``difficulty-eval`` show it as a bar with a total and ETA: :func:`gradprobe.difficulty.progress.pool_problems`).
    It sets :attr:`progress_unit` and calls :meth:`report_progress` from its :meth:`problems` as items are made or
    rows read; the builder sets :attr:`on_progress` on the task for the one ``problems("train", n, seed=...)`` call
    and removes it after. A task that leaves :attr:`progress_unit` None gets the elapsed seconds only.

    Attributes
    ----------
    name : str
        Task name as given to :func:`gradprobe.tasks.load_task`.
    numeric_answers : bool
        True when every gold answer is a number; then :meth:`format_rate`
        requires a number (or a LaTeX expression) after ``####``.
    progress_unit : {"prompt", "line", "row"} or None
        What :meth:`report_progress` counts while a pool is built (:data:`PROGRESS_UNITS`): ``"prompt"``: the n
        problems of ``problems("train", n, seed=s)``, each reported as it is made (``done=1`` with its ``split`` and
        ``seed``); the total, n, is known before. ``"line"``: the lines of the files read, each file's line count
        reported when it is opened (``total=``, :func:`file_lines`), each line as it is parsed (``done=1``).
        ``"row"``: the rows of a loaded dataset, their number reported once it is loaded (``total=``; not reported
        when the dataset cannot tell it), each row as it is parsed. None (default): nothing is reported.
    on_progress : callable or None
        The hook :meth:`report_progress` calls, ``on_progress(done=int, total=int|None, split=str|None,
        seed=int|None)``;
        None (default) except while a pool's builder has set it.
    """

    name: str = "task"
    numeric_answers: bool = False
    progress_unit: str | None = None
    on_progress = None

    def report_progress(self, done: int = 0, *, total: int | None = None, split: str | None = None,
                        seed: int | None = None) -> None:
        """Tell the pool's builder (:attr:`on_progress`) that ``done`` more items were made or rows parsed, and that
        ``total`` more are to come (in :attr:`progress_unit`); nothing when no builder listens.

        Parameters
        ----------
        done : int
            Items made or rows parsed since the last report (>= 0).
        total : int, optional
            Rows or lines newly known to come (>= 0: an empty file's 0 too; ``"line"`` and ``"row"`` units only);
            None (default): no news of the total.
        split : {"train", "heldout"} or None
        seed : int or None
            The ``problems`` request the items are made for: the builder counts only those of its own request
            (``"train"`` and its data seed; a few-shot wrapper's examples, made with
            :data:`~gradprobe.tasks.fewshot.FEWSHOT_SEED`, are not the pool's). None: any request.

        Raises
        ------
        TypeError
            ``done`` is not a whole number (an int or numpy integer; a bool, float or None is none), ``total`` is
            neither None nor one, ``split`` is neither None nor a string, or ``seed`` neither None nor an integer.
        ValueError
            ``done`` or ``total`` is negative, or ``split`` is not one of :data:`SPLITS`.

        Each message names the argument, its value, what is accepted and the task class whose call to fix
        (``report_progress: done must be a whole number >= 0 (...), got None; fix the task's call (MyTask.problems)``).
        The arguments are checked whether a builder listens or not (the same call fails with the bar on or off); a
        call with plain ints and a split string costs a few type tests (it is made once per item or row). What the
        hook raises propagates.
        """
        if not (type(done) is int and done >= 0 and (total is None or type(total) is int and total >= 0)
                and (split is None or type(split) is str and split in SPLITS) and (seed is None or type(seed) is int)):
            done, total, seed = _checked_report(type(self).__name__, done, total, split, seed)
        hook = self.on_progress
        if hook is not None:
            hook(done=done, total=total, split=split, seed=seed)

    def reported_rows(self, records):
        """``records`` (an iterable of rows being parsed), each reported with ``done=1`` (:meth:`report_progress`)
        once the parser asks for the next one; ``records`` itself when no builder listens (:attr:`on_progress`)."""
        if self.on_progress is None:
            return records

        def rows():
            for record in records:
                yield record
                self.report_progress(1)
        return rows()

    def __init_subclass__(cls, **kwargs):
        """A subclass's own :meth:`problems` checks ``seed`` first (:func:`check_seed`): a negative or NaN seed is
        named here, not refused by numpy deep inside the task."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("problems")
        if own is None or getattr(own, "__isabstractmethod__", False) or getattr(own, "_checks_seed", False):
            return

        @functools.wraps(own)
        def problems(self, *args, **kwargs):
            if "seed" in kwargs:
                check_seed(kwargs["seed"])
            return own(self, *args, **kwargs)

        problems._checks_seed = True
        cls.problems = problems

    @abc.abstractmethod
    def problems(self, split: str, n: int, *, seed: int = 0) -> list[Problem]:
        """Return ``n`` problems of ``split``.

        Parameters
        ----------
        split : {"train", "heldout"}
            Training pool or evaluation set; the two never share a question.
        n : int
            Number of problems (>= 0).
        seed : int, default 0
            Selects the sample; the result is deterministic for
            ``(split, n, seed)`` and the task's configuration.

        Returns
        -------
        list of Problem
            Length ``n``.

        Raises
        ------
        ValueError
            Unknown ``split``, negative ``n``, negative ``seed``, or more problems than exist.
        TypeError
            ``seed`` is not an integer (:func:`check_seed`).
        """

    def score(self, completion: str, problem: Problem) -> float:
        """Exact-match reward of one completion.

        Parameters
        ----------
        completion : str
            Generated text (without the prompt).
        problem : Problem
            The problem the completion answers.

        Returns
        -------
        float
            1.0 if the extracted answer equals ``problem.answer`` after
            normalisation, else 0.0 (also when no answer can be extracted).
            A multi-line gold answer is compared with the whole block after
            the last ``####``.
        """
        multiline = "\n" in problem.answer.strip()  # grids and move lists
        predicted = extract_answer(completion, multiline=multiline)
        return float(answers_match(predicted, problem.answer))

    def format_rate(self, completion: str) -> bool:
        """Whether the completion has a parseable final answer after ``####``.

        ``\\boxed{}`` alone does not count: this measures whether the policy
        follows the requested format. For numeric tasks the answer must hold a
        number or a LaTeX expression; otherwise any non-blank text counts.

        Parameters
        ----------
        completion : str
            Generated text (without the prompt).

        Returns
        -------
        bool
        """
        answer = extract_answer(completion, boxed_fallback=False)
        if answer is None:
            return False
        if self.numeric_answers:
            return normalize_number(answer) is not None or looks_like_latex(answer)
        return True

    @staticmethod
    def _check_request(split: str, n: int) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _checked_report(owner: str, done, total, split, seed) -> tuple:
    """``(done, total, seed)`` of a :meth:`Task.report_progress` call by task class ``owner``, as plain ints (None
    kept), once each is accepted; the errors :meth:`Task.report_progress` documents, naming ``owner``."""
    fix = f"fix the task's call ({owner}.problems)"

    def whole(name: str, value, what: str):
        if type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
            if value >= 0:
                return int(value)
            raise ValueError(f"report_progress: {name} must be a whole number >= 0 ({what}), got {value!r}; {fix}")
        raise TypeError(f"report_progress: {name} must be a whole number >= 0 ({what}), got {value!r} "
                        f"({type(value).__name__}); {fix}")

    done = whole("done", done, "items made or rows read since the last report")
    if total is not None:
        total = whole("total", total, "rows or lines newly known to come, or None")
    if split is not None and not (isinstance(split, str) and split in SPLITS):
        error = ValueError if isinstance(split, str) else TypeError
        raise error(f"report_progress: split must be None or one of {SPLITS} (the request the items are made for), "
                    f"got {split!r}; {fix}")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"report_progress: seed must be None or an int (the data seed of the request the items "
                            f"are made for), got {seed!r} ({type(seed).__name__}); {fix}")
        seed = int(seed)
    return done, total, seed


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` when it is a non-negative integer (a data seed of :meth:`Task.problems`).

    Raises
    ------
    TypeError
        ``seed must be a non-negative integer, got nan (float)``: not an integer (a bool is none either).
    ValueError
        ``seed must be a non-negative integer, got -1 (int)``.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative integer, got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r} ({type(seed).__name__})")
    return int(seed)


def parse_task_config(text: str) -> dict:
    """``"a=1,b=x"`` -> ``{"a": 1, "b": "x"}`` (JSON values where they parse, strings otherwise).

    Raises
    ------
    TaskConfigError
        An item is not ``key=value``, or a key is given twice (which value was meant cannot be told).
    """
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TaskConfigError(f"task config item {item!r} is not key=value (e.g. "
                                  "chain_sum:min_terms=2,max_digits=1)")
        if key.strip() in out:
            raise TaskConfigError(f"task config key {key.strip()!r} is given twice ({text!r}); give each key once")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def relative_note(path: Path, sep: str = "; ") -> str:
    """For a relative data path: where it was looked for (the working directory; a plan's ``[task] name`` is read
    from there too, not from the plan's folder)."""
    if path.is_absolute():
        return ""
    return (f"{sep}a relative path is read from the working directory, {Path.cwd()} (a plan's task path too, not "
            "from the plan's folder)")
