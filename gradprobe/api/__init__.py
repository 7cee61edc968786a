"""The public Python API, re-exported lazily at the package's top level (``gradprobe.probe``,
``gradprobe.load_probe``, ``gradprobe.Study``...; see :mod:`gradprobe`).

``probe``    :func:`~gradprobe.api.probe.probe`, :class:`~gradprobe.api.probe.ProbeResult`, :func:`load_probe`;
``study``    :class:`~gradprobe.api.study.Study`, :func:`load_study`, :func:`train` and their results;
``prompts``  :func:`~gradprobe.api.prompts.rank_prompts`.

Each wraps the function the matching command calls, so the numbers and files are the command's.
Importing this package imports neither torch nor pandas.
"""

import os as _os
from pathlib import Path as _Path


def home_path(path: _Path) -> _Path:
    """``path`` with a leading ``~`` or ``~user`` expanded to that home folder (:func:`os.path.expanduser`), as a
    shell, pandas' ``to_csv``, the commands' path options and gradprobe's model specs, reward plug-in files and tier
    cache expand it: a path given to the Python API names what the same path names on the command line (pathlib
    alone would make a folder literally named ``~`` in the current folder). A ``~name`` no user of this system has
    stays as it is, a folder of that name, as a shell leaves it. Raises nothing."""
    return _Path(_os.path.expanduser(path))
