"""GSM8K (grade-school math word problems) from the hub or local JSONL.

Sources:

- ``GSM8KTask()``: the hub copy, ``datasets.load_dataset("openai/gsm8k",
  "main")`` (``datasets`` is imported only then); ``train`` -> "train",
  ``test`` -> "heldout".
- ``GSM8KTask("folder")``: ``folder/train.jsonl`` and ``folder/test.jsonl``.
- ``GSM8KTask("file.jsonl")``: one file, split deterministically: a fixed
  permutation (independent of ``seed``) puts ``heldout_fraction`` of its rows
  in heldout.

Each row is ``{"question": ..., "answer": "...reasoning...\\n#### 72"}``. The
gold answer is the text after the last ``####``, stripped, with thousands
commas removed, its number read by the completion's rule
(:func:`gradprobe.tasks.verify.numeric_gold`: ``"#### 13 apples"`` is stored
as gold ``"13"``; ``"#### 13.0"`` is kept and read as 13; both are matched by
``#### 13`` and ``#### 13 apples``). A row without one,
or whose answer holds no number (``"#### twelve"``: a completion echoing the
same words would otherwise score 1.0 by text comparison) or several
(``"#### 3:30"``), a row whose question or answer is missing, null, not a
string or blank (the check ``jsonl:`` data gets:
:func:`~gradprobe.tasks.base.text_cell_problem`), a row whose text is not
UTF-8 (bytes that are not, or an unpaired surrogate escape such as
``"\\ud800"``: :func:`~gradprobe.tasks.base.unencodable_text`), and a row that names a key
twice or a line that is no JSON (its cause named where known:
:func:`~gradprobe.tasks.base.parse_json_row`) is an error
(:class:`DatasetFormatError`, naming file, line and fix), or, with
``skip_malformed=True``, skipped, counted (``self.skipped``) and warned about;
never dropped silently. Heldout rows whose
question also occurs in train are removed (the official splits share none; a
request they leave unfilled counts them); a train split that repeats a
question is warned about once. A file with no row (empty, or blank lines
only) is a :class:`DatasetFormatError` naming it and showing a row.

Sampling: ``numpy.random.default_rng(seed).permutation`` of the split's rows,
first ``n``; so the first ``n`` of a seed are a prefix of its first ``n + k``.
Ids are ``"gsm8k/<file stem>/<0-based line index>"``, e.g. ``"gsm8k/test/12"``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from gradprobe.tasks.base import (TRAIN_ONLY_FOLDER, DatasetFormatError, Problem, Task, TaskConfigError,
                                  decoded_rows, drop_train_prompts, file_lines, known_length, no_rows_error,
                                  parse_json_row, relative_note, removed_heldout_note, text_cell_problem,
                                  unencodable_text, warn_repeated_train_prompts)
from gradprobe.tasks.verify import drop_thousands_separators, numeric_gold

__all__ = ["GSM8KTask", "gold_from_solution"]

HUB_ID = "openai/gsm8k"
_FILES = {"train": "train.jsonl", "heldout": "test.jsonl"}
_SPLIT_SEED = 20240101  # fixed: the single-file train/heldout split never moves


def gold_from_solution(solution: str) -> str | None:
    """Gold answer of a GSM8K solution: text after the last ``####``, thousands separators removed (``"1,5"`` is kept:
    :func:`gradprobe.tasks.verify.drop_thousands_separators`).

    Parameters
    ----------
    solution : str
        The ``answer`` field, e.g. ``"... = 1,200\\n#### 1,200"``.

    Returns
    -------
    str or None
        ``"1200"``; None if there is no ``####`` or nothing after it.
    """
    if not isinstance(solution, str) or "####" not in solution:
        return None
    gold = drop_thousands_separators(solution.rsplit("####", 1)[1].strip())
    return gold or None


def _inline_options_note(path: Path) -> str:
    """For ``gsm8k:PATH:skip_malformed=true`` (the ``jsonl:`` spec's inline options, which ``gsm8k:PATH`` does not
    take): the fix."""
    tail = str(path).rsplit(":", 1)
    if len(tail) < 2 or "=" not in tail[1]:
        return ""
    return (f" (`gsm8k:PATH` takes no inline options such as {tail[1]!r}: pass them as flags (--skip-malformed), "
            "a plan's [task.config] keys or load_task keyword arguments)")


class GSM8KTask(Task):
    """GSM8K as a :class:`~gradprobe.tasks.base.Task` (see the module docstring).

    Parameters
    ----------
    path : str or Path, optional
        JSONL file or folder with ``train.jsonl`` / ``test.jsonl``; None loads
        the hub copy. A leading ``~`` or ``~user`` is that home folder, as in a shell.
    skip_malformed : bool, default False
        Skip (count and warn about) malformed rows (a blank question, an answer
        with none after ``####`` or one without a number, text that is not
        UTF-8) instead of raising.
    heldout_fraction : float, default 0.2
        Single-file source only: share of rows put in heldout.

    Progress (:meth:`~gradprobe.tasks.base.Task.report_progress`): local JSONL in ``"line"`` units (each file's line
    count when opened, each line as parsed), the hub copy in ``"row"`` units (its length once loaded).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, or a folder holds neither expected file.
    TaskConfigError
        ``heldout_fraction`` outside (0, 1).
    """

    numeric_answers = True

    def __init__(self, path: str | Path | None = None, *, skip_malformed: bool = False,
                 heldout_fraction: float = 0.2):
        self.name = "gsm8k" if path is None else f"gsm8k:{path}"
        self.path = None if path is None else Path(os.path.expanduser(path))  # ~: the home folder, as in a shell
        self.skip_malformed = skip_malformed
        self.heldout_fraction = heldout_fraction
        self.skipped = 0
        self.progress_unit = "row" if path is None else "line"
        self._rows: dict[str, list[Problem]] = {}
        self._warned_repeats = False
        if not 0.0 < heldout_fraction < 1.0:
            raise TaskConfigError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
        if self.path is not None:
            if not self.path.exists():
                raise FileNotFoundError(f"GSM8K source {self.path} does not exist" + _inline_options_note(self.path)
                                        + relative_note(self.path, "; "))
            if self.path.is_dir() and not any((self.path / f).exists() for f in _FILES.values()):
                raise FileNotFoundError(
                    f"folder {self.path} holds neither train.jsonl nor test.jsonl"
                )

    # -- reading -------------------------------------------------------------
    def _bad_row(self, where: str, line: int, problem: str) -> None:
        msg = (
            f"{where}, line {line}: {problem}. Each line must be a JSON object with a "
            f"'question' and an 'answer' whose final answer follows '####' (e.g. "
            f"\"... \\n#### 42\")"
        )
        if not self.skip_malformed:
            raise DatasetFormatError(msg + "; fix or delete the line, or skip such rows (command line: "
                                           "--skip-malformed; plans: skip_malformed = true under [task.config]; "
                                           "Python: skip_malformed=True)")
        self.skipped += 1
        warnings.warn(f"skipping malformed GSM8K row: {msg}", stacklevel=4)

    def _parse(self, records, where: str, stem: str) -> list[Problem]:
        """Validate ``(line_number, raw)`` pairs; raw is a JSON string or a dict."""
        out = []
        records = self.reported_rows(records)  # each row reported as parsed (a pool's progress)
        for line, raw in decoded_rows(records, lambda line, why: self._bad_row(where, line, why)):
            if isinstance(raw, str):
                if not raw.strip():
                    continue  # blank lines are not rows
                raw, why = parse_json_row(raw, line)  # a key given twice, NUL bytes, CR-only line endings named
                if why:
                    self._bad_row(where, line, why)
                    continue
            if not isinstance(raw, dict):
                self._bad_row(where, line, f"not a JSON object (got {type(raw).__name__})")
                continue
            why = unencodable_text(raw) or text_cell_problem(raw, "question") or text_cell_problem(raw, "answer")
            if why:  # "\ud800" in the JSON text (valid JSON, but no UTF-8 text); a blank question or answer
                self._bad_row(where, line, why)
                continue
            gold = gold_from_solution(raw["answer"])
            if gold is None:
                self._bad_row(where, line, "the 'answer' has no final answer after '####'")
                continue
            gold, why = numeric_gold(gold)
            if gold is None:
                self._bad_row(where, line, f"the final answer after '####' {why}, and a GSM8K answer is one number "
                                           "(read as a completion's is: a completion repeating words would score "
                                           "1.0, one giving the number 0.0)")
                continue
            out.append(Problem(
                id=f"gsm8k/{stem}/{line - 1}",
                question=raw["question"],
                answer=gold,
                metadata={"source": where, "row": line - 1, "solution": raw["answer"]},
            ))
        return out

    def _read_file(self, file: Path) -> list[Problem]:
        skipped = self.skipped
        if self.on_progress is not None:  # a pool's builder listens: the file's lines are its total
            self.report_progress(total=file_lines(file))
        with open(file, "rb") as fh:  # bytes: a row that is not UTF-8 is a malformed row (decode_row)
            rows = self._parse(enumerate(fh, start=1), str(file), file.stem)
        if not rows and self.skipped == skipped:  # no row at all: not a split too small for the request
            raise no_rows_error(file, '{"question": "What is 2 + 3?", "answer": "2 + 3 = 5\\n#### 5"}')
        return rows

    def _read_hub(self, hub_split: str) -> list[Problem]:
        try:
            import datasets
        except ImportError as err:
            raise ImportError(
                "loading GSM8K from the hub needs the 'datasets' package "
                "(pip install datasets), or use 'gsm8k:PATH' with local JSONL"
            ) from err
        ds = datasets.load_dataset(HUB_ID, "main", split=hub_split)
        self.report_progress(total=known_length(ds))  # a pool's total where the split knows its length
        return self._parse(enumerate(ds, start=1), f"{HUB_ID}:{hub_split}", hub_split)

    def _load(self, which: str) -> list[Problem]:
        """All rows of ``which`` ("train", "test" or "all") from the source."""
        if which not in self._rows:
            if self.path is None:
                self._rows[which] = self._read_hub(which)
            elif self.path.is_file():
                self._rows[which] = self._read_file(self.path)
            else:
                file = self.path / f"{which}.jsonl"
                if not file.exists():
                    raise FileNotFoundError(
                        f"{file} is missing: the folder form of gsm8k needs train.jsonl "
                        f"for 'train' and test.jsonl for 'heldout'"
                    )
                self._rows[which] = self._read_file(file)
        return self._rows[which]

    def split_rows(self, split: str) -> list[Problem]:
        """All usable problems of ``split`` in file order (heldout minus train questions).

        Parameters
        ----------
        split : {"train", "heldout"}

        Returns
        -------
        list of Problem

        Warns once per task when the training split repeats a question
        (:func:`~gradprobe.tasks.base.warn_repeated_train_prompts`).
        """
        return self._split(split)[0]

    def _split(self, split: str) -> tuple[list[Problem], list]:
        """``split``'s rows and, for ``heldout``, those removed as repeats of a train question
        (:func:`~gradprobe.tasks.base.drop_train_prompts`)."""
        self._check_request(split, 0)
        if self.path is not None and self.path.is_file():
            rows = self._load("all")
            perm = np.random.default_rng(_SPLIT_SEED).permutation(len(rows))
            n_held = int(round(self.heldout_fraction * len(rows)))
            chosen = sorted(perm[:n_held] if split == "heldout" else perm[n_held:])
            rows, train = [rows[i] for i in chosen], [rows[i] for i in sorted(perm[n_held:])]
        else:
            rows = self._load("train" if split == "train" else "test")
            has_train = self.path is None or (self.path / _FILES["train"]).exists()
            train = self._load("train") if split == "heldout" and has_train else []
        if split == "train" and not self._warned_repeats:
            self._warned_repeats = True
            warn_repeated_train_prompts(rows, self.name, "line")
        if split == "heldout" and train:
            return drop_train_prompts(rows, train)
        return rows, []

    def problems(self, split: str, n: int, *, seed: int = 0) -> list[Problem]:
        """Return ``n`` problems of ``split`` sampled without replacement.

        Parameters
        ----------
        split : {"train", "heldout"}
        n : int
        seed : int, default 0
            Seed of the ``numpy.random.default_rng`` permutation.

        Returns
        -------
        list of Problem

        Raises
        ------
        ValueError
            Bad split, or ``n`` larger than the split (the message gives its size).
        DatasetFormatError
            A malformed row (unless ``skip_malformed``).
        """
        self._check_request(split, n)
        rows, removed = self._split(split)
        if n > len(rows):
            why = []
            if self.skipped:
                why.append(f"{self.skipped} malformed row(s) were skipped")
            if self.path is not None and self.path.is_file():
                why.append(f"a single file is split {1 - self.heldout_fraction:.0%} train / "
                           f"{self.heldout_fraction:.0%} heldout (heldout_fraction)"
                           + (TRAIN_ONLY_FOLDER.format(kind="gsm8k") if split == "train" else ""))
            if removed:
                why.append(removed_heldout_note(removed, len(rows)))
            elif split == "heldout":
                why.append("held-out questions that also appear in train are removed")
            raise ValueError(f"{self.name} {split!r} has {len(rows)} problems; asked for {n}"
                             + (f" ({'; '.join(why)})" if why else "") + "; ask for fewer or give more rows")
        order = np.random.default_rng(seed).permutation(len(rows))[:n]
        return [rows[i] for i in order]
