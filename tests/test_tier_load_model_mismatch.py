"""Loading a tier folder whose config.json or model.safetensors is not the model its recorded recipe builds.

``gradprobe warmstart`` refused such a build (``config.json`` of another model type or shape, weights of another
model), but ``load_policy`` on the folder (``--model tiny``, a tier path: probe, train, study) did not: a
``config.json`` without ``model_type`` gave transformers' own error, and the other tier's weights loaded with the
tensors they lack initialised at random (a log report, no error). A ``config.json`` that unties the embeddings
(``tie_word_embeddings`` false, or absent, which Qwen2 reads as false) or adds Llama attention biases passed both
checks and loaded a random ``lm_head`` or random biases. Loading now refuses these, naming the file, what differs
and the ``gradprobe warmstart ... --force`` command; a legitimate build (extra config keys transformers writes, a
tied ``lm_head.weight`` saved in the file, a build of another format version) and a plain model folder still load.
"""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from gradprobe.cli import warmstart as warmstart_cli
from gradprobe.models import TierDamagedError, load_policy
from gradprobe.tiers import shipped_root

from helpers_warmstart import SHIPPED

LLAMA = shipped_root() / "tiny-llama-sft-dd5c45615d25"


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _edit_config(folder, edit) -> None:
    path = folder / "config.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text())), indent=2))


def _rewrite_weights(folder, edit) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    save_file(edit(tensors), str(folder / "model.safetensors"), metadata={"format": "pt"})


def _refusal(folder, tier: str = "tiny") -> str:
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    message = str(err.value)
    assert message.startswith(f"the tier in {folder} is damaged: ")
    assert message.endswith(
        f"; --force replaces the whole folder, so first copy elsewhere what you keep in {folder} (any file of yours in "
        f"it is lost); rebuild it with `gradprobe warmstart --tier {tier} --out '{folder}' --force`")
    return message[len(f"the tier in {folder} is damaged: "):message.index("; --force replaces")]


@pytest.mark.parametrize("edit, why", [
    (lambda c: {k: v for k, v in c.items() if k != "model_type"}, "no 'model_type'; the build's recipe gives 'qwen2'"),
    (lambda c: {**c, "model_type": "llama"}, "model_type is 'llama', the build's recipe gives 'qwen2'"),
    (lambda c: {**c, "num_hidden_layers": 2}, "num_hidden_layers is 2, the build's recipe gives 4"),
    (lambda c: {**c, "vocab_size": 128}, "vocab_size is 128, the build's recipe gives 101"),
    (lambda c: {**c, "tie_word_embeddings": False}, "tie_word_embeddings is False, the build's recipe gives True"),
    (lambda c: {k: v for k, v in c.items() if k != "tie_word_embeddings"},
     "no 'tie_word_embeddings', which transformers reads as False for model_type 'qwen2'; the build's recipe gives "
     "True"),
])
def test_loading_a_tier_whose_config_json_is_not_its_recipes_model_is_refused(edit, why, tmp_path):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _edit_config(folder, edit)
    assert _refusal(folder) == f"{folder / 'config.json'} is damaged ({why})"


def test_loading_the_llama_tier_with_attention_biases_or_another_head_size_is_refused(tmp_path):
    folder = shutil.copytree(LLAMA, tmp_path / "llama")
    _edit_config(folder, lambda c: {**c, "attention_bias": True})
    assert _refusal(folder, "tiny-llama-sft") == (
        f"{folder / 'config.json'} is damaged (attention_bias is True, the build's recipe gives False)")
    _edit_config(folder, lambda c: {**c, "attention_bias": False, "head_dim": 32})
    assert _refusal(folder, "tiny-llama-sft") == (
        f"{folder / 'config.json'} is damaged (head_dim is 32, the build's recipe gives 16)")


@pytest.mark.parametrize("source, target, tier, why", [
    (LLAMA, SHIPPED, "tiny", "no tensor model.layers.0.self_attn.k_proj.bias, model.layers.0.self_attn.q_proj.bias "
                             "and 10 more"),
    (SHIPPED, LLAMA, "tiny-llama-sft", "tensors the recipe's model has not: model.layers.0.self_attn.k_proj.bias, "
                                       "model.layers.0.self_attn.q_proj.bias and 10 more"),
])
def test_loading_a_tier_holding_the_other_tiers_weights_is_refused(source, target, tier, why, tmp_path):
    folder = shutil.copytree(target, tmp_path / "mytier")
    shutil.copy(source / "model.safetensors", folder / "model.safetensors")
    assert _refusal(folder, tier) == (
        f"{folder / 'model.safetensors'} is damaged (not the weights of the recipe's model: {why})")


def test_a_tied_lm_head_saved_in_the_file_loads_and_one_of_another_shape_is_refused(tmp_path):
    import torch

    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _rewrite_weights(folder, lambda t: {**t, "lm_head.weight": t["model.embed_tokens.weight"].clone()})
    policy = load_policy(str(folder))
    assert policy.model.lm_head.weight.data_ptr() == policy.model.model.embed_tokens.weight.data_ptr()
    _rewrite_weights(folder, lambda t: {**t, "lm_head.weight": torch.zeros(3, 128)})
    assert _refusal(folder) == (f"{folder / 'model.safetensors'} is damaged (not the weights of the recipe's model: "
                                "lm_head.weight has shape [3, 128], the recipe's model [101, 128])")


def test_a_tier_without_a_record_is_checked_against_its_config_json(tmp_path):
    """Only the marker: no recipe to compare config.json with, but the weights must still be its model's."""
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    (folder / "warmstart.json").unlink()
    assert load_policy(str(folder)).model.config.model_type == "qwen2"
    shutil.copy(LLAMA / "model.safetensors", folder / "model.safetensors")
    assert _refusal(folder) == (
        f"{folder / 'model.safetensors'} is damaged (not the weights of the model its config.json describes: no tensor "
        "model.layers.0.self_attn.k_proj.bias, model.layers.0.self_attn.q_proj.bias and 10 more)")


def test_legitimate_builds_load_and_a_plain_model_folder_is_not_checked(tmp_path):
    """Keys transformers adds (torch_dtype, another transformers_version), 1e-6 written as 1e-06, a record of another
    format version (its vocabulary unchecked) load; a plain folder (no marker, no record) holding the other tier's
    weights is transformers' business, as before; the same weights in a tier copy are refused."""
    for tier in ("tiny", "tiny-llama-sft"):
        assert load_policy(tier).model.config.num_hidden_layers == 4
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _edit_config(folder, lambda c: {**c, "torch_dtype": "float32", "transformers_version": "4.40.0",
                                    "rms_norm_eps": 1e-6, "architectures": ["Qwen2ForCausalLM"]})
    record = folder / "warmstart.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "format_version": 0}))
    assert load_policy(str(folder)).model.config.rms_norm_eps == 1e-06
    plain = shutil.copytree(SHIPPED, tmp_path / "plain", ignore=shutil.ignore_patterns("gradprobe_tier.json",
                                                                                        "warmstart.json"))
    shutil.copy(LLAMA / "model.safetensors", plain / "model.safetensors")
    assert load_policy(str(plain)).model.config.model_type == "qwen2"
    shutil.copy(LLAMA / "model.safetensors", folder / "model.safetensors")
    assert _refusal(folder).startswith(f"{folder / 'model.safetensors'} is damaged (not the weights of the recipe's")


def test_loading_a_tier_copy_resaved_as_pytorch_model_bin_says_how_to_keep_its_weights(tmp_path):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    assert _refusal(folder) == (
        f"{folder / 'model.safetensors'} is missing (the folder holds pytorch_model.bin instead: a tier build is read "
        "and identified by its one model.safetensors, and gradprobe loads safetensors weights only (a pickle file can "
        "run code when loaded), so restore model.safetensors from a backup, or, if you trust the file, load the model "
        "with transformers and save it with save_pretrained(folder), which writes model.safetensors)")
    assert (folder / "pytorch_model.bin").is_file()


def test_warmstart_out_refuses_a_config_json_that_unties_the_embeddings(tmp_path, capsys):
    """2e46f0d compared model_type, shape and vocab_size only: an untied copy was reused, then loaded a random
    lm_head."""
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _edit_config(folder, lambda c: {**c, "tie_word_embeddings": False})
    parser = argparse.ArgumentParser(prog="gradprobe")
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    rc = warmstart_cli.warmstart_main(parser.parse_args(["warmstart", "--out", str(folder), "--no-progress"]))
    err = capsys.readouterr().err
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'config.json'} is damaged (tie_word_embeddings is False, the build's "
        f"recipe gives True): {folder} holds a damaged tier build; rebuild it with --force (force=True), or choose "
        "another folder for --out")


def test_warmstart_out_reuses_a_build_whose_file_also_holds_the_tied_lm_head(tmp_path, capsys):
    """2e46f0d called a tied ``lm_head.weight`` saved beside ``model.embed_tokens.weight`` a tensor the recipe's model
    has not, though transformers loads it as the tied head; one of another shape stays refused."""
    import torch

    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _rewrite_weights(folder, lambda t: {**t, "lm_head.weight": t["model.embed_tokens.weight"].clone()})
    parser = argparse.ArgumentParser(prog="gradprobe")
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    argv = ["warmstart", "--out", str(folder), "--no-progress"]
    assert (warmstart_cli.warmstart_main(parser.parse_args(argv)), capsys.readouterr().err) == (0, "")
    _rewrite_weights(folder, lambda t: {**t, "lm_head.weight": torch.zeros(101, 64)})
    assert warmstart_cli.warmstart_main(parser.parse_args(argv)) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"gradprobe warmstart: error: {folder / 'model.safetensors'} is damaged (not the weights of the recipe's "
        "model: lm_head.weight has shape [101, 64], the recipe's model [101, 128]): "
        f"{folder} holds a damaged tier build; rebuild it with --force (force=True), or choose another folder for "
        "--out")


def test_a_config_json_transformers_cannot_read_or_build_is_named_not_raised_raw(tmp_path):
    """transformers' own KeyError or validation error came out of load_policy; it is now the named file's damage."""
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    _edit_config(folder, lambda c: {**c, "hidden_act": "banana"})
    assert _refusal(folder) == f"{folder / 'config.json'} is damaged (hidden_act is 'banana', the build's recipe " \
                               "gives 'silu')"
    (folder / "warmstart.json").unlink()  # no recipe: only what transformers makes of config.json
    assert _refusal(folder) == f"{folder / 'config.json'} is damaged (transformers cannot build its model: " \
                               "KeyError: 'banana')"
    _edit_config(folder, lambda c: {**c, "hidden_act": "silu", "num_hidden_layers": 2})
    assert _refusal(folder).startswith(f"{folder / 'config.json'} is damaged (transformers cannot read it: ")
    assert "`num_hidden_layers` (2) must be equal to the number of `layer_types` (4)" in _refusal(folder)
