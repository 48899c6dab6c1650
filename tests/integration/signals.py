"""The signal state a test means to test, whatever shell started pytest.

An interactive shell starts the harness with SIGINT at its default, so Ctrl-C
interrupts it. A shell that runs jobs in the background (cron, nohup,
`make test &`) starts them with SIGINT ignored, and the harness leaves it so,
as every well-behaved Unix program does: there it is stopped with SIGTERM.
"""
import signal


def sigint_default() -> None:
    """preexec_fn: the child starts with SIGINT at its default, as from an interactive shell."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_ignored() -> None:
    """preexec_fn: the child starts with SIGINT ignored, as from cron or a background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
