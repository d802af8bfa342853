"""The pattern checks of the rule sandbox (pure): regular expressions and LIKE patterns that run in bounded time
pass; the exponential and high-power ones, backreferences and lookarounds are refused with a reason."""

from __future__ import annotations

import pytest

from spark_pipeline.rules.patterns import MAX_PATTERN_CHARS, check_like, check_regex

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("pattern", [
    r"^https?://([^/]+)(/.*)?$", r"\d{4}-\d{2}-\d{2}", r"(?i)bot|crawler|spider", r"[a-z]+", r"(abc)?def",
    r"(?:ab|cd)?x", r"[()|*+]+", r"\Q(a+)+\E", r"(?<year>\d{4})", r"a{2,5}b", r"\p{L}+", r",", r"", r"[^\]]+",
    r"(?>a+)b",
])
def test_bounded_patterns_pass(pattern: str) -> None:
    assert check_regex(pattern) is None


@pytest.mark.parametrize(("pattern", "words"), [
    (r"(a+)+$", "exponential"), (r"(a|aa)*b", "alternation"), (r"(\d{2})+", "repetition"), (r"((ab)*c)+", "repetition"),
    (r".*.*.*x", "power"), (r"a+b+c+d", "power"), (r"(a)\1", "backreference"), (r"(?<n>a)\k<n>", "backreference"),
    (r"(?=a)b", "lookahead"), (r"(?<!a)b", "lookahead"), (r"a{1,100000}", "over"), (r"(a", "unterminated"),
    (r"a)", "unbalanced"), (r"[a-z", "unterminated"), ("a" * (MAX_PATTERN_CHARS + 1), "over"),
])
def test_unbounded_patterns_are_refused(pattern: str, words: str) -> None:
    reason = check_regex(pattern)
    assert reason is not None and words in reason


def test_like_patterns() -> None:
    assert check_like("%/product/%") is None
    assert check_like("a%b%c") is None
    assert check_like("100\\%%") is None  # an escaped % is a character
    assert check_like("%%%%a") is None  # a run of % is one wildcard
    reason = check_like("%a%b%c%d")
    assert reason is not None and "wildcards" in reason
