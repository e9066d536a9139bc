# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one wait loop of the collection: poll until a predicate holds, within a deadline.

Every engine waits through ``Waiter.until`` (GKE and Compute Engine operations, ARM long-running
operations, a cluster or pool that settles, a resource that appears or goes away, a request the
cluster refuses while it is busy, and the HTTP retries). What differs between them is only what is
polled, what "done" means and how long to pause, so those are the arguments:

- ``poll()`` reads the current value;
- ``done(value)`` says whether the wait is over;
- ``pause(value, attempt)`` gives the seconds before the next poll (``Backoff`` grows them; a
  server's ``Retry-After`` can set them);
- the deadline is ``clock() + timeout``; a pause never sleeps past it. When the deadline (or
  ``attempts``) is reached first, ``until`` raises ``WaitTimeout`` (a timeout is not an input error:
  nothing was wrong with the request, the cloud was not done in time).

``clock`` and ``sleep`` are injected, so tests run a fake clock and never sleep.
"""

from __future__ import annotations

import time

NOT_READ = object()


class WaitTimeout(Exception):
    """The awaited condition did not hold within the time (or attempts) allowed; ``last`` is the last value."""

    def __init__(self, message, last=None, seconds=None):
        super().__init__(message)
        self.last = last
        self.seconds = seconds


class Backoff:
    """Pauses that grow by ``factor`` from ``initial`` up to ``maximum`` seconds."""

    def __init__(self, initial=1.0, maximum=10.0, factor=1.5):
        self.initial = initial
        self.maximum = maximum
        self.factor = factor

    def __call__(self, value, attempt):
        del value
        return min(self.maximum, self.initial * (self.factor ** attempt))


class Waiter:
    """``until``: the one loop that polls, pauses and gives up at a deadline."""

    def __init__(self, clock=time.monotonic, sleep=time.sleep):
        self.clock = clock
        self.sleep = sleep

    def until(self, poll, done, timeout, pause, what="the operation", first=NOT_READ, pause_first=False,
              attempts=None):
        """Poll until ``done(value)``; the value.

        ``first`` is a value already in hand (not polled again before the first pause);
        ``pause_first`` pauses before the first poll (a server that asks to be polled later);
        ``attempts`` caps the number of pauses (None: only the deadline counts). On timeout the
        error names ``what`` (a string, or a callable of the last value) and how long it waited.
        """
        deadline = self.clock() + timeout
        value = first
        if value is NOT_READ and not pause_first:
            value = poll()
        attempt = 0
        while value is NOT_READ or not done(value):
            now = self.clock()
            if now >= deadline or (attempts is not None and attempt >= attempts):
                text = what(None if value is NOT_READ else value) if callable(what) else what
                raise WaitTimeout("%s after %ss" % (text, timeout), last=None if value is NOT_READ else value,
                                  seconds=timeout)
            seconds = min(pause(None if value is NOT_READ else value, attempt), deadline - now)
            if seconds > 0:  # a server that blocks until done (compute ``wait``) needs no pause
                self.sleep(seconds)
            attempt += 1
            value = poll()
        return value
