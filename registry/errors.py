"""The registry's errors, each carrying its HTTP status and Confluent error code (the body clients parse)."""

from __future__ import annotations

from typing import ClassVar


class RegistryError(Exception):
    """Base: answered as `{"error_code": code, "message": str(self)}` with `status`."""

    status: ClassVar[int] = 500
    code: ClassVar[int] = 50001

    @property
    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": str(self)}

    @property
    def headers(self) -> dict[str, str]:
        """Headers the answer carries besides the body (WWW-Authenticate, Retry-After)."""
        return {}


class SubjectNotFound(RegistryError):
    status, code = 404, 40401

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(RegistryError):
    status, code = 404, 40402

    def __init__(self, subject: str, version: int | str) -> None:
        super().__init__(f"Version {version} not found for subject '{subject}'.")


class SchemaNotFound(RegistryError):
    status, code = 404, 40403

    def __init__(self, detail: str = "Schema not found") -> None:
        super().__init__(detail)


class SubjectSoftDeleted(RegistryError):
    status, code = 404, 40404

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently")


class SubjectNotSoftDeleted(RegistryError):
    status, code = 404, 40405

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was not deleted first before being permanently deleted")


class VersionSoftDeleted(RegistryError):
    status, code = 404, 40406

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was soft deleted. "
                         "Set permanent=true to delete permanently")


class VersionNotSoftDeleted(RegistryError):
    status, code = 404, 40407

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was not deleted first before being "
                         "permanently deleted")


class SubjectConfigNotFound(RegistryError):
    status, code = 404, 40408

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level compatibility configured")


class IncompatibleSchema(RegistryError):
    status, code = 409, 409


class InvalidSchema(RegistryError):
    status, code = 422, 42201


class InvalidVersion(RegistryError):
    status, code = 422, 42202

    def __init__(self, version: str) -> None:
        super().__init__(f"The specified version '{version}' is not a valid version id. Allowed values are "
                         "between [1, 2^31-1] and the string \"latest\"")


class InvalidCompatibilityLevel(RegistryError):
    status, code = 422, 42203

    def __init__(self, level: object) -> None:
        super().__init__(f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
                         "backward_transitive, forward_transitive, and full_transitive")


class UnprocessableRequest(RegistryError):
    """A well-formed HTTP request whose body is not the JSON object the endpoint expects."""

    status, code = 422, 422


class StoreUnavailable(RegistryError):
    """The `_schemas` topic could not be written or read back in time: retryable."""

    status, code = 500, 50002


class WriteConflict(RegistryError):
    """Another instance kept winning the race for the same version or id: retryable."""

    status, code = 500, 50003


class MalformedRequest(RegistryError):
    """The request body is not JSON."""

    status, code = 400, 400


class PrimaryUnavailable(RegistryError):
    """A follower could not reach its primary registry to forward a write: retryable; reads keep working."""

    status, code = 503, 50301


class ForwardingLoop(RegistryError):
    """A follower was sent a write forwarded by another follower: REGISTRY_PRIMARY_URL names a follower."""

    status, code = 503, 50302
