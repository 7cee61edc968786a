"""The per-token gradient-alignment probe (DESIGN.md, "The probe").

Called as a function, ``gradprobe.probe(model, task, rewards=[...], **settings) -> ProbeResult`` runs the
whole probe (``gradprobe probe``): its parameters are documented at :func:`gradprobe.api.probe.probe`
(``help(gradprobe.api.probe.probe)``; ``inspect.signature(gradprobe.probe)`` gives its signature). This
package holds the pieces below.

Pipeline, for a probe batch of rollouts and any number of rewards:

1. a reference update v (:func:`heldout_reference`, or a supplied direction via
   :func:`load_direction` / :func:`direction_between`), optionally preconditioned,
   u = P v (:func:`adam_preconditioner`, :func:`apply_preconditioner`);
2. per-token alignment a = <grad l, u>, shape (N, T), in one forward-mode pass
   (:func:`token_alignment`);
3. every reward's <g_R, u>, predicted gain per update and at a token budget, with bootstrap
   intervals over prompts (:func:`estimate_rewards`).

Slow references for tests and baselines live in :mod:`gradprobe.probe.references`.
"""

from .alignment import DirectionMismatchError, check_direction, token_alignment, trainable_parameters
from .estimate import RewardEstimate, estimate_rewards, group_sums
from .reference_update import (
    adam_preconditioner,
    apply_preconditioner,
    direction_between,
    heldout_reference,
    load_direction,
    rloo_coefficients,
    save_direction,
    second_moment_from_minibatches,
    second_moment_from_optimizer,
)
from .references import dot, norm, reward_gradient, token_alignment_autograd, token_alignment_finite_difference

__all__ = [
    "DirectionMismatchError", "check_direction", "token_alignment", "trainable_parameters",
    "RewardEstimate", "estimate_rewards", "group_sums",
    "heldout_reference", "rloo_coefficients", "load_direction", "save_direction", "direction_between",
    "adam_preconditioner", "apply_preconditioner", "second_moment_from_minibatches", "second_moment_from_optimizer",
    "reward_gradient", "token_alignment_autograd", "token_alignment_finite_difference", "dot", "norm",
]


import inspect as _inspect  # noqa: E402
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _CallableModule(_types.ModuleType):
    """``gradprobe.probe`` is this package AND the front-door function (PEP 562 has no module
    ``__call__``): ``gradprobe.probe(model, task, rewards=[...], **settings)`` calls
    :func:`gradprobe.api.probe.probe` (issue 15), and ``gradprobe.probe.run`` etc. stay importable."""

    def __call__(self, *args, **kwargs):
        return _front_door()(*args, **kwargs)

    @property
    def __signature__(self):
        """The front-door function's signature, for ``inspect.signature`` and IDEs."""
        return _inspect.signature(_front_door())


def _front_door():
    """:func:`gradprobe.api.probe.probe`, imported on first call (it imports this package)."""
    from ..api.probe import probe

    return probe


_sys.modules[__name__].__class__ = _CallableModule
