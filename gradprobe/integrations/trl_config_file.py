"""Read and validate a TRL ``GRPOConfig`` file (YAML or JSON) for ``gradprobe probe --trl-config FILE``.

The file is checked against TRL itself: every field must be one of ``trl.GRPOConfig``'s (or of
TRL's ``ScriptArguments`` / ``ModelConfig``, which ``trl grpo --config`` files mix in), and the
fields are passed through ``trl.GRPOConfig(...)`` so that TRL's own validation and normalisation
apply (``scale_rewards`` True -> "group", ``generation_batch_size`` derived...). What the fields
mean to the probe is :mod:`gradprobe.integrations.trl_config`'s job.

``trl`` is imported inside the functions that need it (:func:`require_trl`): it is an optional,
heavy dependency (the ``trl`` extra) and ``gradprobe probe`` without ``--trl-config`` must not load
it. Without it, ``--trl-config`` is refused in one line naming the install command
(:class:`TrlMissingError`, a ``ValueError``).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import numbers
import warnings
from pathlib import Path

__all__ = ["TrlConfigError", "TrlMissingError", "require_trl", "read_trl_config", "MACHINE_FIELDS", "FLOAT_FIELDS",
           "COUNT_FIELDS"]

#: How to install TRL (the ``trl`` extra of pyproject.toml), quoted by :class:`TrlMissingError`.
INSTALL_HINT = "pip install -e '.[trl]' (or pip install trl)"

#: Hardware and backend fields left out of the ``GRPOConfig`` validation (they may need a GPU, vLLM,
#: DeepSpeed... on the probing machine) and ignored by the probe.
MACHINE_FIELDS = ("bf16", "fp16", "tf32", "use_cpu", "deepspeed", "fsdp", "fsdp_config", "accelerator_config",
                  "parallelism_config", "use_vllm", "use_liger_kernel", "torch_compile", "torch_compile_backend",
                  "torch_compile_mode", "push_to_hub", "hub_model_id", "hub_token", "report_to", "local_rank",
                  "ddp_backend", "use_transformers_paged", "use_transformers_continuous_batching")
#: Float fields whose numeric strings are converted (YAML reads ``1e-6`` without a dot as text).
FLOAT_FIELDS = ("learning_rate", "beta", "temperature", "top_p", "epsilon", "epsilon_high", "top_entropy_quantile",
                "entropy_coef", "repetition_penalty", "max_grad_norm", "weight_decay", "warmup_ratio")
#: Count fields refused below 1 (zero, negative) or not whole before ``trl.GRPOConfig`` sees them (a 0 there divides
#: by zero inside TRL, or passes it and maps to 0 prompts per update): field -> (the least value a run can use, named
#: in the fix; what it counts; whether ``null`` is allowed: TRL then derives it). TRL's own checks (``num_generations``
#: >= 2, whole groups) come after.
COUNT_FIELDS = {
    "num_generations": (2, "completions per prompt, a GRPO group", False),
    "per_device_train_batch_size": (1, "completions per device per micro-step", False),
    "gradient_accumulation_steps": (1, "micro-steps per optimizer step", False),
    "generation_batch_size": (1, "completions per generation batch", True),
    "steps_per_generation": (1, "micro-steps per generation batch", True),
    "num_iterations": (1, "updates per generation batch", False),
    "max_completion_length": (1, "tokens a completion is cut at", True),
}


class TrlConfigError(ValueError):
    """The TRL config file cannot be honoured (the message names the file, the field and the fix)."""


class TrlMissingError(TrlConfigError):
    """TRL is not installed (or cannot be imported), so a TRL config file cannot be checked."""


def require_trl(what: str = "--trl-config"):
    """The ``trl`` module, imported; :class:`TrlMissingError` (one line, with the install command) if it cannot be.

    Parameters
    ----------
    what : str
        The option or feature that needs TRL, named in the message (default ``--trl-config``).

    Raises
    ------
    TrlMissingError
        ``import trl`` failed: "<what> needs TRL: pip install -e '.[trl]' (or pip install trl)", with
        the import error added when TRL itself is installed but fails to import (a broken install).
    """
    try:
        return importlib.import_module("trl")
    except ImportError as e:
        missing = getattr(e, "name", None)
        broken = "" if missing in (None, "trl") else f" (TRL is installed but importing it failed: {e})"
        raise TrlMissingError(f"{what} needs TRL: {INSTALL_HINT}{broken}") from None


def _grpo_fields() -> dict:
    """``trl.GRPOConfig``'s dataclass fields by name (:class:`TrlMissingError` without TRL)."""
    return {f.name: f for f in dataclasses.fields(require_trl().GRPOConfig)}


def _default(f):
    """A dataclass field's default (``dataclasses.MISSING`` when it has none)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _other_trl_fields() -> set:
    """Fields of TRL's ScriptArguments and ModelConfig, which ``trl grpo --config`` files mix in."""
    trl = require_trl()
    names = set()
    for cls in (getattr(trl, "ScriptArguments", None), getattr(trl, "ModelConfig", None)):
        if cls is not None:
            names |= {f.name for f in dataclasses.fields(cls)}
    return names


def _load_file(path: Path) -> dict:
    """The file's top-level mapping (``{}`` for an empty file); TrlConfigError otherwise."""
    if not path.is_file():
        raise TrlConfigError(f"--trl-config {path}: no such file (a YAML or JSON file of trl.GRPOConfig fields)")
    text = path.read_text()
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            import yaml  # PyYAML comes with transformers, but is no declared dependency: ImportError is reported

            data = yaml.safe_load(text)
        else:
            raise TrlConfigError(f"--trl-config {path}: unknown file type {path.suffix!r}; use .yaml, .yml or .json")
    except (json.JSONDecodeError, ImportError) as e:
        raise TrlConfigError(f"--trl-config {path}: cannot be parsed: {e}") from e
    except Exception as e:  # yaml.YAMLError and its subclasses
        if isinstance(e, TrlConfigError):
            raise
        raise TrlConfigError(f"--trl-config {path}: cannot be parsed as YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise TrlConfigError(f"--trl-config {path}: the top level must be a mapping of GRPOConfig fields "
                             f"(field: value), got {type(data).__name__}")
    return data


def _checked_fields(path: Path, raw: dict, known: dict) -> dict:
    """``raw`` with unknown fields refused (closest GRPOConfig field suggested) and float fields converted."""
    others = _other_trl_fields()
    fields = {}
    for key, value in raw.items():
        if key not in known and key not in others:
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else "; see the fields of trl.GRPOConfig"
            raise TrlConfigError(f"--trl-config {path}: unknown field {key!r}{hint}")
        if key in FLOAT_FIELDS and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise TrlConfigError(f"--trl-config {path}: field {key!r} must be a number, got {value!r}") from None
        fields[key] = value
    return fields


def _check_counts(path: Path, fields: dict, known: dict) -> None:
    """Refuse a :data:`COUNT_FIELDS` value that is no whole number, or below 1 (zero or negative), naming the file,
    the field and the fix (TRL's default quoted); ``null`` only where TRL derives the field itself."""
    for name, (least, what, nullable) in COUNT_FIELDS.items():
        if name not in fields or (fields[name] is None and nullable):
            continue
        value = fields[name]
        whole = isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer()
        if whole and value >= 1:
            continue
        default = _default(known[name]) if name in known else dataclasses.MISSING
        hint = "" if default in (dataclasses.MISSING, None) else f" (TRL's default {default!r})"
        null = " or null (TRL derives it)" if nullable else ""
        raise TrlConfigError(f"--trl-config {path}: field {name!r} = {value!r} ({what}) must be a whole number >= "
                             f"{least}; set {name} to a whole number >= {least}{null} in the file{hint}, or remove it")


def read_trl_config(path: str | Path) -> tuple[dict, dict]:
    """Read and validate a TRL ``GRPOConfig`` file.

    Parameters
    ----------
    path : str or Path
        ``.yaml``/``.yml`` or ``.json``; a mapping of ``trl.GRPOConfig`` field names to values
        (fields of TRL's ``ScriptArguments``/``ModelConfig`` are allowed and ignored).

    Returns
    -------
    fields : dict
        The file's fields, numeric strings of float fields converted (YAML reads ``1e-6`` without
        a dot as text).
    config : dict
        ``dataclasses.asdict``-like view of the ``trl.GRPOConfig`` built from the fields (hardware
        fields :data:`MACHINE_FIELDS` left out), after TRL's own normalisation (``scale_rewards``
        True -> "group", ``generation_batch_size`` derived...).

    Raises
    ------
    TrlMissingError
        (a TrlConfigError) TRL cannot be imported: the message gives the install command; raised
        before the file is read.
    TrlConfigError
        Missing or unparsable file, a top level that is not a mapping, an unknown field (the closest
        GRPOConfig field suggested), a non-numeric value of a float field, a count of
        :data:`COUNT_FIELDS` that is not a whole number >= 1 (checked before TRL, naming the field),
        or a value ``trl.GRPOConfig`` rejects with any exception (its message, with the fields it
        names or, where it names none, those it rejects on their own).
    """
    path = Path(path)
    require_trl()  # before anything else: without TRL the file cannot be checked
    raw = _load_file(path)
    known = _grpo_fields()
    fields = _checked_fields(path, raw, known)
    _check_counts(path, fields, known)  # before TRL: it divides by some of them
    check = {k: v for k, v in fields.items() if k in known and k not in MACHINE_FIELDS}
    try:
        cfg = _grpo_config(check)
    except Exception as e:  # noqa: BLE001 - whatever TRL raises on the user's values (ZeroDivisionError...)
        named = [k for k in check if k in str(e)]
        if not named:  # TRL's message does not name the field: find the fields it rejects on their own
            named = [k for k in check if _rejects({k: check[k]})]
        where = f" (field{'s' if len(named) > 1 else ''} {', '.join(named)})" if named else ""
        why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"  # TRL's own checks: ValueError
        fix = f"correct {', '.join(named)} in the file" if named else "correct the value it names in the file"
        raise TrlConfigError(f"--trl-config {path}{where}: trl.GRPOConfig rejects it: {why}; {fix}") from e
    return fields, {name: getattr(cfg, name) for name in known if hasattr(cfg, name)}


def _grpo_config(fields: dict):
    """``trl.GRPOConfig(**fields)`` on any machine (bf16/fp16 off) without TRL's own deprecation noise."""
    GRPOConfig = require_trl().GRPOConfig  # noqa: N806 - TRL's class name

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return GRPOConfig(**fields, bf16=False, fp16=False)


def _rejects(fields: dict) -> bool:
    """Whether ``trl.GRPOConfig`` rejects ``fields`` on their own."""
    try:
        _grpo_config(fields)
    except Exception:  # noqa: BLE001 - as read_trl_config: whatever TRL raises on them
        return True
    return False
