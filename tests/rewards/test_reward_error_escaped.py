"""A reward's own exception text reaches the terminal escaped: a control character in it (a terminal escape
sequence, a tab) or a lone surrogate is written as ``repr`` writes it, on the one line the error promises."""

import pytest

from gradprobe.rewards import RewardFunctionError
from gradprobe.rewards.sequence import call_reward, one_line


def _raises(text):
    def reward(*args, **kwargs):
        raise ValueError(text)
    return reward


@pytest.mark.parametrize("text, said", [
    ("boom \x1b[31mRED", "ValueError: boom \\x1b[31mRED"),
    ("a\tb\nc\rd", "ValueError: a\\tb\\nc\\rd"),
    ("file r\udcff.py", "ValueError: file r\\udcff.py"),
    ("plain text", "ValueError: plain text"),
])
def test_the_reward_error_names_the_exception_text_escaped(text, said):
    with pytest.raises(RewardFunctionError) as err:
        call_reward(_raises(text), "my_reward")
    assert str(err.value) == f"reward 'my_reward' raised {said}"
    str(err.value).encode("utf-8")  # prints on a UTF-8 terminal


def test_one_line_cuts_the_escaped_text_at_the_limit():
    assert one_line(ValueError("\x1b" * 10), limit=8) == "ValueError: \\x1b\\x1b..."
