"""Rank a prompt pool by predicted success, nearest 1/2 first: the work of ``gradprobe rank-prompts`` and
``gradprobe.rank_prompts`` (DESIGN.md, "Prompt difficulty").

One function, :func:`rank_prompts`, with explicit arguments; the command line
(:mod:`gradprobe.cli.difficulty`) parses argv and calls it, the public ``gradprobe.rank_prompts``
(:mod:`gradprobe.api.prompts`) calls it with keyword settings. The settings, their defaults and their
checks live once, in :class:`PoolSettings` (shared with ``difficulty-eval``) and :class:`RankSettings`;
the argparse defaults read them.

Steps: features of the pool prompts under the policy (one batched forward, in chunks, charged ``selection``),
``probe_samples`` sampled completions of each of ``fit_prompts`` seeded pool prompts (charged
``selection``) give the observed outcomes the logistic model is fitted on (and those prompts'
posteriors), then p_hat for every pool prompt with its 90% intervals (:mod:`gradprobe.difficulty.intervals`)
and the ranking by |p_hat - 1/2| (:mod:`gradprobe.difficulty.estimator`; the compute in
:mod:`gradprobe.difficulty.rank_pool`, what is recorded and printed in :mod:`gradprobe.difficulty.rank_report`).
A pool over :data:`MAX_POOL` prompts is refused before anything is built (:func:`check_pool`), and so is an ``out``
that cannot be a writable folder or holds another command's output (:func:`prepare_pool`,
:func:`gradprobe.difficulty.folder.check_output_folder`).

Importing this module imports neither torch nor pandas.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, NamedTuple

from ..config import DTYPE_NAMES, MAX_POOL, MAX_SEED, SamplingConfig
from ..ledger import Ledger
from ..outputs import prepare_output_dir, removed_if_left_empty
from ..tasks import load_task
from ..tasks.base import repeated_prompts
from .estimator import EstimatorConfig, check_unique_ids
from .folder import check_output_folder
from .intervals import LEVEL
from .metadata import DEFAULT_KEYS, check_metadata_keys
from .metrics import MIN_RESAMPLES, check_resamples
from .progress import pool_problems
from .rank_report import SMALL_FIT_PROMPTS, document, report
from .rank_report import repeated_data_ids as _repeated_data_ids  # noqa: F401  (its old name here)


__all__ = ["DTYPES", "SMALL_FIT_PROMPTS", "MAX_POOL", "MAX_SEED", "PoolSettings", "RankSettings", "PreparedPool",
           "check_pool", "prepare_pool", "rank_prompts"]

#: Policy dtypes the commands accept (``--dtype``).
DTYPES = DTYPE_NAMES


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class PoolSettings:
    """Settings shared by ``rank-prompts`` and ``difficulty-eval`` (the command-line flag of each field is
    its name with dashes: ``prior_strength`` <-> ``--prior-strength``; these are the flags' defaults).

    Attributes
    ----------
    skip_malformed : bool
        Tasks read from data (gsm8k, jsonl:, hf:): skip (count and warn about) malformed rows instead of stopping
        at the first.
    prior_strength : float
        n0, pseudo-counts of the logistic model's prior in each prompt's Beta posterior (> 0, checked
        by :class:`~gradprobe.difficulty.estimator.EstimatorConfig`).
    decay : float
        gamma, per-update decay of observed counts (in (0, 1], checked by EstimatorConfig).
    metadata_keys : str
        Comma-separated ``Problem.metadata`` keys used as features (missing -> imputed), each once; a list
        or tuple of keys is accepted and stored joined. Their values must be numbers
        (:func:`gradprobe.difficulty.metadata.check_metadata_keys`, checked when the pool is loaded).
    data_seed : int
        Data seed of the pool, in [0, 2**63 - 1]: ``task.problems("train", pool, seed=data_seed)``.
    seed : int
        Sampling seed, and the seed of the fit-prompt choice (rank) / fit-eval split (eval); in
        [0, 2**63 - 1].
    max_new_tokens : int
        >= 1, tokens per sampled completion at most.
    temperature : float
        Sampling temperature.
    batch_size : int
        >= 1, sequences per generate call. The sampled completions depend on it (micro-batch composition:
        :class:`gradprobe.rollout.hf.HFSampler`), so a run is reproduced with the same value and seed.
    feature_batch_size : int
        >= 1, prompts per feature forward.
    device : str
        Torch device of the policy (``cpu``, ``cuda``...).
    dtype : str
        One of :data:`DTYPES`.
    no_progress : bool
        Hide the progress on stderr (tqdm): the seconds of the pool's building, the feature forward and the
        sampled completions.

    Raises
    ------
    ValueError
        A value of the wrong type or out of range; the message names the setting, its flag and the
        value (e.g. ``max_new_tokens (--max-new-tokens) must be >= 1, got 0``, ``seed (--seed) must be an
        integer in [0, 2**63 - 1], got -1``); a metadata key given twice; a key of a list that holds a comma
        (it would be read as two keys).
    """

    skip_malformed: bool = False
    prior_strength: float = 8.0
    decay: float = 0.9
    metadata_keys: str = ",".join(DEFAULT_KEYS)
    data_seed: int = field(default=0, metadata={"min": 0, "max": MAX_SEED})
    seed: int = field(default=0, metadata={"min": 0, "max": MAX_SEED})
    max_new_tokens: int = field(default=128, metadata={"min": 1})
    temperature: float = 1.0
    batch_size: int = field(default=64, metadata={"min": 1})
    feature_batch_size: int = field(default=32, metadata={"min": 1})
    device: str = "cpu"
    dtype: str = "float32"
    no_progress: bool = False

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _checked(f, getattr(self, f.name)))

    @property
    def keys(self) -> tuple[str, ...]:
        """:attr:`metadata_keys` split at commas, blanks dropped."""
        return tuple(k.strip() for k in self.metadata_keys.split(",") if k.strip())

    @classmethod
    def defaults(cls) -> dict:
        """Field name -> default (what the command line's flags default to)."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def from_args(cls, args):
        """The settings from an argparse Namespace holding (at least) every field by name."""
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class RankSettings(PoolSettings):
    """Settings of ``gradprobe rank-prompts`` / ``gradprobe.rank_prompts``: :class:`PoolSettings` and

    Attributes
    ----------
    probe_samples : int
        k >= 1, completions sampled per fit prompt to observe outcomes.
    fit_prompts : int
        >= 1, pool prompts probed to fit the logistic model (at most the pool).
    resamples : int
        >= 10 (:data:`~gradprobe.difficulty.metrics.MIN_RESAMPLES`, the minimum of ``gradprobe probe --bootstrap``:
        with fewer a 90% interval's bounds are single refits; :func:`~gradprobe.difficulty.metrics.check_resamples`),
        bootstrap refits of the logistic model behind the 90% intervals of p_hat and p_model
        (:mod:`gradprobe.difficulty.intervals`; a refit costs about as much as the fit, 10-30 ms for 64 probed prompts
        on a CPU core); the bounds' Monte Carlo error shrinks as 1 / sqrt(resamples).

    Raises
    ------
    ValueError
        As :class:`PoolSettings`'s, and ``resamples (--resamples) must be at least 10 bootstrap refits (...), got 1``.
    """

    probe_samples: int = field(default=4, metadata={"min": 1})
    fit_prompts: int = field(default=64, metadata={"min": 1})
    resamples: int = field(default=200, metadata={"min": MIN_RESAMPLES})

    @classmethod
    def from_options(cls, options: Mapping) -> RankSettings:
        """The settings from keyword options by their Python names (the rest keep their defaults).

        Raises
        ------
        ValueError
            An unknown name (the message names it and lists the valid ones), or a bad value.
        """
        valid = [f.name for f in dataclasses.fields(cls)]
        for key in options:
            if key not in valid:
                raise ValueError(f"unknown rank_prompts setting {key!r}; valid: {', '.join(sorted(valid))}")
        return cls(**options)


def _checked(f: dataclasses.Field, value):
    """``value`` of field ``f`` checked against the field's type (and ``metadata["min"]``), normalized."""
    where = f"{f.name} ({_flag(f.name)})"
    if f.name == "metadata_keys":
        if isinstance(value, (list, tuple)) and all(isinstance(k, str) for k in value):
            joined = next((k for k in value if "," in k), None)  # stored joined: it would be split into two keys
            if joined is not None:
                raise ValueError(f"{where} key {joined!r} holds a comma, which separates keys: give each key as its "
                                 "own list item, and rename a data column whose name holds a comma")
            value = ",".join(value)
        if not isinstance(value, str):
            raise ValueError(f"{where} must be comma-separated keys or a list of keys, got {value!r}")
        keys = [k.strip() for k in value.split(",") if k.strip()]
        twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if twice is not None:
            raise ValueError(f"{where} names {twice!r} twice; give each key once")
        return value
    if f.name == "resamples":  # why so many, and the fix, in its message
        return check_resamples(value, level=LEVEL, default=f.default, unit="bootstrap refits", estimate="p_hat")
    if f.name == "dtype" and value not in DTYPES:
        raise ValueError(f"{where} must be one of {', '.join(DTYPES)}, got {value!r}")
    if f.type == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be True or False, got {value!r}")
    elif f.type == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{where} must be an integer, got {value!r}")
        value = int(value)
    elif f.type == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{where} must be a number, got {value!r}")
        value = float(value)
    elif f.type == "str" and not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r}")
    low, high = f.metadata.get("min"), f.metadata.get("max")
    if high is not None and not low <= value <= high:
        raise ValueError(f"{where} must be an integer in [{low}, 2**63 - 1], got {value}")
    if low is not None and value < low:
        raise ValueError(f"{where} must be >= {low}, got {value}")
    return value


class PreparedPool(NamedTuple):
    """What both commands start from (:func:`prepare_pool`)."""

    out: Path | None         # the output folder, created and proven writable (None: nothing is written)
    policy: object           # gradprobe.models.Policy
    task: object             # the loaded Task
    pool: list               # list[Problem], length N
    sampling: object         # gradprobe.config.SamplingConfig
    estimator: object        # gradprobe.difficulty.estimator.EstimatorConfig
    metadata_keys: tuple     # feature metadata keys


def check_pool(pool) -> None:
    """Refuse a pool size that is not an integer in [1, :data:`MAX_POOL`], before anything is built.

    Every prompt of the pool is built in memory first (a generated task generates each: chain_sum's take about
    1.5 KB each) and read by one feature forward, so a pool of 10,000,000 grew to 3.5 GB in 100 s before anything
    was printed; the limit is a plan's for ``[task] pool`` (``gradprobe.training.plan_checks.MAX_POOL``).

    Raises
    ------
    ValueError
        Naming ``pool (--pool)``, the value, the limit and the fix.
    """
    if isinstance(pool, bool) or not isinstance(pool, numbers.Integral) or pool < 1:
        raise ValueError(f"pool (--pool) must be an integer >= 1, got {pool!r}")
    if pool > MAX_POOL:
        raise ValueError(f"pool (--pool) = {pool:,} is more than {MAX_POOL:,} prompts: every prompt of the pool is "
                         "built in memory and read by the feature forward before anything is ranked, so a pool this "
                         f"large would not finish; give --pool at most {MAX_POOL:,} (a few thousand is the usual "
                         "size), as a plan's [task] pool")


def prepare_pool(model: str, task: str, pool: int, out: str | Path | None, settings: PoolSettings, *,
                 command: str = "rank-prompts") -> PreparedPool:
    """Check the pool size (:func:`check_pool`) and the settings, create the output folder and prove it writable
    (:func:`gradprobe.outputs.prepare_output_dir`), load the task and build its training pool (on stderr a bar with
    total and ETA where the pool's size is known, else the seconds: :func:`~gradprobe.difficulty.progress.
    pool_problems`; hidden by ``no_progress``), load the policy, in that order: a bad ``out`` is refused before the
    pool is built (minutes for a large one) or the model loaded, and a folder this call created is removed again
    when a later step refuses (:func:`gradprobe.outputs.removed_if_left_empty`), so refused input leaves nothing.

    Parameters
    ----------
    model : str
        ``tiny``, ``tiny-qwen2``, ``smollm2-135m``, a folder, ``.gguf`` file or hub id.
    task : str
        Task spec, e.g. ``chain_sum:min_terms=2,max_terms=4``.
    pool : int
        N >= 1, prompts of ``task.problems("train", N, seed=settings.data_seed)``.
    out : path or None
        Output folder (None: no folder).
    settings : PoolSettings
    command : str
        The command, to label the progress line.

    Raises
    ------
    ValueError
        A pool size outside [1, :data:`MAX_POOL`] (:func:`check_pool`), bad estimator settings (named), an unknown
        task, an empty pool, duplicate prompt ids, a metadata key whose values are not numbers (named, with the
        numeric keys of the pool).
    OSError
        ``out`` cannot be created or written (:class:`gradprobe.outputs.OutputDirError`: a file in the way, a broken
        link or a symlink loop, an unwritable folder), before the task is loaded.
    gradprobe.models.ModelNotFoundError
        Unknown model.

    Warns
    -----
    UserWarning
        A metadata key found in no pool prompt (imputed as a constant carrying no information); prompts
        whose text repeats another pool prompt's (:func:`gradprobe.tasks.base.repeated_prompts`).
    """
    from ..models import load_policy

    check_pool(pool)
    est_config = EstimatorConfig(prior_strength=settings.prior_strength, decay=settings.decay)  # settings first,
    sampling = SamplingConfig(temperature=settings.temperature, max_new_tokens=settings.max_new_tokens,
                              batch_size=settings.batch_size)
    with removed_if_left_empty(out):  # a folder made here goes again when the data or the model is refused
        # then the folder (a file in the way, a symlink loop, unwritable: refused before the pool, minutes to build)
        folder = None if out is None else prepare_output_dir(Path(out))
        loaded = load_task(task, **({"skip_malformed": True} if settings.skip_malformed else {}))  # then the data,
        problems = pool_problems(loaded, pool, seed=settings.data_seed, desc=f"{command}: building the pool of "
                                 f"{pool:,} prompts", progress=not settings.no_progress)  # total and ETA if known
        if not problems:
            raise ValueError(f"task {task!r} returned an empty pool for --pool {pool}")
        check_unique_ids([p.id for p in problems])
        _warn_repeats(problems)
        # strings as features: refused before the model; absent keys are warned by the feature pass
        check_metadata_keys(problems, settings.keys, warn_absent=False)
        # then the model: an alias (``tiny`` = the shipped or cached tier), folder, GGUF file or hub id, as a plan's
        # [model] name
        policy = load_policy(model, dtype=settings.dtype, device=settings.device, seed=settings.seed)
    return PreparedPool(folder, policy, loaded, problems, sampling, est_config, settings.keys)


def _warn_repeats(problems) -> None:
    """Warn (UserWarning, pointing at :func:`prepare_pool`'s caller) when pool prompts repeat another's text
    (:func:`gradprobe.tasks.base.repeated_prompts`), naming the first two groups of ids."""
    repeats = repeated_prompts(problems)
    if repeats:
        shown = "; ".join(" = ".join(ids[:3]) + (f" (+{len(ids) - 3} more)" if len(ids) > 3 else "")
                          for ids in repeats[:2])
        warnings.warn(f"the pool holds {sum(len(ids) - 1 for ids in repeats)} prompt(s) that repeat another's text "
                      f"({shown}{'; ...' if len(repeats) > 2 else ''}): rank-prompts ranks each copy on its own, "
                      f"difficulty-eval keeps the copies of a prompt in one half; deduplicate the data to give each "
                      f"prompt one place", stacklevel=4)


def rank_prompts(model: str, task: str, pool: int, *, out: str | Path | None = None,
                 settings: RankSettings | None = None, say: Callable[[str], None] | None = None,
                 model_identity: Callable[[str], dict | None] | None = None):
    """Predict each pool prompt's success probability under the policy and rank the pool nearest 1/2 first.

    Parameters
    ----------
    model : str
        ``tiny``, ``tiny-qwen2``, ``smollm2-135m``, a folder, ``.gguf`` file or hub id.
    task : str
        Task spec, e.g. ``chain_sum:min_terms=2,max_terms=4``.
    pool : int
        N in [1, :data:`MAX_POOL`], pool prompts (``task.problems("train", N, seed=settings.data_seed)``).
    out : path, optional
        Write ``ranking.csv`` (the returned table) and ``rank.json`` (its ``.attrs``) there, atomically
        (default: nothing is written). A folder this call created is removed again when it fails
        before writing anything.
    settings : RankSettings, optional
        Default ``RankSettings()``.
    say : callable(str), optional
        Receives the summary lines the command prints on stdout (the model, notes, the verdict with its
        interval, the held-out fit, the prompt nearest 1/2 with its intervals, the selection cost, the files
        written; :func:`gradprobe.difficulty.rank_report.report`); default: silent. When the logistic model has no
        signal (every probed outcome equal) a warning line goes to stderr either way.
    model_identity : callable(str) -> dict or None, optional
        The identity of the weights ``model`` names (``gradprobe.training.run_folder.model_weights_identity``, which
        the command line and ``gradprobe.rank_prompts`` pass: this layer cannot import training's), called once the
        model is loaded; recorded as rank.json's ``model_weights`` and printed. Default: not identified (None).

    Returns
    -------
    pandas.DataFrame
        One row per pool prompt, nearest 1/2 first: ``rank`` (1..N), ``prompt_id``, ``data_id`` (only when the data
        has an ``id`` column: each row's own id, empty where a row has none), ``p_hat`` (predicted success
        probability) with ``p_lo``, ``p_hi``, ``distance`` = |p_hat - 1/2|, ``attempts`` and ``successes`` (sampled
        completions and how many the verifier scored 1; 0 for unprobed prompts) with ``rate_lo``, ``rate_hi``
        (empty for an unprobed prompt), ``p_model`` (the logistic model's prediction alone) with ``p_model_lo``,
        ``p_model_hi``: every interval at 90%, their methods and sources in :mod:`gradprobe.difficulty.intervals`.
        ``.attrs`` is ``rank.json``'s content (:func:`gradprobe.difficulty.rank_report.document`).

    Raises
    ------
    ValueError
        ``pool`` < 1 or > :data:`MAX_POOL` (:func:`check_pool`), a bad setting (named), an unknown task, an empty
        pool, duplicate ids, a non-numeric metadata key.
    OSError
        ``out`` cannot be written, holds another command's output or files named as a ranking's that are not an
        earlier ranking (``ranking.csv`` without ``rank.json``; :mod:`gradprobe.difficulty.folder`), before any
        compute. An earlier ranking is replaced, ``say`` told so just before the new one is written.
    gradprobe.models.ModelNotFoundError
        Unknown model.
    """
    from .rank_pool import fit_and_rank, write_ranking  # torch and pandas, only when a ranking runs

    settings = RankSettings() if settings is None else settings
    check_pool(pool)
    say = say or (lambda line: None)
    record = _settings_record(model, task, pool, out, settings)
    replacing = check_output_folder(out, "rank-prompts")  # another command's folder: refused before compute
    with removed_if_left_empty(out):
        prepared = prepare_pool(str(model), str(task), int(pool), out, settings)
        weights = None if model_identity is None else model_identity(str(model))
        ledger = Ledger()
        ranked = fit_and_rank(prepared, settings, ledger)
        caught = ranked.caught
        doc = document(record, prepared, ranked, ledger, weights)
        if prepared.out is not None:
            if replacing:  # said when it happens: a refused setting or a failed compute replaces nothing
                say(replacing)
            write_ranking(prepared.out, ranked.table, doc)
    table = ranked.table
    table.attrs.update(json.loads(json.dumps(doc, allow_nan=False)))  # rank.json's content, as read back
    if caught:
        print(f"gradprobe rank-prompts: warning: {caught[0].message}; the ranking carries no model signal "
              f"(p_hat differs only through the probed prompts' posteriors)", file=sys.stderr)
    report(say, table, doc, ledger, prepared.out)
    return table


def _settings_record(model, task, pool, out, settings: RankSettings) -> dict:
    """rank.json's ``settings``: the call's arguments and every setting."""
    return {"command": "rank-prompts", "model": str(model), "task": str(task),
            "skip_malformed": settings.skip_malformed, "pool": int(pool), "out": None if out is None else str(out),
            "probe_samples": settings.probe_samples, "fit_prompts": settings.fit_prompts,
            **{k: v for k, v in dataclasses.asdict(settings).items()
               if k not in ("skip_malformed", "probe_samples", "fit_prompts")}}
