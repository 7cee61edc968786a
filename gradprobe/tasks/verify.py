"""Answer extraction and exact-match verification.

One rule decides what a completion's final answer is (:func:`extract_answer`):

1. If the text contains a ``####`` marker (a run of four or more ``#``), the
   answer is the first non-blank line after the LAST marker, stripped. Text
   after the answer on that line stays in the string; :func:`answers_match`
   deals with it. A marker followed by nothing gives ``None`` (no answer), even
   if a ``\\boxed{}`` appears earlier.
2. Otherwise, the content of the last ``\\boxed{...}`` with balanced braces.
3. Otherwise ``None``: no answer, which scores 0.

Multi-line gold answers (reasoning-gym grids, move lists) are the one
exception, chosen by the caller (``Task.score``) from the gold:
``extract_answer(text, multiline=True)`` returns the whole block after the
last marker (the ``\\boxed`` fallback is unchanged).

Why ``####``: it is GSM8K's own convention, and the prompt (see
:mod:`gradprobe.tasks.prompts`) asks for it. ``\\boxed`` is accepted because
instruction-tuned models write it out of habit.

Numeric gold answers (:func:`numeric_gold`, applied when a GSM8K file or a ``verifier=hash`` JSONL/hub task is
loaded) are read by the same rule as a completion's answer: the number-like token of the gold after the clean-up
below (a gold that is not one plain number, ``"13 apples"`` or ``"13."``, is stored as the number's canonical
text ``"13"``; ``"$13"``, ``"13%"`` and ``"13.0"`` are kept and read as 13), so ``#### 13``, ``#### 13.0`` and
``#### 13 apples`` all score 1 against each of them, as in the
GSM8K ``####`` convention (lm-evaluation-harness reads the number after ``####`` in the gold and in the
completion with one pattern; math-verify parses both with one parser). A gold holding LaTeX is kept as written
(math-verify decides); a gold holding no number is refused at load (the row is malformed; ``verifier=exact``
compares text instead), and one holding several (``"3:30"``, ``"1 and 2"``, ``"1,5"``: which one is the answer is
ambiguous) is kept as written and compared as text. Only commas between groups of three digits are thousands
separators, in a gold as in a completion (:func:`drop_thousands_separators`).

Comparison (:func:`answers_match`) is exact, never partial credit:

- If the gold answer is a single number, the prediction's FIRST number-like
  token is compared with it as an exact rational (``fractions.Fraction``, no
  float ``==``). Before tokenising, thousands separators (``1,234``), currency
  (``$ € £ ¥``), percent signs, the unicode minus (``−``), ``\\boxed{}``,
  ``\\text{}`` and ``\\frac{a}{b}`` are removed or rewritten, so ``"$1,234.00
  dollars."``, ``"1234"`` and ``"\\boxed{1234}"`` all match gold ``1234``, and
  ``"3/4"`` matches ``0.75``. A percent sign is dropped, not divided out:
  ``"50%"`` matches gold ``50``.
- If, after that clean-up, the prediction (or the gold) still holds LaTeX
  (a backslash command such as ``\\sqrt`` or ``\\pi``, or ``^``), numeric
  normalisation cannot decide and math-verify does (``verify(gold, pred)``).
  Note: math-verify compares numbers after rounding to 6 decimals.
- Otherwise the strings are compared after collapsing spaces within each line,
  dropping blank lines, case-folding and dropping one trailing full stop
  (reasoning-gym's non-numeric answers; line breaks still count, so a grid of
  the wrong shape does not match).

math-verify's ``parse`` installs a ``signal.alarm`` timeout, which raises in a
non-main thread; there it is called without a timeout.
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction

__all__ = ["extract_answer", "normalize_number", "answers_match", "looks_like_latex", "holds_number", "last_boxed",
           "normalize_text", "math_verify_match", "numeric_gold", "drop_thousands_separators", "ANSWER_MARKER"]

#: the final-answer marker of GSM8K-style completions (``#### 42``): four or more ``#``
ANSWER_MARKER = re.compile(r"#{4,}")
_NUM = r"-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_TOKEN = re.compile(rf"(?<![\d.])({_NUM})(?:/({_NUM}))?")
_FULL = re.compile(rf"\s*({_NUM})(?:/({_NUM}))?\s*")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_DROP = (
    ("\u2212", "-"), ("\u2013", "-"), ("{,}", ","), ("\\$", ""), ("\\%", ""),
    ("\\!", ""), ("\\,", ""), ("\\;", " "), ("\\left", ""), ("\\right", ""),
    ("$", ""), ("€", ""), ("£", ""), ("¥", ""), ("%", ""),
)


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` whose braces balance, else None."""
    for m in reversed(list(re.finditer(r"\\boxed\s*\{", text))):
        depth, start = 1, m.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[start:i].strip()
    return None


def extract_answer(
    text: str | None, *, boxed_fallback: bool = True, multiline: bool = False
) -> str | None:
    """Return the final answer of a completion (the rule in the module docstring).

    Parameters
    ----------
    text : str or None
        The completion (generated text only, without the prompt).
    boxed_fallback : bool, default True
        Use the last ``\\boxed{...}`` when there is no ``####`` marker. With
        False only the ``####`` rule applies (used by ``Task.format_rate``).
    multiline : bool, default False
        Return all text after the last marker (stripped) instead of its first
        non-blank line; for multi-line gold answers.

    Returns
    -------
    str or None
        The raw answer text, stripped; None when the completion has no answer.

    Examples
    --------
    >>> extract_answer("2 + 2 = 4\\n#### 4\\n#### 5 apples")
    '5 apples'
    >>> extract_answer("so \\\\boxed{\\\\frac{1}{2}}")
    '\\\\frac{1}{2}'

    Raises
    ------
    TypeError
        ``text`` is neither a str nor None.
    """
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be a string or None, got {text!r} ({type(text).__name__})")
    if not text:
        return None
    markers = list(ANSWER_MARKER.finditer(text))
    if markers:
        if multiline:
            return text[markers[-1].end():].strip() or None
        for line in text[markers[-1].end():].splitlines():
            if line.strip():
                return line.strip()
        return None
    if boxed_fallback:
        boxed = last_boxed(text)
        return boxed if boxed else None
    return None


def _clean(s: str) -> str:
    """Rewrite wrappers, currency, separators and ``\\frac`` into plain text."""
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed
    for old, new in _DROP:
        s = s.replace(old, new)
    s = _TEXT.sub(r" \1 ", s)
    for _ in range(3):  # nested \frac{\frac{..}{..}}{..} is left to math-verify
        s = _FRAC.sub(r"(\1)/(\2)", s)
    s = re.sub(r"\((" + _NUM + r")\)", r"\1", s)  # "(3)/(4)" -> "3/4"
    return s.strip()


def looks_like_latex(s: str) -> bool:
    """True if ``s`` still holds LaTeX after the numeric clean-up (``\\sqrt``, ``^``...)."""
    return bool(re.search(r"\\[a-zA-Z]+|\^", _clean(s)))


def _to_fraction(num: str, den: str | None) -> Fraction | None:
    try:
        value = Fraction(num.replace(",", ""))
        if den is not None:
            value /= Fraction(den.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None
    return value


def _first_number(s: str) -> Fraction | None:
    m = _TOKEN.search(_clean(s))
    return None if m is None else _to_fraction(m.group(1), m.group(2))


def _single_number(s: str) -> Fraction | None:
    m = _FULL.fullmatch(_clean(s))
    return None if m is None else _to_fraction(m.group(1), m.group(2))


def _canonical(value: Fraction) -> str:
    """Shortest exact decimal if one exists, else ``"p/q"``."""
    den, k = value.denominator, 0
    while den % 2 == 0 or den % 5 == 0:
        den //= 2 if den % 2 == 0 else 5
        k += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    scaled = abs(value.numerator) * 10**k // value.denominator
    digits = str(scaled).rjust(k + 1, "0")
    text = digits if k == 0 else f"{digits[:-k]}.{digits[-k:]}".rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


def normalize_number(s: str | None) -> str | None:
    """Canonical text of the first number-like token in ``s``.

    Parameters
    ----------
    s : str or None
        An answer such as ``"$1,234.50 dollars"``, ``"−5"``, ``"3/4"`` or
        ``"\\boxed{\\frac{3}{4}}"``.

    Returns
    -------
    str or None
        ``"1234.5"``, ``"-5"``, ``"0.75"``, ``"0.75"``: an exact decimal with no
        trailing zeros, or ``"p/q"`` in lowest terms when the value has no
        finite decimal (``"1/3"``). None when ``s`` holds no number, or holds
        LaTeX that numeric normalisation cannot evaluate (``"\\sqrt{4}"``).
    """
    if not s or looks_like_latex(s):
        return None
    value = _first_number(s)
    return None if value is None else _canonical(value)


def holds_number(s: str | None) -> bool:
    """Whether ``s`` can be a numeric gold answer: it holds a number or a LaTeX expression.

    A numeric task's gold without one (``"twelve"``, ``"see above"``) would be matched only by
    the case-folded text comparison of :func:`answers_match`, so a completion that echoes the
    same words would score 1.0; numeric tasks refuse such golds
    (:class:`gradprobe.tasks.gsm8k.GSM8KTask` treats the row as malformed).

    Parameters
    ----------
    s : str or None
        A gold answer.

    Returns
    -------
    bool
        True when :func:`normalize_number` reads a number from ``s`` or :func:`looks_like_latex`
        (math-verify decides then); False for None, blank or number-free text.

    Examples
    --------
    >>> holds_number("1,200"), holds_number("\\frac{3}{4}"), holds_number("\\sqrt{2}"), holds_number("twelve")
    (True, True, True, False)
    """
    if not s or not s.strip():
        return False
    return normalize_number(s) is not None or looks_like_latex(s)


def drop_thousands_separators(s: str) -> str:
    """``s`` with the commas of its thousands-separated numbers removed (``"1,200"`` -> ``"1200"``), and no other.

    A gold answer is read by the completion's rule (module docstring), which takes a comma as a thousands
    separator only between groups of three digits. Dropping every comma made a gold ``"1,5"`` the number 15,
    which a completion answering ``#### 1,5`` (read as 1, then 5) never matched; such a gold is now kept as
    written and compared as text, like any gold of several numbers (:func:`numeric_gold`).

    Examples
    --------
    >>> drop_thousands_separators("1,234,567.5"), drop_thousands_separators("1,5"), drop_thousands_separators("1,2345")
    ('1234567.5', '1,5', '1,2345')
    """
    return _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)


def numeric_gold(s: str | None) -> tuple[str | None, str]:
    """A numeric task's gold answer as the verifier compares it, read by the completion's rule (module docstring).

    Parameters
    ----------
    s : str or None
        The gold text (after ``####`` for a GSM8K solution), e.g. ``"13 apples"``, ``"$1,234.50"``, ``"13."``.

    Returns
    -------
    (gold, why) : (str or None, str)
        ``gold``: ``s`` stripped when it is one number after the clean-up (``"3/4"``, ``"$13"``, ``"13.0"``,
        ``"\\frac{1}{2}"``: :func:`answers_match` reads it as that number) or holds LaTeX that numeric
        normalisation cannot evaluate (``"\\sqrt{2}"``: math-verify decides); else the canonical text of its one
        number (:func:`normalize_number`: ``"13 apples"`` -> ``"13"``, ``"13."`` -> ``"13"``); ``why`` is then
        ``""``. A gold of several numbers (a time ``"3:30"``, a mixed number ``"3 1/2"``, ``"1 000"``) is kept as
        written: which one is the answer is not for the verifier to guess, and :func:`answers_match` compares it
        as it did before this rule. ``gold`` is None when ``s`` holds no number the verifier can read; ``why``
        says why.

    Examples
    --------
    >>> numeric_gold("13 apples"), numeric_gold("13."), numeric_gold("3:30")
    (('13', ''), ('13', ''), ('3:30', ''))
    """
    if not s or not s.strip():
        return None, "is blank"
    if looks_like_latex(s) or _single_number(s) is not None:  # LaTeX, or one number as answers_match reads it
        return s.strip(), ""
    cleaned = _clean(s)
    tokens = list(_TOKEN.finditer(cleaned))
    if not tokens:
        return None, f"({s.strip()[:40]!r}) holds no number"
    if len(tokens) > 1 or re.match(r"[.,]?\d", cleaned[tokens[0].end():]):
        # a time 3:30, a mixed number 3 1/2, a spaced 1 000, or a token that is not the whole number ("1,2345" read
        # as 1,234 then a 5; "1.2.3"): kept, compared as written
        return s.strip(), ""
    value = _to_fraction(tokens[0].group(1), tokens[0].group(2))
    if value is None:
        return None, f"({s.strip()[:40]!r}) holds no number it can evaluate"
    return _canonical(value), ""


def normalize_text(s: str) -> str:
    """Collapse spaces within lines, drop blank lines, case-fold, drop a final '.'."""
    lines = [" ".join(line.split()) for line in s.casefold().splitlines() if line.strip()]
    s = "\n".join(lines)
    return s[:-1].rstrip() if s.endswith(".") else s


def math_verify_match(gold: str, predicted: str) -> bool:
    """True when math-verify (Hugging Face ``math_verify.verify``) finds ``predicted`` equal to
    ``gold``, each parsed as LaTeX (wrapped in ``$...$`` unless it already holds ``$`` or
    ``\\boxed``); a parse failure or a timeout (5 s on the main thread) counts as not equal."""
    from math_verify import parse, verify  # heavy import (sympy), only when needed

    def wrap(s: str) -> str:
        return s if ("$" in s or "\\boxed" in s) else f"${s}$"

    main = threading.current_thread() is threading.main_thread()
    timeout = 5 if main else None
    try:
        g = parse(wrap(gold), parsing_timeout=timeout)
        p = parse(wrap(predicted), parsing_timeout=timeout)
        return bool(g and p and verify(g, p, timeout_seconds=timeout))
    except Exception:  # math-verify raises on exotic input; that is "no match"
        return False


def answers_match(predicted: str | None, gold: str) -> bool:
    """Exact match of a predicted answer against the gold one (module docstring).

    Parameters
    ----------
    predicted : str or None
        Output of :func:`extract_answer`; None (no answer) never matches.
    gold : str
        The gold final answer.

    Returns
    -------
    bool
        True when the answers are equal after normalisation.

    Examples
    --------
    >>> answers_match("$1,234.00 dollars", "1234")
    True
    >>> answers_match("18", "180")
    False

    Raises
    ------
    TypeError
        ``predicted`` is neither a str nor None, or ``gold`` is not a str (an int gold answer: pass ``str(gold)``).
    """
    if predicted is not None and not isinstance(predicted, str):
        raise TypeError(f"predicted must be a string or None, got {predicted!r} ({type(predicted).__name__})")
    if not isinstance(gold, str):
        raise TypeError(f"gold must be a string, got {gold!r} ({type(gold).__name__}); pass str(gold)")
    if predicted is None or not predicted.strip():
        return False
    if normalize_text(predicted) == normalize_text(gold):
        return True
    gold_value = _single_number(gold)
    if gold_value is not None:
        if looks_like_latex(predicted):
            return math_verify_match(gold, predicted)
        value = _first_number(predicted)
        return value is not None and value == gold_value
    if looks_like_latex(gold) or looks_like_latex(predicted):
        return math_verify_match(gold, predicted)
    return False
