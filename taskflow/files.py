"""A user's files, kept safe: inputs read without blocking, outputs checked before any work.

The rules every command and every Python entry point follows:

* an input is a regular file; a FIFO, a device or a socket is refused at once, without opening it
  for a read that could wait forever (:func:`open_regular`);
* an output that exists must be a regular file (or a link to one): ``/dev/null``, ``/dev/full``, a
  FIFO or anything under ``/proc`` is refused, never replaced by a rename (:func:`check_output`);
* an output never lands on an input or inside an input folder (a dataset, a graph's folder);
* every output of a command is checked before its work starts, so no output is written and then
  the run refused for another (:func:`check_outputs`); what is written is written whole or not at
  all (:func:`taskflow.formats.atomic_write`, which checks the same rule again as it writes).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from .errors import UsageError

__all__ = ["open_regular", "open_append", "check_output", "check_outputs", "check_folder", "not_regular", "inside"]


def not_regular(path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (following links): ``"a
    folder"``, ``"a device"``, ``"a pipe (FIFO)"``, ``"a socket"``; None when it is a regular file
    or does not exist.

    Parameters
    ----------
    path : str or os.PathLike
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP):
            return None  # nothing there to replace (a name too long is said by the folder's check)
        return "a file that cannot be examined"
    return _kind(mode)


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path, what: str = "file", error=UsageError):
    """Open ``path`` for reading in binary, refusing anything but a regular file before a read could
    block (a FIFO opened for reading waits for a writer; a device may never end).

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        Named in the error (``"checkpoint"``, ``"image"``, ...).
    error : type
        The :class:`~taskflow.errors.TaskflowError` raised.

    Returns
    -------
    io.BufferedReader

    Raises
    ------
    TaskflowError
        Missing, unreadable, or not a regular file (named).
    """
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{what} {p!r}: no such file") from None
    except IsADirectoryError:
        raise error(f"{what} {p!r}: is a folder, expected a file") from None
    except OSError as e:
        raise error(f"{what} {p!r} cannot be read: {e.strerror or e}") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise error(f"{what} {p!r}: is {kind}, expected a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_append(path, error=UsageError):
    """Open ``path`` to append text (made if missing), refusing anything but a regular file before a
    write could block or reach a device (a results file a run resumes).

    Parameters
    ----------
    path : str or os.PathLike
    error : type
        The :class:`~taskflow.errors.TaskflowError` raised.

    Raises
    ------
    TaskflowError
    """
    p = os.fspath(path)
    kind = not_regular(p)
    if kind is not None:
        raise error(f"{p!r}: is {kind}; expected a regular file to append to")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        raise error(f"{p!r} cannot be written: {e.strerror or e}") from None
    kind = _kind(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise error(f"{p!r}: is {kind}; expected a regular file to append to")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", newline="", encoding="utf-8")


def inside(path, folder) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both resolved).

    Parameters
    ----------
    path, folder : str or os.PathLike
    """
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _name_max(folder: str) -> int:
    """The longest file name in bytes that ``folder``'s filesystem takes (255 where it says not)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _can_create(folder: str) -> str | None:
    """Why a file cannot be made in ``folder`` (None when it can): tried for real, since
    ``os.access`` says yes to root in ``/proc`` and on a read-only mount's folders alike. The trial
    file is removed at once."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".taskflow-check-", dir=folder)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(tmp)
    return None


def check_output(option: str, path, inputs=()) -> str:
    """Refuse an output path that cannot be written safely, before any work (see the module's
    rules). ``option`` names it in the error (``--output``, ``plot``).

    Parameters
    ----------
    option : str
    path : str or os.PathLike
    inputs : iterable of path
        The command's inputs (files or folders): the output may not be one nor lie inside one.

    Returns
    -------
    str
        The resolved path.

    Raises
    ------
    UsageError
    """
    path = os.fspath(path)
    if not path.strip():
        raise UsageError(f"{option}: empty output path")
    kind = not_regular(path)
    if kind is not None:
        raise UsageError(f"{option} {path!r}: is {kind}; an output must be a regular file, which is replaced")
    real = os.path.realpath(path)
    for given in inputs:
        if not given:
            continue
        given = os.fspath(given)
        base = given.split("#")[0] if "#" in given and not os.path.exists(given) else given  # set.zip#K
        if os.path.realpath(base) == real:
            raise UsageError(f"{option} {path!r}: is an input of this command; write to another file")
        if not os.path.isfile(base) and inside(real, base):  # a folder, or one the command will make
            raise UsageError(f"{option} {path!r}: lies inside the input folder {base!r}; write outside it")
    parent = os.path.dirname(os.path.abspath(path))  # a link there is replaced, not followed
    shown = os.path.dirname(path) or "."
    if not os.path.exists(parent):
        raise UsageError(f"{option} {path!r}: folder {shown!r} does not exist")
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path!r}: {shown!r} is a file, not a folder")
    why = "no write permission" if not os.access(parent, os.W_OK | os.X_OK) else _can_create(parent)
    if why is not None:
        raise UsageError(f"{option} {path!r}: cannot write in folder {shown!r} ({why})")
    longest = _name_max(parent)
    if len(os.fsencode(os.path.basename(path))) > longest:
        raise UsageError(f"{option} {path!r}: the file name is longer than this filesystem takes ({longest} bytes)")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path!r}: the file is not writable")
    return real


def check_folder(option: str, path, inputs=()) -> None:
    """Refuse an output folder (made if missing) that cannot be written, is a file, or lies inside
    an input folder.

    Parameters
    ----------
    option : str
    path : str or os.PathLike
    inputs : iterable of path

    Raises
    ------
    UsageError
    """
    path = os.fspath(path)
    if not path.strip():
        raise UsageError(f"{option}: empty folder path")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path!r}: is a file, expected a folder")
    target = os.path.abspath(path)
    while not os.path.exists(target):  # missing folders are made: the nearest existing one must allow it
        target = os.path.dirname(target)
    if not os.path.isdir(target):
        raise UsageError(f"{option} {path!r}: {target!r} is a file, not a folder")
    if not os.access(target, os.W_OK | os.X_OK) or _can_create(target) is not None:
        raise UsageError(f"{option} {path!r}: cannot write in {target!r}")
    for given in inputs:
        if given and os.path.isdir(os.fspath(given)) and inside(path, given):
            raise UsageError(f"{option} {path!r}: lies inside the input folder {os.fspath(given)!r}; write outside it")


def check_outputs(outputs, inputs=(), folders=(), plot_options=("--plot",)) -> None:
    """Check every output of a command at once, before any work: each as :func:`check_output`,
    no two naming the same file, plots in an image format; ``folders`` as :func:`check_folder`.

    Parameters
    ----------
    outputs : iterable of (option, path or None)
    inputs : iterable of path
    folders : iterable of (option, path or None)
    plot_options : tuple of str
        The options whose file is an image (its suffix must name a format).

    Raises
    ------
    UsageError
    """
    from .checks import plot_format
    from .errors import TaskflowError

    inputs = [i for i in inputs if i]
    seen: dict = {}
    for opt, path in outputs:
        if path is None:
            continue
        real = check_output(opt, path, inputs)
        if real in seen:
            raise UsageError(f"{opt} and {seen[real]} name the same file {os.fspath(path)!r}")
        if opt in plot_options:
            try:
                plot_format(path)
            except TaskflowError as e:
                raise UsageError(f"{opt} {os.fspath(path)!r}: {str(e).split(': ', 1)[-1]}") from None
        seen[real] = opt
    for opt, path in folders:
        if path is not None:
            check_folder(opt, path, inputs)
