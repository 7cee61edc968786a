"""A study's probe keeps the study's one fix, and a study's forecasts refuse what load_probe refuses:

1. a study that lost ``probe/arms.json`` is still the study's: its guided probe's fix is the study's, and
   ``gradprobe probe --out`` refuses ``STUDY/probe`` and ``STUDY/probe/guided/ARM`` (it overwrote them);
2. a guided probe that is there but damaged or edited is refused by ``study_forecasts`` in one line (it quietly read
   the unguided entry: forecast 0.136 -> 0.0, method "probe"); a missing one still falls back with a note;
3. an edited ``tokens_per_update`` is named as ``load_probe`` names it (not ``predicted_gain_at_budget``);
4. a missing or damaged ``arms.json`` of a study without ``runs/`` is restored from a copy (resuming, the old fix,
   would train every run again); with ``runs/``, resuming the study writes it again;
5. ``load_probe`` of a study's probe whose ``probe.json`` was deleted names the study's fix, not ``--out``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeFileError
from gradprobe.forecast.study import study_forecasts
from gradprobe.outputs import OutputDirError

ROOT = Path(__file__).resolve().parents[2]
NO_RUNS = "({study} has no runs/: resuming it would train every run again): restore {file} from a copy of the study"


def _copy(tmp_path, name: str) -> Path:
    return shutil.copytree(ROOT / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures", "*.gz"))


def _edit_tokens(file: Path) -> None:
    doc = json.loads(file.read_text())
    doc["rewards"][0]["tokens_per_update"] = 1
    file.write_text(json.dumps(doc))


def _refusal(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def test_a_study_without_arms_json_keeps_its_guided_probe_and_refuses_probe_out(tmp_path):
    from gradprobe.probe.output import replacing_earlier_probe

    study = _copy(tmp_path, "study_tiny_guided")
    (study / "probe" / "arms.json").unlink()
    guided = study / "probe" / "guided" / "guided"
    _edit_tokens(guided / "probe.json")
    message = _refusal(lambda: gradprobe.load_probe(guided))
    assert "\n" not in message and message.endswith(
        f"restore {guided / 'probe.json'} from a copy of the study ({study} has no runs/: resuming the study to "
        "write its probe again would train every run again)")
    for folder in (study / "probe", guided):
        with pytest.raises(OutputDirError) as info:
            with replacing_earlier_probe(folder):
                pass
        assert str(info.value) == (  # no runs/: not "resume the study" (it would train every run again)
            f"--out {str(folder)!r} is a study's probe folder (the probe/ of study {study}, whose arms.json is "
            f"missing) of a study without run folders ({study} has no runs/: resuming it to write its probe again "
            "would train every run again): leave it as it is and choose another --out (an empty folder, or an "
            "earlier probe's)")
    assert json.loads((guided / "probe.json").read_text())["rewards"][0]["tokens_per_update"] == 1  # untouched


@pytest.mark.parametrize("damage", ["tokens_per_update", "latin1", "truncated", "null item"])
def test_a_damaged_guided_probe_is_refused_as_load_probe_refuses_it(tmp_path, damage):
    study = _copy(tmp_path, "study_tiny_guided")
    file = study / "probe" / "guided" / "guided" / "probe.json"
    assert study_forecasts(study).set_index("arm").loc["guided", "forecast_probe"] == pytest.approx(0.136, abs=5e-4)
    if damage == "tokens_per_update":
        _edit_tokens(file)
    elif damage == "latin1":
        file.write_bytes('{"rewards": [], "note": "caf\xe9"}'.encode("latin-1"))
    elif damage == "truncated":
        file.write_bytes(file.read_bytes()[:100])
    else:
        doc = json.loads(file.read_text())
        doc["rewards"][0] = None
        file.write_text(json.dumps(doc))
    message = _refusal(lambda: study_forecasts(study))
    assert message == _refusal(lambda: gradprobe.load_probe(file.parent))  # one line, one fix: load_probe's
    assert "\n" not in message and message.startswith(str(file))
    assert message.endswith(NO_RUNS.format(study=study, file=file)) or message.endswith(
        f"restore {file} from a copy of the study ({study} has no runs/: resuming the study to write its probe again "
        "would train every run again)")
    if damage == "tokens_per_update":
        assert message.startswith(f"{file} field rewards[0].tokens_per_update (reward 'outcome') is 1, but ")
    if damage == "null item":
        assert message == (f"{file} field rewards[0] is null, not an object; this is the probe of a study without "
                           f"run folders " + NO_RUNS.format(study=study, file=file))


def test_a_missing_guided_probe_still_falls_back_with_a_note(tmp_path):
    study = _copy(tmp_path, "study_tiny_guided")
    (study / "probe" / "guided" / "guided" / "probe.json").unlink()
    row = study_forecasts(study).set_index("arm").loc["guided"]
    assert row["probe_entry"] == "outcome" and row["method"] == "probe"
    assert "(its guided probe guided/guided/probe.json is missing)" in row["note"]


def test_an_edited_tokens_per_update_is_named_as_load_probe_names_it(tmp_path):
    study = _copy(tmp_path, "study_tiny")
    file = study / "probe" / "probe.json"
    _edit_tokens(file)
    message = _refusal(lambda: study_forecasts(study))
    assert message == _refusal(lambda: gradprobe.load_probe(file.parent))
    assert message.startswith(f"{file} field rewards[0].tokens_per_update (reward 'outcome') is 1, but "
                              "batch.generated_tokens and rewards[0].generated_tokens give 4477 (")
    assert "predicted_gain_at_budget" not in message and "\n" not in message


@pytest.mark.parametrize("runs", [False, True], ids=["no-runs", "runs"])
def test_a_missing_or_damaged_arms_json_gets_the_fix_of_its_study(tmp_path, runs):
    study = _copy(tmp_path, "study_tiny")
    if runs:
        (study / "runs").mkdir()
    file = study / "probe" / "arms.json"
    fix = (f"resume the study with `gradprobe study '{study}/plan.toml' --out '{study}'`, which writes it again "
           "(finished runs and a finished probe are kept)" if runs else
           f"restore it from a copy of the study ({study} has no runs/: resuming the study to write it again would "
           "train every run again)")
    file.unlink()
    with pytest.raises(FileNotFoundError) as info:
        study_forecasts(study)
    assert str(info.value) == f"{file} is missing; {fix}"
    file.write_text("{")
    assert _refusal(lambda: study_forecasts(study)) == (
        f"{file} is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); "
        + fix)


@pytest.mark.parametrize("runs", [False, True], ids=["no-runs", "runs"])
@pytest.mark.parametrize("arms", [True, False], ids=["arms", "no-arms"])
def test_load_probe_of_a_study_probe_whose_probe_json_was_deleted_names_the_studys_fix(tmp_path, runs, arms):
    study = _copy(tmp_path, "study_tiny_guided")
    if runs:
        (study / "runs").mkdir()
    if not arms:
        (study / "probe" / "arms.json").unlink()
    for folder in (study / "probe", study / "probe" / "guided" / "guided"):
        file = folder / "probe.json"
        file.unlink()
        with pytest.raises(ProbeFileError) as info:
            gradprobe.load_probe(folder)
        fix = (f"this is a study's probe: resume the study with `gradprobe study '{study}/plan.toml' --out '{study}'`, "
               "which re-runs the missing probe (finished runs are kept)" if runs else
               "this is the probe of a study without run folders " + NO_RUNS.format(study=study, file=file))
        assert str(info.value) == f"{file} not found; {fix}"
