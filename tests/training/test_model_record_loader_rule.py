"""A run's record of its initial weights (``config.json``'s ``model_weights``) follows the loader's rule, and says what
changed in the words of the change:

* a model folder holding ``model.safetensors`` beside a ``model.safetensors.index.json`` was recorded by the index's
  shards, while ``from_pretrained`` (transformers 5) reads ``model.safetensors`` and ignores the index: the record
  hashed files the run never loaded (two rules for one folder). It now hashes ``model.safetensors``; a run recorded
  by the former rule resumes with a note when the shards it hashed are unchanged, and is refused (the fix: restore
  the folder) when they changed;
* a ``model.safetensors`` that is a symbolic link re-pointed at other weights after the run started was told to
  "restore the weights the run started from" at a folder whose files were intact; it is now named as a link that
  points elsewhere, where it points now and then, and the fix is to point it back;
* a record whose ``method`` alone was edited by hand read as other weights; it now names the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from gradprobe.tiers import tier_path
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.run import run_training
from gradprobe.training.run_folder import check_model_weights, model_weights_identity

from helpers_rollout import one_thread
from helpers_training import killed_run, metric_lines, refused_before_loading

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
SHARD = "model-00001-of-00001.safetensors"


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    """An empty ``GRADPROBE_CACHE``: ``tiny`` is the shipped build, whatever this machine's cache holds."""
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_weights(src: Path, dst: Path) -> None:
    """``dst``: the safetensors file ``src`` with its last 100 bytes zeroed (other weights, still loadable)."""
    data = bytearray(src.read_bytes())
    data[-100:] = bytes(100)
    dst.write_bytes(bytes(data))


def _record(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())["model_weights"]


def _set_record(out: Path, record: dict) -> None:
    config = json.loads((out / "config.json").read_text())
    config["model_weights"] = record
    (out / "config.json").write_text(json.dumps(config))


def test_a_folder_with_model_safetensors_beside_an_index_is_recorded_by_what_the_loader_reads(tmp_path, capsys):
    """The shards the index names hold other weights than model.safetensors: the record hashes model.safetensors,
    which from_pretrained loads; a record of the former rule (the shards) resumes with a note while they are
    unchanged, is refused with the fix once one changed, and resumes when they are restored."""
    model = tmp_path / "model"
    shutil.copytree(tier_path("tiny"), model)
    from safetensors import safe_open

    with safe_open(str(model / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    _other_weights(model / "model.safetensors", model / SHARD)
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: SHARD for n in names}}))
    out = tmp_path / "run"
    run = killed_run(out, model=str(model))
    loaded = _sha(model / "model.safetensors")
    assert (_record(out)["files"], _record(out)["digest"]) == (["model.safetensors"], loaded)  # was [SHARD], its sha
    capsys.readouterr()
    former = {**_record(out), "files": [SHARD], "digest": _sha(model / SHARD)}  # what gradprobe recorded before
    _set_record(out, former)
    shard = (model / SHARD).read_bytes()
    (model / SHARD).write_bytes(shard[:-1] + bytes([shard[-1] ^ 1]))  # the shards the record hashed changed
    message = refused_before_loading(run, out, RunConfigMismatchError)
    folder = model.resolve()
    assert message == (
        f"{out} cannot be resumed: model {str(model)!r} now loads {folder / 'model.safetensors'} (sha256 "
        f"{loaded[:12]}), which from_pretrained reads beside {folder / 'model.safetensors.index.json'}, but the run "
        f"recorded its initial weights by gradprobe's former rule, as the shards that index names ({SHARD}; digest "
        f"{former['digest'][:12]}), and those hold other content now, so the folder changed since the run started, "
        "and the initial policy its kl_init is measured against may be another model than in its first updates; to "
        f"resume it, restore {folder} as it was when the run started (the shards of digest {former['digest'][:12]}, "
        f"and its model.safetensors), or start a new run under a new --out (not {out}); nothing was loaded or written")
    (model / SHARD).write_bytes(shard)  # the fix: the folder as it was
    run_training(run, out)
    assert [m["update"] for m in metric_lines(out) if not m.get("eval")][-1] == 2
    err = capsys.readouterr().err
    assert err.count("note: ") == 1
    assert (f"note: {out} recorded its initial weights by gradprobe's former rule: the shards that {folder}/"
            f"model.safetensors.index.json names ({SHARD}; unchanged since: digest {former['digest'][:12]}), not the "
            "model.safetensors beside it, which from_pretrained reads (and the run loaded), so whether "
            f"{folder / 'model.safetensors'} (sha256 {loaded[:12]}) is the file the run started from could not be "
            "checked; resuming") in err


def test_the_former_rule_note_comes_only_with_the_former_rule(tmp_path, capsys):
    """The note is read from the record and the folder: a record of model.safetensors resumes without it, and a
    record of the shards whose model.safetensors holds other files than the record names is not taken for one."""
    model = tmp_path / "model"
    shutil.copytree(tier_path("tiny"), model)
    shutil.copy(model / "model.safetensors", model / SHARD)
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {"x": SHARD}}))
    now = model_weights_identity(str(model))
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.json").write_text('{"update": 1}')
    (out / "config.json").write_text(json.dumps({"run": {}, "model_weights": now}))
    check_model_weights(out, str(model), now)
    assert capsys.readouterr().err == ""
    _set_record(out, {**now, "files": [SHARD]})  # the same digest (a copy), names the shard: the former rule
    check_model_weights(out, str(model), now)
    assert "by gradprobe's former rule" in capsys.readouterr().err
    _set_record(out, {**now, "files": ["other.safetensors"], "digest": "0" * 64})  # not the index's shards
    with pytest.raises(RunConfigMismatchError, match=r"now loads .* not .* \(sha256 000000000000\) as when the run"):
        check_model_weights(out, str(model), now)


def test_a_re_pointed_weights_link_is_named_with_where_it_points_and_pointing_it_back_resumes(tmp_path):
    """model.safetensors is an absolute symbolic link (the weights kept elsewhere), re-pointed at other weights
    after the run started: was "restore the weights the run started from at MODEL" (intact there)."""
    first, second, model = tmp_path / "first", tmp_path / "second", tmp_path / "model"
    shutil.copytree(tier_path("tiny"), model)
    first.mkdir()
    second.mkdir()
    (model / "model.safetensors").rename(first / "model.safetensors")
    _other_weights(first / "model.safetensors", second / "model.safetensors")
    link = model / "model.safetensors"
    link.symlink_to(first / "model.safetensors")
    out = tmp_path / "run"
    run = killed_run(out, model=str(model))
    then = _sha(first / "model.safetensors")
    assert _record(out)["links"] == {"model.safetensors": str((first / "model.safetensors").resolve())}
    link.unlink()
    link.symlink_to(second / "model.safetensors")  # re-pointed
    now = _sha(second / "model.safetensors")
    message = refused_before_loading(run, out, RunConfigMismatchError)
    folder, a, b = model.resolve(), (first / "model.safetensors").resolve(), (second / "model.safetensors").resolve()
    assert message == (
        f"{out} cannot be resumed: {folder / 'model.safetensors'} is a symbolic link that points to {b} now, not to "
        f"{a}, so it holds other weights than the run started with: model {str(model)!r} now loads "
        f"{folder / 'model.safetensors'} (sha256 {now[:12]}), not {folder / 'model.safetensors'} (sha256 {then[:12]}) "
        "as when the run started, so the initial policy its kl_init is measured against would be another model than "
        f"in its first updates; to resume it, point the link back: `ln -sfn '{a}' '{folder / 'model.safetensors'}'`, "
        f"or start a new run under a new --out (not {out}); nothing was loaded or written")
    _set_record(out, {k: v for k, v in _record(out).items() if k != "links"})  # a record from before links
    assert refused_before_loading(run, out, RunConfigMismatchError).startswith(
        f"{out} cannot be resumed: {folder / 'model.safetensors'} is a symbolic link that points to {b} now, so it "
        "holds other weights than the run started with: ")
    assert refused_before_loading(run, out, RunConfigMismatchError).endswith(
        f"to resume it, point {folder / 'model.safetensors'} back at the weights the run started from (digest "
        f"{then[:12]}), or start a new run under a new --out (not {out}); nothing was loaded or written")
    link.unlink()
    link.symlink_to(a)  # the fix: `ln -sfn A LINK`
    run_training(run, out)
    assert [m["update"] for m in metric_lines(out) if not m.get("eval")][-1] == 2


def test_a_record_whose_method_alone_was_edited_names_the_field(tmp_path):
    """Was: "now loads MODEL/model.safetensors (sha256 D), not MODEL (1 weight file(s), sampled sha256 of their
    content D)": the same digest twice, told as other weights, with a fix to restore intact weights."""
    model = tmp_path / "model"
    shutil.copytree(tier_path("tiny"), model)
    now = model_weights_identity(str(model))
    assert now["method"] == "sha256"
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.json").write_text('{"update": 1}')
    (out / "config.json").write_text(json.dumps({"run": {}, "model_weights": {**now, "method": "sampled-sha256"}}))
    with pytest.raises(DamagedRunFolderError) as e:
        check_model_weights(out, str(model), now)
    assert str(e.value) == (
        f"{out / 'config.json'} is damaged (field model_weights records \"method\" 'sampled-sha256' beside the digest "
        f"that method 'sha256' gives for the weights model {str(model)!r} loads now ({now['digest'][:12]}; no two "
        "methods give the same digest, so \"method\" alone was edited): set it back to 'sha256'): the initial weights "
        f"the run started from cannot be checked; restore the file from a copy, or delete {out} to start the run over")
    _set_record(out, now)
    check_model_weights(out, str(model), now)  # set back: resumes


def test_a_damaged_links_field_is_named(tmp_path):
    from gradprobe.training.run_folder import model_weights_problem

    model = tmp_path / "model"
    shutil.copytree(tier_path("tiny"), model)
    now = model_weights_identity(str(model))
    assert "links" not in now  # no link: not recorded
    for links in ([], {"other.safetensors": "/x"}, {"model.safetensors": 3}):
        assert model_weights_problem({**now, "links": links}).endswith(
            "it needs \"links\" an object of weight file names (of \"files\") to the paths those links point to")
    assert model_weights_problem({**now, "links": {"model.safetensors": os.fspath(tmp_path)}}) is None
