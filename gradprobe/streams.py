"""Independent random streams, one per source of randomness (DESIGN.md, "Random streams").

Training prompts, rollouts, Monte-Carlo continuations, the probe's held-out reference,
prompt selection and evaluation each draw from their own stream derived from the run's (or
probe's) seed, so adding a reward, an arm or an eval changes no other figure: a reward probed
alone gets the same rollouts and the same reference as when probed beside ``mc_value``, whose
continuations draw from a stream of their own.

The training prompts' order needs no generator: :func:`pool_indices` gives each update's pool
indices as a pure function of (update, seed).

Seeds of the streams (``stream_seed(seed, name)``):

``rollout``
    ``seed`` itself (the stream every earlier version of gradprobe used for rollouts, so a
    grpo run's trajectory is unchanged by the split).
``eval``
    ``1_000_003 + seed`` (as :func:`gradprobe.training.metrics.evaluate` always seeded it).
any other name (``continuation``, ``reference``, ``selection``, ...)
    the first 63 bits of ``numpy.random.SeedSequence([seed, crc32(name)])``'s state: a
    well-mixed seed that differs between names and between seeds (NumPy's SeedSequence
    hashing, O'Neill 2015 / NumPy NEP 19).
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

STREAMS = ("rollout", "continuation", "reference", "selection", "eval")
EVAL_OFFSET = 1_000_003


def stream_seed(seed: int, name: str) -> int:
    """The seed of stream ``name`` of a run or probe seeded with ``seed``.

    Parameters
    ----------
    seed : int
        The run's (or probe's) seed, >= 0.
    name : str
        Stream name (see the module docstring); any non-empty string is accepted so plug-ins
        can own streams of their own.

    Returns
    -------
    int
        A non-negative seed < 2**63.

    Raises
    ------
    ValueError
        A negative seed or an empty name.
    """
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if not name:
        raise ValueError("a random stream needs a name, e.g. 'continuation'")
    if name == "rollout":
        return seed
    if name == "eval":
        return EVAL_OFFSET + seed
    state = np.random.SeedSequence([seed, zlib.crc32(name.encode())]).generate_state(2, dtype=np.uint64)
    return int(state[0] >> np.uint64(1))


def stream_sampler(sampler, seed: int, name: str):
    """A sampler like ``sampler`` drawing from stream ``name`` of ``seed``.

    Uses the backend's ``with_seed(seed) -> Sampler`` (the HF and vLLM samplers have it); a
    backend without it is returned unchanged (then its streams are shared, as before, and the
    figures of one reward depend on which others are drawn from it).
    """
    fork = getattr(sampler, "with_seed", None)
    return fork(stream_seed(seed, name)) if callable(fork) else sampler


@functools.lru_cache(maxsize=8)
def _permutation(seed: int, epoch: int, size: int) -> tuple[int, ...]:
    return tuple(np.random.default_rng([seed, epoch]).permutation(size).tolist())


def pool_indices(update: int, prompts_per_update: int, pool_size: int, seed: int) -> list[int]:
    """Training-pool indices of update ``update`` (0-based): the training prompts' stream.

    Consecutive slices of per-epoch permutations of ``range(pool_size)`` seeded by (seed, epoch), so
    the order is a pure function of the update index (nothing to checkpoint), differs between seeds,
    and every pool prompt is drawn once per epoch. Used by the training loop (B prompts per update)
    and by prompt selection (m x B candidates per update, :mod:`gradprobe.difficulty.select`).

    Returns
    -------
    list[int]
        ``prompts_per_update`` indices in ``[0, pool_size)``.
    """
    out = []
    for pos in range(update * prompts_per_update, (update + 1) * prompts_per_update):
        epoch, k = divmod(pos, pool_size)
        out.append(_permutation(seed, epoch, pool_size)[k])
    return out
