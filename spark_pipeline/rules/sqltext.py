"""A rule's SQL as text, before Spark sees it: lines, strings and comments masked, one statement, and its bounds.

`check_text` is the sandbox's first step (docs/rules.md, "What a rule may call"): the SQL is refused before Spark
parses it when it is over MAX_SQL_BYTES (`too_large`), holds `${` anywhere (Spark's parser would substitute
session, JVM and environment variables into it: `forbidden_syntax`), nests parentheses or brackets deeper than
Bounds.max_nesting, or has more than Bounds.max_tokens tokens (`too_complex`: Spark's parser took minutes and ran
out of memory on 60 KB of nested parentheses).
"""

from __future__ import annotations

import re

from spark_pipeline.rules import model
from spark_pipeline.rules.allowlist import Bounds
from spark_pipeline.rules.model import MAX_SQL_BYTES, RuleError

_TOKEN = re.compile(r"\w+|[^\w\s]")


def line_of(sql: str, offset: int) -> int:
    """The 1-based line of character `offset` in `sql`."""
    return sql.count("\n", 0, max(0, offset)) + 1


def mask(sql: str) -> str:
    """`sql` with the contents of strings, quoted identifiers and comments blanked (same length, same lines)."""
    out = list(sql)
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        end = -1
        if c in "'\"`":
            end = i + 1
            while end < n and sql[end] != c:
                end += 2 if sql[end] == "\\" and c != "`" else 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end - 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 1
        if end >= 0:
            for j in range(i, min(end + 1, n)):
                out[j] = out[j] if sql[j] == "\n" else " "
            i = end + 1
        else:
            i += 1
    return "".join(out)


def one_statement(sql: str) -> str:
    """`sql` without a trailing `;`; RuleError(not_a_select) when it holds a second statement (or none)."""
    masked = mask(sql)
    if not masked.strip():
        raise RuleError(model.NOT_A_SELECT, 1, "the rule has no SQL statement")
    for m in re.finditer(";", masked):
        if masked[m.end():].strip(" \t\r\n;"):
            raise RuleError(model.NOT_A_SELECT, line_of(sql, m.end()),
                            "one SELECT statement only: a second statement follows the ';'")
    cut = masked.find(";")
    return sql if cut < 0 else sql[:cut]


def check_text(sql: str, bounds: Bounds) -> None:
    """Refuse `sql` (RuleError) on the bounds that hold before Spark parses it (module doc)."""
    if len(sql.encode()) > MAX_SQL_BYTES:
        raise RuleError(model.TOO_LARGE, None, f"the SQL is over {MAX_SQL_BYTES} bytes")
    if (at := sql.find("${")) >= 0:
        raise RuleError(model.FORBIDDEN_SYNTAX, line_of(sql, at),
                        "'${' is not allowed anywhere in a rule (Spark substitutes variables of the session, the JVM "
                        "and the environment there)")
    masked = mask(sql)
    depth = 0
    for i, c in enumerate(masked):
        if c in "([":
            depth += 1
            if depth > bounds.max_nesting:
                raise RuleError(model.TOO_COMPLEX, line_of(sql, i),
                                f"parentheses or brackets nested over {bounds.max_nesting} deep")
        elif c in ")]":
            depth = max(0, depth - 1)
    for tokens, m in enumerate(_TOKEN.finditer(masked), start=1):
        if tokens > bounds.max_tokens:
            raise RuleError(model.TOO_COMPLEX, line_of(sql, m.start()), f"over {bounds.max_tokens} tokens")
