"""Procedurally generated tasks from reasoning-gym (chain_sum, basic_arithmetic, ...).

reasoning-gym builds item ``i`` of a dataset from ``random.Random(seed + i)``,
so two datasets whose seeds are closer than their sizes share items. The
splits therefore use seeds derived from the user's seed with
``numpy.random.SeedSequence`` (spawn keys 0 for train and 1 for heldout,
reduced to 31 bits), which makes such overlaps improbable, and the heldout
split additionally drops every question that also occurs in the train split
generated with the same seed and the same size (``n``, or ``train_size`` when
the task was built with one: pass the size of the real training pool there).
When questions are dropped, the heldout dataset is regenerated at twice the
size until ``n`` survive (for gsm_symbolic this changes which items appear,
since its template choice depends on the size; the result stays deterministic).

Scoring is exact match (:mod:`gradprobe.tasks.verify`), not reasoning-gym's
``score_answer``, which gives partial credit for answers that contain the gold
one. A gold answer that is a single number is compared numerically, so for
datasets whose required *form* matters (``fraction_simplification``: ``6/8``
equals ``3/4``) the score is looser than the dataset's own.

Problem ids: ``"<name>/<split>/<index>"`` for ``seed=0`` and
``"<name>/<split>/s<seed>/<index>"`` otherwise, where ``index`` is the item's
index in the generated reasoning-gym dataset. For chain_sum and
basic_arithmetic the first ``n`` train problems are a prefix of the first
``n + k``.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from gradprobe.tasks.base import Problem, Task, TaskConfigError

__all__ = ["ReasoningGymTask", "registered_names", "NUMERIC_DATASETS"]

#: Datasets whose gold answers are all numbers (format_rate then wants a number).
NUMERIC_DATASETS = frozenset(
    {"chain_sum", "basic_arithmetic", "gsm_symbolic", "products", "decimal_arithmetic",
     "leg_counting", "count_bits", "gcd", "lcm"}
)
_RESERVED = ("seed", "size")
_MAX_GROWTH = 64  # heldout regeneration stops at this many times n (+1024)


def registered_names() -> list[str]:
    """Sorted names of all datasets in reasoning-gym's registry."""
    from reasoning_gym.factory import DATASETS  # ~1 s import, deferred

    return sorted(DATASETS)


def _derived_seed(seed: int, split: str) -> int:
    key = 0 if split == "train" else 1
    state = np.random.SeedSequence(seed, spawn_key=(key,)).generate_state(1, dtype=np.uint32)
    return int(state[0] >> 1)


def _question_key(question: str) -> str:
    return " ".join(question.split())


class ReasoningGymTask(Task):
    """A reasoning-gym dataset as a :class:`~gradprobe.tasks.base.Task`.

    Parameters
    ----------
    name : str
        A name in reasoning-gym's registry, e.g. ``"chain_sum"``.
    train_size : int, optional
        Size of the train pool that heldout problems are deduplicated against;
        default: the ``n`` of each ``problems("heldout", n)`` call.
    **config
        Fields of the dataset's config class (for chain_sum: ``min_terms``,
        ``max_terms``, ``min_digits``, ``max_digits``, ``allow_negation``).
        ``seed`` and ``size`` are set by :meth:`problems` and are refused here.

    Raises
    ------
    TaskConfigError
        A config key the dataset does not have (the message names it and lists
        the valid ones), or values the dataset's validation rejects.
    ValueError
        ``name`` is not registered (use :func:`gradprobe.tasks.load_task` for
        the error that lists the valid names).

    Progress (:attr:`~gradprobe.tasks.base.Task.progress_unit` ``"prompt"``): each problem made is reported with its
    split and data seed (:meth:`~gradprobe.tasks.base.Task.report_progress`); a train pool of n is n of them.
    """

    progress_unit = "prompt"

    def __init__(self, name: str, *, train_size: int | None = None, **config):
        from reasoning_gym.factory import DATASETS

        if name not in DATASETS:
            raise ValueError(f"reasoning-gym has no dataset {name!r}")
        config_cls = DATASETS[name][1]
        valid = [f.name for f in dataclasses.fields(config_cls) if f.name not in _RESERVED]
        for key in config:
            if key in _RESERVED:
                raise TaskConfigError(
                    f"config key {key!r} of task {name!r} is set per call: use "
                    f"problems(split, n, seed=...) instead"
                )
            if key not in valid:
                raise TaskConfigError(
                    f"unknown config key {key!r} for reasoning-gym dataset {name!r}; "
                    f"valid keys: {', '.join(valid)}"
                )
        _check_types(name, config_cls, config)
        if train_size is not None and (not isinstance(train_size, int) or train_size < 0):
            raise TaskConfigError(f"train_size must be a non-negative int, got {train_size!r}")
        self.name = name
        self.config = dict(config)
        self.train_size = train_size
        self.numeric_answers = name in NUMERIC_DATASETS
        self._generate(1, 0)  # validate the values now, not at the first call

    def _generate(self, size: int, rg_seed: int):
        import reasoning_gym

        try:
            return reasoning_gym.create_dataset(self.name, size=size, seed=rg_seed, **self.config)
        except (AssertionError, TypeError, ValueError) as err:
            raise TaskConfigError(
                f"reasoning-gym rejected config {self.config} for {self.name!r}: {err}"
            ) from err

    def _make(self, split: str, seed: int, index: int, item: dict, rg_seed: int) -> Problem:
        tag = f"{split}/{index}" if seed == 0 else f"{split}/s{seed}/{index}"
        meta = json.loads(json.dumps(item.get("metadata", {}), default=str))
        meta.update(rg_seed=rg_seed, rg_index=index, split=split)
        problem = Problem(
            id=f"{self.name}/{tag}",
            question=item["question"],
            answer=str(item["answer"]),
            metadata=meta,
        )
        self.report_progress(1, split=split, seed=seed)  # one item of the request (split, seed) made
        return problem

    def problems(self, split: str, n: int, *, seed: int = 0) -> list[Problem]:
        """Return ``n`` generated problems of ``split`` (see the module docstring).

        Parameters
        ----------
        split : {"train", "heldout"}
        n : int
        seed : int, default 0
            User seed; the reasoning-gym seed of each split is derived from it.

        Returns
        -------
        list of Problem
            Deterministic for ``(split, n, seed)``, ``train_size`` and config.

        Raises
        ------
        ValueError
            Bad split or n; or fewer than ``n`` heldout questions that are not
            in the train split exist (the config's question space is too small).
        """
        self._check_request(split, n)
        rg_train = _derived_seed(seed, "train")
        if split == "train":
            ds = self._generate(n, rg_train) if n else []
            return [self._make(split, seed, i, item, rg_train) for i, item in enumerate(ds)]
        if n == 0:
            return []
        rg_held = _derived_seed(seed, "heldout")
        exclude_n = self.train_size if self.train_size is not None else n
        train_qs = (
            {_question_key(x["question"]) for x in self._generate(exclude_n, rg_train)}
            if exclude_n else set()
        )
        size = n
        while True:
            kept = [
                (i, item) for i, item in enumerate(self._generate(size, rg_held))
                if _question_key(item["question"]) not in train_qs
            ]
            if len(kept) >= n:
                return [self._make(split, seed, i, it, rg_held) for i, it in kept[:n]]
            if size >= _MAX_GROWTH * n + 1024:
                raise ValueError(
                    f"{self.name}: only {len(kept)} of {size} heldout questions are absent "
                    f"from the {exclude_n} train questions; the config {self.config} has too "
                    f"few distinct questions for n={n} (widen it, e.g. more digits/terms)"
                )
            size *= 2


_TYPE_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}


def _check_types(name: str, config_cls, config: dict) -> None:
    """Refuse a config value whose type differs from the dataset config field's default (``min_terms=x``), so
    the message names the key and the type it needs instead of reasoning-gym's internal TypeError.

    Raises
    ------
    TaskConfigError
        A value of the wrong type (an int is accepted where a float is expected).
    """
    for f in dataclasses.fields(config_cls):
        if f.name not in config or f.default is dataclasses.MISSING or f.default is None:
            continue
        want, got = type(f.default), config[f.name]
        ok = isinstance(got, want) and not (want is int and isinstance(got, bool)) or \
            (want is float and isinstance(got, int) and not isinstance(got, bool))
        if want in _TYPE_WORDS and not ok:
            raise TaskConfigError(f"config key {f.name!r} of task {name!r} must be {_TYPE_WORDS[want]} (its default "
                                  f"is {f.default!r}), got {got!r}; e.g. {name}:{f.name}={f.default!r}")
