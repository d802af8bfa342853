"""Command line: `python -m hwconformance [--target NAME]... [--vector PREFIX] [--compliance]` (see README)."""

from __future__ import annotations

import argparse
import sys

from .gatewaycase import run_gateway
from .results import FAIL, Result, compliance_table, summary_line, write_compliance
from .runner import load_sdks, run_sdk
from .vectors import load


def main(argv: list[str] | None = None) -> int:
    """Run the chosen targets; print one closing line per target; exit 1 if a vector failed."""
    parser = argparse.ArgumentParser(prog="hwconformance", description=__doc__)
    parser.add_argument("--target", action="append", default=[],
                        help="an SDK name from sdks.json, or 'gateway' (default: every SDK and the gateway)")
    parser.add_argument("--vector", default="", help="run only the vectors whose id starts with this")
    parser.add_argument("--compliance", action="store_true", help="write sdk-specs/compliance.md")
    parser.add_argument("--stack-env", default="", help="a stack.env of a running stack for the gateway vectors")
    args = parser.parse_args(argv)
    vectors = [v for v in load() if v["id"].startswith(args.vector)]
    sdks = load_sdks()
    targets = args.target or [s.name for s in sdks] + ["gateway"]
    results: list[Result] = []
    for target in targets:
        if target == "gateway":
            results += run_gateway(vectors, args.stack_env or None)
            continue
        sdk = next((s for s in sdks if s.name == target), None)
        if sdk is None:
            parser.error(f"unknown target {target!r}; sdks.json lists {[s.name for s in sdks]}")
        results += run_sdk(sdk, vectors)
    if args.compliance:
        write_compliance(compliance_table(load(), results, targets))
    print()
    for target in targets:
        print(summary_line(target, results))
    return 1 if any(r.status == FAIL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
