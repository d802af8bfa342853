"""The Confluent Schema Registry REST API over aiohttp: routes, JSON bodies and Confluent-style errors."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from registry import ops
from registry.access import USER, AccessPolicy, make_access_middleware
from registry.canonical import ParsedSchema
from registry.errors import MalformedRequest, RegistryError, SchemaNotFound, SubjectNotFound, UnprocessableRequest
from registry.service import Registry
from registry.state import Version

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTRY: web.AppKey[Registry] = web.AppKey("registry", Registry)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error becomes `{"error_code", "message"}` with Confluent's status and code."""
    started = time.monotonic()
    try:
        response = await handler(request)
    except RegistryError as exc:
        response = reply(exc.body, exc.status)
        response.headers.update(exc.headers)
    except web.HTTPException as exc:
        response = reply({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:
        log.exception("unhandled error", extra={"method": request.method, "path": request.path})
        response = reply({"error_code": 50001, "message": "Error in the backend data store"}, 500)
    log.info("request", extra={"method": request.method, "path": request.path_qs, "status": response.status,
                               "user": request.get(USER), "ms": round((time.monotonic() - started) * 1000, 1)})
    return response


async def body_of(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.text())
    except ValueError as exc:
        raise MalformedRequest(f"Request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise UnprocessableRequest("Request body must be a JSON object")
    return body


async def parsed_schema(request: web.Request) -> ParsedSchema:
    body = await body_of(request)
    return ops.parse_request_schema(body.get("schema"), body.get("schemaType"), body.get("references"))


def reg(request: web.Request) -> Registry:
    return request.app[REGISTRY]


def schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise SchemaNotFound(f"Schema {request.match_info['id']} not found") from None


async def root(request: web.Request) -> web.Response:
    return reply({})


async def ready(request: web.Request) -> web.Response:
    r = reg(request)
    return reply({"ready": r.ready, "schemas": len(r.state.schemas)}, 200 if r.ready else 503)


async def schema_types(request: web.Request) -> web.Response:
    return reply(["AVRO"])


async def schema_by_id(request: web.Request) -> web.Response:
    sid = schema_id(request)
    stored = reg(request).state.schemas.get(sid)
    if stored is None:
        raise SchemaNotFound(f"Schema {sid} not found")
    if request.path.endswith("/schema"):
        return reply(json.loads(stored.text))
    return reply({"schema": stored.text})


def _versions_of_id(request: web.Request) -> list[Version]:
    sid = schema_id(request)
    state = reg(request).state
    if sid not in state.schemas:
        raise SchemaNotFound(f"Schema {sid} not found")
    deleted = flag(request, "deleted")
    return [v for s in sorted(state.subjects) for v in state.versions(s, deleted) if v.schema_id == sid]


async def subjects_of_id(request: web.Request) -> web.Response:
    return reply(sorted({v.subject for v in _versions_of_id(request)}))


async def versions_of_id(request: web.Request) -> web.Response:
    return reply([{"subject": v.subject, "version": v.version} for v in _versions_of_id(request)])


async def list_subjects(request: web.Request) -> web.Response:
    prefix = request.query.get("subjectPrefix", "")
    names = reg(request).state.subject_names(flag(request, "deleted"))
    return reply([s for s in names if s.startswith(prefix)])


async def lookup(request: web.Request) -> web.Response:
    parsed = await parsed_schema(request)
    found = ops.lookup(reg(request).state, request.match_info["subject"], parsed, flag(request, "deleted"))
    return reply(found.body())


async def register(request: web.Request) -> web.Response:
    parsed = await parsed_schema(request)
    sid = await reg(request).register(request.match_info["subject"], parsed, flag(request, "normalize"))
    return reply({"id": sid})


async def list_versions(request: web.Request) -> web.Response:
    subject = request.match_info["subject"]
    state = reg(request).state
    only_deleted = flag(request, "deleted_only")
    versions = state.versions(subject, deleted=only_deleted or flag(request, "deleted"))
    if not state.versions(subject, deleted=True):
        raise SubjectNotFound(subject)
    return reply([v.version for v in versions if v.deleted or not only_deleted])


async def get_version(request: web.Request) -> web.Response:
    state = reg(request).state
    v = ops.get_version(state, request.match_info["subject"], request.match_info["version"], flag(request, "deleted"))
    if request.path.endswith("/schema"):
        return reply(json.loads(state.schemas[v.schema_id].text))
    if request.path.endswith("/referencedby"):
        return reply([])
    return reply(ops.registered(state, v).body())


async def delete_version(request: web.Request) -> web.Response:
    subject, version = request.match_info["subject"], request.match_info["version"]
    return reply(await reg(request).delete_version(subject, version, flag(request, "permanent")))


async def delete_subject(request: web.Request) -> web.Response:
    return reply(await reg(request).delete_subject(request.match_info["subject"], flag(request, "permanent")))


async def compatibility(request: web.Request) -> web.Response:
    parsed = await parsed_schema(request)
    subject, version = request.match_info["subject"], request.match_info.get("version")
    problems = reg(request).check(subject, parsed, version)
    body: dict[str, Any] = {"is_compatible": not problems}
    if flag(request, "verbose"):
        body["messages"] = [str(p) for p in problems]
    return reply(body)


async def get_config(request: web.Request) -> web.Response:
    subject = request.match_info.get("subject")
    level = ops.get_level(reg(request).state, subject, flag(request, "defaultToGlobal"))
    return reply({"compatibilityLevel": level})


async def put_config(request: web.Request) -> web.Response:
    level = await reg(request).set_level(request.match_info.get("subject"), await body_of(request))
    return reply({"compatibility": level})


async def delete_config(request: web.Request) -> web.Response:
    return reply({"compatibilityLevel": await reg(request).delete_level(request.match_info.get("subject"))})


async def mode(request: web.Request) -> web.Response:
    return reply({"mode": "READWRITE"})


def routes() -> list[web.RouteDef]:
    s, v = "/subjects/{subject}", "/subjects/{subject}/versions/{version}"
    return [
        web.get("/", root), web.get("/ready", ready),
        web.get("/schemas/types", schema_types),
        web.get("/schemas/ids/{id}", schema_by_id), web.get("/schemas/ids/{id}/schema", schema_by_id),
        web.get("/schemas/ids/{id}/subjects", subjects_of_id), web.get("/schemas/ids/{id}/versions", versions_of_id),
        web.get("/subjects", list_subjects),
        web.post(s, lookup), web.delete(s, delete_subject),
        web.get(f"{s}/versions", list_versions), web.post(f"{s}/versions", register),
        web.get(v, get_version), web.get(f"{v}/schema", get_version), web.get(f"{v}/referencedby", get_version),
        web.delete(v, delete_version),
        web.post("/compatibility/subjects/{subject}/versions", compatibility),
        web.post("/compatibility/subjects/{subject}/versions/{version}", compatibility),
        web.get("/config", get_config), web.put("/config", put_config), web.delete("/config", delete_config),
        web.get("/config/{subject}", get_config), web.put("/config/{subject}", put_config),
        web.delete("/config/{subject}", delete_config),
        web.get("/mode", mode), web.get("/mode/{subject}", mode),
    ]


def make_app(registry: Registry, access: AccessPolicy | None = None) -> web.Application:
    """The application; the registry must be started (replayed) by the caller or a cleanup context.

    `access` None: no authentication (tests of the API itself); cross-site writes and non-JSON bodies are refused
    whatever the policy."""
    def has_versions(subject: str) -> bool:
        return bool(registry.state.versions(subject, deleted=True))

    middlewares = [errors_middleware, make_access_middleware(access or AccessPolicy(), has_versions)]
    app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
    app[REGISTRY] = registry
    app.add_routes(routes())
    return app
