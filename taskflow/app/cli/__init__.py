"""The ``taskflow`` command.

Every user error (bad file, bad graph, unknown scheduler, ...) prints one line ``error: ...`` on
stderr and exits with status 2, writing no output file. A run that started and failed (a task
raised, ``--timeout`` ran out, the cluster went away: :class:`~taskflow.errors.RunFailed`) exits
with 1, as ``taskflow validate`` does when the schedule is readable but breaks the rules (each
problem on its own line); Ctrl-C exits with 130, SIGTERM with 143.

:mod:`.options` holds the grammar every command shares, :mod:`.parser` the parser,
:mod:`.commands` and :mod:`.running` one function per subcommand; :func:`main` maps errors to one
line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

from ... import __version__
from ...errors import TaskflowError
from ...formats import input_limit
from .commands import one_line, printable
from .options import check_outputs
from .parser import build_parser

__all__ = ["build_parser", "main", "check_outputs", "one_line", "np_quiet", "Terminated"]


def main(argv=None) -> int:
    """Run the ``taskflow`` command; bad input prints one ``error:`` line and returns 2.

    Parameters
    ----------
    argv : list of str, optional
        Default: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # -h, --version (0) or a bad argument (2, its one line already printed)
        return e.code if isinstance(e.code, int) else 2
    return _run(args, program=argv is None)


def _run(args, program: bool) -> int:
    """Run a parsed command: its status, or the one error line and its status. Stopped by a signal,
    the program itself (not a caller of :func:`main`) ends quietly after that line (_quiet_ending)."""
    import warnings

    if program:
        _quiet_resource_tracker()
    try:
        with warnings.catch_warnings(), np_quiet(), _terminate_as_interrupt(quiet=program), _printable_output():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow notes: errors say it
            with input_limit(getattr(args, "max_bytes", None)):  # --max-bytes: this command's own
                return args.func(args)
    except TaskflowError as e:
        from ...errors import RunFailed

        if getattr(args, "verbose", False) and getattr(e, "traceback_text", None):
            print(e.traceback_text.rstrip("\n"), file=sys.stderr)
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1 if isinstance(e, RunFailed) else 2
    except KeyboardInterrupt as e:
        return _interrupted(e, program)
    except RecursionError:
        print("error: the input is nested too deeply to read", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory (the input is too large for this machine)", file=sys.stderr)
        return 2
    except OSError as e:
        where = f" {e.filename!r}" if getattr(e, "filename", None) else ""
        print(f"error: cannot use{where}: {one_line(e.strerror or e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: still one line, never a traceback (but with -v)
        signal_ = _interrupt_within(e)
        if signal_ is not None:  # Ctrl-C inside compiled code (numba) comes back as a SystemError
            return _interrupted(signal_, program)
        if getattr(args, "verbose", False):
            import traceback

            traceback.print_exc()
        print(
            f"error: internal error {type(e).__name__}: {one_line(e)} (a bug in taskflow {__version__}; "
            f"please report it with the command)",
            file=sys.stderr,
        )
        return 2


def _interrupted(e: KeyboardInterrupt, program: bool) -> int:
    """Ctrl-C or SIGTERM ended the command: its one line, and 130 or 143."""
    line = "error: terminated" if isinstance(e, Terminated) else "error: interrupted"
    if program:
        _quiet_ending(line, 143 if isinstance(e, Terminated) else 130)
    else:
        print(line, file=sys.stderr)
    return 143 if isinstance(e, Terminated) else 130


def _interrupt_within(e: BaseException):
    """The KeyboardInterrupt (or Terminated) ``e`` was raised from or during, if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (the process that removes the semaphores and shared
    memory of processes that ended without removing them) with no stderr: what it would say is for
    a developer, after the program's own last line (a worker process ended by Ctrl-C or SIGTERM as
    it started leaves it a semaphore to remove, and it says so)."""
    from multiprocessing import resource_tracker

    sys.stderr.flush()
    kept = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(kept, 2)
        os.close(kept)
        os.close(devnull)


#: seconds a signalled command has to unwind (clusters closed, files whole) before the program ends
#: at once: what the user sees within a second of Ctrl-C or SIGTERM, wherever it landed
UNWIND_SECONDS = 0.6
_ENDING = threading.Lock()  # the one thread that prints the last line and ends the program


def _end_now(line: str, status: int) -> None:
    """End the program at once (a second signal, or unwinding past :data:`UNWIND_SECONDS`): its
    one line, every process it started killed, the files being written removed, and ``status``."""
    if not _ENDING.acquire(blocking=False):
        return  # the other ending is under way
    import psutil

    from ...formats._util import WRITING

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing after the line, on either stream
        shown = os.dup(2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        os.write(shown, (line + "\n").encode())
        for p in psutil.Process().children(recursive=True):
            try:
                p.kill()
            except psutil.Error:
                pass
        for tmp in list(WRITING):
            try:
                os.unlink(tmp)
            except OSError:
                pass
    finally:
        os._exit(status)


def _quiet_ending(line: str, status: int) -> None:
    """Ctrl-C or SIGTERM has ended the program: ``line`` is the last it prints, and it exits with
    ``status`` at once. Nothing else reaches stderr after it (a cluster stopped as it started
    leaves a nanny that logs a worker's restart, and asyncio tasks that report their failure as
    the interpreter exits), and the processes it started that are still starting are ended (a
    worker process whose parent stops before handing it its task prints a traceback as it fails).
    The interpreter's own shutdown (Dask's exit handlers, its threads joined) is skipped: the
    command has unwound, its files are whole, and it would take a second more."""
    import psutil

    if not _ENDING.acquire(blocking=False):
        return  # ended at once by the other ending
    sys.stderr.flush()
    shown = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    os.write(shown, (line + "\n").encode())
    os.close(shown)
    kids = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(p.cmdline()):  # it ignores SIGTERM and ends with us
                p.terminate()
                kids.append(p)
        except psutil.Error:  # gone already
            pass
    _, alive = psutil.wait_procs(kids, timeout=0.2)
    for p in alive:  # within the second the user waits: what did not end on SIGTERM is killed
        try:
            p.kill()
        except psutil.Error:
            pass
    sys.stdout.flush()
    os._exit(status)


class _Printable:
    """A text stream that writes what it is given with control characters escaped (``\\x1b``):
    an id from an input (an ANSI escape sequence, a backspace) cannot repaint the terminal.
    Newlines, tabs and carriage returns (progress bars) pass."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if not text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
            text = printable(text, keep="\n\r\t")
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _printable_output():
    """While a command runs, what it prints on stdout and stderr is :class:`_Printable`."""
    with contextlib.redirect_stdout(_Printable(sys.stdout)), contextlib.redirect_stderr(_Printable(sys.stderr)):
        yield


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: every command cleans up after it as after Ctrl-C
    (clusters closed, pool workers ended, files whole), then exits with 143."""


@contextlib.contextmanager
def _terminate_as_interrupt(quiet: bool = False):
    """While a command runs in the main thread, SIGTERM raises :class:`Terminated` and SIGINT
    :class:`KeyboardInterrupt`. Python drops an exception raised where it cannot propagate (an
    at-fork handler as a pool starts a worker, a finaliser); a signal whose exception was dropped
    is raised again when the command returns, so that it still ends as the signal asked.

    ``quiet`` (the program itself ends on the signal): logging stops as the signal comes. An
    embedded cluster's scheduler runs on in its own thread while the command unwinds, and logs the
    worker processes the signal ended as errors (a broadcast to a closed worker), before the
    program's one line."""
    pending = []
    timers = []  # the program's deadline to unwind: the block's own end (the program's last line) cancels it

    def raiser(exc):
        def handler(signum, frame):
            line, status = ("error: terminated", 143) if exc is Terminated else ("error: interrupted", 130)
            if quiet:
                logging.disable(logging.CRITICAL)
                if pending:  # a second signal: no more waiting
                    _end_now(line, status)
                timer = threading.Timer(UNWIND_SECONDS, _end_now, (line, status))
                timer.daemon = True
                timer.start()
                timers.append(timer)
            pending.append(exc)
            raise exc()

        return handler

    raise_terminated, raise_interrupt = raiser(Terminated), raiser(KeyboardInterrupt)

    hook = sys.unraisablehook

    def dropped(unraisable):  # Python's report of the dropped exception: not a traceback for the user
        if not (unraisable.exc_type and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            hook(unraisable)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, raise_terminated)
    before_int = signal.getsignal(signal.SIGINT)
    if before_int is signal.default_int_handler or getattr(before_int, "taskflow_early", False):
        # (a handler someone else installed is left alone)
        signal.signal(signal.SIGINT, raise_interrupt)
    sys.unraisablehook = dropped
    try:
        yield
    except BaseException:
        pending.clear()
        raise
    finally:
        for t in timers:
            t.cancel()
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGINT, before_int)
        sys.unraisablehook = hook
    if pending:  # the command returned although a signal came: its exception was dropped
        raise pending[0]()


def np_quiet():
    """numpy errors raised or ignored, never printed: the checks say what is wrong."""
    import numpy as np

    return np.errstate(over="ignore", invalid="ignore", divide="ignore")
