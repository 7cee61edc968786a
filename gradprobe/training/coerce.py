"""A TOML table into a plan dataclass: every key checked against the class's fields, every value
coerced to the field's type, each refusal a :class:`~gradprobe.training.specs.PlanError` that names
the key's full path (``arms.mc.lr``) and what it must be.

The one coercer of the plan (:mod:`gradprobe.training.plan`, :mod:`gradprobe.training.plan_checks`);
torch-free.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from numbers import Integral
from typing import Any

from ..outputs import beyond_float, is_json_number, json_number_float, json_number_text
from ..token_counts import ECHO_HEAD, echo_text
from .specs import PlanError

__all__ = ["fields_of", "coerce", "check_keys", "build_section", "check_positive", "echo_value"]

_HEAD = ECHO_HEAD  # the leading characters token_counts.echo_text keeps of a long value (40)


def echo_value(value) -> str:
    """``value`` as an error quotes it: a string by its ``repr``, a number or a list by its digits or ``repr``
    unquoted, shortened as the command line shortens a token count (:func:`gradprobe.token_counts.echo_text`: whole
    up to 80 characters, else the first 40 and the length, ``'xxxx...'... (5,000 characters)``), so that a pasted
    mistake (a 5,000-character string, an integer of 5,000 digits) does not flood the message. An integer longer
    than Python writes as text (``sys.get_int_max_str_digits()``, 4300 digits) is shown the same way, by its first 40
    digits and its exact length, without writing it out; a container holding one, by its type.
    """
    if isinstance(value, str):
        return echo_text(value)
    if isinstance(value, Integral) and not isinstance(value, bool):
        return echo_text(_integer_text(int(value)), str)
    try:
        return echo_text(repr(value), str)
    except ValueError:  # a list or table holding an integer beyond the int-to-text limit
        return f"a {type(value).__name__} holding an integer too long to write out"


def _integer_text(value: int) -> str:
    """The decimal digits of ``value`` (``-`` before a negative one); for one beyond Python's int-to-text limit, its
    first :data:`_HEAD` digits padded with zeros to its exact length: :func:`echo_value` shows no more than those."""
    try:
        return str(value)
    except ValueError:
        pass
    v = abs(value)
    n = int(v.bit_length() * math.log10(2)) + 1  # the digit count, or one off where the float rounds
    head = str(v // 10 ** (n - _HEAD))
    while len(head) != _HEAD:  # n was one off: 10**(n - 1) <= v < 10**n fixes head at _HEAD digits
        n += 1 if len(head) > _HEAD else -1
        head = str(v // 10 ** (n - _HEAD))
    return ("-" if value < 0 else "") + head + "0" * (n - _HEAD)


def fields_of(cls) -> dict[str, Any]:
    """Field name -> resolved type annotation of dataclass ``cls``, in declaration order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a table"}.get(
        tp, str(tp).replace("typing.", ""))


def coerce(value, tp, where: str):
    """``value`` as type ``tp`` (int, float, str, bool, dict, tuple[...], X | None).

    Integers are accepted for floats (and become floats; one too large for a float is refused: TOML writes an
    infinite value ``inf``); booleans are never numbers; NaN and +-inf are floats here (whether a key takes them is
    its range check's to say: ``train.lr`` refuses them, :mod:`.plan_checks`); TOML arrays become tuples. What a
    number is is :func:`gradprobe.outputs.is_json_number`'s rule; a number comes back as a Python ``int`` or
    ``float`` (a numpy scalar too, which ``json`` could not write into a run's ``config.json``).

    Raises
    ------
    PlanError
        ``value`` is not of type ``tp``, or is an integer too large for a float where a float is wanted; the message
        names ``where`` (the key's full path) and the value (that integer's digits shortened and counted:
        :func:`gradprobe.outputs.json_number_text`; any other value longer than 80 characters by its first 40 and its
        length, :func:`echo_value`).
    TypeError
        ``tp`` is not a type plans use (a schema bug, not a plan error).
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return coerce(value, args[0], where)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise PlanError(f"{where} must be a list, got {echo_value(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise PlanError(f"{where} must be a list of {len(args)} values, got {echo_value(value)}")
        return tuple(coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    ok = {int: is_json_number(value, integer=True), float: is_json_number(value),
          str: isinstance(value, str), bool: isinstance(value, bool), dict: isinstance(value, dict)}.get(tp)
    if ok is None:
        raise TypeError(f"plan schema: unsupported type {tp} at {where}")
    if not ok or (tp is float and beyond_float(value)):  # an integer too large for a float: not read as +-inf
        raise PlanError(f"{where} must be {_type_name(tp)}, got {json_number_text(value, echo_value(value))}")
    if tp is int:
        return int(value)  # a numpy integer as a Python int
    return json_number_float(value) if tp is float else value


def check_keys(table: dict, valid, where: str, extra_note: str = "") -> None:
    """Refuse the first key of ``table`` not in ``valid``.

    Raises
    ------
    PlanError
        Naming the key's full path (``where.key``; ``where`` empty = the top level) and listing ``valid``.
    """
    for key in table:
        if key not in valid:
            label = f"{where}.{key}" if where else key
            section = f"[{where}]" if where else "the top level"
            raise PlanError(f"unknown key {echo_value(label)}; valid keys in {section}: {', '.join(valid)}{extra_note}")


def build_section(cls, table: dict, where: str):
    """Instance of dataclass ``cls`` from the TOML table ``[where]``, every key checked and coerced.

    Raises
    ------
    PlanError
        ``table`` is not a table, an unknown key, a value of the wrong type, a missing required key,
        or a value the class itself refuses (its ``ValueError``, prefixed with ``[where]``).
    """
    if not isinstance(table, dict):
        raise PlanError(f"[{where}] must be a table, got {echo_value(table)}")
    hints = fields_of(cls)
    check_keys(table, list(hints), where)
    kwargs = {k: coerce(v, hints[k], f"{where}.{k}") for k, v in table.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in kwargs
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        raise PlanError(f"[{where}] needs the key(s) {', '.join(missing)}") from e
    except ValueError as e:
        raise PlanError(f"[{where}]: {e}") from e


def check_positive(value, where: str, *, allow_zero: bool = False) -> None:
    """Refuse ``value`` unless it is None or a finite number > 0 (>= 0 with ``allow_zero``).

    Raises
    ------
    PlanError
        Naming ``where`` and the bound; an infinite value (TOML's ``inf``, or ``1e400``, which TOML reads as
        infinity) as not finite: a budget or setting of infinity is no number a run can spend or record (JSON has
        no infinity).
    """
    if value is not None and not (value > 0 or (allow_zero and value == 0)):
        raise PlanError(f"{where} must be {'>= 0' if allow_zero else '> 0'}, got {echo_value(value)}")
    if isinstance(value, float) and math.isinf(value):
        raise PlanError(f"{where} must be a finite number, got {value} (TOML reads inf, and a float beyond 1.8e308 "
                        "such as 1e400, as infinity); give a finite value")
