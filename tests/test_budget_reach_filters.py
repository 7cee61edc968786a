"""The out-of-reach warning of a frozen plan (:class:`gradprobe.training.budget.OutOfReachWarning`) goes through
:func:`warnings.warn` alone, so Python's "once" and "default" filters dedupe it as any warning. It was given through
``warnings.catch_warnings(record=True)`` and ``showwarning``: entering that block resets every module's registry of
warnings shown (CPython's ``_filters_mutated``), so three ``gradprobe.load_study`` calls under ``-W once`` warned three
times, and a warning elsewhere that "default" had shown once showed again. (pandas's own ``catch_warnings``, entered
by the study readers, still resets them: a loop of ``load_study`` calls warns once per call under "once".)"""

from __future__ import annotations

import warnings

import pytest

import gradprobe
from gradprobe.training.budget import OutOfReachWarning, reach_unrecorded, reach_warned_once
from gradprobe.training.plan import load_plan

from test_budget_reach import _old_study


def _elsewhere() -> None:
    warnings.warn("a warning of another module, at one line", UserWarning, stacklevel=1)


def _given(caught, text: str) -> int:
    return sum(text in str(w.message) for w in caught)


def _read_three_times(study) -> None:
    """The frozen plan read by three API calls, each in its own :func:`reach_warned_once` block (as
    ``gradprobe.load_study`` reads it), from one line."""
    for _ in range(3):
        with reach_warned_once():
            assert load_plan(study / "plan.toml", check_schedule=False).budget.updates == 5


@pytest.mark.parametrize("action", ["once", "default"])
def test_three_blocks_reading_a_frozen_out_of_reach_plan_warn_once_under_once_and_default(tmp_path, action):
    study = _old_study(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        _elsewhere()
        _read_three_times(study)
        _elsewhere()
    assert _given(caught, " is out of reach of ") == 1  # was 3: each block's warning reset the registries
    assert all(w.category is OutOfReachWarning for w in caught if " is out of reach of " in str(w.message))
    assert _given(caught, "a warning of another module") == 1  # was 2: its registry entry was reset too


def test_the_filters_decide_and_a_hidden_read_leaves_the_one_warning_to_the_read_after_it(tmp_path):
    study = _old_study(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with reach_warned_once():
            with warnings.catch_warnings(), reach_unrecorded():  # a hidden read ahead of the one that reports
                warnings.simplefilter("ignore")
                load_plan(study / "plan.toml", check_schedule=False)
            for _ in range(2):
                load_plan(study / "plan.toml", check_schedule=False)
    assert _given(caught, " is out of reach of ") == 1
    with warnings.catch_warnings():  # an "error" filter raises it, at the first read of the block
        warnings.simplefilter("error", OutOfReachWarning)
        with pytest.raises(OutOfReachWarning, match=r"^plan \S+/plan\.toml: budget\.generated_tokens = 1,000 is "):
            gradprobe.load_study(study)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", OutOfReachWarning)
        assert gradprobe.load_study(study).plan.budget.updates == 5
    assert _given(caught, " is out of reach of ") == 0
