"""gradprobe study --replicate compares the plan's model with the one the source study ran: its runs recorded the
weights they started from (``config.json`` ``model_weights``); a local model folder or ``.gguf`` file whose weights
or ``config.json`` changed since, or a tier of other weights, is refused before anything is written or run (before:
the replicate silently trained the changed model). A source whose runs recorded nothing is replicated with one note;
a generated model or a hub id is not compared. A study copied without its ``runs/`` is compared by its
``study.json``'s ``model_weights`` (recorded when it started), and a replicate hashes the model once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from study_helpers import make_study, toy_plan

import gradprobe.study.orchestrator as orchestrator
import gradprobe.study.replicate as replicate
import gradprobe.training.run_folder as run_folder
from gradprobe.cli import main
from gradprobe.study.folder import StudyError
from gradprobe.training.plan import load_plan
from gradprobe.training.run_folder import model_weights_identity


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """Two healthy model folders (``save_pretrained`` of the random tiny-qwen2, seeds 3 and 4): ``a`` and ``b``."""
    from gradprobe.models import load_policy

    root = tmp_path_factory.mktemp("saved")
    for name, seed in (("a", 3), ("b", 4)):
        policy = load_policy("tiny-qwen2", seed=seed)
        policy.model.save_pretrained(root / name)
        policy.tokenizer.save_pretrained(root / name)
    return root


class _Ran(Exception):
    """Raised by the stub of ``run_study``: the replicate got past its checks."""


def _ran(*args, **kwargs):
    raise _Ran


def _source(tmp_path, monkeypatch, model: str, *, record: bool = True, runs: bool = True,
            study_record: bool = False) -> Path:
    """A finished hand-made study ``src`` of the plan with ``[model] name = model`` whose two runs recorded (when
    ``record``) the identity of ``model`` now in their ``config.json``, as a run does when it starts (no run folders
    without ``runs``: a study copied without its ``runs/``), and whose ``study.json`` records it too with
    ``study_record``, as a study does when it starts; ``run_study`` replaced by a stub that raises :class:`_Ran`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(tmp_path)
    plan = toy_plan("model", seeds=(0, 1)).replace('name = "tiny-qwen2"', f"name = {json.dumps(model)}")
    src = make_study(tmp_path / "src", seeds=2, items=False, plan=plan)
    weights = model_weights_identity(model)
    for seed in (0, 1) if runs else ():
        run = src / "runs" / "grpo" / f"seed{seed}"
        run.mkdir(parents=True)
        config = {"run": {}, **({"model_weights": weights} if record and weights is not None else {})}
        (run / "config.json").write_text(json.dumps(config))
    if study_record:
        study = json.loads((src / "study.json").read_text())
        (src / "study.json").write_text(json.dumps({**study, "model_weights": weights}))
    monkeypatch.setattr(replicate, "run_study", _ran)
    return src


def _replicate(src, out) -> int:
    return main(["study", "--replicate", str(src), "--out", str(out), "--executor", "inline", "--no-probe",
                 "--no-analysis"])


def test_replicate_refuses_a_model_folder_whose_weights_changed_and_runs_it_restored(tmp_path, monkeypatch, capsys,
                                                                                  saved):
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model))
    then = model_weights_identity(str(model))["digest"]
    shutil.copyfile(saved / "b" / "model.safetensors", model / "model.safetensors")  # replaced since the study ran
    now = model_weights_identity(str(model))["digest"]
    assert then != now
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    weights = model.resolve() / "model.safetensors"
    assert (f"--replicate: model {str(model)!r} now loads {weights} (sha256 {now[:12]}), not {weights} (sha256 "
            f"{then[:12]})") in err
    assert f"{src / 'runs' / 'grpo' / 'seed0' / 'config.json'} model_weights, the record of the study's run grpo " \
           "seed 0" in err
    assert (f"to replicate it, restore the weights the run started from at {model.resolve()} (digest {then[:12]}), "
            "or run the plan on this model as a new study (`gradprobe study PLAN --out NEW`)") in err
    assert not (tmp_path / "rep").exists()  # nothing written, nothing run

    shutil.copyfile(saved / "a" / "model.safetensors", model / "model.safetensors")  # restored: replicated
    with pytest.raises(_Ran):
        _replicate(src, tmp_path / "rep")
    assert "could not be compared" not in capsys.readouterr().err


def test_replicate_refuses_a_model_folder_whose_config_json_changed(tmp_path, monkeypatch, capsys, saved):
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model))
    before = model_weights_identity(str(model))["model_files"]["config.json"]
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 0.1}))  # the same weights, another model
    after = model_weights_identity(str(model))["model_files"]["config.json"]
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    assert (f"model {str(model)!r} now loads the same weights from {model.resolve()}, but files beside them differ "
            f"from the run's record: config.json (sha256 {before[:12]} then, {after[:12]} now)") in err
    assert f"to replicate it, restore those files in {model.resolve()} as they were when the run started" in err
    assert not (tmp_path / "rep").exists()


def test_a_source_whose_runs_recorded_no_model_is_replicated_with_one_note(tmp_path, monkeypatch, capsys, saved):
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model), record=False)  # runs from before gradprobe recorded it
    digest = model_weights_identity(str(model))["digest"]
    with pytest.raises(_Ran):
        _replicate(src, tmp_path / "rep")
    err = capsys.readouterr().err
    assert err.count("could not be compared") == 1  # one note for the two runs
    assert (f"note: neither the study.json nor a run of the study {src} records the model it started from "
            "(model_weights in study.json, or in config.json in its runs/") in err
    assert f"whether model {str(model)!r} ({model.resolve()}, digest {digest[:12]}) is the model the study ran" in err


def test_a_gguf_file_replaced_or_gone_since_is_refused(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF weights the study ran")
    src = _source(tmp_path, monkeypatch, str(gguf))
    original = load_plan(src / "plan.toml", check_reach=False)
    replicate.check_replicate_model(src, original)  # unchanged: nothing said, nothing refused
    then = model_weights_identity(str(gguf))["digest"]
    gguf.write_bytes(b"GGUF weights downloaded again")
    now = model_weights_identity(str(gguf))["digest"]
    with pytest.raises(StudyError) as e:
        replicate.check_replicate_model(src, original)
    assert str(e.value).startswith(f"--replicate: model {str(gguf)!r} now loads {gguf.resolve()} (sha256 {now[:12]}), "
                                   f"not {gguf.resolve()} (sha256 {then[:12]})")
    gguf.unlink()  # gone: the name finds no local file
    with pytest.raises(StudyError) as e:
        replicate.check_replicate_model(src, original)
    assert (f"named {gguf.resolve()} (sha256 {then[:12]}) when the run started, but it names no local folder or file "
            f"now ({src / 'runs' / 'grpo' / 'seed0' / 'config.json'} model_weights") in str(e.value)
    assert f"to replicate it, restore the weights the run started from at {gguf.resolve()} (digest {then[:12]})" in \
        str(e.value)


def test_a_tier_of_other_weights_is_refused_and_hub_ids_and_generated_models_are_not_compared(tmp_path,
                                                                                              monkeypatch):
    src = _source(tmp_path, monkeypatch, "tiny")
    original = load_plan(src / "plan.toml", check_reach=False)
    said = []
    replicate.check_replicate_model(src, original, say=said.append)  # the same tier build: no note, no refusal
    assert said == []
    cfg = src / "runs" / "grpo" / "seed1" / "config.json"
    record = json.loads(cfg.read_text())
    record["model_weights"]["digest"] = "0" * 64  # the study ran another build of the tier
    cfg.write_text(json.dumps(record))
    with pytest.raises(StudyError, match=r"--replicate: model 'tiny' now loads the \w+ build .* \(model.safetensors "
                                         r"sha256 \w{12}\), not the \w+ build .* \(model.safetensors sha256 "
                                         r"000000000000\) .* run grpo seed 1"):
        replicate.check_replicate_model(src, original, say=said.append)
    record["model_weights"]["digest"] = "ZZ"  # damaged by hand
    cfg.write_text(json.dumps(record))
    with pytest.raises(StudyError, match=r"seed1/config.json is damaged \(field model_weights is .*: whether model "
                                         r"'tiny' loads the model the study .* ran cannot be told; restore the file"):
        replicate.check_replicate_model(src, original, say=said.append)
    for name in ("org/model", "tiny-qwen2"):  # a hub id then and now, a generated model: nothing read to compare
        src = _source(tmp_path / name.replace("/", "_"), monkeypatch, name)
        replicate.check_replicate_model(src, load_plan(src / "plan.toml", check_reach=False), say=said.append)
        src = _source(tmp_path / f"{name.replace('/', '_')}_old", monkeypatch, name, record=False)
        replicate.check_replicate_model(src, load_plan(src / "plan.toml", check_reach=False), say=said.append)
    assert said == []


def test_a_study_copied_without_its_runs_is_compared_by_its_study_json_record(tmp_path, monkeypatch, capsys, saved):
    """Before: a source without runs/ recorded nothing to compare, so a changed model was replicated with a note."""
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model), runs=False, study_record=True)
    assert not (src / "runs").exists()
    with pytest.raises(_Ran):  # unchanged: compared, so replicated without a note
        _replicate(src, tmp_path / "rep")
    assert "could not be compared" not in capsys.readouterr().err
    then = model_weights_identity(str(model))["digest"]
    shutil.copyfile(saved / "b" / "model.safetensors", model / "model.safetensors")  # replaced since the study ran
    now = model_weights_identity(str(model))["digest"]
    assert _replicate(src, tmp_path / "rep2") == 2
    err = capsys.readouterr().err
    weights = model.resolve() / "model.safetensors"
    assert (f"--replicate: model {str(model)!r} now loads {weights} (sha256 {now[:12]}), not {weights} (sha256 "
            f"{then[:12]}) ({src / 'study.json'} model_weights, the record of the study's model when it started): the "
            f"replicate would train another model than the study {src} ran; to replicate it, restore the weights the "
            f"run started from at {model.resolve()} (digest {then[:12]}), or run the plan on this model as a new study "
            "(`gradprobe study PLAN --out NEW`)") in err
    assert not (tmp_path / "rep2").exists()


def test_a_damaged_study_json_record_is_refused_where_a_damaged_run_record_is(tmp_path, monkeypatch, saved):
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model), study_record=True)  # the runs' records are sound
    sj = src / "study.json"
    study = json.loads(sj.read_text())
    study["model_weights"]["digest"] = "ZZ"  # damaged by hand
    sj.write_text(json.dumps(study))
    original = load_plan(src / "plan.toml", check_reach=False)
    with pytest.raises(StudyError) as e:
        replicate.check_replicate_model(src, original)
    assert str(e.value).startswith(f"--replicate: {sj} is damaged (field model_weights is {{")
    assert (f"whether model {str(model)!r} loads the model the study {src} ran cannot be told; restore the file from "
            "a copy of the study, or run the plan on this model as a new study") in str(e.value)
    said = []
    for damaged in ({"source": "hub", "path": "org/model", "digest": "ZZ"}, None):  # a hub id now: not refused
        src = _source(tmp_path / f"hub{damaged is None}", monkeypatch, "org/model")
        sj = src / "study.json"
        sj.write_text(json.dumps({**json.loads(sj.read_text()), "model_weights": damaged}))
        assert replicate.check_replicate_model(src, load_plan(src / "plan.toml", check_reach=False),
                                               say=said.append)["source"] == "hub"
    assert said == []


def test_a_replicate_hashes_the_model_once_and_its_study_json_records_it(tmp_path, monkeypatch, saved):
    """Before: the replicate's check and its study's (check_study_model) each hashed the weights."""
    model = Path(shutil.copytree(saved / "a", tmp_path / "model"))
    src = _source(tmp_path, monkeypatch, str(model))
    monkeypatch.setattr(replicate, "run_study", orchestrator.run_study)  # the study itself, stopped once frozen
    monkeypatch.setattr(orchestrator, "_run", _ran)
    calls, identity = [], run_folder.model_weights_identity
    monkeypatch.setattr(run_folder, "model_weights_identity", lambda spec: calls.append(spec) or identity(spec))
    with pytest.raises(_Ran):
        _replicate(src, tmp_path / "rep")
    assert calls == [str(model)]
    assert json.loads((tmp_path / "rep" / "study.json").read_text())["model_weights"] == identity(str(model))
