"""Process rewards that cost no continuations: a step verifier checks every reasoning line.

Where a task's reasoning can be checked line by line (chain sums, the arithmetic of GSM8K
solutions), the step values of process supervision need no Monte-Carlo continuations: a
step's reward is 1 when the verifier accepts it and 0 when it does not (the "verifiable
process reward" of Lightman et al. 2023, PRM800K, with the labels from a rule instead of
people). Those per-step rewards go through exactly the code path of ``mc_value``
(:func:`gradprobe.rewards.dense.mc_value_advantages`: group normalisation of all step
rewards of a group, ddof 1, eps 1e-4, then suffix sums over steps; Shao et al. 2024,
DeepSeekMath, sec. 4.1.3), so ``process`` and ``mc_value`` differ only in where the step
values come from.

Registered rewards: ``process`` (process only) and ``process_hybrid_<lam>`` for lam in
:data:`~gradprobe.rewards.dense.HYBRID_WEIGHTS` (0.9, 0.5, 0.1): lam * A(process) +
(1 - lam) * A(outcome), combined by :func:`~gradprobe.rewards.dense.hybrid_advantages` like
``hybrid_<lam>``. Other weights: :func:`make_process_reward` (``lam`` outside [0, 1] is
refused). Cost: no generated tokens (``generated_tokens == {}``); the verifier's wall time is
recorded in ``ledger.device_seconds["reward"]`` (once per batch, shared by all process rewards
of the batch through ``ctx.cache``).

Steps and lines (one rule for rewards and for :func:`trace_fidelity`):

* steps are :func:`gradprobe.rewards.steps.split_steps` of the completion's tokens (newline
  ends a step; blank steps join a neighbour), never merged (no ``max_steps``: a step costs
  nothing here); each non-blank line of a step is given to the verifier;
* a line starting with ``####`` (the answer line) is not a step;
* the verifier returns True (valid), False (invalid) or None (neutral: not a step, e.g. a GSM8K
  sentence without arithmetic); a step is *invalid* if any of its lines is, else *valid* if
  any is, else *neutral*;
* a verifier that raises on a line makes that step *masked*: it gets no step reward, its
  tokens get advantage 0, the run goes on, and it is counted (``verifier_errors``);
* neutral text before a step takes that step's advantage (its tokens precede the step's
  boundary); text after the last scored step (the answer line, EOS) gets 0 from ``process``;
* a completion without any scored step (no parsable step) gets process reward 0: all its
  process advantages are 0, it does not enter its group's statistics, and it is counted
  (``no_step_completions``).

Built-in line verifiers (:data:`STEP_VERIFIERS`, keyed by task kind, the task's ``name``
before any ``":"``): ``chain_sum`` (:func:`chain_sum_line`), ``gsm8k`` and ``gsm_symbolic``
(:func:`arithmetic_line`). Hooks: a task may carry its own ``step_verifier(line, problem,
previous)``; :func:`register_step_verifier` adds a task kind; :func:`make_process_reward`
takes any per-line callable. A model-based process reward (PRM) is in
:mod:`gradprobe.rewards.prm`.
"""

from __future__ import annotations

import ast
import math
import numbers
import re
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence

import torch

from ..types import RolloutBatch
from .base import RewardContext, RewardFunctionError, RewardOutput, register_reward
from .dense import HYBRID_WEIGHTS, hybrid_advantages, mc_value_advantages
from .outcome import outcome_reward
from .steps import StepValues, _same_batch, split_steps

#: ``verifier(line, problem, previous) -> True | False | None``: ``line`` a stripped, non-blank
#: line, ``problem`` its Problem, ``previous`` the earlier step lines of the completion (those
#: judged True/False or that raised), in order.
LineVerifier = Callable[[str, Any, Sequence[str]], Optional[bool]]

VALID, INVALID, NEUTRAL, MASKED = "valid", "invalid", "neutral", "masked"
CACHE_KEY = "process_steps"


class UnknownTaskKindError(ValueError):
    """No step verifier is registered for the task (the message lists the kinds and the hooks)."""


# ----------------------------------------------------------------------------- chain sums

_CHAIN_QUESTION = re.compile(r"(-?\d+(?:\s*[-+]\s*-?\d+)+)\s*=?\s*$")
_CHAIN_LINE = re.compile(r"(-?\d+)\s*([-+])\s*(-?\d+)\s*=\s*(-?\d+)")


def chain_terms(problem) -> list[int]:
    """Signed terms of a chain sum: the first term, then each next term with its sign.

    ``"-6 + 5 - -3 - 7"`` -> ``[-6, 5, 3, -7]`` (the value is their sum).

    Parameters
    ----------
    problem : Problem
        ``metadata["expression"]`` when present, else the question's text before its final ``=``.

    Raises
    ------
    ValueError
        No chain of two or more terms can be read.
    """
    expr = (getattr(problem, "metadata", None) or {}).get("expression")
    text = str(expr) if expr is not None else str(getattr(problem, "question", ""))
    m = _CHAIN_QUESTION.search(text.strip())
    if m is None:
        raise ValueError(f"no chain sum of two or more terms in {text!r}")
    first = re.match(r"\s*(-?\d+)", m.group(1))
    rest = re.findall(r"([-+])\s*(-?\d+)", m.group(1)[first.end():])
    return [int(first.group(1))] + [int(b) if op == "+" else -int(b) for op, b in rest]


def chain_sum_line(line: str, problem, previous: Sequence[str]) -> bool | None:
    """Step verifier of chain sums: ``a op b = c`` that holds and continues the chain.

    Rules, for the k-th step line (k = 0, 1, ...; terms t_0, s_1, s_2, ... from
    :func:`chain_terms`, s_i signed):

    * a line without ``=`` is neutral (None);
    * otherwise it must be exactly ``a + b = c`` or ``a - b = c`` (integers, optional signs) with
      a + b = c (resp. a - b = c);
    * ``a`` must be t_0 for k = 0, else the result ``c`` stated by the latest previous step line
      of that form (an error is charged to the line that makes it, not to the lines after;
      the running sum t_0 + s_1 + ... + s_k when no previous line has that form);
    * the line's signed term (+b or -b) must be s_{k+1}: ``8 - 3`` and ``8 + -3`` both continue
      ``... - 3``; a line that skips a term, or a step beyond the last term, is invalid.

    Raises
    ------
    ValueError
        The problem holds no chain sum (the step is then masked and counted).
    """
    if "=" not in line:
        return None
    m = _CHAIN_LINE.fullmatch(line.strip())
    if m is None:
        return False
    a, op, b, c = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    term = b if op == "+" else -b
    terms = chain_terms(problem)
    k = len(previous)
    if k + 1 >= len(terms):
        return False
    expected_a = terms[0] if k == 0 else sum(terms[: k + 1])
    for prev in reversed(previous):
        pm = _CHAIN_LINE.fullmatch(prev.strip())
        if pm is not None:
            expected_a = int(pm.group(4))
            break
    return a + term == c and a == expected_a and term == terms[k + 1]


def chain_sum_reference_steps(problem) -> int:
    """Reference step count of a chain sum: terms - 1."""
    return len(chain_terms(problem)) - 1


# ----------------------------------------------------------------------------- arithmetic (GSM8K)

_TOKEN = re.compile(r"\s*(\d+\.\d+|\.\d+|\d+|[-+*/()])")
_ARITH_SUFFIX = re.compile(r"[0-9.\s+\-*/()]*$")
_ARITH_PREFIX = re.compile(r"[0-9.\s+\-*/()]*")
_MAX_TOKENS = 64  # longest expression read on either side of "="
_OPS = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
        ast.Div: lambda x, y: x / y}


def _normalize_arithmetic(line: str) -> str:
    line = re.sub(r"<<[^<>]*>>", "", line)  # GSM8K calculator annotations
    line = line.replace("$", "").replace("\u2212", "-").replace("\u00f7", "/").replace("\u00d7", "*")
    line = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", line)  # thousands separators
    return re.sub(r"(?<=[\d)])\s*[xX]\s*(?=[\d(.])", " * ", line)  # "0.2 x 50"


def _tokens(text: str) -> list[tuple[str, int, int]] | None:
    """(token, start, end) spans of an arithmetic chunk; None when a character is no token."""
    out, pos = [], 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        tok = m.group(1)
        out.append((str(int(tok)) if tok.isdigit() else tok, m.start(1), m.end(1)))  # "007" is no literal
        pos = m.end()
    return out


def _evaluate(node) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(repr(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _evaluate(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not arithmetic")


def _parse(tokens: list[str]):
    """(tree, has_operation) of a token list, or None when it is not an arithmetic expression."""
    try:
        tree = ast.parse(" ".join(tokens), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, (ast.Expression, ast.Constant, ast.UnaryOp, ast.BinOp, ast.unaryop, ast.operator))
               for n in ast.walk(tree)):
        return None
    if any(isinstance(n, ast.BinOp) and type(n.op) not in _OPS for n in ast.walk(tree)):
        return None
    return tree, any(isinstance(n, ast.BinOp) for n in ast.walk(tree))


def _side(text: str, *, left: bool):
    """Longest arithmetic expression ending (left side) or starting (right side) at the ``=``.

    None when there is none, or when it is cut out of a longer one: an operator, a number or a
    glued letter next to it (``S + 143 = ...``, ``60 students x 2/3 = ...``, ``= 5A/5``).
    """
    m = _ARITH_SUFFIX.search(text) if left else _ARITH_PREFIX.match(text)
    chunk, offset = m.group(), m.start()
    spans = _tokens(chunk)
    while spans is None and chunk:  # e.g. a lone "." in the chunk: keep the part next to "="
        chunk, offset = (chunk[1:], offset + 1) if left else (chunk[:-1], offset)
        spans = _tokens(chunk)
    spans = (spans or [])[-_MAX_TOKENS:] if left else (spans or [])[:_MAX_TOKENS]
    for k in range(len(spans), 0, -1):
        part = spans[-k:] if left else spans[:k]
        tokens = [t for t, _, _ in part]
        parsed = _parse(tokens)
        if parsed is None:
            continue
        if left:
            before = text[: offset + part[0][1]]
            cut = (tokens[0] in "+*/" or re.search(r"[A-Za-z_]$", before)
                   or re.search(r"([0-9)+\-*/^%]|(^|\s)[xX])$", before.rstrip()))
        else:
            after = text[offset + part[-1][2]:]
            cut = re.match(r"[A-Za-z_(]", after) or re.match(r"[0-9(+\-*/^]|\.\d", after.lstrip())
        return None if cut else (tokens, parsed)
    return None


def _half_unit(tokens: list[str]) -> Fraction:
    """Half a unit of the last shown decimal of a lone number (its rounding tolerance), else 0."""
    if len(tokens) == 1 and "." in tokens[0]:
        return Fraction(1, 2 * 10 ** len(tokens[0].split(".")[1]))
    return Fraction(0)


def arithmetic_line(line: str, problem=None, previous: Sequence[str] = ()) -> bool | None:
    """Step verifier of free-text solutions (GSM8K): every ``a op b = c`` in the line must hold.

    Rules: calculator annotations ``<<...>>``, ``$`` and thousands commas are dropped, ``x``/``×``
    between numbers is ``*``, ``÷`` is ``/``. At every ``=`` the longest arithmetic expression
    (numbers, ``+ - * /``, parentheses, unary signs; no powers) ending at it is compared with the
    longest one starting after it; a pair counts when both sides parse and one side holds an
    operation, and neither side is cut out of a longer expression (an operator, a number or a
    glued letter next to it: ``S + 143 = ...``, ``2 apples * 3/4 = ...``, ``= 5A/5`` are not
    counted). Values are exact (fractions); a side that is a lone decimal number may be rounded
    (``10/3 = 3.33`` holds: tolerance half a unit of its last decimal), an integer may not
    (``7/2 = 3`` fails); division by zero fails. A line without any counted pair (no arithmetic,
    words between the numbers, a percentage) is neutral.

    Returns
    -------
    bool or None
        True: all pairs hold; False: one fails; None: no pair (not a step).
    """
    text = _normalize_arithmetic(line)
    cuts = [m.start() for m in re.finditer(r"(?<![=<>!])=(?!=)", text)]
    verdicts = []
    for i, pos in enumerate(cuts):
        before = text[(cuts[i - 1] + 1 if i else 0): pos]
        after = text[pos + 1: (cuts[i + 1] if i + 1 < len(cuts) else len(text))]
        lhs, rhs = _side(before, left=True), _side(after, left=False)
        if lhs is None or rhs is None or not (lhs[1][1] or rhs[1][1]):
            continue
        try:
            diff = abs(_evaluate(lhs[1][0]) - _evaluate(rhs[1][0]))
        except ZeroDivisionError:
            verdicts.append(False)
            continue
        verdicts.append(diff <= max(_half_unit(lhs[0]), _half_unit(rhs[0])))
    return all(verdicts) if verdicts else None


def solution_reference_steps(problem) -> int | None:
    """Reference step count of a GSM8K problem: the gold solution's lines with checkable arithmetic.

    ``metadata["solution"]`` (the dataset's ``answer`` field); None when absent.
    """
    solution = (getattr(problem, "metadata", None) or {}).get("solution")
    if not solution:
        return None
    lines = [x.strip() for x in str(solution).splitlines() if x.strip() and not x.strip().startswith("####")]
    return sum(arithmetic_line(x) is not None for x in lines)


# ----------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class StepVerifierSpec:
    """A task kind's line verifier and (optionally) its reference step count ``reference(problem) -> int | None``."""

    line: LineVerifier
    reference: Callable[[Any], Optional[int]] | None = None


STEP_VERIFIERS: dict[str, StepVerifierSpec] = {
    "chain_sum": StepVerifierSpec(chain_sum_line, chain_sum_reference_steps),
    "gsm8k": StepVerifierSpec(arithmetic_line, solution_reference_steps),
    "gsm_symbolic": StepVerifierSpec(arithmetic_line, None),
}


def register_step_verifier(kind: str, line: LineVerifier, reference: Callable | None = None) -> None:
    """Register the step verifier of a task kind (the task's ``name`` before any ``":"``).

    Raises
    ------
    ValueError
        Empty ``kind`` or a non-callable ``line``/``reference``.
    """
    if not kind or not isinstance(kind, str):
        raise ValueError(f"step verifier kind must be a non-empty string, got {kind!r}")
    if not callable(line) or (reference is not None and not callable(reference)):
        raise ValueError(f"step verifier for {kind!r}: line (and reference) must be callable")
    STEP_VERIFIERS[kind] = StepVerifierSpec(line, reference)


def task_kind(task) -> str:
    """The task's kind: its ``name`` before any ``":"`` (``"gsm8k:data/x.jsonl"`` -> ``"gsm8k"``)."""
    return str(getattr(task, "name", "") or "").split(":", 1)[0]


def step_verifier_spec(task) -> StepVerifierSpec:
    """The task's own ``step_verifier`` method when it has one, else :data:`STEP_VERIFIERS` of its kind.

    Raises
    ------
    UnknownTaskKindError
        Neither exists.
    """
    own = getattr(task, "step_verifier", None)
    if callable(own):
        return StepVerifierSpec(own, getattr(task, "reference_steps", None))
    kind = task_kind(task)
    if kind not in STEP_VERIFIERS:
        raise UnknownTaskKindError(
            f"no step verifier for task {getattr(task, 'name', task)!r} (kind {kind!r}); registered kinds: "
            f"{', '.join(sorted(STEP_VERIFIERS))}. Give the task a step_verifier(line, problem, previous) "
            "method, call gradprobe.rewards.process.register_step_verifier, or build the reward with "
            "make_process_reward(verifier=...)")
    return STEP_VERIFIERS[kind]


# ----------------------------------------------------------------------------- checking a completion

@dataclass
class StepCheck:
    """Verdicts on one completion's steps.

    Attributes
    ----------
    statuses : list[str]
        Per step: ``valid``, ``invalid``, ``neutral`` (no line judged; answer lines) or ``masked``
        (the verifier raised).
    error : str or None
        The first exception raised, as ``"Type: message"``.
    """

    statuses: list[str]
    error: str | None = None

    def count(self, status: str) -> int:
        return self.statuses.count(status)

    @property
    def steps(self) -> int:
        """Steps the verifier was asked about and did not call neutral (valid + invalid + masked)."""
        return len(self.statuses) - self.count(NEUTRAL)


def check_steps(steps: Sequence[str], problem, verifier: LineVerifier, *, name: str = "step verifier") -> StepCheck:
    """Run a line verifier over the steps of one completion (rules in the module docstring).

    Parameters
    ----------
    steps : sequence of str, length S
        Step texts in order (each one or more lines).
    problem : Problem
    verifier : LineVerifier

    Returns
    -------
    StepCheck
        ``statuses`` of length S.

    Raises
    ------
    RewardFunctionError
        The verifier returned something other than True, False or None (raising is fine).
    """
    previous: list[str] = []
    statuses, error = [], None
    for step in steps:
        verdicts = []
        for raw in step.splitlines():
            line = raw.strip()
            if not line or line.startswith("####"):
                continue
            try:
                r = verifier(line, problem, tuple(previous))
            except Exception as e:  # a crash masks the step; the run goes on
                verdicts.append(MASKED)
                previous.append(line)
                error = error or f"{type(e).__name__}: {e}"
                continue
            if r is None:
                continue
            if not (isinstance(r, bool) or type(r).__name__ == "bool_"
                    or (isinstance(r, numbers.Integral) and int(r) in (0, 1))):
                raise RewardFunctionError(f"{name} returned {type(r).__name__} {r!r} on line {line!r}; "
                                          "expected True, False or None")
            verdicts.append(VALID if r else INVALID)
            previous.append(line)
        statuses.append(next((s for s in (MASKED, INVALID, VALID) if s in verdicts), NEUTRAL))
    return StepCheck(statuses, error)


@dataclass
class ProcessSteps:
    """Step verdicts of a batch (N rows).

    Attributes
    ----------
    boundaries : list[list[int]], length N
        :func:`~gradprobe.rewards.steps.split_steps` boundaries b_1 < ... < b_S per row (tokens).
    checks : list[StepCheck], length N
        Verdicts on those steps.
    seconds : float
        Wall seconds of splitting and verifying (recorded as ``device_seconds["reward"]``).
    """

    boundaries: list[list[int]]
    checks: list[StepCheck]
    seconds: float

    def step_values(self, group_size: int) -> StepValues:
        """Per-step rewards as :class:`StepValues` for :func:`mc_value_advantages`.

        Only valid (1.0) and invalid (0.0) steps are kept; ``rewards`` is each row's mean step
        reward (0.0 without scored steps) and ``v0`` its group's mean.
        """
        bounds, values, rewards = [], [], []
        for b, chk in zip(self.boundaries, self.checks):
            kept = [(e, 1.0 if s == VALID else 0.0) for e, s in zip(b, chk.statuses) if s in (VALID, INVALID)]
            bounds.append([e for e, _ in kept])
            values.append([v for _, v in kept])
            rewards.append(sum(values[-1]) / len(kept) if kept else 0.0)
        v0 = []
        for i in range(0, len(rewards), group_size):
            grp = rewards[i: i + group_size]
            v0 += [sum(grp) / len(grp)] * len(grp)
        return StepValues(boundaries=bounds, values=values, v0=v0, rewards=rewards, group_size=group_size,
                          seconds=self.seconds)

    def masked_tokens(self, num_columns: int) -> torch.Tensor:
        """BoolTensor, shape (N, T): tokens of masked steps (the verifier raised)."""
        out = torch.zeros((len(self.checks), num_columns), dtype=torch.bool)
        for n, (b, chk) in enumerate(zip(self.boundaries, self.checks)):
            start = 0
            for e, s in zip(b, chk.statuses):
                if s == MASKED:
                    out[n, start: e + 1] = True
                start = e + 1
        return out

    def stats(self) -> dict:
        c = {s: sum(chk.count(s) for chk in self.checks) for s in (VALID, INVALID, MASKED)}
        scored = c[VALID] + c[INVALID]
        errors = [chk.error for chk in self.checks if chk.error]
        return {"valid_steps": c[VALID], "invalid_steps": c[INVALID], "verifier_errors": c[MASKED],
                "verifier_error_example": errors[0] if errors else None,
                "no_step_completions": sum(1 for chk in self.checks if chk.count(VALID) + chk.count(INVALID) == 0),
                "step_validity_rate": c[VALID] / scored if scored else math.nan,
                "num_steps": scored / max(len(self.checks), 1), "verifier_seconds": self.seconds}


def process_steps(batch: RolloutBatch, ctx: RewardContext, verifier: LineVerifier | None = None) -> ProcessSteps:
    """Split and verify every completion of ``batch`` (cached in ``ctx.cache`` per verifier).

    Parameters
    ----------
    batch : RolloutBatch
        N = B * G rollouts; ``completion_ids`` (N, T) are split with ``ctx.tokenizer``.
    ctx : RewardContext
        ``tokenizer``, ``task`` (for its verifier when ``verifier`` is None), ``ledger`` (the wall
        time goes to ``device_seconds["reward"]`` once per batch and verifier), ``cache``.
    verifier : LineVerifier, optional
        Default: :func:`step_verifier_spec` of ``ctx.task``.

    Raises
    ------
    UnknownTaskKindError
        No verifier given and none for the task.
    RewardFunctionError
        The verifier returned a value other than True, False or None.
    """
    if verifier is None:
        verifier = step_verifier_spec(ctx.task).line
    cache = ctx.cache.setdefault(CACHE_KEY, {})
    hit = cache.get(verifier)
    if hit is not None and _same_batch(hit[0], batch):
        return hit[1]
    start = time.perf_counter()
    g, lengths, comp = batch.group_size, batch.completion_lengths.tolist(), batch.completion_ids
    name = getattr(verifier, "__name__", repr(verifier))
    boundaries, checks = [], []
    for n in range(batch.num_rows):
        ids = comp[n, : lengths[n]].tolist()
        b = split_steps(ids, ctx.tokenizer, max_steps=max(len(ids), 1))
        texts, s = [], 0
        for e in b:
            texts.append(ctx.tokenizer.decode(ids[s: e + 1], skip_special_tokens=True))
            s = e + 1
        boundaries.append(b)
        checks.append(check_steps(texts, batch.problems[n // g], verifier, name=name))
    out = ProcessSteps(boundaries, checks, time.perf_counter() - start)
    ctx.ledger.add_seconds("reward", out.seconds)
    cache[verifier] = (batch, out)
    return out


def process_advantages(ps: ProcessSteps, completion_mask: torch.Tensor,
                       group_size: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Token advantages of verified steps by the ``mc_value`` path (rules in the module docstring).

    Parameters
    ----------
    ps : ProcessSteps
        N rows.
    completion_mask : BoolTensor, shape (N, T)
    group_size : int
        G.

    Returns
    -------
    advantages : Tensor (float64), shape (N, T)
        :func:`~gradprobe.rewards.dense.mc_value_advantages` of the 1/0 step rewards, then 0 on
        masked steps' tokens.
    valid : BoolTensor, shape (N,)
        All True (a completion without steps has zero advantages, not a missing reward).
    stats : dict
        ``mc_value``'s (``mean_reward`` = mean process reward per completion) plus
        :meth:`ProcessSteps.stats`.
    """
    sv = ps.step_values(group_size)
    adv, valid, stats = mc_value_advantages(sv, completion_mask)
    adv = adv.masked_fill(ps.masked_tokens(adv.shape[1]).to(adv.device), 0.0)
    return adv, valid, {**stats, **ps.stats()}


# ----------------------------------------------------------------------------- rewards

def make_process_reward(verifier: LineVerifier | None = None, *, lam: float | None = None,
                        name: str | None = None):
    """A process reward from a step verifier, optionally mixed with ``outcome``.

    Parameters
    ----------
    verifier : LineVerifier, optional
        ``verifier(line, problem, previous) -> True | False | None``; default: the task's
        (:func:`step_verifier_spec`, looked up at call time).
    lam : float in [0, 1], optional
        None: process only. Else lam * A(process) + (1 - lam) * A(outcome)
        (:func:`~gradprobe.rewards.dense.hybrid_advantages`).
    name : str, optional
        Reported name (default ``process`` / ``process_hybrid_<lam>``).

    Returns
    -------
    Reward
        ``reward(batch, ctx) -> RewardOutput``, ``advantages`` (N, T) float64,
        ``generated_tokens`` {}.

    Raises
    ------
    ValueError
        ``lam`` is not a number in [0, 1].
    """
    if lam is not None and (isinstance(lam, bool) or not isinstance(lam, numbers.Real)
                            or not 0.0 <= float(lam) <= 1.0):
        raise ValueError(f"process hybrid weight lam must be a number in [0, 1] (lam * A(process) + "
                         f"(1 - lam) * A(outcome)), got {lam!r}; registered: "
                         + ", ".join(f"process_hybrid_{x}" for x in HYBRID_WEIGHTS))
    reward_name = name or ("process" if lam is None else f"process_hybrid_{lam:g}")

    def reward(batch: RolloutBatch, ctx: RewardContext) -> RewardOutput:
        ps = process_steps(batch, ctx, verifier)
        adv, valid, stats = process_advantages(ps, batch.completion_mask, batch.group_size)
        if lam is not None:
            out = outcome_reward(batch, ctx)
            adv, valid = hybrid_advantages(adv, valid, out.advantages, out.valid, float(lam))
            stats = {**stats, "lambda": float(lam), "missing": int((~valid).sum()),
                     "zero_variance_groups_process": stats["zero_variance_groups"],
                     "zero_variance_groups_outcome": out.stats["zero_variance_groups"]}
        return RewardOutput(name=reward_name, advantages=adv, valid=valid, generated_tokens={}, stats=stats)

    reward.__name__ = reward.__qualname__ = reward_name.replace(".", "")
    reward.__doc__ = ("Process reward from a step verifier" if lam is None else
                      f"{lam:g} * A(process) + {1 - lam:g} * A(outcome)") + " (gradprobe.rewards.process)."
    return reward


register_reward("process")(make_process_reward())
for _lam in HYBRID_WEIGHTS:
    register_reward(f"process_hybrid_{_lam}")(make_process_reward(lam=_lam, name=f"process_hybrid_{_lam}"))


# ----------------------------------------------------------------------------- trace fidelity (evals)

def trace_fidelity(task, completions: Sequence[str], problems: Sequence) -> dict:
    """Trace-fidelity metrics of evaluated completions (lines as steps, rules of the module docstring).

    Parameters
    ----------
    task : Task
        Its step verifier (:func:`step_verifier_spec`) and reference step count.
    completions : sequence of str, length N
        Decoded completions.
    problems : sequence of Problem, length N
        The problem of each completion.

    Returns
    -------
    dict
        ``step_validity_rate``: valid / (valid + invalid) steps over all completions (fraction;
        None without scored steps or without a verifier for the task); ``step_count_deviation``:
        mean over completions with a reference of |steps - reference steps| (steps: lines judged
        valid, invalid or that raised; reference: terms - 1 for chain sums, the gold solution's
        arithmetic lines for GSM8K; None when no completion has one). Never raises for a task
        without a verifier.

    Raises
    ------
    ValueError
        ``completions`` and ``problems`` differ in length.
    """
    if len(completions) != len(problems):
        raise ValueError(f"trace_fidelity: {len(completions)} completions but {len(problems)} problems")
    try:
        spec = step_verifier_spec(task)
    except UnknownTaskKindError:
        return {"step_validity_rate": None, "step_count_deviation": None}
    valid = scored = 0
    deviations = []
    for text, problem in zip(completions, problems):
        try:
            chk = check_steps(text.split("\n"), problem, spec.line)
        except RewardFunctionError:
            continue
        valid += chk.count(VALID)
        scored += chk.count(VALID) + chk.count(INVALID)
        try:
            ref = spec.reference(problem) if spec.reference is not None else None
        except Exception:  # a problem without a readable reference has none
            ref = None
        if ref is not None:
            deviations.append(abs(chk.steps - ref))
    return {"step_validity_rate": valid / scored if scored else None,
            "step_count_deviation": sum(deviations) / len(deviations) if deviations else None}
