"""A tier folder holding weights a training run wrote (``RUN/weights/update-UUUUUU.safetensors`` or a checkpoint's
``model.safetensors``, both ``safetensors.torch.save_model``) loads them.

``save_model`` writes tied tensors once under the name it sorts first, so the tied embeddings of both tiers are kept
as ``lm_head.weight`` alone; ``from_pretrained`` ties them back and loads the weights exactly. The load check of a
tier's weights against its recipe's model took the missing ``model.embed_tokens.weight`` for a missing tensor and
refused such a folder as damaged; a file holding neither name is still refused.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from gradprobe.models import TierDamagedError, load_policy
from gradprobe.tiers import shipped_root
from gradprobe.training.checkpoint import save_weights

from helpers_warmstart import SHIPPED

LLAMA = shipped_root() / "tiny-llama-sft-dd5c45615d25"


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _trained_copy(tier, source, tmp_path, *, record: bool):
    """(a copy of the tier ``source`` whose model.safetensors is a run's kept weights, the trained state dict)."""
    policy = load_policy(tier)
    with torch.no_grad():
        for i, p in enumerate(policy.model.parameters()):
            p.add_(0.001 * (i + 1))
    (tmp_path / "run").mkdir()
    kept = save_weights(tmp_path / "run", 3, policy.model)
    folder = shutil.copytree(source, tmp_path / "mytier")
    if not record:
        (folder / "warmstart.json").unlink()
    shutil.copy(kept, folder / "model.safetensors")
    return folder, {k: v.clone() for k, v in policy.model.state_dict().items()}


@pytest.mark.parametrize("record", [True, False])
@pytest.mark.parametrize("tier, source", [("tiny", SHIPPED), ("tiny-llama-sft", LLAMA)])
def test_a_tier_copy_holding_a_runs_kept_weights_loads_them(tier, source, record, tmp_path):
    from safetensors import safe_open

    folder, trained = _trained_copy(tier, source, tmp_path, record=record)
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert "lm_head.weight" in names and "model.embed_tokens.weight" not in names  # save_model's choice
    loaded = load_policy(str(folder)).model
    state = loaded.state_dict()
    assert sorted(state) == sorted(trained)
    assert all(torch.equal(state[k], trained[k]) for k in trained)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()


def test_a_file_without_either_name_of_the_tied_embeddings_is_still_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder, trained = _trained_copy("tiny", SHIPPED, tmp_path, record=True)
    assert torch.equal(load_policy(str(folder)).model.lm_head.weight, trained["lm_head.weight"])
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["lm_head.weight"]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    assert (f"{folder / 'model.safetensors'} is damaged (not the weights of the recipe's model: no tensor "
            "model.embed_tokens.weight); ") in str(err.value)
