"""A small client of the Confluent Schema Registry REST API (stdlib only), for the CLI and the stack launcher."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from schemas.catalog import Catalog

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClientError(RuntimeError):
    """The registry answered an error (status and Confluent error code kept) or could not be reached."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"HTTP {status} (error {code}): {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Registration:
    """One catalog file registered: its catalog version and the registry's id and version for it."""

    event_type: str
    subject: str
    file_version: int
    schema_id: int
    registry_version: int


class RegistryClient:
    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        qs = "?" + urllib.parse.urlencode({k: str(v).lower() if isinstance(v, bool) else v
                                           for k, v in query.items()}) if query else ""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}{qs}", data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                err = json.loads(exc.read())
                raise RegistryClientError(exc.code, int(err["error_code"]), str(err["message"])) from None
            except (ValueError, KeyError, TypeError):
                raise RegistryClientError(exc.code, -1, exc.reason) from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryClientError(0, -1, f"cannot reach {self.url}: {exc}") from None

    @staticmethod
    def _s(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def set_compatibility(self, subject: str, level: str) -> None:
        self.call("PUT", f"/config/{self._s(subject)}", {"compatibility": level})

    def compatibility(self, subject: str) -> str:
        return str(self.call("GET", f"/config/{self._s(subject)}", defaultToGlobal=True)["compatibilityLevel"])

    def register(self, subject: str, schema: str) -> int:
        return int(self.call("POST", f"/subjects/{self._s(subject)}/versions", {"schema": schema})["id"])

    def lookup(self, subject: str, schema: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/subjects/{self._s(subject)}", {"schema": schema}))

    def check(self, subject: str, schema: str) -> tuple[bool, list[str]]:
        """Against every version the subject's level requires (what registering would check)."""
        answer = self.call("POST", f"/compatibility/subjects/{self._s(subject)}/versions", {"schema": schema},
                           verbose=True)
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages", [])]

    def subjects(self) -> list[str]:
        return [str(s) for s in self.call("GET", "/subjects")]

    def versions(self, subject: str) -> list[int]:
        return [int(v) for v in self.call("GET", f"/subjects/{self._s(subject)}/versions")]

    def version(self, subject: str, version: int | str) -> dict[str, Any]:
        return dict(self.call("GET", f"/subjects/{self._s(subject)}/versions/{version}"))


def register_catalog(client: RegistryClient, catalog: Catalog) -> list[Registration]:
    """Set each subject's compatibility, then register its versions in order. Idempotent."""
    done: list[Registration] = []
    for et in catalog.event_types.values():
        client.set_compatibility(et.subject, et.compatibility)
        for n in range(1, et.latest_version + 1):
            text = et.schema_text(n)
            schema_id = client.register(et.subject, text)
            version = int(client.lookup(et.subject, text)["version"])
            done.append(Registration(et.name, et.subject, n, schema_id, version))
    return done
