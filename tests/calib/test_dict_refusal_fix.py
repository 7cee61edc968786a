"""A probe result passed to calib as a dict is refused with the fix of a dict, by every check, in words that fit it.

Before, calib turned gradprobe's refusal of a dict into its own by text matching (``_refusal``): a message ending in
gradprobe's generic fix had it swapped for :data:`calib.probe_input.DICT_FIX`, so any rewording broke it silently, and
messages ending otherwise kept a fix that tells a dict's user to re-run the probe or restore a file they never had.
Each edited dict was also said to be "the file was edited or damaged after the probe wrote it". Now gradprobe's checks
take the fix from the caller (``fix=``: :func:`gradprobe.forecast.probe_input.probe_batches_of`,
:func:`~gradprobe.forecast.probe_input.check_entry_inputs`, :func:`gradprobe.forecast.forecast_section`), and a
refusal of a result held in memory says the result, not a file, was edited. A file's messages are unchanged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import calib
from calib.probe_input import DICT_FIX, CalibrationApplyError
from gradprobe.forecast import forecast_section
from gradprobe.forecast.probe_input import check_entry_inputs, file_and_fix, probe_batches_of
from gradprobe.layout import restore_advice
from gradprobe.outputs import json_safe
from gradprobe.probe.batches import combine_batches
from gradprobe.probe.run import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
#: the shipped probes record the task by name only, outside the default calibration's domain: said, not tested here
pytestmark = pytest.mark.filterwarnings("ignore::calib.domain.CalibrationDomainWarning")
DELETE = "only when the entries are intact, delete its 'forecast' field (calib then computes the forecast from the " \
         "batches)"
#: advice about a file, which a dict's user has none of
FILE_WORDS = ("re-run", "restore", "the file", "wrote it", "--out")
RESULT_EDITED = "the result was edited or damaged after the probe made it"
FILE_EDITED = "the file was edited or damaged after the probe wrote it"


def _single() -> dict:
    return json.loads((ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json").read_text())


def _pooled() -> dict:
    """Two shipped single-batch probes pooled by the probe's own combine_batches (a --probe-batches 2 probe.json)."""
    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    return json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))


@pytest.fixture(scope="module")
def sectioned() -> dict:
    """The shipped single-batch probe with the forecast section gradprobe probe writes (shipped curve)."""
    raw = _single()
    raw["forecast"] = json_safe(forecast_section(raw))
    return json.loads(json.dumps(raw))


def _add(entry: dict, key: str, by: float) -> None:
    entry[key] += by


#: damage -> (which probe, the edit, the field the refusal names); each kind of check calib runs on a dict
DAMAGE = {
    "missing_budget": ("single", lambda r: r["config"].pop("budget_tokens"), "config.budget_tokens"),
    "tokens_per_update": ("single", lambda r: _add(r["rewards"][1], "tokens_per_update", 1),
                          "rewards[1].tokens_per_update"),
    "entry_lr": ("single", lambda r: r["config"].__setitem__("lr", 2e-4), "rewards[0].lr"),
    "summary": ("single", lambda r: _add(r["rewards"][1], "inner_product", 100.0), "rewards[1].inner_product"),
    "name_twice": ("single", lambda r: r["rewards"][2].__setitem__("name", "mc_value"), "rewards[2].name"),
    "overflow": ("single", lambda r: r["rewards"][1].__setitem__("per_group", [1e308] * 16), "rewards[1].per_group"),
    "pooled_entry": ("pooled", lambda r: _add(r["rewards"][1], "tokens_per_update", 7), "rewards[1].tokens_per_update"),
    "batch_entry": ("pooled", lambda r: _add(r["batches"][1]["rewards"][1], "inner_product", 100.0),
                    "batches[1].rewards[1].inner_product"),
    "batches_emptied": ("pooled", lambda r: r.__setitem__("batches", []), "config.probe_batches"),
    "batch_not_object": ("pooled", lambda r: r["batches"].__setitem__(1, 5), "batches[1]"),
    "batch_added": ("pooled", lambda r: r["config"].__setitem__("probe_batches", 3), "config.probe_batches"),
    "batch_lacks_reward": ("pooled", lambda r: r["batches"][1]["rewards"].pop(2), "rewards[2]"),
    "section_shape": ("sectioned", lambda r: r.__setitem__("forecast", []), "forecast"),
    "section_gain_edited": ("sectioned", lambda r: _add(r["forecast"]["rows"][1], "gain_cost_only", 1.0),
                            "forecast.rows[1].gain_cost_only"),
    "section_gain_not_number": ("sectioned", lambda r: r["forecast"]["rows"][1].__setitem__("gain_cost_only", True),
                                "forecast.rows[1].gain_cost_only"),
}


def _refusal(probe) -> str:
    with pytest.raises(CalibrationApplyError) as info:
        calib.apply("default", probe)
    return str(info.value)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_dict_names_the_field_and_the_fix_of_a_dict(kind, sectioned):
    """Before: "the file was edited or damaged after the probe wrote it" (every edit), "restore the file, or re-run
    `gradprobe probe`" (a section), "re-run `gradprobe probe`" (a budget, a section's gain): a file the user of a dict
    never had."""
    which, edit, field = DAMAGE[kind]
    raw = {"single": _single, "pooled": _pooled, "sectioned": lambda: copy.deepcopy(sectioned)}[which]()
    edit(raw)
    message = _refusal(raw)
    assert message.startswith(f"probe.json field {field} ") and "\n" not in message
    assert message.endswith(f"; {DICT_FIX}; {DELETE}" if which == "sectioned" and kind != "section_gain_not_number"
                            else f"; {DICT_FIX}")
    assert not [w for w in FILE_WORDS if w in message], message
    assert message.count(DICT_FIX) == 1


def test_a_dicts_refusals_in_full():
    """Two refusals of a dict pinned whole: an edited token count (the result, not the file, was edited) and a
    section of another shape (the dict's fix, not "restore the file, or re-run `gradprobe probe`")."""
    raw = _single()
    raw["rewards"][1]["tokens_per_update"] += 1
    assert _refusal(raw) == (
        "probe.json field rewards[1].tokens_per_update (reward 'mc_value') is 25521, but batch.generated_tokens and "
        "rewards[1].generated_tokens give 25520 (tokens_per_update = round((batch.generated_tokens + its "
        "generated_tokens of the kinds training charges: rollout, continuation, selection) x s) = round((4477 + 21043 "
        "continuation) x 1.0), s = config's (update_prompts or prompts) x (update_group or group) / (prompts x group): "
        "gradprobe.probe.result.per_update_costs, as the probe writes it): the result was edited or damaged after the "
        f"probe made it, so a forecast from it would not be the probe's; {DICT_FIX}")
    raw = _single()
    raw["forecast"] = []
    assert _refusal(raw) == ("probe.json field forecast is [], not an object (the forecast section gradprobe probe "
                             f"writes); {DICT_FIX}; {DELETE}")


def test_a_file_keeps_its_words_and_its_folders_fix(tmp_path):
    """The same damage in a probe.json: the file's messages as before (pinned), which the dict's differ from only in
    the file named, what was edited and the fix."""
    raw = _pooled()
    raw["batches"][1]["rewards"][1]["inner_product"] += 100.0
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "probe.json").write_text(json.dumps(raw))
    from_file = _refusal(folder)
    assert from_file == (  # the fix: the folder's (gradprobe.layout's words, not pinned here)
        f"{folder / 'probe.json'} field batches[1].rewards[1].inner_product (reward 'mc_value') is 652.3067917331707, "
        "but batches[1].rewards[1]'s per-group lists give 552.3067917331707 (inner_product = sum(per_group), as the "
        "probe writes it): the file was edited or damaged after the probe wrote it, so a forecast from it would not be "
        f"the probe's; {restore_advice(folder)}")
    from_dict = _refusal(copy.deepcopy(raw))
    assert from_dict == (from_file.replace(str(folder / "probe.json"), "probe.json", 1)
                         .replace(FILE_EDITED, RESULT_EDITED)[:-len(restore_advice(folder))] + DICT_FIX)
    raw = _pooled()
    raw["config"]["probe_batches"] = 3
    (folder / "probe.json").write_text(json.dumps(raw))
    assert _refusal(folder) == (
        f"{folder / 'probe.json'} field config.probe_batches is 3, but the file holds 2 batch(es) (its batches list; "
        "gradprobe.probe.batches.combine_batches records probe_batches = the batches it pools): a batch was added or "
        f"removed after the probe wrote the file, so a forecast from it would not be the probe's; "
        f"{restore_advice(folder)}")
    assert _refusal(copy.deepcopy(raw)) == (
        "probe.json field config.probe_batches is 3, but the result holds 2 batch(es) (its batches list; "
        "gradprobe.probe.batches.combine_batches records probe_batches = the batches it pools): a batch was added or "
        f"removed after the probe made the result, so a forecast from it would not be the probe's; {DICT_FIX}")


def test_gradprobes_checks_name_the_callers_fix():
    """``fix=`` of gradprobe's checks: the caller's fix ends every refusal (was: no such keyword; calib matched the
    text); without ``source`` the refusal speaks of the result; with one, of its file, as before."""
    raw = _single()
    raw["rewards"][1]["inner_product"] += 100.0
    for check in (probe_batches_of, check_entry_inputs):
        with pytest.raises(ValueError) as info:
            check(raw, fix="FIX")
        assert str(info.value).endswith(f": {RESULT_EDITED}, so a forecast from it would not be the probe's; FIX")
        with pytest.raises(ValueError) as info:
            check(raw, source=Path("x") / "probe.json", fix="FIX")
        assert str(info.value).startswith(f"{Path('x') / 'probe.json'} field rewards[1].inner_product ")
        assert str(info.value).endswith(f": {FILE_EDITED}, so a forecast from it would not be the probe's; FIX")
        with pytest.raises(ValueError) as info:  # no fix: as before
            check(raw)
        assert str(info.value).endswith(f": {FILE_EDITED}, so a forecast from it would not be the probe's; "
                                        f"{file_and_fix(None, edited=True)[1]}")
    with pytest.raises(ValueError, match=f"{RESULT_EDITED}, so a forecast from it would not be the probe's; FIX$"):
        forecast_section(raw, fix="FIX")
    assert file_and_fix(Path("x") / "probe.json", edited=True, fix="FIX") == (str(Path("x") / "probe.json"), "FIX")
