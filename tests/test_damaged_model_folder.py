"""A damaged plain model folder (``save_pretrained`` output, no tier marker): a cut ``model.safetensors`` passed the
study preflight and then failed every run (``SafetensorError``), ``gradprobe train``/``probe`` printed a traceback,
and a cut ``config.json`` was reported as a tokenizer that does not load. Each is now named, with what is wrong and
the fix (restore the folder or re-save the model), before the study folder is written and as one CLI error line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.models import ModelFolderDamagedError, load_policy, load_tokenizer, model_folder_damage
from gradprobe.study.preflight import PreflightError, check_plan_inputs
from gradprobe.training.plan import parse_plan

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

FIX = "from where it came from (a copy, or `hf download ORG/NAME --local-dir {f}` for a hub model), or re-save the " \
      "model there with model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)"


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A healthy folder: the random tiny-qwen2 and its tokenizer, written by ``save_pretrained``."""
    folder = tmp_path_factory.mktemp("saved") / "model"
    policy = load_policy("tiny-qwen2", seed=3)
    policy.model.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    assert not (folder / "gradprobe_tier.json").exists() and (folder / "model.safetensors").is_file()
    return folder


def _copy(saved: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "model"))


def _cut(path: Path) -> tuple[int, int]:
    """Cut ``path`` to half its bytes; (bytes kept, bytes before)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return len(data) // 2, len(data)


def _cut_json(path: Path) -> tuple[int, int]:
    """Cut the JSON file ``path`` to half its text; (line, column) where ``json`` finds it invalid."""
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(path.read_text())
    return info.value.lineno, info.value.colno


def _plan(tmp_path: Path, folder: Path) -> Path:
    text = toy_plan("damaged", seeds=(0,), generated_tokens=200, checkpoint_every=None)
    return write_plan(tmp_path, text.replace('name = "tiny-qwen2"', f'name = "{folder}"'))


def test_the_study_preflight_refuses_cut_weights_before_the_folder_is_written(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    plan = _plan(tmp_path, folder)
    assert check_plan_inputs(parse_plan(plan.read_text()), executor="inline").model_source == str(folder)  # healthy
    kept, before = _cut(folder / "model.safetensors")
    out = tmp_path / "study"
    assert main(["study", str(plan), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"gradprobe study: error: [model] name = '{folder}': {folder}/model.safetensors is damaged "
                           f"(cut short: {kept:,} of the {before:,} bytes its header declares); restore the model "
                           f"folder {folder} {FIX.format(f=folder)} (checked before the study folder was written; "
                           f"nothing was)")
    assert not out.exists()  # no study folder, so no runs
    with pytest.raises(PreflightError, match="model.safetensors is damaged"):
        check_plan_inputs(parse_plan(plan.read_text()), executor="inline")


def test_the_study_preflight_names_a_cut_config_json_not_the_tokenizer(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    line, column = _cut_json(folder / "config.json")
    out = tmp_path / "study"
    assert main(["study", str(_plan(tmp_path, folder)), "--out", str(out), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert f"[model] name = '{folder}': {folder}/config.json is damaged (invalid JSON at line {line} column " \
           f"{column}: " in err and f"cut short?); restore the model folder {folder} {FIX.format(f=folder)}" in err
    assert "tokenizer does not load" not in err and not out.exists()


def _preflight_refusal(tmp_path, folder) -> str:
    """The study preflight's refusal of a plan on the model folder ``folder``."""
    with pytest.raises(PreflightError) as info:
        check_plan_inputs(parse_plan(_plan(tmp_path, folder).read_text()), executor="inline")
    return str(info.value)


def test_the_study_preflight_refuses_a_folder_without_safetensors_weights(saved, tmp_path, monkeypatch):
    """It passed the preflight and every run failed on "has no model weights"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors").unlink()
    assert _preflight_refusal(tmp_path, folder) == (
        f"[model] name = '{folder}': the folder '{folder}' has no safetensors weights "
                               "(model.safetensors or model.safetensors.index.json, what from_pretrained reads; "
                               "gradprobe loads safetensors only); save the model there with "
                               "`model.save_pretrained(folder)` (it writes model.safetensors) (checked before the "
                               "study folder was written; nothing was)")


def test_train_prints_one_error_line_for_cut_weights(saved, tmp_path, capsys):
    folder = _copy(saved, tmp_path)
    kept, before = _cut(folder / "model.safetensors")
    out = tmp_path / "run"
    assert main(["train", "--plan", str(_plan(tmp_path, folder)), "--arm", "grpo", "--out", str(out),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"gradprobe train: error: {folder}/model.safetensors is damaged (cut short: {kept:,} of the "
                           f"{before:,} bytes its header declares); restore the model folder {folder} "
                           f"{FIX.format(f=folder)}")
    assert not out.exists()


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_probe_prints_one_error_line_for_a_cut_file(saved, tmp_path, capsys, name):
    folder = _copy(saved, tmp_path)
    _cut(folder / name)
    out = tmp_path / "probe"
    assert main(["probe", "--model", str(folder), "--task", "chain_sum", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gradprobe probe: error: {folder}/{name} is damaged (") and len(err.splitlines()) == 1
    assert err.endswith(f"restore the model folder {folder} {FIX.format(f=folder)}") and not out.exists()


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_load_tokenizer_names_the_cut_json_file(saved, tmp_path, name):
    folder = _copy(saved, tmp_path)
    line, column = _cut_json(folder / name)
    with pytest.raises(ModelFolderDamagedError) as info:
        load_tokenizer(str(folder))
    assert str(info.value).startswith(f"{folder}/{name} is damaged (invalid JSON at line {line} column {column}: ")
    assert isinstance(info.value, ValueError)  # the CLIs' one-line errors


def test_other_damage_is_named(saved, tmp_path):
    """A cut generation_config.json was silently dropped (its EOS ids lost); an empty config.json, bytes after the
    tensors' data, a missing shard of an index: each named."""
    folder = _copy(saved, tmp_path)
    assert model_folder_damage(folder) is None
    _cut_json(folder / "generation_config.json")
    with pytest.raises(ModelFolderDamagedError, match=r"generation_config.json is damaged \(invalid JSON at line"):
        load_policy(str(folder))
    assert load_tokenizer(str(folder)) is not None  # the tokenizer alone does not read the generation config
    shutil.copy(saved / "generation_config.json", folder)
    (folder / "config.json").write_text("")
    assert model_folder_damage(folder) == f"{folder}/config.json is damaged (it is empty)"
    shutil.copy(saved / "config.json", folder)
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes() + b"xx")
    assert model_folder_damage(folder) == (f"{weights} is damaged (2 bytes more than the {size:,} its header "
                                           "declares)")
    (folder / "model.safetensors").unlink()  # an index is read only without model.safetensors
    shutil.copy(saved / "model.safetensors", folder / "model-00001-of-00002.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                        "b": "model-00002-of-00002.safetensors"}}))
    assert model_folder_damage(folder) == (f"{folder}/model-00002-of-00002.safetensors is missing (named in "
                                           "model.safetensors.index.json)")


def test_a_hub_model_with_cut_cached_weights_is_one_error(monkeypatch):
    """A hub id's cached weights are not checked beforehand: safetensors' error becomes a ValueError naming the
    model and the re-download."""
    import transformers
    from safetensors import SafetensorError

    from gradprobe import models
    from gradprobe.char_tokenizer import char_tokenizer

    def cut(*args, **kwargs):
        raise SafetensorError("Error while deserializing header: incomplete metadata, file not fully covered")

    monkeypatch.setattr(models, "_pretrained_tokenizer", lambda source, kwargs: char_tokenizer())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", cut)
    with pytest.raises(ModelFolderDamagedError) as info:
        load_policy("some-org/some-model")
    assert str(info.value) == ("the safetensors weights of model 'some-org/some-model' cannot be read (Error while "
                               "deserializing header: incomplete metadata, file not fully covered); download it again "
                               "(`hf download some-org/some-model --force-download`)")


@pytest.mark.parametrize("name, data", [("old_backup.safetensors", b"x" * 1000), ("training_state.safetensors", b"")])
def test_a_stray_damaged_safetensors_file_is_not_checked(saved, tmp_path, monkeypatch, name, data):
    """A breaker: a healthy folder holding an unrelated damaged ``*.safetensors`` beside ``model.safetensors`` was
    refused by the preflight and load_policy, though ``from_pretrained`` never reads it and loads the folder."""
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    (folder / name).write_bytes(data)
    assert model_folder_damage(folder) is None
    assert check_plan_inputs(parse_plan(_plan(tmp_path, folder).read_text()), executor="inline").model_source == \
        str(folder)
    policy = load_policy(str(folder))
    reference = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
    assert policy.model.state_dict().keys() == reference.state_dict().keys()
    assert all(v.equal(reference.state_dict()[k]) for k, v in policy.model.state_dict().items())


def test_a_stale_damaged_index_beside_model_safetensors_is_not_checked(saved, tmp_path):
    """from_pretrained reads model.safetensors when it exists and never opens the index beside it."""
    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors.index.json").write_text('{"weight_map": ')
    assert model_folder_damage(folder) is None
    assert load_policy(str(folder)).model is not None


def test_only_a_stray_safetensors_file_is_no_weights(saved, tmp_path, monkeypatch):
    """A folder whose only weights file is ``old_backup.safetensors`` passed the preflight (any ``*.safetensors``
    counted) and every run failed on transformers' "no file named model.safetensors"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors").rename(folder / "old_backup.safetensors")
    assert _preflight_refusal(tmp_path, folder) == (
        f"[model] name = '{folder}': the folder '{folder}' has no safetensors weights "
                               "(model.safetensors or model.safetensors.index.json, what from_pretrained reads; "
                               "gradprobe loads safetensors only; old_backup.safetensors is not read); save the model "
                               "there with `model.save_pretrained(folder)` (it writes model.safetensors) (checked "
                               "before the study folder was written; nothing was)")
    with pytest.raises(ModelFolderDamagedError) as info:
        load_policy(str(folder))
    assert str(info.value) == (f"{folder}/model.safetensors is missing (from_pretrained reads it, or the shards a "
                               "model.safetensors.index.json names; old_backup.safetensors is not read); restore the "
                               f"model folder {folder} {FIX.format(f=folder)}")


WHAT = 'an object mapping tensor names to shard files, e.g. {"lm_head.weight": "model-00001-of-00002.safetensors"}'


@pytest.mark.parametrize("index, why", [
    ({"metadata": {"total_size": 1}}, f"its field weight_map is missing: it must be {WHAT}"),
    ({"weight_map": ["a"]}, f"its field weight_map is a JSON list, not {WHAT}"),
    ({"weight_map": {}}, "its field weight_map is empty: it names no shard file"),
    ({"metadata": {}, "weight_map": {"lm_head.weight": 1}}, "weight_map['lm_head.weight'] is 1, not a shard file name"),
    ({"weight_map": {"lm_head.weight": "model-00001-of-00001.safetensors"}},
     'its field metadata is missing: it must be an object, e.g. {"total_size": 1024}'),
    ({"metadata": [], "weight_map": {"lm_head.weight": "model-00001-of-00001.safetensors"}},
     'its field metadata is a JSON list: it must be an object, e.g. {"total_size": 1024}'),
])
def test_a_sharded_folder_with_a_damaged_weight_map_is_refused(saved, tmp_path, capsys, monkeypatch, index, why):
    """A breaker: ``{"weight_map": ["a"]}`` or no weight_map passed the check and the preflight, and ``gradprobe
    train`` printed transformers' traceback (AttributeError: 'list' object has no attribute 'values' / KeyError)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    damage = f"{folder}/model.safetensors.index.json is damaged ({why})"
    assert model_folder_damage(folder) == damage
    plan = _plan(tmp_path, folder)
    with pytest.raises(PreflightError) as info:
        check_plan_inputs(parse_plan(plan.read_text()), executor="inline")
    assert str(info.value) == (f"[model] name = '{folder}': {damage}; restore the model folder {folder} "
                               f"{FIX.format(f=folder)} (checked before the study folder was written; nothing was)")
    out = tmp_path / "run"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (f"gradprobe train: error: {damage}; restore the model folder {folder} "
                                               f"{FIX.format(f=folder)}")
    assert not out.exists()


def test_a_sound_sharded_folder_loads(saved, tmp_path):
    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    from safetensors import safe_open

    with safe_open(str(folder / "model-00001-of-00001.safetensors"), "pt") as f:
        names = list(f.keys())
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}))
    (folder / "old_backup.safetensors").write_bytes(b"")  # not named by the index: not read
    assert model_folder_damage(folder) is None
    assert load_policy(str(folder)).model is not None


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_a_json_file_with_a_byte_order_mark_is_named_as_such(saved, tmp_path, name):
    """transformers reads its JSON files as plain UTF-8 and refuses one starting with a UTF-8 byte-order mark ("not a
    valid JSON file" / "Unexpected UTF-8 BOM"), so it stays refused, but as what it is, not as "cut short?"."""
    folder = _copy(saved, tmp_path)
    path = folder / name
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    with pytest.raises(ModelFolderDamagedError) as info:
        load_tokenizer(str(folder))
    assert str(info.value) == (f"{path} is damaged (it starts with a UTF-8 byte-order mark, which transformers does "
                               f"not read); restore the model folder {folder} {FIX.format(f=folder)}")


def _sharded_in_subfolder(tmp_path: Path) -> tuple[Path, object]:
    """The random tiny-qwen2 saved in 4 shards (``max_shard_size``), the shards moved into ``shards/`` and the
    index edited to name them there; (the folder, the policy saved)."""
    folder = tmp_path / "model"
    policy = load_policy("tiny-qwen2", seed=3)
    policy.model.save_pretrained(folder, max_shard_size="100KB")
    policy.tokenizer.save_pretrained(folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    (folder / "shards").mkdir()
    for name in set(index["weight_map"].values()):
        (folder / name).rename(folder / "shards" / name)
    index["weight_map"] = {k: f"shards/{v}" for k, v in index["weight_map"].items()}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert not list(folder.glob("*.safetensors"))
    return folder, policy


def test_shards_in_a_subfolder_load_as_transformers_loads_them_and_are_hashed(tmp_path, monkeypatch):
    """An index naming ``shards/model-0000N-of-00004.safetensors``: transformers loads it (the names are joined to
    the folder), but load_policy said "has no model weights (*.safetensors)" (it looked for them beside config.json
    only), after the study preflight had let it through."""
    import hashlib

    import torch
    from transformers import AutoModelForCausalLM

    from gradprobe.training.run_folder import model_weights_identity

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, saved_policy = _sharded_in_subfolder(tmp_path)
    shards = [f"shards/model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    expected = saved_policy.model.state_dict()
    plain = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)  # the installed transformers' rule
    assert all(torch.equal(plain.state_dict()[k], v) for k, v in expected.items())
    assert model_folder_damage(folder) is None
    loaded = load_policy(str(folder)).model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in expected.items())
    listing = "".join(f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in shards)
    identity = model_weights_identity(str(folder))
    assert (identity["files"], identity["digest"]) == (shards, hashlib.sha256(listing.encode()).hexdigest())
    assert check_plan_inputs(parse_plan(_plan(tmp_path, folder).read_text()), executor="inline").model_source == \
        str(folder)
    (folder / shards[2]).unlink()  # a shard gone: named, not "no model weights"
    with pytest.raises(ModelFolderDamagedError) as info:
        load_policy(str(folder))
    assert str(info.value).startswith(f"{folder / shards[2]} is missing (named in model.safetensors.index.json); ")


def test_a_shard_named_outside_the_folder_is_refused_as_transformers_refuses_it(saved, tmp_path):
    """``../elsewhere.safetensors``: it exists, so the folder passed the check, and transformers' ValueError
    ("points outside the model directory") came from the load as a traceback."""
    from transformers import AutoModelForCausalLM

    folder = _copy(saved, tmp_path)
    (folder / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"lm_head.weight": "../elsewhere.safetensors"}}))
    with pytest.raises(ValueError, match="points outside the model directory"):
        AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
    damage = (f"{folder}/model.safetensors.index.json is damaged (weight_map['lm_head.weight'] names "
              "'../elsewhere.safetensors', outside the model folder, and transformers does not load a shard named by "
              "an absolute path or with '..': a shard is named relative to the folder, e.g. "
              '"model-00001-of-00002.safetensors" or "shards/model-00001-of-00002.safetensors")')
    assert model_folder_damage(folder) == damage
    with pytest.raises(ModelFolderDamagedError) as info:
        load_policy(str(folder))
    assert str(info.value) == f"{damage}; restore the model folder {folder} {FIX.format(f=folder)}"
