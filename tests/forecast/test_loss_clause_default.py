"""``loss_change_clause`` reads a probe without a recorded loss type as ``grpo``, as ``mark_validated_arms`` does."""

from __future__ import annotations

import pytest

from gradprobe.forecast.special_rows import loss_change_clause
from gradprobe.forecast.validated_arms import entry_coverage


@pytest.mark.parametrize("probe_loss_type", [None, ""])
def test_an_explicit_grpo_loss_is_no_change_when_the_probe_records_no_loss_type(probe_loss_type):
    assert loss_change_clause("outcome@grpo", "outcome", probe_loss_type) == ""
    assert loss_change_clause("outcome", "outcome@grpo", probe_loss_type) == ""
    clause = loss_change_clause("outcome@cispo", "outcome", probe_loss_type)
    assert clause.startswith("; a change of loss (cispo) also acts on the optimizer steps")


def test_the_clause_and_the_validated_arms_agree_on_what_the_default_loss_is():
    cov = entry_coverage("outcome@grpo", probe_loss_type="grpo", rewards=["outcome"], loss_types=["grpo"],
                         reference_reward="outcome")
    assert cov.covered and loss_change_clause("outcome@grpo", "outcome", None) == ""
    assert loss_change_clause("outcome@bnpo", "outcome", "bnpo") == ""  # the probe's own loss is no change
