"""Column mapping and prompt-format detection of your own data (:mod:`gradprobe.tasks.dataset`, whose
module docstring defines the spec, the mapping keys, TRL's plain and conversational prompt formats and
the verifiers): the spec parser, :class:`PromptText`, and the per-row readers of a prompt and a gold
answer. Everything here is re-exported by :mod:`gradprobe.tasks.dataset`."""

from __future__ import annotations

from gradprobe.outputs import json_short
from gradprobe.tasks.base import TaskConfigError, TaskNotFoundError, parse_task_config, text_cell_problem
from gradprobe.tasks.verify import drop_thousands_separators, last_boxed, numeric_gold

__all__ = ["PromptText", "VERIFIERS", "MAPPING_KEYS", "OPTIONS", "BOXED_INSTRUCTION", "parse_dataset_spec",
           "resolve_mapping", "read_prompt", "gold_answer", "read_gold", "DATA_COLUMNS", "TRL_KEYWORDS",
           "data_columns"]

VERIFIERS = ("hash", "boxed", "exact")
MAPPING_KEYS = ("prompt", "question", "answer", "solution")
OPTIONS = (*MAPPING_KEYS, "verifier", "heldout_fraction", "train_split", "heldout_split", "skip_malformed",
           "train_size")
#: The ``Problem.metadata`` key under which a ``jsonl:``/``hf:`` row keeps those of its other columns
#: (:func:`data_columns`) that are not scalar metadata keys of their name: one dict, so that no data column can
#: collide with the loader's own keys (``source``, ``row``, ...).
DATA_COLUMNS = "data_columns"
#: The keywords a TRL-style reward gets from gradprobe itself (:func:`gradprobe.rewards.sequence.trl_columns`): a
#: data column of one of these names does not reach the reward under it (:func:`data_columns`).
TRL_KEYWORDS = ("prompts", "completions", "answer", "problem_id", "completion_ids")
BOXED_INSTRUCTION = ("Solve the problem step by step. Write one reasoning step per line. "
                     "Put the final answer in \\boxed{}, e.g. \\boxed{6}.")


class PromptText(str):
    """A problem's prompt when it is not a bare question (``Problem.question`` holds it).

    It is the prompt's text (a ``str``: hashing, printing and JSON see the text) and carries how
    :func:`gradprobe.tasks.prompts.format_prompt` renders it: ``prompt_format`` ``"plain"`` (the
    text verbatim), ``"conversational"`` (``messages`` through the chat template) or
    ``"question"`` (a bare question with its own ``instruction``)."""

    prompt_format: str
    messages: tuple
    instruction: str | None

    def __new__(cls, text: str, *, prompt_format: str, messages=(), instruction: str | None = None):
        obj = super().__new__(cls, text)
        obj.prompt_format = prompt_format
        obj.messages = tuple(dict(m) for m in messages)
        obj.instruction = instruction
        return obj

    def __reduce__(self):  # pickled across study workers with its rendering
        return (_prompt_text, (str(self), self.prompt_format, [dict(m) for m in self.messages], self.instruction))


def _prompt_text(text, prompt_format, messages, instruction):
    return PromptText(text, prompt_format=prompt_format, messages=messages, instruction=instruction)


def parse_dataset_spec(spec: str) -> tuple[str, str, str | None, dict]:
    """``"jsonl:PATH[:k=v,...]"`` / ``"hf:NAME[:CONFIG][:k=v,...]"`` -> (kind, source, hub config, options).

    The last ``:``-separated part is the options when it holds ``=``."""
    kind, _, rest = spec.partition(":")
    parts = rest.split(":")
    options = {}
    if len(parts) > 1 and "=" in parts[-1]:
        options = parse_task_config(parts.pop())
    if kind == "jsonl":
        source, hub_config = ":".join(parts).strip(), None
    else:
        if len(parts) > 2:
            raise TaskNotFoundError(f"{spec!r}: the hub form is hf:NAME[:CONFIG][:key=value,...]")
        source, hub_config = parts[0].strip(), (parts[1].strip() or None) if len(parts) > 1 else None
    if not source:
        raise TaskNotFoundError(f"{spec!r} names no {'path' if kind == 'jsonl' else 'dataset'}: use "
                                f"{'jsonl:PATH' if kind == 'jsonl' else 'hf:NAME[:CONFIG]'}[:key=value,...]")
    return kind, source, hub_config, options


def _fix(key: str, example: str = "COLUMN") -> str:
    return (f"map it with {key}={example} (command line: --task 'jsonl:PATH:{key}={example}'; plans: "
            f"{key} = \"{example}\" under [task.config]; Python: load_task(spec, {key}=\"{example}\"))")


def resolve_mapping(mapping: dict, columns: list[str], where: str) -> dict:
    """The column mapping (``prompt``, ``question``, ``answer``, ``solution`` -> column or None) with
    defaults filled in from the data's ``columns``; ``where`` names the source in messages.

    Raises
    ------
    TaskConfigError
        A mapped column the data does not have, or neither a prompt nor a question column; the
        message names the key, the columns there are, and the fix.
    """
    m = dict(mapping)
    if m["prompt"] is None and m["question"] is None:
        if "prompt" in columns:
            m["prompt"] = "prompt"
        elif "question" in columns:
            m["question"] = "question"
        else:
            raise TaskConfigError(f"{where} has neither a 'prompt' nor a 'question' column (columns: {columns}); "
                                  + _fix("prompt") + ", or question=COLUMN for a bare question")
    if m["solution"] is None and "solution" in columns:
        m["solution"] = "solution"
    for key in ("prompt", "question", "answer", "solution"):
        column = m[key]
        if column is not None and column not in columns:
            raise TaskConfigError(f"column mapping {key}={column!r}: {where} has no column {column!r} "
                                  f"(columns: {columns}); " + _fix(key))
    return m


def read_prompt(raw: dict, m: dict, verifier) -> tuple[PromptText | None, str | None]:
    """A row's prompt by the resolved mapping ``m`` (TRL's plain or conversational format, or a bare
    question): ``(PromptText, None)``, or ``(None, why)`` when the row cannot be used (a bare question or plain
    prompt that is null, not a string or blank: :func:`gradprobe.tasks.base.text_cell_problem`)."""
    if m["question"] is not None:
        why = text_cell_problem(raw, m["question"], " (question=)")
        if why:
            return None, why
        instruction = BOXED_INSTRUCTION if verifier == "boxed" else None
        return PromptText(raw[m["question"]], prompt_format="question", instruction=instruction), None
    value = raw.get(m["prompt"])
    if isinstance(value, str):
        why = text_cell_problem(raw, m["prompt"], " (prompt=)")
        return (None, why) if why else (PromptText(value, prompt_format="plain"), None)
    if isinstance(value, list) and value:
        bad = [i for i, msg in enumerate(value)
               if not (isinstance(msg, dict) and isinstance(msg.get("role"), str)
                       and isinstance(msg.get("content"), str))]
        if bad:
            return None, (f"conversational prompt {m['prompt']!r}: message {bad[0]} is not a "
                          f"{{'role': str, 'content': str}} object (TRL's conversational format)")
        users = [msg["content"] for msg in value if msg["role"] == "user"]
        if not users:
            return None, (f"conversational prompt {m['prompt']!r} has no 'user' turn (roles: "
                          f"{[msg['role'] for msg in value]}); add a message with role 'user' "
                          f"holding the question")
        if value[-1]["role"] == "assistant":
            return None, (f"conversational prompt {m['prompt']!r} ends with an 'assistant' turn; a "
                          f"prompt ends with the user's turn (the completion is generated after it)")
        return PromptText(users[-1], prompt_format="conversational", messages=value), None
    got = "an empty list of messages" if isinstance(value, list) else type(value).__name__
    return None, (f"column {m['prompt']!r} (prompt=) is {got}: TRL's prompt is a string (plain) or a "
                  f"list of {{'role', 'content'}} messages (conversational)")


def gold_answer(value, verifier) -> str | None:
    """The gold answer a row's answer cell gives under ``verifier`` (module docstring of
    :mod:`gradprobe.tasks.dataset`), or None when it gives none (a malformed row; :func:`read_gold` says why)."""
    return read_gold(value, verifier)[0]


def read_gold(value, verifier) -> tuple[str | None, str]:
    """``(gold, why)``: the gold answer of a row's answer cell under ``verifier``, or ``(None, why)`` for a
    malformed row. ``hash`` keeps the text after the last ``####``, drops thousands separators
    (:func:`gradprobe.tasks.verify.drop_thousands_separators`: ``"1,200"``, not ``"1,5"``) and reads its one
    number by the completion's rule (:func:`gradprobe.tasks.verify.numeric_gold`: ``"13 apples"`` -> ``"13"``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, (list, tuple, dict)) and value:  # [1], {"value": 1}: not a gold the verifier reads
        return None, (f"is a JSON {'object' if isinstance(value, dict) else 'list'} ({json_short(value)}), not text "
                      "or a number (give the answer itself)")
    if isinstance(value, bool):  # JSON true/false: no answer text (a yes/no answer is written as text)
        return None, (f"is a boolean ({'true' if value else 'false'}), not text or a number: give the answer "
                      "itself (a yes/no answer as text, e.g. \"yes\")")
    if not isinstance(value, str) or not value.strip():
        return None, "is empty"
    if verifier == "hash":
        if "####" in value:
            value = value.rsplit("####", 1)[1]
        return numeric_gold(drop_thousands_separators(value.strip()))
    if verifier == "boxed":
        return last_boxed(value) or value.strip(), ""
    return value.strip(), ""


def _is_json(value) -> bool:
    """Whether ``value`` is a JSON value as :mod:`json` reads one: None, a bool, a number, a string, a list of JSON
    values or a dict of string keys to JSON values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and _is_json(v) for k, v in value.items())


def data_columns(raw: dict, m: dict) -> tuple[dict, dict[str, str]]:
    """``(columns, left_out)``: a row's columns other than the mapped ones (the prompt or question, answer and
    solution columns of the resolved mapping ``m``, which reach a reward as ``prompts``, ``answer`` and the
    ``solution`` metadata key), by name: the loader keeps each in ``Problem.metadata`` (the scalar ones under
    their names, the others in ``metadata[DATA_COLUMNS]``: :func:`gradprobe.tasks.dataset._keep_columns`) so that a
    TRL-style reward gets each as the keyword of its name (:func:`gradprobe.rewards.sequence.trl_columns`), as TRL's
    ``GRPOTrainer`` passes every dataset column. Values are the row's own (the same objects, not copies).

    ``left_out`` names (column -> type) the values that are no JSON value (:func:`_is_json`; a hub dataset's image,
    bytes or timestamp): ``Problem.metadata`` stays JSON-serialisable, so these are not kept. A JSONL row's values
    are always JSON. A column named as one of :data:`TRL_KEYWORDS` is kept here, though the reward gets gradprobe's
    own value under that name (the loader warns)."""
    used = {v for k, v in m.items() if k in MAPPING_KEYS and isinstance(v, str)}
    kept, left_out = {}, {}
    for k, v in raw.items():
        if not isinstance(k, str) or k in used:
            continue
        if _is_json(v):
            kept[k] = v
        else:
            left_out[k] = type(v).__name__
    return kept, left_out
