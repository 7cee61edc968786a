"""Budgets of a run: the plan's own check that every budget buys at least one update, and the
command line's shortening of one run's budgets (``gradprobe train --updates N``, ``--budget-*``).

Units: ``generated_tokens`` charged generated tokens, ``device_seconds`` device-seconds, ``flops``
FLOPs, ``updates`` updates (:data:`~gradprobe.training.specs.BUDGET_KINDS`). Torch-free.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import sys
import warnings
from contextvars import ContextVar
from decimal import Decimal

from ..caller import caller_stacklevel
from ..outputs import beyond_float
from ..tables import shown
from ..token_counts import parse_token_count
from .coerce import check_positive, echo_value
from .run_folder import study_above
from .specs import BUDGET_FLAGS, BUDGET_KINDS, ArmSpec, BudgetSpec, PlanError, RunConfig, TrainConfig

__all__ = ["check_budget", "shorten_budget", "BUDGET_ARGUMENTS", "too_small_message", "named_as_arguments",
           "MAX_WHOLE_BUDGET", "reachable_updates", "ROLLOUT_ONLY_REWARDS", "most_tokens_per_update",
           "OutOfReachWarning", "reach_warned_once", "reach_silenced", "reach_unrecorded", "budget_text"]

#: The largest budget of updates or generated tokens (a plan's ``[budget]``, ``--updates``, ``budget_tokens=``): an
#: int64, what the ledger and the JSON readers hold (as :func:`gradprobe.token_counts.parse_token_count`'s maximum).
MAX_WHOLE_BUDGET = 2**63 - 1
#: The budget kinds counted in whole units (tokens, updates): printed by all their digits (:func:`budget_text`)
_WHOLE = ("generated_tokens", "updates")

#: The built-in rewards that charge no generated tokens beyond the rollouts (their ``RewardOutput.generated_tokens`` is
#: ``{}`` and they sample nothing): the outcome rewards (:mod:`gradprobe.rewards.outcome`, ``outcome_loo``), the
#: majority vote and the verifier's process rewards (:mod:`gradprobe.rewards.process`: no continuations). Each is
#: registered with ``register_reward(name, rollout_only=True)`` (:func:`gradprobe.rewards.base.register_reward`);
#: this copy of those declarations lets a plan be checked without importing the rewards (torch), and is read only
#: then: once :mod:`gradprobe.rewards.base` is imported, the declarations registered there decide (a built-in
#: registered again without ``rollout_only=True`` is no longer bounded; :func:`_rollout_only`). The MC rewards
#: (``mc_value``, ``hybrid_*``, ...) charge continuations and a plug-in reward may report any tokens, so
#: :func:`most_tokens_per_update` bounds no update of theirs; a user's reward registered with ``rollout_only=True``
#: is bounded as these are.
ROLLOUT_ONLY_REWARDS = frozenset({"outcome", "outcome_batch", "outcome_dr", "outcome_loo", "majority_vote", "process",
                                  "process_hybrid_0.9", "process_hybrid_0.5", "process_hybrid_0.1"})


class OutOfReachWarning(UserWarning):
    """A ``[budget] generated_tokens`` out of reach of the updates (:func:`check_budget`), or budget flags out of
    reach of each other (:func:`shorten_budget`), in a plan frozen into a study or a run started before such budgets
    were refused: read again to resume, analyse or load it, it is warned about, not refused (the runs were made or
    promised under it). A :class:`UserWarning`, so a filter of those applies to it too."""


#: The out-of-reach warnings given within the current :func:`reach_warned_once` block (None: outside any block)
_REACH_WARNED: ContextVar[set | None] = ContextVar("gradprobe_reach_warned", default=None)
#: True within a :func:`reach_silenced` block: no out-of-reach warning is given there
_REACH_SILENT: ContextVar[bool] = ContextVar("gradprobe_reach_silent", default=False)


@contextlib.contextmanager
def reach_warned_once():
    """Within this block (this thread or task only; a nested block shares the outer one's record), each
    :class:`OutOfReachWarning` is given once per plan (sha256) and budget: a command or API call that reads one frozen
    plan several times (freeze, resume, analyse and load a study) warns once, not once per read. Given means passed
    to :func:`warnings.warn` at the first read, which Python's filters and registries then show, hide ("ignore"; or
    "once", "default": shown before) or raise ("error") as for any warning; later reads do not call it. A read that
    should not count (one whose warnings the caller hides) goes inside :func:`reach_unrecorded`. Outside any block
    every read warns, as Python's filters decide."""
    if _REACH_WARNED.get() is not None:
        yield
        return
    token = _REACH_WARNED.set(set())
    try:
        yield
    finally:
        _REACH_WARNED.reset(token)


@contextlib.contextmanager
def reach_unrecorded():
    """Within this block (this thread or task only) no :class:`OutOfReachWarning` is recorded as given by an
    enclosing :func:`reach_warned_once` block: every read warns as outside one (Python's filters decide), and a read
    after the block within the enclosing one still warns the first time. For a read whose warnings the caller hides
    (a check ahead of the read that reports, under an "ignore" filter), which would otherwise use up the one
    warning."""
    token = _REACH_WARNED.set(None)
    try:
        yield
    finally:
        _REACH_WARNED.reset(token)


@contextlib.contextmanager
def reach_silenced():
    """Within this block (this thread or task only) no :class:`OutOfReachWarning` is given nor recorded: for a trial
    read whose refusal or success decides whether the warning is due at all (a ``gradprobe train`` folder that may
    hold the run being resumed: :func:`gradprobe.training.plan.run_in_folder`, which warns after it if it is). Used
    instead of a :func:`warnings.catch_warnings` block, whose entry resets every module's registry of warnings shown
    (so ``-W once`` would show a warning again) and which is not thread-safe."""
    token = _REACH_SILENT.set(True)
    try:
        yield
    finally:
        _REACH_SILENT.reset(token)


def _warn_out_of_reach(message: str, key) -> None:
    """Warn ``message`` (:class:`OutOfReachWarning`) at gradprobe's caller
    (:func:`gradprobe.caller.caller_stacklevel`); within a :func:`reach_warned_once` block only the first time that
    ``key`` (the plan's sha256 and the facts) comes. The warning goes through :func:`warnings.warn` alone (no
    :func:`warnings.catch_warnings`, which would reset every module's registry of warnings shown), so the filters and
    registries decide whether it shows."""
    if _REACH_SILENT.get():
        return
    warned = _REACH_WARNED.get()
    if warned is not None:
        if key in warned:
            return
        warned.add(key)
    warnings.warn(message, OutOfReachWarning, stacklevel=caller_stacklevel())


def check_budget(budget: BudgetSpec, arms: dict[str, ArmSpec], base: TrainConfig, *,
                 max_new_tokens: int | None = None, check_reach: bool = True, path: str = "<string>",
                 sha256: str | None = None, resumed_run: bool = False) -> None:
    """Refuse a ``[budget]`` that sets no budget, a non-positive one, or one smaller than one update of
    some arm (DESIGN.md: every budget buys updates; a token budget must cover B * G completions of one token);
    with ``budget.updates``, also a ``save_weights_at`` (``[train]`` or an arm's) listing updates past it, and a
    ``budget.generated_tokens`` that the updates never let some arm spend.

    ``max_new_tokens`` (``[sampling] max_new_tokens``, tokens per completion; None: not named) gives one update's
    upper cost, B * G * max_new_tokens, in the token budget's message, as ``--budget-tokens``'s does
    (:func:`shorten_budget`), and bounds the tokens that ``updates`` updates can spend (None: not checked).
    Why a refusal and not a warning: a token budget out of reach never stops a run, so the plan promises arms
    matched on generated tokens that stop on updates instead, its ``[eval] at_fractions`` of the token budget past
    what the updates can spend are never reached, and a frozen plan cannot be fixed for its study afterwards; an
    ``updates`` cap that the tokens can reach (``updates`` * B * G * max_new_tokens >= ``generated_tokens``) is
    accepted, binding or not. ``check_reach`` False (a plan frozen into a study before this check, read again to
    analyse, load or resume it: :func:`gradprobe.training.plan.load_plan`'s ``check_schedule``) turns that refusal
    into an :class:`OutOfReachWarning` with the same facts, led by ``plan PATH:`` (``path``, the plan's file): the
    runs were made or promised under that plan. Within a :func:`reach_warned_once` block it is given once per plan
    (``sha256``, of the file's bytes; None: the facts alone) and budget. ``resumed_run`` True: the plan is that of
    one ``gradprobe train`` run resumed from its folder (:func:`gradprobe.training.plan.run_in_folder`), and the
    warning says so instead of naming a study's frozen plan.

    Raises
    ------
    PlanError
        Naming ``budget.KIND``, the value and the fix in the plan (``[budget] KIND``): ``updates`` not a whole
        number > 0 (give at least 1); ``generated_tokens`` below B * G of the arm with the largest B * G
        (completions of one token each: a lower bound on one update's cost, given as such beside the upper cost
        B * G * max_new_tokens; the budget kinds the plan does not set are offered instead of it); ``updates`` or
        ``generated_tokens`` above :data:`MAX_WHOLE_BUDGET`; another kind not > 0; the ``save_weights_at`` key,
        the updates past the budget, the budget and the fix; or ``generated_tokens`` T above ``updates`` U times the
        most tokens one update of some arm can generate (:func:`most_tokens_per_update`: B * G * max_new_tokens for
        an arm with a rollout-only reward and no prompt selection; other arms are not checked), naming both values,
        the arm, U * B * G * max_new_tokens and the fix: ``[budget] updates`` at least ceil(T / (B * G *
        max_new_tokens)), or drop one of the two.
    """
    given = budget.given()
    if not given:
        raise PlanError(f"[budget] sets no budget; give at least one of {', '.join(BUDGET_KINDS)}")
    for k in ("device_seconds", "flops"):
        check_positive(getattr(budget, k), f"budget.{k}")
    for k in ("updates", "generated_tokens"):
        if getattr(budget, k) is not None and getattr(budget, k) > MAX_WHOLE_BUDGET:
            raise PlanError(f"budget.{k} = {echo_value(getattr(budget, k))} is above 2**63 - 1, the most a run "
                            f"records (an int64); give [budget] {k} at most {MAX_WHOLE_BUDGET}")
    if budget.updates is not None and budget.updates < 1:  # as --updates 0 is refused (_check_override)
        raise PlanError(f"budget.updates must be a whole number > 0 (a budget the run can spend), got "
                        f"{budget_text('updates', budget.updates)}; give [budget] updates at least 1 (one update)")
    if budget.updates is not None:
        _check_save_weights_at(budget.updates, arms, base)
    if budget.generated_tokens is not None:
        check_positive(budget.generated_tokens, "budget.generated_tokens")  # a sign error is named as one
        sizes = {a.name: dataclasses.replace(base, **a.train) for a in arms.values()}
        arm = max(sizes, key=lambda n: sizes[n].prompts_per_update * sizes[n].group)  # first of the largest B * G
        b, g = sizes[arm].prompts_per_update, sizes[arm].group
        if budget.generated_tokens < b * g:
            others = _alternatives(_PLAN_NAMES, tuple(budget.given()), ("generated_tokens",))
            said = f"budget.generated_tokens = {budget_text('generated_tokens', budget.generated_tokens)}"
            raise PlanError(_below_one_update(said, arm, b, g, max_new_tokens, "[budget] generated_tokens", others))
    if budget.updates is not None and budget.generated_tokens is not None and max_new_tokens is not None:
        _check_tokens_reachable(budget.updates, budget.generated_tokens, arms, base, max_new_tokens, check_reach,
                                (path, sha256), resumed_run)


def most_tokens_per_update(reward: str, selection: dict | None, b: int, g: int, max_new_tokens: int) -> int | None:
    """The most charged generated tokens one update of an arm can cost, when that is known before the run:
    B * G * max_new_tokens (``b`` prompts x ``g`` completions, each of at most ``max_new_tokens`` tokens; off-context
    guidance samples the same B * G completions) for an arm whose ``reward`` charges rollout tokens only
    (:func:`_rollout_only`: registered with ``rollout_only=True``, or :data:`ROLLOUT_ONLY_REWARDS` where the rewards
    are not imported) and that selects no prompts (``selection`` empty or None); None otherwise (MC continuations, a
    plug-in reward's own tokens, a selection rule's candidate rollouts and feature pass are charged too and have no
    bound here).
    Units: tokens (an int, exact at any size)."""
    if not _rollout_only(reward) or selection:
        return None
    return b * g * max_new_tokens


def _rollout_only(reward: str) -> bool:
    """Whether the reward named ``reward`` charges no generated tokens beyond the rollouts, as its registration
    declares (``register_reward(name, rollout_only=True)``). Where :mod:`gradprobe.rewards.base` is imported (a
    reward's module imported it), its :data:`~gradprobe.rewards.base.ROLLOUT_ONLY` decides for every name
    registered there (:data:`~gradprobe.rewards.base.REWARDS`), a built-in re-registered without the declaration
    too; for a name not registered there, and where it is not imported (this module imports no torch), the copy of
    the built-ins' declarations :data:`ROLLOUT_ONLY_REWARDS`."""
    rewards = sys.modules.get("gradprobe.rewards.base")
    if rewards is not None and reward in getattr(rewards, "REWARDS", ()):
        return reward in getattr(rewards, "ROLLOUT_ONLY", ())
    return reward in ROLLOUT_ONLY_REWARDS


def _check_tokens_reachable(updates: int, tokens: int, arms: dict[str, ArmSpec], base: TrainConfig,
                            max_new_tokens: int, refuse: bool = True, plan: tuple = ("<string>", None),
                            resumed_run: bool = False) -> None:
    """Refuse ``[budget] generated_tokens`` that ``[budget] updates`` never lets an arm spend: ``updates`` updates of
    the arm generate at most ``updates`` * :func:`most_tokens_per_update` tokens, and when that is below ``tokens``
    every run of the arm stops on updates with the token budget unspent (not matched on tokens as the plan says).
    The arm named is the first with the smallest bound (raising ``updates`` for it suffices for all); arms without a
    bound (MC, plug-in rewards, prompt selection) are not checked. ``refuse`` False: warned, not refused (a frozen
    plan, :func:`check_budget`; ``plan``: its (path, sha256); ``resumed_run``: the plan of one ``gradprobe train`` run
    being resumed, not a study's frozen plan, as the warning says)."""
    bounds, sizes = {}, {}
    for arm in arms.values():
        sizes[arm.name] = t = dataclasses.replace(base, **arm.train)
        most = most_tokens_per_update(arm.reward, arm.selection, t.prompts_per_update, t.group, max_new_tokens)
        if most is not None:
            bounds[arm.name] = most
    if not bounds:
        return
    name = min(bounds, key=bounds.__getitem__)
    if updates * bounds[name] >= tokens:
        return
    arm, t = arms[name], sizes[name]
    fields = " * ".join(f"{'arms.' + name if k in arm.train else 'train'}.{k}" for k in ("prompts_per_update", "group"))
    said = f"budget.generated_tokens = {tokens:,} is out of reach of budget.updates = {updates:,}"
    facts = _tokens_out_of_reach(said, name, arm.reward, t.prompts_per_update, t.group, max_new_tokens,
                                 f" ({fields} * sampling.max_new_tokens)", updates, tokens)
    if not refuse:  # a frozen plan: its study is read as it was run (a new plan like it is refused)
        whose = ("the run being resumed was started under this plan, so it resumes under it and stops on updates with "
                 "the token budget unspent (a new run with this plan is refused)" if resumed_run else
                 "the frozen plan's runs stop on updates with the token budget unspent (a new plan with this budget "
                 "is refused)")
        _warn_out_of_reach(f"plan {plan[0]}: {facts}: {whose}", (plan[1], facts))
        return
    raise PlanError(facts + f": every run of the arm stops on updates with the token budget unspent, not matched on "
                            f"generated tokens as the plan says; raise [budget] updates to at least "
                            f"{_fewest(tokens, bounds[name])} or drop [budget] updates or [budget] generated_tokens")


def _tokens_out_of_reach(said: str, arm: str, reward: str, b: int, g: int, most_len: int, fields: str, updates: int,
                         tokens: int) -> str:
    """The facts of a token budget ``tokens`` that ``updates`` updates of ``arm`` never spend (``said`` names the
    two: flags, arguments or plan keys; ``fields`` the keys of B, G and max_new_tokens, or "")."""
    per = b * g * most_len
    return (f"{said}: one update of arm {arm!r} (reward {reward!r}: rollout tokens only) generates at most "
            f"B * G * max_new_tokens = {b} * {g} * {most_len} = {per:,} tokens{fields}, so {updates:,} "
            f"update{'s' if updates != 1 else ''} generate{'' if updates != 1 else 's'} at most {updates * per:,} < "
            f"{tokens:,} tokens")


def _fewest(tokens: int, per: int) -> str:
    """The fewest updates whose most tokens (``per`` each) reach ``tokens``, with why it is only a floor."""
    return (f"{reachable_updates(tokens, per):_} (ceil({tokens:,} / {per:,}): the fewest with which the token budget "
            f"can be spent at all, and then only by completions of max_new_tokens tokens each; shorter completions "
            f"need more)")


def _check_save_weights_at(updates: int, arms: dict[str, ArmSpec], base: TrainConfig) -> None:
    """Refuse ``save_weights_at`` updates past ``budget.updates`` (no run reaches them: nothing would be written)."""
    sources = [("train", base.save_weights_at)] + [
        (f"arms.{a.name}", a.train["save_weights_at"]) for a in arms.values() if "save_weights_at" in a.train]
    for where, listed in sources:
        past = [u for u in listed if u > updates]
        if past:
            raise PlanError(f"{where}.save_weights_at lists update(s) {', '.join(map(str, past))} past budget.updates "
                            f"= {updates:,}: a run makes {updates:,} update(s), so no weights would be kept for them; "
                            f"list updates from 1 to {updates:_} or raise [budget] updates")


#: The keyword arguments of :func:`gradprobe.train` that shorten each budget kind (its messages name them, as the
#: command line's name its flags, :data:`~gradprobe.training.specs.BUDGET_FLAGS`).
BUDGET_ARGUMENTS = {"generated_tokens": "budget_tokens=", "device_seconds": "budget_seconds=",
                    "flops": "budget_flops=", "updates": "updates="}


#: True while :func:`gradprobe.train` runs (:func:`named_as_arguments`): :func:`too_small_message`, raised deep in the
#: run, then names its arguments (``budget_tokens=``, ``out=``) instead of the command line's flags.
_PYTHON_NAMES: ContextVar[bool] = ContextVar("gradprobe_budget_python_names", default=False)


@contextlib.contextmanager
def named_as_arguments():
    """Within this block (this thread or task only), :func:`too_small_message` names :func:`gradprobe.train`'s
    arguments (``budget_tokens=``, ``out=``, :data:`BUDGET_ARGUMENTS`) instead of ``gradprobe train``'s flags
    (``--budget-tokens``, ``--out``): the run's own records (``config.json``'s ``budget_override``) are unchanged."""
    token = _PYTHON_NAMES.set(True)
    try:
        yield
    finally:
        _PYTHON_NAMES.reset(token)


def shorten_budget(run: RunConfig, overrides: dict[str, float | None], *, python: bool = False,
                   resumed_flags: dict | None = None) -> RunConfig:
    """``run`` with some budgets lowered from the command line (``gradprobe train --updates 1`` ...).

    Each given override replaces the plan's budget of its kind (or adds that kind where the plan
    sets none); the plan's other budgets still apply, and the run stops at whichever is spent first,
    as with a plan's ``[budget]`` (DESIGN.md, "Matched-compute training"). Eval fractions
    (``[eval] at_fractions``) are then fractions of the shortened budgets. What was overridden is
    recorded in :attr:`RunConfig.budget_override` (so in ``config.json`` and ``summary.json``):
    ``{"flags": {"--updates": 1}, "plan_budget": {...the plan's [budget]...}}``; a run folder made
    without the override (or with another one) is refused rather than resumed.

    Parameters
    ----------
    run : RunConfig
        From :meth:`gradprobe.training.plan.Plan.arm`.
    overrides : dict
        Budget kind (:data:`BUDGET_KINDS`) -> new limit, None = not overridden. Units:
        ``generated_tokens`` charged generated tokens (int), ``device_seconds`` device-seconds,
        ``flops`` FLOPs, ``updates`` updates (int).
    python : bool
        The messages name :func:`gradprobe.train`'s arguments (``updates=``, :data:`BUDGET_ARGUMENTS`) instead
        of the flags (``--updates``); the record keeps the flags either way.
    resumed_flags : dict, optional
        The flags of the run that the run folder holds (``config.json``'s ``budget_override["flags"]``, ``{}`` for
        none: :func:`gradprobe.training.run_folder.recorded_budget_flags`); None: a new run. A token override that
        the updates never let the run spend (below) is refused, except where these are exactly the flags the run
        was started with (before such flags were refused): then it resumes under them, with an
        :class:`OutOfReachWarning` of the same facts. Changed flags are refused on their own, before the resume
        would refuse them as another configuration: out of reach, they are refused in any folder.

    Returns
    -------
    RunConfig
        ``run`` itself when no override is given.

    Raises
    ------
    PlanError
        Naming the flag (:data:`BUDGET_FLAGS`; with ``python``, the argument), the range and the value (shortened: an
        integer of 5,000 digits by its first 40 and its length): a value that is not a finite number > 0 (at most
        the largest float), or for tokens and updates not a whole number in [1, 2**63 - 1]; a value above the plan's
        own budget of that kind (the flags only shorten a run: lengthen it in the plan); a token budget below B x G
        (completions of one token each: a lower bound on one update's cost, which the message names, up to
        B x G x max_new_tokens; the other budget kinds not given are offered instead of it); ``--updates N`` that the
        token budget T can never let the run reach (an update starts only while fewer than T tokens are spent and
        costs at least B x G, so at most ceil(T / (B x G)) updates are made: :func:`reachable_updates`), which would
        make the one flag meaningless next to the other; the message names that most; or ``--budget-tokens T`` with
        ``--updates N`` that N updates can never spend (N * B x G x max_new_tokens < T for an arm that
        :func:`most_tokens_per_update` bounds), naming both flags, the most the N updates generate and the fix:
        ``--updates`` at least ceil(T / (B x G x max_new_tokens)) where that is at most the plan's ``budget.updates``,
        else ``--budget-tokens`` at most N x B x G x max_new_tokens or no ``--budget-tokens``; or only one of the
        two; or ``--budget-tokens T`` alone that the plan's ``budget.updates`` U never spends (U x B x G x
        max_new_tokens < T: a no-op), naming U, the most U updates generate and the fix (``--budget-tokens`` at most
        that, or leave it out). ``--updates`` beside the plan's own token budget is the shortening it asks for and is
        not refused.
    """
    unknown = sorted(set(overrides) - set(BUDGET_KINDS))
    if unknown:
        raise PlanError(f"unknown budget kind(s) {', '.join(unknown)}; valid: {', '.join(BUDGET_KINDS)}")
    names = BUDGET_ARGUMENTS if python else BUDGET_FLAGS
    given = {k: _token_text(v, names[k]) if k == "generated_tokens" else v for k, v in overrides.items()
             if v is not None}
    if not given:
        return run
    plan_budget = run.budget.given()
    for kind, value in given.items():
        _check_override(kind, value, plan_budget, names)
    minimum = run.train.prompts_per_update * run.train.group  # completions of at least one token each
    tokens = given.get("generated_tokens")
    if tokens is not None and tokens < minimum:
        raise PlanError(_too_few_tokens(run, tokens, names, tuple(given)))
    kinds = {k: (int(v) if k in _WHOLE else float(v)) for k, v in given.items()}
    record = {"flags": {BUDGET_FLAGS[k]: v for k, v in kinds.items()}, "plan_budget": plan_budget}
    _check_updates_with_tokens(run, given, plan_budget, names, resumed=record["flags"] == resumed_flags)
    budget = dataclasses.replace(run.budget, **kinds)
    return dataclasses.replace(run, budget=budget, budget_override=record)


def reachable_updates(tokens: int, per_update: int) -> int:
    """The most updates a run can make under a budget of ``tokens`` charged tokens when each update costs at least
    ``per_update`` (B * G: completions of one token each): ceil(tokens / per_update). A run starts an update only
    while fewer than ``tokens`` are spent (:func:`gradprobe.training.state.exhausted`: a kind is spent at
    ``spent >= limit``), so update k + 1 starts after k cheapest updates iff k * per_update < tokens; the last one
    may overshoot the budget. Reached only when every update costs ``per_update``; longer completions reach fewer.
    Both arguments are positive ints (any size: exact integer arithmetic)."""
    return -(-tokens // per_update)


def _check_updates_with_tokens(run: RunConfig, given: dict, plan_budget: dict, names: dict,
                               resumed: bool = False) -> None:
    """Refuse an updates override that a token budget (the override's or the plan's) never lets the run reach
    (:func:`_unreachable_updates`), and a token override that the updates (the override's, else the plan's
    ``budget.updates``) never let the run spend: N updates of an arm bounded by :func:`most_tokens_per_update`
    generate at most N * B * G * max_new_tokens tokens, so below the token override the run always stops on updates
    (the plan's own token budget beside ``--updates`` alone is the shortening it asks for, not refused); ``resumed``
    (the flags of the run being resumed): that one warned (:class:`OutOfReachWarning`), not refused."""
    updates = given.get("updates")
    b, g = run.train.prompts_per_update, run.train.group
    token_limit = given.get("generated_tokens", plan_budget.get("generated_tokens"))
    if updates is not None and token_limit is not None and int(updates) > reachable_updates(int(token_limit), b * g):
        raise PlanError(_unreachable_updates(run, int(updates), int(token_limit), names,
                                             "generated_tokens" in given))
    most = most_tokens_per_update(run.reward, run.selection, b, g, run.sampling.max_new_tokens)
    cap = updates if updates is not None else plan_budget.get("updates")
    if "generated_tokens" not in given or cap is None or most is None \
            or int(cap) * most >= int(given["generated_tokens"]):
        return
    n, tokens, plan_updates = int(cap), int(given["generated_tokens"]), plan_budget.get("updates")
    flag = _said(names, "generated_tokens", f"{tokens:,}")
    said = f"{flag} is out of reach of " + (_said(names, "updates", f"{n:,}") if updates is not None else
                                           f"the plan's budget.updates = {n:,}")
    facts = _tokens_out_of_reach(said, run.arm, run.reward, b, g, run.sampling.max_new_tokens, "", n, tokens)
    if resumed:  # the run was started with these flags before they were refused: it resumes as it was made
        what = "arguments" if names is BUDGET_ARGUMENTS else "flags"
        _warn_out_of_reach(f"{facts}: the run being resumed was started with these {what}, so it resumes under them "
                           f"and stops on updates with the token budget unspent (a new run with them is refused)",
                           ("run", facts))
        return
    bound = f"{names['generated_tokens']} at most {n * most:_} (below which it can bind)"
    if updates is None:
        fix = f"the flag is a no-op; give {bound} or leave it out"
    elif plan_updates is not None and reachable_updates(tokens, most) > int(plan_updates):
        fix = (f"{names['updates']} at least {reachable_updates(tokens, most):,} would exceed the plan's "
               f"budget.updates = {int(plan_updates):,} (the flags only shorten a run); give {bound} or leave out "
               f"{names['generated_tokens'].rstrip('=')} (alone it would be a no-op beside the plan's updates)")
    else:
        fix = f"give {names['updates']} at least {_fewest(tokens, most)} or only one of the two"
    raise PlanError(f"{facts}: the run always stops on updates with the token budget unspent; {fix}")


def _unreachable_updates(run: RunConfig, updates: int, tokens: int, names: dict, flag_given: bool) -> str:
    """The error of an updates override that the token budget ``tokens`` never lets the run reach
    (:func:`shorten_budget`: ``updates`` > :func:`reachable_updates`): after that many of the cheapest updates the
    tokens are spent, so the run always stops on tokens before update ``updates``; the fix names the most updates
    still reachable."""
    b, g = run.train.prompts_per_update, run.train.group
    most = reachable_updates(tokens, b * g)
    source = names["generated_tokens"].rstrip("=") if flag_given else "the plan's budget.generated_tokens"
    return (f"{_said(names, 'updates', f'{updates:,}')} conflicts with {source} = {tokens:,}: each update of arm "
            f"{run.arm!r} costs at least B * G = {b} * {g} = {b * g:,} tokens (completions of one token or more) and "
            f"an update starts only while fewer than {tokens:,} tokens are spent, so the run makes at most {most:,} "
            f"update{'s' if most != 1 else ''} (at least {most:,} * {b * g:,} = {most * b * g:,} tokens spent after "
            f"the last) and always stops on tokens before update {updates:,}; give {names['updates']} at most "
            f"{most:_} ({_reached_if(most, tokens)}) or only one of the two")


def _reached_if(most: int, tokens: int) -> str:
    """When update ``most`` (:func:`reachable_updates` of ``tokens``) starts: update 1 always does; a later one only if
    the updates before it spent fewer than ``tokens`` (completions of about one token)."""
    if most == 1:
        return "update 1 always starts"
    before = "update 1 spends" if most == 2 else f"the first {most - 1:,} updates spend"
    return f"reached only if {before} fewer than {tokens:,} tokens: completions of about one token"


def _too_few_tokens(run: RunConfig, tokens: int, names: dict, given: tuple[str, ...]) -> str:
    """The error of a token override below B * G (:func:`shorten_budget`, :func:`_below_one_update`), offering only
    the budget kinds not in ``given``."""
    said = _said(names, 'generated_tokens', f'{tokens:,}')
    return _below_one_update(said, run.arm, run.train.prompts_per_update, run.train.group,
                             run.sampling.max_new_tokens, names["generated_tokens"],
                             _alternatives(names, given, ("generated_tokens",)))


def _below_one_update(said: str, arm: str, b: int, g: int, most_len: int | None, fix: str, others: str) -> str:
    """A token budget (``said``: ``--budget-tokens 1``, ``budget.generated_tokens = 7``) below one update of ``arm``
    (B * G = ``b`` * ``g``), to be raised through ``fix`` (``--budget-tokens``, ``[budget] generated_tokens``):
    B * G tokens is only a lower bound (one completion of one token each), so it is given as "at least" beside what
    one update costs (B * G * the mean completion length, at most B * G * max_new_tokens ``most_len``; None: not
    named), then ``others`` (:func:`_alternatives`; "": none)."""
    upper = (f", up to {b} * {g} * max_new_tokens {most_len} = {b * g * most_len:,} rollout tokens"
             if most_len is not None else "")
    return (f"{said} is smaller than one update of arm {arm!r}: B * G = {b} * {g} completions of at least one token "
            f"each; give {fix} at least {b * g:_} (a lower bound only: one update costs about B * G * the mean "
            f"completion length{upper}, and a budget below update 1's cost stops after update 1; a useful run needs "
            f"many updates)" + (f"; {others}" if others else ""))


def _override_range(kind: str) -> str:
    """The values a budget override of ``kind`` takes, as its error states them: a whole number of tokens or updates
    in [1, 2**63 - 1] (:data:`MAX_WHOLE_BUDGET`), a finite number > 0 of FLOPs or seconds (a float: at most
    1.8e308)."""
    if kind in _WHOLE:
        return "a whole number in [1, 2**63 - 1]"
    return f"a finite number > 0 and at most {sys.float_info.max:.2g} (the largest float)"


def _said(names: dict, kind: str, value) -> str:
    """A budget override as its caller wrote it: ``--updates 20`` (a flag, :data:`BUDGET_FLAGS`) or ``updates=20``
    (an argument of :func:`gradprobe.train`, :data:`BUDGET_ARGUMENTS`)."""
    return f"{names[kind]}{value}" if names[kind].endswith("=") else f"{names[kind]} {value}"


def budget_text(kind: str, value, sep: str = ",", spec: str = "g") -> str:
    """A budget ``value`` of ``kind`` (:data:`~gradprobe.training.specs.BUDGET_KINDS`) as a message prints it, every
    digit kept, so that a refusal names the very number given (``:g`` printed ``--updates 2345678`` as
    ``2.34568e+06``).

    A whole number of tokens or updates (an int, or a whole float below 2**53; ``1e30`` reads as ``1e+30``), and an
    int beyond a float, is written by all its digits with ``sep`` between thousands: ``","`` in prose
    (``2,345,678``), ``"_"`` in advice to paste into a flag, an argument of :func:`gradprobe.train` or the plan
    (``2_345_678``: ``int``, ``float``, :func:`gradprobe.token_counts.parse_token_count`, Python and TOML all read
    it). Any other number (FLOPs, seconds, a fractional count) is written by the format ``spec`` (``"g"``:
    ``1e+18``, ``2.5``; ``".0f"``: ``8,000,000,000``) where that keeps its value exactly, else by its shortest
    exact decimal (``1,234,567.5``: the digits of ``repr``, ``.0`` dropped); ``nan`` and ``inf`` as such. An int
    beyond a float is printed whole: the callers shorten one of thousands of digits first
    (:func:`~gradprobe.training.coerce.echo_value`).

    Raises
    ------
    TypeError
        ``value`` is no real number (an int, a float, a numpy scalar).
    """
    if not isinstance(value, numbers.Real):
        raise TypeError(f"a budget is a real number (an int or float), got {type(value).__name__}")
    exact = int(value) if isinstance(value, numbers.Integral) else float(value)
    whole = isinstance(exact, int) or (abs(exact) < 2**53 and exact == int(exact))  # 1e30 is no count typed
    if (kind in _WHOLE and whole) or (isinstance(exact, int) and beyond_float(exact)):
        return f"{int(exact):{sep}}"
    text = f"{exact:{sep}{spec}}"
    if not math.isfinite(exact) or Decimal(text.replace(sep, "")) == Decimal(exact):
        return text
    text = format(exact, sep) if isinstance(exact, float) else f"{exact:{sep}}"  # repr's digits: the value again
    return text[:-2] if text.endswith(".0") else text


def _token_text(value, name: str):
    """``value``, or the whole number of tokens a string spells (``"250k"``: the spelling ``--budget-tokens`` takes,
    :func:`gradprobe.token_counts.parse_token_count`); PlanError naming ``name`` when a string spells none."""
    if not isinstance(value, str):
        return value
    try:
        return parse_token_count(value)
    except ValueError as e:
        raise PlanError(f"{name.rstrip('=')}: {e}") from None


def _check_override(kind: str, value, plan_budget: dict, names: dict) -> None:
    """Refuse one budget override (:func:`shorten_budget`): not a finite number > 0 (a whole one for tokens and
    updates), beyond its range (:func:`_override_range`: an int64, a float), or above the plan's budget of its
    kind; named as ``names`` (flags or arguments) name it, the value echoed shortened
    (:func:`~gradprobe.training.coerce.echo_value`: an integer of 5,000 digits by its first 40 and its length)."""
    flag = names[kind]
    whole = kind in _WHOLE
    kind_of = "a whole number" if whole else "a finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers are Real, Decimal is not
        raise PlanError(f"{flag} must be {kind_of} > 0 (an int or float), got {echo_value(value)} of type "
                        f"{type(value).__name__}; pass int(...) or float(...) of it")
    shown = echo_value(value) if beyond_float(value) else budget_text(kind, value)  # 10**400: no float to format
    if not (value > 0 and value < float("inf")) or (whole and value != int(value)):
        raise PlanError(f"{flag} must be {kind_of} > 0 (a budget the run can spend), got {shown}")
    if beyond_float(value) or (whole and value > MAX_WHOLE_BUDGET):  # 10**400 is no float, 2**63 no int64
        fix = f"give {flag.rstrip('=')} within that range" + (" or leave it out to use the plan's budget"
                                                            if kind in plan_budget else "")
        raise PlanError(f"{flag} must be {_override_range(kind)}, got {echo_value(value)}; {fix}")
    if kind in plan_budget and value > plan_budget[kind]:
        who = "the budget arguments" if flag.endswith("=") else "the command-line budgets"
        raise PlanError(f"{_said(names, kind, budget_text(kind, value))} is more than the plan's budget.{kind} = "
                        f"{budget_text(kind, plan_budget[kind])}: {who} only shorten a run; to lengthen it, raise "
                        f"[budget] {kind} in the plan (a new plan, so its runs are not compared with the old ones)")


def too_small_message(run: RunConfig, over: dict[str, tuple[float, float]], out, *,
                      python: bool | None = None) -> str:
    """The error of a run stopped after update 1 because that update alone spent more than a budget
    (:func:`gradprobe.training.update.check_first_update`), with the fix that works: the stopped run's folder keeps
    its budget in ``config.json``, so a rerun into it with another budget is refused
    (:class:`~gradprobe.training.errors.RunConfigMismatchError`); the message says to rerun with a new ``--out`` (or
    after deleting ``out``) and a larger budget: a larger ``--budget-*`` flag (at most the plan's budget of that kind,
    which :func:`shorten_budget` enforces), or none, or a larger ``[budget]`` in the plan. A run of a study (``out``
    inside a study folder) is told to run the changed plan as a new study (or ``--restart`` the study while none of
    its runs has finished): the study folder keeps the plan it was frozen with.

    Parameters
    ----------
    run : RunConfig
        The stopped run (its ``budget_override`` names the flags given).
    over : dict
        Budget kind (``generated_tokens`` or ``flops``) -> (budget, cost of update 1), both in the kind's units
        (charged generated tokens, FLOPs). Only these two: :func:`~gradprobe.training.update.check_first_update`
        does not check a ``device_seconds`` budget (``--budget-seconds 0.001`` is no error: update 1 runs and the
        run stops with ``stop: budget (device_seconds)``, its overshoot reported), because seconds are a clock
        reading, not a count fixed by the batch: update 1's device time varies from run to run and machine to
        machine (and may include first-call warm-up), so no seconds value is known to buy one update; an ``updates``
        budget is at least 1 (:func:`shorten_budget`), which buys one.
    out : path
        The run folder (``--out``).
    python : bool, optional
        Name :func:`gradprobe.train`'s arguments (``budget_tokens=20``, ``out=``; :data:`BUDGET_ARGUMENTS`) instead
        of the flags (``--budget-tokens = 20``, ``--out``); None (default): as :func:`named_as_arguments` says
        (True inside :func:`gradprobe.train`, else False).

    Returns
    -------
    str
        One line: each budget and the update's cost, that the run stopped with its data kept, and the fix: the
        budget the user set (flag, argument or the plan's) raised to at least update 1's cost in its unit (tokens,
        FLOPs: the least that buys one update, rounded up), two budgets' fixes as two clauses joined by "; "; then,
        only where every budget too small is a flag (argument) whose plan budget of its kind is absent or larger than
        update 1's cost (so that leaving the flags out leaves no budget too small: budgets combine, and another
        kind added beside a plan budget too small does not help), the flags (arguments) of the budget kinds the user
        gave no flag (argument) for as alternatives "instead of" the flags too small (none left: none named).
    """
    python = _PYTHON_NAMES.get() if python is None else python
    names = BUDGET_ARGUMENTS if python else BUDGET_FLAGS
    flags = (run.budget_override or {}).get("flags", {})  # recorded under the flags' names, whoever gave them
    plan_budget = (run.budget_override or {}).get("plan_budget", run.budget.given())
    given = {k: BUDGET_FLAGS[k] in flags for k in over}
    value = {k: budget_text(k, v, spec=".0f") for k, (v, _) in over.items()}  # every digit of the budget given
    stated = {k: f"{names[k]}{value[k]}" if given[k] and python else  # budget_tokens=20 (as train() was called)
              f"{names[k] if given[k] else f'budget.{k}'} = {value[k]}" for k in over}
    detail = "; ".join(f"{stated[k]} but one update of arm {run.arm!r} cost {c:,.0f}" for k, (_, c) in over.items())
    study = study_above(out)
    if study is not None:  # a study's run: its folder keeps the plan it was frozen with
        kinds = " and ".join(f"budget.{k} to at least {_cost(k, c)}" for k, (_, c) in over.items())
        return (f"{detail}: the budget is smaller than one update (the run stopped after update 1, data kept in "
                f"{shown(str(out))}); raise {kinds} in the plan ({_ONE_UPDATE}) and run the changed plan as a new "
                f"study under a new --out (or into {shown(str(study))} with --restart while none of its runs has "
                "finished)")
    fixes = "; ".join(_larger_budget(k, c, given[k], plan_budget.get(k), names[k]) for k, (_, c) in over.items())
    rerun = "call gradprobe.train again with a new out=" if python else "rerun with a new --out"
    set_by_user = set(over) | {k for k in BUDGET_KINDS if BUDGET_FLAGS[k] in flags}  # no alternative to itself
    # another kind replaces the flags too small only where leaving each out leaves no budget too small: budgets
    # combine (the run stops at the first spent), so a plan's budget too small stays whatever flag is added
    replaceable = all(given[k] and _buys_update(plan_budget.get(k), c) for k, (_, c) in over.items())
    others = _alternatives(names, tuple(k for k in BUDGET_KINDS if k in set_by_user), tuple(over)) if replaceable \
        else ""
    what, fix = ("the budget is", "") if len(over) == 1 else ("both budgets are", "fix both budgets: ")
    return (f"{detail}: {what} smaller than one update (the run stopped after update 1, data kept in "
            f"{shown(str(out))}); to train, {rerun} (or after deleting {shown(str(out))}: a rerun into it with another "
            f"budget is refused) and {fix}"
            f"{fixes}" + (f"; {others}" if others else ""))


#: What the smallest budget :func:`too_small_message` names buys (update 1's cost is measured, later ones vary)
_ONE_UPDATE = "update 1's cost: the least that buys one update; a useful run needs many updates' cost"
#: The unit of each budget kind that :func:`too_small_message` names the smallest value of: tokens and FLOPs only
#: (update 1 is not checked against a seconds budget, and an updates budget of at least 1 buys one update)
_UNITS = {"generated_tokens": "tokens", "flops": "FLOPs"}


def _cost(kind: str, cost: float) -> str:
    """Update 1's ``cost`` in ``kind``'s unit (:data:`_UNITS`), rounded up, as the least value to give a flag or the
    plan (pasteable: ``_`` between thousands, :func:`budget_text`): ``"4_492 tokens"``."""
    return f"{math.ceil(cost):_} {_UNITS[kind]}"


#: The plan's budget keys, as :func:`check_budget`'s messages name them where the command line names its flags
_PLAN_NAMES = {k: f"[budget] {k}" for k in BUDGET_KINDS}


def _alternatives(names: dict, kinds: tuple[str, ...], replaced: tuple[str, ...]) -> str:
    """The budget kinds not in ``kinds`` (those the user gave, or that are too small), named as ``names`` names them
    (flags, :func:`gradprobe.train`'s arguments or the plan's keys), offered as alternatives to the budgets of the
    kinds ``replaced`` (the ones too small): ``"or budget the run by --updates, --budget-seconds or --budget-flops
    instead of --budget-tokens"``, ``"or budget the run by --updates instead of --budget-tokens and
    --budget-flops"``; ``""`` when every kind is in ``kinds`` (no alternative is left). The caller offers them only
    where leaving out the budgets ``replaced`` leaves no budget too small (:func:`too_small_message`)."""
    others = [names[k] for k in ("updates", "device_seconds", "flops", "generated_tokens") if k not in kinds]
    if not others:
        return ""
    listed = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} or {others[-1]}"
    return f"or budget the run by {listed} instead of {' and '.join(names[k] for k in replaced)}"


def _buys_update(plan: float | None, cost: float) -> bool:
    """Whether leaving out a flag too small for update 1 (``cost``) leaves a budget that buys more than that update:
    the plan sets none of its kind (None) or more than ``cost`` (a budget of exactly ``cost`` is spent by update 1:
    a kind is spent at ``spent >= limit``, :func:`gradprobe.training.state.exhausted`)."""
    return plan is None or plan > cost


def _larger_budget(kind: str, cost: float, flag_given: bool, plan: float | None, flag: str) -> str:
    """The fix for one budget smaller than update 1's ``cost`` (:func:`too_small_message`): raise the flag (``flag``:
    ``--budget-tokens``, or ``budget_tokens=`` from Python; up to the plan's ``plan`` budget of that kind, None: the
    plan sets none) or leave it out, or raise the plan's budget; each to at least ``cost`` (:func:`_cost`, in the
    kind's unit: the least that buys one update)."""
    least = f"to at least {_cost(kind, cost)} ({_ONE_UPDATE})"
    if not flag_given:
        return f"raise budget.{kind} in the plan {least} (a changed plan)"
    if plan is None:
        return f"raise {flag} {least}"
    if _buys_update(plan, cost):
        return (f"raise {flag} {least}, at most the plan's budget.{kind} = {budget_text(kind, plan, spec='.0f')}, or "
                f"leave it out to use the plan's budget")
    return (f"leave out {flag} and raise budget.{kind} in the plan (its {budget_text(kind, plan, spec='.0f')} is "
            f"smaller than one update too) {least}")
