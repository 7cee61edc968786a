"""A run records the initial weights its model name loaded (``config.json``'s ``model_weights``) and refuses to resume
when the name now loads other ones: a trial user's run on the shipped tiny tier, killed and resumed after a rebuild of
the tier existed in the cache (which takes precedence), was accepted, and the frozen initial policy its ``kl_init`` is
measured against came from the rebuilt weights (0.0215, 0.0305... instead of 0.0019, 0.0028), with nothing in the
folder to tell. A run from before the record resumes with one note."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from gradprobe.tiers import shipped_root, tier_path
from gradprobe.training import run_folder
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.run import run_training
from gradprobe.training.run_folder import check_model_weights, model_weights_identity

from helpers_rollout import one_thread
from helpers_training import folder_files, killed_run, metric_lines, refused_before_loading

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rebuild(folder: Path) -> str:
    """Put a "rebuild" of the shipped tiny build at ``folder`` (the last 100 bytes of its weights zeroed: other
    weights, still a loadable file; resumed against them under the old code, update 2's kl_init was 0.0038, not 0.0)
    and return its model.safetensors' sha256."""
    shutil.copytree(tier_path("tiny"), folder)
    weights = bytearray((folder / "model.safetensors").read_bytes())
    weights[-100:] = bytes(100)
    (folder / "model.safetensors").write_bytes(bytes(weights))
    return _sha(folder / "model.safetensors")


def _kl(out: Path) -> list[float]:
    return [x["kl_init"] for x in metric_lines(out) if not x.get("eval")]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty ``GRADPROBE_CACHE``: ``tiny`` is the shipped build; returns where a build in it would go."""
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    shipped = tier_path("tiny")
    assert shipped.parent == shipped_root()
    return tmp_path / "cache" / "tiers" / shipped.name


def test_a_resume_after_a_rebuild_in_the_cache_is_refused_and_deleting_it_resumes(tmp_path, cache, capsys):
    shipped = tier_path("tiny").resolve()
    out, whole = tmp_path / "run", tmp_path / "whole"
    run = killed_run(out)
    run_training(run, whole)  # the same run, uninterrupted
    v1 = _sha(shipped / "model.safetensors")
    assert json.loads((out / "config.json").read_text())["model_weights"] == {
        "source": "tier", "build": "shipped", "path": str(shipped), "files": ["model.safetensors"], "method": "sha256",
        "digest": v1, "model_files": {n: _sha(shipped / n) for n in (
            "chat_template.jinja", "config.json", "generation_config.json", "gradprobe_tier.json", "tokenizer.json",
            "tokenizer_config.json")}}
    kept = folder_files(out)
    v2 = _rebuild(cache)
    assert v2 != v1 and tier_path("tiny") == cache
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: model 'tiny' now loads the cache build {cache.resolve()} (model.safetensors sha256 "
        f"{v2[:12]}), not the shipped build {shipped} (model.safetensors sha256 {v1[:12]}) as when the run started, "
        "so the initial policy its kl_init is measured against would be another model than in its first updates; to "
        f"resume it, delete the cache build {cache.resolve()} (or set GRADPROBE_CACHE to a folder without it) so that "
        f"the shipped build {shipped} is loaded again, or start a new run under a new --out (not {out}); nothing was "
        "loaded or written")
    assert folder_files(out) == kept  # nothing written by the refusal
    shutil.rmtree(cache)  # the fix
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    assert [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")] == []
    assert _kl(out) == _kl(whole) == [0.0, 0.0]  # measured against the run's own initial policy


def test_a_run_started_on_a_cache_build_needs_that_build_to_resume(tmp_path, cache, monkeypatch, capsys):
    v2 = _rebuild(cache)
    out = tmp_path / "run"
    with pytest.warns(Warning):  # RebuiltTierWarning: the cache build is not the shipped one
        run = killed_run(out)
    recorded = json.loads((out / "config.json").read_text())["model_weights"]
    assert (recorded["build"], recorded["path"], recorded["digest"]) == ("cache", str(cache.resolve()), v2)
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "other"))  # another cache: the shipped build is loaded
    v1 = _sha(tier_path("tiny") / "model.safetensors")
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: model 'tiny' now loads the shipped build {tier_path('tiny').resolve()} "
        f"(model.safetensors sha256 {v1[:12]}), not the cache build {cache.resolve()} (model.safetensors sha256 "
        f"{v2[:12]}) as when the run started, so the initial policy its kl_init is measured against would be another "
        f"model than in its first updates; to resume it, set GRADPROBE_CACHE={cache.resolve().parent.parent} (the "
        f"cache the run's build is in) so that {cache.resolve()} is loaded again, or start a new run under a new "
        f"--out (not {out}); nothing was loaded or written")
    copy = tmp_path / "other" / "tiers" / cache.name  # the same build copied into that cache: the same weights
    shutil.copytree(cache, copy)
    capsys.readouterr()
    check_model_weights(out, "tiny", model_weights_identity("tiny"))  # checked only: the first test resumes one
    assert capsys.readouterr().err.splitlines() == [
        f"note: model 'tiny' of {out} is loaded from {copy.resolve()}, not {cache.resolve()} as when the run started, "
        f"with the same weights ({v2[:12]}); resuming"]


def test_a_run_whose_cache_build_lost_its_record_is_told_to_restore_it(tmp_path, cache):
    """A tester: the fix said to set GRADPROBE_CACHE to the cache it was already set to; the build there was no longer
    loadable (its warmstart.json deleted), so 'tiny' resolved to the shipped build."""
    _rebuild(cache)
    out = tmp_path / "run"
    with pytest.warns(Warning):  # RebuiltTierWarning: the cache build is not the shipped one
        run = killed_run(out)
    (cache / "warmstart.json").unlink()
    message = refused_before_loading(run, out, RunConfigMismatchError)
    assert message.endswith(
        f"; to resume it, restore the run's build at {cache.resolve()} (it is not a finished build now: "
        f"{cache.resolve() / 'warmstart.json'} is missing), for instance its warmstart.json from a copy, or start a "
        f"new run under a new --out (not {out}); nothing was loaded or written")
    recorded = json.loads((out / "config.json").read_text())["model_weights"]
    shutil.rmtree(cache)  # the whole build gone (a tester: the fix then still spoke of its warmstart.json)
    assert refused_before_loading(run, out, RunConfigMismatchError).endswith(
        f"; to resume it, put the run's build (model.safetensors sha256 {recorded['digest'][:12]}) back at "
        f"{recorded['path']}, or start a new run under a new --out (not {out}); nothing was loaded or written")


def test_a_run_from_before_the_record_resumes_with_one_note_and_a_damaged_record_is_refused(tmp_path, cache, capsys):
    out = tmp_path / "run"
    run = killed_run(out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "model_weights": {"source": "tier", "digest": "x"}}))
    assert refused_before_loading(run, out, DamagedRunFolderError) == (
        f"{out / 'config.json'} is damaged (field model_weights is {{\"source\": \"tier\", \"digest\": \"x\"}}; it "
        "needs \"source\" one of \"tier\", \"folder\", \"gguf\", \"hub\", \"given\" and \"path\" (text)): the initial "
        f"weights the run started from cannot be checked; restore the file from a copy, or delete {out} to start the "
        "run over")
    del config["model_weights"]  # as written before gradprobe recorded it
    (out / "config.json").write_text(json.dumps(config))
    v2 = _rebuild(cache)  # cannot be told: accepted as before
    capsys.readouterr()
    with pytest.warns(Warning):  # RebuiltTierWarning
        summary = run_training(run, out)
    assert summary["completed"] and summary["resumed_from_update"] == [1]
    assert [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")] == [
        f"note: {out} was started before gradprobe recorded the identity of a run's initial weights, so whether model "
        f"'tiny' (the cache build {cache.resolve()} (model.safetensors sha256 {v2[:12]})) still loads the weights the "
        "run started from (the initial policy kl_init is measured against) could not be checked; resuming"]


def test_the_same_weights_under_an_edited_config_or_tokenizer_are_refused(tmp_path, cache, capsys):
    """A tester: a cache copy of the tier whose config.json was edited (rms_norm_eps 0.1) resumed with "the same
    weights", and the resumed model scored 0: the record covered the weight files only."""
    shipped = tier_path("tiny").resolve()
    out = tmp_path / "run"
    run = killed_run(out)
    kept = folder_files(out)
    shutil.copytree(shipped, cache)
    config = json.loads((cache / "config.json").read_text())
    (cache / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 0.1}))
    (cache / "tokenizer_config.json").unlink()
    a, b = _sha(shipped / "config.json"), _sha(cache / "config.json")
    c = _sha(shipped / "tokenizer_config.json")
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: model 'tiny' now loads the same weights from {cache.resolve()}, but files beside "
        f"them differ from the run's record: config.json (sha256 {a[:12]} then, {b[:12]} now); "
        f"tokenizer_config.json (sha256 {c[:12]} then, absent now), so the model built from them (its architecture "
        "settings, generation defaults, tokenizer or chat template) would not be the one its checkpoint and first "
        f"updates were made with; to resume it, delete the cache build {cache.resolve()} (or set GRADPROBE_CACHE to "
        f"a folder without it) so that the shipped build {shipped} the run started from is loaded again, or restore "
        f"those files in the cache build {cache.resolve()} as they were when the run started, or start a new run "
        f"under a new --out (not {out}); nothing was loaded or written")
    assert folder_files(out) == kept
    config = json.loads((out / "config.json").read_text())
    del config["model_weights"]["model_files"]  # as recorded before gradprobe recorded the model's files
    (out / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    check_model_weights(out, "tiny", model_weights_identity("tiny"))  # checked only: the first test resumes one
    assert capsys.readouterr().err.splitlines() == [
        f"note: model 'tiny' of {out} is loaded from {cache.resolve()}, not {shipped} as when the run started, with "
        f"the same weights ({config['model_weights']['digest'][:12]}); resuming",
        f"note: {out} was started before gradprobe recorded a model's config.json and tokenizer files beside its "
        "weights, so whether chat_template.jinja, config.json, generation_config.json, gradprobe_tier.json, "
        "tokenizer.json in "
        f"{cache.resolve()} are still the ones the run started with could not be checked (its weights are the same); "
        "resuming"]


def test_a_run_from_the_hub_is_refused_when_its_name_is_now_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    _run_folder(out, {"source": "hub", "path": "org/model", "files": [], "method": None, "digest": None})
    check_model_weights(out, "org/model", model_weights_identity("org/model"))  # the hub: not read here
    shutil.copytree(tier_path("tiny"), tmp_path / "org" / "model")  # a folder of that name now shadows the hub id
    now = model_weights_identity("org/model")
    with pytest.raises(RunConfigMismatchError) as e:
        check_model_weights(out, "org/model", now)
    assert str(e.value) == (
        f"{out} cannot be resumed: model 'org/model' now loads {tmp_path / 'org' / 'model' / 'model.safetensors'} "
        f"(sha256 {now['digest'][:12]}), not the hub id org/model (its weights not read from files here) as when the "
        "run started, so the initial policy its kl_init is measured against would be another model than in its first "
        f"updates; to resume it, move {tmp_path / 'org' / 'model'} away so that the hub id org/model is loaded again, "
        f"or start a new run under a new --out (not {out}); nothing was loaded or written")


def _run_folder(out: Path, weights: dict) -> None:
    """A run folder with a checkpoint to resume whose ``config.json`` records ``weights``."""
    out.mkdir()
    (out / "checkpoint.json").write_text('{"update": 1}')
    (out / "config.json").write_text(json.dumps({"run": {}, "model_weights": weights}))


def test_a_local_folder_whose_weights_were_replaced_is_refused(tmp_path, monkeypatch):
    model = tmp_path / "model"
    shutil.copytree(shipped_root() / tier_path("tiny").name, model)
    one, two = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    (model / one).write_bytes(b"12")
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"x": one, "y": two}}))
    # model.safetensors beside an index: from_pretrained reads it and ignores the index (so does the record)
    assert model_weights_identity(str(model))["files"] == ["model.safetensors"]
    (model / "model.safetensors").rename(model / two)  # two shards, as from_pretrained reads them
    a, b = _sha(model / one), _sha(model / two)
    listing = f"{a}  {one}\n{b}  {two}\n"
    then = model_weights_identity(str(model))
    assert then == {"source": "folder", "path": str(model.resolve()), "files": [one, two],
                    "method": "sha256", "digest": hashlib.sha256(listing.encode()).hexdigest(),
                    "model_files": {n: _sha(model / n) for n in ("chat_template.jinja", "config.json",
                                    "generation_config.json", "gradprobe_tier.json", "tokenizer.json",
                                    "tokenizer_config.json")}}
    out = tmp_path / "run"
    _run_folder(out, then)
    check_model_weights(out, str(model), model_weights_identity(str(model)))  # unchanged: resumes
    (model / one).write_bytes(b"13")  # the weights replaced
    now = model_weights_identity(str(model))
    with pytest.raises(RunConfigMismatchError) as e:
        check_model_weights(out, str(model), now)
    assert str(e.value) == (
        f"{out} cannot be resumed: model {str(model)!r} now loads {model.resolve()} (2 weight files, sha256 of their "
        f"sha256s {now['digest'][:12]}), not {model.resolve()} (2 weight files, sha256 of their sha256s "
        f"{then['digest'][:12]}) as when the run started, so the initial policy its kl_init is measured against would "
        "be another model than in its first updates; to resume it, restore the weights the run started from at "
        f"{model.resolve()} (digest {then['digest'][:12]}), or start a new run under a new --out (not {out}); nothing "
        "was loaded or written")
    monkeypatch.setattr(run_folder, "HASH_LIMIT_BYTES", 0)  # past the limit: sampled pieces of the content
    monkeypatch.setattr(run_folder, "SAMPLE_BYTES", 1000)
    big = model_weights_identity(str(model))
    data = (model / two).read_bytes()
    last = len(data) - 1000
    pieces = hashlib.sha256(b"".join(data[last * k // 63:last * k // 63 + 1000] for k in range(64))).hexdigest()
    lines = f"{hashlib.sha256(b'13' * 64).hexdigest()} 2  {one}\n{pieces} {len(data)}  {two}\n"
    assert (big["method"], big["digest"]) == ("sampled-sha256", hashlib.sha256(lines.encode()).hexdigest())
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)  # copytree keeps mtimes: touch them, as a download or a plain cp would not keep
    for p in copy.iterdir():
        os.utime(p, (1e9, 1e9))
    assert model_weights_identity(str(copy))["digest"] == big["digest"]  # content alone: the same weights
    out = tmp_path / "big_run"
    _run_folder(out, big)
    check_model_weights(out, str(copy), model_weights_identity(str(copy)))  # resumes (with a note: another path)
    data = bytearray(data)
    data[last * 32 // 63] ^= 1  # one byte of a piece read: other weights
    (copy / two).write_bytes(bytes(data))
    with pytest.raises(RunConfigMismatchError, match="sampled sha256 of their content"):
        check_model_weights(out, str(copy), model_weights_identity(str(copy)))


def test_generated_models_hub_ids_and_given_policies_are_not_checked(tmp_path):
    assert model_weights_identity("tiny-qwen2") is None
    assert model_weights_identity("Qwen/Qwen2.5-0.5B-Instruct") == {
        "source": "hub", "path": "Qwen/Qwen2.5-0.5B-Instruct", "files": [], "method": None, "digest": None}
    out = tmp_path / "run"
    _run_folder(out, {"source": "given", "path": "tiny", "files": [], "method": None, "digest": None})
    check_model_weights(out, "tiny", model_weights_identity("tiny"))  # a policy passed in code: its caller's


def test_a_cache_build_that_is_a_symlink_is_recorded_as_the_cache_build(tmp_path, cache):
    """A reviewer: the build was told by the resolved folder's parent, so a cache build linked from elsewhere was
    recorded as "shipped" at the link's target, and a later refusal told the user to delete the wrong folder."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tier_path("tiny"), elsewhere)
    cache.parent.mkdir(parents=True)
    cache.symlink_to(elsewhere)
    identity = model_weights_identity("tiny")
    assert (identity["build"], identity["path"]) == ("cache", str(cache.parent.resolve() / cache.name))
    assert identity["digest"] == _sha(elsewhere / "model.safetensors")


def test_a_record_without_its_method_is_damaged_and_an_unread_weight_file_is_not_the_weights(tmp_path):
    """A tester: a record without "method" was refused as other weights while naming the same digest twice; a backup
    ``old.safetensors`` beside ``model.safetensors``, which the loader does not read, blocked the resume."""
    from gradprobe.training.run_folder import model_weights_problem

    model = tmp_path / "model"
    shutil.copytree(shipped_root() / tier_path("tiny").name, model)
    then = model_weights_identity(str(model))
    assert then["files"] == ["model.safetensors"]
    assert "method" in model_weights_problem({k: v for k, v in then.items() if k != "method"})
    assert model_weights_problem({**then, "digest": then["digest"].upper()}).endswith(
        "it needs \"digest\" 64 lowercase hex digits (as sha256sum prints them) with \"method\" \"sha256\" or "
        "\"sampled-sha256\"")
    assert model_weights_problem({**then, "source": "tier", "build": "cache", "digest": None}).endswith(  # by hand
        "it needs a \"digest\": a tier's weights are always hashed")
    assert model_weights_problem({**then, "source": "tier"}).endswith("it needs \"build\" \"shipped\" or \"cache\" "
                                                                      "(a tier's)")
    assert model_weights_problem({**then, "files": 5}).endswith("it needs \"files\" a list of the weight files' names")
    for files in ({"config.json": "x"}, {"foo.txt": then["digest"]}, [then["digest"]]):  # not a hash; no model file
        assert model_weights_problem({**then, "model_files": files}).endswith(
            "it needs \"model_files\" an object of file names (config.json, generation_config.json, tokenizer.json, "
            "tokenizer_config.json, special_tokens_map.json, added_tokens.json, vocab.json, merges.txt, "
            "tokenizer.model, chat_template.jinja, chat_template.json, gradprobe_tier.json) to sha256s (64 lowercase "
            "hex digits)")
    assert model_weights_problem({**then, "model_files": {}}) is None
    (model / "old.safetensors").write_bytes(b"a backup")
    assert model_weights_identity(str(model)) == then
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {
        "a": "model-1.safetensors", "b": "model-2.safetensors", "c": "model-1.safetensors"}}))
    for name in ("model-1.safetensors", "model-2.safetensors"):
        (model / name).write_bytes(name.encode())
    assert model_weights_identity(str(model)) == then  # beside model.safetensors the index is not read (the loader)
    (model / "model.safetensors").unlink()
    assert model_weights_identity(str(model))["files"] == ["model-1.safetensors", "model-2.safetensors"]


def test_an_unreadable_model_file_leaves_the_weights_checked(tmp_path):
    """A tester: one unreadable file among the model's files (``vocab.json`` beside ``tokenizer.json``, which the
    loader never reads) made the identity None, which switched every check off: replaced weights then resumed."""
    model = tmp_path / "model"
    shutil.copytree(shipped_root() / tier_path("tiny").name, model)
    os.symlink("/proc/self/mem", model / "vocab.json")  # reading it fails (EIO), whoever runs the test, root too
    with pytest.raises(OSError):
        (model / "vocab.json").read_bytes()
    then = model_weights_identity(str(model))
    assert then["digest"] == _sha(model / "model.safetensors") and "vocab.json" not in then["model_files"]
    assert "gradprobe_tier.json" in then["model_files"]  # the marker decides the tokenizer's class: recorded
    out = tmp_path / "run"
    _run_folder(out, then)
    (model / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(RunConfigMismatchError, match="now loads .* not .* as when the run started"):
        check_model_weights(out, str(model), model_weights_identity(str(model)))


def test_a_record_whose_source_contradicts_the_model_is_damaged(tmp_path):
    """A tester: a tier run's record edited to ``source: "hub"`` was told to move the shipped package folder away;
    a folder's record edited to ``"tier"`` was told to restore the digest it already holds."""
    now = model_weights_identity("tiny")
    for source in ("hub", "folder"):
        out = tmp_path / source
        _run_folder(out, {**now, "source": source, **({"digest": None, "method": None} if source == "hub" else {})})
        with pytest.raises(DamagedRunFolderError) as e:
            check_model_weights(out, "tiny", now)
        assert str(e.value) == (
            f"{out / 'config.json'} is damaged (field model_weights records source {source!r} for model 'tiny', which "
            "is a tier here): the initial weights the run started from cannot be checked; restore the file from a "
            f"copy, or delete {out} to start the run over")
