"""The shell commands that gradprobe's output refusals advise (``rm PATH``, ``ln -sfn FOLDER PATH``, ``ln -sfn FILE
PATH``, ``mkdir -p PATH``) quote the path for a shell (:func:`gradprobe.outputs.shell_word`), so that a path with a
space, tab, quote, ``$``, backslash or newline gives a command that the shell reads back as exactly those words
(split here by bash itself, :func:`helpers_shell.shell_split`). They quoted it as Python's ``repr`` does:
``rm 't\\tl'`` removes a file named ``t\\tl`` (backslash, t), not the one holding a tab, and ``"it's"`` (repr's double
quotes) lets ``$`` expand. The prose around the command still names the path as ``repr`` does. A plain path reads as
before: ``rm '/tmp/out/a'``; one with a control character or an undecodable byte in bash's ``$'...'``, on one line,
and a relative one starting with ``-`` as ``./-dash``, which ``rm`` reads as no option."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from gradprobe.outputs import OutputDirError, refuse_file_in_the_way, shell_word, write_bytes_atomic

from helpers_shell import BASH, SHELL_ENV, shell_split

#: file names a shell command must quote, each a way repr's quoting read as another path or expanded in the shell
ODD = ["with space", "with\ttab", "it's", 'say "hi"', "dollar $HOME", "it's $HOME", "back\\slash", "new\nline"]


def _words(message: str, opening: str, closing: str) -> list[str]:
    """The command that ``message`` gives between ``(`` + ``opening`` and ``closing``, split as bash splits it."""
    start = message.index(f"({opening}") + 1
    return shell_split(message[start:message.index(closing, start)])


@pytest.mark.parametrize("name", ODD)
def test_shell_word_reads_back_as_the_path(name):
    assert shell_split(f"rm {shell_word(name)}") == ["rm", name]
    assert shell_split(f"rm {shell_word('/tmp/x/' + name)} done") == ["rm", "/tmp/x/" + name, "done"]
    if name.isprintable():  # no $'...' needed: POSIX quoting, which shlex reads too
        assert shlex.split(f"rm {shell_word(name)}") == ["rm", name]


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


@pytest.mark.parametrize("name", ODD)
def test_a_shell_runs_the_advice_on_the_path(tmp_path, name):
    """The advice as a shell runs it (``rm`` swapped for ``printf`` to print its words): ``"it's $HOME"`` (repr's
    double quotes) expanded ``$HOME`` there. A path quoted ``$'...'`` (a tab, a newline) is run by bash, the others by
    ``sh`` as well."""
    path = tmp_path / name
    path.symlink_to(name)
    with pytest.raises(OutputDirError) as refused:
        write_bytes_atomic(path, b"data")
    message = str(refused.value)
    start = message.index("(rm ") + len("(rm ")
    argument = message[start:message.index(") so that", start)]
    for shell in [BASH] + ([] if argument.startswith("$'") else ["sh"]):
        ran = subprocess.run([shell, "-c", f"printf '%s\\0' {argument}"], capture_output=True, check=True,
                             env=SHELL_ENV)
        assert ran.stdout == os.fsencode(path) + b"\0"
    assert "\n" not in argument and "\t" not in argument  # one line: the command a user copies


# ---------------------------------------------------------------- a leading dash, an undecodable byte, bytes

def _run_advice(command: str, cwd) -> subprocess.CompletedProcess:
    """``command`` run by bash in ``cwd``, given to it as a terminal pastes it (UTF-8 text: a lone surrogate, a path
    quoted as Python writes it, cannot be pasted)."""
    return subprocess.run([BASH, "-c", command.encode("utf-8")], cwd=cwd, capture_output=True, env=SHELL_ENV)


def test_a_relative_path_starting_with_a_dash_is_no_option(tmp_path):
    """Was: ``rm '-dash'``, which rm reads as its options (``rm: invalid option -- 'd'``)."""
    (tmp_path / "-dash").write_text("x")
    assert shell_word("-dash") == "'./-dash'"
    assert shell_word(Path("-d", "x y")) == "'./-d/x y'"
    assert shell_word("/tmp/-dash") == "'/tmp/-dash'" and shell_word("a/-dash") == "'a/-dash'"
    ran = _run_advice(f"rm {shell_word('-dash')}", tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert not (tmp_path / "-dash").exists()


def test_an_undecodable_byte_is_written_as_that_byte_for_bash(tmp_path):
    """Was: ``rm 'u\\udcff'``, which names a file of those six characters (a lone surrogate cannot be typed)."""
    name = os.fsdecode(b"u\xff")  # 'u\udcff'
    path = tmp_path / name
    path.write_text("x")
    assert shell_word(name) == "$'u\\xff'"
    assert shell_word("-\udcfe\t") == "$'./-\\xfe\\x09'"
    word = shell_word(path)
    assert word.isprintable() and word.startswith("$'")  # what is printed is what is pasted
    assert shell_split(word) == [str(path)]
    ran = _run_advice(f"printf '%s\\0' {word}; rm {word}", tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == os.fsencode(path) + b"\0"
    assert not path.exists()


@pytest.mark.parametrize("name", ["new\nline", "tab\there", "esc\x1b[31m red", "it's\ta \\ $HOME", "bell\x07\x7f",
                                  "nbsp\xa0é"])
def test_a_control_character_is_written_escaped_on_one_line(name):
    word = shell_word(name)
    assert word.startswith("$'") and word.isascii() is name.isascii() and word.isprintable()
    assert shell_split(f"rm {word} done") == ["rm", name, "done"]


def test_shell_word_of_bytes_or_a_number_is_the_documented_type_error():
    """Was: a TypeError from inside shlex (``expected string or bytes-like object``) for bytes."""
    with pytest.raises(TypeError, match=r"^shell_word\(text\): text must be a str path or an os\.PathLike giving "
                                        r"one, got bytes b'x'; decode bytes with os\.fsdecode first$"):
        shell_word(b"x")
    with pytest.raises(TypeError, match=r"^shell_word\(text\): text must be a str path or an os\.PathLike giving "
                                        r"one, got int 3$"):
        shell_word(3)
