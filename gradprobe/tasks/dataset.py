"""Your own data as a task: a JSONL file or folder (``jsonl:PATH``) or a Hugging Face dataset
(``hf:NAME[:CONFIG]``), with a column mapping, TRL's prompt formats and a choice of verifier.

Spec and options (the same keys on the command line, in Python and in plans)::

    --task jsonl:data/my.jsonl                                   # columns prompt (or question), answer
    --task "jsonl:data/my.jsonl:question=problem,answer=final,verifier=boxed"
    --task "hf:openai/gsm8k:main:question=question,answer=answer"
    load_task("jsonl:data/my.jsonl", question="problem", answer="final", verifier="boxed")
    # plans: [task] name = "jsonl:data/my.jsonl", and [task.config] question = "problem" ...

Column mapping (values are column names):

``prompt``
    TRL's ``prompt`` column, in either of TRL's formats: *plain* (a string, used as the prompt
    verbatim: no instruction, no chat template) or *conversational* (a list of ``{"role",
    "content"}`` messages with at least one ``user`` turn, rendered with the model's chat template
    and its generation prompt). Default: ``prompt`` when the data has that column.
``question``
    Instead of ``prompt``: a bare question, to which gradprobe adds its instruction (one step per
    line, the answer after ``####``; with ``verifier=boxed``, the answer in ``\\boxed{}``) and the
    chat template, as for GSM8K. Default: ``question`` when the data has no ``prompt`` column.
``answer``
    The gold final answer (required; default ``answer``).
``solution``
    Optional worked solution, kept in ``Problem.metadata["solution"]`` (default ``solution`` when
    present).

Verifiers (``verifier=``):

``hash`` (default)
    GSM8K's convention: the completion's final answer is the line after its last ``####`` (else its
    last ``\\boxed{}``), compared with the gold as an exact number
    (:func:`gradprobe.tasks.verify.answers_match`); a gold with ``####`` in it (a GSM8K solution)
    is reduced to the text after the last one. The gold's number is read by the same rule as the
    completion's (:func:`gradprobe.tasks.verify.numeric_gold`): units, currency, ``%`` and a final ``.`` are
    dropped (a gold such as ``"13 apples"`` or ``"13."`` is stored as ``"13"``), so gold ``"13 apples"``,
    ``"$13"``, ``"13%"``, ``"13."`` or ``13.0`` is read as 13, and ``#### 13``, ``#### 13.0`` and
    ``#### 13 apples`` all score 1. A gold with no
    number, or with several (``"3:30"``, ``"1 and 2"``), is a malformed row (use ``verifier=exact`` for text
    answers); a LaTeX gold (``\\sqrt{2}``) is kept as written and math-verify decides.
``boxed``
    MATH's convention: the completion's last ``\\boxed{}`` (else its ``####`` line) and the gold
    (the content of its last ``\\boxed{}``, else the whole value) are compared by math-verify
    (LaTeX equivalence: ``\\frac{1}{2}`` = ``0.5``).
``exact``
    The final answer (``####`` line, else last ``\\boxed{}``) equals the gold as a string, after
    stripping and collapsing spaces (case and punctuation count).
a callable
    (Python only) ``fn(completion: str, problem: Problem) -> float``.

Problem ids: ``"<kind>/<file stem or dataset/split>/<i>"`` with ``i`` the row's 0-based index in its
source (``Problem.metadata["row"]``; a message about a malformed row names its line of a JSONL file,
or its row of a hub split, counting from 1, so "line 5" is index 4). A row's own ``id`` value (a string or an
integer) is kept as ``Problem.metadata["id"]`` (``gradprobe rank-prompts`` writes it beside each prompt as
``data_id``; an id on several rows is warned about, naming them). A row's other scalar columns (numbers, text,
booleans: a difficulty level, a step count) are kept in ``Problem.metadata`` under their names, for ``gradprobe
rank-prompts --metadata-keys`` (which refuses a value that is no number, naming it).

Every column of a row other than the mapped ones (the prompt or question, answer and solution columns) reaches a
TRL-style reward (:func:`gradprobe.rewards.sequence.sequence_reward`) as the keyword of its name, one value per
completion, as TRL's ``GRPOTrainer`` passes every dataset column (:func:`gradprobe.rewards.sequence.trl_columns`).
The scalar ones are the metadata keys above; the others (lists, objects, nulls, and columns named as one of
gradprobe's own keys: a data column ``source`` or ``row`` beside the loader's ``source``, the file, and ``row``, the
index) are kept in one dict, ``Problem.metadata["data_columns"]`` (:data:`~gradprobe.tasks.columns.DATA_COLUMNS`;
absent when there are none), so that they cannot collide with the loader's keys; each column is held once. A column
named as one of the keywords gradprobe passes itself (``prompts``, ``completions``, ``answer``, ``problem_id``,
``completion_ids``: :data:`~gradprobe.tasks.columns.TRL_KEYWORDS`) does not reach the reward under that name, and the
loader warns once naming it (rename the column to pass it). A hub dataset's value that is no JSON value (an image,
bytes, a timestamp) is not kept (``Problem.metadata`` stays JSON-serialisable), warned once naming the column.
Problem metadata is written to no file gradprobe writes, so a large column costs memory only.

Splits: a JSONL *file* is split deterministically (a fixed permutation; ``heldout_fraction`` of
its rows, default 0.2, are held out); a *folder* holds ``train.jsonl`` and ``test.jsonl``. A hub
dataset uses ``train_split`` (default ``train``) and ``heldout_split`` (default ``test``;
``none``: split ``train_split`` by ``heldout_fraction``). Held-out rows whose prompt also occurs
in train are removed (a request they leave unfilled says how many, and which lines repeat which); a training
split that repeats a prompt is warned about once (how many rows, which lines), as each copy is drawn as a prompt
of its own. ``train_size`` (a plan's ``pool``) caps the training rows used.

Bad input is refused with the field named and the fix: a JSONL file with no row (empty, or blank lines only:
the file and what a row looks like), an unknown option or verifier, a mapping
that names a column the data does not have (the columns it has are listed), a row that lacks a
mapped column (an empty object ``{}`` too), has an empty or whitespace-only question, prompt or answer, or is
not valid UTF-8 (bytes that are not, or an unpaired surrogate escape such as ``"\\ud800"`` in any of its text;
file and line; ``skip_malformed=True`` skips, counts and warns instead), a conversational prompt without a
``user`` turn. A JSONL row that names a key twice (``{"answer": "15", "answer": "0"}``, equal values too: JSON
readers differ on which one they keep) is refused, as is a line that is no JSON, naming its cause where it is
known (NUL bytes a crash left, CR-only line endings, a CSV or parquet file, which ``hf:FOLDER`` reads;
:func:`gradprobe.tasks.base.parse_json_row`); a boolean answer is refused as a boolean.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np

from gradprobe.tasks.base import (TRAIN_ONLY_FOLDER, DatasetFormatError, Problem, Task, TaskConfigError,
                                  decoded_rows, drop_train_prompts, file_lines, known_length, no_rows_error,
                                  parse_json_row, relative_note, removed_heldout_note, unencodable_text,
                                  warn_repeated_train_prompts)
# column mapping and prompt formats live in gradprobe.tasks.columns; re-exported here (MAPPING_KEYS, _prompt_text too)
from gradprobe.tasks.columns import (BOXED_INSTRUCTION, DATA_COLUMNS, MAPPING_KEYS, OPTIONS, TRL_KEYWORDS, VERIFIERS,
                                     PromptText, _fix, _prompt_text, data_columns, gold_answer, parse_dataset_spec,
                                     read_gold, read_prompt, resolve_mapping)
from gradprobe.tasks.verify import answers_match, extract_answer, last_boxed, math_verify_match, normalize_text

__all__ = ["DatasetTask", "PromptText", "VERIFIERS", "OPTIONS", "BOXED_INSTRUCTION", "parse_dataset_spec",
           "repeated_data_ids"]

#: Metadata keys gradprobe itself reads or sets (a task's expression, a guided probe's guidance, score errors...):
#: a data column of that name never enters ``Problem.metadata`` as a feature (it would change what they mean).
RESERVED_METADATA = frozenset({"source", "row", "prompt_format", "id", "solution", "expression", "guidance",
                               "score_errors", "answer", "question", "prompt", "completion_ids", "problem_id",
                               DATA_COLUMNS})


def _scalar_columns(raw: dict, meta: dict, mapping: dict) -> dict:
    """The row's other scalar columns (JSON numbers, text, booleans: a difficulty level, a step count), kept in
    ``Problem.metadata`` under their names so ``gradprobe rank-prompts --metadata-keys`` can use the numeric ones as
    features and refuse the others by name (a level written "2" in one row was dropped, then imputed without a
    word); the mapped columns and :data:`RESERVED_METADATA` (keys gradprobe reads or sets: a float ``id`` stays
    out, as an id is text or an integer) are never taken."""
    used = {v for v in mapping.values() if isinstance(v, str)}
    return {k: v for k, v in raw.items() if isinstance(k, str) and k not in meta and k not in used
            and k not in RESERVED_METADATA and isinstance(v, (int, float, str))}


def _keep_columns(raw: dict, meta: dict, mapping: dict, told: tuple[dict, dict]) -> None:
    """Keep the row's other columns (:func:`~gradprobe.tasks.columns.data_columns`) that ``meta`` does not already
    hold under their name (:func:`_scalar_columns` keeps the scalar ones there, the same objects) in
    ``meta[DATA_COLUMNS]``, set only when some are left: lists, objects, nulls, and columns named as one of
    gradprobe's own keys (:data:`RESERVED_METADATA`: a data column ``source`` beside the loader's ``source``, the
    file). Each column is held once. ``told`` collects, for the loader's warning, the names of columns named as
    one of :data:`TRL_KEYWORDS` and the columns left out as no JSON value (name -> type)."""
    columns, dropped = data_columns(raw, mapping)
    told[0].update(dict.fromkeys(k for k in columns if k in TRL_KEYWORDS))
    told[1].update(dropped)
    rest = {k: v for k, v in columns.items() if k not in meta or meta[k] is not v}
    if rest:
        meta[DATA_COLUMNS] = rest


def repeated_data_ids(problems: list) -> list[tuple[object, list]]:
    """The data's own ``id`` values (``Problem.metadata["id"]``, a string or an integer) that more than one of
    ``problems`` holds, each with those problems in their order: ``[(id, [problem, ...]), ...]`` in the order each
    id first occurs; [] when every id is held once or no problem has one. ``rank-prompts`` writes each as
    ``data_id`` beside its prompt, where a repeated one cannot tell the prompts apart; the loader warns about them
    (:func:`_warn_repeated_ids`) and ``rank.json`` lists those of the ranked pool (``repeated_data_ids``).

    Ids are compared as the text ranking.csv writes (``str(id)``): 17 and "17" are one ``data_id`` there, so they
    count as a repeat. ``id`` is the value the problems hold when they all hold it as one type (17, or "17"), and
    that text when they differ in type (17 and "17": ``"17"``)."""
    held: dict = {}
    for p in problems:
        if "id" in (p.metadata or {}):
            held.setdefault(str(p.metadata["id"]), []).append(p)
    return [(ps[0].metadata["id"] if len({type(p.metadata["id"]) for p in ps}) == 1 else text, ps)
            for text, ps in held.items() if len(ps) > 1]


def _warn_repeated_ids(problems: list, where: str, unit: str) -> None:
    """One warning naming the data's own ``id`` values that occur on more than one row (with their rows, counted
    from 1; :func:`repeated_data_ids`): ``rank-prompts`` writes each as ``data_id`` beside its prompt, where a
    repeated one cannot tell the prompts apart. The rows are kept (each has its own problem id,
    ``<kind>/<stem>/<row>``)."""
    repeated = [(_said_id(ps), [p.metadata["row"] + 1 for p in ps]) for _, ps in repeated_data_ids(problems)]
    if repeated:
        shown = "; ".join(f"{i} on {unit}s {', '.join(map(str, r[:4]))}{', ...' if len(r) > 4 else ''}"
                          for i, r in repeated[:3])
        warnings.warn(f"{where}: {len(repeated)} id value(s) occur on more than one {unit} ({shown}"
                      f"{'; ...' if len(repeated) > 3 else ''}): each row is kept, but their data_id in "
                      "rank-prompts' ranking.csv cannot tell them apart; give each row its own id", stacklevel=3)


def _said_id(problems: list) -> str:
    """The id ``problems`` share (:func:`repeated_data_ids`) as the loader's warning names it: its ``repr`` (``'a'``,
    ``17``), each written form in the order first held when they differ in type (``17 and '17'``)."""
    forms = dict.fromkeys(repr(p.metadata["id"]) for p in problems)
    return " and ".join(forms)


def _other_format_hint(file: str, line: int, text: str | None = None) -> str:
    """What to add to a JSONL file's bad row when the file is CSV or parquet (its name ends in ``.csv`` or
    ``.parquet``, or its line 1, ``text``, is a comma-separated line that is no JSON object or list, no comment and
    holds no NUL byte, which UTF-16 text does), which
    ``jsonl:PATH`` does not read: ``hf:FOLDER`` does (``datasets`` reads the CSV and parquet files of a folder);
    "" otherwise."""
    suffix = Path(file).suffix.lower()
    if suffix not in (".csv", ".parquet") and not (
            line == 1 and text is not None and "," in text and "\x00" not in text  # NULs: UTF-16, named so
            and not text.lstrip().startswith(("{", "[", "#"))):  # "#": a comment line, no CSV header
        return ""
    what = "a parquet file" if suffix == ".parquet" else "CSV (comma-separated lines)"
    return (f"; {file} looks like {what}, which jsonl:PATH does not read (one JSON object per line): put it in a "
            "folder of its own and give hf:FOLDER:heldout_split=none (datasets reads a folder's CSV and parquet "
            "files; heldout_fraction of its rows are held out), or convert it to JSONL")


_SPLIT_SEED = 20240101  # as gsm8k: a file's train/heldout split never moves
_FILES = {"train": "train.jsonl", "heldout": "test.jsonl"}


def _load_quietly(datasets, quiet: bool, *args, **kwargs):
    """``datasets.load_dataset(*args, **kwargs)``, without its progress bars when ``quiet`` (a local folder, read
    anew on every load: its "Generating train split" bars would print each time); the setting is restored."""
    if not quiet or not datasets.is_progress_bar_enabled():
        return datasets.load_dataset(*args, **kwargs)
    datasets.disable_progress_bars()
    try:
        return datasets.load_dataset(*args, **kwargs)
    finally:
        datasets.enable_progress_bars()


class DatasetTask(Task):
    """A JSONL file or folder, or a Hugging Face dataset, as a task (module docstring).

    Parameters
    ----------
    source : str or Path
        ``kind="jsonl"``: a JSONL file or a folder with ``train.jsonl`` / ``test.jsonl``;
        ``kind="hf"``: a dataset name for ``datasets.load_dataset`` (or a local folder it reads). A leading ``~``
        or ``~user`` is that home folder, as in a shell.
    kind : {"jsonl", "hf"}
    hub_config : str, optional
        The hub dataset's configuration name (``hf:NAME:CONFIG``).
    prompt, question, answer, solution : str, optional
        Column mapping (module docstring).
    verifier : {"hash", "boxed", "exact"} or callable
    heldout_fraction : float
    train_split, heldout_split : str
    skip_malformed : bool
    train_size : int, optional
        Use at most this many training rows (a plan's ``pool``).

    Progress (:meth:`~gradprobe.tasks.base.Task.report_progress`): a JSONL source reports in ``"line"`` units (each
    file's line count when it is opened, each line as it is parsed); a hub dataset in ``"row"`` units (its length
    once loaded, when it has one: :func:`known_length`, each row as it is parsed). A split already read is not read
    again, so it reports nothing.

    Raises
    ------
    TaskConfigError
        Unknown verifier, bad ``heldout_fraction``, both ``prompt`` and ``question`` mapped.
    FileNotFoundError
        A missing JSONL path, or a folder with neither file.
    """

    def __init__(self, source, *, kind: str = "jsonl", hub_config: str | None = None, prompt: str | None = None,
                 question: str | None = None, answer: str = "answer", solution: str | None = None,
                 verifier="hash", heldout_fraction: float = 0.2, train_split: str = "train",
                 heldout_split: str = "test", skip_malformed: bool = False, train_size: int | None = None):
        if kind not in ("jsonl", "hf"):
            raise TaskConfigError(f"kind must be 'jsonl' or 'hf', got {kind!r}")
        if not (callable(verifier) or verifier in VERIFIERS):
            raise TaskConfigError(f"verifier={verifier!r} is not one of {', '.join(VERIFIERS)} (or, from Python, a "
                                  f"callable fn(completion, problem) -> float)")
        if prompt is not None and question is not None:
            raise TaskConfigError(f"map either prompt= (TRL's prompt column, used as it is) or question= (a bare "
                                  f"question, gradprobe adds its instruction), not both (got prompt={prompt!r}, "
                                  f"question={question!r})")
        if not 0.0 < float(heldout_fraction) < 1.0:
            raise TaskConfigError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
        for key, value in (("prompt", prompt), ("question", question), ("answer", answer), ("solution", solution)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise TaskConfigError(f"column mapping {key}={value!r} must name a column (a non-empty string)")
        if train_size is not None and int(train_size) < 1:
            raise TaskConfigError(f"train_size must be >= 1, got {train_size!r}")
        self.kind, self.hub_config = kind, hub_config
        local = os.path.expanduser(source)  # a leading ~ is the home folder, as in a shell (a hub name holds no ~)
        self.source = Path(local) if kind == "jsonl" else str(local)
        self.name = f"{kind}:{source}" + (f":{hub_config}" if hub_config else "")
        self.mapping = {"prompt": prompt, "question": question, "answer": answer, "solution": solution}
        self.verifier = verifier
        self.numeric_answers = verifier == "hash"
        self.heldout_fraction = float(heldout_fraction)
        self.train_split, self.heldout_split = train_split, heldout_split
        self.skip_malformed = bool(skip_malformed)
        self.train_size = None if train_size is None else int(train_size)
        self.skipped = 0
        self.progress_unit = "line" if kind == "jsonl" else "row"
        self._rows: dict[str, list[Problem]] = {}
        self._warned_repeats = False
        self._told: set[tuple[str, str]] = set()  # the columns warned about (_warn_columns)
        if kind == "jsonl":
            if not self.source.exists():
                raise FileNotFoundError(f"JSONL source {self.source} does not exist (--task jsonl:PATH: a .jsonl file, "
                                        f"or a folder with train.jsonl and test.jsonl{relative_note(self.source)})")
            if self.source.is_dir() and not any((self.source / f).exists() for f in _FILES.values()):
                raise FileNotFoundError(f"folder {self.source} holds neither train.jsonl nor test.jsonl")

    # -- reading ---------------------------------------------------------------------------------
    def _resolve_mapping(self, columns: list[str], where: str) -> dict:
        """The mapping with defaults filled in from the data's columns
        (:func:`~gradprobe.tasks.columns.resolve_mapping`)."""
        return resolve_mapping(self.mapping, columns, where)

    def _bad_row(self, where: str, line: int, problem: str) -> None:
        msg = f"{where}, {'line' if self.kind == 'jsonl' else 'row'} {line}: {problem}"  # both count from 1
        if not self.skip_malformed:
            raise DatasetFormatError(msg + "; fix or delete the row, or skip such rows (command line: "
                                           "'...:skip_malformed=true' or --skip-malformed; plans: skip_malformed = "
                                           "true under [task.config]; Python: skip_malformed=True)")
        self.skipped += 1
        warnings.warn(f"skipping malformed row: {msg}", stacklevel=4)

    def _needed_fields(self, m: dict | None) -> str:
        """The fields every row needs, by the resolved mapping ``m`` (else the configured one):
        ``'prompt' (or 'question') and 'answer'`` by default."""
        m = m or self.mapping
        prompt = next((repr(m[k]) for k in ("prompt", "question") if m[k] is not None), "'prompt' (or 'question')")
        return f"{prompt} and {m['answer']!r}"

    def _prompt(self, raw: dict, m: dict, where: str, line: int):
        """The row's prompt (a :class:`PromptText`), or None after reporting why it is unusable."""
        prompt, why = read_prompt(raw, m, self.verifier)
        if prompt is None:
            self._bad_row(where, line, why)
        return prompt

    def _gold(self, value) -> str | None:
        return gold_answer(value, self.verifier)

    def _parse(self, records, where: str, stem: str, columns: list[str] | None = None) -> list[Problem]:
        """Validate ``(line, raw)`` pairs (raw: a JSON string or a dict) into problems."""
        out, m, told = [], None, ({}, {})
        if columns is not None:
            m = self._resolve_mapping(columns, where)
        records = self.reported_rows(records)  # each row reported as parsed (a pool's progress)
        def hint(line: int, text: str | None = None) -> str:  # a CSV or parquet file given as jsonl:PATH
            return _other_format_hint(where, line, text) if self.kind == "jsonl" else ""

        for line, raw in decoded_rows(records, lambda line, why: self._bad_row(where, line, why + hint(line))):
            if isinstance(raw, str):
                if not raw.strip():
                    continue
                text = raw
                raw, why = parse_json_row(text, line)
                if why:
                    self._bad_row(where, line, why + hint(line, text))
                    continue
            if not isinstance(raw, dict):
                self._bad_row(where, line, f"not a JSON object (got {type(raw).__name__})")
                continue
            if why := unencodable_text(raw):  # "\ud800" in the JSON text: valid JSON, but no UTF-8 text
                self._bad_row(where, line, why)
                continue
            if not raw:  # before the mapping: an empty first row must not decide it (it has no columns)
                self._bad_row(where, line, f"an empty JSON object {{}}, missing the fields "
                              f"{self._needed_fields(m)}")
                continue
            if m is None:  # JSONL: the first row's columns decide whether the mapping names real columns
                m = self._resolve_mapping(sorted(raw), where)
            missing = [f"{key}={m[key]!r}" for key in ("prompt", "question", "answer")
                       if m[key] is not None and m[key] not in raw]
            if missing:
                self._bad_row(where, line, f"no column for {', '.join(missing)} (columns: {sorted(raw)}); "
                              + _fix(missing[0].split("=")[0]))
                continue
            prompt = self._prompt(raw, m, where, line)
            if prompt is None:
                continue
            gold, why = read_gold(raw[m["answer"]], self.verifier)
            if gold is None:
                need = f" holding a number (its value {why}; verifier=hash reads the gold's one number as it reads " \
                    "a completion's; use verifier=exact for text answers)" if self.verifier == "hash" else (
                    f" (its value {why})" if isinstance(raw[m["answer"]], bool) else "")
                self._bad_row(where, line, f"column {m['answer']!r} (answer=) gives no gold answer{need}")
                continue
            meta = {"source": where, "row": line - 1, "prompt_format": prompt.prompt_format}
            if isinstance(raw.get("id"), (str, int)) and not isinstance(raw["id"], bool):
                meta["id"] = raw["id"]  # the data's own id: rank-prompts' ranking.csv gives it as data_id
            if m["solution"] is not None and raw.get(m["solution"]) is not None:
                meta["solution"] = raw[m["solution"]]
            meta.update(_scalar_columns(raw, meta, m))
            _keep_columns(raw, meta, m, told)
            out.append(Problem(id=f"{self.kind}/{stem}/{line - 1}", question=prompt, answer=gold, metadata=meta))
        _warn_repeated_ids(out, where, "line" if self.kind == "jsonl" else "row")
        self._warn_columns(*told, where)
        return out

    def _warn_columns(self, named: dict, odd: dict, where: str) -> None:
        """Warn, once per task and column, about data columns a TRL-style reward does not get under their name:
        those of ``named``, named as one of :data:`TRL_KEYWORDS` (gradprobe passes its own value there), and those of
        ``odd`` (column -> type: no JSON value, so not kept; :func:`~gradprobe.tasks.columns.data_columns`)."""
        named = [k for k in named if ("keyword", k) not in self._told]
        if named:
            self._told.update(("keyword", k) for k in named)
            warnings.warn(f"{where}: column(s) {', '.join(map(repr, named))} are named as keyword(s) gradprobe passes "
                          "to TRL-style rewards itself (prompts, completions, answer: the gold as the verifier reads "
                          "it, problem_id, completion_ids), so a reward gets gradprobe's value under that name, not "
                          "the column's (kept in Problem.metadata); rename the column to pass it", stacklevel=4)
        odd = {k: t for k, t in odd.items() if ("odd", k) not in self._told}
        if odd:
            self._told.update(("odd", k) for k in odd)
            warnings.warn(f"{where}: column(s) {', '.join(f'{k!r} ({t})' for k, t in odd.items())} hold values that "
                          "are no JSON value, so they are not kept in Problem.metadata and do not reach TRL-style "
                          "rewards; convert them to text, numbers or lists in the dataset to pass them", stacklevel=4)

    def _read_file(self, file: Path) -> list[Problem]:
        skipped = self.skipped
        if self.on_progress is not None:  # a pool's builder listens: the file's lines are its total
            self.report_progress(total=file_lines(file))
        with open(file, "rb") as fh:  # bytes: a row that is not UTF-8 is a malformed row (decode_row)
            rows = self._parse(enumerate(fh, start=1), str(file), file.stem)
        if not rows and self.skipped == skipped:  # no row at all: not a split too small for the request
            raise no_rows_error(file, self._example_row())
        return rows

    def _example_row(self) -> str:
        """A row of this task's columns as JSON (the configured mapping, else ``question`` and ``answer``)."""
        m = self.mapping
        prompt = next((m[k] for k in ("prompt", "question") if m[k] is not None), "question")
        shown = json.dumps({prompt: "What is 2 + 3?", m["answer"]: "5"})
        return shown + ("" if prompt != "question" or m["question"] else
                        " (or a 'prompt' column instead of 'question': TRL's format, used as it is)")

    def _read_hub(self, split: str) -> list[Problem]:
        try:
            import datasets
        except ImportError as err:
            raise ImportError("hf:NAME needs the 'datasets' package (pip install datasets)") from err
        try:
            # a local folder is read anew each time: datasets' cache of it can outlive an edit of its files (with a
            # README's configs), so a run would train on the old rows while recording the new files' sha256
            fresh = {"download_mode": "force_redownload"} if Path(self.source).is_dir() else {}
            ds = _load_quietly(datasets, fresh, self.source, self.hub_config, split=split, **fresh)
        except (ConnectionError, FileNotFoundError) as err:  # not on the hub (or no network), and no local folder
            if fresh:
                raise
            cls = ConnectionError if isinstance(err, ConnectionError) else FileNotFoundError
            raise cls(f"{self.name}: {err}; and no local folder {Path(self.source).resolve()} exists (hf:NAME names "
                      f"a hub dataset, or a local folder that datasets reads{relative_note(Path(self.source))})"
                      ) from err
        except ValueError as err:  # an unknown split names the ones there are
            key = "train_split" if split == self.train_split else "heldout_split"
            raise TaskConfigError(f"{self.name}: cannot load split {split!r} ({key}={split!r}): {err}; set {key}= to "
                                  f"one of its splits" + (", or heldout_split=none to hold out a share of train"
                                                          if key == "heldout_split" else "")) from err
        where = f"{self.name}[{split}]"
        self.report_progress(total=known_length(ds))  # a pool's total where the split knows its length
        return self._parse(enumerate(ds, start=1), where, f"{Path(self.source).name}/{split}",
                           columns=list(ds.column_names))

    def _load(self, which: str) -> list[Problem]:
        if which not in self._rows:
            if self.kind == "hf":
                self._rows[which] = self._read_hub(which)
            elif self.source.is_file():
                self._rows[which] = self._read_file(self.source)
            else:
                file = self.source / which
                if not file.exists():
                    raise FileNotFoundError(f"{file} is missing: the folder form needs train.jsonl for 'train' and "
                                            f"test.jsonl for 'heldout'")
                self._rows[which] = self._read_file(file)
        return self._rows[which]

    def _single_source(self) -> bool:
        return (self.kind == "jsonl" and self.source.is_file()) or (
            self.kind == "hf" and str(self.heldout_split).lower() == "none")

    def split_rows(self, split: str) -> list[Problem]:
        """All usable problems of ``split`` in source order (heldout minus prompts seen in train).

        Warns (once per task) when the training split repeats a prompt
        (:func:`~gradprobe.tasks.base.warn_repeated_train_prompts`)."""
        return self._split(split)[0]

    def _split(self, split: str) -> tuple[list[Problem], list]:
        """``split``'s rows and, for ``heldout``, the rows removed as repeats of a training prompt
        (:func:`~gradprobe.tasks.base.drop_train_prompts`: ``[(row, train_row), ...]``)."""
        self._check_request(split, 0)
        if self._single_source():
            rows = self._load(self.train_split if self.kind == "hf" else "all")
            perm = np.random.default_rng(_SPLIT_SEED).permutation(len(rows))
            n_held = max(1, int(round(self.heldout_fraction * len(rows)))) if len(rows) > 1 else 0
            train = [rows[i] for i in sorted(perm[n_held:])]
            rows = [rows[i] for i in sorted(perm[:n_held])] if split == "heldout" else train
        else:
            names = {"train": self.train_split, "heldout": self.heldout_split} if self.kind == "hf" else _FILES
            rows = self._load(names[split])
            has_train = self.kind == "hf" or (self.source / _FILES["train"]).exists()
            train = rows if split == "train" else (self._load(names["train"]) if has_train else [])
        if split == "train" and self.train_size is not None:
            rows = rows[:self.train_size]
        if split == "train" and not self._warned_repeats:
            self._warned_repeats = True
            warn_repeated_train_prompts(rows, self.name, "line" if self.kind == "jsonl" else "row")
        if split == "heldout" and train:
            return drop_train_prompts(rows, train)
        return rows, []

    def problems(self, split: str, n: int, *, seed: int = 0) -> list[Problem]:
        """``n`` problems of ``split``, a seeded permutation's first ``n`` (deterministic).

        Raises
        ------
        ValueError
            More problems than the split has (the message says why it is small: malformed rows skipped, the
            single source's held-out share, held-out rows removed as repeats of a training prompt, counted).
        DatasetFormatError
            A malformed row (unless ``skip_malformed``); a JSONL file with no row (empty or blank lines only).
        """
        self._check_request(split, n)
        rows, removed = self._split(split)
        if n > len(rows):
            why = [f"{self.skipped} malformed row(s) were skipped"] if self.skipped else []
            if self._single_source():
                why.append(f"one source is split {1 - self.heldout_fraction:.0%} train / {self.heldout_fraction:.0%} "
                           f"heldout (heldout_fraction)"
                           + (TRAIN_ONLY_FOLDER.format(kind="jsonl") if split == "train" and self.kind == "jsonl"
                              else ""))
            if removed:
                why.append(removed_heldout_note(removed, len(rows), "line" if self.kind == "jsonl" else "row"))
            raise ValueError(f"{self.name} {split!r} has {len(rows)} problems; asked for {n}"
                             + (f" ({'; '.join(why)})" if why else "") + "; ask for fewer or give more rows")
        order = np.random.default_rng(seed).permutation(len(rows))[:n]
        return [rows[i] for i in order]

    # -- scoring ---------------------------------------------------------------------------------
    def score(self, completion: str, problem: Problem) -> float:
        """1.0 or 0.0 by the task's verifier (module docstring); a callable verifier's value as a float."""
        if callable(self.verifier):
            return float(self.verifier(completion, problem))
        if self.verifier == "boxed":
            predicted = last_boxed(completion or "") or extract_answer(completion, boxed_fallback=False)
            if predicted is None:
                return 0.0
            return float(normalize_text(predicted) == normalize_text(problem.answer)
                         or answers_match(predicted, problem.answer) or math_verify_match(problem.answer, predicted))
        if self.verifier == "exact":
            predicted = extract_answer(completion, multiline="\n" in problem.answer.strip())
            return float(predicted is not None and " ".join(predicted.split()) == " ".join(problem.answer.split()))
        return super().score(completion, problem)

    def format_rate(self, completion: str) -> bool:
        """``boxed``: the completion has a ``\\boxed{}``; otherwise as :meth:`Task.format_rate`."""
        if self.verifier == "boxed":
            return last_boxed(completion or "") is not None
        return super().format_rate(completion)
