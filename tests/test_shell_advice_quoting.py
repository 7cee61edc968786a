"""The shell commands that gradprobe's output refusals advise (``rm PATH``, ``ln -sfn FOLDER PATH``, ``ln -sfn FILE
PATH``, ``mkdir -p PATH``) quote the path for a shell (:func:`gradprobe.outputs.shell_word`), so that a path with a
space, tab, quote, ``$``, backslash or newline gives a command that the shell (and :func:`shlex.split`) reads back
as exactly those words. They quoted it as Python's ``repr`` does: ``rm 't\\tl'`` removes a file named ``t\\tl``
(backslash, t), not the one holding a tab, and ``"it's"`` (repr's double quotes) lets ``$`` expand. The prose around
the command still names the path as ``repr`` does. A plain path reads as before: ``rm '/tmp/out/a'``."""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import subprocess

import pytest

from gradprobe.outputs import OutputDirError, refuse_file_in_the_way, shell_word, write_bytes_atomic

#: file names a shell command must quote, each a way repr's quoting read as another path or expanded in the shell
ODD = ["with space", "with\ttab", "it's", 'say "hi"', "dollar $HOME", "it's $HOME", "back\\slash", "new\nline"]


def _words(message: str, opening: str, closing: str) -> list[str]:
    """The command that ``message`` gives between ``(`` + ``opening`` and ``closing``, split as a shell would."""
    start = message.index(f"({opening}") + 1
    return shlex.split(message[start:message.index(closing, start)])


@pytest.mark.parametrize("name", ODD)
def test_shell_word_reads_back_as_the_path(name):
    assert shlex.split(f"rm {shell_word(name)}") == ["rm", name]
    assert shlex.split(f"rm {shell_word('/tmp/x/' + name)} done") == ["rm", "/tmp/x/" + name, "done"]


def test_a_plain_path_is_quoted_as_before():
    assert shell_word("/tmp/out/a") == "'/tmp/out/a'" == repr("/tmp/out/a")
    assert shell_word("") == "''"


@pytest.mark.parametrize("name", ODD)
def test_a_looping_file_advice_reads_back_as_its_path(tmp_path, name):
    """Was: ``rm 'with\\ttab'`` (repr): ``shlex.split`` gave ``['rm', '.../with\\\\ttab']``, another file."""
    path = tmp_path / name
    path.symlink_to(name)  # a self-loop
    with pytest.raises(OutputDirError) as refused:
        write_bytes_atomic(path, b"data")
    message = str(refused.value)
    assert refused.value.errno == errno.ELOOP
    assert message.startswith(f"{str(path)!r} is a symlink loop (")  # the prose keeps repr
    assert _words(message, "rm ", ") so that") == ["rm", str(path)]
    assert _words(message, "ln -sfn FILE ", "), or") == ["ln", "-sfn", "FILE", str(path)]
    assert os.readlink(path) == name


@pytest.mark.parametrize("name", ODD)
def test_a_looping_folder_advice_reads_back_as_its_path(tmp_path, name):
    link = tmp_path / name
    link.symlink_to(name)
    with pytest.raises(OutputDirError) as refused:
        refuse_file_in_the_way(link / "run")
    message = str(refused.value)
    assert refused.value.errno == errno.ELOOP
    assert message.startswith(f"cannot create output folder {str(link / 'run')!r}: {str(link)!r} is a symlink loop")
    assert _words(message, "rm ", ") so that") == ["rm", str(link)]
    assert _words(message, "ln -sfn FOLDER ", "), or") == ["ln", "-sfn", "FOLDER", str(link)]


@pytest.mark.parametrize("name", ODD)
def test_a_broken_folder_link_advice_reads_back_as_its_paths(tmp_path, name):
    """Both the link and the folder to create (its target, here relative) are quoted for the shell."""
    link = tmp_path / name
    link.symlink_to(f"missing {name}")
    with pytest.raises(OutputDirError) as refused:
        refuse_file_in_the_way(link / "run")
    message = str(refused.value)
    assert refused.value.errno == errno.ENOENT
    assert message.startswith(f"cannot create output folder {str(link / 'run')!r}: {str(link)!r} is a symbolic link "
                              f"to {f'missing {name}'!r}, which does not exist (a broken link)")
    assert _words(message, "mkdir -p ", "), or") == ["mkdir", "-p", str(tmp_path / f"missing {name}")]
    assert _words(message, "rm ", ") so that") == ["rm", str(link)]


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
@pytest.mark.parametrize("name", ODD)
def test_a_shell_runs_the_advice_on_the_path(tmp_path, name):
    """The advice as a shell runs it (``rm`` swapped for ``printf`` to print its words): ``"it's $HOME"`` (repr's
    double quotes) expanded ``$HOME`` there."""
    path = tmp_path / name
    path.symlink_to(name)
    with pytest.raises(OutputDirError) as refused:
        write_bytes_atomic(path, b"data")
    message = str(refused.value)
    start = message.index("(rm ") + len("(rm ")
    argument = message[start:message.index(") so that", start)]
    ran = subprocess.run(["sh", "-c", f"printf '%s\\0' {argument}"], capture_output=True, check=True,
                         env={"HOME": "/home/someone", "PATH": os.environ.get("PATH", "")})
    assert ran.stdout.decode() == f"{path}\0"
