"""The ``upsertsink`` command's entry point.

``upsertsink lint ...`` is first offered to the run records (:mod:`upsertsink.lint.run.runrecord`): when the same
command ran before from the same folder and nothing it read has changed, its output is written again and the
command exits, before click or the linter load. Otherwise a plain lint command line is read without click
(:func:`upsertsink.lint.command.main.quick_main`; importing click costs more than half of a one-file run's start-up
on a slow machine). Everything else (``--help``, usage errors, the other commands) is the click command line
(:mod:`upsertsink.cli`).

A lint run that has finished (its output written, its workers joined, its cache and record saved) ends the
process at once, without the interpreter's teardown of every module and object it loaded: that teardown
cost about 20 ms of a large run and does nothing a lint run needs (mypy ends the same way). Every other
command that never loaded pyspark (the embedded engine's write, diff, status...) ends the same way once it
has returned: its Delta commits are done by then, and the teardown of deltalake's and Arrow's native
threads could abort the process after its output was written ("terminate called without an active
exception", exit -6: 12 of 120 `upsertsink diff` runs on a loaded 2-core machine, one CI failure). A
command that loaded pyspark exits normally, so pyspark's own exit hooks stop its JVM.

SIGTERM is handled as Ctrl-C from the first instruction on, and an interrupt that reaches this far (one
during the start-up's imports, before a command's own handling) is one line, ``upsertsink: interrupted``, and
exit status 130, never a traceback.
"""

import os
import signal
import sys


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        _main()
    except KeyboardInterrupt:
        try:
            sys.stderr.write("upsertsink: interrupted\n")
        except (OSError, ValueError):
            pass
        _hard_exit(130)
        raise SystemExit(130) from None


def _main() -> None:
    # click's shell completion (the variable its completion scripts set) is click's own business
    lint = sys.argv[1:2] == ["lint"] and "_UPSERTSINK_COMPLETE" not in os.environ
    if lint:
        from upsertsink.lint.run.runrecord import replay

        code = replay(sys.argv[2:])
        if code is not None:
            raise SystemExit(code)
        from upsertsink.lint.command.main import quick_main

        code = quick_main(sys.argv[2:])
        if code is not None:
            _hard_exit(code)
            raise SystemExit(code)
    from upsertsink.cli import main as cli

    try:
        cli()
    except SystemExit as done:
        if (lint or "pyspark" not in sys.modules) and (done.code is None or isinstance(done.code, int)):
            _hard_exit(done.code or 0)
        raise


def _hard_exit(code: int) -> None:
    """Flush the output streams and end the process without the interpreter's teardown; when a flush fails
    (a closed pipe), return and let the normal exit report it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)
