"""Rewards: rollouts -> per-token advantages A_ijt, shape (N, T), zero off the mask.

A reward is a plain function ``reward(batch, ctx) -> RewardOutput`` registered under a
name (DESIGN.md, "Rewards and per-token advantages"); variants are chosen once from
:data:`REWARDS`, never by flags tested in loops. Built-ins (registered when
:mod:`gradprobe.rewards` is imported, which importing any of its modules does first):

``outcome``, ``outcome_batch``, ``outcome_dr``            :mod:`gradprobe.rewards.outcome`
``mc_value``, ``mc_advantage``, ``hybrid``, ``hybrid_0.9``,
``hybrid_0.5``, ``hybrid_0.1``, ``mc_min``                :mod:`gradprobe.rewards.dense`
``process``, ``process_hybrid_0.9``, ``process_hybrid_0.5``,
``process_hybrid_0.1``                                    :mod:`gradprobe.rewards.process`
``majority_vote``                                         :mod:`gradprobe.rewards.majority`
``outcome_loo``                                           :mod:`gradprobe.rewards.counterfactual`

A user's TRL-style sequence reward becomes a :data:`Reward` with
:func:`gradprobe.rewards.sequence.sequence_reward`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import math
import numbers
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..config import MCConfig, SamplingConfig
from ..ledger import CATEGORIES, Ledger
from ..types import RolloutBatch
from .output import UnwritableStatError, advantage_overflow, type_name, writable_stats


class UnknownRewardError(ValueError):
    """No reward is registered under that name (the message lists the valid ones)."""


class RewardFunctionError(RuntimeError):
    """A user reward function raised or returned something unusable (names the reward)."""


@dataclass
class RewardContext:
    """What a reward may use besides the batch.

    Attributes
    ----------
    task : Task
        ``score(completion, problem) -> float``; scores MC continuations.
    sampler : Sampler or None
        Draws MC continuations; None is fine for rewards that do not sample.
    sampling : SamplingConfig
        The rollouts' settings; continuations use the same ones.
    mc : MCConfig
        K continuations per boundary, ``max_steps``.
    ledger : Ledger
        Continuation tokens are charged here (once per batch, see ``cache``).
    tokenizer : transformers tokenizer
        Decodes completions and finds step boundaries.
    eos_token_ids : list[int]
    cache : dict
        Shared by the rewards of ONE batch: MC step values are computed once for all dense
        rewards and charged to the ledger once. Use a fresh context (or clear it) per batch.
    """

    task: Any
    sampler: Any
    sampling: SamplingConfig
    mc: MCConfig
    ledger: Ledger
    tokenizer: Any
    eos_token_ids: list[int]
    cache: dict = field(default_factory=dict)


@dataclass
class RewardOutput:
    """Per-token advantages of one reward on one batch.

    Attributes
    ----------
    name : str
    advantages : Tensor (float64), shape (N, T)
        A_ijt; zero off ``batch.completion_mask`` and on invalid rows.
    valid : BoolTensor, shape (N,)
        Rows that received a reward (a missing reward is masked, never silently zero); dtype ``torch.bool``.
        The probe zeroes the advantages of rows marked False (:func:`checked_output`).
    generated_tokens : dict[str, int], default ``{}``
        Tokens this reward generated per update beyond the rollouts, by ledger category
        (keys of :data:`gradprobe.ledger.CATEGORIES`), each a whole number >= 0,
        e.g. ``{"continuation": 1234}``; ``{}`` (or omitted) for sequence rewards. None is refused.
    stats : dict, default ``{}``
        ``missing``, ``zero_variance_groups``, ``mean_reward`` (ignoring missing), ...; None is refused.
    """

    name: str
    advantages: torch.Tensor
    valid: torch.Tensor
    generated_tokens: dict[str, int] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


Reward = Callable[[RolloutBatch, RewardContext], RewardOutput]
REWARDS: dict[str, Reward] = {}
#: The names of :data:`REWARDS` registered with ``rollout_only=True`` (:func:`register_reward`): rewards that charge no
#: generated tokens beyond the rollouts, which a plan's budget check bounds
#: (:func:`gradprobe.training.budget.most_tokens_per_update`).
ROLLOUT_ONLY: set[str] = set()
#: Resolvers of names that are not registered: ``resolver(name) -> Reward or None`` (None: not its kind of name);
#: :mod:`gradprobe.rewards.plugin` adds the ``MODULE:FUNCTION`` import-path one.
RESOLVERS: list[Callable[[str], "Reward | None"]] = []
#: Resolvers consulted after :data:`RESOLVERS` within a :func:`scoped_resolvers` block only, in that thread or task
#: alone (a context variable: the module's lists are never changed, so another thread never sees them).
_SCOPED_RESOLVERS: contextvars.ContextVar[tuple] = contextvars.ContextVar("gradprobe_scoped_resolvers", default=())


@contextlib.contextmanager
def scoped_resolvers(*resolvers: Callable[[str], "Reward | None"]) -> Iterator[None]:
    """Within the block, :func:`get_reward` also asks ``resolvers`` (``resolver(name) -> Reward or None``, after
    :data:`RESOLVERS`) for a name that is not registered; outside it, and in other threads or asyncio tasks, nothing
    changes. Why: a caller that reads a plan without its rewards' code (``calib``'s plan check) resolves names to
    stand-ins without editing :data:`RESOLVERS`, which every thread shares. Restored on exit, an exception too.

    Raises
    ------
    TypeError
        A resolver that is not callable (named by its repr).
    """
    for resolve in resolvers:
        if not callable(resolve):
            raise TypeError(f"scoped_resolvers takes callables resolver(name) -> Reward or None, got {resolve!r}")
    token = _SCOPED_RESOLVERS.set((*_SCOPED_RESOLVERS.get(), *resolvers))
    try:
        yield
    finally:
        _SCOPED_RESOLVERS.reset(token)


def _checked_counts(value, name: str) -> dict[str, int]:
    """``generated_tokens`` as ``{category: int}``; RewardFunctionError naming the reward, key and value otherwise."""
    accepted = ", ".join(repr(c) for c in CATEGORIES)
    if value is None:
        raise RewardFunctionError(f"reward {name!r} returned generated_tokens=None: return {{}} (or omit it) when "
                                  "it generates no tokens beyond the rollouts, else counts by ledger category "
                                  f"({accepted})")
    if not isinstance(value, Mapping):
        raise RewardFunctionError(f"reward {name!r} returned generated_tokens of type {type(value).__name__} "
                                  f"({value!r:.60}): a dict of token counts by ledger category ({accepted}), "
                                  "{} for none")
    counts = {}
    for key, n in value.items():
        if not isinstance(key, str) or key not in CATEGORIES:
            raise RewardFunctionError(f"reward {name!r} returned generated_tokens[{key!r}] = {n!r:.60}: {key!r} is "
                                      f"not a ledger category; accepted keys: {accepted}")
        if isinstance(n, torch.Tensor) and n.dim() == 0 and not n.dtype.is_complex and n.dtype != torch.bool:
            n = n.item()  # a count computed on tensors: mask.sum()
        whole = isinstance(n, numbers.Integral) or (isinstance(n, numbers.Real) and math.isfinite(float(n))
                                                    and float(n).is_integer())  # 12, 12.0, np.float32(12)
        if isinstance(n, bool) or not whole or n < 0:
            raise RewardFunctionError(f"reward {name!r} returned generated_tokens[{key!r}] = {n!r:.60} "
                                      f"({type(n).__name__}): a token count must be a whole number >= 0 (an int)")
        counts[key] = int(n)
    return counts


def _checked_valid(valid, name: str, rows: int) -> torch.Tensor:
    """``valid``, a bool tensor of shape (rows,); RewardFunctionError naming the reward and its shape or dtype
    otherwise."""
    if not isinstance(valid, torch.Tensor) or tuple(valid.shape) != (rows,):
        got = tuple(valid.shape) if isinstance(valid, torch.Tensor) else type(valid).__name__
        raise RewardFunctionError(f"reward {name!r} returned valid of shape {got}, expected ({rows},): one bool per "
                                  "completion, True where it received a reward")
    if valid.dtype != torch.bool:
        raise RewardFunctionError(f"reward {name!r} returned valid of dtype {valid.dtype}: valid must be boolean "
                                  "(torch.bool), True where the completion received a reward (e.g. scores.isfinite())")
    return valid


def _check_rollout_only(counts: dict[str, int], name: str) -> None:
    """Refuse generated tokens reported by a reward registered under ``name`` with ``rollout_only=True``: that
    declaration promises none beyond the rollouts, and a plan's budget check bounds the tokens of one update of its
    arms by B * G * max_new_tokens on that promise (:func:`gradprobe.training.budget.most_tokens_per_update`), so a
    token budget checked as within reach could be spent by fewer updates than checked, unseen. Counts of 0 charge
    nothing and keep the promise. ``counts``: the checked ``generated_tokens`` (:func:`_checked_counts`).

    Raises
    ------
    RewardFunctionError
        One line naming the reward, the tokens it reported and the fix: register it without ``rollout_only=True``
        when it generates tokens of its own, else return ``generated_tokens={}``."""
    if name not in ROLLOUT_ONLY or not any(counts.values()):
        return
    reported = ", ".join(f"{k!r}: {n:,}" for k, n in counts.items() if n)
    raise rollout_only_refusal(name, f"returned generated_tokens={{{reported}}}", "else return generated_tokens={}")


#: The ``stats`` keys that the probe's diagnosis and the training loop read themselves (:func:`gradprobe.probe.result
#: .diagnose`, :mod:`gradprobe.training.update`), each a count of groups or completions, except the largest |reward|.
READ_STATS = {"groups": "count", "zero_variance_groups": "count", "missing": "count", "nonfinite_groups": "count",
              "overflow_max_abs_reward": "number"}


def _checked_read_stats(stats: dict, name: str) -> None:
    """Refuse a ``stats`` value that gradprobe reads itself (:data:`READ_STATS`) when it is not what it reads: a
    whole number >= 0 for a count (None as absent), a finite or infinite real number for the largest |reward|; the
    message names the reward, the key and the value, before the probe or update reads it after its compute."""
    for key, kind in READ_STATS.items():
        n = stats.get(key)
        if n is None:
            continue
        real = isinstance(n, numbers.Real) and not isinstance(n, bool)
        if kind == "count" and not (real and math.isfinite(float(n)) and float(n).is_integer() and n >= 0):
            raise RewardFunctionError(f"reward {name!r} returned stats[{key!r}] = {n!r:.60} ({type(n).__name__}): "
                                      "gradprobe reads that key as a count, a whole number >= 0; return an int, or "
                                      "name your statistic otherwise")
        if kind == "number" and not (real and not math.isnan(float(n))):
            raise RewardFunctionError(f"reward {name!r} returned stats[{key!r}] = {n!r:.60} ({type(n).__name__}): "
                                      "gradprobe reads that key as a number; return a float, or name your statistic "
                                      "otherwise")


def rollout_only_refusal(name: str, did: str, otherwise: str = "") -> RewardFunctionError:
    """The one-line refusal of the reward ``name``, registered with ``rollout_only=True``, that generated tokens all
    the same (``did``: what it did, ``"returned generated_tokens={...}"``): why the promise matters (the plan's budget
    check, :func:`gradprobe.training.budget.most_tokens_per_update`) and the fix, ``otherwise`` the second one."""
    return RewardFunctionError(
        f"reward {name!r} is registered with rollout_only=True (it generates no tokens beyond the rollouts) but {did}: "
        "a plan's budget check bounds each update of its arms by B * G * max_new_tokens tokens on that promise, so its "
        f"token budget could be spent unchecked; register it without rollout_only=True (register_reward({name!r})) "
        f"when it generates tokens of its own{', ' + otherwise if otherwise else ''}")


def checked_output(out: RewardOutput, name: str, batch: RolloutBatch) -> RewardOutput:
    """A reward's output checked and normalised where it enters the probe, so every consumer sees checked values.

    Why: only shapes were checked, so a negative or unknown ``generated_tokens`` count changed tokens per update
    (and the verdict) silently, ``None`` or text raised a TypeError deep inside the probe, and a float ``valid`` or
    advantages on rows marked invalid gave numbers for a reward the probe reported as having no usable reward.

    Returns
    -------
    RewardOutput
        A copy (``out`` is not modified) whose ``advantages`` are float64, shape (N, T), exactly 0 off
        ``batch.completion_mask`` and on rows where ``valid`` is False; ``valid`` a bool tensor (N,);
        ``generated_tokens`` a plain ``{category: int}`` (tokens); ``stats`` a plain dict.

    Raises
    ------
    RewardFunctionError
        ``out`` is not a RewardOutput; ``advantages`` not a tensor of shape (N, T); ``valid`` not a ``torch.bool``
        tensor of shape (N,); ``generated_tokens`` None, not a dict, a key that is not a ledger category
        (:data:`gradprobe.ledger.CATEGORIES`), or a count that is negative, fractional, non-finite, a bool or text;
        ``stats`` None, not a dict, or holding what gradprobe cannot write as JSON (:func:`~gradprobe.rewards.output
        .writable_stats`: an array, a set, bytes...; numpy scalars and 0-d tensors are converted), or a key gradprobe
        reads itself (:data:`READ_STATS`) that is not a number of its kind; or ``name`` is registered with
        ``rollout_only=True`` (:data:`ROLLOUT_ONLY`) and ``generated_tokens`` reports tokens
        (:func:`_check_rollout_only`); or ``advantages`` on a completion's token of a row with a reward exceed
        :data:`~gradprobe.rewards.output.MAX_ABS_ADVANTAGE` in size, where the probe's statistics (which square them)
        overflow float64 and training's float32 loss would too (:func:`~gradprobe.rewards.output.advantage_overflow`:
        the largest |A| and the fix, rescale the reward). The one-line message names the reward, the field, the
        value and the fix.
    """
    if not isinstance(out, RewardOutput):
        raise RewardFunctionError(f"reward {name!r} returned {type(out).__name__}, expected a RewardOutput")
    mask = batch.completion_mask
    adv = out.advantages
    if not isinstance(adv, torch.Tensor) or tuple(adv.shape) != tuple(mask.shape):
        got = tuple(adv.shape) if isinstance(adv, torch.Tensor) else type(adv).__name__
        raise RewardFunctionError(f"reward {name!r} returned advantages of shape {got}, expected {tuple(mask.shape)} "
                                  "(N = B * G completions x T completion tokens)")
    valid = _checked_valid(out.valid, name, mask.shape[0])
    counts = _checked_counts(out.generated_tokens, name)
    _check_rollout_only(counts, name)
    if out.stats is None or not isinstance(out.stats, Mapping):
        raise RewardFunctionError(f"reward {name!r} returned stats={out.stats!r:.60} ({type(out.stats).__name__}): "
                                  "return a dict of statistics, {} (or omit it) for none")
    try:
        stats = writable_stats(out.stats)
    except UnwritableStatError as e:
        raise RewardFunctionError(f"reward {name!r} returned {e}") from e
    _checked_read_stats(stats, name)
    adv = adv.detach().to(torch.float64)  # advantages are constants of the loss (stop-gradient), never its graph
    keep = valid.to(adv.device)[:, None] & mask.to(adv.device).bool()
    if (refusal := advantage_overflow(adv, f"reward {name!r}", keep)) is not None:  # before anything squares them
        raise RewardFunctionError(refusal)
    adv = torch.where(keep, adv, torch.zeros((), dtype=torch.float64, device=adv.device))  # exact zeros
    return dataclasses.replace(out, advantages=adv, valid=valid, generated_tokens=counts, stats=stats)


def register_reward(name: str, *, rollout_only: bool = False):
    """Decorator registering a :data:`Reward` under ``name``.

    Parameters
    ----------
    name : str
        The name plans and commands give the reward (``reward = "my_reward"``, ``--rewards my_reward``).
    rollout_only : bool, default False
        Declare that the reward charges no generated tokens beyond the rollouts: its
        :attr:`RewardOutput.generated_tokens` is always ``{}`` and it samples nothing (no MC continuations, no call
        of ``ctx.sampler``). One update of an arm with such a reward (and no prompt selection) then generates at most
        B * G * max_new_tokens tokens, so a plan whose ``[budget] updates`` never let it spend its ``[budget]
        generated_tokens`` is refused (:func:`gradprobe.training.budget.check_budget`), and an output of the reward
        that reports generated tokens is refused where it enters training or the probe (:func:`checked_output`);
        False (the default): the reward may generate tokens of its own, and that check skips its arms. Recorded in
        :data:`ROLLOUT_ONLY`; registering the name again (the same function, or one :func:`same_reward` takes for
        it: of the same module and qualified name, a reloaded module) sets it anew, a built-in's too (without it, the
        budget check no longer bounds that reward's arms: :func:`gradprobe.training.budget.most_tokens_per_update`
        reads :data:`ROLLOUT_ONLY` for every name registered here).

    Raises
    ------
    ValueError
        ``name`` is empty, contains a comma, or is already registered to another function (one defined elsewhere:
        a user's ``def outcome`` does not replace the built-in ``outcome``; another lambda of the same module), or
        the function's reward wrappers loop or never end (:func:`_unwrap`; a ``unittest.mock.MagicMock``).
    TypeError
        ``name`` is not a string (``@register_reward("my_reward")``, not bare ``@register_reward``), ``rollout_only``
        is not a bool (``True`` or ``False``; not ``"no"``, 1, a numpy value), both raised before anything is
        registered, or the decorated object is not callable.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string (use @register_reward(\"my_reward\")), got {name!r} "
                        f"({type(name).__name__})")
    if not isinstance(rollout_only, bool):  # "no" or a numpy array would be read by truth value (or raise later)
        raise TypeError(f"register_reward({name!r}, rollout_only=...) takes True or False, got "
                        f"rollout_only={rollout_only!r:.60} ({type_name(rollout_only)}); pass rollout_only=True "
                        f"only when the reward charges no generated tokens beyond the rollouts")
    if not name or "," in name or name != name.strip():
        raise ValueError(f"invalid reward name {name!r}: non-empty, no comma, no surrounding spaces")

    def deco(fn: Reward) -> Reward:
        if not callable(fn):
            raise TypeError(f"register_reward({name!r}) decorates a function, got {fn!r} ({type(fn).__name__})")
        _unwrap(fn)  # wrappers that loop or never end are refused here, not when a probe first compares them
        old = registered_elsewhere(name, fn)
        if old is not None:
            raise ValueError(f"reward {name!r} is already registered ({old!r}); register yours under another name")
        REWARDS[name] = fn
        (ROLLOUT_ONLY.add if rollout_only else ROLLOUT_ONLY.discard)(name)
        return fn

    return deco


def registered_elsewhere(name: str, fn) -> Reward | None:
    """The reward registered under ``name`` when ``fn`` is another function, else None (nothing registered there, or
    ``fn`` itself: the same object, or one :func:`same_reward` takes for it).

    Why: a name is one reward everywhere. :func:`register_reward` refuses to give a registered name to another
    function, and the probe refuses a caller's function under one (a user's ``def outcome`` would be taken for the
    built-in ``outcome``: grpo's reference, its notes, a calibration's domain).

    Raises
    ------
    ValueError
        As :func:`same_reward`."""
    old = REWARDS.get(name)
    return None if old is None or same_reward(old, fn) else old


def same_reward(a, b) -> bool:
    """Whether ``b`` registered under a name that holds ``a`` registers it again, rather than giving the name to
    another reward (:func:`registered_elsewhere`): the same object, or the same place (:func:`_where`): one of the
    same module and qualified name (a reloaded module, a notebook cell run again or edited), the same function
    wrapped again (:func:`~gradprobe.rewards.sequence.sequence_reward` with the same scale, a plug-in's check). A
    lenient rule on purpose: a user re-running their own definition replaces it; one probe given the same function
    under two names is the stricter :func:`check_distinct_rewards`.

    Raises
    ------
    ValueError
        The reward wrappers of ``a`` or ``b`` loop (:func:`_unwrap`): the reward and the fix."""
    return a is b or _where(a) == _where(b)


def check_distinct_rewards(rewards: list[tuple[str, Reward]]) -> None:
    """Refuse one reward given under two names in ``rewards`` (``(name, reward)`` pairs, as :func:`parse_rewards`
    returns them): ``outcome`` and an import path naming the built-in's own function
    (``gradprobe.rewards.outcome:outcome``), or a registered name and a plug-in wrapping its function. Why: each name
    is probed as a reward of its own, so the one reward would be computed twice and reported as two, as a plug-in
    function under two names would (:func:`gradprobe.rewards.plugin.load_reward_plugin` refuses that).

    Raises
    ------
    ValueError
        The first such pair: both names, the function, and the fix (give it once, under one name); or a reward
        whose wrappers loop (:func:`_unwrap`): the reward and the fix.

    One reward is one function object computing it (:func:`_computes`), not a shared module and qualified name: two
    variants of a function made by one ``functools.wraps`` decorator share those and are two rewards."""
    keys = [_computes(fn) for _, fn in rewards]
    for i, (second, fn) in enumerate(rewards):
        first = next((name for (name, _), key in zip(rewards[:i], keys) if key == keys[i]), None)
        if first is not None:
            raise ValueError(f"rewards {first!r} and {second!r} are one reward "
                             f"({reward_origin(user_function(fn))}): give it once, under one name (e.g. {first!r} "
                             "alone); two names would probe it as two rewards")


def _computes(fn) -> tuple:
    """What computes the reward ``fn`` (:func:`check_distinct_rewards`): the function object inside its reward
    wrappers (:func:`_unwrap`: a sequence reward's, with each wrapper's scale; a plug-in's check), or a bound
    method's instance and function, each compared by identity (:class:`SameObject`)."""
    fn, scales = _unwrap(fn)
    if inspect.ismethod(fn):
        return SameObject(fn.__self__), SameObject(fn.__func__), scales
    return SameObject(fn), scales


def user_function(fn):
    """The user's function inside ``fn``'s reward wrappers (:func:`_unwrap`: a sequence reward's source, a
    ``(function, scale)`` pair, a plug-in check), or ``fn`` itself: what a reward's identity, its messages and
    :func:`gradprobe.probe.stages.is_builtin_reward` (whose module it is) read. Raises nothing."""
    return _unwrap(fn)[0]


#: the most reward wrappers (:func:`_unwrap`) one reward may nest: gradprobe's own nest two or three
MAX_WRAPPERS = 64


def _unwrap(fn) -> tuple:
    """(the function inside ``fn``'s reward wrappers, the scales of its sequence rewards, outermost first): the one
    walk every reward identity (:func:`_where`, :func:`_computes`) and message (:func:`reward_origin`) makes.

    The wrappers are gradprobe's own: a :func:`~gradprobe.rewards.sequence.sequence_reward`'s ``sequence_source``,
    a ``(function, scale)`` pair, and a plug-in check's ``native_source``
    (:func:`gradprobe.rewards.plugin.checked_native`), followed in that order; one naming its own holder is no
    wrapper. A ``functools.partial``, a ``functools.wraps`` chain, a bound method or a callable object is a reward
    of its own, as it is.

    Raises
    ------
    ValueError
        The wrappers loop (one leads back to another already walked), or nest deeper than :data:`MAX_WRAPPERS`
        layers (an object that makes attributes when asked, e.g. ``unittest.mock.MagicMock``, has no innermost
        function): the reward and the fix."""
    given, scales, seen = fn, [], {id(fn): fn}  # the objects kept, so their ids are not reused during the walk
    while len(seen) <= MAX_WRAPPERS:
        source = getattr(fn, "sequence_source", None)
        if isinstance(source, tuple) and len(source) == 2 and source[0] is not fn:
            inner, attr = source[0], "sequence_source"
            scales.append(source[1])
        else:
            inner, attr = getattr(fn, "native_source", None), "native_source"
            if inner is None or inner is fn:
                return fn, tuple(scales)
        if id(inner) in seen:
            raise ValueError(f"reward {given!r}: its wrappers loop ({attr} of {fn!r} leads back to {inner!r}): set "
                             "sequence_source and native_source to the function each wraps")
        seen[id(inner)] = fn = inner
    raise ValueError(f"reward {given!r}: its sequence_source / native_source wrappers nest deeper than {MAX_WRAPPERS} "
                     "layers (an object that makes attributes when asked, e.g. unittest.mock.MagicMock, never ends): "
                     "register a plain function, or a mock with spec=")


def reward_origin(fn) -> str:
    """A reward function as messages name it: ``module.qualified_name``, its ``__name__`` in place of a qualified
    name through ``<locals>`` (a wrapper made by a function: ``gradprobe.rewards.sequence.sequence_reward_brevity``);
    its repr when it has neither (a ``functools.partial``, a callable object). A lambda, or a reward wrapping one
    (:func:`_unwrap`), is followed by where it is defined (``(a lambda at line 3 of nb.py)``): lambdas share their
    name."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname:
        return repr(fn)
    name = getattr(fn, "__name__", qualname) if "<locals>" in qualname else qualname
    try:
        inner = user_function(fn)
    except ValueError:  # wrappers that loop: named as they are (a message must not fail on the reward it names)
        inner = fn
    code = _defining_code(inner)
    place = (f" (a lambda at line {code.co_firstlineno} of {code.co_filename})"
             if code is not None and getattr(inner, "__name__", None) == "<lambda>" else "")
    return f"{module}.{name}{place}"


class SameObject:
    """A value equal only to another holding the very same object (``is``), hashable whatever the object (a callable
    instance may define ``__eq__`` without ``__hash__``, or one that does not return a bool); it holds the object, so
    its id is not reused while the value is kept. Reward identities (:func:`_where`) and the plug-in records of
    :mod:`gradprobe.rewards.plugin` compare objects through it."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return isinstance(other, SameObject) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _where(fn) -> tuple:
    """Where a reward function is defined, compared by :func:`same_reward` (in this process; never written anywhere):

    - a function: (its module, its qualified name), so a function registered again under its name is the same one
      when these match (a reloaded module re-running its ``@register_reward``, a notebook cell run again), and a
      user's function of the same name in another module (``def outcome`` in a notebook) is another reward; a
      lambda or a function defined inside another (a ``<`` in its qualified name, which every lambda of a module
      shares) adds the line its code starts on, so two lambdas of one module are two rewards, wrapped by a
      ``functools.wraps`` decorator too (the code of the function it wraps: :func:`_defining_code`);
    - a :func:`~gradprobe.rewards.sequence.sequence_reward` wrapper: where the function it wraps is, with its scale
      (every wrapper has the wrapper's own module and qualified name: two wrapped functions are two rewards); a
      plug-in's native reward (:func:`gradprobe.rewards.plugin.checked_native`): where the function it checks is;
    - a callable without a qualified name (a ``functools.partial``, a callable object): the object itself.

    Raises
    ------
    ValueError
        ``fn``'s wrappers loop (:func:`_unwrap`)."""
    fn, scales = _unwrap(fn)
    wrappers = tuple(part for scale in scales for part in ("sequence_reward", scale))
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str) or not qualname:
        return *wrappers, module, SameObject(fn)
    code = _defining_code(fn)
    if "<" in qualname and code is not None:
        return *wrappers, module, qualname, code.co_firstlineno
    return *wrappers, module, qualname


def _defining_code(fn) -> types.CodeType | None:
    """The code of the function whose module and qualified name ``fn`` carries: a ``functools.wraps`` wrapper's
    ``__wrapped__``, followed while it has the wrapper's module and qualified name (which ``wraps`` copies, but not
    the code), else ``fn``'s own; None when that has no code (a builtin, a callable object).

    Why: :func:`_where` tells lambdas and nested functions apart by the line their code starts on, and every
    function one ``wraps`` decorator wraps has that decorator's inner function's code, so two lambdas it wrapped
    were one reward (one silently replaced the other) and a lambda wrapped was another reward than the lambda.
    The walk stops at a ``__wrapped__`` of another name (not a copy: set by hand), at one already walked (a loop)
    and after :data:`MAX_WRAPPERS` layers (an object that makes attributes when asked); it does not start when
    ``fn``'s module or qualified name is not text. Names are compared as plain text (:func:`_text_place`) and an
    attribute that raises counts as absent (:func:`_attribute`): identities and messages must not fail on it."""
    place, seen = _text_place(fn), {id(fn): fn}
    while place is not None and len(seen) <= MAX_WRAPPERS:
        inner = _attribute(fn, "__wrapped__")
        if inner is None or id(inner) in seen or _text_place(inner) != place:
            break
        seen[id(inner)] = fn = inner
    code = _attribute(fn, "__code__")
    return code if isinstance(code, types.CodeType) else None


def _attribute(obj, name: str):
    """``getattr(obj, name, None)``, None too when the attribute raises (a property of a proxy not yet set up)."""
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - any error of a user's attribute reads as no attribute
        return None


def _text_place(fn) -> tuple[str, str] | None:
    """``fn``'s (module, qualified name) as plain ``str`` copies (a ``str`` subclass's own ``__eq__`` is never called
    on them), or None when either is not text."""
    module, qualname = _attribute(fn, "__module__"), _attribute(fn, "__qualname__")
    if isinstance(module, str) and isinstance(qualname, str):
        return str.__str__(module), str.__str__(qualname)
    return None


def get_reward(name: str) -> Reward:
    """The reward registered under ``name``.

    Raises
    ------
    UnknownRewardError
        Unknown name; the message lists the registered ones and the import-path form
        (:mod:`gradprobe.rewards.plugin`), or says why an import-path name could not be loaded.
    """
    if name in REWARDS:
        return REWARDS[name]
    for resolve in (*RESOLVERS, *_SCOPED_RESOLVERS.get()):  # a scoped_resolvers block's own ones last
        reward = resolve(name)
        if reward is not None:
            return reward
    if name.strip().rstrip(":").endswith(".py"):  # a plug-in's file without its function
        raise UnknownRewardError(f"reward {name!r} names a Python file but no function in it: write it as "
                                 f"{name.strip().rstrip(':')}:FUNCTION (the reward function after the last ':')")
    raise UnknownRewardError(f"unknown reward {name!r}; valid: {', '.join(sorted(REWARDS))}, or a reward of your own "
                             "as MODULE:FUNCTION or path/to/file.py:FUNCTION")


def parse_rewards(spec: str | list[str]) -> list[tuple[str, Reward]]:
    """Rewards named by ``"outcome,mc_value"`` or ``["outcome", "mc_value"]``, in order.

    Raises
    ------
    UnknownRewardError
        An unknown name.
    ValueError
        Empty spec, a name given twice, or one reward under two names (:func:`check_distinct_rewards`).
    """
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise ValueError(f"no reward named in {spec!r}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"reward(s) given more than once: {', '.join(dup)}")
    rewards = [(n, get_reward(n)) for n in names]
    check_distinct_rewards(rewards)
    return rewards


def broadcast_to_tokens(row_values: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Sequence-level values (N,) -> per-token (N, T) float64, zero off the mask."""
    return row_values.to(torch.float64)[:, None] * completion_mask.to(torch.float64)
