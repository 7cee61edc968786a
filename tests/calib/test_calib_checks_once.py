"""A probe.json dict gets the checks its file gets; the calibrated table stays aligned with a long reward name.

Before:

- ``calib.apply("default", raw)`` with a dict ran no :func:`gradprobe.forecast.probe_input.check_entry_inputs`
  (which :func:`gradprobe.load_probe` runs on a file): a doubled ``batch.generated_tokens`` or ``config.lr`` was
  calibrated without a word, an entry's ``tokens_per_update`` + 1 was blamed on its ``predicted_gain_at_budget``,
  and ``config.lr: "fast"`` said "could not convert string to float: 'fast'"; the file was refused naming the field;
- :func:`calib.apply.format_calibrated` padded the reward name to 16 characters, so a plug-in reward's 41-character
  name pushed its row's numbers out of line with the header and the other rows.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest

import calib
from calib.apply import calibrate, format_calibrated, load_probe
from calib.model import load_calibration
from calib.probe_input import DICT_FIX, CalibrationApplyError
from gradprobe.layout import rerun_advice, restore_advice
from gradprobe.probe.batches import combine_batches
from gradprobe.probe.run import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "data" / "study_tiny" / "probe"
#: the shipped probes record the task by name only, outside the default calibration's domain: said, not tested here
pytestmark = pytest.mark.filterwarnings("ignore::calib.domain.CalibrationDomainWarning")
#: how a refused token count ends, after its numbers
TOKENS_RULE = ("(tokens_per_update = round((batch.generated_tokens + its generated_tokens of the kinds training "
               "charges: rollout, continuation, selection) x s) = round(({g} + {c}) x 1.0), s = config's "
               "(update_prompts or prompts) x (update_group or group) / (prompts x group): "
               "gradprobe.probe.result.per_update_costs, as the probe writes it): the result was edited or damaged "
               "after the probe made it, so a forecast from it would not be the probe's; ")
#: what a refusal of an edited dict says was edited, and what the same refusal of its file says
DICT_EDITED, FILE_EDITED = ("the result was edited or damaged after the probe made it",
                            "the file was edited or damaged after the probe wrote it")


def _shipped() -> dict:
    return json.loads((PROBE / "probe.json").read_text())


def _pooled() -> dict:
    """Two shipped single-batch probes pooled by the probe's own combine_batches (a --probe-batches 2 probe.json)."""
    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    return json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))


def _refusal(probe) -> str:
    with pytest.raises(CalibrationApplyError) as info:
        calib.apply("default", probe)
    return str(info.value)


def _tokens_plus_one(d):
    d["rewards"][1]["tokens_per_update"] += 1


def _generated_doubled(d):
    d["batch"]["generated_tokens"] *= 2


def _config_lr_doubled(d):
    d["config"]["lr"] *= 2


def _entry_lr_doubled(d):
    d["rewards"][1]["lr"] *= 2


def _config_lr_text(d):
    d["config"]["lr"] = "fast"


EDITS = [
    (_tokens_plus_one, "rewards[1].tokens_per_update (reward 'mc_value') is 25521, but batch.generated_tokens and "
     "rewards[1].generated_tokens give 25520 " + TOKENS_RULE.format(g=4477, c="21043 continuation"), True),
    (_generated_doubled, "rewards[0].tokens_per_update (reward 'outcome') is 4477, but batch.generated_tokens and "
     "rewards[0].generated_tokens give 8954 " + TOKENS_RULE.format(g=8954, c=0), True),
    (_config_lr_doubled, "rewards[0].lr (reward 'outcome') is 0.0001, but config.lr is 0.0002 (the probe writes its "
     "lr into config and into every entry", True),
    (_entry_lr_doubled, "rewards[1].lr (reward 'mc_value') is 0.0002, but config.lr is 0.0001 (the probe writes its "
     "lr into config and into every entry", True),
    (_config_lr_text, 'config.lr is "fast": it must be a finite number > 0 and at most 1 (the probe\'s --lr); ', False)]


@pytest.mark.parametrize("edit, said, edited", EDITS, ids=[e[0].__name__.strip("_") for e in EDITS])
def test_a_dict_is_checked_against_its_records_as_its_file_is(tmp_path, edit, said, edited):
    raw = _shipped()
    edit(raw)
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "probe.json").write_text(json.dumps(raw))
    from_dict = _refusal(copy.deepcopy(raw))  # was: calibrated (config.lr, generated_tokens) or another field named
    assert from_dict.startswith(f"probe.json field {said}")
    assert from_dict.endswith(f"; {DICT_FIX}") and "\n" not in from_dict  # was: the fix of a file
    from_file = _refusal(folder)  # the file: the same words, its path and its folder's fix
    file_fix = restore_advice(folder) if edited else rerun_advice(folder)
    said_of_file = from_dict[len('probe.json'):-len(DICT_FIX)].replace(DICT_EDITED, FILE_EDITED)
    assert from_file == f"{folder / 'probe.json'}{said_of_file}{file_fix}"


def test_a_multi_batch_dict_has_each_batchs_tokens_checked_and_only_what_is_recorded_is_compared():
    raw = _pooled()
    assert calib.apply("default", copy.deepcopy(raw)).loc["outcome", "calibrated_gain"] == 0.0  # intact: applies
    raw["batches"][1]["batch"]["generated_tokens"] *= 2  # was: calibrated without a word
    assert _refusal(raw) == ("probe.json field batches[1].rewards[0].tokens_per_update (reward 'outcome') is 4814, but "
                             "batches[1].batch.generated_tokens and batches[1].rewards[0].generated_tokens give 9628 "
                             + TOKENS_RULE.format(g=9628, c=0) + DICT_FIX)
    del raw["batches"][1]["batch"]["generated_tokens"]  # not recorded: nothing to compare, as for a file
    assert calib.apply("default", raw).loc["outcome", "calibrated_gain"] == 0.0


# --------------------------------------------------------------------------- the calibrated table, a long name

LONG = "hybrid_0.5_very_long_custom_reward_name_x"  # 41 characters, a plug-in's


def test_a_long_reward_name_keeps_the_calibrated_table_aligned():
    raw, _, task = load_probe(PROBE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = calibrate(load_calibration("default"), raw, task=task)
    doc["rewards"][1]["name"] = LONG
    lines = format_calibrated(doc).splitlines()
    start = lines.index(next(line for line in lines if line.startswith("reward ")))
    table = lines[start:start + 5]
    pad = " " * (len(LONG) - 14)  # the name column: the longest name and two spaces (was 16 wide whatever the name)
    assert table == [f"reward          {pad}  forecast  calibrated                interval",
                     f"outcome         {pad}    +0.000      +0.000        [+0.000, +0.000]",
                     f"{LONG}      -4.625      -4.289        [-7.603, -0.981]  tied",
                     f"mc_advantage    {pad}    -4.625      -4.289        [-7.603, -0.981]  tied",
                     f"hybrid_0.5      {pad}    -4.625      -4.289        [-7.603, -0.981]  tied"]
    ends = {line.index("]") if "]" in line else len(line) - 1 for line in table}
    assert ends == {len(LONG) + 2 + 10 + 12 + 23}  # every interval ends under the header's "interval"
