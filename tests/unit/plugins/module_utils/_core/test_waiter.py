# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wait loop (module_utils/_core/waiter.py), on a fake clock: nothing here sleeps."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import Backoff, Waiter, WaitTimeout


class FakeClock:
    """A clock that only moves when the waiter sleeps; it records every sleep."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        assert seconds > 0, "the waiter never sleeps for nothing"
        self.sleeps.append(seconds)
        self.now += seconds


def waiter(clock):
    return Waiter(clock=clock, sleep=clock.sleep)


def values(*answers):
    """A poll that returns ``answers`` one after the other and counts its calls."""
    seen = list(answers)

    def poll():
        poll.calls += 1
        return seen.pop(0)

    poll.calls = 0
    return poll


def test_a_value_already_done_returns_at_once():
    clock = FakeClock()
    poll = values("DONE")
    assert waiter(clock).until(poll, lambda v: v == "DONE", 10, Backoff()) == "DONE"
    assert poll.calls == 1 and clock.sleeps == []


def test_first_value_is_not_polled_again_and_pauses_grow_to_the_maximum():
    clock = FakeClock()
    poll = values("RUNNING", "RUNNING", "RUNNING", "RUNNING", "DONE")
    result = waiter(clock).until(poll, lambda v: v == "DONE", 600, Backoff(initial=1.0, maximum=3.0, factor=2.0),
                                 first="PENDING")
    assert result == "DONE" and poll.calls == 5
    assert clock.sleeps == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_the_deadline_caps_the_last_pause_and_the_timeout_names_what_and_keeps_the_last_value():
    clock = FakeClock()
    with pytest.raises(WaitTimeout) as caught:
        waiter(clock).until(lambda: {"status": "RUNNING"}, lambda v: v["status"] == "DONE", 10, Backoff(4.0, 4.0),
                            what=lambda v: "cluster c1 is still %s" % v["status"])
    assert clock.sleeps == [4.0, 4.0, 2.0]  # never past the deadline
    assert str(caught.value) == "cluster c1 is still RUNNING after 10s"
    assert caught.value.last == {"status": "RUNNING"} and caught.value.seconds == 10
    assert not isinstance(caught.value, ValueError)  # a timeout is not an input error


def test_pause_first_waits_before_the_first_poll_with_the_pause_given():
    clock = FakeClock()
    poll = values("InProgress", "Succeeded")
    hints = iter([7.0, 2.0])
    result = waiter(clock).until(poll, lambda v: v == "Succeeded", 60, lambda value, attempt: next(hints),
                                 pause_first=True)
    assert result == "Succeeded" and clock.sleeps == [7.0, 2.0]


def test_attempts_cap_the_polls_without_a_deadline():
    clock = FakeClock()
    poll = values("busy", "busy", "busy", "busy")
    with pytest.raises(WaitTimeout) as caught:
        waiter(clock).until(poll, lambda v: v == "ok", float("inf"), lambda value, attempt: 0.5, attempts=3,
                            what="request")
    assert poll.calls == 4 and clock.sleeps == [0.5, 0.5, 0.5] and caught.value.last == "busy"


def test_a_server_that_blocks_needs_no_pause():
    clock = FakeClock()
    poll = values("RUNNING", "DONE")
    assert waiter(clock).until(poll, lambda v: v == "DONE", 60, lambda value, attempt: 0.0, first="RUNNING") == "DONE"
    assert clock.sleeps == []


def test_errors_of_poll_and_done_propagate():
    clock = FakeClock()

    def poll():
        raise KeyError("gone")

    with pytest.raises(KeyError):
        waiter(clock).until(poll, lambda v: False, 10, Backoff(), first="x")

    def failed(value):
        raise RuntimeError(value)

    with pytest.raises(RuntimeError):
        waiter(clock).until(lambda: "Failed", failed, 10, Backoff())
