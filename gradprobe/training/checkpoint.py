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
import pickle
import re
import shutil
import zipfile
from pathlib import Path

import torch

# the run folder's generic writes live in gradprobe.outputs; prepare_output_dir and removed_if_left_empty
# are re-exported here for callers of the earlier location
from ..layout import CHECKPOINT_POINTER, WEIGHTS_DIR
from ..outputs import (OutputDirError, error_text, give_umask_mode, output_error, prepare_output_dir,  # noqa: F401
                       removed_if_left_empty, write_json_atomic)
from .errors import DamagedRunFolderError

POINTER = CHECKPOINT_POINTER
_CHECKPOINT_NAME = re.compile(r"checkpoint-\d{6}")
#: What every ``state.pt`` holds (read by the resume: :func:`gradprobe.training.run._resume_or_start`,
#: :meth:`gradprobe.training.state.RunState.from_checkpoint`).
_STATE_KEYS = ("optimizer", "scheduler", "rng", "sampler_calls", "ledger", "update", "next_eval", "last_eval",
               "last_cost", "metrics_bytes")


def _save_model(model, path: Path) -> None:
    from safetensors.torch import save_model

    save_model(model, str(path))
    give_umask_mode(path)  # safetensors wrote it 0600


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


def read_pointer(out: Path) -> dict | None:
    """The run's pointer ``checkpoint.json`` (``{"checkpoint": "checkpoint-UUUUUU", "update": U}``), None
    without one. Read-only.

    Raises
    ------
    DamagedRunFolderError
        The file is not such a JSON object (empty, cut, overwritten); one line naming it and the fix (the
        content to write back when the folder holds a single checkpoint, else deleting the run folder).
    """
    pointer = out / POINTER
    if not pointer.exists():
        return None
    try:
        data = json.loads(pointer.read_text())
        ok = (isinstance(data, dict) and isinstance(data.get("checkpoint"), str)
              and _CHECKPOINT_NAME.fullmatch(data["checkpoint"]) is not None and data.get("update") is not None)
        problem = None if ok else 'no {"checkpoint": "checkpoint-UUUUUU", "update": U} object'
    except (UnicodeDecodeError, ValueError) as e:
        problem = error_text(e)
    if problem is None:
        return data
    found = sorted(p.name for p in out.glob("checkpoint-*") if p.is_dir() and _CHECKPOINT_NAME.fullmatch(p.name))
    restore = (f'write {{"checkpoint": "{found[0]}", "update": {int(found[0][11:])}}} into it to resume from '
               f"{found[0]}, or " if len(found) == 1 else "")
    raise DamagedRunFolderError(f"{pointer} is damaged ({problem}): it names the run's current checkpoint; "
                                f"{restore}delete {out} to start the run over")


def current_checkpoint(out: Path) -> Path | None:
    """The checkpoint folder ``checkpoint.json`` names, checked complete and readable before anything is
    loaded (``model.safetensors``: its header and the bytes it promises; ``state.pt``: its zip directory);
    None without a pointer. Read-only: nothing is removed (:func:`latest_checkpoint` does that).

    Raises
    ------
    DamagedRunFolderError
        ``checkpoint.json``, ``model.safetensors`` or ``state.pt`` is damaged (empty, cut, overwritten): one
        line naming the file and the fix.
    FileNotFoundError
        The pointer names a folder without both files.
    """
    from safetensors import SafetensorError, safe_open

    pointer = read_pointer(out)
    if pointer is None:
        return None
    current = out / pointer["checkpoint"]
    weights, state = current / "model.safetensors", current / "state.pt"
    if not weights.exists() or not state.exists():
        raise FileNotFoundError(f"{out / POINTER} names {current}, which is incomplete; delete {out} to start over")
    try:
        with safe_open(str(weights), framework="pt"):
            pass
    except SafetensorError as e:
        raise _damaged(weights, error_text(e), out) from None
    try:
        with zipfile.ZipFile(state) as z:
            if not any(n.endswith("data.pkl") for n in z.namelist()):
                raise zipfile.BadZipFile("no data.pkl: not a torch.save file")
    except zipfile.BadZipFile as e:
        raise _damaged(state, error_text(e), out) from None
    return current


def _damaged(path: Path, problem: str, out: Path) -> DamagedRunFolderError:
    """The error for a checkpoint file ``path`` of run folder ``out`` that cannot be read (``problem``)."""
    return DamagedRunFolderError(f"{path} is damaged ({problem}): the run's current checkpoint cannot be "
                                 f"loaded from it; restore the file from a copy, or delete {out} to start the run over")


def latest_checkpoint(out: Path) -> Path | None:
    """The current checkpoint folder of a run (None when there is none; checked as :func:`current_checkpoint`);
    removes leftovers of interrupted writes (temporary folders, folders the pointer does not name).

    Raises
    ------
    DamagedRunFolderError, FileNotFoundError
        As :func:`current_checkpoint` (nothing is removed then).
    """
    current = current_checkpoint(out)
    for tmp in out.glob(".checkpoint-*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    for old in out.glob("checkpoint-*"):
        if old.is_dir() and (current is None or old != current):
            shutil.rmtree(old, ignore_errors=True)
    return current


def load_checkpoint(path: Path, model) -> dict:
    """Load weights into ``model`` (in place) and return the ``state`` dict.

    Raises
    ------
    DamagedRunFolderError
        ``model.safetensors`` or ``state.pt`` cannot be read, or ``state.pt`` lacks the run's state (one line
        naming the file and the fix).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    out = path.parent
    try:
        load_model(model, str(path / "model.safetensors"), device=str(next(model.parameters()).device))
    except SafetensorError as e:
        raise _damaged(path / "model.safetensors", error_text(e), out) from None
    try:  # weights_only: a checkpoint folder may come from elsewhere; unpickling arbitrary objects could run code
        state = torch.load(path / "state.pt", weights_only=True)
    except (RuntimeError, EOFError, KeyError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as e:
        raise _damaged(path / "state.pt", error_text(e), out) from None
    missing = [k for k in _STATE_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise _damaged(path / "state.pt", f"no {', '.join(missing)}", out)
    return state


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
