"""Rank a prompt pool by predicted success, nearest 1/2 first: the work of ``gradprobe rank-prompts`` and
``gradprobe.rank_prompts`` (DESIGN.md, "Prompt difficulty").

One function, :func:`rank_prompts`, with explicit arguments; the command line
(:mod:`gradprobe.cli.difficulty`) parses argv and calls it, the public ``gradprobe.rank_prompts``
(:mod:`gradprobe.api.prompts`) calls it with keyword settings. The settings, their defaults and their
checks live once, in :class:`PoolSettings` (shared with ``difficulty-eval``) and :class:`RankSettings`;
the argparse defaults read them.

Steps: features of the pool prompts under the policy (one batched forward, charged ``selection``),
``probe_samples`` sampled completions of each of ``fit_prompts`` seeded pool prompts (charged
``selection``) give the observed outcomes the logistic model is fitted on (and those prompts'
posteriors), then p_hat for every pool prompt and the ranking by |p_hat - 1/2|
(:mod:`gradprobe.difficulty.estimator`).

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

from ..config import DTYPE_NAMES, SamplingConfig
from ..ledger import Ledger
from ..outputs import prepare_output_dir, removed_if_left_empty, versions
from ..tasks import load_task
from ..tasks.base import repeated_prompts
from .estimator import EstimatorConfig, check_unique_ids, verdict
from .folder import check_output_folder
from .metadata import DEFAULT_KEYS, check_metadata_keys


__all__ = ["DTYPES", "SMALL_FIT_PROMPTS", "MAX_SEED", "PoolSettings", "RankSettings", "PreparedPool", "prepare_pool",
           "rank_prompts"]

#: Policy dtypes the commands accept (``--dtype``).
DTYPES = DTYPE_NAMES
#: Below this many probed prompts the ranking still runs but adds a note that p_model is rough.
SMALL_FIT_PROMPTS = 32
#: The largest ``seed`` / ``data_seed`` (what torch's and numpy's seeding take without overflow).
MAX_SEED = 2**63 - 1


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
        >= 1, sequences per generate call.
    feature_batch_size : int
        >= 1, prompts per feature forward.
    device : str
        Torch device of the policy (``cpu``, ``cuda``...).
    dtype : str
        One of :data:`DTYPES`.
    no_progress : bool
        Hide the progress bar of the sampled completions (tqdm on stderr).

    Raises
    ------
    ValueError
        A value of the wrong type or out of range; the message names the setting, its flag and the
        value (e.g. ``max_new_tokens (--max-new-tokens) must be >= 1, got 0``, ``seed (--seed) must be an
        integer in [0, 2**63 - 1], got -1``); a metadata key given twice.
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
    """

    probe_samples: int = field(default=4, metadata={"min": 1})
    fit_prompts: int = field(default=64, metadata={"min": 1})

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
            value = ",".join(value)
        if not isinstance(value, str):
            raise ValueError(f"{where} must be comma-separated keys or a list of keys, got {value!r}")
        keys = [k.strip() for k in value.split(",") if k.strip()]
        twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if twice is not None:
            raise ValueError(f"{where} names {twice!r} twice; give each key once")
        return value
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


def prepare_pool(model: str, task: str, pool: int, out: str | Path | None, settings: PoolSettings) -> PreparedPool:
    """Check the settings, load the task and its training pool, create the output folder, load the policy,
    in that order (refused input creates nothing and computes nothing).

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

    Raises
    ------
    ValueError
        Bad estimator settings (named), an unknown task, an empty pool, duplicate prompt ids, a metadata key
        whose values are not numbers (named, with the numeric keys of the pool).
    OSError
        ``out`` cannot be created or written.
    gradprobe.models.ModelNotFoundError
        Unknown model.

    Warns
    -----
    UserWarning
        A metadata key found in no pool prompt (imputed as a constant carrying no information); prompts
        whose text repeats another pool prompt's (:func:`gradprobe.tasks.base.repeated_prompts`).
    """
    from ..models import load_policy

    est_config = EstimatorConfig(prior_strength=settings.prior_strength, decay=settings.decay)  # settings first,
    sampling = SamplingConfig(temperature=settings.temperature, max_new_tokens=settings.max_new_tokens,
                              batch_size=settings.batch_size)
    loaded = load_task(task, **({"skip_malformed": True} if settings.skip_malformed else {}))  # then the data,
    problems = loaded.problems("train", pool, seed=settings.data_seed)
    if not problems:
        raise ValueError(f"task {task!r} returned an empty pool for --pool {pool}")
    check_unique_ids([p.id for p in problems])
    repeats = repeated_prompts(problems)
    if repeats:
        shown = "; ".join(" = ".join(ids[:3]) + (f" (+{len(ids) - 3} more)" if len(ids) > 3 else "")
                          for ids in repeats[:2])
        warnings.warn(f"the pool holds {sum(len(ids) - 1 for ids in repeats)} prompt(s) that repeat another's text "
                      f"({shown}{'; ...' if len(repeats) > 2 else ''}): rank-prompts ranks each copy on its own, "
                      f"difficulty-eval keeps the copies of a prompt in one half; deduplicate the data to give each "
                      f"prompt one place", stacklevel=3)
    # strings as features: refused before the folder and the model; absent keys are warned by the feature pass
    check_metadata_keys(problems, settings.keys, warn_absent=False)
    folder = None if out is None else prepare_output_dir(Path(out))  # then the folder, then the compute
    # an alias (``tiny`` = the shipped or cached tier), folder, GGUF file or hub id, as a plan's [model] name
    policy = load_policy(model, dtype=settings.dtype, device=settings.device, seed=settings.seed)
    return PreparedPool(folder, policy, loaded, problems, sampling, est_config, settings.keys)


def rank_prompts(model: str, task: str, pool: int, *, out: str | Path | None = None,
                 settings: RankSettings | None = None, say: Callable[[str], None] | None = None):
    """Predict each pool prompt's success probability under the policy and rank the pool nearest 1/2 first.

    Parameters
    ----------
    model : str
        ``tiny``, ``tiny-qwen2``, ``smollm2-135m``, a folder, ``.gguf`` file or hub id.
    task : str
        Task spec, e.g. ``chain_sum:min_terms=2,max_terms=4``.
    pool : int
        N >= 1, pool prompts (``task.problems("train", N, seed=settings.data_seed)``).
    out : path, optional
        Write ``ranking.csv`` (the returned table) and ``rank.json`` (its ``.attrs``) there, atomically
        (default: nothing is written). A folder this call created is removed again when it fails
        before writing anything.
    settings : RankSettings, optional
        Default ``RankSettings()``.
    say : callable(str), optional
        Receives the summary lines the command prints on stdout (notes, the verdict, the prompt
        nearest 1/2 with the selection cost, the files written); default: silent. When the logistic
        model has no signal (every probed outcome equal) a warning line goes to stderr either way.

    Returns
    -------
    pandas.DataFrame
        One row per pool prompt, nearest 1/2 first: ``rank`` (1..N), ``prompt_id``, ``data_id`` (only when
        the data has an ``id`` column: each row's own id, empty where a row has none), ``p_hat`` (predicted
        success probability), ``distance`` = |p_hat - 1/2|, ``attempts`` and ``successes`` (sampled
        completions of the prompt and how many the verifier scored 1; 0 for unprobed prompts),
        ``p_model`` (the logistic model's prediction alone). ``.attrs`` is ``rank.json``'s content:
        ``command``, ``settings``, ``skipped_rows``, ``repeated_data_ids`` (the ``data_id`` values several
        ranked prompts share, each with its ``count`` and ``prompt_ids``; [] when none), ``verdict`` (the rule
        "the candidates are predicted to fail more often than not", mean p_hat < 1/2, with its ``text``),
        ``no_signal``, ``warning``,
        ``notes``, ``fit_prompts``, ``probe_success``, ``ledger`` (selection tokens, FLOPs,
        device-seconds), ``versions``.

    Raises
    ------
    ValueError
        ``pool`` < 1, a bad setting (named), an unknown task, an empty pool, duplicate ids, a non-numeric metadata key.
    OSError
        ``out`` cannot be written, holds another command's output or files named as a ranking's that are not an
        earlier ranking (``ranking.csv`` without ``rank.json``; :mod:`gradprobe.difficulty.folder`), before any
        compute. An earlier ranking is replaced, ``say`` told so just before the new one is written.
    gradprobe.models.ModelNotFoundError
        Unknown model.
    """
    from .rank_pool import fit_and_rank, write_ranking  # torch and pandas, only when a ranking runs

    settings = RankSettings() if settings is None else settings
    if isinstance(pool, bool) or not isinstance(pool, numbers.Integral) or pool < 1:
        raise ValueError(f"pool (--pool) must be an integer >= 1, got {pool!r}")
    say = say or (lambda line: None)
    record = _settings_record(model, task, pool, out, settings)
    replacing = check_output_folder(out, "rank-prompts")  # another command's folder: refused before compute
    with removed_if_left_empty(out):
        prepared = prepare_pool(str(model), str(task), int(pool), out, settings)
        ledger = Ledger()
        ranked = fit_and_rank(prepared, settings, ledger)
        caught = ranked.caught
        document = _document(record, prepared, ranked, ledger)
        if prepared.out is not None:
            if replacing:  # said when it happens: a refused setting or a failed compute replaces nothing
                say(replacing)
            write_ranking(prepared.out, ranked.table, document)
    table = ranked.table
    table.attrs.update(json.loads(json.dumps(document, allow_nan=False)))  # rank.json's content, as read back
    if caught:
        print(f"gradprobe rank-prompts: warning: {caught[0].message}; the ranking carries no model signal "
              f"(p_hat differs only through the probed prompts' posteriors)", file=sys.stderr)
    _report(say, table, document, ledger, prepared.out)
    return table


def _document(record: dict, prepared: PreparedPool, ranked, ledger) -> dict:
    """rank.json's content (:func:`rank_prompts`' Returns, ``.attrs``) for the ranking ``ranked`` of ``prepared``'s
    pool (a :class:`gradprobe.difficulty.rank_pool.RankedPool`), ``record`` its settings, ``ledger`` its costs.

    ``notes`` cautions (printed as ``note:`` lines): a logistic model fitted on fewer than :data:`SMALL_FIT_PROMPTS`
    probed prompts, and ``probe_samples`` 1: each probed prompt's outcome is one Bernoulli draw (0 or 1), the
    logistic model is fitted to those draws and each prompt's Beta-Bernoulli posterior
    (:mod:`gradprobe.difficulty.estimator`) adds its own draw to that prior, so p_hat follows the draw (trial 5: p_model
    0.84-0.88 after one success, 0.10-0.23 after one failure) and no probed prompt is placed near 1/2."""
    notes = []
    if ranked.n_fit < SMALL_FIT_PROMPTS and not ranked.no_signal:
        notes.append(f"the logistic model is fitted on only {ranked.n_fit} probed prompts; its p_model for "
                     f"unprobed prompts is rough (use --fit-prompts >= {SMALL_FIT_PROMPTS} and a pool at least "
                     f"that large)")
    if int(record["probe_samples"]) == 1:
        notes.append(f"each of the {ranked.n_fit} probed prompts was sampled once (--probe-samples 1), so its "
                     "estimate rests on one Bernoulli draw (success 0 or 1): p_hat of a probed prompt follows that "
                     "one outcome and the ranking cannot place a prompt near 1/2 (one draw cannot tell a prompt solved "
                     "half the time from one always or never solved); use --probe-samples 4 or more (the default 4)")
    caught = ranked.caught
    return {"command": "rank-prompts", "settings": record, "skipped_rows": int(getattr(prepared.task, "skipped", 0)),
            "repeated_data_ids": _repeated_data_ids(prepared.pool), "verdict": verdict(ranked.p_hat),
            "no_signal": ranked.no_signal, "warning": str(caught[0].message) if caught else None, "notes": notes,
            "fit_prompts": ranked.n_fit, "probe_success": ranked.probe_success, "ledger": ledger.to_dict(),
            "versions": versions()}


def _repeated_data_ids(pool: list) -> list[dict]:
    """rank.json's ``repeated_data_ids``: each ``data_id`` that several ranked prompts share, as ``{"data_id": the
    data's id (a string or an integer, as in the data; the text ranking.csv writes when the prompts hold it as
    different types, 17 and "17", which ranking.csv writes alike), "count": prompts holding it, "prompt_ids": those
    prompts' ids, in pool order}``, in the order the ids first occur in the pool; [] when no two ranked prompts share
    one (or the data has no ``id`` column). Only the ranked pool counts: a repeat whose other rows are not in the pool
    cannot be confused in ranking.csv. The loader's warning on stderr names every repeat of the data file
    (:func:`gradprobe.tasks.dataset.repeated_data_ids`); this keeps the pool's in the output file."""
    from ..tasks.dataset import repeated_data_ids

    return [{"data_id": i, "count": len(ps), "prompt_ids": [p.id for p in ps]} for i, ps in repeated_data_ids(pool)]


def _settings_record(model, task, pool, out, settings: RankSettings) -> dict:
    """rank.json's ``settings``: the call's arguments and every setting."""
    return {"command": "rank-prompts", "model": str(model), "task": str(task),
            "skip_malformed": settings.skip_malformed, "pool": int(pool), "out": None if out is None else str(out),
            "probe_samples": settings.probe_samples, "fit_prompts": settings.fit_prompts,
            **{k: v for k, v in dataclasses.asdict(settings).items()
               if k not in ("skip_malformed", "probe_samples", "fit_prompts")}}


def _report(say, table, document: dict, ledger, folder) -> None:
    """The summary lines of ``gradprobe rank-prompts`` (notes, verdict, nearest 1/2 with the cost, files)."""
    for note in document["notes"]:
        say(f"note: {note}")
    say(f"verdict: {document['verdict']['text']} over the {len(table)} pool prompts")
    say(f"nearest 1/2: {table.prompt_id.iloc[0]} (p_hat {table.p_hat.iloc[0]:.3f}); selection cost: "
        f"{ledger.generated_tokens['selection']:,} tokens, {ledger.flops.get('selection', 0):.3g} FLOPs, "
        f"{ledger.device_seconds.get('selection', 0):.1f} s")
    if folder is not None:
        say(f"wrote {folder / 'ranking.csv'} and {folder / 'rank.json'}")
