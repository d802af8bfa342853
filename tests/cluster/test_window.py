"""The broker-loss figures' arithmetic (tests/cluster/window.py): the window from the first failed answer to the next
200, and the stall, the longest time with no 200 coming."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.window import stall, window

pytestmark = pytest.mark.unit


def quick(*answers: tuple[float, Any]) -> list[tuple[float, Any, float]]:
    """Answers that came 0.1 s after they were sent."""
    return [(sent, outcome, sent + 0.1) for sent, outcome in answers]


def test_the_window_runs_from_the_first_failure_after_the_fault_to_the_next_200() -> None:
    answers = quick((1.0, 200), (2.0, 503), (3.0, 200), (10.0, 200), (11.0, 503), (12.5, "RemoteDisconnected"),
                    (14.0, "timeout"), (18.2, 200), (19.0, 503))
    assert window(answers, since=9.0) == (7.2, True)
    assert window(answers, since=1.5) == (1.0, True)  # the first failure after the fault counts


def test_the_window_is_timed_by_when_the_answers_came() -> None:
    # a request sent at 10 failed only when its delivery timeout ran out, at 15; the next 200 came at 16.5
    answers = [(9.0, 200, 9.1), (10.0, 503, 15.0), (15.0, 503, 15.2), (16.0, 200, 16.5)]
    assert window(answers, since=9.5) == (1.5, True)


def test_no_failure_is_a_zero_window_and_no_200_yet_is_none() -> None:
    assert window(quick((1.0, 200), (2.0, 200)), since=0.5) == (0.0, True)
    assert window(quick((1.0, 503), (2.0, "timeout")), since=0.5) == (None, False)
    assert window([], since=0.5) == (0.0, False)


def test_a_request_held_through_the_election_is_a_stall_though_no_answer_failed() -> None:
    # the fault at 10; the request sent at 10.1 waited 6 s for new leaders, then succeeded
    answers = [(9.8, 200, 9.9), (10.1, 200, 16.1), (16.1, 200, 16.2)]
    assert window(answers, since=10.0) == (0.0, True)
    assert stall(answers, since=10.0) == 6.1


def test_the_stall_is_the_longest_gap_between_200s_after_the_fault() -> None:
    answers = quick((10.0, 200), (11.0, 503), (13.0, 503), (14.0, 200), (14.5, 200), (20.0, 200))
    assert stall(answers, since=9.5) == 5.5  # 14.6 -> 20.1
    assert stall(quick((10.0, 503), (11.0, 503)), since=9.5) is None
    assert stall(quick((5.0, 200)), since=9.5) is None  # came before the fault
