"""Atomic checkpoints of a training run (the folder's other writes: :mod:`gradprobe.outputs`).

A checkpoint is a folder ``checkpoint-UUUUUU/`` holding

``model.safetensors``  the policy's weights (``safetensors.torch.save_model``: tied weights ok);
``state.pt``           optimizer, scheduler, RNG states (torch, CUDA, numpy, python), the
                       sampler's call counter, the ledger, the update index, the eval schedule
                       and the byte length of ``metrics.jsonl`` at that update.

It is written as ``.checkpoint-UUUUUU.tmp/``, fsynced, renamed (``os.replace``) to its final
name, and only then made current by atomically replacing the pointer file
``checkpoint.json``; older checkpoint folders are deleted last. A run killed at any moment
therefore leaves the pointer naming a complete checkpoint (or none). A failed write (disk
full, permissions) removes the temporary folder and raises :class:`OutputDirError` naming the
path and the fix; the previous checkpoint stays current.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

# the run folder's generic writes live in gradprobe.outputs; prepare_output_dir and removed_if_left_empty
# are re-exported here for callers of the earlier location
from ..layout import CHECKPOINT_POINTER, WEIGHTS_DIR
from ..outputs import (OutputDirError, output_error, prepare_output_dir, removed_if_left_empty,  # noqa: F401
                       write_json_atomic)

POINTER = CHECKPOINT_POINTER


def _save_model(model, path: Path) -> None:
    from safetensors.torch import save_model

    save_model(model, str(path))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def rng_states() -> dict:
    """Global RNG states (torch CPU and CUDA, numpy, python)."""
    import random

    import numpy as np

    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    import random

    import numpy as np

    torch.set_rng_state(states["torch"])
    kind, keys, *rest = states["numpy"]  # the key array is stored as a tensor (see _loadable)
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), *rest))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def save_checkpoint(out: Path, update: int, model, state: dict) -> Path:
    """Write checkpoint ``update`` atomically and make it current (see the module docstring).

    Parameters
    ----------
    out : Path
        The run folder.
    update : int
        Updates done.
    model : torch.nn.Module
        Weights go to ``model.safetensors``.
    state : dict
        Everything else (``torch.save``-able), stored as ``state.pt``.

    Returns
    -------
    Path
        The checkpoint folder.

    Raises
    ------
    OutputDirError
        Writing failed (e.g. ENOSPC); nothing partial is left behind and the previous
        checkpoint stays current.
    """
    name = f"checkpoint-{update:06d}"
    tmp = out / f".{name}.tmp"
    final = out / name
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        _save_model(model, tmp / "model.safetensors")
        torch.save(_loadable(state), tmp / "state.pt")
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(tmp)
        if final.exists():  # a stale folder of a killed run, never the current one (see latest_checkpoint)
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(out)
        write_json_atomic(out / POINTER, {"checkpoint": name, "update": update})
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / POINTER).exists() or json.loads((out / POINTER).read_text()).get("checkpoint") != name:
            shutil.rmtree(final, ignore_errors=True)
        if isinstance(e, OutputDirError):
            raise
        raise output_error(f"writing checkpoint {update} to", tmp, e) from e
    for old in out.glob("checkpoint-*"):
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def save_weights(out: Path, update: int, model) -> Path:
    """Keep the policy's weights after update ``update``: ``out/weights/update-UUUUUU.safetensors``
    (``[train] save_weights_at``; :data:`gradprobe.layout.WEIGHTS_DIR`), written to a temporary file
    and renamed, so a killed run leaves a complete file or none; a resumed run that passes the update
    again rewrites the same weights (runs are deterministic in their seed).

    Raises
    ------
    OutputDirError
        The write failed (the message names the path and the fix).
    """
    folder = Path(out) / WEIGHTS_DIR
    final = folder / f"update-{update:06d}.safetensors"
    tmp = folder / f".{final.name}.tmp"
    try:
        folder.mkdir(exist_ok=True)
        _save_model(model, tmp)
        os.replace(tmp, final)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise output_error(f"keeping the weights of update {update} in", final, e) from e
    return final


def latest_checkpoint(out: Path) -> Path | None:
    """The current checkpoint folder of a run (None when there is none); removes leftovers of
    interrupted writes (temporary folders, folders the pointer does not name)."""
    for tmp in out.glob(".checkpoint-*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    pointer = out / POINTER
    current = None
    if pointer.exists():
        current = out / json.loads(pointer.read_text())["checkpoint"]
        if not (current / "model.safetensors").exists() or not (current / "state.pt").exists():
            raise FileNotFoundError(f"{pointer} names {current}, which is incomplete; delete {out} to start over")
    for old in out.glob("checkpoint-*"):
        if old.is_dir() and (current is None or old != current):
            shutil.rmtree(old, ignore_errors=True)
    return current


def load_checkpoint(path: Path, model) -> dict:
    """Load weights into ``model`` (in place) and return the ``state`` dict."""
    from safetensors.torch import load_model

    load_model(model, str(path / "model.safetensors"), device=str(next(model.parameters()).device))
    # weights_only: a checkpoint folder may come from elsewhere; unpickling arbitrary objects could run code
    return torch.load(path / "state.pt", weights_only=True)


def _loadable(obj):
    """``obj`` with numpy arrays as tensors and numpy scalars as Python numbers, so that
    ``torch.load(..., weights_only=True)`` reads it back (containers, str, numbers, tensors)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _loadable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_loadable(v) for v in obj)
    return obj
