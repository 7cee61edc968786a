"""Which parts of a hybrid reward overflowed float64 group statistics, in the words of a message.

A hybrid reward's advantage is ``lam * A(part) + (1 - lam) * A(outcome)``, each part group-normalised on its own
(:func:`gradprobe.rewards.dense.hybrid_advantages`); a group in which one part's statistics overflow float64 gets
advantage 0 from that part only (:func:`gradprobe.grpo.advantages.group_normalize`), the other part still trains it.
The hybrid records the groups each part overflowed in (``reward_stats["nonfinite_part_groups"]``,
:func:`gradprobe.rewards.dense.hybrid_overflow_stats`); the probe's notes, the training loop's warnings and stops and
the forecast's no-signal reason read it here, so that they name the part to rescale. No torch, no pandas: the
training loop imports it.
"""

from __future__ import annotations

import math

__all__ = ["overflow_parts", "names_text", "part_overflow_text", "part_rescale_text"]


def overflow_parts(stats) -> dict[str, int] | None:
    """A hybrid reward's overflow by part: ``stats["nonfinite_part_groups"]`` (part name -> groups of the batch in
    which that part's group statistics overflowed float64, :func:`gradprobe.rewards.dense.hybrid_overflow_stats`)
    when it names two or more parts, each with a whole count >= 0, and some count is > 0; else None: a plain reward,
    a record written without the key, or a value that is no such mapping. Then ``nonfinite_groups`` is the reward's
    own (those groups got advantage 0); for a hybrid only the overflowing part's advantage is 0 there.
    Raises nothing."""
    parts = stats.get("nonfinite_part_groups") if isinstance(stats, dict) else None
    if not isinstance(parts, dict) or len(parts) < 2:
        return None
    counts = {}
    for name, n in parts.items():
        whole = isinstance(n, int) or isinstance(n, float) and math.isfinite(n) and n.is_integer()
        if isinstance(n, bool) or not whole or n < 0:  # an int of any size: no float conversion (OverflowError)
            return None
        counts[str(name)] = int(n)
    return counts if any(counts.values()) else None


def names_text(names: list[str]) -> str:
    """The names ``names`` quoted for a message: ``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``. Raises nothing."""
    quoted = [repr(x) for x in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def part_overflow_text(parts: dict[str, int], groups: int | None = None, big: float | None = None, *,
                       others_train: bool = True) -> str:
    """Which parts of a hybrid overflowed float64 group statistics and what that did (``parts``:
    :func:`overflow_parts`; ``groups``: the batch's groups, ``big``: the largest |value| that overflowed, each left
    out when None): only the overflowing part's advantage is 0 in those groups. ``others_train``: the other part
    still trains those of them where its own values differ (the probe's notes, the training warning; where they are
    equal it gives advantage 0 too), or, for a reward whose every advantage is 0 (:func:`no_signal_reason`), it gave
    them advantage 0 too.

    e.g. "in 1 of 4 group(s) the part 'mc_value' overflowed float64 group statistics (its values differ there but
    are too large, |value| up to 1e+308): that part's advantage is 0 in those groups; the other part ('outcome')
    still trains those where its own values differ". Raises nothing."""
    over = [p for p, n in parts.items() if n]
    rest = [p for p, n in parts.items() if not n]
    where = " and ".join(f"in {parts[p]}{f' of {groups}' if groups is not None and i == 0 else ''}"
                         f"{' group(s)' if i == 0 else ''} the part {p!r}" for i, p in enumerate(over))
    size = "" if big is None else f", |value| up to {big:.3g}"
    text = (f"{where} overflowed float64 group statistics ({'its' if len(over) == 1 else 'their'} values differ "
            f"there but are too large{size}): ")
    if not rest:
        return text + ("in each such group that part's advantage is 0; the other part still trains the group "
                       "where its own values differ and did not overflow" if others_train else
                       "in each such group that part's advantage is 0, and the other part's is 0 there too")
    part = f"the other part{'s' if len(rest) > 1 else ''} ({names_text(rest)})"
    return text + (f"that part's advantage is 0 in those groups; {part} still train{'' if len(rest) > 1 else 's'} "
                   "those where its own values differ" if others_train else
                   f"that part's advantage is 0 in those groups, and {part} trained none of them either (its "
                   "advantage there is 0 too)")


def part_rescale_text(parts: dict[str, int]) -> str:
    """The fix for a hybrid whose parts ``parts`` (:func:`overflow_parts`) overflowed: rescale those parts, e.g.
    "rescale the part 'mc_value' (e.g. divide its values by their largest magnitude)". Raises nothing."""
    over = [p for p, n in parts.items() if n]
    return (f"rescale the part{'s' if len(over) > 1 else ''} {names_text(over)} (e.g. divide "
            f"{'its' if len(over) == 1 else 'their'} values by their largest magnitude)")
