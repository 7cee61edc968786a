"""What a reward's ``stats`` may hold: the values gradprobe can write.

A reward's :attr:`~gradprobe.rewards.base.RewardOutput.stats` is written to ``probe.json`` (each reward's
``stats``) and ``metrics.jsonl`` (``reward_stats``) through :func:`gradprobe.outputs.json_safe` and
``json.dumps``, which hold numbers, strings, booleans, None, and lists, tuples and dicts of them; a numpy or torch
scalar (anything 0-dimensional with ``.item()``) is written as the Python value it holds. Anything else (a numpy
array, a tensor of several values, a set, bytes, an object) fails that write, after the compute it records.
:func:`writable_stats` checks a reward's ``stats`` when the reward returns, so such a value is refused at the
update that produced it, naming the key and the fix. It imports nothing of the reward registry, so every place that
checks a reward's output can call it.

A reward's advantages must also be small enough for the probe's statistics: :func:`advantage_overflow` refuses
those above :data:`MAX_ABS_ADVANTAGE`, where squaring them overflows float64, before any compute uses them.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["UnwritableStatError", "writable_stats", "type_name", "MAX_ABS_ADVANTAGE", "advantage_overflow"]

#: what the JSON writers hold, named in every refusal
ACCEPTED = "numbers, strings, bools, None, and lists or dicts of them"

#: Largest |advantage| the probe takes. Its statistics are at most quadratic in the advantages: verl's signal proxy
#: sums A_n^2 W_n over the rows (W_n at most 2 per token, :func:`gradprobe.probe.signal_proxy.signal_proxy_group_sums`)
#: and the bootstrap's variance sums n_bootstrap squared replicates of sum_nt w_nt A_nt a_nt (weights w summing to at
#: most 1, :func:`gradprobe.probe.estimate.estimate_rewards`), so each is at most |A|^2 times a product of counts
#: (tokens, replicates) and the alignment's square. float64 holds up to 1.8e308 (its square root 1.3e154): |A| up to
#: 1e100 squares to 1e200 and leaves a factor 1.8e108 for that product, beyond any batch, bootstrap or alignment,
#: while |A| = 1e150 squares to 1e300 and a sum over a few hundred tokens overflows. GRPO's group-normalised
#: advantages are at most sqrt(G - 1), so a reward near the limit is mis-scaled, not more informative.
MAX_ABS_ADVANTAGE = 1e100


class UnwritableStatError(TypeError):
    """A value of a reward's ``stats`` that gradprobe cannot write (``where``: its place, ``stats['key'][0]``;
    ``value``: the value). The message names the place, the type and the fix, not the reward: the caller adds it."""

    def __init__(self, where: str, value, why: str = ""):
        self.where, self.value = where, value
        super().__init__(f"{where} of type {type_name(value)}{_shape(value)}{why}, which gradprobe cannot write "
                         f"(a reward's stats go to probe.json and metrics.jsonl as JSON: {ACCEPTED}); "
                         f"{_fix(value)}")


def writable_stats(stats: Mapping) -> dict:
    """``stats`` (a reward's ``RewardOutput.stats``) as a plain dict of values gradprobe can write, numpy and torch
    scalars (anything 0-dimensional with ``.item()``: ``np.float32(1)``, ``torch.tensor(2.0)``) replaced by the
    Python values they hold, as :func:`gradprobe.outputs.json_safe` writes them; non-finite floats are kept (the
    writers encode them). Keys are kept as they are (the writers write ``str(key)``).

    Why: a value the writers cannot hold failed only when ``probe.json`` or ``metrics.jsonl`` was written, after
    the compute it records, with a TypeError naming neither the reward nor the key.

    Raises
    ------
    UnwritableStatError
        A value anywhere inside (in a list, tuple or dict too) is not a number, string, bool, None, list, tuple or
        dict, or a 0-dimensional value holding such a thing; or a list, tuple or dict holds itself. The message
        names its place (``stats['group_means']``, ``stats['per_group'][2]``), its type (and shape) and the fix
        (``.tolist()`` for an array or tensor, ``float(...)`` for one value).
    TypeError
        ``stats`` is not a mapping (the caller checks that first, with its own message).
    """
    if not isinstance(stats, Mapping):
        raise TypeError(f"stats must be a dict, got {type(stats).__name__}")
    return {key: _writable(value, f"stats[{key!r}]", ()) for key, value in stats.items()}


def _writable(x, where: str, inside: tuple[int, ...]):
    """``x`` with 0-dimensional values replaced by their ``.item()``, recursively; UnwritableStatError (``where``:
    its place) for a value the writers cannot hold. ``inside``: the ids of the containers ``x`` is in."""
    if getattr(x, "shape", None) == () and hasattr(x, "item"):  # numpy / torch scalar: json_safe's rule
        x = x.item()
    if x is None or isinstance(x, (str, int, float)):  # bool is an int; numpy.float64 a float
        return x
    if not isinstance(x, (dict, list, tuple)):
        raise UnwritableStatError(where, x)
    if id(x) in inside:
        raise UnwritableStatError(where, x, " that holds itself")
    inside = (*inside, id(x))
    if isinstance(x, dict):
        return {k: _writable(v, f"{where}[{k!r}]", inside) for k, v in x.items()}
    items = [_writable(v, f"{where}[{i}]", inside) for i, v in enumerate(x)]
    return tuple(items) if isinstance(x, tuple) else items


def advantage_overflow(advantages, who: str, keep=None) -> str | None:
    """The one-line refusal of advantages too large for the probe's statistics, or None when they are within
    :data:`MAX_ABS_ADVANTAGE`.

    Why: the probe squares the advantages (:data:`MAX_ABS_ADVANTAGE`); above the limit its bootstrap variance
    overflowed to inf (a stored SNR of 0.0), its signal proxy to inf (refused only when ``probe.json`` was written,
    after the whole compute, by a message about that file), and its gains printed as 150-digit numbers.

    Parameters
    ----------
    advantages : torch.Tensor
        A reward's advantages, any shape ((N, T) per token); read with tensor methods only (this module imports no
        torch).
    who : str
        How the message names them: ``"reward 'NAME'"``.
    keep : torch.Tensor of bool, optional
        The entries the probe reads, of ``advantages``' shape (the completion mask, and rows with a reward); all
        by default. Non-finite values are left to the callers' own checks (a NaN reward must be masked).

    Returns
    -------
    str or None
        ``"{who} returned advantages up to |A| = ..."`` naming the largest finite |A| on ``keep``, the limit, why
        and the fix (rescale the reward); None when that largest |A| is at most the limit (or nothing is kept).
    """
    a = advantages.detach().double().abs()  # a bool or int tensor too: checked_output makes it float64
    if keep is not None:
        a = a[keep.to(a.device)]
    a = a[a.isfinite()]
    largest = float(a.max()) if a.numel() else 0.0
    if largest <= MAX_ABS_ADVANTAGE:
        return None
    return (f"{who} returned advantages up to |A| = {largest:.3g}, above the {MAX_ABS_ADVANTAGE:.0e} the probe takes: "
            "its statistics square them (the bootstrap's variance, verl's signal proxy A^2 W), which overflows "
            "float64 (largest 1.8e308); rescale the reward (divide its scores or advantages by a constant; GRPO's "
            "group-normalised advantages are at most sqrt(G - 1))")


def type_name(value) -> str:
    """``value``'s type as the message names it: with its module when not a builtin (``numpy.ndarray``)."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _shape(value) -> str:
    """`` (shape (4,))`` for an array or tensor, ``""`` otherwise."""
    shape = getattr(value, "shape", None)
    return f" (shape {tuple(shape)})" if isinstance(shape, tuple) else ""  # torch.Size is a tuple


def _fix(value) -> str:
    """How to make ``value`` writable, by its kind."""
    if isinstance(value, (dict, list, tuple)):
        return "return a copy that does not hold itself"
    if hasattr(value, "tolist"):
        return "convert it: x.tolist() (a list of numbers) for an array or tensor, float(x) or x.item() for one value"
    if isinstance(value, (set, frozenset)):
        return "convert it: sorted(x) or list(x)"
    if isinstance(value, (bytes, bytearray)):
        return "convert it: x.decode() (text)"
    if isinstance(value, complex):
        return "convert it: x.real and x.imag as two numbers, or abs(x)"
    return "convert it to one of those (a number: float(x); text: str(x))"
