"""Was a probed reward among the arms a forecaster (or a calibration) was validated on?

The forecasters' errors and the calibration's conformal intervals are measured on the arms of the
shipped studies (``calib report``; ``data/calibration/README.md``): rewards such as ``mc_value`` or
``process_hybrid_0.5`` under loss types such as ``grpo`` or ``bnpo``. A reward that was never an arm
of those studies (a user's new reward, e.g. a TRL-style function passed to
``gradprobe.probe(rewards=[my_fn])``) still gets a number, computed the same way, but its error was
not measured on it: the verdict and ``probe.json`` say so (:func:`mark_validated_arms`), and
:mod:`calib.domain` marks the calibrated gain ``outside_domain`` with the same rule
(:func:`entry_coverage`).

The rule, on a ``probe.json`` entry key (``REWARD`` or ``REWARD@LOSS_TYPE``,
:mod:`gradprobe.probe_keys`): the reward must be the reward of one of the validated arms, and its
loss type the loss type of one of them (each checked on its own, not as a pair; the loss type only
when the record has the arms' loss types). The reference reward (``outcome``) counts as a validated
reward, since it is the baseline of every validation; under the probe's own loss type it is GRPO
itself, whose gain is 0 by definition, and it is always covered. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..probe_keys import split_entry_key

__all__ = ["EntryCoverage", "entry_coverage", "validated_arms_note", "mark_validated_arms", "entry_error",
           "validated_error_note", "DEFAULT_LOSS_TYPE"]

#: The probe's own loss type when ``probe.json``'s config does not record one (written before loss types).
DEFAULT_LOSS_TYPE = "grpo"


@dataclass(frozen=True)
class EntryCoverage:
    """Whether one probe entry is among the validated arms.

    Attributes
    ----------
    key : str
        The ``probe.json`` entry key (``mc_value``, ``outcome@bnpo``).
    reward, loss_type : str
        Its reward and loss type (:func:`gradprobe.probe_keys.split_entry_key`).
    reward_known : bool
        The reward is the reward of a validated arm, or the reference reward (GRPO's own reward, the
        baseline of every validation; under another loss type only the loss type is in question).
    loss_type_known : bool or None
        The loss type is the loss type of a validated arm; None when the record does not say which
        loss types its arms trained with.
    is_reference : bool
        The entry is the reference reward under the probe's own loss type (GRPO: gain 0 by definition).
    """

    key: str
    reward: str
    loss_type: str
    reward_known: bool
    loss_type_known: bool | None
    is_reference: bool

    @property
    def covered(self) -> bool:
        """The entry's reward (and loss type, where recorded) were among the validated arms."""
        return self.is_reference or (self.reward_known and self.loss_type_known is not False)


def entry_coverage(key: str, *, probe_loss_type: str, rewards, loss_types=None,
                   reference_reward: str = "outcome") -> EntryCoverage:
    """:class:`EntryCoverage` of one ``probe.json`` entry against the validated arms' rewards and loss types.

    Parameters
    ----------
    key : str
        ``REWARD`` (under the probe's own loss type) or ``REWARD@LOSS_TYPE``.
    probe_loss_type : str
        The probe's own loss type (``probe.json["config"]["loss_type"]``; ``grpo`` by default).
    rewards : iterable of str
        The rewards of the validated arms (an arm ``grpo_2xlr`` trains reward ``outcome``; the
        rewards, not the arm names).
    loss_types : iterable of str, optional
        The loss types of the validated arms; None when not recorded (then the loss type is not checked).
    reference_reward : str
        The reward gains are measured against.

    Raises
    ------
    ValueError
        ``key`` is not ``REWARD`` or ``REWARD@LOSS_TYPE`` (:func:`gradprobe.probe_keys.split_entry_key`).
    """
    reward, loss_type = split_entry_key(key, probe_loss_type)
    is_ref = reward == reference_reward and loss_type == probe_loss_type
    rewards = set(rewards)
    known_loss = None if loss_types is None else loss_type in set(loss_types)
    known = reward in rewards | {reference_reward}
    return EntryCoverage(key=key, reward=reward, loss_type=loss_type, reward_known=known,
                         loss_type_known=known_loss, is_reference=is_ref)


def validated_arms_note(cov: EntryCoverage, n_studies: int | None = None) -> str:
    """The clause a verdict gets for an entry outside the validated arms ('' when covered)."""
    if cov.covered:
        return ""
    where = f" of the {n_studies} validation studies" if n_studies else ""
    what = (f"this reward ({cov.reward!r}) was not among the validated arms{where}" if not cov.reward_known else
            f"this loss type ({cov.loss_type!r}) was not among the validated arms{where}")
    return f"{what}: its error on it is unmeasured (the validated error and intervals come from other rewards)"


def mark_validated_arms(rows: list[dict], record: dict, *, probe_loss_type: str, reference_reward: str,
                        forecaster: str) -> None:
    """Add ``validated_arm`` and ``validated_error`` to each forecast row (in place) and append their clauses to
    its ``verdict`` (not to a ``no_signal`` row's, nor to a row with a ``no_verdict_reason``: it has no forecast, or
    no advice, to qualify; the row's ``validated_error`` is still recorded): outside the validated arms,
    and how far ``forecaster`` was off on that reward's validation runs (:func:`entry_error`).

    Parameters
    ----------
    rows : list of dict
        The ``rows`` of ``probe.json``'s ``forecast`` section (``reward``: the entry key; ``verdict``).
    record : dict
        The forecaster validation record (:func:`gradprobe.forecast.section.load_validation`):
        ``rewards`` (the validated arms' rewards), ``loss_types``, ``studies``. A record written
        before it listed its arms' rewards leaves ``validated_arm`` None and the verdicts unchanged.
    probe_loss_type, reference_reward : str
        See :func:`entry_coverage`.
    forecaster : {"probe", "cost_only", "signal_proxy"}
        The forecaster the section was made with (asked for, or chosen by ``auto``): its validated error
        applies to every row, including a row whose ``method`` label says it fell back (``cost_only (probe
        SNR <= 1)``), since the validation measured the forecaster with its fallbacks.
    """
    rewards = record.get("rewards")
    for row in rows:
        if rewards is None:
            row["validated_arm"] = row["validated_error"] = None
            continue
        cov = entry_coverage(str(row["reward"]), probe_loss_type=probe_loss_type, rewards=rewards,
                             loss_types=record.get("loss_types"), reference_reward=reference_reward)
        row["validated_arm"] = cov.covered
        note = validated_arms_note(cov, len(record.get("studies") or []) or None)
        silent = row.get("no_signal") or row.get("no_verdict_reason")  # no forecast, or no advice, to qualify
        if note and not silent:  # a reward without gradient has no interval to qualify
            row["verdict"] = f"{row['verdict']} ({note})"
        err = None if cov.is_reference or row.get("no_signal") else entry_error(row, record, forecaster=forecaster)
        row["validated_error"] = err
        if err is not None and not silent:
            row["verdict"] = f"{row['verdict']} ({validated_error_note(err)})"


def entry_error(row: dict, record: dict, *, forecaster: str) -> dict | None:
    """The validated error of ``forecaster`` (the section's forecaster, not the row's display label) on the runs
    of the row's reward: ``{"forecaster", "mae" (points), "runs", "studies"}`` from the record's
    ``entry_errors``; None when the record has none for it."""
    err = ((record.get("entry_errors") or {}).get(forecaster) or {}).get(str(row["reward"]))
    return None if err is None else {"forecaster": forecaster, **err}


def validated_error_note(err: dict) -> str:
    """The clause a verdict gets with its reward's validated error (:func:`entry_error`)."""
    return (f"{err['forecaster'].replace('_', ' ')} was off by {err['mae']:.1f} points on average on the "
            f"{err['runs']} validation runs of this reward in {err['studies']} stud{'y' if err['studies'] == 1 else 'ies'}")
