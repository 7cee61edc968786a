"""Tier lookup and ``gradprobe warmstart --out`` against a hostile user.

- ``tier_path`` hashed any seed as ``int(seed)``: ``seed=1.5`` or ``True`` found seed 1's build, ``"0"`` the shipped
  one, and a seed of -1 or 2**64 got a ``gradprobe warmstart --seed -1`` command that the command line refuses. A seed
  that is not an integer in [0, 2**63 - 1] is now refused as ``build_tier`` refuses it, naming ``seed`` and the range.
- ``tier_path(config={...})`` raised ``AttributeError: 'dict' object has no attribute 'to_dict'``; now a TypeError
  saying how to make a TinyTierConfig (as ``build_tier`` says).
- ``gradprobe warmstart --out COPY``, where COPY is a tier copy whose ``model.safetensors`` was re-saved as shards (with
  ``model.safetensors.index.json``) or as ``pytorch_model.bin``, said only "model.safetensors is missing ... rebuild it
  with --force", and ``--force`` replaces the whole folder, the user's weights with it. It now says that the folder
  holds those weights instead, why they are not read (a tier is identified by its one ``model.safetensors``, and only
  safetensors weights are loaded) and how to keep them. Refusing them stays right: shards would need the tier check
  (``gradprobe.models.tier_damage``) and the shipped-weights comparison to read several files, and a pickle file is
  never loaded.
"""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from gradprobe import tiers
from gradprobe.cli import warmstart as warmstart_cli
from gradprobe.tiers import TinyTierConfig, config_hash, tier_path

from helpers_warmstart import SHIPPED


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


SEED_MESSAGE = "seed (--seed) must be an integer in [0, 2**63 - 1] (it seeds numpy and torch), got "


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64, 1.5, True, "0", None])
def test_tier_path_refuses_a_seed_the_build_command_refuses(seed):
    with pytest.raises(ValueError) as err:
        tier_path("tiny", seed=seed)
    assert str(err.value) == SEED_MESSAGE + repr(seed)
    with pytest.raises(ValueError) as err:
        config_hash(TinyTierConfig(), seed)
    assert str(err.value) == SEED_MESSAGE + repr(seed)


def test_a_numpy_integer_seed_finds_the_build_of_its_value_and_a_huge_seed_is_shortened():
    import numpy as np

    assert tier_path("tiny", seed=np.int64(0)) == SHIPPED == tier_path("tiny", seed=0)
    assert config_hash(TinyTierConfig(), np.uint8(7)) == config_hash(TinyTierConfig(), 7)
    assert tiers.check_seed(np.int32(5)) == 5 and type(tiers.check_seed(np.int32(5))) is int
    with pytest.raises(ValueError) as err:
        tier_path("tiny", seed=10**5000)  # repr() of it raises
    assert str(err.value) == SEED_MESSAGE + "an integer of about 5001 digits"
    with pytest.raises(ValueError) as err:
        tier_path("tiny", seed="7" * 500)
    assert str(err.value) == SEED_MESSAGE + "'" + "7" * 39 + "... (502 characters)"

def test_a_float_seed_does_not_find_the_build_of_its_integer_part_and_valid_seeds_keep_their_folders(tmp_path):
    folder = tmp_path / "cache" / "tiers" / f"tiny-{config_hash(TinyTierConfig(), 1)}"
    folder.mkdir(parents=True)
    (folder / "warmstart.json").write_text("{}")
    assert tier_path("tiny", seed=1) == folder
    for seed in (1.5, True, 1.0):
        with pytest.raises(ValueError, match=r"^seed \(--seed\) must be an integer"):
            tier_path("tiny", seed=seed)
    assert tier_path("tiny", seed=0) == SHIPPED
    assert config_hash(TinyTierConfig(), 0) == "ef0cbbe61f4b"
    with pytest.raises(tiers.TierNotBuiltError, match=r"run `gradprobe warmstart --tier tiny --seed 7`"):
        tier_path("tiny", seed=7)


@pytest.mark.parametrize("config, hint", [({"steps": 5}, " (TinyTierConfig(**config) builds one from a dict)"),
                                          ("tiny", "")])
def test_tier_path_refuses_a_config_that_is_not_a_tiny_tier_config(config, hint):
    with pytest.raises(TypeError) as err:
        tier_path("tiny", config=config)
    assert str(err.value) == f"config must be a TinyTierConfig, got {type(config).__name__}{hint}"


def _run(argv, capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="gradprobe")
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    rc = warmstart_cli.warmstart_main(parser.parse_args(["warmstart", *argv]))
    return rc, capsys.readouterr().err


def _resaved(folder, how: str) -> list[str]:
    """Replace the tier copy's ``model.safetensors`` by shards plus index, or by ``pytorch_model.bin``; the new
    weight files' names."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    if how == "bin":
        (folder / "pytorch_model.bin").write_bytes(b"a pickled state dict")  # never read: refused before loading
        return ["pytorch_model.bin"]
    names = sorted(tensors)
    weight_map = {}
    for k, part in enumerate((names[: len(names) // 2], names[len(names) // 2:]), 1):
        shard = f"model-0000{k}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, str(folder / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return sorted(set(weight_map.values())) + ["model.safetensors.index.json"]


FORCE = "; --force replaces the whole folder and deletes those weights, so copy them elsewhere first)"
NOTES = {  # what the folder holds instead of model.safetensors -> the note after the damage
    "model.safetensors.index.json": (
        " (the folder holds model.safetensors.index.json and the shards it names instead: a tier build is read and "
        "identified by its one model.safetensors, so restore that file from a backup, or load the shards and save them "
        "as one file with save_pretrained, which writes model.safetensors for a model below its max_shard_size"
        + FORCE),
    "pytorch_model.bin": (
        " (the folder holds pytorch_model.bin instead: a tier build is read and identified by its one "
        "model.safetensors, and gradprobe loads safetensors weights only (a pickle file can run code when loaded), so "
        "restore model.safetensors from a backup, or, if you trust the file, load the model with transformers and save "
        "it with save_pretrained(folder), which writes model.safetensors" + FORCE)}


@pytest.mark.parametrize("how, held", [("shards", "model.safetensors.index.json"), ("bin", "pytorch_model.bin")])
def test_warmstart_out_on_a_resaved_tier_copy_says_force_deletes_its_weights(how, held, tmp_path, capsys):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    files = _resaved(folder, how)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    rc, err = _run(["--out", str(folder), "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'model.safetensors'} is missing{NOTES[held]}: "
        f"{folder} holds a damaged tier build; rebuild it with --force (force=True), or choose another folder for "
        "--out")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before and all(f in before for f in files)


def test_warmstart_out_on_a_sharded_copy_without_its_record_says_so_too(tmp_path, capsys):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _resaved(folder, "shards")
    (folder / "warmstart.json").unlink()
    rc, err = _run(["--out", str(folder), "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'warmstart.json'} is missing"
        f"{NOTES['model.safetensors.index.json']}: {folder} holds a damaged tier build; rebuild it with --force "
        "(force=True), delete the folder, or choose another folder for --out")
    (folder / "model.safetensors.index.json").unlink()  # weights missing outright: no note
    rc, err = _run(["--out", str(folder), "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'warmstart.json'} is missing: {folder} holds a damaged tier build; "
        "rebuild it with --force (force=True), delete the folder, or choose another folder for --out")


# ------------------------------------------------------------------ config.json that is JSON but not the model

def _no_build(*args, **kwargs):
    raise AssertionError("a build was started")


@pytest.mark.parametrize("edit, why", [
    (lambda c: {}, "no 'model_type'; the build's recipe gives 'qwen2'"),
    (lambda c: {**c, "model_type": "llama"}, "model_type is 'llama', the build's recipe gives 'qwen2'"),
    (lambda c: {**c, "hidden_size": 64}, "hidden_size is 64, the build's recipe gives 128"),
    (lambda c: {**c, "num_hidden_layers": True}, "num_hidden_layers is True, the build's recipe gives 4"),
    (lambda c: {k: v for k, v in c.items() if k != "vocab_size"}, "no 'vocab_size'; the build's recipe gives 101"),
])
def test_warmstart_out_refuses_a_config_json_that_is_not_the_recipes_model(edit, why, tmp_path, monkeypatch, capsys):
    """It was reused ("reused an earlier build") and then failed to load with transformers' own error."""
    from gradprobe import warmstart

    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    config = folder / "config.json"
    config.write_text(json.dumps(edit(json.loads(config.read_text()))))
    rc, err = _run(["--out", str(folder), "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {config} is damaged ({why}): {folder} holds a damaged tier build; rebuild it "
        "with --force (force=True), or choose another folder for --out")


def test_a_cache_build_whose_config_json_is_not_the_recipes_model_is_rebuilt(tmp_path, monkeypatch, caplog):
    from gradprobe import warmstart

    from helpers_warmstart import fake_build

    calls: list = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    folder = shutil.copytree(SHIPPED, tmp_path / "cache" / "tiers" / SHIPPED.name)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    path, reused = warmstart.build_or_reuse_tier("tiny", progress=False)
    assert (path, reused, len(calls)) == (folder, False, 1)
    assert json.loads((folder / "config.json").read_text()) == json.loads((SHIPPED / "config.json").read_text())
    assert f"{folder / 'config.json'} is damaged (no 'vocab_size'; the build's recipe gives 101)" in caplog.text


def test_the_shipped_llama_tier_still_reads_as_its_recipe(tmp_path, capsys):
    folder = shutil.copytree(tiers.shipped_root() / "tiny-llama-sft-dd5c45615d25", tmp_path / "llama")
    rc, err = _run(["--out", str(folder), "--tier", "tiny-llama-sft", "--no-progress"], capsys)
    assert (rc, err) == (0, "")
    (folder / "config.json").write_text((SHIPPED / "config.json").read_text())  # the qwen2 tier's config
    rc, err = _run(["--out", str(folder), "--tier", "tiny-llama-sft", "--no-progress"], capsys)
    assert rc == 2 and f"{folder / 'config.json'} is damaged (model_type is 'qwen2', the build's recipe gives " \
        "'llama')" in err


# ----------------------------------------------------------------------------- building over the shipped builds

@pytest.mark.parametrize("where", ["the build, --force", "a new folder inside", "the root, --force", "cache, --force"])
def test_warmstart_never_builds_into_the_shipped_builds(where, tmp_path, monkeypatch, capsys):
    """``--out gradprobe/data/tiers/tiny-<hash> --force`` (or GRADPROBE_CACHE=gradprobe/data) rebuilt the package's
    reference weights in place; a stand-in shipped folder (a copy) is used here, the real one is never touched."""
    from gradprobe import warmstart

    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    shipped = tmp_path / "package" / "tiers"
    build = shutil.copytree(SHIPPED, shipped / SHIPPED.name)
    monkeypatch.setattr(warmstart, "shipped_root", lambda: shipped)
    before = {p.name: p.read_bytes() for p in build.iterdir()}
    argv = {"the build, --force": ["--out", str(build), "--force"],
            "a new folder inside": ["--out", str(shipped / "x")],
            "the root, --force": ["--out", str(shipped), "--force"], "cache, --force": ["--force"]}[where]
    if where == "cache, --force":
        monkeypatch.setenv("GRADPROBE_CACHE", str(shipped.parent))
    rc, err = _run([*argv, "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1].endswith(
        f" is inside {shipped}, the tier builds shipped with gradprobe (the weights its shipped studies, reference "
        "curves and calibration were measured on), which gradprobe warmstart never rebuilds; build into the cache "
        "instead (no --out, and GRADPROBE_CACHE not pointing into the package) or into another --out folder")
    assert {p.name: p.read_bytes() for p in build.iterdir()} == before
    assert sorted(p.name for p in shipped.iterdir()) == [SHIPPED.name]
    assert _run(["--out", str(build), "--no-progress"], capsys) == (0, "")  # reusing it stays allowed


# ----------------------------------------------------------------------------- weights of another model

def _rewrite_weights(folder, edit) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    save_file(edit(tensors), str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("how, why", [
    ("llama", "no tensor model.layers.0.self_attn.k_proj.bias, model.layers.0.self_attn.q_proj.bias and 10 more"),
    ("extra", "tensors the recipe's model has not: extra.weight"),
    ("shape", "model.norm.weight has shape [64], the recipe's model [128]"),
    ("dropped", "no tensor model.norm.weight"),
])
def test_warmstart_out_refuses_weights_that_are_not_the_recipes_model(how, why, tmp_path, monkeypatch, capsys):
    """A tier copy holding the other tier's model.safetensors (every tensor readable) was reused, its recorded accuracy
    printed, and loaded with the missing attention biases initialised at random (a transformers report, no error)."""
    import torch

    from gradprobe import warmstart

    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    if how == "llama":
        shutil.copy(tiers.shipped_root() / "tiny-llama-sft-dd5c45615d25" / "model.safetensors", folder)
    else:
        edits = {"extra": lambda t: {**t, "extra.weight": torch.zeros(2)},
                 "shape": lambda t: {**t, "model.norm.weight": torch.ones(64)},
                 "dropped": lambda t: {k: v for k, v in t.items() if k != "model.norm.weight"}}
        _rewrite_weights(folder, edits[how])
    rc, err = _run(["--out", str(folder), "--no-progress"], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'model.safetensors'} is damaged (not the weights of the recipe's "
        f"model: {why}): {folder} holds a damaged tier build; rebuild it with --force (force=True), or choose another "
        "folder for --out")
