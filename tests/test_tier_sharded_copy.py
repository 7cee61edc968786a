"""A copied tier folder whose model.safetensors was re-saved as shards is refused with a fix that keeps its weights.

A tester copied the tiny tier (``gradprobe_tier.json`` and ``warmstart.json`` kept) and replaced ``model.safetensors``
by ``model.safetensors.index.json`` plus ``shards/model-0000{1,2}-of-00002.safetensors``: it was called a damaged
tier with the fix ``gradprobe warmstart --tier tiny --out FOLDER --force``, which replaces the whole folder, the
user's shards with it. The message now says why the shards are not read (a tier build is read and identified by its
one ``model.safetensors``), how to keep the weights, and that ``--force`` replaces the folder, before the command.
"""

from __future__ import annotations

import json
import shutil

import pytest

from gradprobe.models import TierDamagedError, load_policy

from helpers_warmstart import SHIPPED


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def test_a_tier_copy_resaved_in_shards_is_told_how_to_keep_its_weights(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    tensors = load_file(str(folder / "model.safetensors"))
    names = sorted(tensors)
    (folder / "shards").mkdir()
    weight_map = {}
    for k, part in enumerate((names[: len(names) // 2], names[len(names) // 2:]), 1):
        shard = f"shards/model-0000{k}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, str(folder / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1},
                                                                      "weight_map": weight_map}))
    (folder / "model.safetensors").unlink()
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    message = str(err.value)
    assert message == (
        f"the tier in {folder} is damaged: {folder / 'model.safetensors'} is missing (the folder holds "
        "model.safetensors.index.json and the shards it names instead: a tier build is read and identified by its one "
        "model.safetensors, so restore that file from a backup, or load the shards and save them as one file with "
        "save_pretrained, which writes model.safetensors for a model below its max_shard_size); --force replaces the "
        f"whole folder, so first copy elsewhere what you keep in {folder} (any file of yours in it is lost); rebuild "
        f"it with `gradprobe warmstart --tier tiny --out '{folder}' --force`")
    assert all((folder / s).is_file() for s in set(weight_map.values()))  # nothing was touched
