"""A caller's ``fix=`` reaches every nested refusal of the probe.json checks, and a result held in memory is called
"the result" there.

The public checks of :mod:`gradprobe.forecast.probe_input` pass ``fix`` on as a keyword to each check they call (it
was carried inside ``source``). calib's tests reach these refusals through :func:`calib.apply`, which runs
:func:`~gradprobe.forecast.probe_input.check_entry_inputs` first, so the refusals below, reached by calling
:func:`~gradprobe.forecast.probe_input.probe_batches_of`, :func:`~gradprobe.forecast.probe_input.pooled_entries`,
:func:`~gradprobe.forecast.probe_input.check_entry_inputs` or :func:`~gradprobe.forecast.probe_input.check_batches`
directly, were pinned nowhere: a call that dropped ``fix`` gave the derived fix instead, and "the file ... wrote it".
"""

from __future__ import annotations

import json

import pytest
from helpers_probe_json import ROOT, pooled_shipped

from gradprobe.forecast import probe_input

#: the end of a refusal of damage in a result held in memory, with the caller's fix
RESULT = (": the result was edited or damaged after the probe made it, so a forecast from it would not be the "
          "probe's; FIX")
#: the end of a pooled entry's refusal (check_pooled_entries) in a result held in memory, with the caller's fix
POOLED = (", as gradprobe.probe.batches.combine_batches pools them): the pooled entry or a batch's entry was edited or "
          "damaged after the probe made the result (the forecast reads the batches, the probe's table and report the "
          "pooled entry), so a forecast from it would not be the probe's; FIX")
NOT_JSON_NUMBER = "is not a number of gradprobe's JSON encoding (a number, null, \"inf\" or \"-inf\"); FIX"


def _single() -> dict:
    return json.loads((ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json").read_text())


def _mc(raw: dict) -> dict:
    """The 'mc_value' entry, rewards[1]."""
    return raw["rewards"][1]


def _swap(values: list) -> None:
    values[0], values[1] = values[1], values[0]


#: case -> (public check, probe, edit, the whole refusal)
CASES = {
    "batches_emptied": ("probe_batches_of", pooled_shipped, lambda r: r.__setitem__("batches", []),
                        "probe.json field config.probe_batches is 2, but the result holds 0 batches (batches []; "
                        "gradprobe.probe.batches.combine_batches writes the list of its batch objects, which the "
                        f"forecast reads){RESULT}"),
    "rewards_not_list": ("probe_batches_of", _single, lambda r: r.__setitem__("rewards", 5),
                         "probe.json field rewards is 5, not a list of reward objects; FIX"),
    "tokens_true": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("tokens_per_update", True),
                    "probe.json field rewards[1].tokens_per_update is true (a boolean is never read as 1 or 0): it "
                    "must be a finite number >= 1 of generated tokens per update (the probe writes a whole number, "
                    "e.g. 4477); FIX"),
    "per_group_text": ("probe_batches_of", _single, lambda r: _mc(r)["per_group"].__setitem__(3, "abc"),
                       f"probe.json field rewards[1].per_group[3] is \"abc\": 'abc' {NOT_JSON_NUMBER}"),
    "per_group_not_list": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("per_group", 5),
                           "probe.json field rewards[1].per_group is 5: it must be a list of numbers; FIX"),
    "per_group_inf": ("probe_batches_of", _single, lambda r: _mc(r)["per_group"].__setitem__(2, "inf"),
                      "probe.json field rewards[1].per_group[2] is \"inf\": a group's alignment is a finite number "
                      "(the probe writes one per group); FIX"),
    "interval_text": ("probe_batches_of", _single, lambda r: _mc(r)["interval"].__setitem__(1, "x"),
                      f"probe.json field rewards[1].interval[1] is \"x\": 'x' {NOT_JSON_NUMBER}"),
    "num_groups": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("num_groups", 15),
                   "probe.json field rewards[1].num_groups (reward 'mc_value') is 15, but rewards[1]'s per-group "
                   "lists give 16, the groups its per_group holds (num_groups = len(per_group), as the probe writes "
                   f"it){RESULT}"),
    "proxy_short": ("probe_batches_of", _single, lambda r: _mc(r)["signal_proxy_per_group"].pop(),
                    "probe.json field rewards[1].signal_proxy_per_group (reward 'mc_value') is a list of 15 groups, "
                    "but rewards[1]'s per-group lists give 16, the groups its per_group holds (one "
                    f"signal_proxy_per_group value per group of per_group, as the probe writes it){RESULT}"),
    "gain_per_update": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("predicted_gain_per_update", 4.5),
                        "probe.json field rewards[1].predicted_gain_per_update (reward 'mc_value') is 4.5, but "
                        "rewards[1]'s per-group lists give 3.788653162406224 (predicted_gain_per_update = 100 x lr x "
                        f"sum(per_group), lr = 0.0001, as the probe writes it){RESULT}"),
    "gain_at_budget": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("predicted_gain_at_budget", 40.0),
                       "probe.json field rewards[1].predicted_gain_at_budget (reward 'mc_value') is 40.0, but "
                       "rewards[1]'s per-group lists, lr and tokens_per_update give 37.11454900476317 "
                       "(predicted_gain_at_budget = budget_tokens / tokens_per_update x predicted_gain_per_update, "
                       f"budget_tokens = 250000, as the probe writes it){RESULT}"),
    "signal_proxy": ("probe_batches_of", _single, lambda r: _mc(r).__setitem__("signal_proxy", 6.0),
                     "probe.json field rewards[1].signal_proxy (reward 'mc_value') is 6.0, but rewards[1]'s per-group "
                     "lists give 5.161055786520613 (signal_proxy = sum(signal_proxy_per_group) / (group x groups), "
                     f"group = 8, as the probe writes it){RESULT}"),
    "generated_text": ("check_entry_inputs", _single,
                       lambda r: _mc(r)["generated_tokens"].__setitem__("continuation", "x"),
                       "probe.json field rewards[1].generated_tokens.continuation is \"x\": it must be a count of "
                       "tokens >= 0 (the tokens the reward generated of that kind); FIX"),
    "pooled_probe_batches": ("pooled_entries", pooled_shipped, lambda r: _mc(r).__setitem__("probe_batches", 3),
                             "probe.json field rewards[1].probe_batches (reward 'mc_value') is 3, but its batches "
                             f"give 2 (probe_batches = N, the batches it pools{POOLED}"),
    "pooled_num_groups": ("pooled_entries", pooled_shipped,
                          lambda r: r["batches"][1]["rewards"][1]["per_group"].append(0.0),
                          "probe.json field rewards[1].num_groups (reward 'mc_value') is 32, but its batches give 33 "
                          "(num_groups = the sum of its batches' len(batches[k].rewards[1].per_group)" + POOLED),
    "pooled_per_group": ("pooled_entries", pooled_shipped, lambda r: _swap(_mc(r)["per_group"]),
                         "probe.json field rewards[1].per_group[0] (reward 'mc_value') is -0.4750467780084941, but "
                         "its batches give -27.505178190550026 (per_group = its batches' "
                         "batches[k].rewards[1].per_group one after another, each value divided by N = 2: here "
                         "batches[0].rewards[1].per_group[0] / 2" + POOLED),
    "pooled_proxy": ("pooled_entries", pooled_shipped, lambda r: _swap(_mc(r)["signal_proxy_per_group"]),
                     "probe.json field rewards[1].signal_proxy_per_group[0] (reward 'mc_value') is "
                     "1.3394630959861111, but its batches give 24.174417847821633 (signal_proxy_per_group = its "
                     "batches' batches[k].rewards[1].signal_proxy_per_group one after another, each value divided by "
                     "N = 2: here batches[0].rewards[1].signal_proxy_per_group[0] / 2" + POOLED),
    "pooled_list_length": ("pooled_entries", pooled_shipped,
                           lambda r: (_mc(r).pop("num_groups"), _mc(r)["per_group"].append(0.0),
                                      _mc(r)["signal_proxy_per_group"].append(0.0)),
                           "probe.json field rewards[1].per_group (reward 'mc_value') is a list of 33 values, but its "
                           "batches give 32 (per_group = its batches' batches[k].rewards[1].per_group one after "
                           "another, each value divided by N = 2" + POOLED),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_callers_fix_reaches_each_nested_refusal(case):
    """Each refusal of a result held in memory, given ``fix="FIX"`` and no ``source``, in full: the caller's fix and
    "the result ... made it" (a dropped ``fix`` gives the derived fix, e.g. "restore the file, or re-run ...", and
    "the file was edited or damaged after the probe wrote it")."""
    check, make, edit, expected = CASES[case]
    raw = make()
    edit(raw)
    with pytest.raises(ValueError) as info:
        getattr(probe_input, check)(raw, fix="FIX")
    assert str(info.value) == expected


def test_check_batches_names_the_callers_fix():
    """:func:`~gradprobe.forecast.probe_input.check_batches` of batches whose entry lacks ``tokens_per_update``."""
    batches = probe_input.probe_batches_of(_single())
    batches[0]["rewards"]["mc_value"].pop("tokens_per_update")
    with pytest.raises(ValueError) as info:
        probe_input.check_batches(batches, "outcome", fix="FIX")
    assert str(info.value) == ("probe.json field rewards[1].tokens_per_update is missing: probe entry 'mc_value' "
                               "lacks 'tokens_per_update', which the forecast reads (the probe writes it in every "
                               "entry); FIX")
