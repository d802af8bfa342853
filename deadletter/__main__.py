"""Command line: `python -m deadletter list|summary|show|replay` over the dead-letter topic (docs/operations.md)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from common.avro_frame import HEADER_BYTES, FrameError, WriterSchemas, read_body, schema_id_of
from common.registry_client import RegistryClient, RegistryClientError
from deadletter.config import ConfigError, ToolConfig
from deadletter.read import ReadError, read_one, scan
from deadletter.records import BadRecord, Letter, Selection, decoded_payload
from deadletter.replay import ReplayError, ReplayOptions, replay
from deadletter.summary import LIST_HEADER, list_row, parse_time, summarise, summary_table, table
from deadletter.text import safe, safe_json

_RUN_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def _selection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reason", help="only this rejection code (e.g. unknown_schema_version)")
    parser.add_argument("--event-type", help="only this event type")
    parser.add_argument("--version", type=int, help="only this schema version")
    parser.add_argument("--source", help="only this write-key source")
    parser.add_argument("--since", type=parse_time, help="received at or after (ISO-8601 UTC or epoch ms)")
    parser.add_argument("--until", type=parse_time, help="received before (ISO-8601 UTC or epoch ms)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m deadletter", description=__doc__)
    parser.add_argument("--env-file", type=Path, help="endpoints (default $HEADWATER_STATE_DIR/stack.env, else "
                                                      ".headwater/stack.env; the environment wins)")
    sub = parser.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list", help="one line per selected dead letter")
    _selection_args(lst)
    lst.add_argument("--limit", type=int, default=100, help="at most this many lines (default 100)")
    summ = sub.add_parser("summary", help="counts by reason, event type, version and source, with time ranges")
    _selection_args(summ)
    summ.add_argument("--json", action="store_true", help="one JSON object per group instead of a table")
    show = sub.add_parser("show", help="one dead letter, payload decoded")
    show.add_argument("position", help="PARTITION:OFFSET, as `list` prints it")
    rep = sub.add_parser("replay", help="validate the selection again and write the valid events (transactions)")
    _selection_args(rep)
    rep.add_argument("--run", required=True, help="the run's name: rerunning the same name resumes it and never "
                                                   "writes an event twice; use a new name after a new fix")
    rep.add_argument("--per-transaction", type=int, default=200, help="dead letters per transaction (200)")
    rep.add_argument("--rate", type=float, default=0.0, help="at most this many dead letters/s (0: no limit)")
    rep.add_argument("--dry-run", action="store_true", help="validate and report only; write nothing")
    return parser


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(reason=args.reason, event_type=args.event_type, version=args.version, source=args.source,
                     since_ms=args.since, until_ms=args.until)


def _selected(cfg: ToolConfig, sel: Selection) -> Iterator[Letter]:
    bad = 0
    for item in scan(cfg.bootstrap, cfg.deadletter_topic, sel.since_ms, cfg.kafka_security):
        if isinstance(item, BadRecord):
            bad += 1
        elif sel.matches(item):
            yield item
    if bad:
        _say(f"({bad} records of {cfg.deadletter_topic} are not dead letters and were skipped)", err=True)


def _show(cfg: ToolConfig, position: str) -> int:
    part, sep, off = position.partition(":")
    if not (sep and part.isdigit() and off.isdigit()):
        print(f"deadletter: position {position!r} is not PARTITION:OFFSET", file=sys.stderr)
        return 2
    try:
        letter = read_one(cfg.bootstrap, cfg.deadletter_topic, int(part), int(off), cfg.kafka_security)
    except BadRecord as exc:
        _say(f"deadletter: {position} of {cfg.deadletter_topic} is not a dead letter the gateway wrote: {exc}",
             err=True)
        return 1
    v = letter.value
    doc: dict[str, Any] = {
        "position": letter.position, "reason": v.reason, "message": v.message, "event_type": v.event_type,
        "subject": v.subject, "version": v.version, "schema_id": v.schema_id, "event_id": v.event_id,
        "batch_id": v.batch_id, "index": v.index, "received_at": v.received_at, "source": v.source,
        "key": letter.key.decode(errors="replace"),
        "headers": {k: val.decode(errors="replace") for k, val in letter.headers},
        "payload_encoding": v.payload_encoding, "payload": decoded_payload(letter, _writer_schema(cfg, letter)),
    }
    print(safe_json(json.dumps(doc, indent=2, ensure_ascii=False, default=str)))
    return 0


def _writer_schema(cfg: ToolConfig, letter: Letter) -> Any:
    """The parsed writer schema of an Avro payload from the registry, or None (then only the envelope shows)."""
    framed = letter.raw_payload
    if letter.value.payload_encoding != "avro" or not cfg.registry_url:
        return None
    try:  # unknown id, registry down, unreadable bytes: show the envelope instead
        schema = WriterSchemas(RegistryClient.of(cfg.registry_url, cfg.registry_access)).parsed(schema_id_of(framed))
        read_body(framed[HEADER_BYTES:], schema)
    except (FrameError, RegistryClientError):
        return None
    return schema


def _replay(cfg: ToolConfig, args: argparse.Namespace) -> int:
    if not _RUN_NAME.match(args.run):
        print("deadletter: --run must be 1-100 of A-Z a-z 0-9 . _ -", file=sys.stderr)
        return 2
    if not 1 <= args.per_transaction <= 10_000:
        print("deadletter: --per-transaction must be within 1..10000", file=sys.stderr)
        return 2
    opts = ReplayOptions(run=args.run, selection=_selection(args), per_transaction=args.per_transaction,
                         rate=max(0.0, args.rate), dry_run=args.dry_run)
    report = replay(cfg, opts, progress=_say)
    for bad in report.invalid_examples:
        _say(f"still invalid {bad.letter.position} event {bad.letter.value.event_id or '-'}: {bad.code}: "
             f"{bad.message[:200]}")
    print(json.dumps({"run": args.run, "scanned": report.scanned, "replayed": report.replayed,
                      "not_selected": report.skipped, "still_invalid": dict(report.still_invalid),
                      "unreadable": report.unreadable, "transactions": report.transactions,
                      "dry_run": args.dry_run}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = ToolConfig.load(args.env_file)
        if args.command == "list":
            rows = []
            for letter in _selected(cfg, _selection(args)):
                rows.append(list_row(letter))
                if len(rows) >= args.limit:
                    break
            _say(table(rows, LIST_HEADER) if rows else "no dead letters selected")
        elif args.command == "summary":
            groups = summarise(_selected(cfg, _selection(args)))
            if args.json:
                for (reason, event_type, version, source), g in groups.items():
                    print(json.dumps({"reason": reason, "event_type": event_type, "version": version,
                                      "source": source, "count": g.count, "producers": len(g.producers),
                                      "first_ms": g.first_ms, "last_ms": g.last_ms}))
            else:
                _say(summary_table(groups) if groups else "no dead letters selected")
        elif args.command == "show":
            return _show(cfg, args.position)
        else:
            return _replay(cfg, args)
    except ConfigError as exc:
        _say(f"deadletter: configuration: {exc}", err=True)
        return 2
    except (ReadError, ReplayError, KafkaException) as exc:
        _say(f"deadletter: {exc}", err=True)
        return 1
    return 0


def _say(text: str, *, err: bool = False) -> None:
    """Print terminal-safe text (deadletter/text.py): dead letters hold what write-key holders sent."""
    print(safe(text), file=sys.stderr if err else sys.stdout, flush=True)


if __name__ == "__main__":
    sys.exit(main())
