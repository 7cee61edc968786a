"""The public Python API, re-exported lazily at the package's top level (``gradprobe.probe``,
``gradprobe.load_probe``, ``gradprobe.Study``...; see :mod:`gradprobe`).

``probe``    :func:`~gradprobe.api.probe.probe`, :class:`~gradprobe.api.probe.ProbeResult`, :func:`load_probe`;
``study``    :class:`~gradprobe.api.study.Study`, :func:`load_study`, :func:`train` and their results;
``prompts``  :func:`~gradprobe.api.prompts.rank_prompts`.

Each wraps the function the matching command calls, so the numbers and files are the command's.
Importing this package imports neither torch nor pandas.
"""

from pathlib import Path as _Path


def home_path(path: _Path, name: str) -> _Path:
    """``path`` with a leading ``~`` or ``~user`` expanded to that home folder (:meth:`pathlib.Path.expanduser`), as
    a shell, pandas' ``to_csv`` and gradprobe's model specs, reward plug-in files and tier cache expand it: a path
    given to the Python API names what the same path names on the command line (pathlib alone would make a folder
    literally named ``~`` in the current folder).

    Raises
    ------
    ValueError
        ``path`` starts with ``~user`` for a user this system does not know (``name`` and the path named, with the
        fix: the full path).
    """
    try:
        return path.expanduser()
    except RuntimeError:  # pathlib: "Could not determine home directory."
        raise ValueError(f"{name} {str(path)!r} starts with ~ but names no home folder known here: give the full "
                         "path") from None
