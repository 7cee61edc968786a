"""GRESO's pre-rollout filter (Zheng et al. 2025, "Act Only When It Pays: Efficient Reinforcement
Learning for LLM Reasoning via Selective Rollouts", arXiv 2506.02177, sec. 4): the outcome kind of a
group (:func:`group_kind`) and each prompt's history of flat groups (:class:`GresoFilter`). No model,
no torch: only numbers. The ``greso`` selection rule that uses it is
:class:`gradprobe.difficulty.select_greso.GresoRule`.
"""

from __future__ import annotations

import numpy as np

from .config import SelectionConfig
from .metrics import binary_auc

__all__ = ["GROUP_KINDS", "group_kind", "GresoFilter"]

#: Outcome kinds of a group (:func:`group_kind`); the first two are the flat (zero-variance) ones.
GROUP_KINDS = ("all_correct", "all_wrong", "mixed")


def group_kind(scores) -> str:
    """``"mixed"`` (informative: >= 2 finite scores, not all equal), else ``"all_correct"`` (every
    finite score is 1.0, at least one) or ``"all_wrong"`` (a flat group without a success, including one
    without any finite score).

    Parameters
    ----------
    scores : sequence of float, length G
        One group's verifier scores (NaN = no reward).
    """
    r = np.asarray(scores, dtype=np.float64).reshape(-1)
    r = r[np.isfinite(r)]
    if r.size >= 2 and r.max() != r.min():
        return "mixed"
    return "all_correct" if r.size and bool(np.all(r == 1.0)) else "all_wrong"


class GresoFilter:
    """GRESO's pre-rollout filter (Zheng et al. 2025, arXiv 2506.02177, sec. 4; their released code,
    ``DataProfiler.easy_probabilistic_skip`` / ``hard_probabilistic_skip`` and the exploration update in
    ``RayPPOTrainer.fit``), without any model: only each prompt's history of group outcomes.

    State: per prompt id, the streaks (z_easy, z_hard) = the number of its most recent rolled-out
    groups, in a row, that were all correct (all wrong); a mixed group resets both, an all-correct
    group resets z_hard and vice versa. The exploration probabilities p_easy, p_hard.

    Skip rule (before rollout), for a candidate with streaks (z_e, z_h)::

        P(skip) = 1 - max(p_easy^z_e, floor)   if z_e > 0
                  1 - max(p_hard^z_h, floor)   if z_h > 0
                  0                            otherwise (never attempted or last group mixed)

    and the candidate is skipped iff u < P(skip) for its uniform draw u in [0, 1). p = 0 with
    floor = 0 skips every prompt with a streak; p = 1 skips none.

    Exploration update (after the update's rollouts, from epoch 1 of the candidate stream on, as
    GRESO's ``epoch > 0``): with c, w the shares of all-correct, all-wrong groups among the
    update's rolled-out groups and T = ``greso_target_flat``::

        p_easy <- max(p_easy - step, p_min)  if c >= T / 3      else min(p_easy + step, p_max)
        p_hard <- max(p_hard - step, p_min)  if w >= 2 T / 3    else min(p_hard + step, p_max)

    (too many flat groups: explore less, i.e. skip more; GRESO's code puts 2/3 of the target on
    all-wrong prompts, "more exploration on hard examples"). GRESO's own thresholds classify a
    group by its mean reward (>= 0.98 all correct, <= 0.11 all wrong); here by :func:`group_kind`.

    Parameters
    ----------
    config : SelectionConfig
        Its ``greso_*`` fields.
    """

    def __init__(self, config: SelectionConfig):
        self.config = config
        self.p_easy = float(config.greso_explore_easy)
        self.p_hard = float(config.greso_explore_hard)
        self._streaks: dict[str, list[int]] = {}  # id -> [z_easy, z_hard]
        self._seen: list[list[int]] = []  # every rolled-out group: [z_easy, z_hard, kind index] (prediction AUC)

    def streaks(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(z_easy, z_hard) of each prompt, each int64 of shape (M,) (0 for a never-seen prompt)."""
        z = np.array([self._streaks.get(i, (0, 0)) for i in ids], dtype=np.int64).reshape(-1, 2)
        return z[:, 0], z[:, 1]

    def skip_probability(self, ids) -> tuple[np.ndarray, list[str | None]]:
        """P(skip) of each prompt, float64 (M,), and the flat kind it is predicted to repeat
        (``"all_correct"``, ``"all_wrong"`` or None without a streak); the class docstring's rule."""
        ze, zh = self.streaks(ids)
        floor = self.config.greso_explore_floor
        p = np.zeros(len(ids))
        kind: list[str | None] = [None] * len(ids)
        for i in range(len(ids)):
            if ze[i] > 0:
                p[i], kind[i] = 1.0 - max(self.p_easy ** int(ze[i]), floor), "all_correct"
            elif zh[i] > 0:
                p[i], kind[i] = 1.0 - max(self.p_hard ** int(zh[i]), floor), "all_wrong"
        return p, kind

    def decide(self, ids, uniforms) -> tuple[np.ndarray, list[str | None]]:
        """Skip flags, bool (M,): u_i < P(skip)_i; and the predicted kinds (:meth:`skip_probability`).

        Parameters
        ----------
        ids : sequence of str, length M
        uniforms : array-like of float in [0, 1), shape (M,)

        Raises
        ------
        ValueError
            ``uniforms`` of another length than ``ids``.
        """
        u = np.asarray(uniforms, dtype=np.float64).reshape(-1)
        if u.size != len(ids):
            raise ValueError(f"decide: {len(ids)} ids but {u.size} uniforms")
        p, kind = self.skip_probability(ids)
        return u < p, kind

    def observe(self, ids, kinds) -> None:
        """Record rolled-out groups (in order) and update each prompt's streaks.

        Parameters
        ----------
        ids : sequence of str, length N
        kinds : sequence of str, length N
            :func:`group_kind` of each group.

        Raises
        ------
        ValueError
            Mismatched lengths or an unknown kind.
        """
        if len(ids) != len(kinds):
            raise ValueError(f"observe: {len(ids)} ids but {len(kinds)} kinds")
        for pid, k in zip(ids, kinds):
            if k not in GROUP_KINDS:
                raise ValueError(f"observe: kind {k!r} is not one of {', '.join(GROUP_KINDS)}")
            ze, zh = self._streaks.get(pid, (0, 0))
            self._seen.append([int(ze), int(zh), GROUP_KINDS.index(k)])
            self._streaks[pid] = [ze + 1, 0] if k == "all_correct" else [0, zh + 1] if k == "all_wrong" else [0, 0]

    def adapt(self, share_all_correct: float, share_all_wrong: float) -> None:
        """GRESO's exploration update (class docstring) from the update's flat shares in [0, 1]."""
        c = self.config
        lo, hi, step, target = c.greso_explore_min, c.greso_explore_max, c.greso_step, c.greso_target_flat
        self.p_easy = max(self.p_easy - step, lo) if share_all_correct >= target / 3 else min(self.p_easy + step, hi)
        self.p_hard = max(self.p_hard - step, lo) if share_all_wrong >= 2 * target / 3 else min(self.p_hard + step, hi)

    def prediction_auc(self, last: int | None = None) -> dict:
        """AUC of the rule's prediction (the streak) for the realized kind of rolled-out groups.

        Scores: z_easy for ``all_correct``, z_hard for ``all_wrong``, z_easy + z_hard for ``flat``
        (P(skip) is increasing in z for p < 1, so this is the AUC of the skip probability without the
        ties the floor and p = 1 add). Only rolled-out groups have an outcome: skipped candidates,
        the ones with the longest streaks, are missing, so the AUC is conditional on rollout.

        Parameters
        ----------
        last : int, optional
            Only the last ``last`` recorded groups (None: the whole run).

        Returns
        -------
        dict
            ``all_correct``, ``all_wrong``, ``flat``: each the
            :func:`~gradprobe.difficulty.metrics.binary_auc` dict (``auc`` None with a ``reason``
            when one class only).
        """
        seen = self._seen if last is None else self._seen[len(self._seen) - last:] if last else []
        a = np.array(seen, dtype=np.int64).reshape(-1, 3)
        ze, zh, k = a[:, 0], a[:, 1], a[:, 2]
        return {"all_correct": binary_auc(k == 0, ze), "all_wrong": binary_auc(k == 1, zh),
                "flat": binary_auc(k <= 1, ze + zh)}

    def state_dict(self) -> dict:
        """Plain containers (a ``weights_only`` checkpoint loads them): p_easy, p_hard, streaks, history."""
        return {"p_easy": self.p_easy, "p_hard": self.p_hard,
                "streaks": {k: list(v) for k, v in self._streaks.items()}, "seen": [list(r) for r in self._seen]}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (KeyError when an entry is missing)."""
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self._streaks = {k: [int(v[0]), int(v[1])] for k, v in state["streaks"].items()}
        self._seen = [[int(x) for x in r] for r in state["seen"]]
