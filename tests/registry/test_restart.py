"""A restarted registry loses nothing, and several instances on one `_schemas` topic agree (writes fenced)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from common.registry_client import RegistryClient
from tests.support.ports import free_port
from tests.support.processes import start_service, stop, wait_serving
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration


@contextmanager
def registry_process(stack_env: dict[str, str], log_dir: Path) -> Iterator[RegistryClient]:
    """Another `python -m registry` on the same Kafka topic, on a free port; stopped at the end."""
    port = free_port()
    env = {**os.environ, "KAFKA_BOOTSTRAP": stack_env["KAFKA_BOOTSTRAP"], "SCHEMAS_TOPIC": stack_env["SCHEMAS_TOPIC"],
           "REGISTRY_PORT": str(port), "REGISTRY_HOST": "127.0.0.1"}
    with open(log_dir / f"registry-{port}.log", "wb") as log:
        proc = start_service("registry", env, log)
    client = RegistryClient(f"http://127.0.0.1:{port}", timeout_s=30)
    try:
        wait_serving(f"{client.url}/ready", proc, 60, log=log_dir / f"registry-{port}.log", interval_s=0.2)
        yield client
    finally:
        stop(proc, 15)


def schema(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "r", "namespace": "restart",
                       "fields": [{"name": f, "type": "long", "default": 0} for f in fields]})


def test_restart_loses_nothing_and_instances_agree(stack_env: dict[str, str], registry_url: str,
                                                   tmp_path: Path) -> None:
    main = RegistryClient(registry_url)
    subject = f"test.{uuid.uuid4().hex}.restart"
    main.set_compatibility(subject, "FULL")
    first_id = main.register(subject, schema("a"))
    deleted_id = main.register(subject, schema("a", "b"))
    main.call("DELETE", f"/subjects/{subject}/versions/2")
    expected = {n: main.version(subject, n)["id"] for n in main.versions(subject)}

    with registry_process(stack_env, tmp_path) as other:
        # A fresh process replays the topic: same subjects, versions, ids, configs, soft deletes.
        assert {n: other.version(subject, n)["id"] for n in other.versions(subject)} == expected == {1: first_id}
        assert other.compatibility(subject) == "FULL"
        assert json.loads(other.call("GET", f"/schemas/ids/{deleted_id}")["schema"]) == json.loads(schema("a", "b"))
        assert set(main.subjects()) <= set(other.subjects())

        # Writes through either instance land in one order that both see (the second fences the first).
        third_id = other.register(subject, schema("a", "c"))
        wait_for("versions 1 and 3 on the first instance", lambda: main.versions(subject) == [1, 3], 10)
        assert main.version(subject, 3)["id"] == third_id
        fourth_id = main.register(subject, schema("a", "c", "d"))  # main was fenced: it re-acquires and catches up
        assert len({first_id, deleted_id, third_id, fourth_id}) == 4
        wait_for("versions 1, 3 and 4 on the other", lambda: other.versions(subject) == [1, 3, 4], 10)
        assert other.register(subject + ".copy", schema("a", "c", "d")) == fourth_id

    with registry_process(stack_env, tmp_path) as restarted:
        assert restarted.versions(subject) == [1, 3, 4]
        assert restarted.version(subject, "latest")["id"] == fourth_id
