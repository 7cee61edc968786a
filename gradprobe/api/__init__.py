"""The public Python API, re-exported lazily at the package's top level (``gradprobe.probe``,
``gradprobe.load_probe``, ``gradprobe.Study``...; see :mod:`gradprobe`).

``probe``    :func:`~gradprobe.api.probe.probe`, :class:`~gradprobe.api.probe.ProbeResult`, :func:`load_probe`;
``study``    :class:`~gradprobe.api.study.Study`, :func:`load_study`, :func:`train` and their results;
``prompts``  :func:`~gradprobe.api.prompts.rank_prompts`.

Each wraps the function the matching command calls, so the numbers and files are the command's.
Importing this package imports neither torch nor pandas.
"""
