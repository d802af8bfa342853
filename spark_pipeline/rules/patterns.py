"""Decides whether a regular expression or a LIKE pattern in a rule runs in bounded time (pure, no Spark).

Spark evaluates `RLIKE`, `regexp_*`, `split` and `str_to_map` with `java.util.regex`, and LIKE through it too: a
backtracking engine, with no timeout, that a task cannot be interrupted out of. A pattern such as `(a+)+$` takes
time exponential in the input's length; `.*.*.*x` a power of it. So a rule's pattern must be a constant
(`check_regex`, `check_like` are called on its value) of at most MAX_PATTERN_CHARS and:

- no repeated group that itself holds a repetition or an alternation (`(a+)+`, `(a|ab)*`, `(\\d{2})+`): the
  exponential cases;
- at most MAX_UNBOUNDED unbounded repetitions (`*`, `+`, `{n,}`) in the whole pattern, and `{n,m}` with
  m <= MAX_REPEAT: the cost is then at most a small power of the input's length;
- no backreference (`\\1`, `\\k<name>`) and no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`), whose cost this check
  cannot bound.

A LIKE pattern (`%` any run, `_` one character) is bounded by at most MAX_LIKE_WILDCARDS `%`.
Each function returns None when the pattern is accepted, else the reason for people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PATTERN_CHARS = 512
MAX_UNBOUNDED = 2
MAX_REPEAT = 1000
MAX_LIKE_WILDCARDS = 3
_BRACES = re.compile(r"\{(\d+)(,(\d*))?\}")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


class _Refused(Exception):
    pass


@dataclass
class _Group:
    """What a group (or the whole pattern) holds so far."""

    repeats: bool = False  # a repetition (*, +, {n,m} with m > 1) somewhere inside
    alternation: bool = False


def _quantifier(pattern: str, i: int) -> tuple[int, bool, bool] | None:
    """At `pattern[i]`: (length, repeats, unbounded) of a quantifier with its lazy/possessive suffix, or None."""
    c = pattern[i]
    if c in "*+?":
        length, repeats, unbounded = 1, c != "?", c != "?"
    elif c == "{":
        m = _BRACES.match(pattern, i)
        if m is None:
            return None
        low = int(m.group(1))
        high = low if m.group(2) is None else (None if m.group(3) == "" else int(m.group(3)))
        if max(low, high or 0) > MAX_REPEAT:
            raise _Refused(f"a repetition count over {MAX_REPEAT}")
        length, repeats, unbounded = m.end() - i, high is None or high > 1, high is None
    else:
        return None
    if i + length < len(pattern) and pattern[i + length] in "?+":
        length += 1
    return length, repeats, unbounded


def _escape(pattern: str, i: int) -> int:
    """The index after the escape sequence starting at `pattern[i] == '\\'`."""
    if i + 1 >= len(pattern):
        raise _Refused("a trailing backslash")
    c = pattern[i + 1]
    if (c.isdigit() and c != "0") or c == "k":
        raise _Refused("a backreference")
    if c == "Q":
        end = pattern.find("\\E", i + 2)
        return len(pattern) if end < 0 else end + 2
    if c in "pPxN" and i + 2 < len(pattern) and pattern[i + 2] == "{":
        end = pattern.find("}", i + 2)
        if end < 0:
            raise _Refused("an unterminated escape")
        return end + 1
    return i + 2


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at `pattern[i] == '['` (nested classes included)."""
    depth, j = 0, i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j = _escape(pattern, j)
            continue
        if c == "[":
            depth += 1
            if j + 1 < len(pattern) and pattern[j + 1] == "^":
                j += 1
            if j + 1 < len(pattern) and pattern[j + 1] == "]":
                j += 1  # a leading ] is a literal
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise _Refused("an unterminated character class")


def _scan(pattern: str) -> None:
    stack: list[_Group] = [_Group()]
    unbounded = 0
    i, n = 0, len(pattern)
    last: _Group | None = None  # the group that just closed (a quantifier may follow it)
    while i < n:
        c = pattern[i]
        closed: _Group | None = None
        if c == "\\":
            i = _escape(pattern, i)
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            if pattern.startswith(_LOOKAROUND, i):
                raise _Refused("a lookahead or lookbehind")
            if pattern.startswith("(?", i) and not pattern.startswith(("(?:", "(?<", "(?>"), i):
                close = pattern.find(")", i)  # inline flags: (?i) or (?i:...)
                colon = pattern.find(":", i)
                if close < 0:
                    raise _Refused("an unterminated group")
                if colon < 0 or colon > close:
                    i = close + 1
                    last = None
                    continue
            stack.append(_Group())
            i += 1
            last = None
            continue
        elif c == ")":
            if len(stack) == 1:
                raise _Refused("an unbalanced ')'")
            closed = stack.pop()
            stack[-1].repeats |= closed.repeats
            stack[-1].alternation |= closed.alternation
            i += 1
        elif c == "|":
            stack[-1].alternation = True
            i += 1
        else:
            q = _quantifier(pattern, i)
            if q is not None:
                length, repeats, is_unbounded = q
                if repeats and last is not None and (last.repeats or last.alternation):
                    raise _Refused("a repeated group that holds a repetition or an alternation, e.g. (a+)+ or "
                                   "(a|b)*: its matching time can be exponential")
                unbounded += is_unbounded
                stack[-1].repeats |= repeats
                i += length
                last = None
                continue
            i += 1
        last = closed
    if len(stack) != 1:
        raise _Refused("an unterminated group")
    if unbounded > MAX_UNBOUNDED:
        raise _Refused(f"{unbounded} unbounded repetitions (*, +, {{n,}}), over {MAX_UNBOUNDED}: the matching time "
                       "grows with a power of the input's length")


def check_regex(pattern: str) -> str | None:
    """None if the Java regular expression `pattern` is accepted, else why it is refused."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is over {MAX_PATTERN_CHARS} characters"
    try:
        _scan(pattern)
    except _Refused as exc:
        return f"pattern {pattern!r}: {exc}"
    return None


def check_like(pattern: str, escape: str = "\\") -> str | None:
    """None if the LIKE pattern is accepted, else why it is refused."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is over {MAX_PATTERN_CHARS} characters"
    wildcards, i = 0, 0
    while i < len(pattern):
        if pattern[i] == escape:
            i += 2
            continue
        if pattern[i] == "%" and (i == 0 or pattern[i - 1] != "%"):
            wildcards += 1
        i += 1
    if wildcards > MAX_LIKE_WILDCARDS:
        return (f"LIKE pattern {pattern!r} has {wildcards} '%' wildcards, over {MAX_LIKE_WILDCARDS}: its matching "
                "time grows with a power of the input's length")
    return None
