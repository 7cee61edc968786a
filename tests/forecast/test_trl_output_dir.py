"""A TRL ``output_dir`` (its ``checkpoint-N/`` folders, each with a ``trainer_state.json``) names a reference curve.

Only a checkpoint folder (or the file) was read; the output_dir TRL writes, the folder a user has at hand, was
refused as holding no ``trainer_state.json``. The last checkpoint's (the highest N, compared as a number, as
``transformers.trainer_utils.get_last_checkpoint`` picks it) holds the run's whole history, so it is read, and
the curve's notes say which file was. A folder with no trainer state anywhere keeps its refusal.
"""

from __future__ import annotations

import json

import pytest

from forecast_helpers import EVALS, trl_state
from gradprobe.forecast.csv_cells import is_skipped_note
from gradprobe.forecast.curve_sources import TRL_STATE, last_checkpoint_state, trl_state_path
from gradprobe.forecast.curves import CurveError, ReferenceCurve


def _output_dir(root, checkpoints: dict):
    """``root`` holding ``checkpoint-N`` folders: N -> the eval steps of its trainer state (None: no state)."""
    root.mkdir()
    for n, steps in checkpoints.items():
        folder = root / f"checkpoint-{n}"
        folder.mkdir()
        if steps is not None:
            trl_state(folder / TRL_STATE, steps)
    return root


def test_the_last_checkpoint_of_an_output_dir_is_read_and_named_in_the_notes(tmp_path):
    # checkpoint-99 sorts after checkpoint-160 as text; its steps stop at 80, the run's whole history is 160's
    out = _output_dir(tmp_path / "out", {99: EVALS[:-1], 160: EVALS, 20: EVALS[:5]})
    curve = ReferenceCurve.from_trl_state(out)
    assert sorted(curve.points["update"]) == list(EVALS)
    state = out / "checkpoint-160" / TRL_STATE
    assert curve.notes[0] == (f"{out} is a TRL output_dir: read {state}, the trainer state of its last checkpoint "
                              "(checkpoint-160, of 3 checkpoint folders), whose log_history holds the run's history "
                              "up to that step")
    assert curve.source == f"TRL trainer_state.json of 1 run(s) ({state})"
    # the same points as the checkpoint folder and the file themselves, which get no such note
    for given in (out / "checkpoint-160", state):
        same = ReferenceCurve.from_trl_state(given)
        assert same.points.equals(curve.points) and not any("output_dir" in n for n in same.notes)
    assert not is_skipped_note(curve.notes[0])  # nothing is missing: kept in the curve's notes, not printed


def test_a_last_checkpoint_without_a_trainer_state_is_passed_over_and_said(tmp_path):
    out = _output_dir(tmp_path / "out", {80: EVALS[:-1], 160: None})
    curve = ReferenceCurve.from_trl_state(out)
    assert max(curve.points["update"]) == 80
    assert curve.notes[0] == (f"{out} is a TRL output_dir whose last checkpoint checkpoint-160 holds no "
                              f"trainer_state.json (a save cut short?): {out / 'checkpoint-80' / TRL_STATE}, the last "
                              "checkpoint that holds one (of 2 checkpoint folders), was read, but evals logged after "
                              "its step 80 are not in it")
    assert is_skipped_note(curve.notes[0])  # a caution: the forecast prints it


def test_several_passed_over_checkpoints_are_named_latest_first(tmp_path):
    out = _output_dir(tmp_path / "out", {80: EVALS[:-1], 160: None, 200: None})
    caution = ReferenceCurve.from_trl_state(out).notes[0]
    assert caution.startswith(f"{out} is a TRL output_dir whose last checkpoints checkpoint-200, checkpoint-160 hold "
                              "no trainer_state.json (a save cut short?): ")
    assert caution.endswith("(of 3 checkpoint folders), was read, but evals logged after its step 80 are not in it")


def test_an_output_dir_with_its_own_trainer_state_reads_that_one(tmp_path):
    out = _output_dir(tmp_path / "out", {80: EVALS[:-1]})
    trl_state(out / TRL_STATE, EVALS)  # trainer.save_state() at the end of training
    assert trl_state_path(out) == (out / TRL_STATE, None)
    assert max(ReferenceCurve.from_trl_state(out).points["update"]) == 160


def test_a_folder_with_no_trainer_state_anywhere_keeps_its_refusal(tmp_path):
    out = _output_dir(tmp_path / "out", {5: None})
    (out / "checkpoint-final").mkdir()
    trl_state(out / "checkpoint-final" / TRL_STATE, EVALS)
    assert last_checkpoint_state(out) == (None, None)  # checkpoint-final is no checkpoint-N folder
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_trl_state(out)
    assert str(info.value) == (f"{out / TRL_STATE} not found; pass a TRL trainer_state.json (or the checkpoint "
                               "folder, or the output_dir holding checkpoint-N folders)")
    assert last_checkpoint_state(tmp_path / "missing") == (None, None)


def test_an_output_dir_and_its_checkpoint_are_one_run_not_two_seeds(tmp_path):
    out = _output_dir(tmp_path / "out", {160: EVALS})
    with pytest.raises(CurveError, match=r"trainer_state.json .* is given twice"):
        ReferenceCurve.from_trl_state([out, out / "checkpoint-160"])


def test_the_last_checkpoint_is_the_one_transformers_picks(tmp_path):
    from transformers.trainer_utils import get_last_checkpoint

    out = _output_dir(tmp_path / "out", {9: EVALS, 10: EVALS, 100: EVALS, 1000: EVALS})
    (out / "checkpoint-5000.bak").mkdir()
    (out / "checkpoint-x").mkdir()
    (out / "checkpoint-9999").write_text("a file, not a folder")
    state, _ = last_checkpoint_state(out)
    assert state.parent.name == "checkpoint-1000" and str(state.parent) == get_last_checkpoint(str(out))


def test_reference_curve_reads_a_trl_output_dir_through_the_command_line_reader(tmp_path):
    """--reference-curve OUTPUT_DIR (checkpoint-N folders inside) reads the last checkpoint's trainer state, as the
    checkpoint folder itself would be read; it was refused as a folder without a trainer_state.json."""
    from gradprobe.forecast.curves import _read_spec

    out = tmp_path / "out"
    for step in (20, 60):
        ck = out / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        history = [{"step": s, "eval_accuracy": 0.4 + 0.005 * s} for s in range(0, step + 1, 10)]
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": history}))
    whole, _ = _read_spec(str(out / "checkpoint-60"), None, "eval_accuracy", None, None)
    curve, trl = _read_spec(str(out), None, "eval_accuracy", None, None)
    assert trl is True and list(curve.points["update"]) == list(whole.points["update"]) == [0, 10, 20, 30, 40, 50, 60]
    assert any("checkpoint-60" in n for n in curve.notes)
