"""The one-line error of a run stopped because it trained nothing
(:func:`gradprobe.training.update.check_untrained_stop`), written out in full by the tests that expect it: the frame
is shared, each test passes its cause's own words (``tests/test_no_valid_reward_run.py``: ``"no_valid_reward"``;
``tests/training/test_never_trained_overflow.py``: ``"reward_overflow"``)."""

from __future__ import annotations


def untrained_stop_message(reward: str, out, update: int, *, did: str, why: str, kept: str, reason: str, fix: str,
                           arm: str = "grpo") -> str:
    """The expected error of a run of arm ``arm`` stopped at update ``update`` (counted from 1).

    ``did``: what the updates did, up to the words before "the run stopped" (``{which}`` is replaced by
    ``"update 1"`` or ``"updates 1-<update>"``); ``why``: why it stopped (in parentheses); ``kept``: what
    ``metrics.jsonl`` keeps (in parentheses); ``reason``: ``summary.json``'s ``stop_reason``; ``fix``: the fix, before
    "and rerun with a new --out"."""
    which = "update 1" if update == 1 else f"updates 1-{update}"
    return (f"update {update}: reward {reward!r} of arm {arm!r} {did.format(which=which)} the run stopped ({why}); "
            f"{out} keeps metrics.jsonl ({kept}) and summary.json (stop_reason \"{reason}\"); {fix} and rerun with a "
            "new --out")
