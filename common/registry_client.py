"""A blocking client of the Confluent Schema Registry REST API (stdlib only), shared by the tools and the pipeline.

Every failure is a `RegistryClientError` carrying the HTTP status (0: not reached) and the Confluent error code
(-1 when the answer had none), so callers branch on numbers, never on message text.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from common.basic_auth import authorization
from common.registry_access import RegistryAccess
from common.tls import client_context

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403


class RegistryClientError(RuntimeError):
    """The registry answered an error (status and Confluent error code kept) or could not be reached (status 0)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"HTTP {status} (error {code}): {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404


class RegistryClient:
    """No caching: each call is one request (the callers take snapshots rarely or register once)."""

    def __init__(self, url: str, timeout_s: float = 10.0, *, credentials: tuple[str, str] | None = None,
                 ca_file: str = "") -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        # HTTP basic credentials (common/registry_access.py) and the CA an https registry's certificate chains to.
        self._auth = {"Authorization": authorization(credentials)} if credentials else {}
        self._tls = client_context(ca_file) if self.url.startswith("https:") else None

    @classmethod
    def of(cls, url: str, access: RegistryAccess, timeout_s: float = 10.0) -> RegistryClient:
        return cls(url, timeout_s, credentials=access.credentials, ca_file=access.ca_file)

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        """One request; the decoded JSON answer, or RegistryClientError."""
        qs = "?" + urllib.parse.urlencode({k: str(v).lower() if isinstance(v, bool) else v
                                           for k, v in query.items()}) if query else ""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}{qs}", data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE, **self._auth})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self._tls) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()[:2000]
            try:
                err = json.loads(raw)
                raise RegistryClientError(exc.code, int(err["error_code"]), str(err["message"])) from None
            except (ValueError, KeyError, TypeError):
                raise RegistryClientError(exc.code, -1, f"{method} {path}: {exc.reason} {raw[:300]!r}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryClientError(0, -1, f"cannot reach {self.url}: {exc}") from None
        except ValueError as exc:  # a 2xx answer that is not JSON
            raise RegistryClientError(0, -1, f"{method} {path}: answer is not JSON: {exc}") from None

    @staticmethod
    def _s(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def set_compatibility(self, subject: str, level: str) -> None:
        self.call("PUT", f"/config/{self._s(subject)}", {"compatibility": level})

    def compatibility(self, subject: str) -> str:
        return str(self.call("GET", f"/config/{self._s(subject)}", defaultToGlobal=True)["compatibilityLevel"])

    def register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject` (idempotent in the registry) and return its id."""
        got = self.call("POST", f"/subjects/{self._s(subject)}/versions", {"schema": schema})
        if not isinstance(got, dict) or "id" not in got:
            raise RegistryClientError(200, -1, f"register {subject}: unexpected answer {got!r}")
        return int(got["id"])

    def lookup(self, subject: str, schema: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/subjects/{self._s(subject)}", {"schema": schema}))

    def check(self, subject: str, schema: str) -> tuple[bool, list[str]]:
        """Against every version the subject's level requires (what registering would check)."""
        answer = self.call("POST", f"/compatibility/subjects/{self._s(subject)}/versions", {"schema": schema},
                           verbose=True)
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages", [])]

    def subjects(self) -> list[str]:
        return [str(s) for s in self.call("GET", "/subjects") or []]

    def versions(self, subject: str) -> list[int]:
        return [int(v) for v in self.call("GET", f"/subjects/{self._s(subject)}/versions") or []]

    def version(self, subject: str, version: int | str) -> dict[str, Any]:
        """One version: its `id`, `version`, `subject` and `schema` text."""
        return dict(self.call("GET", f"/subjects/{self._s(subject)}/versions/{version}"))

    def exists(self, schema_id: int) -> bool:
        """Whether the registry knows schema `schema_id` (False on 404, RegistryClientError otherwise)."""
        try:
            self.call("GET", f"/schemas/ids/{schema_id}")
        except RegistryClientError as exc:
            if exc.not_found:
                return False
            raise
        return True
