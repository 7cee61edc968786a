"""A model's folder as a run's ``--out`` (FINDINGS 2): a tier (``warmstart.json``) or ``save_pretrained`` weights
(config.json + model.safetensors) is refused as a study's or a probe's folder is, "holds a model (...), not a training
run: choose another --out", exit 2, before the plan is read and before any lock file is written; it is no damaged run
(no advice to delete the model). :func:`gradprobe.layout.output_kind` names the kind; a run's own folder (its
config.json has the "run" key) is still a run."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.cli.train import add_train_parser, train_main
from gradprobe.layout import OUTPUT_KINDS, output_kind
from gradprobe.outputs import OutputDirError
from gradprobe.tiers import shipped_root

from helpers_training import tiny_plan


def _tier_copy(tmp_path) -> Path:
    tier = next(p for p in sorted(shipped_root().iterdir()) if (p / "warmstart.json").is_file())
    return Path(shutil.copytree(tier, tmp_path / "tier"))


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _args(plan: Path, out: Path):
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress",
                              "--updates", "1"])


@pytest.mark.parametrize("files, expected", [
    ({"config.json": {"model_type": "qwen2"}, "model.safetensors": None}, ("model", "config.json + model.safetensors")),
    ({"config.json": {"model_type": "llama"}, "pytorch_model.bin": None}, ("model", "config.json + pytorch_model.bin")),
    ({"config.json": "{cut", "model.safetensors": None}, ("model", "config.json + model.safetensors")),
    ({"warmstart.json": {}, "config.json": {}}, ("model", "warmstart.json")),
    ({"gradprobe_tier.json": {}}, ("model", "gradprobe_tier.json")),
    ({"warmstart.json": {}, "probe.json": {}}, ("model", "warmstart.json")),  # a probe once written beside a tier
    ({"config.json": {"run": {}}, "model.safetensors": None}, None),  # a run's config.json: no model
    ({"model.safetensors": None}, None),  # weights without a config
    ({"config.json": {"run": {}}, "metrics.jsonl": None}, ("run", "metrics.jsonl")),
])
def test_output_kind_names_a_model_folder(tmp_path, files, expected):
    for name, content in files.items():
        (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content or {}))
    assert output_kind(tmp_path) == expected
    assert expected is None or expected[0] in OUTPUT_KINDS


def test_gradprobe_train_refuses_a_tier_folder_and_leaves_no_lock(tmp_path, capsys):
    tier = _tier_copy(tmp_path)
    before = _snapshot(tier)
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan())
    assert train_main(_args(plan, tier)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe train: error: {tier} holds a model (warmstart.json), not a training run; ")
    assert "choose another --out" in err and "delete" not in err and "damaged" not in err
    assert _snapshot(tier) == before  # no .lock, nothing written or removed


def test_gradprobe_train_refuses_save_pretrained_weights_before_reading_the_plan(tmp_path, capsys):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    (folder / "model.safetensors").write_bytes(b"x" * 16)
    before = _snapshot(folder)
    assert train_main(_args(tmp_path / "no-such-plan.toml", folder)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe train: error: {folder} holds a model (config.json + model.safetensors), not a "
                          "training run; ")
    assert _snapshot(folder) == before


def test_python_train_refuses_a_tier_folder(tmp_path):
    tier = _tier_copy(tmp_path)
    before = _snapshot(tier)
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan())
    with pytest.raises(OutputDirError, match=r"holds a model \(warmstart\.json\), not a training run; .*choose "
                                             r"another out \("):  # the API's argument, not the command's --out
        gradprobe.train(plan, tier, arm="grpo", updates=1)
    assert _snapshot(tier) == before
