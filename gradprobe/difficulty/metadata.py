"""Which ``Problem.metadata`` values are features: numbers only (torch-free, so settings and pools are checked
before any model is loaded).

A metadata feature is a number (``int``, ``float``, numpy's integer and float scalars; ``bool`` is not: it
never was a feature value). A key a problem lacks, or holds ``None`` for, is missing (NaN, imputed by the
estimator), and so is a NaN; a key missing from every problem is warned about. Any other value (a string, a
dict...) is refused: turned into NaN it would be imputed as a constant that carries no information, silently; so is
an infinite value (JSON ``Infinity``, ``1e309``) and one whose square overflows (beyond :data:`MAX_METADATA`).

A data row's columns that the loader keeps apart in ``metadata["data_columns"]`` (lists, objects, nulls, and scalar
columns named as one of gradprobe's own keys: :func:`gradprobe.tasks.dataset._keep_columns`) are checked under their
names too: a list or object is a value that is no number, a null is missing, and ``data_columns`` itself is never
a key. A scalar kept apart is not usable by its name: that name means gradprobe's own value (the file's ``source``,
the loader's ``row``), so the column is to be renamed, not read ambiguously.
"""

from __future__ import annotations

import difflib
import math
import numbers
import warnings
from typing import Sequence

from ..tasks.base import prompt_place
from ..tasks.columns import DATA_COLUMNS

__all__ = ["is_numeric", "check_metadata_keys", "prompt_place", "IDENTIFIER_KEYS", "DEFAULT_KEYS"]

#: The metadata keys used when none are given (``--metadata-keys``' default, ``RankSettings.metadata_keys``,
#: :data:`gradprobe.difficulty.features.DEFAULT_METADATA_KEYS`): chain_sum's; other tasks mostly lack them.
DEFAULT_KEYS = ("num_terms", "num_digits")

#: Metadata keys that name a row, not describe it (a data row's own ``id``, its 0-based index ``row``): numbers in a
#: JSONL task, but never offered as features by the messages below (their order carries no difficulty).
IDENTIFIER_KEYS = frozenset({"id", "row"})


def is_numeric(value) -> bool:
    """Whether ``value`` is a metadata feature value: a real number that is not a bool.

    Parameters
    ----------
    value : object
        A ``Problem.metadata`` value.

    Returns
    -------
    bool
        True for ``int``, ``float`` and numpy integer / float scalars; False for bools, None and the rest.

    Raises
    ------
    None
        Never raises.
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_metadata_keys(problems, keys: Sequence[str], *, warn_absent: bool = True) -> None:
    """Refuse metadata keys that cannot be features of these problems.

    Parameters
    ----------
    problems : list[Problem]
        Their ``metadata`` (a mapping or None) and ``id``.
    keys : sequence of str
        The ``--metadata-keys``.
    warn_absent : bool
        Warn about keys no problem holds (below); False for an early check whose features are checked again
        (``rank-prompts`` refuses bad keys before loading the model, and its feature pass warns, once).

    Raises
    ------
    TypeError
        ``keys`` is a string (it would be read one character at a time): pass a list of key names.
    ValueError
        A key given twice, or a key whose value in some problem is neither a number nor missing (None); one
        line naming the key, how many prompts hold a value that is no number (the first three: value, prompt id and
        the line of its JSONL file), how many hold a number, the fix, and the keys numeric in every problem holding
        them (less the identifiers ``id`` and ``row``, :data:`IDENTIFIER_KEYS`) as "keys numeric in every prompt holding
        them" (``key`` itself is never among them, though it may be numeric in most prompts). A key with an
        infinite value (JSON ``Infinity`` or ``1e309``, read as inf) in some problem: named with the first such prompt
        (id and line), how many there are, and the fix (scikit-learn said only "Input X contains infinity"). A key
        with a value beyond +-:data:`MAX_METADATA` (its square overflows). A key that is no feature whatever its
        values: ``data_columns`` (:data:`gradprobe.tasks.columns.DATA_COLUMNS`, the loader's dict of a data row's
        columns kept apart: no scalar key), an identifier (:data:`IDENTIFIER_KEYS`), or a data column named as one of
        gradprobe's own metadata keys (kept apart there: the fix is to rename the column). A data column kept apart
        as a list or an object is that key's value, refused as no number; a null there is missing.

    Warns
    -----
    UserWarning
        Keys that no problem holds: their feature column is NaN everywhere, imputed as a constant that carries
        no information (one warning naming them and the keys present, and the numeric key each is likely a typo
        of: ``did you mean 'level' for 'levle'?``; Python's default filter shows it once). When ``keys`` are the
        defaults (:data:`DEFAULT_KEYS`, chain_sum's: most likely not given at all), the warning says instead that
        the default keys do not apply to this pool, and names its numeric keys to give as ``--metadata-keys``.
        Keys that some problems hold, but as null or NaN in every one of them: imputed as a constant just the same
        (one warning naming them, the fix, and the keys numeric in every prompt holding them).
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"metadata_keys (--metadata-keys) must be a list of key names, got the string {keys!r}; "
                        f"pass [{keys!r}] (or a comma-separated string split: {keys!r}.split(','))")
    seen = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"metadata key {key!r} (--metadata-keys) is given twice; give each key once")
        seen.add(key)
    for key in keys:
        _refuse_no_feature(problems, key)
        _refuse_non_numeric(problems, key)
        _refuse_infinite(problems, key)
        _refuse_beyond_range(problems, key)
    present = sorted({k for p in problems for k in [*_meta(p), *_columns(p)] if k != DATA_COLUMNS})
    absent = [k for k in keys if k not in present]
    if absent and problems and warn_absent and tuple(keys) == DEFAULT_KEYS:
        warnings.warn(_defaults_absent(absent, _numeric_keys(problems)), stacklevel=3)
    elif absent and problems and warn_absent:
        warnings.warn(f"metadata_keys (--metadata-keys) {', '.join(absent)}: in no prompt of this pool, so imputed as "
                      f"a constant that carries no information (keys present: {', '.join(present) or 'none'})"
                      + _did_you_mean(absent, _numeric_keys(problems)), stacklevel=3)
    empty = [k for k in keys if k in present and not any(_has_value(p, k) for p in problems)]
    if empty and warn_absent:
        warnings.warn(f"metadata_keys (--metadata-keys) {', '.join(empty)}: null or NaN in every prompt of this pool "
                      f"holding {'it' if len(empty) == 1 else 'them'}, so imputed as a constant that carries no "
                      f"information; give {'it numbers' if len(empty) == 1 else 'them numbers'} in the data or leave "
                      f"{'it' if len(empty) == 1 else 'them'} out of --metadata-keys (keys numeric in every prompt "
                      f"holding them: {', '.join(_numeric_keys(problems)) or 'none'})", stacklevel=3)


def _meta(prob) -> dict:
    """``prob.metadata``, or {} when it has none."""
    return getattr(prob, "metadata", None) or {}


def _columns(prob) -> dict:
    """The data columns the loader keeps apart in ``prob.metadata[DATA_COLUMNS]`` (lists, objects, nulls, and columns
    named as one of gradprobe's own metadata keys: :func:`gradprobe.tasks.dataset._keep_columns`), or {}."""
    held = _meta(prob).get(DATA_COLUMNS)
    return held if isinstance(held, dict) else {}


def _value(prob, key: str):
    """``prob``'s value for ``key``: its metadata's, else its data column's of that name (:func:`_columns`: a list, an
    object or a null there is the data's value of the key, refused or missing as one at the top level would be)."""
    meta = _meta(prob)
    return meta[key] if key in meta else _columns(prob).get(key)


def _refuse_no_feature(problems, key: str) -> None:
    """ValueError for a key that is no feature whatever its values: an identifier (:data:`IDENTIFIER_KEYS`), a data
    column named as one of gradprobe's own metadata keys (a scalar the loader keeps in ``metadata[DATA_COLUMNS]``, as
    its name means gradprobe's value; a data column named ``data_columns`` too: the fix is to rename it), or
    :data:`DATA_COLUMNS` (the loader's dict of a row's columns kept apart); each message names the key, why, the fix
    and the keys numeric in every prompt holding them."""
    def numeric() -> str:  # only when refusing: one pass over the pool's metadata
        return f"keys numeric in every prompt holding them: {', '.join(_numeric_keys(problems)) or 'none'}"

    if key in IDENTIFIER_KEYS:
        raise ValueError(f"metadata key {key!r} (--metadata-keys) is an identifier (a data row's own id, or its "
                         "0-based row), never a feature: its order carries no difficulty; leave it out of "
                         f"--metadata-keys, or give a numeric column of another name ({numeric()})")
    shadowed = [p for p in problems if _shadowed(_columns(p).get(key))]
    if shadowed:
        prob = min(shadowed, key=_row)
        raise ValueError(f"metadata key {key!r} (--metadata-keys): the data column {key!r} "
                         f"({_short(_columns(prob)[key])} in {prompt_place(prob)}) is named as one of gradprobe's own "
                         f"metadata keys, so the loader keeps it apart in Problem.metadata[{DATA_COLUMNS!r}], not as a "
                         f"feature; rename the column in the data (e.g. '{key}_value') and give that name "
                         f"({numeric()})")
    if key == DATA_COLUMNS:
        raise ValueError(f"metadata key {key!r} (--metadata-keys) is no metadata key: it is where the loader keeps a "
                         "data row's columns that are not scalar metadata (lists, objects, nulls, columns named as "
                         f"gradprobe's own keys); give a numeric column by its own name ({numeric()})")


def _shadowed(value) -> bool:
    """Whether a data column's ``value`` kept in ``metadata[DATA_COLUMNS]`` is a scalar (not null, a list or an
    object): the loader keeps scalar columns under their names, except those named as one of gradprobe's own keys."""
    return value is not None and not isinstance(value, (list, dict))


def _has_value(prob, key: str) -> bool:
    """Whether ``prob``'s metadata holds a number other than NaN for ``key`` (None, NaN and absence are missing)."""
    v = (getattr(prob, "metadata", None) or {}).get(key)
    return is_numeric(v) and (isinstance(v, numbers.Integral) or not math.isnan(v))


def _is_infinite(v) -> bool:
    """Whether ``v`` is an infinite float (JSON's ``Infinity``, or ``1e309``, which Python's json reads as inf)."""
    return is_numeric(v) and not isinstance(v, numbers.Integral) and math.isinf(v)


def _refuse_non_numeric(problems, key: str) -> None:
    """Raise the ValueError of :func:`check_metadata_keys` when some problem holds a ``key`` value that is neither a
    number nor None: the first three such values in data order (each with its prompt id and, for a data file's
    rows, its line, counting from 1), how many more, in how many prompts the key is a number, the fix (a number
    written as text, "2", is to be the JSON number 2), and the keys numeric wherever held (:func:`_numeric_keys`)."""
    values = [(prob, _value(prob, key)) for prob in problems]
    bad = sorted(((prob, v) for prob, v in values if v is not None and not is_numeric(v)), key=lambda b: _row(b[0]))
    if not bad:
        return
    n, numeric = len(problems), sum(is_numeric(v) for _, v in values)
    sources = {(getattr(prob, "metadata", None) or {}).get("source") for prob, _ in bad}
    source = next(iter(sources)) if len(sources) == 1 and _row(bad[0][0]) >= 0 else None
    shown = ", ".join(f"{_short(v)} in prompt {getattr(prob, 'id', '?')}{_line(prob, source)}" for prob, v in bad[:3])
    shown += (f" and {len(bad) - 3} more" if len(bad) > 3 else "") + (f" in {source}" if source else "")
    fix = ("write them as JSON numbers (2, not \"2\")" if all(isinstance(v, str) and _reads_as_number(v)
                                                               for _, v in bad)
           else "make each such value a number, or null (missing: imputed)")
    raise ValueError(
        f"metadata key {key!r} (--metadata-keys) is not a number: {shown}; {key!r} is numeric in {numeric} of {n} "
        f"prompts: {fix}, or give numeric keys only (keys numeric in every prompt holding them: "
        f"{', '.join(_numeric_keys(problems)) or 'none'})")


#: The largest magnitude of a metadata value: the estimator standardises each feature, and a square (its variance)
#: overflows float64 above about 1.3e154, which turned a column into NaN (scikit-learn: "Input X contains NaN").
MAX_METADATA = 1e150


def _magnitude(v) -> float:
    """``abs(v)`` as a float; inf for an integer too large for one (10**400, which JSON allows)."""
    try:
        return abs(float(v))
    except OverflowError:
        return math.inf


def _refuse_infinite(problems, key: str) -> None:
    """ValueError naming the first infinite ``key`` value (:func:`_is_infinite`; its prompt id and line), how many
    there are, and the fix (a finite number, null, or the key left out); scikit-learn named no key, prompt or line
    ("Input X contains infinity")."""
    inf = [prob for prob in problems if _is_infinite((getattr(prob, "metadata", None) or {}).get(key))]
    if not inf:
        return
    prob = min(inf, key=_row)
    raise ValueError(f"metadata key {key!r} (--metadata-keys) is {prob.metadata[key]} in {prompt_place(prob)} "
                     f"({len(inf)} infinite value(s)): a feature must be finite "
                     "(JSON's Infinity, or a number beyond 1.8e308 such as 1e309, is read as inf); write a finite "
                     "number, or null (missing: imputed), or leave the key out of --metadata-keys")


def _refuse_beyond_range(problems, key: str) -> None:
    """ValueError naming the first ``key`` value beyond :data:`MAX_METADATA` in magnitude (its prompt id and line),
    how many there are, and the fix (rescale the key, e.g. its log10, or leave it out)."""
    big = [(prob, v) for prob in problems if is_numeric(v := (getattr(prob, "metadata", None) or {}).get(key))
           and _magnitude(v) > MAX_METADATA and not (isinstance(v, float) and math.isinf(v))]
    if not big:
        return
    prob, v = min(big, key=lambda b: _row(b[0]))
    source = (getattr(prob, "metadata", None) or {}).get("source")
    shown = f"{v:g}" if _magnitude(v) < math.inf else f"an integer of {len(str(abs(v)))} digits"
    raise ValueError(f"metadata key {key!r} (--metadata-keys) is {shown} in prompt {getattr(prob, 'id', '?')}"
                     f"{_line(prob, source)}{f' of {source}' if source and _row(prob) >= 0 else ''} ({len(big)} "
                     f"value(s) beyond +-{MAX_METADATA:g}): the estimator standardises each feature, and the square "
                     "of such a value overflows; rescale the key (e.g. its log10) or leave it out of --metadata-keys")


def _short(value) -> str:
    """``repr(value)``, cut to 60 characters."""
    return repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."


def _reads_as_number(text: str) -> bool:
    """Whether ``text`` is a finite number written as text (``"2"``, ``" 1.5"``; not ``"nan"``, ``"inf"``)."""
    try:
        return abs(float(text)) < float("inf")
    except ValueError:
        return False


def _row(prob) -> int:
    """The problem's 0-based row in its data (``metadata["row"]``), -1 when it has none."""
    row = (getattr(prob, "metadata", None) or {}).get("row")
    return int(row) if is_numeric(row) else -1


def _line(prob, source: str | None) -> str:
    """``" (line 7)"`` for a problem of the JSONL file ``source`` (``" (row 7)"`` for a hub split), counting from
    1; ``""`` when its row or the one source shared by the problems named is unknown."""
    if source is None:
        return ""
    return f" ({'line' if str(source).endswith('.jsonl') else 'row'} {_row(prob) + 1})"


def _defaults_absent(absent: list[str], numeric: list[str]) -> str:
    """The warning for default keys (:data:`DEFAULT_KEYS`) absent from a pool: not the user's choice, so no typo."""
    use = (f"to use this pool's numeric metadata as features, give --metadata-keys {','.join(numeric)}" if numeric
           else "this pool has no numeric metadata to give as --metadata-keys instead")
    return (f"the default metadata keys ({', '.join(DEFAULT_KEYS)}: chain_sum's, used when --metadata-keys is not "
            f"given) do not apply to this pool: {', '.join(absent)} {'is' if len(absent) == 1 else 'are'} in none of "
            f"its prompts, so the features are the prompt's hidden state and length"
            f"{' and the keys present' if len(absent) < len(DEFAULT_KEYS) else ''}; {use}")


def _did_you_mean(absent: list[str], numeric: list[str]) -> str:
    """``"; did you mean 'level' for 'levle'?"``: the numeric key nearest each absent one (difflib's ratio >= 0.75,
    a one-letter typo or swap of a short name), "" when none is near."""
    near = [(k, difflib.get_close_matches(k, numeric, n=1, cutoff=0.75)) for k in absent]
    said = [f"{m[0]!r} for {k!r}" for k, m in near if m]
    return f"; did you mean {', '.join(said)}?" if said else ""


def _numeric_keys(problems) -> list[str]:
    """Keys whose present values are numbers in every problem holding them (sorted), less the identifiers
    :data:`IDENTIFIER_KEYS` (numbers, but no features: the keys these messages offer as features); a list or an
    object a row's data column holds in ``metadata[DATA_COLUMNS]`` counts as that key's non-numeric value there."""
    found: dict[str, bool] = {}
    for prob in problems:
        held = {**{k: v for k, v in _columns(prob).items() if not _shadowed(v)}, **_meta(prob)}  # the row's values
        for k, v in held.items():
            if v is not None and k not in IDENTIFIER_KEYS and k != DATA_COLUMNS:
                found[k] = found.get(k, True) and is_numeric(v)
    return sorted(k for k, ok in found.items() if ok and any(_has_value(p, k) for p in problems))
