"""Unit tests of the shared bounded environment-number readers."""

from __future__ import annotations

import pytest

from common.env import env_float, env_int

pytestmark = pytest.mark.unit


class Bad(ValueError):
    pass


def test_unset_or_empty_gives_the_default() -> None:
    assert env_int({}, "N", 7, 0, 10, error=Bad) == 7
    assert env_int({"N": ""}, "N", 7, 0, 10, error=Bad) == 7
    assert env_float({"X": ""}, "X", 0.5, 0.0, 1.0, error=Bad) == 0.5


def test_values_within_bounds_inclusive() -> None:
    assert env_int({"N": "10"}, "N", 7, 0, 10, error=Bad) == 10
    assert env_float({"X": "0"}, "X", 0.5, 0.0, 1.0, error=Bad) == 0.0


@pytest.mark.parametrize(("raw", "message"), [
    ("abc", "N='abc' is not an integer"),
    ("1.5", "N='1.5' is not an integer"),
    ("11", "N=11 is outside [0, 10]"),
    ("-1", "N=-1 is outside [0, 10]"),
])
def test_bad_integers_raise_the_callers_error(raw: str, message: str) -> None:
    with pytest.raises(Bad, match=message.replace("[", r"\[").replace("]", r"\]")):
        env_int({"N": raw}, "N", 7, 0, 10, error=Bad)


@pytest.mark.parametrize(("raw", "message"), [
    ("x", "X='x' is not a number"),
    ("nan", "X=nan is outside"),
    ("inf", "X=inf is outside"),
    ("1.01", "X=1.01 is outside"),
])
def test_bad_floats_raise_the_callers_error(raw: str, message: str) -> None:
    with pytest.raises(Bad, match=message):
        env_float({"X": raw}, "X", 0.5, 0.0, 1.0, error=Bad)
