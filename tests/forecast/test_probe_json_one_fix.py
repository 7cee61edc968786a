"""An edited or damaged probe.json is refused with exactly one fix, the one its folder calls for, whoever reads it.

The checks derive the fix from the probe's folder (``gradprobe.forecast.probe_input.file_and_fix``,
``gradprobe.api.probe_result``), so no caller rewrites their text. Before, the checks said "restore the file, or
<rerun advice>" whatever the folder, and ``gradprobe.load_study`` rewrote that text by matching it:

- ``gradprobe.load_probe(STUDY/probe)`` of a study without ``runs/`` said "restore the file, or this is the probe of
  a study without run folders (...): restore FILE from a copy of the study" (two fixes, restore said twice);
- with ``runs/`` it said "restore the file, or this is a study's probe: delete FILE and resume ...";
- a study whose ``probe/arms.json`` was lost got "re-run `gradprobe probe --out STUDY/probe`" (which a study's probe
  folder refuses), and ``load_study`` appended the study's advice after it: two fixes that contradict each other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gradprobe

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "study_tiny"
GUIDED = ROOT / "data" / "study_tiny_guided"

# edit name -> (how it edits rewards[i], the field named, edited-or-damaged: restore is offered)
EDITS = {
    "per_group tripled": (lambda e: e.update(per_group=[3 * x for x in e["per_group"]]), "inner_product", True),
    "lr not config's": (lambda e: e.update(lr=2 * e["lr"]), "lr", True),
    "per_group overflows": (lambda e: e.update(per_group=[1e308] * len(e["per_group"])), "per_group", True),
    "tokens_per_update true": (lambda e: e.update(tokens_per_update=True), "tokens_per_update", False),
}


def _study(tmp_path: Path, source: Path = STUDY, runs: bool = False, arms: bool = True) -> Path:
    study = Path(shutil.copytree(source, tmp_path / source.name,
                                 ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz")))
    if runs:
        (study / "runs").mkdir()
    if not arms:
        (study / "probe" / "arms.json").unlink()
    return study


def _edit(file: Path, edit: str) -> str:
    """Apply ``edit`` to the last reward entry of ``file``; the place of the field the refusal names."""
    raw = json.loads(file.read_text())
    i = len(raw["rewards"]) - 1
    change, field, _ = EDITS[edit]
    change(raw["rewards"][i])
    file.write_text(json.dumps(raw))
    return f"rewards[{i}].{field}"


def _expected_fix(kind: str, file: Path, study: Path | None, edited: bool) -> str:
    """The one fix, written out (not read from gradprobe.layout)."""
    if kind == "probe":
        rerun = (f"re-run `gradprobe probe --out '{file.parent}'` (with the same settings) to write the probe's files "
                 "again")
        return f"restore the file, or {rerun}" if edited else rerun
    if kind == "study without runs":
        if edited:
            return (f"restore {file} from a copy of the study ({study} has no runs/: resuming the study to write its "
                    "probe again would train every run again)")
        return (f"this is the probe of a study without run folders ({study} has no runs/: resuming it would train "
                f"every run again): restore {file} from a copy of the study")
    resume = (f"delete {file} and resume the study with `gradprobe study '{study / 'plan.toml'}' --out '{study}'`, "
              "which re-runs the missing probe (finished runs are kept)")
    return f"restore the file, or {resume}" if edited else f"this is a study's probe: {resume}"


def _one_fix(message: str, fix: str, file: Path, field: str) -> None:
    assert "\n" not in message and message.startswith(f"{file} field {field}")
    assert message.endswith(f"; {fix}")
    for marker in ("restore", "re-run `gradprobe probe", "resume the study", "copy of the study"):
        assert message.count(marker) == fix.count(marker), (marker, message)  # nothing beside the one fix


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("kind, runs, arms", [("study without runs", False, True), ("study with runs", True, True),
                                              ("study with runs", True, False)],
                         ids=["no-runs", "runs", "runs-arms.json-lost"])
def test_a_studys_probe_gets_the_studys_one_fix_from_every_reader(tmp_path, edit, kind, runs, arms):
    study = _study(tmp_path, runs=runs, arms=arms)
    file = study / "probe" / "probe.json"
    field = _edit(file, edit)
    fix = _expected_fix(kind, file, study, EDITS[edit][2])
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(file.parent)
    _one_fix(str(info.value), fix, file, field)
    with pytest.raises(ValueError) as again:
        gradprobe.load_study(study)
    assert str(again.value) == str(info.value)  # passed on as it is: no caller rewrites it


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_probe_folder_gets_the_probes_one_fix(tmp_path, edit):
    folder = tmp_path / "p"
    folder.mkdir()
    file = folder / "probe.json"
    shutil.copyfile(STUDY / "probe" / "probe.json", file)
    field = _edit(file, edit)
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(folder)
    _one_fix(str(info.value), _expected_fix("probe", file, None, EDITS[edit][2]), file, field)


@pytest.mark.parametrize("runs", [False, True], ids=["no-runs", "runs"])
def test_a_guided_arms_probe_gets_its_studys_one_fix(tmp_path, runs):
    study = _study(tmp_path, GUIDED, runs=runs)
    file = study / "probe" / "guided" / "guided" / "probe.json"
    field = _edit(file, "per_group tripled")
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(file.parent)
    _one_fix(str(info.value), _expected_fix("study with runs" if runs else "study without runs", file, study, True),
             file, field)


@pytest.mark.parametrize("content, why", [("{\"rewards\": [", "is not valid JSON"),
                                          ("[1, 2]", "has no 'rewards' list")])
def test_a_damaged_study_probe_json_without_arms_json_gets_the_studys_fix(tmp_path, content, why):
    study = _study(tmp_path, runs=True, arms=False)
    file = study / "probe" / "probe.json"
    file.write_text(content)
    with pytest.raises(ValueError) as info:
        gradprobe.load_study(study)
    message = str(info.value)
    fix = _expected_fix("study with runs", file, study, False)
    assert message.startswith(f"{file} {why}") and message.endswith(f"; {fix}") and "\n" not in message
    assert "gradprobe probe --out" not in message and message.count("resume the study") == 1
