"""A problem built by hand in Python whose text holds an unpaired UTF-16 surrogate (``"\\ud800"``) is refused where
it is made, naming the problem, the field, the character and the fix, as a task row read from a file is
(``test_task_rows_unencodable.py``); such text given straight to the prompt encoder is refused with the same words
instead of the tokenizer's bare ``TypeError: TextEncodeInput must be Union[...]``."""

from __future__ import annotations

import pytest

from gradprobe.models import load_tokenizer
from gradprobe.tasks import Problem, encode_prompt
from gradprobe.tasks.columns import PromptText
from gradprobe.tasks.prompts import encode_prompts

HALF = ("an unpaired UTF-16 surrogate: half of a character, which no UTF-8 text can hold (in a Python string the "
        "escapes '\\ud83d\\ude00' are two halves, not one emoji); write the whole character ('\\U0001f600' or the "
        "character itself; text.encode('utf-16', 'surrogatepass').decode('utf-16') joins a string's pairs of "
        "halves), or delete the half")


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def test_a_hand_built_problem_with_a_lone_surrogate_is_refused_naming_it():
    with pytest.raises(ValueError) as info:
        Problem(id="mine/3", question="What is \ud800 2 + 2?", answer="4")
    assert str(info.value) == ("Problem 'mine/3' cannot be encoded for a model: field 'question' holds \\ud800 "
                               f"(character 9, after 'What is '), {HALF}")
    with pytest.raises(ValueError, match=r"^Problem 'p' cannot be encoded for a model: field 'answer' holds \\udc00 "
                                         r"\(character 2, after '4'\)"):
        Problem(id="p", question="What is 2 + 2?", answer="4\udc00")
    chat = PromptText("hi", prompt_format="conversational", messages=[{"role": "user", "content": "hi \ud83d"}])
    with pytest.raises(ValueError, match=r"field 'question'\.messages\[0\]\['content'\] holds \\ud83d \(character "
                                         r"4, after 'hi '\)"):
        Problem(id="c", question=chat, answer="1")
    ok = Problem(id="e", question="What is \U0001F600 + 1?", answer="2")  # a whole character is text
    assert ok.question == "What is \U0001F600 + 1?"


def test_the_prompt_encoder_names_the_prompt_instead_of_a_tokenizer_type_error(tokenizer):
    with pytest.raises(ValueError) as info:
        encode_prompt(tokenizer, "What is \ud800?")
    assert str(info.value) == ("the prompt (question 'What is \\ud800?') cannot be encoded: field 'question' holds "
                               f"\\ud800 (character 9, after 'What is '), {HALF}")
    with pytest.raises(ValueError, match=r"^prompt 1 of 3 \(question 'b\\udfff'\) cannot be encoded: field "
                                         r"'question' holds \\udfff \(character 2, after 'b'\)"):
        encode_prompts(tokenizer, ["a", "b\udfff", "c\ud800"])  # the first such prompt
    assert encode_prompts(tokenizer, ["a", "b"]) == [encode_prompt(tokenizer, q) for q in ("a", "b")]
