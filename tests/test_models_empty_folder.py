"""A model folder without the files ``from_pretrained`` reads is refused before transformers is called, naming what
is missing and the fix (was transformers' misleading "Couldn't instantiate the backend tokenizer ... sentencepiece
or tiktoken"); a folder written by ``save_pretrained`` still loads."""

from __future__ import annotations

import pytest
import torch

from gradprobe.cli import main
from gradprobe.models import ModelNotFoundError, load_policy, load_tokenizer

_FIX = ("pass a Hugging Face hub id (e.g. Qwen/Qwen2.5-0.5B-Instruct), a shipped tier name (tiny, tiny-llama-sft) or "
        "alias (tiny-qwen2, tiny-llama, smollm2-135m), or a folder written by model.save_pretrained(DIR) and "
        "tokenizer.save_pretrained(DIR)")
_TOKENIZER = "tokenizer files (one of tokenizer.json, tokenizer_config.json, tokenizer.model, vocab.json, vocab.txt, " \
             "spiece.model)"


@pytest.fixture
def no_transformers(monkeypatch):
    import transformers

    for name in ("AutoTokenizer", "AutoModelForCausalLM", "PreTrainedTokenizerFast"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained",
                            lambda *a, **k: pytest.fail("transformers was called"))


def test_an_empty_folder_names_everything_missing(tmp_path, no_transformers):
    with pytest.raises(ModelNotFoundError) as info:
        load_policy(str(tmp_path))
    assert str(info.value) == (f"model folder {str(tmp_path)!r} has no config.json and no model weights "
                               f"(*.safetensors) and no {_TOKENIZER}; {_FIX}")
    with pytest.raises(ModelNotFoundError) as info:
        load_tokenizer(str(tmp_path))
    assert str(info.value) == f"model folder {str(tmp_path)!r} has no {_TOKENIZER}; {_FIX}"


def test_only_the_missing_files_are_named(tmp_path, no_transformers):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ModelNotFoundError) as info:
        load_policy(str(tmp_path))
    assert str(info.value) == (f"model folder {str(tmp_path)!r} has no model weights (*.safetensors; pytorch_model.bin "
                               f"is not read: gradprobe loads safetensors only); {_FIX}")


def test_the_cli_prints_one_line_and_leaves_no_folder(tmp_path, capsys):
    empty = tmp_path / "empty_folder"
    empty.mkdir()
    out = tmp_path / "p"
    assert main(["probe", "--model", str(empty), "--task", "chain_sum", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe probe: error: model folder {str(empty)!r} has no config.json and no model "
                          "weights (*.safetensors)") and err.rstrip().endswith(_FIX)
    assert "sentencepiece" not in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_save_pretrained_folder_still_loads(tmp_path):
    torch.set_num_threads(1)
    saved = load_policy("tiny-qwen2", seed=3)
    saved.model.save_pretrained(tmp_path)
    saved.tokenizer.save_pretrained(tmp_path)
    loaded = load_policy(str(tmp_path))
    ids = torch.tensor([saved.tokenizer("12+3=")["input_ids"]])
    assert load_tokenizer(str(tmp_path))("12+3=")["input_ids"] == ids[0].tolist()
    torch.testing.assert_close(loaded.model(ids).logits, saved.model(ids).logits)


def test_a_device_torch_does_not_know_is_named_before_the_model_loads(no_transformers):
    """``--device banana`` printed torch's raw list of every device type, naming no option."""
    with pytest.raises(ValueError) as info:
        load_policy("tiny-qwen2", device="banana")
    assert str(info.value) == ("device (--device) 'banana' is not a torch device; use cpu, cuda or cuda:N (or mps on "
                               "Apple silicon)")
