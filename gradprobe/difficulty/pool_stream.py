"""The pool of ``gradprobe rank-prompts`` held small: its prompts encoded once and packed, its features computed
chunk by chunk (:mod:`gradprobe.difficulty.rank_pool`).

Memory grows with the pool's own text only: the problems (``task.problems``), their token ids packed in one int32
array (4 bytes a token, :class:`PackedPrompts`, instead of a Python list of ints per prompt, about 36 bytes a
token), and a few numbers per prompt (p_hat, its intervals). The feature matrix (N, d_model + keys) of float64,
8 (d_model + 1 + keys) bytes a prompt (1 KB for ``tiny``, 4.6 KB for SmolLM2), is never held whole: each chunk of
:data:`CHUNK` prompts is predicted and dropped.

Progress (tqdm on stderr, hidden by ``--no-progress``): the pool's encoding (prompts done, ETA) and the feature
forward (prompts read, ETA); its building, :func:`gradprobe.difficulty.progress.pool_problems` (total and ETA where
the pool's size is known in advance, else the elapsed seconds).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

from ..tasks.prompts import encode_prompt
from .features import check_prompt_lengths, hidden_features, metadata_features

__all__ = ["CHUNK", "PackedPrompts", "encode_pool", "pool_features"]

#: Prompts per chunk of the streamed feature pass (and of the seeded draws of the intervals: the result does not
#: depend on ``feature_batch_size``).
CHUNK = 2048


class PackedPrompts(Sequence):
    """Token ids of M prompts in one int32 array: prompt i is ``tokens[offsets[i]:offsets[i + 1]]``.

    ``len()`` is M; ``packed[i]`` an int32 array of prompt i's ids (a view); :attr:`total` the tokens of all.
    """

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray):
        self.tokens, self.offsets = tokens, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self):
        return (self.tokens[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:]))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self.tokens[self.offsets[i]: self.offsets[i + 1]]

    @property
    def total(self) -> int:
        """Tokens of every prompt together."""
        return int(self.offsets[-1])


def encode_pool(tokenizer, problems, *, progress: bool = False, desc: str = "encoding") -> PackedPrompts:
    """:func:`gradprobe.tasks.encode_prompt` of each problem's question, packed (:class:`PackedPrompts`), with a
    tqdm bar over the prompts when ``progress``."""
    pieces, lengths = [], np.zeros(len(problems) + 1, dtype=np.int64)
    with tqdm(total=len(problems), desc=desc, unit="prompt", disable=not progress, leave=False) as bar:
        for lo in range(0, len(problems), CHUNK):
            ids = [encode_prompt(tokenizer, p.question) for p in problems[lo: lo + CHUNK]]
            lengths[lo + 1: lo + 1 + len(ids)] = [len(t) for t in ids]
            pieces.append(np.fromiter((t for row in ids for t in row), dtype=np.int32,
                                      count=int(lengths[lo + 1: lo + 1 + len(ids)].sum())))
            bar.update(len(ids))
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    return PackedPrompts(tokens, np.cumsum(lengths))


def pool_features(policy, problems, packed: PackedPrompts, rows, *, metadata_keys, batch_size: int, ledger=None,
                  on_batch=None) -> np.ndarray:
    """[hidden | metadata] features (:func:`gradprobe.difficulty.features.prompt_features`' columns) of the pool
    prompts ``rows`` (indices into ``problems`` / ``packed``), shape (len(rows), d_model + 1 + len(keys)).

    The keys are not checked here (the caller checks them once for the whole pool); the prompt lengths are checked
    against the model's context before the forward (:func:`check_prompt_lengths`), and ``ledger`` is charged as in
    :func:`gradprobe.difficulty.features.hidden_features` (``selection``: prompt tokens read, FLOPs, seconds).
    """
    chosen = [problems[i] for i in rows]
    ids = [packed[i].tolist() for i in rows]
    check_prompt_lengths(policy.model, ids, chosen)
    h = hidden_features(policy, ids, batch_size=batch_size, ledger=ledger, on_batch=on_batch)
    return np.concatenate([h, metadata_features(chosen, ids, metadata_keys, check=False)], axis=1)
