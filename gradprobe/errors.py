"""Errors shared by layers that must not import each other.

:class:`ModelNotFoundError` is raised both by :func:`gradprobe.models.load_policy` and, through its
subclass :class:`gradprobe.tiers.TierNotBuiltError`, by the tier lookup that ``load_policy`` itself
calls; defined here, below both, so that neither module imports the other back (issue 15).
It stays importable as ``gradprobe.models.ModelNotFoundError``.
"""

from __future__ import annotations

__all__ = ["ModelNotFoundError"]


class ModelNotFoundError(ValueError):
    """The model spec is neither an alias, an existing path, nor a hub id."""
