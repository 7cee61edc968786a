"""What a forecast reads from a probe result: its batches, the budget, the arms and each update's cost.

The checks here turn a malformed request into a ``ValueError`` naming the field and the fix before any
Monte Carlo work (:func:`~gradprobe.forecast.budget_forecast.forecast_rewards`). A probe entry's recorded
summaries are checked against its per-group lists (:func:`check_entry_summaries`): a hand-edited ``per_group``
(the forecast's rho is read from it) no longer moves a forecast silently.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..layout import rerun_advice
from ..outputs import PER_UPDATE_FIELDS, is_json_number, json_float, json_number_text, json_short, per_update_problem
from .result import METHODS

__all__ = ["probe_batches_of", "pooled_entries", "check_request", "check_batches", "budget_of", "arms_of", "update_costs",
           "update_batches", "check_entry_numbers", "check_entry_summaries", "TRAIN_FORWARDS", "PER_UPDATE_FIELDS",
           "PROBE_FIX"]

TRAIN_FORWARDS = 3.0  # forward + backward of a trained token, in forwards (gradprobe.ledger)

#: a probe entry's fields read as numbers (each element of a list one): a number, null or "inf"/"-inf"
#: (:func:`gradprobe.outputs.json_float`), never true/false or other text
_NUMBER_FIELDS = ("per_group", "signal_proxy_per_group", "predicted_gain_per_update")
#: a recorded summary matches its per-group lists within _SUMMARY_REL x (the sum of its terms' magnitudes) +
#: _SUMMARY_ABS: the writer's numpy sums differ from math.fsum by a few ulps of that, and JSON round-trips floats
#: exactly (repr), so only an edit of the file (or damage) trips it
_SUMMARY_REL, _SUMMARY_ABS = 1e-9, 1e-300
#: how to write a probe.json again (the probe's own folder, or a study's probe)
PROBE_FIX = ("re-run the probe (`gradprobe probe --out DIR`); for a study's probe, delete STUDY/probe/probe.json "
             "and resume the study with `gradprobe study STUDY/plan.toml --out STUDY` (finished runs are kept)")


def probe_batches_of(probe, source=None) -> list[dict]:
    """The probe batches of a probe result: a ``probe.json`` dict (with ``batches`` when
    :func:`gradprobe.probe.batches.run_probe_batches` made it), or a list of per-batch results.

    Every entry's numbers are checked (:func:`check_entry_numbers`), and its recorded summaries against its
    per-group lists (:func:`check_entry_summaries`: ``group`` is the batch's ``batch.group``, else
    ``config.group``; a batch of a multi-batch probe records no ``lr``, so its gain is checked at ``config.lr``,
    the one every batch used, :func:`gradprobe.probe.batches.combine_batches`); ``source`` (the file the dict was
    read from, e.g. ``STUDY/probe/probe.json``) names the file in the message, else ``probe.json``.

    Returns
    -------
    list of dict
        Each: ``rewards`` (name -> entry), ``reference`` (dict), ``config`` (dict), ``ledger`` (dict),
        ``batch`` (dict), ``draw`` (reference draw id), ``trl_config`` (the ``--trl-config`` record of the batch or of
        the whole probe, None without one).

    Raises
    ------
    ValueError
        Anything else (the message says what is expected), or an entry's number field that holds no number, e.g.
        ``rewards[1].tokens_per_update: true`` (:func:`check_entry_numbers`: the file, field and fix named), or a
        recorded summary that its per-group lists contradict, e.g. ``rewards[1].inner_product`` after ``per_group``
        was edited (:func:`check_entry_summaries`: the file, reward, field, both values and the fix named).
    """
    return _batches_of(probe, source)


def _batches_of(probe, source, pooled_sizes: dict | None = None) -> list[dict]:
    """:func:`probe_batches_of`; ``pooled_sizes`` (entry name -> its batches' group counts, from
    :func:`_group_counts`) lets :func:`check_entry_summaries` check a pooled entry's ``signal_proxy``."""
    batched = isinstance(probe, dict) and isinstance(probe.get("batches"), list) and bool(probe["batches"])
    if isinstance(probe, (list, tuple)):
        items = list(probe)
    elif batched:
        items = [dict(b, config=b.get("config") or probe.get("config")) for b in probe["batches"]]
    elif isinstance(probe, dict):
        items = [probe]
    else:
        raise ValueError(f"probe must be a probe result (probe.json dict) or a list of them, got {type(probe).__name__}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "rewards" not in item:
            raise ValueError(f"probe batch {i} has no 'rewards'; pass probe.json dicts (gradprobe probe / run_probe)")
        rewards = item["rewards"]
        prefix = f"batches[{i}]." if len(items) > 1 or batched else ""
        _check_entries(rewards, prefix, source)
        entries = {r["name"]: r for r in rewards} if isinstance(rewards, list) else \
            {k: dict(v, name=v.get("name", k)) for k, v in rewards.items()}
        config = item.get("config") if isinstance(item.get("config"), dict) else {}
        summary = item.get("batch") if isinstance(item.get("batch"), dict) else {}
        group = summary.get("group") if summary.get("group") is not None else config.get("group")
        for key, entry in (enumerate(rewards) if isinstance(rewards, list) else rewards.items()):
            where, name = f"{prefix}rewards[{key if isinstance(rewards, list) else repr(key)}]", entry.get("name", key)
            check_entry_numbers(entry, where, source)
            check_entry_summaries(entry, where, source, group=group, lr=config.get("lr") if batched else None,
                                  batch_sizes=(pooled_sizes or {}).get(name) if isinstance(name, str) else None)
        ref = item.get("reference") or {}
        draw = ref.get("draw", ref.get("norm", i))
        trl = item.get("trl_config") or (probe.get("trl_config") if isinstance(probe, dict) else None)
        out.append({"rewards": entries, "reference": ref, "config": item.get("config") or {},
                    "ledger": item.get("ledger") or {}, "batch": item.get("batch") or {}, "draw": draw,
                    "trl_config": trl})
    return out


def _file_and_fix(source) -> tuple[str, str]:
    """How a message names the probe.json ``source`` (else ``probe.json``) and its fix (:data:`PROBE_FIX`, or
    :func:`gradprobe.layout.rerun_advice` of its folder)."""
    if source is None:
        return "probe.json", PROBE_FIX
    return str(source), rerun_advice(Path(source).parent)


def _check_entries(rewards, prefix: str, source) -> None:
    """Refuse a ``rewards`` field that is no list of reward objects with a text ``name`` (or no object of them):
    one line naming the file (``source``, else ``probe.json``), the field and the fix."""
    file, fix = _file_and_fix(source)
    if isinstance(rewards, dict):
        bad = next((f"{prefix}rewards[{k!r}] is {json_short(v)}, not an object" for k, v in rewards.items()
                    if not isinstance(v, dict)), None)
    elif isinstance(rewards, list):
        bad = next((f"{prefix}rewards[{j}] is {json_short(r)}, not an object" if not isinstance(r, dict) else
                    f"{prefix}rewards[{j}].name is {json_short(r.get('name'))}, not text"
                    for j, r in enumerate(rewards) if not (isinstance(r, dict) and isinstance(r.get("name"), str))),
                   None)
    else:
        bad = f"{prefix}rewards is {json_short(rewards)}, not a list of reward objects"
    if bad:
        raise ValueError(f"{file} field {bad}; {fix}")


def check_entry_numbers(entry: dict, where: str, source=None) -> None:
    """Refuse a probe entry (``where``: its place in probe.json, e.g. ``rewards[1]``) whose number fields hold no
    usable number, before a forecast or a calibration row reads them: Python would read ``true`` as 1 token per
    update (a forecast flips sign silently), ``false``/``0`` divide by zero, text breaks numpy.

    - :data:`PER_UPDATE_FIELDS` (``tokens_per_update``, ``seconds_per_update``), where present and not null: a
      finite number > 0 (never a boolean, text, NaN, inf or an integer too large for a float);
    - ``per_group``, ``signal_proxy_per_group`` (each element) and ``predicted_gain_per_update``: a number, null or
      ``"inf"``/``"-inf"`` (:func:`gradprobe.outputs.json_float`), never true/false or other text.

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].tokens_per_update``),
        its value, what is accepted and the fix (:data:`PROBE_FIX`).
    """
    if not isinstance(entry, dict):
        return
    file, fix = _file_and_fix(source)
    for key in PER_UPDATE_FIELDS:
        problem = per_update_problem(key, entry.get(key))
        if problem:
            raise ValueError(f"{file} field {where}.{key} {problem}; {fix}")
    for key in (k for k in _NUMBER_FIELDS if entry.get(k) is not None):
        value = entry[key]
        many = key != "predicted_gain_per_update"
        if many and getattr(value, "dtype", None) is not None and value.dtype.kind in "fiu":
            continue  # an in-memory array of numbers (a probe.json holds lists)
        if many and not isinstance(value, (list, tuple)):
            raise ValueError(f"{file} field {where}.{key} is {json_short(value)}: it must be a list of numbers; "
                             f"{fix}")
        for j, x in enumerate(value if many else [value]):
            field = f"{where}.{key}" + (f"[{j}]" if many else "")
            try:
                v = json_float(x)
            except ValueError as e:
                raise ValueError(f"{file} field {field} is {json_short(x)}: {e}; {fix}") from None
            if many and not math.isfinite(v):  # a group's alignment is always a number: NaN/inf would turn rho
                raise ValueError(f"{file} field {field} is {json_short(x)}: a group's alignment is a finite number "
                                 f"(the probe writes one per group); {fix}")


def check_entry_summaries(entry: dict, where: str, source=None, *, group=None, lr=None, batch_sizes=None) -> None:
    """Refuse a probe entry (``where``: its place in probe.json, e.g. ``rewards[1]``) whose recorded summaries its
    per-group lists contradict: a hand edit of ``per_group`` (which the forecast's rho reads) or of a summary.
    Call it after :func:`check_entry_numbers` (the lists hold finite numbers).

    The summaries the probe writes as exact functions of the lists (B = ``len(per_group)`` groups):

    - ``num_groups`` = B, and ``len(signal_proxy_per_group)`` = B (one per group, :mod:`gradprobe.probe.estimate`
      ``estimate_rewards``: ``"num_groups": b``; :func:`gradprobe.probe.result.signal_proxy`);
    - ``inner_product`` = sum(``per_group``) (``estimate = per_group.sum(-1)`` in ``estimate_rewards``; a pooled
      entry's is the batches' mean and its ``per_group`` their concatenation / N, which sums to it:
      :func:`gradprobe.probe.batches.combine_batches`);
    - ``predicted_gain_per_update`` = 100 x lr x sum(``per_group``), accuracy points (``gain = 100.0 * lr * est``,
      ``_reward_estimate``), lr the entry's ``lr``, else ``lr`` (the probe's ``config.lr``, for a batch entry of a
      multi-batch probe, which records none);
    - ``signal_proxy`` = sum(``signal_proxy_per_group``) / (G B), verl's (1/N) sum A^2 W over the N = G B
      completions (:func:`gradprobe.probe.result.reward_entries`), G = ``group``; for a pooled entry of N batches
      (``probe_batches``) the mean of the batches' proxies, sum_k sum(its part of the list) / (G B_k), its part
      the next B_k (``batch_sizes``) of the list; not checked without ``batch_sizes`` or ``group``.

    ``interval`` and ``snr`` come from a bootstrap over groups whose denominators (tokens per group, for most loss
    types) the file does not hold: not checked. A field the entry does not record (or records as null: an older
    probe.json) is not checked. Tolerance: 1e-9 x the sum of the terms' magnitudes, plus 1e-300 (float rounding
    is far below it; JSON round-trips a float exactly).

    Raises
    ------
    ValueError
        One line: the file (``source``, else ``probe.json``), the field (e.g. ``rewards[1].inner_product``), the
        reward, the recorded value and the one its lists give, the formula, and the fix (restore the file, or
        :func:`_file_and_fix`'s: re-run the probe).
    """
    if not isinstance(entry, dict):
        return
    per, proxy = _floats(entry.get("per_group")), _floats(entry.get("signal_proxy_per_group"))
    if per is not None:
        n = entry.get("num_groups")
        if n is not None and (not is_json_number(n) or n != len(per)):
            _refuse(entry, where, source, "num_groups", json_short(n), f"{len(per)}, the groups its per_group holds",
                    "num_groups = len(per_group)")
        if proxy is not None and len(proxy) != len(per):
            _refuse(entry, where, source, "signal_proxy_per_group", f"a list of {len(proxy)} groups", f"{len(per)}, "
                    "the groups its per_group holds", "one signal_proxy_per_group value per group of per_group")
        terms = [abs(x) for x in per]
        _check_sum(entry, where, source, "inner_product", math.fsum(per), math.fsum(terms),
                   "inner_product = sum(per_group)")
        rate = entry.get("lr") if entry.get("lr") is not None else lr
        if is_json_number(rate, finite=True):
            scale = 100.0 * float(rate)
            _check_sum(entry, where, source, "predicted_gain_per_update", scale * math.fsum(per),
                       abs(scale) * math.fsum(terms),
                       f"predicted_gain_per_update = 100 x lr x sum(per_group), lr = {rate!r}")
    if proxy is not None and is_json_number(group, integer=True) and group > 0:
        parts = _proxy_parts(proxy, entry.get("probe_batches"), batch_sizes)
        if parts is not None:
            shown = ("signal_proxy = sum(signal_proxy_per_group) / (group x groups)" if len(parts) == 1 else
                     f"signal_proxy = the mean over its {len(parts)} batches of sum(signal_proxy_per_group) / (group x "
                     "groups)")
            _check_sum(entry, where, source, "signal_proxy",
                       math.fsum(math.fsum(p) / (group * len(p)) for p in parts if p),
                       math.fsum(math.fsum(map(abs, p)) / (group * len(p)) for p in parts if p),
                       f"{shown}, group = {group}")


def _floats(values) -> list[float] | None:
    """A per-group list as floats (:func:`gradprobe.outputs.json_float`), None when not recorded (null) or not a
    list or array of finite numbers (:func:`check_entry_numbers` refuses those)."""
    if values is None:
        return None
    try:
        out = [json_float(x) for x in (values.ravel().tolist() if hasattr(values, "ravel") else values)]
    except (TypeError, ValueError):
        return None
    return out if all(math.isfinite(x) for x in out) else None


def _proxy_parts(proxy: list[float], batches, batch_sizes) -> list[list[float]] | None:
    """``signal_proxy_per_group`` cut into its batches' parts: itself for one batch (no ``probe_batches`` > 1);
    for a pooled entry the next ``batch_sizes[k]`` values per batch, None when those are unknown or do not add up."""
    if not (is_json_number(batches, integer=True) and batches > 1):
        return [proxy]
    if not (isinstance(batch_sizes, list) and len(batch_sizes) == batches and sum(batch_sizes) == len(proxy)):
        return None
    ends = np.cumsum([0] + list(batch_sizes))
    return [proxy[a:b] for a, b in zip(ends[:-1], ends[1:])]


def _check_sum(entry: dict, where: str, source, key: str, expected: float, magnitude: float, formula: str) -> None:
    """Refuse ``entry[key]`` (where recorded, not null) unless it is ``expected`` within 1e-9 x ``magnitude`` (the
    sum of the terms' magnitudes) + 1e-300; a recorded value that is no number is refused too."""
    value = entry.get(key)
    if value is None:
        return
    try:
        recorded = json_float(value)
    except ValueError:
        recorded = math.nan
    if not abs(recorded - expected) <= _SUMMARY_REL * magnitude + _SUMMARY_ABS:
        _refuse(entry, where, source, key, json_number_text(value, json_short(value)), repr(expected), formula)


def _refuse(entry: dict, where: str, source, key: str, recorded: str, expected: str, formula: str) -> None:
    """The ValueError of :func:`check_entry_summaries`: file, field, reward, both values, formula and fix."""
    file, fix = _file_and_fix(source)
    reward = f" (reward {entry['name']!r})" if isinstance(entry.get("name"), str) else ""
    raise ValueError(f"{file} field {where}.{key}{reward} is {recorded}, but {where}'s per-group lists give "
                     f"{expected} ({formula}, as the probe writes it): the file was edited or damaged after the probe "
                     f"wrote it, so a forecast from it would not be the probe's; restore the file, or {fix}")


def pooled_entries(probe) -> dict:
    """The pooled entries of a multi-batch ``probe.json``: its top-level ``rewards`` (pooled over its
    ``batches`` by :func:`gradprobe.probe.batches.run_probe_batches`), name -> entry as
    :func:`probe_batches_of` reads them; ``{}`` for a single-batch result, a list of batches, or a result
    without top-level ``rewards``.

    Raises
    ------
    ValueError
        As :func:`probe_batches_of` for the pooled entries (their ``signal_proxy`` checked with the batches' group
        counts, :func:`check_entry_summaries`).
    """
    if not (isinstance(probe, dict) and isinstance(probe.get("batches"), list) and probe["batches"]
            and probe.get("rewards")):
        return {}
    return _batches_of(dict(probe, batches=None), None, _group_counts(probe["batches"]))[0]["rewards"]


def _entry_items(rewards) -> list[tuple]:
    """(name, entry) of a ``rewards`` field (a list of entries with ``name``, or name -> entry); entries that are no
    objects are left out (:func:`_check_entries` names them)."""
    pairs = [(r.get("name"), r) for r in rewards] if isinstance(rewards, list) and all(
        isinstance(r, dict) for r in rewards) else list(rewards.items()) if isinstance(rewards, dict) else []
    return [(name, e) for name, e in pairs if isinstance(e, dict)]


def _group_counts(batches: list) -> dict:
    """Entry name -> the number of groups of each of ``batches`` (a multi-batch probe.json's ``batches``): the
    length of its ``signal_proxy_per_group`` there; names some batch lacks (or holds no list for) are left out."""
    counts: dict = {}
    for b in batches:
        for name, e in _entry_items(b.get("rewards") if isinstance(b, dict) else None):
            if isinstance(e.get("signal_proxy_per_group"), list):
                counts.setdefault(name, []).append(len(e["signal_proxy_per_group"]))
    return {name: c for name, c in counts.items() if len(c) == len(batches)}


def check_request(method: str, budget_tokens, budget_flops, n_draws: int, level: float) -> None:
    """Refuse an unknown method, two budgets, ``n_draws < 100`` or a level outside (0, 1) (ValueError)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} must be one of {METHODS}")
    if budget_tokens is not None and budget_flops is not None:
        raise ValueError("give budget_tokens or budget_flops, not both")
    if n_draws < 100:
        raise ValueError(f"n_draws must be >= 100 for a percentile interval, got {n_draws}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def check_batches(batches: list[dict], reference_reward: str) -> list[str]:
    """The probed reward entries (batch 0's order), after checking every batch probes the same ones, the
    reference is among them and each entry has ``tokens_per_update`` and ``per_group`` (ValueError)."""
    names = list(batches[0]["rewards"])
    for j, b in enumerate(batches[1:], 1):
        if set(b["rewards"]) != set(names):
            raise ValueError(f"probe batch {j} has rewards {sorted(b['rewards'])}, batch 0 {sorted(names)}: every batch "
                             "must probe the same rewards")
    if reference_reward not in names:
        raise ValueError(f"the forecast is a gain vs grpo, so the probe needs the {reference_reward!r} reward: add it to "
                         f"--rewards (probed: {', '.join(names)})")
    for name in names:
        for key in ("tokens_per_update", "per_group"):
            if any(b["rewards"][name].get(key) is None for b in batches):
                raise ValueError(f"probe entry {name!r} lacks {key!r}; re-run the probe with this gradprobe")
    return names


def budget_of(budget_tokens, budget_flops, cfg: dict) -> tuple[str, float]:
    """(``"tokens"`` or ``"flops"``, value): the budget asked for, else the probe's ``config.budget_tokens``.

    Raises
    ------
    ValueError
        A budget that is not > 0 (or none at all).
    """
    if budget_flops is None:
        kind = "tokens"
        value = float(budget_tokens if budget_tokens is not None else cfg.get("budget_tokens", math.nan))
    else:
        kind, value = "flops", float(budget_flops)
    if not value > 0:
        raise ValueError(f"budget_{kind} must be > 0 (got {value}); pass budget_tokens= or set the probe's --budget-tokens")
    return kind, value


def arms_of(arms: dict | None, names: list[str]) -> dict:
    """The arms to forecast: ``arms`` checked against the probed entries, or one arm per entry at lr_scale 1.

    Raises
    ------
    ValueError
        An arm whose reward entry the probe did not cover (the message says which flag adds it).
    """
    arms = arms if arms is not None else {n: {"reward": n, "lr_scale": 1.0} for n in names}
    for arm, spec in arms.items():
        if spec.get("reward") not in names:
            key = str(spec.get("reward"))
            fix = (f"add {key.partition('@')[2]!r} to --loss-types (entry REWARD@LOSS_TYPE, gradprobe.probe_keys)"
                   if "@" in key else "add it to --rewards")
            raise ValueError(f"arm {arm!r} has reward {spec.get('reward')!r}, which the probe did not cover "
                             f"(probed: {', '.join(names)}); {fix}")
    return arms


def update_costs(curve, batches: list[dict], names: list[str], cfg: dict, kind: str, reference_reward: str,
                 notes: list[str]) -> tuple[dict, dict]:
    """Each entry's cost of one update, in the reference curve's updates.

    Returns
    -------
    (tokens, cost)
        ``tokens``: name -> generated tokens c_R of one update (the batches' mean, rescaled by
        (curve batch) / (probe batch) when the two update batches differ; a note says so, as it says that the
        probe's batch is assumed when the curve records none); ``cost``:
        name -> the budget's unit per update, c_R tokens, or at a FLOPs budget F_R = f (c_R + 3 c_outcome)
        FLOPs, f the probe's generation FLOPs per generated token and 3 forwards per trained token
        (forward + backward, Kaplan et al. 2020).

    Raises
    ------
    ValueError
        A FLOPs budget without the probe ledger's generation FLOPs, or a ledger ``charged_generated_tokens`` or
        ``flops.generation`` that is no finite number >= 0 (``true``, text: the field and the fix named).
    """
    batches_of, probe_b = update_batches(curve, cfg), _probe_batch(cfg)
    scale = 1.0
    if batches_of is not None:
        (cp, cg), (pp, pg) = batches_of["curve"], batches_of["probe"]
        scale = (cp * cg) / (pp * pg)
        if batches_of["stated"]:  # the update the probe was given is not the one the forecast is for: said plainly
            notes.append(f"the forecast reads the curve's updates, {cp}x{cg} completions, so it is a forecast for "
                         f"{cp}x{cg} updates, not the {pp}x{pg} the probe was given (--update-prompts/--update-group): "
                         f"tokens per update rescaled by {scale:g} to the curve's (per-update efficiency does not "
                         f"depend on the batch size); to forecast {pp}x{pg} updates, give --reference-curve the curve "
                         f"of a grpo run at {pp}x{pg} (`gradprobe train` with a plan whose [train] prompts_per_update "
                         f"= {pp} and group = {pg}, or your own run's log)")
        else:
            notes.append(f"the curve's updates are {cp}x{cg} completions, the probe's {pp}x{pg}: tokens per update "
                         f"rescaled by {scale:g} (per-update efficiency does not depend on the batch size; pass "
                         "--update-prompts/--update-group to state the update you mean)")
    elif all(probe_b) and not all(_curve_batch(curve)):  # a CSV, a TRL log, a metrics.jsonl without its config.json
        trl = _trl_config_batch(batches, probe_b)
        notes.append(f"the reference curve does not record its update batch (update_prompts x update_group), so its "
                     f"updates are taken to be the probe's {probe_b[0]}x{probe_b[1]} completions" + (
                         f", which --trl-config {trl} gave: right when the curve is that run's log; if it comes from "
                         "another run, pass --update-prompts/--update-group equal to that run's" if trl else
                         "; if the run it comes from used another batch, pass --update-prompts/--update-group equal to "
                         "that run's (a TRL GRPOTrainer's: per-device batch x devices x gradient accumulation / "
                         "num_generations prompts x num_generations)"))
    tokens = {n: scale * float(np.mean([b["rewards"][n]["tokens_per_update"] for b in batches])) for n in names}
    if kind != "flops":
        return tokens, dict(tokens)
    fpt = []
    for b in batches:
        led = b["ledger"]
        charged = _ledger_number(led.get("charged_generated_tokens"), "ledger.charged_generated_tokens") or 0
        gen = _ledger_number((led.get("flops") or {}).get("generation"), "ledger.flops.generation")
        if charged and gen:
            fpt.append(gen / charged)
    if not fpt:
        raise ValueError("a FLOPs budget needs the probe ledger's generation FLOPs (ledger.flops.generation); "
                         "re-run the probe with this gradprobe or give budget_tokens")
    per_token = float(np.mean(fpt))
    c_ref = tokens[reference_reward]
    return tokens, {n: per_token * (tokens[n] + TRAIN_FORWARDS * c_ref) for n in names}


def _trl_config_batch(batches: list[dict], probe_b: tuple) -> str | None:
    """The ``--trl-config`` file the probe's update batch ``probe_b`` ((prompts, group), :func:`_probe_batch`) came
    from, else None. From the probe's ``trl_config`` record
    (:meth:`gradprobe.integrations.trl_config.TrlProbeSettings.record`): both of its dimensions must have been
    applied from the file (a field mapped to ``--update-prompts`` and one to ``--group``, neither overridden by a
    flag) and still be the probe's (an ``--update-group`` flag, or prompts from ``--prompts``, make it the user's)."""
    rec = batches[0].get("trl_config") if batches else None
    mapped = rec.get("mapped") if isinstance(rec, dict) else None
    if not isinstance(mapped, dict):
        return None
    applied = {v.get("flag"): v.get("probe_value") for v in mapped.values()
               if isinstance(v, dict) and v.get("applied") and v.get("flag") in ("--update-prompts", "--group")}
    from_file = (applied.get("--update-prompts"), applied.get("--group"))
    return str(rec.get("path")) if None not in from_file and tuple(probe_b) == from_file else None


def _probe_batch(cfg: dict) -> tuple:
    """(prompts, group) of the update the probe's ``config`` forecasts: ``update_prompts`` / ``update_group``,
    each falling back to the probe batch's ``prompts`` / ``group`` (None where neither is recorded)."""
    return (cfg.get("update_prompts") or cfg.get("prompts"), cfg.get("update_group") or cfg.get("group"))


def _curve_batch(curve) -> tuple:
    """(prompts, group) of the reference curve's updates, from its ``metadata`` (None where not recorded)."""
    return (curve.metadata.get("update_prompts"), curve.metadata.get("update_group"))


def update_batches(curve, cfg: dict) -> dict | None:
    """The update the forecast is for, where it differs from the probe's, else None.

    The forecast reads the reference curve's updates (its x axis), so it is a forecast for updates of the curve's
    batch; the probe's update is ``config.update_prompts`` x ``config.update_group`` (completions per update, each
    falling back to the probe batch's ``prompts`` / ``group``).

    Returns
    -------
    dict or None
        ``{"curve": [prompts, group], "probe": [prompts, group], "stated": bool}`` (integers, completions = prompts
        x group) when both batches are recorded and differ; ``stated`` is True when the probe's config records
        ``update_prompts`` or ``update_group`` (``--update-prompts`` / ``--update-group``, a study's ``[train]``
        batch or a TRL config's: ``gradprobe probe`` records None for an update it was not given), False when the
        probe batch stands in for the update. None when they are equal or either is not recorded.
    """
    probe_b, curve_b = _probe_batch(cfg), _curve_batch(curve)
    if not (all(probe_b) and all(curve_b)) or tuple(probe_b) == tuple(curve_b):
        return None
    stated = cfg.get("update_prompts") is not None or cfg.get("update_group") is not None
    return {"curve": [int(x) for x in curve_b], "probe": [int(x) for x in probe_b], "stated": stated}


def _ledger_number(value, field: str):
    """``value`` of the probe ledger's ``field`` as it is (None or a finite number >= 0), else ValueError naming
    the field and the fix: ``true`` would count as 1 token, text would break the FLOPs per token."""
    if value is None or (is_json_number(value, finite=True) and value >= 0):
        return value
    why = " (a boolean is never read as 1 or 0)" if isinstance(value, bool) else ""
    raise ValueError(f"probe.json field {field} is {json_number_text(value, json_short(value))}{why}: it must be a "
                     f"finite number >= 0; {PROBE_FIX}")
