"""Splitting the shell commands that gradprobe advises as bash splits them (:func:`gradprobe.outputs.shell_word`
writes a path holding a control character or an undecodable byte in bash's ANSI-C quoting, ``$'t\\x09l'``, which
:func:`shlex.split` does not read)."""

from __future__ import annotations

import os
import shutil
import subprocess

#: bash's path: the advised commands are read by bash, as a user pastes them (CI's Debian machine has it)
BASH = shutil.which("bash") or "bash"
#: the environment the shell runs in: a $HOME to tell whether a word was expanded
SHELL_ENV = {"HOME": "/home/someone", "PATH": os.environ.get("PATH", "")}


def shell_split(words: str) -> list[str]:
    """``words`` (a command's words, as a message gives them) split and unquoted by bash, each word as
    :func:`os.fsdecode` gives its bytes (an undecodable byte as a lone surrogate). The text goes to bash as UTF-8, as
    a terminal pastes it: a lone surrogate in it (a path quoted as Python writes it) raises UnicodeEncodeError."""
    ran = subprocess.run([BASH, "-c", b"printf '%s\\0' " + words.encode("utf-8")], capture_output=True, check=True,
                         env=SHELL_ENV)
    return [os.fsdecode(w) for w in ran.stdout.split(b"\0")[:-1]]
