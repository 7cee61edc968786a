"""The front door's arguments given as the objects the README builds, or a path, or a file of another kind.

- ``load_policy`` (and ``load_tokenizer``, ``pretrained_source``) take a ``pathlib.Path`` (``os.fspath``) and refuse
  any other type, a loaded Policy included, with a TypeError naming the model and the spec to pass;
- ``probe`` and ``rank_prompts`` refuse a loaded Policy or Task in one short TypeError naming the argument, the
  type (never the object's repr, a module dump) and the spec to pass (``model='tiny'``, ``task='chain_sum'``);
- ``load_probe`` (and ``calib apply``, which reads through it) says what a file that is no probe.json is
  (``calibrated.json``, other JSON, an empty file) and what to pass instead, not "re-run the probe";
- ``calib.load('')`` is refused as empty, not as the current folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import calib
import gradprobe
from calib.cli import main as calib_main
from gradprobe.models import Policy, load_tokenizer, pretrained_source
from gradprobe.tiers import tier_path

REPO = Path(__file__).resolve().parents[1]
STUDY_PROBE = REPO / "data" / "study_tiny" / "probe" / "probe.json"

POLICY_REFUSAL = ("model must be a model name or path (str or os.PathLike), got a Policy (a loaded model, which is "
                  "not taken): pass the model it was loaded from, model='tiny'")
TASK_REFUSAL = ("task must be a string (a task spec), got a ReasoningGymTask (a loaded task, which is not taken): "
                "pass the spec it was loaded from, e.g. task='chain_sum' (with its options, if it was loaded with "
                "some: 'chain_sum:min_terms=2')")


def _policy(name="tiny") -> Policy:
    """A Policy as load_policy records it (no model needed: every refusal comes before any use of it)."""
    return Policy(model=None, tokenizer=None, name=name, eos_token_ids=[0])


# ----------------------------------------------------------------------------- 1: a Path to a model folder


def test_load_policy_loads_a_path_to_a_tier_folder_as_its_text():
    folder = tier_path("tiny")
    policy = gradprobe.load_policy(Path(folder))  # was AttributeError: 'PosixPath' object has no attribute 'endswith'
    assert policy.name == str(folder)
    reference = gradprobe.load_policy(str(folder))
    assert sum(p.numel() for p in policy.model.parameters()) == sum(p.numel() for p in reference.model.parameters())
    assert policy.eos_token_ids == reference.eos_token_ids


def test_load_tokenizer_and_pretrained_source_take_a_path():
    folder = tier_path("tiny")
    assert pretrained_source(Path(folder), weights=False) == (str(folder), {"use_safetensors": True})
    assert load_tokenizer(Path(folder)).get_vocab() == load_tokenizer(str(folder)).get_vocab()


@pytest.mark.parametrize("spec, shown", [(3, "3 (int)"), (None, "None (NoneType)"), (b"tiny", "b'tiny' (bytes)")])
def test_load_policy_refuses_a_spec_that_is_no_text_or_path(spec, shown):
    with pytest.raises(TypeError) as e:
        gradprobe.load_policy(spec)
    assert str(e.value) == ("model (load_policy's spec) must be a model name or path (str or os.PathLike: an alias "
                            f"such as 'tiny', a folder, a .gguf file or a hub id), got {shown}")


def test_load_policy_refuses_a_loaded_policy_naming_the_spec_it_was_loaded_from():
    with pytest.raises(TypeError) as e:
        gradprobe.load_policy(_policy("tiny-qwen2"))
    assert str(e.value) == ("model (load_policy's spec) must be a model name or path (str or os.PathLike), got a "
                            "Policy (a loaded model, which is not taken): pass the model it was loaded from, "
                            "'tiny-qwen2'")


def test_model_spec_cuts_a_long_repr_short():
    from gradprobe.models import model_spec

    with pytest.raises(TypeError) as e:
        model_spec(list(range(100)))
    assert str(e.value).endswith(", got [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16... (list)")


# ----------------------------------------------------------------------------- 2: objects where specs are taken


def test_probe_refuses_a_loaded_policy_in_short_naming_the_model_to_pass(tmp_path):
    out = tmp_path / "p"
    with pytest.raises(TypeError) as e:  # was ProbeConfig.model must be a ModelSettings, got Policy; ... from_dict
        gradprobe.probe(_policy(), rewards=["outcome"], out=out)
    assert str(e.value) == POLICY_REFUSAL
    assert not out.exists()


def test_probe_refuses_a_real_policy_without_its_module_repr():
    policy = gradprobe.load_policy("tiny")
    with pytest.raises(TypeError) as e:
        gradprobe.probe(policy, rewards=["outcome"])
    assert str(e.value) == POLICY_REFUSAL and "Qwen2" not in str(e.value)
    with pytest.raises(TypeError) as e:  # was unknown model 'Policy(model=Qwen2ForCausalLM(...' (the module dumped)
        gradprobe.rank_prompts(policy, "chain_sum", 4, progress=False)
    assert str(e.value) == POLICY_REFUSAL


def test_probe_refuses_a_loaded_task_naming_the_spec_to_pass():
    task = gradprobe.load_task("chain_sum")
    with pytest.raises(TypeError) as e:  # was ValueError: task must be a string, got ReasoningGymTask(...), no fix
        gradprobe.probe(task=task, rewards=["outcome"])
    assert str(e.value) == TASK_REFUSAL


def test_rank_prompts_refuses_a_loaded_task_without_the_dataset_list(tmp_path):
    out = tmp_path / "r"
    with pytest.raises(TypeError) as e:  # was unknown task "ReasoningGymTask(name='chain_sum')". Valid: <every name>
        gradprobe.rank_prompts("tiny", gradprobe.load_task("chain_sum"), 4, out=out, progress=False)
    assert str(e.value) == TASK_REFUSAL
    assert not out.exists()


@pytest.mark.parametrize("model, task, message", [
    (3, "chain_sum", "model must be a model name or path (str or os.PathLike: an alias such as 'tiny', a folder, a "
                     ".gguf file or a hub id), got 3 (int)"),
    ("tiny", None, "task must be a string (a task spec, e.g. 'chain_sum'), got None (NoneType)"),
])
def test_rank_prompts_refuses_a_model_or_task_that_is_no_text_or_path(model, task, message):
    with pytest.raises(TypeError) as e:  # were "unknown model '3'" and "unknown task 'None'"
        gradprobe.rank_prompts(model, task, 4, progress=False)
    assert str(e.value) == message


def test_load_task_refuses_a_loaded_task_naming_its_name():
    with pytest.raises(TypeError) as e:
        gradprobe.load_task(gradprobe.load_task("chain_sum"))
    assert str(e.value).startswith("spec must be a string (a task spec), got a ReasoningGymTask (a loaded task, "
                                   "which is not taken): pass the spec it was loaded from, e.g. spec='chain_sum'")


# ----------------------------------------------------------------------------- 3: a file that is no probe.json


def _probe_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "probe"
    folder.mkdir()
    shutil.copy(STUDY_PROBE, folder / "probe.json")
    return folder


def _calibrated(folder: Path) -> Path:
    file = folder / "calibrated.json"  # calib apply's output: a "format" and a rewards list of other entries
    file.write_text(json.dumps({"format": "gradprobe-calibrated", "format_version": 1, "target": "gain",
                                "rewards": [{"name": "outcome", "calibrated_gain": 0.5}]}))
    return file


def test_load_probe_names_calibrated_json_and_the_folder_to_pass(tmp_path, capsys):
    folder = _probe_folder(tmp_path)
    file = _calibrated(folder)
    expected = (f"{file} is the output of `calib apply` (calibrated.json), not a probe.json of gradprobe probe: pass "
                f"the folder that `gradprobe probe --out DIR` wrote (DIR holds its probe.json) ('{folder}' holds one)")
    with pytest.raises(ValueError) as e:  # was: field rewards[0].inner_product is missing ... re-run gradprobe probe
        gradprobe.load_probe(file)
    assert str(e.value) == expected
    assert calib_main(["apply", str(file)]) == 2  # calib apply reads its probe through load_probe
    assert capsys.readouterr().err.strip() == f"calib apply: error: {expected}"
    raw = json.loads((folder / "probe.json").read_text())  # a real probe.json missing a field: still "damaged"
    del raw["rewards"][0]["inner_product"]
    (folder / "probe.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError) as e:
        gradprobe.load_probe(folder)
    assert str(e.value).startswith(f"{folder / 'probe.json'} field rewards[0].inner_product is missing: the table "
                                   "needs it")
    assert gradprobe.load_probe(STUDY_PROBE.parent).table.shape[0] == 4  # an intact probe still reads


@pytest.mark.parametrize("doc, what", [
    ({"format": "gradprobe-calibration", "rewards": []}, "is a calibration file (`calib fit`)"),
    ({"format": "something-else"}, 'is JSON of "format": "something-else"'),
    ({"a": 1}, "is JSON without the 'config' and 'rewards' that every probe.json holds"),
    ({"rewards": [{"name": "outcome"}]}, "is JSON without the 'config' that every probe.json holds"),
])
def test_load_probe_names_other_json_files(tmp_path, doc, what):
    file = tmp_path / "other.json"
    file.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as e:
        gradprobe.load_probe(file)
    assert str(e.value) == (f"{file} {what}, not a probe.json of gradprobe probe: pass the folder that `gradprobe "
                            "probe --out DIR` wrote (DIR holds its probe.json)")
    assert "re-run" not in str(e.value)


def test_load_probe_names_an_empty_probe_json(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "probe.json").write_text("\n")
    with pytest.raises(ValueError) as e:  # was: is not valid JSON (Expecting value: line 1 column 1 (char 0))
        gradprobe.load_probe(folder)
    assert str(e.value) == (f"{folder / 'probe.json'} is empty, not a probe.json of gradprobe probe: pass the folder "
                            "that `gradprobe probe --out DIR` wrote (DIR holds its probe.json), or re-run `gradprobe "
                            f"probe --out '{folder}'` (with the same settings) to write the probe's files again")


# ----------------------------------------------------------------------------- 4: calib.load('')


@pytest.mark.parametrize("spec, word", [("", "empty"), ("  ", "blank")])
def test_calib_load_refuses_an_empty_spec_as_empty(spec, word):
    with pytest.raises(calib.CalibrationFileError) as e:  # was: calibration file '.' is a folder
        calib.load(spec)
    assert str(e.value) == (f"the calibration is {word} ({spec!r}): pass the calibration file `calib fit ROWS.csv "
                            "--out FILE.json` wrote, or 'default' (the shipped one) (an unset shell variable gives an "
                            "empty value)")
