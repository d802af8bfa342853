"""Running one SDK vector: a mock gateway (two with `secondary`: the client's endpoints in order), the SDK's
driver, the vector's steps, then every expectation."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from .checks import check_expectations
from .driverproc import DriverError, DriverProcess
from .mockgw import MockGateway, ServerTls
from .patterns import Matcher, Mismatch
from .vectors import REPO

WRITE_KEY = "hw_conformance-key-0123456789abcdefghijklmnop"
DEFAULT_OPTIONS: dict[str, Any] = {
    "node_id": "conformance-node", "linger_s": 0.05, "max_in_flight": 1, "retry_base_s": 0.05,
    "retry_max_s": 0.5, "retry_deadline_s": 30.0, "request_timeout_s": 5.0, "exit_timeout_s": 5.0,
}
MANDATORY = ("json", "zstd", "retries", "split", "spool")


@dataclasses.dataclass
class Sdk:
    """One registered SDK (an entry of sdks.json) and what its driver said in `hello`."""

    name: str
    driver: list[str]
    build: list[str] | None = None
    expected_failures: dict[str, str] = dataclasses.field(default_factory=dict)
    capabilities: frozenset[str] = frozenset()


@dataclasses.dataclass
class Run:
    """Everything one vector run observed: the mock's requests, the driver's replies and outcomes."""

    mock: MockGateway
    mocks: dict[str, MockGateway] = dataclasses.field(default_factory=dict)  # by name; `mock` is "primary"
    replies: list[tuple[dict[str, Any], dict[str, Any]]] = dataclasses.field(default_factory=list)
    outcomes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    producer_ids: list[Any] = dataclasses.field(default_factory=list)
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)
    stderr: Path | None = None


class Failed(Exception):
    """The vector failed; the message says which expectation and why."""


def needs_missing(vector: dict[str, Any], sdk: Sdk) -> list[str]:
    """The optional capabilities the vector needs and the SDK lacks (the vector is then n/a)."""
    return [c for c in vector.get("needs", []) if c not in sdk.capabilities and c not in MANDATORY]


class SdkCase:
    """Executes the steps of `vector` against `sdk` in a temporary directory."""

    def __init__(self, vector: dict[str, Any], sdk: Sdk, workdir: Path, tls: ServerTls | None = None) -> None:
        self.vector = vector
        self.sdk = sdk
        self.workdir = workdir
        self.run = Run(_mock(vector.get("gateway", {}), "primary", tls))
        self.run.mocks["primary"] = self.run.mock
        if "secondary" in vector:  # the client is given both, primary first (protocol.md §9)
            self.run.mocks["secondary"] = _mock(vector["secondary"], "secondary", tls, conn_base=100_000)
        self.run.stderr = workdir / "driver.stderr"
        client = vector.get("client", {})
        self.spool = str(workdir / "spool") if client.get("spool", False) else None
        self.options = {**DEFAULT_OPTIONS, **client.get("options", {})}
        if "registry_url" in self.options:
            self.options["registry_url"] = self.run.mock.url
        if len(self.run.mocks) > 1:
            self.options["endpoints"] = [m.url for m in self.run.mocks.values()]
        self.write_key = client.get("write_key", WRITE_KEY)
        self.env = {k: v.replace("{endpoint}", self.run.mock.url).replace("{write_key}", self.write_key)
                    for k, v in client.get("env", {}).items()} if "env" in client else None
        if tls is not None:  # the mock serves HTTPS with a private CA's certificate: the SDK is given that CA
            self.options["ca_bundle"] = str(tls.ca)
            if self.env is not None:
                self.env["HEADWATER_CA_BUNDLE"] = str(tls.ca)
        self.driver: DriverProcess | None = None
        self.matcher = Matcher()
        self.problems: list[str] = []

    def execute(self) -> Run:
        """Run every step and the final `outcomes`/`stats`; raise `Failed` listing every broken expectation."""
        for mock in self.run.mocks.values():
            mock.start()
        try:
            self._start()
            for n, step in enumerate(self.vector["steps"]):
                for _ in range(int(step.get("repeat", 1))):
                    self._step(n, step)
            self._collect()
            self.problems += check_expectations(self.vector.get("expect", {}), self.run, self.matcher,
                                                self.sdk.capabilities)
        except (DriverError, Mismatch) as exc:
            raise Failed("\n".join([*self.problems, str(exc)])) from None
        finally:
            if self.driver is not None:
                self.driver.stop()
            for mock in self.run.mocks.values():
                mock.stop()
        if self.problems:
            raise Failed("\n".join(self.problems))
        return self.run

    def _call(self, cmd: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        assert self.driver is not None
        reply = self.driver.call(cmd, timeout_s)
        self.run.replies.append((cmd, reply))
        return reply

    def _start(self) -> None:
        self.driver = DriverProcess(self.sdk.driver, REPO, self.workdir / "driver.stderr")
        hello = self._call({"cmd": "hello"})
        if not hello.get("ok"):
            raise Failed(f"hello failed: {hello}")
        self.run.hello = hello
        if self.env is not None:  # configuration from environment variables only (capability env_config)
            init = self._call({"cmd": "init", "env": self.env, "spool_dir": self.spool})
        else:
            init = self._call({"cmd": "init", "endpoint": self.run.mock.url, "write_key": self.write_key,
                               "spool_dir": self.spool, "options": self.options})
        if not init.get("ok"):
            raise Failed(f"init failed: {init.get('error')}")
        self.run.producer_ids.append(init.get("producer_id"))

    def _collect(self) -> None:
        got = self._call({"cmd": "outcomes"})
        if not got.get("ok"):
            raise Failed(f"outcomes failed: {got.get('error')}")
        self.run.outcomes.extend(got.get("outcomes", []))
        stats = self._call({"cmd": "stats"})
        if not stats.get("ok"):
            raise Failed(f"stats failed: {stats.get('error')}")
        self.run.stats = stats

    def _step(self, n: int, step: dict[str, Any]) -> None:
        do = step["do"]
        where = f"step {n} ({do})"
        reply: dict[str, Any] | None = None
        if do == "track":
            fields = ("event_type", "properties", "partition_key", "event_id", "timestamp")
            reply = self._call({"cmd": "track", **{k: step[k] for k in fields if k in step}})
        elif do in ("flush", "close"):
            timeout = float(step.get("timeout_s", 10))
            reply = self._call({"cmd": do, "timeout_s": timeout}, timeout + 30)
        elif do == "stats":
            reply = self._call({"cmd": "stats"})
        elif do == "wait_requests":
            mock = self._target(step, where)
            if not mock.wait_requests(int(step["count"]), float(step.get("timeout_s", 30))):
                raise Failed(f"{where}: {len(mock.requests)} request(s) arrived at the {mock.name}, expected "
                             f"{step['count']} within {step.get('timeout_s', 30)} s")
        elif do == "quiet":
            for mock in self.run.mocks.values():
                mock.quiet_for(float(step.get("seconds", 0.5)), float(step.get("timeout_s", 30)))
        elif do == "gateway":
            self._target(step, where).set_state(step["state"])
        elif do == "sleep":
            time.sleep(float(step.get("seconds", 0)))
        elif do == "crash":
            self._collect()
            assert self.driver is not None
            self.driver.kill()
            self.driver = None
        elif do == "restart":
            self._start()
        if "expect" in step:
            if reply is None:
                raise Failed(f"{where}: 'expect' on a step without a reply")
            try:
                self.matcher.check(step["expect"], reply, f"{where} reply")
            except Mismatch as exc:
                self.problems.append(str(exc))


    def _target(self, step: dict[str, Any], where: str) -> MockGateway:
        name = step.get("target", "primary")
        if name not in self.run.mocks:
            raise Failed(f"{where}: the vector has no {name} gateway")
        return self.run.mocks[name]


def _mock(gw: dict[str, Any], name: str, tls: ServerTls | None, conn_base: int = 0) -> MockGateway:
    """The mock gateway of a vector's `gateway` (or `secondary`) block."""
    return MockGateway(_expand(gw.get("script", [])), close_after=gw.get("close_after"), registry=gw.get("registry"),
                       tls=tls.context() if tls else None, name=name, state=gw.get("state", "up"),
                       conn_base=conn_base)


def _expand(script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for answer in script:
        out.extend([{k: v for k, v in answer.items() if k != "repeat"}] * int(answer.get("repeat", 1)))
    return out


def run_vector(vector: dict[str, Any], sdk: Sdk, tls: ServerTls | None = None) -> Run:
    """Run one SDK vector in a fresh temporary directory (over HTTPS with `tls`)."""
    with tempfile.TemporaryDirectory(prefix="hw-conformance-") as tmp:
        case = SdkCase(vector, sdk, Path(tmp), tls)
        try:
            return case.execute()
        except Failed as exc:
            tail = _tail(Path(tmp) / "driver.stderr")
            raise Failed(str(exc) + (f"\n--- driver stderr (tail) ---\n{tail}" if tail else "")) from None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
