"""Keys of the per-reward entries of ``probe.json``: one reward under one loss type.

A probe estimates every reward under its own ``loss_type`` (:class:`gradprobe.probe.run.ProbeConfig`)
and, with ``loss_types`` (``gradprobe probe --loss-types``), under extra loss types too, from the same
alignment pass: only the per-token weights w and the effective advantages change with the loss type
(:func:`gradprobe.probe.estimate.group_sums`). Each (reward, loss type) gets one entry, keyed:

- ``REWARD`` under the probe's own loss type (the key every probe.json has always had), e.g. ``outcome``;
- ``REWARD@LOSS_TYPE`` under an extra loss type, e.g. ``outcome@bnpo``, ``mc_value@cispo``.

The key is unambiguous because the probe refuses reward names containing ``@``, and stable: it
depends only on the reward's name, the loss type and the probe's own loss type. A study records
each arm's key in ``probe/arms.json`` (``probe_entry``); an ``arms.json`` written before loss-type
arms has none, and the arm's entry is then its ``reward`` (:func:`arm_entry`).

Torch-free: ``gradprobe.forecast`` and ``calib`` read probe.json with it.
"""

from __future__ import annotations

from .layout import RETRAIN_CLAUSE

__all__ = ["LOSS_TYPE_SEPARATOR", "entry_key", "split_entry_key", "arm_entry", "ARMS_JSON_FIX", "check_reward_name"]

#: Separates a reward's name from an extra loss type in an entry key (``outcome@bnpo``).
LOSS_TYPE_SEPARATOR = "@"


def check_reward_name(name: str) -> None:
    """Refuse a reward name that would make entry keys ambiguous.

    Raises
    ------
    ValueError
        ``name`` is empty or contains :data:`LOSS_TYPE_SEPARATOR` (the message names the reward and the fix).
    """
    if not name or LOSS_TYPE_SEPARATOR in name:
        raise ValueError(f"reward name {name!r} is not usable in the probe: names must be non-empty and must not "
                         f"contain {LOSS_TYPE_SEPARATOR!r}, which separates a reward from a loss type in probe.json's "
                         f"keys (e.g. 'outcome{LOSS_TYPE_SEPARATOR}bnpo'); rename the reward")


def entry_key(reward: str, loss_type: str, probe_loss_type: str) -> str:
    """The ``probe.json`` key of ``reward`` estimated under ``loss_type``.

    Parameters
    ----------
    reward : str
        The reward's name (registered, or a caller's ``extra_rewards`` name).
    loss_type : str
        The loss type of the estimate (:data:`gradprobe.grpo.losses.LOSS_TYPES`).
    probe_loss_type : str
        The probe's own ``loss_type`` (``probe.json["config"]["loss_type"]``).

    Returns
    -------
    str
        ``reward`` when ``loss_type == probe_loss_type``, else ``"reward@loss_type"``.

    Raises
    ------
    ValueError
        A reward name containing ``@`` (:func:`check_reward_name`).
    """
    check_reward_name(reward)
    return reward if loss_type == probe_loss_type else f"{reward}{LOSS_TYPE_SEPARATOR}{loss_type}"


def split_entry_key(key: str, probe_loss_type: str) -> tuple[str, str]:
    """The inverse of :func:`entry_key`: ``(reward, loss_type)`` of a ``probe.json`` key.

    ``split_entry_key("outcome@bnpo", "grpo") == ("outcome", "bnpo")``;
    ``split_entry_key("outcome", "grpo") == ("outcome", "grpo")``.

    Raises
    ------
    ValueError
        A key with an empty reward or loss type around the separator, or more than one separator.
    """
    if LOSS_TYPE_SEPARATOR not in key:
        return key, probe_loss_type
    reward, _, loss_type = key.partition(LOSS_TYPE_SEPARATOR)
    if not reward or not loss_type or LOSS_TYPE_SEPARATOR in loss_type:
        raise ValueError(f"probe entry key {key!r} is not REWARD or REWARD{LOSS_TYPE_SEPARATOR}LOSS_TYPE")
    return reward, loss_type


#: how to write a study's ``probe/arms.json`` again when the study is not known (:func:`arm_entry` without ``fix``)
ARMS_JSON_FIX = ("resume the study with `gradprobe study STUDY/plan.toml --out STUDY`, which writes it again (finished "
                 "runs and a finished probe are kept); for a study without runs/ (a shipped study keeps only its "
                 f"tables), where resuming {RETRAIN_CLAUSE}, restore it from a copy of the study")


def arm_entry(spec: dict, *, source=None, fix: str | None = None) -> str:
    """The probe entry of one arm of ``probe/arms.json``: its ``probe_entry``, else (an ``arms.json``
    written before loss-type arms) its ``reward``.

    Parameters
    ----------
    spec : dict
        One arm's record of ``arms.json``.
    source : path or None
        The ``arms.json`` file, named by the error (``"arms.json"`` when None).
    fix : str or None
        How to write that file again, for its study (:func:`gradprobe.forecast.study._arms_fix`: resume the
        study, or for a study without ``runs/`` restore the file from a copy); :data:`ARMS_JSON_FIX` when None.

    Raises
    ------
    ValueError
        ``spec`` has neither (the message names the file, the record and the fix).
    """
    key = spec.get("probe_entry") or spec.get("reward")
    if not key:
        raise ValueError(f"{source or 'arms.json'} record {spec!r} has neither 'probe_entry' nor 'reward'; "
                         f"{fix or ARMS_JSON_FIX}")
    return str(key)
