"""Handing freed memory back to the operating system between the probe's stages (issue 14).

Why: on Linux, torch's CPU tensors are allocated by glibc's ``malloc``. Blocks under glibc's mmap
threshold (dynamic: it rises to the size of the largest block freed so far, up to 32 MiB, so after
the first (T + 1, V) logits are freed every layer-sized gradient, activation and KV-cache block of
SmolLM2-135M is carved from the heap) stay in the process after ``free`` unless they sit at the
top of the heap. A stage that frees a parameter-sized vector (a gradient buffer, the second
moment s) thus leaves its pages resident, and the next stage's allocations, of other sizes, do not
always reuse them: the resident set grows by fragmentation, not by live tensors.
``malloc_trim(0)`` returns every free page of every arena (``madvise(MADV_DONTNEED)``) without
moving live data, so calling it after each large stage bounds the resident set of the next stage
by its live tensors plus the freed pages it does touch again.

Values are unaffected (no tensor is touched); the call costs milliseconds. It is a no-op where
glibc is not the C library (macOS, musl, Windows) or on a CUDA device's memory (torch's caching
allocator keeps that; this is about host RAM).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

__all__ = ["release_memory"]

_libc = None
_looked_up = False


def _malloc_trim():
    global _libc, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = lib if hasattr(lib, "malloc_trim") else None
        except OSError:  # no glibc: nothing to trim
            _libc = None
    return None if _libc is None else _libc.malloc_trim


def release_memory() -> bool:
    """Collect unreachable Python objects, then return glibc's free heap pages to the OS.

    Returns
    -------
    bool
        True when ``malloc_trim`` ran and released memory, False where it is unavailable (not glibc)
        or found nothing to release. Never raises.
    """
    gc.collect()  # reference cycles can hold tensors (autograd graphs, tracebacks)
    trim = _malloc_trim()
    if trim is None:
        return False
    return bool(trim(0))
