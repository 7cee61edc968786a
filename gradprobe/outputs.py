"""Writing result folders: atomic files, strict JSON, output-folder checks, version records.

One torch-free module (STYLE.md, "One place per contract") that every command writing a folder
uses: the probe (``probe.json``, ``report.html``), training runs (``summary.json``, checkpoint
pointers), studies, ``rank-prompts`` and the tier warm start. It imports nothing of gradprobe
but ``__version__``, so any layer may use it without an import cycle (issue 15).

Atomic write: the text goes to ``<path>.tmp`` in the same folder, is flushed and fsynced, then
``os.replace``-d onto ``path`` (atomic on POSIX within one file system), so a reader sees the old
file or the new one, never half of one. A failed write (disk full, read-only folder) removes the
temporary file and raises :class:`OutputDirError` naming the path and the fix. A target that is a symbolic link in a
loop (``a -> b -> a``, ``a -> a``), which ``os.replace`` would silently replace with a regular file, or a file under a
looping folder, is refused with nothing written (:func:`refuse_looping_file`). The shell commands these refusals
advise (``rm PATH``, ``ln -sfn FOLDER PATH``, ``mkdir -p PATH``) quote the path for a shell (:func:`shell_word`); the
prose around them names it as ``repr`` does.

The one reading of a ``probe.json``'s form (:func:`read_probe_json`: UTF-8 with or without a byte-order mark, JSON,
an object with a ``rewards`` list) is here too, beside its writer, so every reader of the file reads it alike.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import math
import os
import platform
import shlex
from importlib import metadata
from numbers import Integral, Real
from pathlib import Path

from . import __version__


__all__ = ["is_json_number", "json_number_float", "json_number_text", "json_short", "first_repeated_key",
           "beyond_float", "OutputDirError", "output_error", "error_text", "as_made", "removed_if_left_empty",
           "home_path", "api_out", "refuse_file_in_the_way", "dangling_link", "link_loop", "refuse_link_loop",
           "shell_word", "refuse_looping_file", "open_temporary", "prepare_output_dir", "write_bytes_atomic",
           "write_text_atomic", "write_json_atomic", "json_safe", "json_float", "versions", "PER_UPDATE_FIELDS",
           "per_update_problem", "read_probe_json", "naming_out", "out_option"]

#: distributions recorded by :func:`versions` (besides gradprobe and python), distribution name -> key
VERSIONED = {"torch": "torch", "transformers": "transformers", "reasoning-gym": "reasoning_gym"}


class OutputDirError(OSError):
    """The output folder cannot be created or written (unwritable, a file in the way, disk full).

    ``str()`` is the message alone (no ``[Errno N]`` prefix: the message names the cause); ``errno`` keeps
    the code."""

    def __str__(self) -> str:
        return str(self.strerror) if self.strerror is not None else super().__str__()


def dangling_link(path) -> tuple[Path, str] | None:
    """The first of ``path`` and its parents (nearest first) that is a symbolic link to nothing (its target, or a
    link of its chain, does not exist, or the chain loops: ``a -> b -> a``, :func:`link_loop`), with the target it
    names (``os.readlink``); None when there is none."""
    for p in [Path(path), *Path(path).parents]:
        if p.is_symlink() and not p.exists():
            try:
                return p, os.readlink(p)
            except OSError:
                return p, "?"
    return None


def link_loop(link) -> list[str] | None:
    """The chain of symbolic links from ``link`` round to the first one met twice (``['a', 'b', 'a']`` for
    ``a -> b -> a``), as paths (normalized, relative ones joined to their link's folder); ``[str(link)]`` when
    following ``link`` fails with ELOOP but no repeat is found within 40 links (a loop through a linked folder, or a
    chain longer than the system follows); None when ``link`` does not loop (it resolves, or ends at a missing
    target: a broken link). Never raises."""
    try:
        os.stat(link)
        return None
    except OSError as e:
        if e.errno != errno.ELOOP:
            return None
    chain, seen, p = [], set(), os.path.normpath(str(link))
    for _ in range(40):
        chain.append(p)
        key = os.path.normcase(os.path.abspath(p))
        if key in seen:
            return chain
        seen.add(key)
        try:
            target = os.readlink(p)
        except OSError:  # not a link: the loop runs through a linked folder above it
            break
        p = os.path.normpath(target if os.path.isabs(target) else os.path.join(os.path.dirname(p), target))
    return [str(link)]


def shell_word(text: str | os.PathLike) -> str:
    """``text`` (a path) as one word of a shell command that a fix names (``rm WORD``, ``ln -sfn FOLDER WORD``,
    ``mkdir -p WORD``), which the shell reads back as exactly that path:

    - between single quotes, each single quote in it written ``'"'"'`` (the quoting of :func:`shlex.quote`, here also
      for a word that needs none, so every such command reads alike: ``rm 'out/a'``). A space, quote, ``$`` or
      backslash is kept as it is, where Python's ``repr`` (``'t\\tl'``) would name another path;
    - a relative path that starts with ``-`` led by ``./`` (``rm './-dash'``), which the command would read as an
      option;
    - where the path holds a character that is not printable (:meth:`str.isprintable`: a control character such as
      a tab, a newline or an escape, or an undecodable byte of a file name, the lone surrogate of
      :func:`os.fsdecode`), in bash's ANSI-C quoting: ``$'u\\xff'`` for ``u\\udcff``, ``$'t\\x09l'`` for a tab.
      Each such character is written as the bytes :func:`os.fsencode` gives it (``\\xHH``), so the shell passes the
      file's own bytes and the command stays on one line; ``\\`` and ``'`` inside are written ``\\\\`` and ``\\'``, the
      other characters as they are. This form is for bash and zsh (ksh93 too); POSIX sh (dash) lacks it, and it is
      used only where the path needs it. (A surrogate no file name holds, not an undecodable byte's, is written
      ``\\uHHHH``.)

    Raises
    ------
    TypeError
        ``text`` is neither a str nor an ``os.PathLike`` giving one (bytes, ``os.fsdecode`` them first), named.
    """
    try:
        path = os.fspath(text)
    except TypeError:
        path = None
    if not isinstance(path, str):
        fix = "; decode bytes with os.fsdecode first" if isinstance(path, bytes) else ""
        raise TypeError(f"shell_word(text): text must be a str path or an os.PathLike giving one, got "
                        f"{type(text).__name__} {text!r:.60}{fix}")
    if path.startswith("-"):  # relative (an absolute path starts with /): rm would read it as options
        path = "./" + path
    if not path.isprintable():
        return "$'" + "".join(_ansi_c(c) for c in path) + "'"
    quoted = shlex.quote(path)
    return quoted if quoted.startswith("'") else f"'{quoted}'"


def _ansi_c(c: str) -> str:
    """One character ``c`` of a path inside bash's ``$'...'`` (:func:`shell_word`): a printable one as it is
    (``\\`` and ``'`` escaped), another as its file-name bytes (:func:`os.fsencode`), ``\\xHH`` each."""
    if c.isprintable():
        return "\\" + c if c in "\\'" else c
    try:
        return "".join(f"\\x{b:02x}" for b in os.fsencode(c))
    except UnicodeEncodeError:  # a surrogate that is no undecodable byte: no file name holds it
        return f"\\u{ord(c):04x}"


def _loop_words(link, loop: list[str], target: str) -> str:
    """The one wording of a symlink loop, shared by the refusal of an output folder (:func:`_dangling_fix`) and of an
    output file (:func:`refuse_looping_file`), each of which ends it (``... so it leads to no folder/file ...)``):
    ``'LINK' is a symlink loop ('LINK' -> 'B' -> 'LINK': each link points to the next, so it`` for ``loop``, the
    chain of :func:`link_loop`; ``'LINK' leads into a symlink loop ('LINK' -> 'TARGET', a path through links that
    point back to each other, so it`` where no link repeats from ``link`` (``loop`` is ``[link]``: the loop runs
    through a folder its ``target`` passes, ``c -> a/sub`` with ``a <-> b``)."""
    if len(loop) > 1:
        chain = " -> ".join(repr(x) for x in loop)
        return f"{str(link)!r} is a symlink loop ({chain}: each link points to the next, so it"
    return (f"{str(link)!r} leads into a symlink loop ({str(link)!r} -> {target!r}, a path through links that point "
            "back to each other, so it")


def _dangling_fix(out: Path, link: Path, target: str) -> str:
    """The message for output folder ``out`` under ``link``, a symbolic link to ``target``, which does not exist, or
    which leads back to itself (a symlink loop, :func:`link_loop`: there is no folder to create, only the link to
    remove or re-point)."""
    loop = link_loop(link)
    if loop is not None:
        return (f"{_loop_words(link, loop, target)} leads to no folder, and none can be created through it): remove "
                f"the link (rm {shell_word(link)}) so that {str(out)!r} is created as a folder, or point it at an "
                f"existing folder (ln -sfn FOLDER {shell_word(link)}), or choose another {out_option()}")
    resolved = target if os.path.isabs(target) else os.path.join(os.path.dirname(link), target)
    return (f"{str(link)!r} is a symbolic link to {target!r}, which does not exist (a broken link): create the "
            f"folder it points to (mkdir -p {shell_word(resolved)}), or remove the link (rm {shell_word(link)}) so "
            f"that {str(out)!r} is created as a folder, or choose another {out_option()}")


def _fix(path: Path, e: OSError) -> str:
    broken = dangling_link(path)
    if broken is not None:
        return _dangling_fix(path, *broken)
    if e.errno == errno.ENOSPC or e.errno == errno.EDQUOT:
        return (f"free space on the device holding {str(path)!r} (or choose another {out_option()}), then rerun to "
                "resume")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {str(path)!r} writable or choose another {out_option()}"
    return f"choose another {out_option()}"


def error_text(e: BaseException) -> str:
    """``"Type: first line of the message"``: the cause quoted inside a one-line error about a damaged file."""
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


def output_error(what: str, path: Path, e: OSError) -> OutputDirError:
    """An :class:`OutputDirError` saying what failed (``what``), where (``path``), why (``e``) and how to fix it."""
    err = OutputDirError(e.errno, f"{what} {str(path)!r} failed ({e.strerror or e}); {_fix(path, e)}")
    err.filename = str(path)
    return err


def as_made(out: str | os.PathLike) -> Path:
    """Where the system will find ``out`` once ``mkdir -p`` has made its missing folders: its absolute path with the
    links that exist followed and a ``..`` after a missing part taken back off it (:func:`os.path.realpath`, not
    strict), the rule by which :func:`removed_if_left_empty` tells what ``mkdir -p`` makes. Read what the folder holds
    through it to decide about the folder before it is created: ``new7/../R1`` cannot be read while ``new7`` is
    missing (the system fails with ENOENT), though once ``mkdir -p`` has made ``new7`` it reaches ``R1``. Messages keep
    naming ``out`` as given. Raises nothing (a symbolic link in a loop is kept unresolved)."""
    return Path(os.path.realpath(out))


def _missing_folders(out: Path) -> list[str]:
    """The folders that creating ``out`` (``mkdir -p``) would make, as absolute paths in the order it makes them:
    each leading part of ``out`` (``new9``, ``new9/..``, ``new9/../new10``, ...) where the system will find it
    (:func:`os.path.realpath`, not strict: links that exist followed, a ``..`` after a missing part taken back off
    it, as the system does once that part is made a folder: :func:`as_made`), kept when nothing is there now."""
    made, seen = [], set()
    for k in range(1, len(out.parts) + 1):
        where = str(as_made(Path(*out.parts[:k])))
        if where not in seen and not os.path.lexists(where):
            seen.add(where)
            made.append(where)
    return made


@contextlib.contextmanager
def removed_if_left_empty(out: str | os.PathLike | None):
    """Context manager: if the block raises, remove each folder on the way to ``out`` that did not exist before it
    and is an empty folder now (refused input, nothing written): ``out`` and the parents the block created for it
    (``--out new/deeper/run``), and a folder made only to be passed through (``new9`` of ``--out new9/../new10/run``,
    which ``mkdir -p`` creates since the system takes ``..`` after it), so a failed command leaves nothing behind.
    A folder that existed before (``new9/../old`` reaches an existing ``old``), or that holds anything, is never
    touched; nor is a folder's link. ``None``: no-op."""
    missing = [] if out is None else _missing_folders(Path(out))  # created parents before their children
    try:
        yield
    except BaseException:
        for folder in reversed(missing):  # children first: a parent is empty only once they are gone
            with contextlib.suppress(OSError):
                if os.path.isdir(folder) and not os.path.islink(folder) and not os.listdir(folder):
                    os.rmdir(folder)
        raise


#: How this module's fixes name the output folder's option (:func:`out_option`): ``--out`` on the command line, the
#: argument's name inside a Python API call (:func:`naming_out`).
_OUT_OPTION: contextvars.ContextVar[str] = contextvars.ContextVar("gradprobe_out_option", default="--out")


def out_option() -> str:
    """How a fix names the output folder to choose instead: ``"--out"`` (the command line's flag, the default), or
    inside :func:`naming_out` the Python API argument (``"out"``, ``"dir"``)."""
    return _OUT_OPTION.get()


@contextlib.contextmanager
def naming_out(name: str):
    """While the body runs (or the decorated function: a context decorator), the output fixes of this module name
    ``name`` as the option to change (``choose another out``), as a notebook user passed it, not ``--out``
    (:func:`out_option`; a :class:`contextvars.ContextVar`, so threads and nested calls each keep their own).

    Raises
    ------
    Nothing itself; what the body raises propagates (the name is restored first)."""
    token = _OUT_OPTION.set(name)
    try:
        yield
    finally:
        _OUT_OPTION.reset(token)


def home_path(path) -> Path:
    """``path`` (a str or ``os.PathLike``) as a Path with a leading ``~`` or ``~user`` expanded to that home folder
    (:func:`os.path.expanduser`), as a shell, pandas' ``to_csv``, the commands' path options
    (:func:`gradprobe.cli.args.home`) and gradprobe's model specs expand it: a path given to the Python API names what
    the same path names on the command line (pathlib alone would make a folder literally named ``~``). A ``~name`` no
    user of this system has stays as it is, a folder of that name, as a shell leaves it. Raises nothing."""
    return Path(os.path.expanduser(path))


def api_out(out, name: str = "out") -> Path:
    """The output folder ``out`` given to a Python API call, as a Path with a leading ``~`` expanded
    (:func:`home_path`), refused as ``--out`` is on the command line (:func:`gradprobe.cli.args.out_path`): an empty
    or blank string would mean the current folder.

    Raises
    ------
    ValueError
        ``out is empty ('')...`` (``name`` instead of ``out`` when given), with the fix.
    TypeError
        ``out`` is neither a str nor an ``os.PathLike``.
    """
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {out!r} ({type(out).__name__})")
    if isinstance(out, str) and not out.strip():
        raise ValueError(f"{name} is empty ({out!r}): give a path ({name}='.' is the current folder)")
    return home_path(out)


def refuse_file_in_the_way(out: Path) -> None:
    """Raise when ``out`` or one of its parents is a regular file (so ``out`` cannot be a folder).

    Raises
    ------
    OutputDirError (errno ENOTDIR)
        ``cannot create output folder 'OUT': 'FILE' is a file, not a folder; choose another --out``.
    OutputDirError (errno ENOENT)
        ``out`` or a parent is a broken symbolic link (to nothing): the message names the link and its target, with
        the fix (create the target folder, or remove the link).
    OutputDirError (errno ELOOP)
        ``out`` or a parent is a symbolic link in a loop (``a -> b -> a``, :func:`link_loop`): the message says "a
        symlink loop", names the chain, and the fix (remove the link or point it at an existing folder).
    """
    out = Path(out)
    broken = dangling_link(out)
    if broken is not None:
        raise _link_error(out, broken)
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise OutputDirError(errno.ENOTDIR, f"cannot create output folder {str(out)!r}: {str(parent)!r} is a "
                                                f"file, not a folder; choose another {out_option()}")


def _link_error(out: Path, broken: tuple[Path, str]) -> OutputDirError:
    """:func:`refuse_file_in_the_way`'s error for output folder ``out`` under ``broken``, the link
    :func:`dangling_link` found and its target: errno ELOOP for a symlink loop (:func:`link_loop`), else ENOENT."""
    code = errno.ELOOP if link_loop(broken[0]) is not None else errno.ENOENT
    return OutputDirError(code, f"cannot create output folder {str(out)!r}: {_dangling_fix(out, *broken)}")


def refuse_link_loop(out: str | os.PathLike) -> None:
    """Raise :func:`refuse_file_in_the_way`'s error when ``out`` or one of its parents is a symbolic link in a loop
    (``a -> b -> a``, ``a -> a``, or a link into one: :func:`link_loop`), and only then: a folder that would fail at
    ``mkdir`` with "File exists". Anything else passes (a broken link to nothing, a file in the way: the caller's
    own checks name them). Costs one ``lstat`` per path component, and ``stat`` calls only for a symbolic link.

    Raises
    ------
    OutputDirError (errno ELOOP)
        ``cannot create output folder 'OUT': 'LINK' is a symlink loop ('LINK' -> ... -> 'LINK': ...)``, with the fix
        (remove the link, point it at an existing folder, or choose another ``--out``: :func:`out_option`).
    """
    out = Path(out)
    looping = _looping_link(out)
    if looping is not None:
        raise _link_error(out, looping[:2])


def _looping_link(path: Path) -> tuple[Path, str, list[str]] | None:
    """The first of ``path`` and its parents (nearest first) that is a symbolic link in a loop (:func:`dangling_link`,
    then :func:`link_loop`), with the target it names and the loop's chain; None when none loops (a broken link to
    nothing is no loop). The one check of :func:`refuse_link_loop` (an output folder) and
    :func:`refuse_looping_file` (an output file)."""
    broken = dangling_link(path)
    loop = None if broken is None else link_loop(broken[0])
    return None if loop is None else (broken[0], broken[1], loop)


def refuse_looping_file(path: str | os.PathLike, fix: str | None = None) -> None:
    """Refuse, before anything is written, an output file ``path`` that is, or lies under, a symbolic link in a loop
    (``a -> b -> a``, a self-loop ``a -> a``: :func:`link_loop`): the atomic write (:func:`write_bytes_atomic`, which
    calls this) would replace the link itself with a regular file, and creating its folder fails with "File
    exists". Any other path passes (a broken link, a missing folder: the write names them). ``fix``: the last fix
    the message names (default ``choose another --out``, or the Python API argument's name: :func:`out_option`).
    Costs one ``lstat`` per path component (:func:`dangling_link`), and ``stat`` calls only for a symbolic link.

    Raises
    ------
    OutputDirError (errno ELOOP)
        A folder above the file loops: the refusal of that output folder (:func:`refuse_link_loop`: ``cannot create
        output folder 'DIR': 'LINK' is a symlink loop ('LINK' -> ... -> 'LINK': ...)``, with its fix). ``path``
        itself loops: ``'PATH' is a symlink loop ('PATH' -> ... -> 'PATH': each link points to the next, so it
        leads to no file, ...)`` (``'PATH' leads into a symlink loop`` when it points into a looping folder), with
        the fix (remove the link, point it at a file, or ``fix``).
    """
    path = Path(path)
    looping = _looping_link(path)
    if looping is None:
        return
    link, target, loop = looping
    if link != path:  # a folder of the path: refused as every output folder through a loop is
        raise _link_error(path.parent, (link, target))
    raise OutputDirError(errno.ELOOP, (
        f"{_loop_words(path, loop, target)} leads to no file, and the write would replace the link with a regular "
        f"file): remove the link (rm {shell_word(path)}) so that the file is written there, or point it at a file "
        f"(ln -sfn FILE {shell_word(path)}), or {fix if fix is not None else f'choose another {out_option()}'}"))


def prepare_output_dir(out: Path) -> Path:
    """Create ``out`` and prove it writable, before any compute.

    Raises
    ------
    OutputDirError
        Names the path; when a parent is a regular file, names that file (:func:`refuse_file_in_the_way`).
    """
    refuse_file_in_the_way(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise output_error("creating/writing the output folder", out, e) from e
    return out


def _umask() -> int:
    """The process's umask, read from ``/proc/self/status`` (Linux) without changing it; elsewhere by setting and
    restoring it (``os.umask``)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            return int(next(x for x in fh if x.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_umask_mode(path) -> None:
    """Give the file ``path`` mode 0666 less the umask (0644 under the usual umask 022: what ``open()`` gives a new
    file where no default ACL applies). safetensors writes through a private temporary file, mode 0600, so a run's
    weights, a checkpoint's ``model.safetensors`` or a saved direction could not be read by another user who could
    read the JSON files beside them (``gradprobe probe --checkpoints`` on a colleague's run). A file system that
    refuses ``chmod`` (vfat, some FUSE mounts) keeps the file as written: never raises."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o666 & ~_umask())


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path.tmp``, fsync, ``os.replace`` onto ``path`` (the one atomic writer).

    A ``path`` that is a symbolic link in a loop (``a -> b -> a``, ``a -> a``), which ``os.replace`` would replace
    with a regular file, is refused first (:func:`refuse_looping_file`); checked only when ``path`` is a link (one
    ``lstat``): a folder above it that loops fails the temporary file's ``open`` with ELOOP, refused then in that
    folder's words. A link to an existing file (or a broken one) is replaced by the file, as ``os.replace`` does.

    Raises
    ------
    OutputDirError
        The write failed (missing or read-only folder, a file in the way, disk full); the temporary
        file is removed and ``path`` is unchanged. errno ELOOP: ``path`` is or lies under a symlink loop
        (:func:`refuse_looping_file`: the loop's chain, the fix), nothing written.
    """
    path = Path(path)
    if os.path.islink(path):  # the one lstat of a plain path
        refuse_looping_file(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with os.fdopen(open_temporary(tmp), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):  # the folder is not a folder: there is no temporary file
            tmp.unlink(missing_ok=True)
        looping = None
        if e.errno == errno.ELOOP:  # a folder above path loops (a link at path.tmp is replaced: open_temporary)
            try:
                refuse_looping_file(path)
            except OutputDirError as refused:
                looping = refused
        raise (looping if looping is not None else output_error("writing", path, e)) from e


def open_temporary(tmp: str | os.PathLike) -> int:
    """Open the temporary file ``tmp`` of an atomic write for writing (created, or truncated), never through a
    symbolic link: a stale ``NAME.tmp`` that is a link (to a file elsewhere, or a loop) is the writer's own name, so
    the link itself is removed and a new file made in its place; following it would overwrite the file it points to
    (``os.open`` with ``O_NOFOLLOW``, which fails with ELOOP on a link, then ``os.unlink``). Mode 0666 less the
    umask, as ``open()`` gives. Returns the file descriptor (the caller closes it: ``os.fdopen``).

    Raises
    ------
    OSError
        ``tmp`` cannot be created (a missing or read-only folder, a loop in a folder above it: errno ELOOP).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(tmp, flags, 0o666)
    except OSError as e:
        if e.errno != errno.ELOOP or not os.path.islink(tmp):  # a folder above loops: the caller names it
            raise
    os.unlink(tmp)
    return os.open(tmp, flags, 0o666)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) atomically with :func:`write_bytes_atomic`.

    Raises
    ------
    OutputDirError
        The write failed; the temporary file is removed and ``path`` is unchanged (errno ELOOP: a symlink loop,
        refused with nothing written: :func:`refuse_looping_file`).
    """
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as indented strict JSON (no NaN/inf: see :func:`json_safe`) with :func:`write_text_atomic`.

    Raises
    ------
    OutputDirError
        The write failed; the temporary file is removed and ``path`` is unchanged.
    ValueError
        ``data`` holds a NaN or infinite float (nothing is written).
    """
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False))


def json_safe(x):
    """``x`` in gradprobe's one JSON encoding of non-finite floats, recursively through dicts, lists and
    tuples (tuples become lists, dict keys strings), so that strict JSON (``allow_nan=False``) accepts it
    and nothing is lost: NaN -> ``null``, +inf -> ``"inf"``, -inf -> ``"-inf"`` (``float("inf")`` reads the
    strings back; see :func:`json_float`). numpy and torch scalars (anything 0-dimensional with ``.item()``)
    become Python numbers first. Every JSON file gradprobe and calib write goes through it (probe.json,
    summary.json, metrics.jsonl, analysis.json, calibration.json)."""
    if getattr(x, "shape", None) == () and hasattr(x, "item"):  # numpy / torch scalar, without importing either
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def read_probe_json(file: str | os.PathLike, fix: str, *, missing: str | None = None) -> dict:
    """A ``probe.json`` as every reader of one reads it (:func:`gradprobe.load_probe`, the probe's report, a study's
    forecasts, calib): UTF-8 (a byte-order mark an editor wrote is read: ``utf-8-sig``), JSON, an object holding a
    ``rewards`` list. Only the file's form is checked; its entries are the forecast's and ``load_probe``'s to check.

    Parameters
    ----------
    file : path
        The ``probe.json`` file.
    fix : str
        How to write the file again, named in every refusal (e.g. :func:`gradprobe.layout.rerun_advice` of its
        folder).
    missing : str, optional
        The fix named when the file is missing (default ``fix``).

    Returns
    -------
    dict
        The parsed file.

    Raises
    ------
    FileNotFoundError
        ``file`` does not exist or is no file: ``FILE is missing; FIX`` (``missing``, else ``fix``).
    ValueError
        One line naming ``file``, what is wrong and ``fix``: its bytes are not UTF-8 text, it is not valid JSON, or
        it is not a JSON object with a ``rewards`` list.
    OSError
        The file cannot be read (e.g. PermissionError, which names it).
    """
    file = Path(file)
    if not file.is_file():
        there = " (a folder is there)" if file.is_dir() else ""
        raise FileNotFoundError(f"{file} is missing{there}; {missing if missing is not None else fix}")
    try:
        raw = json.loads(file.read_text(encoding="utf-8-sig"))  # -sig: a byte-order mark an editor wrote is read
    except UnicodeDecodeError as e:
        raise ValueError(f"{file} is not UTF-8 text ({e}); {fix}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{file} is not valid JSON ({e}); {fix}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("rewards"), list):
        raise ValueError(f"{file} has no 'rewards' list: not a probe.json of gradprobe probe; {fix}")
    return raw


#: the texts :func:`json_float` reads as a non-finite float (any case, spaces around): what :func:`json_safe` writes
#: (``"inf"``, ``"-inf"``) and the spellings ``float()`` takes for the same values
_NONFINITE_TEXT = ("inf", "-inf", "+inf", "nan", "infinity", "-infinity")


def json_float(v) -> float:
    """A number written by :func:`json_safe` back to a float: ``null`` -> NaN, ``"inf"``/``"-inf"`` -> +-inf.

    What a number is is :func:`is_json_number`'s rule, read as :func:`json_number_float` reads it: an integer too
    large for a float (JSON holds any integer) reads as ``inf`` or ``-inf`` by its sign, never a boolean (JSON
    ``true``/``false``, ``numpy.bool_``: Python would read them as 1 and 0). A numpy or torch scalar (anything
    0-dimensional with ``.item()``) is read as the Python value it holds, as :func:`json_safe` writes it. The texts
    ``"+inf"``, ``"nan"``, ``"infinity"`` and ``"-infinity"`` (any case) are read as well.

    Raises
    ------
    ValueError
        ``v`` is a boolean (the message says it is never read as 1 or 0), text other than those strings, a list, an
        object or anything else that is neither a number nor ``None``; the message shows ``v`` and what is accepted.
        The caller names its field and the fix.
    """
    value = v.item() if getattr(v, "shape", None) == () and hasattr(v, "item") else v  # numpy / torch scalar
    if value is None:
        return math.nan
    if is_json_number(value):
        return json_number_float(value)
    if isinstance(value, str) and value.strip().lower() in _NONFINITE_TEXT:
        return float(value)
    accepted = "a number of gradprobe's JSON encoding (a number, null, \"inf\" or \"-inf\")"
    if isinstance(value, bool):
        raise ValueError(f"{v!r} is a boolean (JSON true/false), not {accepted}: a boolean is never read as 1 or 0")
    raise ValueError(f"{v!r} is not {accepted}")


def is_json_number(value, *, finite: bool = False, integer: bool = False) -> bool:
    """Whether ``value`` is a usable number: the one rule of gradprobe and calib for a number read from JSON or TOML.

    The rule: a real number that is not a boolean, i.e. an int or a float (what ``json.loads`` and ``tomllib``
    give for a number) or a numpy integer or floating scalar (:class:`numbers.Real`, where numpy registers them).
    Never a boolean (JSON ``true``/``false``, ``numpy.bool_``: Python would read them as 1 and 0), ``None`` (JSON
    ``null``), text (``"1.5"``: a JSON string is text, whatever it spells), a list or an object.

    Options (what a field needs beyond the rule; each caller names its own):

    - ``finite=False``: NaN and +-inf are numbers, for fields whose caller gives them a meaning or its own refusal
      (a ``metrics.jsonl`` eval's NaN is skipped as missing, a plan's ``lr = inf`` is refused as "must be a finite
      number"). ``finite=True``: they are not; nor is an integer too large for a float (beyond about 1.8e308:
      it would read as infinite);
    - ``integer=False``: any real number. ``integer=True``: an int or numpy integer only (``3.0`` is not one: a
      calibration file's ``seed`` column, a plan's integer keys).

    Used by the readers of saved curves (``gradprobe.forecast.curve_file``, which re-exports it), of
    ``metrics.jsonl`` and TRL logs (``gradprobe.forecast.curve_sources``), of a probe's held-out accuracy
    (``gradprobe.forecast.start_check``), of plans (``gradprobe.training.coerce``), of calibration files
    (``calib.file_check``) and of a probe result's budgets and forecasts (``calib.probe_input``); a number read
    as a float with :func:`json_number_float` (or :func:`json_float`, which also reads ``null`` and ``"inf"``), shown
    in a message with :func:`json_number_text`.
    """
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real):
        return False
    return not finite or (not beyond_float(value) and math.isfinite(value))


def beyond_float(value) -> bool:
    """Whether ``value`` is an integer too large for a float: a Python or numpy integer (not a boolean) beyond about
    1.8e308, where ``float(value)`` raises OverflowError. JSON and TOML hold any integer; :func:`json_number_float`
    reads such an integer as +-inf by its sign, so a caller that refuses an infinite value asks this to say "too
    large for a float" rather than "infinite", and :func:`json_number_text` shows its digits, not ``inf``. False for
    anything else (a float, inf included, text, None)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def json_number_float(value) -> float:
    """A number (:func:`is_json_number`, NaN and +-inf included) as a Python float: ``float(value)``, except that an
    integer too large for a float (JSON and TOML hold any integer; a float ends near 1.8e308) reads as ``inf`` or
    ``-inf`` by its sign instead of raising OverflowError. The caller refuses an infinite value where its field must
    be finite, and shows the value the file holds with :func:`json_number_text`.

    Raises
    ------
    ValueError
        ``value`` is no number by :func:`is_json_number`'s rule (true/false, null, text, a list or an object).
    """
    if not is_json_number(value):
        raise ValueError(f"{value!r} is not a number")
    if beyond_float(value):
        return math.inf if value > 0 else -math.inf
    return float(value)


#: a probe reward entry's per-update costs -> what they must hold where present (null: not recorded by an older
#: probe); Python would read true as 1 token per update, false/0 would divide a budget by zero
PER_UPDATE_FIELDS = {
    "tokens_per_update": "a finite number >= 1 of generated tokens per update (the probe writes a whole number, "
                         "e.g. 4477)",
    "seconds_per_update": "a finite number > 0 of seconds per update"}


def per_update_problem(key: str, value) -> str | None:
    """What is wrong with ``value`` of the per-update cost ``key`` of a probe entry (:data:`PER_UPDATE_FIELDS`), as
    a predicate, e.g. ``"is true (a boolean is never read as 1 or 0): it must be a finite number >= 1 ..."``; None
    when it is a finite number > 0 (tokens: >= 1, an update generates at least one; :func:`is_json_number`), or
    null (not recorded: the readers that need it say so).
    The one rule of ``gradprobe.api.probe_result`` (loading a probe) and ``gradprobe.forecast.probe_input``
    (forecasting from it)."""
    least = 1 if key == "tokens_per_update" else 0  # an update generates at least one token
    if value is None or (is_json_number(value, finite=True) and value > 0 and value >= least):
        return None
    why = " (a boolean is never read as 1 or 0)" if isinstance(value, bool) else ""
    return f"is {json_number_text(value, json_short(value))}{why}: it must be {PER_UPDATE_FIELDS[key]}"


def json_short(value, width: int = 60) -> str:
    """``value`` as JSON writes it (``repr`` where JSON cannot), cut to ``width`` characters with ``...``: how
    error messages show a value read from a file (``gradprobe.forecast.curve_file``, ``curve_sources``)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def first_repeated_key(pairs: list) -> tuple | None:
    """The first key an object's ``pairs`` ((key, value) in file order, as ``json.loads`` gives an
    ``object_pairs_hook``) name twice, as (key, its first value, its second value); None when each key comes once.
    ``json.loads`` keeps the last value of such a key without a word (RFC 8259, section 4: the names of an object
    SHOULD be unique, and readers differ on which value they keep), so the readers of data and curve files refuse
    it (``gradprobe.tasks.base.parse_json_row``, ``gradprobe.forecast.text_files.parse_curve_json``)."""
    if len(dict(pairs)) == len(pairs):  # the common case, at C speed
        return None
    first: dict = {}
    for key, value in pairs:
        if key in first:
            return key, first[key], value
        first[key] = value
    return None


def json_number_text(value, text: str | None = None) -> str:
    """How a message shows ``value`` as read from a file: ``text`` (``repr(value)`` when None), except an integer too
    large for a float, which :func:`json_number_float` reads as +-inf: it is shown as the file holds it, shortened to
    its first and last ten digits and its length, e.g. ``1000000000...0000000000 (an integer of 401 digits, too
    large for a float)`` (``-`` before it for a negative one), not as the ``inf`` the file does not hold."""
    if not beyond_float(value):
        return repr(value) if text is None else text
    sign = "-" if value < 0 else ""
    try:
        digits = str(abs(int(value)))
    except ValueError:  # beyond Python's int-to-text limit (sys.get_int_max_str_digits): its length, estimated
        n = int(abs(int(value)).bit_length() * math.log10(2)) + 1
        return f"{'a negative' if sign else 'an'} integer of about {n} digits (too large for a float)"
    return f"{sign}{digits[:10]}...{digits[-10:]} (an integer of {len(digits)} digits, too large for a float)"


def versions() -> dict:
    """Versions of the software that produced a result, saved beside it.

    Returns
    -------
    dict
        ``gradprobe`` (``gradprobe.__version__``), ``python``, and each installed distribution of
        :data:`VERSIONED` (``torch``, ``transformers``, ``reasoning_gym``) read from its package
        metadata, so nothing is imported; a distribution that is not installed is left out.
    """
    out = {"gradprobe": __version__, "python": platform.python_version()}
    for dist, key in VERSIONED.items():
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out
