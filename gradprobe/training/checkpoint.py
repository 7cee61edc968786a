"""Atomic checkpoints of a training run, and the run folder's other writes.

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

import contextlib
import errno
import json
import os
import shutil
from pathlib import Path

import torch

POINTER = "checkpoint.json"


class OutputDirError(OSError):
    """The run folder cannot be created or written (unwritable, a file in the way, disk full)."""


def _fix(path: Path, e: OSError) -> str:
    if e.errno == errno.ENOSPC or e.errno == errno.EDQUOT:
        return f"free space on the device holding {str(path)!r} (or choose another --out), then rerun to resume"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {str(path)!r} writable or choose another --out"
    return "choose another --out"


def output_error(what: str, path: Path, e: OSError) -> OutputDirError:
    """An :class:`OutputDirError` saying what failed, where, why and how to fix it."""
    err = OutputDirError(e.errno, f"{what} {str(path)!r} failed ({e.strerror or e}); {_fix(path, e)}")
    err.filename = str(path)
    return err


@contextlib.contextmanager
def removed_if_left_empty(out: str | os.PathLike | None):
    """Context manager: if the block raises and ``out`` did not exist before it and is an empty
    folder now (refused input, nothing written), remove it, so a failed command leaves nothing
    behind. A folder that existed before, or that holds anything, is never touched. ``None``: no-op."""
    path = None if out is None else Path(out)
    created = path is not None and not path.exists()
    try:
        yield
    except BaseException:
        if created and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        raise


def prepare_output_dir(out: Path) -> Path:
    """Create ``out`` and prove it writable, before any compute.

    Raises
    ------
    OutputDirError
        Names the path; when a parent is a regular file, names that file.
    """
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise OutputDirError(errno.ENOTDIR, f"cannot create output folder {str(out)!r}: {str(parent)!r} is a "
                                                f"file, not a folder; choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise output_error("creating/writing the output folder", out, e) from e
    return out


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to ``path.tmp``, fsync, ``os.replace`` onto ``path``.

    Raises
    ------
    OutputDirError
        The write failed; the temporary file is removed and ``path`` is unchanged.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(data, indent=2, allow_nan=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise output_error("writing", path, e) from e


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
