"""Waiting on observable state: the one way a test synchronises with what it
does not control (a daemon, a container, a process, a server thread).

A test never sleeps to let something happen. It names the condition it needs
(a log line, a metric, a session state, a process state in /proc, a socket
event) and waits for it with a bound, so a slow machine only makes it slower
and a broken one fails with the name of what never came.
"""
import time


def wait_for(cond, timeout, interval=0.02, what="condition", ignore=()):
    """Poll cond() until it returns a truthy value, and return that value.

    timeout   seconds before giving up with an AssertionError naming `what`
    interval  seconds between polls, or a function of no argument returning
              them (for a poll that tightens as a deadline nears)
    ignore    exception types that count as "not yet" (e.g. OSError while a
              server is still starting); any other exception propagates
    """
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = cond()
        except ignore as e:  # pylint: disable=catching-non-exception
            value, last_error = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s%s" % (
                timeout, what, " (last error: %r)" % last_error if last_error else ""))
        time.sleep(interval() if callable(interval) else interval)
