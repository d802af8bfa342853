"""The schema-evolution command line: `python -m schemas register|check|list|diff` against REGISTRY_URL.

REGISTRY_URL comes from `--registry`, else the environment, else the running stack's `stack.env`
(`$HEADWATER_STATE_DIR/stack.env`, default `.headwater/stack.env`); so do the credentials
(`REGISTRY_BASIC_AUTH_USER_INFO_FILE`, `REGISTRY_SSL_CA_LOCATION`, per-tool `HEADWATER_SCHEMAS_...` first:
common/registry_access.py). Exit status: 0 fine, 1 incompatible or a registry error, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from common.basic_auth import AuthConfigError
from common.envfile import stack_env_file, stack_settings
from common.registry_access import RegistryAccess
from common.registry_client import RegistryClient, RegistryClientError
from schemas.catalog import NAMESPACE, CatalogError, load_catalog
from schemas.diff import diff
from schemas.register import register_catalog


class UsageError(ValueError):
    """Bad arguments or input files; exit status 2."""


def _settings() -> tuple[dict[str, str], Path]:
    """The environment over the running stack's stack.env (when it exists), and that file's path."""
    env_file = stack_env_file()
    return stack_settings(env_file), env_file


def registry_url(explicit: str | None) -> str:
    if explicit:
        return explicit
    env, env_file = _settings()
    if env.get("REGISTRY_URL"):
        return env["REGISTRY_URL"]
    raise UsageError(f"no registry: pass --registry, set REGISTRY_URL, or start the stack ({env_file} has none)")


def registry_client(explicit: str | None) -> RegistryClient:
    """A client of the registry with this tool's credentials."""
    try:
        access = RegistryAccess.from_env(_settings()[0], "SCHEMAS")
    except AuthConfigError as exc:
        raise UsageError(str(exc)) from None
    return RegistryClient.of(registry_url(explicit), access)


def subject_of(schema: Any) -> str:
    """RecordNameStrategy: the record's full name."""
    if not isinstance(schema, dict) or "name" not in schema:
        raise UsageError("an event schema must be an Avro record with a name")
    name = str(schema["name"])
    return name if "." in name else f"{schema.get('namespace') or NAMESPACE}.{name}"


def read_schema(path: str) -> tuple[str, Any]:
    try:
        text = Path(path).read_text()
        return text, json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None


def cmd_register(args: argparse.Namespace, out: Any) -> int:
    client = registry_client(args.registry)
    bad = 0
    for r in register_catalog(client, load_catalog()):
        note = "" if r.registry_version == r.file_version else "  <- registry version differs from the file's"
        bad += bool(note)
        print(f"{r.subject}  v{r.file_version} -> id {r.schema_id}, registry version {r.registry_version}{note}",
              file=out)
    return 1 if bad else 0


def cmd_check(args: argparse.Namespace, out: Any) -> int:
    text, schema = read_schema(args.file)
    subject = args.subject or subject_of(schema)
    client = registry_client(args.registry)
    ok, messages = client.check(subject, text)
    level = client.compatibility(subject)
    if ok:
        print(f"{args.file}: compatible with {subject} under {level}", file=out)
        return 0
    print(f"{args.file}: INCOMPATIBLE with {subject} under {level}:", file=out)
    for message in messages:
        print(f"  {message}", file=out)
    return 1


def cmd_list(args: argparse.Namespace, out: Any) -> int:
    client = registry_client(args.registry)
    for subject in client.subjects():
        latest = client.version(subject, "latest")
        print(f"{subject}  [{client.compatibility(subject)}]  versions {client.versions(subject)}  "
              f"latest id {latest['id']}", file=out)
    return 0


def cmd_diff(args: argparse.Namespace, out: Any) -> int:
    if len(args.what) == 3:
        event_type, old_v, new_v = args.what
        et = load_catalog().event_types.get(event_type)
        if et is None:
            raise UsageError(f"unknown event type {event_type!r}")
        try:
            old, new = et.schema(int(old_v.lstrip("v"))), et.schema(int(new_v.lstrip("v")))
        except CatalogError as exc:  # before ValueError, which it is
            raise UsageError(f"{exc}: a version not in schemas/catalog.json yet is diffed by its file, e.g. "
                             f"`diff {et.versions[-1]} <new file>`") from None
        except ValueError:
            raise UsageError("versions are numbers, e.g. `diff page_view 1 2`") from None
    elif len(args.what) == 2:
        old, new = read_schema(args.what[0])[1], read_schema(args.what[1])[1]
    else:
        raise UsageError("diff takes EVENT_TYPE OLD NEW (catalog versions) or OLD.avsc NEW.avsc")
    changes = diff(old, new)
    for change in changes:
        print(change, file=out)
    if not changes:
        print("no field changes", file=out)
    return 0


def main(argv: list[str] | None = None, out: Any = None) -> int:
    out = sys.stdout if out is None else out
    parser = argparse.ArgumentParser(prog="python -m schemas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", help="registry URL (default: REGISTRY_URL, then the stack's stack.env)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("register", help="set each subject's compatibility and register every version in schemas/")
    check = sub.add_parser("check", help="check a new version file against the registry (exit 1: incompatible)")
    check.add_argument("file")
    check.add_argument("--subject", help="default: the record's full name (RecordNameStrategy)")
    sub.add_parser("list", help="list subjects, their compatibility and versions")
    d = sub.add_parser("diff", help="fields added, removed or changed between two versions")
    d.add_argument("what", nargs="+", metavar="ARG", help="EVENT_TYPE OLD NEW, or OLD.avsc NEW.avsc")
    args = parser.parse_args(argv)
    commands = {"register": cmd_register, "check": cmd_check, "list": cmd_list, "diff": cmd_diff}
    try:
        return commands[args.command](args, out)
    except (UsageError, CatalogError) as exc:
        print(f"schemas: {exc}", file=sys.stderr)
        return 2
    except RegistryClientError as exc:
        print(f"schemas: registry error: {exc}", file=sys.stderr)
        return 2 if exc.code == 42201 else 1
