"""Off-context guidance settings and hints (torch-free): an arm's ``guidance`` table
(:class:`GuidanceConfig`, :func:`parse_guidance`), the hint of a problem from its task's reference
solution (:func:`hint_text`), the guided prompt (:func:`hinted_question`) and the check that a model's
prompt format keeps the hint (:func:`check_hint_reaches_prompt`). The method, its sources and its
costs are described in :mod:`gradprobe.rollout.guided`, which samples and scores guided rollouts.

Reference solutions (:data:`REFERENCE_SOLUTIONS`, keyed by task kind, the plan's ``[task] name``
before any ``":"``) live in :mod:`gradprobe.tasks.solutions`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..tasks.dataset import PromptText
from ..tasks.prompts import encode_prompt
from ..tasks.solutions import (REFERENCE_SOLUTIONS, ReferenceSolutionError, has_reference_solution,
                               register_reference_solution, task_kind)
from ..tasks.solutions import reference_solution as _reference_solution

__all__ = ["GUIDANCE_KEYS", "HINT_HEADER", "GuidanceConfig", "GuidanceError", "parse_guidance", "task_kind",
           "REFERENCE_SOLUTIONS", "register_reference_solution", "has_reference_solution", "reference_solution",
           "solution_lines", "hint_text", "hinted_question", "check_hint_reaches_prompt", "GUIDANCE_LABEL"]

#: Keys of an arm's ``guidance`` table.
GUIDANCE_KEYS = ("fraction", "prefix", "cap")
#: The line put between the question and the hint lines of a guided prompt.
HINT_HEADER = "Hint: a correct solution begins with these lines:"
#: The label that begins :func:`check_hint_reaches_prompt`'s message (dropped by the preflight, which names the arm).
GUIDANCE_LABEL = "guidance: "


class GuidanceError(ValueError):
    """A guided arm cannot run: bad settings, or a problem without a reference solution."""


@dataclass(frozen=True)
class GuidanceConfig:
    """Settings of off-context guidance (an arm's ``guidance`` table).

    Attributes
    ----------
    fraction : float in [0, 1]
        Share of each group's G completions sampled with the hint: k = floor(fraction * G + 1/2)
        per group (0.25 of G = 8: 2). 0 = no guided completion (the arm is plain GRPO).
    prefix : float in [0, 1]
        Share of the reference solution's S reasoning lines given as the hint: the first
        floor(prefix * S) lines (the ``####`` answer line is never given). 0 = empty hints
        (guided rows then equal unguided ones, weight 1).
    cap : float > 0
        C, the truncation of the per-token importance weight (TIS; TRL's and verl's default 2).

    Raises
    ------
    GuidanceError
        A value of the wrong type or outside its range (the message names the key).
    """

    fraction: float = 0.25
    prefix: float = 0.5
    cap: float = 2.0

    def __post_init__(self):
        for key in ("fraction", "prefix", "cap"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise GuidanceError(f"guidance.{key} must be a finite number, got {value!r}")
        for key in ("fraction", "prefix"):
            if not 0 <= getattr(self, key) <= 1:
                meaning = ("the share of each group sampled with the hint" if key == "fraction"
                           else "the share of the reference solution's lines given as the hint")
                raise GuidanceError(f"guidance.{key} must lie in [0, 1] ({meaning}), got {getattr(self, key)!r}")
        if not self.cap > 0:
            raise GuidanceError(f"guidance.cap (the truncation C of the importance weight) must be > 0, got "
                                f"{self.cap!r}; TRL and verl use 2.0")

    def guided_per_group(self, group_size: int) -> int:
        """k: guided completions per group of ``group_size`` (floor(fraction * G + 1/2))."""
        return min(int(group_size), int(math.floor(self.fraction * group_size + 0.5)))

    def prefix_lines(self, lines: int) -> int:
        """Hint lines out of a reference solution's ``lines`` reasoning lines (floor(prefix * S))."""
        return min(int(lines), int(math.floor(self.prefix * lines + 1e-9)))


def parse_guidance(value, where: str = "guidance") -> dict | None:
    """An arm's ``guidance`` table as a JSON-ready dict of :class:`GuidanceConfig` fields.

    Parameters
    ----------
    value : dict or None
        The TOML table (``{fraction = 0.25, prefix = 0.5}``; ``cap`` optional); None = no guidance.
    where : str
        Its full path in the plan (``arms.NAME.guidance``), used in error messages.

    Raises
    ------
    GuidanceError
        Not a table, an unknown key (the valid ones are listed), or a bad value; the message
        names the key's full path.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise GuidanceError(f"{where} must be a table like {{fraction = 0.25, prefix = 0.5}}, got {value!r}")
    for key in value:
        if key not in GUIDANCE_KEYS:
            raise GuidanceError(f"unknown key {where}.{key!r}; valid keys: {', '.join(GUIDANCE_KEYS)}")
    try:
        return asdict(GuidanceConfig(**value))
    except GuidanceError as e:
        raise GuidanceError(str(e).replace("guidance.", f"{where}.", 1)) from None


# ----------------------------------------------------------------------------- reference solutions
# (gradprobe.tasks.solutions: kept there so that tasks never import the rollout layer)


def reference_solution(problem, kind: str, task=None) -> str:
    """The reference solution of ``problem`` (:func:`gradprobe.tasks.solutions.reference_solution`).

    Raises
    ------
    GuidanceError
        No reference solution for this kind, or none for this problem (the message names the fix).
    """
    try:
        return _reference_solution(problem, kind, task)
    except ReferenceSolutionError as e:
        raise GuidanceError(str(e)) from None


def solution_lines(solution: str) -> list[str]:
    """The reasoning lines of a solution: non-blank lines, stripped, ``####`` answer lines dropped."""
    return [x.strip() for x in solution.splitlines() if x.strip() and not x.strip().startswith("####")]


def hint_text(problem, kind: str, config: GuidanceConfig, task=None) -> str:
    """The hint of one problem: the first ``config.prefix_lines(S)`` reasoning lines, one per line
    ("" when that is none).

    Raises
    ------
    GuidanceError
        From :func:`reference_solution`.
    """
    lines = solution_lines(reference_solution(problem, kind, task))
    return "\n".join(lines[: config.prefix_lines(len(lines))])


def hinted_question(question, hint: str):
    """``question`` with the hint appended after :data:`HINT_HEADER` (``question`` itself when ``hint`` is "").

    A bare question (``str``, or a :class:`~gradprobe.tasks.dataset.PromptText` of format
    ``question``/``plain``) gets ``"\\n\\n<header>\\n<hint>"`` appended to its text (so a chat
    template puts the hint inside the user message, before the instruction); a conversational
    prompt gets it appended to its last user message.
    """
    if not hint:
        return question
    extra = f"\n\n{HINT_HEADER}\n{hint}"
    kind = getattr(question, "prompt_format", None)
    if kind is None:
        return f"{question}{extra}"
    messages = [dict(m) for m in question.messages]
    if kind == "conversational":
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
        if last is None:
            raise GuidanceError("a conversational prompt without a user message cannot carry a hint")
        messages[last]["content"] = f"{messages[last]['content']}{extra}"
    return PromptText(f"{question}{extra}", prompt_format=kind, messages=messages, instruction=question.instruction)


def check_hint_reaches_prompt(tokenizer, problem, hint: str, plain_ids=None, guided_ids=None) -> None:
    """Refuse a model whose prompt format drops the hint (guidance would silently be plain GRPO).

    A chat template that renders only part of the user message (one that keeps only the first
    paragraph, as the tiny tiers' compact template did before it kept a hint paragraph,
    :mod:`gradprobe.char_tokenizer`) gives the hinted prompt the same ids as the plain one: every
    guided row would then be an unguided sample with importance weight 1, and the arm a placebo of
    GRPO. A tier built into the cache before that change keeps the old template: rebuild it
    (``gradprobe warmstart --tier tiny``) or delete it to use the shipped copy.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    problem : Problem
    hint : str
        :func:`hint_text` of ``problem``; an empty hint is not checked (prefix 0 is allowed).
    plain_ids, guided_ids : list[int], optional
        The encoded plain and hinted prompts when the caller has them (else encoded here).

    Raises
    ------
    GuidanceError
        A non-empty hint and identical prompt ids (the message names the fix).
    """
    if not hint:
        return
    plain_ids = list(encode_prompt(tokenizer, problem.question)) if plain_ids is None else list(plain_ids)
    guided_ids = (list(encode_prompt(tokenizer, hinted_question(problem.question, hint))) if guided_ids is None
                  else list(guided_ids))
    if plain_ids == guided_ids:
        raise GuidanceError(f"{GUIDANCE_LABEL}the model's prompt format drops the hint (problem "
                            f"{getattr(problem, 'id', '?')}: the hinted prompt encodes to the same "
                            f"{len(plain_ids)} ids as the plain one, so guided rows would be plain samples with "
                            f"weight 1); its chat template renders only part of the user message. Use a model that "
                            f"reads its whole prompt (the shipped tiny tiers, smollm2-135m, a Qwen/Llama instruct "
                            f"model; a tiny tier built into the cache by an older gradprobe keeps a template "
                            f"that drops the hint: rebuild it with gradprobe warmstart) or remove guidance from "
                            f"the arm")
