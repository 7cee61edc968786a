"""The edges of a run's record of its initial weights (``config.json``'s ``model_weights``), found by a breaker:

* a run whose ``[model] name`` is a relative folder (``mymodel``), resumed from another working directory, was not
  checked at all: the name found no folder there, was read as a hub id (digest None, "not checked"), and the loader
  then said "unknown model 'mymodel'" (or a hub id of the form org/name was looked up on the hub); from a directory
  holding another ``mymodel`` the fix said to restore the run's weights, which were intact where they were;
* ``--reuse-runs`` called a damaged record "damaged" without the reason a resume gives, and accepted a record whose
  ``source`` was edited to ``"hub"``, which a resume refuses;
* the fix for edited files beside the weights said "if the run started from the shipped build", which the record
  tells;
* a refused resume's fix was told from one to start anew by the words "to resume it," (now an attribute);
* ``gradprobe study --reuse-runs`` hashed the model's weights twice before its first run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gradprobe.study.folder import StudyError
from gradprobe.study.reuse import reuse_runs
from gradprobe.study.runner import run_study
from gradprobe.tiers import tier_path
from gradprobe.training import run_folder
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.plan import load_plan
from gradprobe.training.run import run_training
from gradprobe.training.run_folder import check_model_weights, model_weights_identity, model_weights_mismatch

from helpers_rollout import one_thread
from helpers_training import killed_run, refused_before_loading, tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    """An empty ``GRADPROBE_CACHE``: ``tiny`` is the shipped build, whatever this machine's cache holds."""
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _run_folder(out: Path, weights: dict) -> None:
    """A run folder with a checkpoint to resume whose ``config.json`` records ``weights``."""
    out.mkdir()
    (out / "checkpoint.json").write_text('{"update": 1}')
    (out / "config.json").write_text(json.dumps({"run": {}, "model_weights": weights}))


def _other_weights_copy(folder: Path) -> None:
    """A copy of the shipped tiny build at ``folder`` with other weights (its last 100 bytes zeroed)."""
    shutil.copytree(tier_path("tiny"), folder)
    weights = bytearray((folder / "model.safetensors").read_bytes())
    weights[-100:] = bytes(100)
    (folder / "model.safetensors").write_bytes(bytes(weights))


def test_a_relative_model_folder_resumed_from_another_directory_is_refused_with_the_fix(tmp_path, monkeypatch):
    start, elsewhere, other = tmp_path / "start", tmp_path / "elsewhere", tmp_path / "other"
    for d in (start, elsewhere, other):
        d.mkdir()
    shutil.copytree(tier_path("tiny"), start / "mymodel")
    _other_weights_copy(other / "mymodel")
    out = tmp_path / "run"
    monkeypatch.chdir(start)
    run = killed_run(out, model="mymodel")
    recorded = json.loads((out / "config.json").read_text())["model_weights"]
    folder = (start / "mymodel").resolve()
    assert (recorded["source"], recorded["path"]) == ("folder", str(folder))  # absolute: the name is resolved here
    digest = recorded["digest"][:12]

    monkeypatch.chdir(elsewhere)  # no mymodel here: the name would be read as a hub id
    fix = (f"to resume it, run the command from the working directory the run was started in (where 'mymodel' names "
           f"{folder}), or make 'mymodel' name {folder} from here (a symbolic link to it)")
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: model 'mymodel' (a relative path) named {folder / 'model.safetensors'} (sha256 "
        f"{digest}) when the run started, but it names no local folder or file from this working directory "
        f"({elsewhere.resolve()}), so it would be read as a hub id, and the initial policy its kl_init is measured "
        f"against would not be loaded from the weights of its first updates; {fix}, or start a new run under a new "
        f"--out (not {out}); nothing was loaded or written")
    with pytest.raises(RunConfigMismatchError) as e:
        check_model_weights(out, "mymodel", model_weights_identity("mymodel"))
    assert e.value.resume_fix == fix  # the same command resumes once fixed: a study's footer says so

    monkeypatch.chdir(other)  # another mymodel here: the fix is the directory, not restoring intact weights
    assert refused_before_loading(run, out, RunConfigMismatchError).endswith(
        f"(sha256 {digest}) as when the run started, so the initial policy its kl_init is measured against would be "
        "another model than in its first updates; to resume it, run the command from the working directory the run "
        f"was started in ('mymodel' is a relative path: there it names {folder}, here {(other / 'mymodel').resolve()})"
        f", or start a new run under a new --out (not {out}); nothing was loaded or written")

    monkeypatch.chdir(start)  # the fix
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]


def test_a_local_model_whose_absolute_path_is_gone_is_refused_not_read_as_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "models" / "mymodel"
    shutil.copytree(tier_path("tiny"), model)
    shutil.copytree(tier_path("tiny"), tmp_path / "dot")
    then, dot = model_weights_identity(str(model)), model_weights_identity("./dot")
    assert dot["path"] == str((tmp_path / "dot").resolve())
    out, out_dot = tmp_path / "run", tmp_path / "run_dot"
    _run_folder(out, then)
    _run_folder(out_dot, dot)
    shutil.rmtree(model)
    now = model_weights_identity(str(model))
    assert now == {"source": "hub", "path": str(model), "files": [], "method": None, "digest": None}
    with pytest.raises(RunConfigMismatchError) as e:
        check_model_weights(out, str(model), now)
    assert str(e.value) == (
        f"{out} cannot be resumed: model {str(model)!r} named {model.resolve() / 'model.safetensors'} (sha256 "
        f"{then['digest'][:12]}) when the run started, but it names no local folder or file now, so it would be read "
        "as a hub id, and the initial policy its kl_init is measured against would not be loaded from the weights of "
        f"its first updates; to resume it, restore the weights the run started from at {model.resolve()} (digest "
        f"{then['digest'][:12]}), or start a new run under a new --out (not {out}); nothing was loaded or written")
    shutil.rmtree(tmp_path / "dot")  # a relative name whose folder is gone: restored, and run from the directory
    assert model_weights_mismatch("./dot", dot, model_weights_identity("./dot"))[2] == (
        f"to resume it, restore the weights the run started from at {tmp_path.resolve() / 'dot'} (digest "
        f"{dot['digest'][:12]}) and run the command from the working directory the run was started in")
    with pytest.raises(RunConfigMismatchError, match="'./dot' \\(a relative path\\) named"):
        check_model_weights(out_dot, "./dot", model_weights_identity("./dot"))
    gone = tmp_path / "gone" / "m.gguf"  # an alias's file (smollm2-135m): not a relative path, whatever the directory
    alias = {"source": "gguf", "path": str(gone.parent), "files": [gone.name], "method": "sha256", "digest": "0" * 64}
    assert model_weights_mismatch("smollm2-135m", alias, None) == (
        "missing", f"model 'smollm2-135m' named {gone} (sha256 000000000000) when the run started, but {gone} is "
        f"missing now", f"to resume it, restore the weights the run started from at {gone} (digest 000000000000)")


def test_the_files_fix_follows_the_build_the_run_recorded(tmp_path):
    """The fix said "or delete it ... if the run started from the shipped build" whichever build the run started
    from; the record says which."""
    shipped = tier_path("tiny").resolve()
    cache = tmp_path / "cache" / "tiers" / shipped.name
    then_shipped = model_weights_identity("tiny")
    shutil.copytree(shipped, cache)  # a cache build with the same weights: loaded instead of the shipped one
    then_cache = model_weights_identity("tiny")
    assert (then_shipped["build"], then_cache["build"]) == ("shipped", "cache")
    config = json.loads((cache / "config.json").read_text())
    (cache / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 0.1}))
    now = model_weights_identity("tiny")
    restore = f"restore those files in the cache build {cache.resolve()} as they were when the run started"
    assert model_weights_mismatch("tiny", then_cache, now)[2] == f"to resume it, {restore}"  # its own build
    assert model_weights_mismatch("tiny", then_shipped, now)[2] == (
        f"to resume it, delete the cache build {cache.resolve()} (or set GRADPROBE_CACHE to a folder without it) so "
        f"that the shipped build {shipped} the run started from is loaded again, or {restore}")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """(plan, study folder): a finished study of one tiny run (the shipped build: an empty cache)."""
    tmp = tmp_path_factory.mktemp("finished")
    plan = tmp / "plan.toml"
    plan.write_text(tiny_plan(seeds=[0]))
    with pytest.MonkeyPatch.context() as m:
        m.setenv("GRADPROBE_CACHE", str(tmp / "cache"))
        assert run_study(plan, tmp / "study", executor="inline", probe=False, analyze=False).ok
    return plan, tmp / "study"


def _edited_source(tmp_path: Path, study: Path, change: dict) -> Path:
    """A copy of ``study`` whose run's ``model_weights`` record has ``change`` applied (a hand edit)."""
    copy = tmp_path / "edited"
    shutil.copytree(study, copy)
    cfg = copy / "runs" / "grpo" / "seed0" / "config.json"
    config = json.loads(cfg.read_text())
    config["model_weights"].update(change)
    cfg.write_text(json.dumps(config))
    return copy


def test_reuse_refuses_a_record_a_resume_refuses_and_says_why(tmp_path, finished):
    plan, study = finished
    source = _edited_source(tmp_path, study, {"source": "hub"})  # the tier's record, source edited by hand
    why = "records source 'hub' for model 'tiny', which is a tier here"
    run = source / "runs" / "grpo" / "seed0"
    with pytest.raises(DamagedRunFolderError) as e:  # the resume's refusal
        check_model_weights(run, "tiny", model_weights_identity("tiny"))
    assert f"(field model_weights {why})" in str(e.value)
    lines: list[str] = []
    assert reuse_runs(load_plan(plan), tmp_path / "new", [source], say=lines.append) == {}  # was reused
    assert lines == [f"--reuse-runs {source}: reused 0 finished run(s) with this plan's configuration; not reused: "
                     f"grpo seed 0 (its config.json is damaged (field model_weights {why}))"]
    shutil.rmtree(source)
    source = _edited_source(tmp_path, study, {"digest": "x"})
    lines.clear()
    assert reuse_runs(load_plan(plan), tmp_path / "new", [source], say=lines.append) == {}
    assert lines[0].endswith(  # the reason, as a resume gives it (it said only "is damaged")
        "it needs \"digest\" 64 lowercase hex digits (as sha256sum prints them) with \"method\" \"sha256\" or "
        "\"sampled-sha256\"))")


def test_a_study_hashes_the_model_once_before_its_runs(tmp_path, finished, monkeypatch):
    """The freeze check and --reuse-runs each hashed the model's weights (seconds for a 2 GiB model)."""
    plan, study = finished
    calls = []
    identity = run_folder.model_weights_identity
    monkeypatch.setattr(run_folder, "model_weights_identity", lambda spec: calls.append(spec) or identity(spec))
    lines: list[str] = []
    res = run_study(plan, tmp_path / "second", executor="inline", probe=False, analyze=False, reuse_from=[study],
                    say=lines.append)
    assert res.ok and res.skipped == [("grpo", 0)]  # reused, not trained: the weights were compared
    assert calls == ["tiny"]


def test_a_study_from_another_directory_refuses_its_remaining_runs_on_a_relative_model(tmp_path, monkeypatch):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    shutil.copytree(tier_path("tiny"), start / "mymodel")
    plan, out = tmp_path / "plan.toml", tmp_path / "study"
    plan.write_text(tiny_plan(model={"name": "mymodel"}, seeds=[0, 1]))
    monkeypatch.chdir(start)
    assert run_study(plan, out, executor="inline", probe=False, analyze=False).ok
    shutil.rmtree(out / "runs" / "grpo" / "seed1")  # seed 1 still to train
    folder = (start / "mymodel").resolve()
    digest = json.loads((out / "runs" / "grpo" / "seed0" / "config.json").read_text())["model_weights"]["digest"]
    monkeypatch.chdir(elsewhere)
    with pytest.raises(StudyError) as e:  # check=False: past the plan's own input check, which a plug-in may skip
        run_study(plan, out, executor="inline", probe=False, analyze=False, check=False)
    assert str(e.value) == (
        f"{out}: model 'mymodel' (a relative path) named {folder / 'model.safetensors'} (sha256 {digest[:12]}) when "
        f"the run started, but it names no local folder or file from this working directory ({os.getcwd()}), so it "
        "would be read as a hub id (the record of its run grpo seed 0, config.json model_weights): the study's "
        "remaining runs would train another model than its finished ones, and the analysis would average the two; "
        "to resume it, run the command from the working directory the run was started in (where 'mymodel' names "
        f"{folder}), or make 'mymodel' name {folder} from here (a symbolic link to it), or run the plan as a new "
        "study under a new --out; nothing was run or written")
    assert not (out / "runs" / "grpo" / "seed1").exists()
    # with the plan's input check (the default), the preflight refuses the name first: it says where the runs found it
    with pytest.raises(StudyError) as e:
        run_study(plan, out, executor="inline", probe=False, analyze=False)
    assert str(e.value).startswith(  # where the runs found it first, then the name read as given
        f"[model] name = 'mymodel': 'mymodel' is a relative path, read from the working directory ({os.getcwd()}), "
        f"where it names nothing; this study's runs started from the local model {folder}: run the command from "
        f"{start.resolve()}; read as given: no such model")
    assert not (out / "runs" / "grpo" / "seed1").exists()


def test_a_record_of_weights_given_in_code_resumes_with_a_note_not_silently(tmp_path, capsys):
    """A breaker: a record edited to ``source: "given"`` (weights passed in code) resumed on other weights without a
    word; nothing can be compared, so the resume says so, as for a run from before the record."""
    model = tmp_path / "other"
    _other_weights_copy(model)
    out = tmp_path / "run"
    _run_folder(out, {"source": "given", "path": "tiny", "files": [], "method": None, "digest": None})
    now = model_weights_identity(str(model))
    assert check_model_weights(out, str(model), now) is None
    err = capsys.readouterr().err
    assert err.startswith(f"note: {out} records that its initial weights were passed in code (config.json "
                          "model_weights source 'given'), so whether model")
    assert err.rstrip().endswith("could not be checked; resuming")
