"""Few-shot prompts: K solved examples before every question, as plain text (no chat template).

``fewshot = K`` in a task's config (``--task chain_sum:max_digits=1,fewshot=3``, ``[task.config]
fewshot = 3`` in a plan, ``load_task(spec, fewshot=3)``) wraps the loaded task in
:class:`FewShotTask`. Every problem's question becomes a
:class:`~gradprobe.tasks.dataset.PromptText` of ``prompt_format="plain"``, which
:func:`gradprobe.tasks.prompts.format_prompt` renders verbatim, bypassing the chat template and
:data:`~gradprobe.tasks.prompts.INSTRUCTION`::

    <example 1 question>
    <example 1 worked solution>
    #### <example 1 answer>

    ... (K examples, separated by a blank line)

    <question>
    <- the completion starts here

This is the standard few-shot form of base-model evaluations (GSM8K's 8-shot "Q/A" prompts,
lm-evaluation-harness): small or base models that do not follow the instruction of a chat prompt
still continue the pattern, so their completions end in the ``#### answer`` line that
:meth:`Task.score <gradprobe.tasks.base.Task.score>` reads (SmolLM2-135M-Instruct on two-term
one-digit chain sums: 3% accuracy with the chat instruction, 28% with 3 plain examples; issue 13).

The worked solution is the task's reference solution
(:func:`gradprobe.tasks.solutions.reference_solution`: chain_sum, gsm8k, your own jsonl/hf data with
a solution column, gsm_symbolic), so only those task kinds accept ``fewshot``. The question text is
the problem's question, except for chain_sum, where it is the bare expression the reasoning-gym
question ends with (the text after its last ``": "``, e.g. ``"3 + 4 ="``): the example then reads
``"3 + 4 =\\n3 + 4 = 7\\n#### 7"``, the form the tiny tier is warm-started on.

The examples: the first K distinct questions of ``task.problems("train", K + 8, seed=FEWSHOT_SEED)``
(:data:`FEWSHOT_SEED`, separate from every user seed in use), so the same K examples (a fixed
prefix) precede every question. A question is never its own example: a problem whose question
equals one of the K (whitespace-normalised text) gets the next distinct candidate in its place,
so its prompt depends on the problem alone, not on which others are asked with it.

Problem ids, answers, metadata, splits and heldout deduplication are the wrapped task's; scoring
(:meth:`FewShotTask.score`) is the wrapped task's, on the problem with its original question.
"""

from __future__ import annotations

import dataclasses

from gradprobe.tasks.base import Problem, Task, TaskConfigError, prompt_key
from gradprobe.tasks.dataset import PromptText
from gradprobe.tasks.solutions import REFERENCE_SOLUTIONS, reference_solution

__all__ = ["FEWSHOT_SEED", "FewShotTask", "FewShotPrompt", "parse_fewshot", "fewshot_kinds", "apply_fewshot"]

#: Seed of the ``problems("train", ...)`` call the examples are drawn from (never a user's seed 0, 1, ...).
FEWSHOT_SEED = 1_000_003
_SPARE = 8  # candidates beyond K: replacements for a question that is itself an example


class FewShotPrompt(PromptText):
    """A few-shot prompt (``prompt_format="plain"``) that remembers the problem's original question.

    Attributes
    ----------
    original : str
        ``Problem.question`` of the wrapped task (used to score and to find reference solutions).
    """

    original: str

    def __new__(cls, text: str, *, original: str):
        obj = super().__new__(cls, text, prompt_format="plain")
        obj.original = original
        return obj

    def __reduce__(self):  # pickled across study workers with its original question
        return (FewShotPrompt._rebuild, (str(self), self.original))

    @staticmethod
    def _rebuild(text, original):
        return FewShotPrompt(text, original=original)


def fewshot_kinds() -> list[str]:
    """Task kinds that accept ``fewshot``: those with reference solutions, sorted."""
    return sorted(REFERENCE_SOLUTIONS)


def parse_fewshot(value) -> int:
    """The ``fewshot`` config value as a number of examples K (0 = off).

    Parameters
    ----------
    value : int, or a str holding one
        From ``--task ...,fewshot=3``, ``[task.config] fewshot = 3`` or ``load_task(..., fewshot=3)``.

    Returns
    -------
    int
        K >= 0.

    Raises
    ------
    TaskConfigError
        Not a non-negative integer (bool, float, negative, text); the message names ``fewshot``
        and the fix.
    """
    k = value
    if isinstance(k, str) and k.strip().isdigit():
        k = int(k.strip())
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise TaskConfigError(f"fewshot must be a non-negative integer (the number of solved examples before each "
                              f"question; 0 = none), got {value!r}: write e.g. fewshot=3 (command line: "
                              f"--task 'chain_sum:max_digits=1,fewshot=3'; plans: fewshot = 3 under [task.config])")
    return k


class FewShotTask(Task):
    """A task whose questions are few-shot prompts (module docstring); everything else is the wrapped task's.

    Parameters
    ----------
    task : Task
        The wrapped task (from :func:`gradprobe.tasks.load_task`).
    kind : str
        Its kind, the spec before any ``":"`` (``"chain_sum"``, ``"gsm8k"``, ``"jsonl"``, ...): selects
        the reference solution of :data:`gradprobe.tasks.solutions.REFERENCE_SOLUTIONS`.
    k : int
        Number of solved examples, >= 1.

    Raises
    ------
    TaskConfigError
        ``kind`` has no reference solutions (the message lists the kinds that do), or ``k`` < 1.
        At the first :meth:`problems` call: the training split has fewer than K + 1 problems, a
        training problem has no reference solution (jsonl/hf data without a solution column) or
        a conversational prompt.

    Attributes other than :meth:`problems`, :meth:`score`, :meth:`format_rate` and
    :meth:`reference_solution` (``name``, ``config``, ``train_size``, ``split_rows``, ...) are the
    wrapped task's.
    """

    def __init__(self, task: Task, kind: str, k: int):
        if kind not in fewshot_kinds():
            raise TaskConfigError(f"fewshot needs worked reference solutions, which task {kind!r} has none of; "
                                  f"tasks that accept fewshot: {', '.join(fewshot_kinds())} (jsonl/hf with a "
                                  f"solution column); remove fewshot from the task config")
        if parse_fewshot(k) < 1:
            raise TaskConfigError(f"FewShotTask needs fewshot >= 1, got {k!r} (fewshot=0 means no wrapper)")
        self.task, self.kind, self.k = task, kind, int(k)
        self.name = task.name
        self.numeric_answers = task.numeric_answers
        self._candidates: list[tuple[str, str]] | None = None  # (question key, example text), K + spare

    def __getattr__(self, attr):
        if attr in ("task", "_candidates") or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.task, attr)

    def __repr__(self) -> str:
        return f"FewShotTask({self.task!r}, k={self.k})"

    # -- prompt text -----------------------------------------------------------------------------
    def question_text(self, question) -> str:
        """The text a question shows in a few-shot prompt: chain_sum's bare expression, else the question.

        Raises
        ------
        TaskConfigError
            A conversational prompt (a list of chat messages cannot be a few-shot example).
        """
        if getattr(question, "prompt_format", None) == "conversational":
            raise TaskConfigError("fewshot needs bare questions, not conversational prompts (a list of chat "
                                  "messages): map the question column with question=COLUMN, or remove fewshot")
        text = str(question).strip()
        if self.kind == "chain_sum" and ": " in text:
            text = text.rsplit(": ", 1)[1].strip()
        return text

    def _example(self, problem: Problem) -> str:
        try:
            solution = reference_solution(problem, self.kind, self.task).strip()
        except ValueError as err:  # ReferenceSolutionError, or the task's own reference_solution
            raise TaskConfigError(f"fewshot: training problem {problem.id} gives no worked example ({err}); "
                                  f"give the data a solution column (solution=COLUMN) or remove fewshot") from None
        if "####" not in solution:
            solution = f"{solution}\n#### {problem.answer}"
        return f"{self.question_text(problem.question)}\n{solution}"

    def candidates(self) -> list[tuple[str, str]]:
        """The example candidates in order: (normalised question, example text), K + up to 8, distinct.

        Raises
        ------
        TaskConfigError
            Fewer than K + 1 distinct training questions, or one without a reference solution.
        """
        if self._candidates is None:
            try:
                pool = self.task.problems("train", self.k + _SPARE, seed=FEWSHOT_SEED)
            except ValueError:
                try:
                    pool = self.task.problems("train", self.k + 1, seed=FEWSHOT_SEED)
                except ValueError as err:
                    raise TaskConfigError(f"fewshot={self.k} needs at least {self.k + 1} training problems "
                                          f"({err}); lower fewshot") from None
            out, seen = [], set()
            for p in pool:
                key = prompt_key(self.question_text(p.question))
                if key not in seen:
                    seen.add(key)
                    out.append((key, self._example(p)))
            if len(out) < self.k + 1:
                raise TaskConfigError(f"fewshot={self.k} needs {self.k + 1} distinct training questions, the task "
                                      f"has {len(out)} among {len(pool)} drawn; lower fewshot or widen the task")
            self._candidates = out
        return self._candidates

    def prompt(self, question) -> FewShotPrompt:
        """The few-shot prompt of one question: K examples (never the question itself), then the question.

        Returns
        -------
        FewShotPrompt
            ``"<ex 1>\\n\\n...<ex K>\\n\\n<question>\\n"``, ``prompt_format="plain"``.
        """
        asked = self.question_text(question)
        examples = [text for key, text in self.candidates() if key != prompt_key(asked)][: self.k]
        return FewShotPrompt("\n\n".join(examples) + f"\n\n{asked}\n", original=question)

    # -- Task --------------------------------------------------------------------------------------
    def problems(self, split: str, n: int, *, seed: int = 0) -> list[Problem]:
        """The wrapped task's problems with few-shot prompts as questions (ids, answers, metadata unchanged).

        Raises
        ------
        ValueError, TaskConfigError
            As the wrapped task's ``problems``; TaskConfigError from :meth:`candidates`.
        """
        return [dataclasses.replace(p, question=self.prompt(p.question)) for p in self.task.problems(split, n, seed=seed)]

    @staticmethod
    def unwrap(problem: Problem) -> Problem:
        """``problem`` with its original question (itself when the question is no :class:`FewShotPrompt`)."""
        original = getattr(problem.question, "original", None)
        return problem if original is None else dataclasses.replace(problem, question=original)

    def score(self, completion: str, problem: Problem) -> float:
        """The wrapped task's score of ``completion`` on the problem with its original question (1.0 or 0.0)."""
        return self.task.score(completion, self.unwrap(problem))

    def format_rate(self, completion: str) -> bool:
        """The wrapped task's :meth:`~gradprobe.tasks.base.Task.format_rate`."""
        return self.task.format_rate(completion)

    def reference_solution(self, problem: Problem) -> str:
        """The wrapped task's reference solution of ``problem`` (for guidance and warm-starts).

        Raises
        ------
        ReferenceSolutionError
            From :func:`gradprobe.tasks.solutions.reference_solution`.
        """
        return reference_solution(self.unwrap(problem), self.kind, self.task)


def apply_fewshot(task: Task, kind: str, value) -> Task:
    """``task`` wrapped for ``fewshot = value`` (``task`` itself for None or 0).

    Raises
    ------
    TaskConfigError
        From :func:`parse_fewshot` and :class:`FewShotTask`.
    """
    if value is None:
        return task
    k = parse_fewshot(value)
    return task if k == 0 else FewShotTask(task, kind, k)
