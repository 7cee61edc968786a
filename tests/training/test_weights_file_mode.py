"""A run's weights (``weights/update-*.safetensors``), its checkpoints' ``model.safetensors`` and a saved direction
get the mode of the JSON files beside them (0666 less the umask): safetensors writes 0600, so a colleague who could
read a run's JSON files could not read its weights (``gradprobe probe --checkpoints`` on someone else's run)."""

from __future__ import annotations

import os

import pytest
import torch

from gradprobe.probe.reference_update import save_direction

from helpers_rollout import one_thread
from helpers_training import train_tiny

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_weights_and_checkpoints_get_the_umask_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        out = tmp_path / "run"
        assert train_tiny(out, budget={"updates": 2}, eval={"sampled": False},
                          train={"checkpoint_every": 1, "save_weights_at": [1, 2]})["completed"]
        save_direction({"w": torch.zeros(3)}, tmp_path / "direction.safetensors")
    finally:
        os.umask(old)
    weights = sorted((out / "weights").glob("*.safetensors")) + sorted(out.glob("checkpoint-*/model.safetensors"))
    assert len(weights) >= 3, weights
    assert _mode(out / "config.json") == 0o666 & ~umask
    assert {w.name: _mode(w) for w in weights} == {w.name: 0o666 & ~umask for w in weights}
    assert _mode(tmp_path / "direction.safetensors") == 0o666 & ~umask
