"""The broker-loss window's arithmetic (tests/cluster/window.py): from the first failed answer to the next 200."""

from __future__ import annotations

import pytest

from tests.cluster.window import window

pytestmark = pytest.mark.unit


def test_the_window_runs_from_the_first_failure_after_the_fault_to_the_next_200() -> None:
    answers = [(1.0, 200), (2.0, 503), (3.0, 200), (10.0, 200), (11.0, 503), (12.5, "RemoteDisconnected"),
               (14.0, "timeout"), (18.2, 200), (19.0, 503)]
    assert window(answers, since=9.0) == (7.2, True)
    assert window(answers, since=1.5) == (1.0, True)  # the first failure after the fault counts


def test_no_failure_is_a_zero_window_and_no_200_yet_is_none() -> None:
    assert window([(1.0, 200), (2.0, 200)], since=0.5) == (0.0, True)
    assert window([(1.0, 503), (2.0, "timeout")], since=0.5) == (None, False)
    assert window([], since=0.5) == (0.0, False)
