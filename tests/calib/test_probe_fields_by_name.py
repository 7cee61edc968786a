"""A reward entry lacking a field every entry holds is refused in both forms the forecast reads ``rewards`` in, and
in a probe result passed to calib as a dict.

Before:

- a multi-batch probe.json whose ``batches[1].rewards`` is an object mapping name -> entry (the forecast reads that
  form, ``gradprobe.forecast.probe_input.check_entries``), one entry without ``tokens_per_update``, was read by
  ``gradprobe.load_probe`` (``check_fields`` checked ``rewards`` lists only); only calib's own copy of the check
  (``calib.dataset._check_batch_entries_by_name``, now gone) refused it, for a study's probe;
- ``calib.apply_calibration`` with a dict whose entry lacked ``inner_product`` or ``predicted_gain_at_budget`` (which
  ``load_probe`` refuses in a file) calibrated it; one whose ``batches[1].rewards['mc_value']`` lacked
  ``tokens_per_update`` was refused as "a forecast the probe result does not have", the entry named
  ``batches[1].rewards[1]``, with the fix of a file.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest

import gradprobe
from calib.apply import apply_calibration
from calib.cli import main as calib_main
from calib.dataset import StudyFormatError, check_probe_numbers
from calib.probe_input import CalibrationApplyError
from gradprobe.api.probe_result import check_fields
from study_helpers import shipped_copy

ROOT = Path(__file__).resolve().parents[2]
TOKENS_WHY = "the forecasts need it (the generated tokens per update, which the token budget is divided by)"
DICT_FIX = "pass the probe's result as gradprobe.probe returned it, or its probe folder"


def _single() -> dict:
    return json.loads((ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json").read_text())


def _by_name() -> dict:
    """The two shipped single-batch probes pooled by combine_batches (a --probe-batches 2 probe.json), with
    ``batches[1].rewards`` as an object mapping name -> entry."""
    from gradprobe.probe.batches import combine_batches
    from gradprobe.probe.run import ProbeConfig

    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    raw = json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))
    assert [r["name"] for r in raw["batches"][1]["rewards"]] == ["outcome", "mc_value", "hybrid_0.5"]
    raw["batches"][1]["rewards"] = {r["name"]: r for r in raw["batches"][1]["rewards"]}
    return raw


def _save(folder: Path, raw: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.json").write_text(json.dumps(raw))
    return folder / "probe.json"


def _apply(raw: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # outside the default calibration's domain: beside the point here
        return apply_calibration("default", raw)


# --- 1: a batch's rewards as name -> entry ------------------------------------------------------------------------

def test_load_probe_refuses_a_batch_entry_by_name_without_tokens_per_update(tmp_path):
    raw = _by_name()
    assert gradprobe.load_probe(_save(tmp_path / "intact", raw).parent).raw["batches"][1]["rewards"]["mc_value"][
        "tokens_per_update"] == 27230  # the form itself is read
    del raw["batches"][1]["rewards"]["mc_value"]["tokens_per_update"]
    path = _save(tmp_path / "p", raw)
    with pytest.raises(ValueError) as e:  # was: read
        gradprobe.load_probe(path.parent)
    assert str(e.value) == (f"{path} field batches[1].rewards['mc_value'].tokens_per_update is missing: {TOKENS_WHY}; "
                            f"re-run `gradprobe probe --out '{path.parent}'` (with the same settings) to write the "
                            "probe's files again")


def test_a_null_per_group_of_a_batch_entry_by_name_is_named_as_null(tmp_path):
    raw = _by_name()
    raw["batches"][1]["rewards"]["hybrid_0.5"]["per_group"] = None
    path = _save(tmp_path / "p", raw)
    with pytest.raises(ValueError) as e:  # was: read
        gradprobe.load_probe(path.parent)
    assert str(e.value) == (f"{path} field batches[1].rewards['hybrid_0.5'].per_group is null: the forecasts need it "
                            "(the per-group alignments the entry's efficiency is measured from); re-run `gradprobe "
                            f"probe --out '{path.parent}'` (with the same settings) to write the probe's files again")


def test_calib_rows_refuses_a_studys_probe_with_load_probes_text(tmp_path, capsys):
    study = shipped_copy("study_tiny_heldout4k", tmp_path / "study")
    raw = _by_name()
    del raw["batches"][1]["rewards"]["mc_value"]["tokens_per_update"]
    path = _save(study / "probe", raw)
    with pytest.raises(ValueError) as e:
        gradprobe.load_probe(path.parent)
    want = str(e.value)
    assert want == (f"{path} field batches[1].rewards['mc_value'].tokens_per_update is missing: {TOKENS_WHY}; this is "
                    f"the probe of a study without run folders ({study} has no runs/: resuming it would train every "
                    f"run again): restore {path} from a copy of the study")
    with pytest.raises(StudyFormatError) as e:
        check_probe_numbers(study)
    assert str(e.value) == want
    assert calib_main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 2
    assert capsys.readouterr().err == f"calib rows: error: {want}\n"
    assert not (tmp_path / "rows.csv").exists()


def test_check_fields_reads_top_level_rewards_by_name():
    raw = _single()  # (load_probe refuses a top-level rewards that is no list before: read_probe_json)
    raw["rewards"] = {r["name"]: r for r in raw["rewards"]}
    check_fields(raw, Path("probe.json"), fix="FIX")  # intact: passes
    del raw["rewards"]["mc_value"]["predicted_gain_at_budget"]
    with pytest.raises(ValueError) as e:  # was: passed over
        check_fields(raw, Path("probe.json"), fix="FIX")
    assert str(e.value) == ("probe.json field rewards['mc_value'].predicted_gain_at_budget is missing: the table "
                            "needs it (its gain_at_budget column); FIX")


# --- 2: a probe result passed to calib as a dict ------------------------------------------------------------------

@pytest.mark.parametrize("key, state, why", [
    ("inner_product", "missing", "the table needs it (its inner_product column)"),
    ("predicted_gain_at_budget", "missing", "the table needs it (its gain_at_budget column)"),
    ("inner_product", "null", "the table needs it (its inner_product column)")],
    ids=["inner-product-missing", "gain-at-budget-missing", "inner-product-null"])
def test_apply_calibration_refuses_a_dict_lacking_a_field_every_entry_holds(key, state, why):
    raw = _single()
    assert list(_apply(copy.deepcopy(raw)).index) == ["outcome", "mc_value", "hybrid_0.5"]  # intact: calibrated
    if state == "null":
        raw["rewards"][1][key] = None
    else:
        del raw["rewards"][1][key]
    with pytest.raises(CalibrationApplyError) as e:  # was: calibrated
        _apply(raw)
    assert str(e.value) == f"probe.json field rewards[1].{key} is {state}: {why}; {DICT_FIX}"
    with pytest.raises(CalibrationApplyError) as e:  # a ProbeResult without a file: the same
        _apply(gradprobe.ProbeResult(raw))
    assert str(e.value) == f"probe.json field rewards[1].{key} is {state}: {why}; {DICT_FIX}"


def test_apply_calibration_refuses_a_dicts_batch_entry_by_name_lacking_tokens_per_update():
    raw = _by_name()
    del raw["batches"][1]["rewards"]["mc_value"]["tokens_per_update"]
    with pytest.raises(CalibrationApplyError) as e:  # was: "this calibration corrects 'forecast_cost_only', a
        _apply(raw)                                      # forecast the probe result does not have: ..."
    assert str(e.value) == (f"probe.json field batches[1].rewards['mc_value'].tokens_per_update is missing: "
                            f"{TOKENS_WHY}; {DICT_FIX}")


# --- 3: a dict's records refused with the fix of a dict, not of a file ----------------------------------------------

EDITED = "the result was edited or damaged after the probe made it, so a forecast from it would not be the probe's"
FILE_EDITED = "the file was edited or damaged after the probe wrote it, so a forecast from it would not be the probe's"


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw["config"].__setitem__("lr", 2e-4),
     "probe.json field rewards[0].lr (reward 'outcome') is 0.0001, but config.lr is 0.0002 (the probe writes its lr "
     f"into config and into every entry, as estimate_rewards records it): {EDITED}; {DICT_FIX}"),
    (lambda raw: raw["batch"].__setitem__("generated_tokens", True),
     "probe.json field batch.generated_tokens is true: it must be a count of tokens >= 0 (the probe batch's generated "
     f"tokens); {DICT_FIX}"),
    (lambda raw: raw["rewards"][1].__setitem__("tokens_per_update", raw["rewards"][1]["tokens_per_update"] + 1),
     "probe.json field rewards[1].tokens_per_update (reward 'mc_value') is 25521, but batch.generated_tokens and "
     "rewards[1].generated_tokens give 25520 (tokens_per_update = round((batch.generated_tokens + its "
     "generated_tokens of the kinds training charges: rollout, continuation, selection) x s) = round((4477 + 21043 "
     "continuation) x 1.0), s = config's (update_prompts or prompts) x (update_group or group) / (prompts x group): "
     f"gradprobe.probe.result.per_update_costs, as the probe writes it): {EDITED}; {DICT_FIX}")],
    ids=["entry-lr-vs-config", "batch-tokens-true", "tokens-per-update"])
def test_apply_calibration_refuses_a_dicts_records_with_the_fix_of_a_dict(edit, message, tmp_path):
    """Before: the same refusal ended with the fix of a file ("restore the file, or re-run the probe ..." or "re-run
    the probe ..."), though no file was read; a probe.json with the same edit keeps its folder's fix."""
    from calib.probe_input import check_probe_records
    from gradprobe.forecast.probe_input import file_and_fix

    raw = _single()
    edit(raw)
    with pytest.raises(CalibrationApplyError) as e:
        _apply(raw)
    assert str(e.value) == message
    path = _save(tmp_path / "probe", raw)
    with pytest.raises(CalibrationApplyError) as e:  # a file: its own fix, as gradprobe gives it
        check_probe_records(raw, str(path))
    edited = EDITED in message
    assert str(e.value) == message.replace("probe.json", str(path), 1).replace(DICT_FIX, file_and_fix(path, edited)[1]
                                                                                ).replace(EDITED, FILE_EDITED)


def test_apply_calibration_refuses_a_dicts_pooled_entry_with_the_fix_of_a_dict():
    """A multi-batch dict whose pooled entry its batches contradict (calib.probe_input.check_probe_entries). Before:
    "...; restore the file, or re-run the probe (`gradprobe probe --out DIR`); ..."."""
    raw = _by_name()
    raw["rewards"][1]["inner_product"] *= 3
    with pytest.raises(CalibrationApplyError) as e:
        _apply(raw)
    assert str(e.value) == ("probe.json field rewards[1].inner_product (reward 'mc_value') is 1396.7581619606897, but "
                            "rewards[1]'s per-group lists give 465.58605398689656 (inner_product = sum(per_group), as "
                            f"the probe writes it): {EDITED}; {DICT_FIX}")
