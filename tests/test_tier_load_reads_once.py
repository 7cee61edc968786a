"""Loading a built tier reads its ``config.json`` and ``model.safetensors``' header once each in gradprobe's checks.

The tier checks read ``config.json`` twice (the damage check and the recipe check's ``json.loads``), the safetensors
header twice and ``warmstart.json`` twice, besides transformers' own reads; they now read each once and hand the
parsed values on (:func:`gradprobe.models.read_tier_files`). The counts are of files opened through Python's ``open``
(``Path.read_text`` included) and of :func:`safetensors.safe_open` calls, outside transformers' own
``from_pretrained`` of the config (the checks compare with what transformers reads), model and tokenizer.
"""

from __future__ import annotations

import builtins
import collections
import io
import os
import shutil

import pytest
import safetensors

from gradprobe.models import TierDamagedError, load_policy, refuse_damaged_tier
from gradprobe.warmstart import build_or_reuse_tier

from helpers_warmstart import SHIPPED


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def reads(monkeypatch):
    """Counter of the files the code under test reads, by name (``model.safetensors`` counts ``safe_open`` calls and
    ``open`` alike), skipping what transformers' ``from_pretrained`` of the config, model and tokenizer reads."""
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    counts, loading = collections.Counter(), []

    def counted(real):
        def opened(file, *args, **kwargs):
            if not loading and isinstance(file, (str, os.PathLike)):
                counts[os.path.basename(os.fspath(file))] += 1
            return real(file, *args, **kwargs)
        return opened

    def outside(real):
        def call(*args, **kwargs):
            loading.append(True)
            try:
                return real(*args, **kwargs)
            finally:
                loading.pop()
        return call

    monkeypatch.setattr(builtins, "open", counted(builtins.open))
    monkeypatch.setattr(io, "open", counted(io.open))  # pathlib's read_text and read_bytes open through io.open
    monkeypatch.setattr(safetensors, "safe_open", counted(safetensors.safe_open))
    monkeypatch.setattr(AutoConfig, "from_pretrained", outside(AutoConfig.from_pretrained))
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", outside(AutoModelForCausalLM.from_pretrained))
    monkeypatch.setattr(PreTrainedTokenizerFast, "from_pretrained", outside(PreTrainedTokenizerFast.from_pretrained))
    return counts


def _each_once(counts) -> dict:
    return {name: counts[name] for name in ("config.json", "model.safetensors", "warmstart.json")}


def test_the_tier_checks_read_each_file_once(reads):
    refuse_damaged_tier(SHIPPED)
    assert _each_once(reads) == {"config.json": 1, "model.safetensors": 1, "warmstart.json": 1}


def test_loading_the_shipped_tier_reads_each_file_once_besides_from_pretrained(reads):
    policy = load_policy("tiny")
    assert policy.model.config.num_hidden_layers == 4 and policy.model.lm_head.weight.shape == (101, 128)
    assert _each_once(reads) == {"config.json": 1, "model.safetensors": 1, "warmstart.json": 1}


def test_loading_a_tier_folder_reads_each_file_once_and_still_refuses_its_damage(reads, tmp_path):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    reads.clear()  # the copy's own reads
    assert load_policy(str(folder)).model.config.model_type == "qwen2"
    assert _each_once(reads) == {"config.json": 1, "model.safetensors": 1, "warmstart.json": 1}
    (folder / "config.json").write_text((folder / "config.json").read_text().replace('"num_hidden_layers": 4',
                                                                                     '"num_hidden_layers": 2'))
    with pytest.raises(TierDamagedError, match=r"config\.json is damaged \(num_hidden_layers is 2, the build's recipe "
                                               r"gives 4\)"):
        load_policy(str(folder))


def test_warmstart_reuse_of_a_build_reads_config_and_header_once(reads, tmp_path):
    folder = shutil.copytree(SHIPPED, tmp_path / "mytier")
    reads.clear()  # the copy's own reads
    assert build_or_reuse_tier("tiny", out=folder, progress=False) == (folder, True)
    assert reads["config.json"] == 1 and reads["model.safetensors"] == 1
