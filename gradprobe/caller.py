"""The line of the user's code that called gradprobe, for the warnings gradprobe gives.

A warning raised deep inside gradprobe (a probe's folder handling under a ``@contextmanager``, a plan's budget
check) should name the line that called gradprobe (``gradprobe.probe(...)`` in a notebook cell, ``result.write(...)``),
not a line of gradprobe or of :mod:`contextlib`. Python 3.12's ``warnings.warn(skip_file_prefixes=...)`` does this;
Python 3.11, which gradprobe supports, has none, so :func:`caller_stacklevel` walks the frames instead.
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["caller_stacklevel"]

#: The frames skipped to name the caller of a warning: the gradprobe package's, and those of :mod:`contextlib` (the
#: ``@contextmanager`` generators gradprobe's code runs in).
SKIPPED = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.abspath(contextlib.__file__))


def caller_stacklevel() -> int:
    """The ``stacklevel`` with which a :func:`warnings.warn` made in the function that calls this one names the first
    frame outside the gradprobe package and :mod:`contextlib` (:data:`SKIPPED`): the line of the user's code (or of
    the command's entry point) that called gradprobe, however deep the warning comes. Raises nothing."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(SKIPPED):
        frame, level = frame.f_back, level + 1
    return level
