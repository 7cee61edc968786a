"""study.json records the model a study starts from (``model_weights``, the shape of a run's ``config.json``
record), from the identity the study computes to check its remaining runs (the weights not hashed again): recorded
anew while no run has started, kept once one has; a study from before the record, resumed once a run has started,
gains none and resumes as before; a generated model records nothing. Before: study.json recorded no model, so a copy
of a study without its ``runs/`` could not say which model it ran."""

from __future__ import annotations

import json
import shutil

from study_helpers import stopped_before_any_run, toy_plan, write_plan

from gradprobe.tiers import tier_path
from gradprobe.training.run_folder import model_weights_identity


def _recorded(out) -> dict:
    return json.loads((out / "study.json").read_text())


def test_a_study_records_its_model_until_a_run_starts_and_an_old_study_gains_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))  # tiny: the shipped build
    stopped_before_any_run(write_plan(tmp_path, toy_plan(seeds=(0,)), "generated.toml"), tmp_path / "generated")
    assert "model_weights" not in _recorded(tmp_path / "generated")  # tiny-qwen2: a function of the seed
    model, out = tmp_path / "model", tmp_path / "study"
    shutil.copytree(tier_path("tiny"), model)
    plan = write_plan(tmp_path, toy_plan(seeds=(0, 1)).replace('name = "tiny-qwen2"',
                                                               f"name = {json.dumps(str(model))}"))
    stopped_before_any_run(plan, out)
    first = model_weights_identity(str(model))
    assert first["source"] == "folder" and _recorded(out)["model_weights"] == first
    assert "note:" not in capsys.readouterr().err

    original = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(original[:-100] + bytes(100))  # other weights before any run started
    second = model_weights_identity(str(model))
    stopped_before_any_run(plan, out)
    assert _recorded(out)["model_weights"] == second  # recorded anew: the runs will start from it
    folder = model.resolve()
    assert (f"note: model {str(model)!r} now loads {folder} (digest {second['digest'][:12]}), not {folder} (digest "
            f"{first['digest'][:12]}), unlike the record made when {out} was started ({out / 'study.json'} "
            "model_weights), but no run has started from it yet; recording the model it loads now") in \
        capsys.readouterr().err
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 0.1}))  # the same weights, other files
    third = model_weights_identity(str(model))
    stopped_before_any_run(plan, out)
    assert _recorded(out)["model_weights"] == third
    assert (f"note: model {str(model)!r} now loads the same weights from {folder} with other files beside them "
            f"(config.json (sha256 {second['model_files']['config.json'][:12]} then, "
            f"{third['model_files']['config.json'][:12]} now))") in capsys.readouterr().err

    run = out / "runs" / "grpo" / "seed0"  # a run started, by a gradprobe that recorded no model in it
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"run": {}}))
    (model / "model.safetensors").write_bytes(original)
    stopped_before_any_run(plan, out)
    assert _recorded(out)["model_weights"] == third  # kept: the run started from that model
    study = _recorded(out)
    del study["model_weights"]  # a study.json from before the record, a run started: resumed as before
    (out / "study.json").write_text(json.dumps(study))
    stopped_before_any_run(plan, out)
    assert _recorded(out) == study
    assert "note:" not in capsys.readouterr().err
