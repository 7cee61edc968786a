"""Answer extraction and exact-match verification (gradprobe.tasks.verify)."""

import threading

import pytest

from gradprobe.tasks.verify import answers_match, extract_answer, normalize_number

# (predicted, gold, expected match)
MATCH_CASES = [
    ("18", "18", True),
    ("18.0", "18", True),
    ("18.50", "18.5", True),
    ("18.5", "18.50", True),
    ("1,234", "1234", True),
    ("1,234.00", "1234", True),
    ("-5", "-5", True),
    ("\u22125", "-5", True),  # unicode minus
    ("-$5", "-5", True),
    ("$-5", "-5", True),
    ("$18", "18", True),
    ("\u20ac18", "18", True),
    ("\\$18", "18", True),
    ("50%", "50", True),
    ("3/4", "0.75", True),
    ("0.75", "3/4", True),
    ("\\frac{3}{4}", "0.75", True),
    ("\\dfrac{6}{8}", "\\frac{3}{4}", True),
    ("\\boxed{18}", "18", True),
    ("18 dollars", "18", True),
    ("18 dollars.", "18", True),
    ("\\text{18 dollars}", "18", True),
    ("$1,234.00 per week", "1234", True),
    ("2^{1/2}", "\\sqrt{2}", True),  # math-verify decides
    ("\\sqrt{4}", "2", True),
    ("True", "true", True),
    ("  blue   green ", "Blue Green", True),
    # negatives
    ("18", "180", False),
    ("180", "18", False),
    ("", "18", False),
    ("   ", "18", False),
    (None, "18", False),
    ("-5", "5", False),
    ("5", "-5", False),
    ("18.01", "18", False),
    ("0.7500001", "\\frac{3}{4}", False),  # exact, unlike math-verify's 6-digit rounding
    ("1/3", "0.3333333", False),
    ("\\sqrt{4}", "4", False),
    ("eighteen", "18", False),
    ("1 2 4", "1 2 3", False),
    ("1 2 3 4", "1 2 3", False),  # non-numeric gold: no first-token rule
    ("3/0", "0", False),
]


@pytest.mark.parametrize(("predicted", "gold", "expected"), MATCH_CASES)
def test_answers_match(predicted, gold, expected):
    assert answers_match(predicted, gold) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 + 2 = 4\n#### 4", "4"),
        ("#### 3\nmore work\n#### 5", "5"),  # last marker wins
        ("#### 1,234.00 dollars\nthank you", "1,234.00 dollars"),
        ("####\n\n  7  \n", "7"),  # answer on the next non-blank line
        ("#####5", "5"),
        ("we get \\boxed{\\frac{1}{\\sqrt{2}}}.", "\\frac{1}{\\sqrt{2}}"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{3} and an unclosed \\boxed{4", "3"),
        ("\\boxed{9}\n#### 8", "8"),  # #### takes precedence over \boxed
        ("\\boxed{9}\n####", None),  # a marker with nothing after it: no answer
        ("the answer is 12", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extract_answer_multiline():
    text = "grid:\n#### 1\nno\n#### \n1 2\n3 4\n"
    assert extract_answer(text, multiline=True) == "1 2\n3 4"
    assert extract_answer(text) == "1 2"


def test_extract_answer_without_boxed_fallback():
    assert extract_answer("\\boxed{5}", boxed_fallback=False) is None
    assert extract_answer("#### 5", boxed_fallback=False) == "5"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("18", "18"),
        ("18.50", "18.5"),
        ("$1,234.00", "1234"),
        ("\u22125 apples", "-5"),
        ("-0.0", "0"),
        ("3/4", "0.75"),
        ("2/6", "1/3"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("1.5e3", "1500"),
        (".5", "0.5"),
        ("0.125", "0.125"),
        ("no digits", None),
        ("\\sqrt{4}", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


def test_several_hash_lines_end_to_end():
    completion = "step 1\n#### 17\nwait, recheck\n#### 1,234.00"
    assert answers_match(extract_answer(completion), "1234")
    assert not answers_match(extract_answer(completion), "17")


def test_latex_match_works_off_the_main_thread():
    # math-verify's signal.alarm timeout raises in threads; we must not.
    result = {}

    def work():
        result["ok"] = answers_match("2^{1/2}", "\\sqrt{2}")

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert result["ok"] is True
