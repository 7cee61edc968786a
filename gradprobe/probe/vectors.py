"""Parameter-space vectors of a model: which parameters a direction is defined over, checking a
direction against them, and summing the gradients of several backward passes without extra copies
(:mod:`gradprobe.probe.alignment` and the references use them; re-exported there)."""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

__all__ = ["DirectionMismatchError", "trainable_parameters", "gradient_buffer", "check_direction"]


class DirectionMismatchError(ValueError):
    """A parameter-space vector does not match the model's trainable parameters (keys or shapes)."""


def trainable_parameters(model) -> dict[str, Tensor]:
    """The parameters a direction is defined over: ``model.named_parameters()`` with ``requires_grad``.

    Tied parameters (e.g. input embedding and LM head) appear once, under their first name,
    as ``named_parameters`` lists them.
    """
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


@contextlib.contextmanager
def gradient_buffer(params: dict[str, Tensor]):
    """Sum the gradients of several ``backward`` calls in the parameters' ``.grad``, without extra copies.

    ``torch.autograd.grad`` returns every parameter's gradient at once, so adding them into a
    separate total holds two parameter-sized vectors (2 x 0.54 GB for SmolLM2-135M in float32);
    ``backward(inputs=...)`` adds each parameter's gradient into its ``.grad`` as soon as it is
    ready (the first one is kept as is, later ones are added in place), so only one vector plus one
    parameter's gradient is alive. The sums are the same: g_1, then g_1 + g_2, ... in order.

    Parameters
    ----------
    params : dict[str, Tensor]
        Leaf parameters, e.g. :func:`trainable_parameters`; call
        ``torch.autograd.backward(objective, inputs=list(params.values()))`` inside the block.

    Yields
    ------
    dict[str, Tensor]
        Empty inside the block; on normal exit filled with the summed gradients, keyed like
        ``params``, the parameters' shapes and dtypes (zeros for parameters no backward reached).

    The callers' ``.grad`` values are set aside on entry and restored on exit (also on error).
    """
    saved = {k: p.grad for k, p in params.items()}
    for p in params.values():
        p.grad = None
    out: dict[str, Tensor] = {}
    try:
        yield out
        for k, p in params.items():
            out[k] = p.grad.detach() if p.grad is not None else torch.zeros_like(p, requires_grad=False)
    finally:
        for k, p in params.items():
            p.grad = saved[k]


_FIX = ("a parameter-space vector needs one tensor per trainable parameter, keyed by "
        "model.named_parameters() names with the same shapes; build one with "
        "gradprobe.probe.direction_between(final_model, initial_model) or "
        "gradprobe.probe.heldout_reference(model, batch), or load it with load_direction")


def check_direction(model, direction: dict[str, Tensor], *, name: str = "direction") -> dict[str, Tensor]:
    """Validate ``direction`` against the model and return it on the parameters' device and dtype.

    Parameters
    ----------
    model : torch.nn.Module
    direction : dict[str, Tensor]
        One tensor per trainable parameter, same shapes.
    name : str
        What to call the vector in error messages.

    Returns
    -------
    dict[str, Tensor]
        Same keys, in the order of :func:`trainable_parameters`, cast to each parameter's
        device and dtype.

    Raises
    ------
    DirectionMismatchError
        A missing key, an extra key or a wrong shape; the message names the first bad key and the fix.
    """
    if not isinstance(direction, dict):
        raise DirectionMismatchError(f"{name} must be a dict[str, Tensor], got {type(direction).__name__}; {_FIX}")
    params = trainable_parameters(model)
    for key, p in params.items():
        if key not in direction:
            raise DirectionMismatchError(
                f"{name} has no entry for parameter {key!r} (shape {tuple(p.shape)}); {_FIX}")
        v = direction[key]
        if not isinstance(v, Tensor):
            raise DirectionMismatchError(f"{name}[{key!r}] is a {type(v).__name__}, not a Tensor; {_FIX}")
        if tuple(v.shape) != tuple(p.shape):
            raise DirectionMismatchError(
                f"{name}[{key!r}] has shape {tuple(v.shape)} but the parameter has shape {tuple(p.shape)} "
                f"(a direction from another model or architecture?); {_FIX}")
    for key in direction:
        if key not in params:
            raise DirectionMismatchError(
                f"{name} has key {key!r}, which is not a trainable parameter of the model (a tied weight "
                f"saved twice, a frozen parameter, or another model?); {_FIX}")
    return {key: direction[key].detach().to(device=p.device, dtype=p.dtype) for key, p in params.items()}
