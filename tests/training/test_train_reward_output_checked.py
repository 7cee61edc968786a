"""Training checks a reward's output where it enters, as the probe does (gradprobe.rewards.base.checked_output): a
native reward whose rows are all marked not valid trains nothing (its advantages there are zeroed; a review saw
grad_norm 3.96 under a "nothing was trained" stop), and a float ``valid`` is refused before any optimizer step (it
raised a NotImplementedError after one)."""

import pytest

from gradprobe.rewards.base import RewardFunctionError
from gradprobe.training.errors import NoValidRewardError

from helpers_training import metric_lines, train_tiny

NATIVE = '''
import torch
from gradprobe.rewards import RewardOutput


def dead_but_big(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="x", advantages=5.0 * torch.ones(n, t, dtype=torch.float64) * batch.completion_mask,
                        valid=torch.zeros(n, dtype=torch.bool), generated_tokens={}, stats={})


def float_valid(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="x", advantages=torch.ones(n, t, dtype=torch.float64) * batch.completion_mask,
                        valid=torch.ones(n), generated_tokens={}, stats={})
'''


def test_rows_marked_not_valid_train_nothing_and_the_run_stops(tmp_path):
    (tmp_path / "rw_native.py").write_text(NATIVE)
    with pytest.raises(NoValidRewardError, match=r"\(or marked none valid\) of updates 1-3"):
        train_tiny(tmp_path / "run", reward=f"{tmp_path / 'rw_native.py'}:dead_but_big", budget={"updates": 4})
    lines = [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]
    assert [(x["reward_valid"], x["grad_norm"], x["loss"]) for x in lines] == [(0, 0.0, 0.0)] * 3


def test_a_float_valid_is_refused_before_any_update(tmp_path):
    (tmp_path / "rw_native.py").write_text(NATIVE)
    with pytest.raises(RewardFunctionError, match=r"returned valid of dtype torch.float32: valid must be boolean"):
        train_tiny(tmp_path / "run", reward=f"{tmp_path / 'rw_native.py'}:float_valid", budget={"updates": 2})
    assert not [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]


COUNTING = '''
import torch
from gradprobe.rewards import RewardOutput


def _out(batch, tokens):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="x", advantages=torch.randn(n, t, dtype=torch.float64) * batch.completion_mask,
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens=tokens, stats={})


def reports_only(batch, ctx):
    return _out(batch, {"continuation": 300})


def charges_and_reports(batch, ctx):
    ctx.ledger.add_generated("continuation", 300)
    return _out(batch, {"continuation": 300})
'''


@pytest.mark.parametrize("fn", ["reports_only", "charges_and_reports"])
def test_tokens_a_reward_reports_are_charged_once(tmp_path, fn):
    """The probe counts a reward's reported tokens in its tokens per update; training charged only what the reward
    put on the ledger itself, so a native reward generating 300 tokens per update without charging them trained for
    free (a trial user's finding). Reported and charged together, they count once."""
    (tmp_path / "rw_count.py").write_text(COUNTING)
    train_tiny(tmp_path / "run", reward=f"{tmp_path / 'rw_count.py'}:{fn}", budget={"updates": 2})
    lines = [x for x in metric_lines(tmp_path / "run") if not x.get("eval")]
    assert [x["update_generated_tokens"]["continuation"] for x in lines] == [300, 300]
