"""A native reward's RewardOutput is checked where it enters the probe (gradprobe.probe.stages.reward_outputs, through
gradprobe.rewards.base.checked_output), not only for its shapes:

- ``generated_tokens`` counts that are negative, fractional, non-finite, booleans or text, or under a key that is no
  ledger category, are refused naming the reward, the field, the value and what is accepted (a -500 made tokens per
  update fall below the rollout tokens and the verdict read "worth its tokens"; a bogus key was charged);
- ``generated_tokens=None`` / ``stats=None`` (TypeError tracebacks before) are refused in one line saying to return
  ``{}`` or omit the field (both now default to ``{}``);
- a float ``valid`` is refused naming its dtype, and rows marked invalid have advantage exactly 0, so a reward with
  ``valid`` all False shows the exact zeros its "no usable reward" warning promises (it showed +1.018e+04 before).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from gradprobe.cli import main
from gradprobe.config import SamplingConfig
from gradprobe.probe.output import format_table
from gradprobe.probe.result import per_update_costs
from gradprobe.probe.run import ProbeConfig, run_probe
from gradprobe.probe.stages import StageTimes, reward_outputs
from gradprobe.rewards import REWARDS, RewardOutput, get_reward
from gradprobe.rewards.base import RewardFunctionError

from helpers_rollout import make_batch, one_thread
from helpers_tasks import ScoredTask

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

BATCH = make_batch(["ab", "abc", "a", "abcd"], group_size=2)  # N = 4 completions x T = 4 tokens, B = 2 groups
ACCEPTED = "accepted keys: 'rollout', 'continuation', 'selection', 'eval'"
MISSING = "no usable reward: it returned None or NaN for every completion, or marked none valid"


def _native(**fields):
    """A native reward returning advantages 1 on the completion mask, every row valid, unless ``fields`` says else."""
    def reward(batch, ctx):
        n, t = batch.completion_mask.shape
        kw = dict(name="r", advantages=torch.ones(n, t, dtype=torch.float64) * batch.completion_mask,
                  valid=torch.ones(n, dtype=torch.bool), generated_tokens={}, stats={})
        kw.update(fields)
        return RewardOutput(**kw)
    return reward


def _outputs(**fields):
    return reward_outputs(BATCH, [("mine", _native(**fields))], None)


@pytest.mark.parametrize("tokens, message", [
    ({"continuation": -500}, "reward 'mine' returned generated_tokens['continuation'] = -500 (int): a token count "
                             "must be a whole number >= 0 (an int)"),
    ({"bogus": 100000}, f"reward 'mine' returned generated_tokens['bogus'] = 100000: 'bogus' is not a ledger category; "
                        f"{ACCEPTED}"),
    ({"continuation": 12.5}, "reward 'mine' returned generated_tokens['continuation'] = 12.5 (float): a token count "
                             "must be a whole number >= 0 (an int)"),
    ({"continuation": math.nan}, "reward 'mine' returned generated_tokens['continuation'] = nan (float):"),
    ({"continuation": math.inf}, "reward 'mine' returned generated_tokens['continuation'] = inf (float):"),
    ({"continuation": True}, "reward 'mine' returned generated_tokens['continuation'] = True (bool):"),
    ({"continuation": "lots"}, "reward 'mine' returned generated_tokens['continuation'] = 'lots' (str):"),
    ({3: 10}, f"reward 'mine' returned generated_tokens[3] = 10: 3 is not a ledger category; {ACCEPTED}"),
    (None, "reward 'mine' returned generated_tokens=None: return {} (or omit it) when it generates no tokens beyond "
           "the rollouts, else counts by ledger category ('rollout', 'continuation', 'selection', 'eval')"),
    ([("continuation", 5)], "reward 'mine' returned generated_tokens of type list ([('continuation', 5)]): a dict of "
                            "token counts by ledger category"),
])
def test_bad_generated_tokens_are_refused_naming_reward_field_and_value(tokens, message):
    with pytest.raises(RewardFunctionError) as e:
        _outputs(generated_tokens=tokens)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("stats, message", [
    (None, "reward 'mine' returned stats=None (NoneType): return a dict of statistics, {} (or omit it) for none"),
    ("fine", "reward 'mine' returned stats='fine' (str): return a dict of statistics, {} (or omit it) for none"),
])
def test_stats_that_are_no_dict_are_refused(stats, message):
    with pytest.raises(RewardFunctionError) as e:
        _outputs(stats=stats)
    assert str(e.value) == message


@pytest.mark.parametrize("valid, message", [
    (torch.ones(4), "reward 'mine' returned valid of dtype torch.float32: valid must be boolean (torch.bool)"),
    (torch.ones(4, dtype=torch.int64), "reward 'mine' returned valid of dtype torch.int64: valid must be boolean"),
    (torch.ones(3, dtype=torch.bool), "reward 'mine' returned valid of shape (3,), expected (4,)"),
    ([True] * 4, "reward 'mine' returned valid of shape list, expected (4,)"),
])
def test_valid_that_is_not_a_bool_tensor_of_n_rows_is_refused(valid, message):
    with pytest.raises(RewardFunctionError) as e:
        _outputs(valid=valid)
    assert str(e.value).startswith(message), str(e.value)


def test_a_built_in_shaped_reward_with_wrong_advantages_shape_is_refused_too():
    with pytest.raises(RewardFunctionError, match=r"^reward 'mine' returned advantages of shape \(4, 5\), expected "
                                                  r"\(4, 4\)"):
        _outputs(advantages=torch.zeros(4, 5, dtype=torch.float64))


def test_good_counts_are_plain_ints_and_omitted_fields_are_empty_dicts():
    _, out = _outputs(generated_tokens={"continuation": np.int64(7), "selection": 3.0})
    assert out["mine"]["generated_tokens"] == {"continuation": 7, "selection": 3}
    assert all(type(n) is int for n in out["mine"]["generated_tokens"].values())

    def omitted(batch, ctx):
        n, t = batch.completion_mask.shape
        return RewardOutput(name="o", advantages=torch.zeros(n, t, dtype=torch.float64),
                            valid=torch.ones(n, dtype=torch.bool))
    _, out = reward_outputs(BATCH, [("omitted", omitted)], None)
    assert out["omitted"]["generated_tokens"] == {} and out["omitted"]["stats"] == {}


def test_rows_marked_invalid_have_exact_zero_advantages():
    mask = BATCH.completion_mask.to(torch.float64)
    valid = torch.tensor([True, False, False, True])
    adv, out = _outputs(advantages=torch.full((4, 4), 3.0, dtype=torch.float64), valid=valid)
    expected = 3.0 * mask * valid[:, None].to(torch.float64)  # also 0 off the completion mask
    assert torch.equal(adv["mine"], expected) and adv["mine"][0].sum() > 0
    assert out["mine"]["valid"] == 2 and out["mine"]["missing_groups"] == 0
    adv, out = _outputs(advantages=torch.full((4, 4), 3.0, dtype=torch.float64), valid=torch.zeros(4, dtype=torch.bool))
    assert torch.equal(adv["mine"], torch.zeros(4, 4, dtype=torch.float64))
    assert out["mine"]["valid"] == 0 and out["mine"]["missing_groups"] == 2


def test_checked_output_leaves_the_reward_s_own_object_alone():
    from gradprobe.rewards.base import checked_output  # new with these checks

    raw = _native(generated_tokens={"continuation": 5.0}, valid=torch.zeros(4, dtype=torch.bool))(BATCH, None)
    checked = checked_output(raw, "mine", BATCH)
    assert raw.generated_tokens == {"continuation": 5.0} and type(raw.generated_tokens["continuation"]) is float
    assert raw.advantages.abs().sum() > 0 and checked.advantages.abs().sum() == 0


def test_only_charged_categories_count_in_tokens_per_update():
    """eval tokens are logged, never charged (gradprobe.ledger.CHARGED), as training charges a reward's tokens."""
    class Cfg:
        class update:
            update_prompts = update_group = None

        class batch:
            prompts, group = 2, 2

    _, out = _outputs(generated_tokens={"continuation": 500, "eval": 10000})
    tokens, _, scale = per_update_costs(Cfg, BATCH, out, StageTimes())
    assert scale == 1.0 and tokens["mine"] == BATCH.generated_tokens + 500


def _dead(batch, ctx):
    """Large advantages everywhere, but no completion marked valid: no usable reward."""
    n, t = batch.completion_mask.shape
    return RewardOutput(name="dead", advantages=torch.arange(n * t, dtype=torch.float64).view(n, t) * 1e3,
                        valid=torch.zeros(n, dtype=torch.bool), generated_tokens={}, stats={})


def _lots(batch, ctx):
    n, t = batch.completion_mask.shape
    return RewardOutput(name="lots", advantages=torch.zeros(n, t, dtype=torch.float64),
                        valid=torch.ones(n, dtype=torch.bool), generated_tokens={"continuation": "lots"}, stats={})


def _probe(tmp_path, rewards: str) -> list[str]:
    return ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", rewards, "--prompts", "2",
            "--group", "4", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8",
            "--bootstrap", "50", "--out", str(tmp_path / "p"), "--no-progress"]


def test_probe_of_a_reward_with_no_valid_row_shows_the_exact_zeros_its_warning_promises(tmp_path):
    """digit3 gives mixed groups, so the reference direction is not 0: the old probe measured the dead reward's
    unmasked advantages (inner product and signal proxy far from 0) under a "no usable reward" warning."""
    config = ProbeConfig.from_dict(dict(model="tiny-qwen2", task="chain_sum", rewards=("outcome",), prompts=3, group=4,
                                        heldout_prompts=3, heldout_group=4, n_bootstrap=50, lr=1e-4,
                                        sampling=SamplingConfig(max_new_tokens=16, temperature=1.0), progress=False))
    result = run_probe(config, out=tmp_path, task=ScoredTask(), extra_rewards={"dead": _dead})
    entries = {r["name"]: r for r in json.loads((tmp_path / "probe.json").read_text())["rewards"]}
    assert entries["outcome"]["inner_product"] != 0.0  # a real reference direction: the zeros below are the mask's
    dead = entries["dead"]
    assert dead["valid_completions"] == 0 and dead["no_signal"] is True and dead["no_signal_reason"] == MISSING
    assert dead["inner_product"] == 0.0 and dead["predicted_gain_per_update"] == 0.0 and dead["signal_proxy"] == 0.0
    assert dead["per_group"] == [0.0, 0.0, 0.0] and dead["interval"] == [0.0, 0.0]
    printed = format_table(result)
    row = next(line for line in printed.splitlines() if line.split()[:1] == ["dead"])
    assert row.split()[1:4] == ["+0.000e+00", "[+0.000e+00,", "+0.000e+00]"], row
    assert printed.count(f"warning: reward 'dead' gives no gradient ({MISSING})") == 1, printed


def test_cli_text_token_count_is_a_one_line_error_not_a_traceback(tmp_path, capsys, monkeypatch):
    get_reward("outcome")
    monkeypatch.setitem(REWARDS, "lots", _lots)
    assert main(_probe(tmp_path, "outcome,lots")) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe probe: error: reward 'lots' returned generated_tokens['continuation'] = 'lots' "
                          "(str): a token count must be a whole number >= 0 (an int)"), err
    assert "internal error" not in err and "Traceback" not in err


def test_counts_computed_on_tensors_or_numpy_are_read_as_their_whole_number():
    """A count computed as ``mask.sum()`` (a 0-d integer tensor) or a numpy float that is whole was accepted before
    the checks (int(sum(...))) and still is; a fractional, boolean or many-element one is refused."""
    import numpy as np

    from gradprobe.rewards.base import RewardFunctionError, _checked_counts

    for n in (torch.tensor(12), np.float32(12.0), np.int64(12), 12.0):
        assert _checked_counts({"continuation": n}, "r") == {"continuation": 12}
    for n in (torch.tensor(True), np.True_, torch.tensor(2.5), np.float32(2.5), torch.tensor([1, 2])):
        with pytest.raises(RewardFunctionError, match=r"a token count must be a whole number >= 0"):
            _checked_counts({"continuation": n}, "r")


def test_nan_advantages_on_rows_marked_not_valid_are_masked_and_on_valid_rows_refused():
    """The finiteness check follows the masking: a NaN on a row the reward marked not valid (or on padding) is what
    masking is for (it was refused with "it must mask missing rewards", which the reward had done); a NaN on a valid
    row is refused."""
    n, t = BATCH.completion_mask.shape
    adv = torch.ones(n, t, dtype=torch.float64) * BATCH.completion_mask
    adv[0] = math.nan
    valid = torch.ones(n, dtype=torch.bool)
    valid[0] = False
    advantages, _ = _outputs(advantages=adv, valid=valid)
    assert (advantages["mine"][0] == 0).all() and torch.isfinite(advantages["mine"]).all()
    padded = torch.where(BATCH.completion_mask.bool(), torch.ones(n, t, dtype=torch.float64), math.nan)
    assert torch.isfinite(_outputs(advantages=padded)[0]["mine"]).all()  # NaN on padding only
    with pytest.raises(ValueError, match=r"reward 'mine' produced non-finite advantages on rows it marked valid"):
        _outputs(advantages=adv)
