"""The Confluent Schema Registry REST API over aiohttp: routes, JSON bodies and Confluent-style errors.

On a follower (a Forwarder given) the write routes forward to the primary (registry/follower.py); reads stay local."""

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
from registry.errors import (
    ForwardingLoop,
    MalformedRequest,
    RegistryError,
    SchemaNotFound,
    SubjectNotFound,
    UnprocessableRequest,
)
from registry.follower import FORWARDED_BY, Answer, Forwarder
from registry.service import Registry
from registry.state import Version

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTRY: web.AppKey[Registry] = web.AppKey("registry", Registry)
FORWARDER: web.AppKey[Forwarder] = web.AppKey("forwarder", Forwarder)
REGISTER_ROUTE = "/subjects/{subject}/versions"
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
    body: dict[str, Any] = {"ready": r.ready, "schemas": len(r.state.schemas), "role": "primary"}
    forwarder = request.app.get(FORWARDER)
    if forwarder is not None:
        body |= {"role": "follower", "primary": forwarder.primary_url, "last_record_lag_s": r.log.last_lag_s}
    return reply(body, 200 if r.ready else 503)


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
    return reply({"mode": "READONLY" if FORWARDER in request.app else "READWRITE"})


async def forwarded(request: web.Request) -> web.Response:
    """A follower's write: the primary's answer; after a registration, its id awaited in this replay."""
    forwarder = request.app[FORWARDER]
    if FORWARDED_BY in request.headers:
        raise ForwardingLoop("this registry is a follower and was sent a write another follower forwarded: that "
                             "follower's REGISTRY_PRIMARY_URL must name the primary registry")
    resource = request.match_info.route.resource
    is_registration = request.method == "POST" and resource is not None and resource.canonical == REGISTER_ROUTE
    answer = await forwarder.forward(request.method, request.path_qs, await request.read(), request.headers,
                                     idempotent=is_registration or request.method == "PUT")
    if is_registration and answer.status == 200:
        await _await_registration(request, forwarder, answer)
    return web.Response(body=answer.body, status=answer.status,
                        headers={"Content-Type": answer.content_type, **answer.headers})


async def _await_registration(request: web.Request, forwarder: Forwarder, answer: Answer) -> None:
    """Wait (REGISTRY_FOLLOW_WAIT_S at most) until the id the primary gave arrives here through the mirror, so that a
    read right after the write finds it; past the wait, answer anyway and say how far behind the mirror looked."""
    try:
        schema_id = answer.json().get("id")
    except (ValueError, AttributeError):
        return
    if not isinstance(schema_id, int):
        return
    r, subject = reg(request), request.match_info["subject"]
    started = time.monotonic()
    if await r.wait_registered(subject, schema_id, forwarder.cfg.follow_wait_s):
        return
    log.warning("a registration made through the primary has not arrived through the mirror yet; answering with "
                "the primary's answer (reads here miss it until the mirror delivers it)",
                extra={"subject": subject, "id": schema_id,
                       "mirror_lag_at_least_s": round(time.monotonic() - started, 3),
                       "last_record_lag_s": r.log.last_lag_s, "highest_id_here": r.state.max_id,
                       "primary": forwarder.primary_url})


def routes(follower: bool = False) -> list[web.RouteDef]:
    """Every route; with `follower`, each write route's handler is the forwarding one."""
    def w(handler: Handler) -> Handler:
        return forwarded if follower else handler

    s, v = "/subjects/{subject}", "/subjects/{subject}/versions/{version}"
    return [
        web.get("/", root), web.get("/ready", ready),
        web.get("/schemas/types", schema_types),
        web.get("/schemas/ids/{id}", schema_by_id), web.get("/schemas/ids/{id}/schema", schema_by_id),
        web.get("/schemas/ids/{id}/subjects", subjects_of_id), web.get("/schemas/ids/{id}/versions", versions_of_id),
        web.get("/subjects", list_subjects),
        web.post(s, lookup), web.delete(s, w(delete_subject)),
        web.get(f"{s}/versions", list_versions), web.post(f"{s}/versions", w(register)),
        web.get(v, get_version), web.get(f"{v}/schema", get_version), web.get(f"{v}/referencedby", get_version),
        web.delete(v, w(delete_version)),
        web.post("/compatibility/subjects/{subject}/versions", compatibility),
        web.post("/compatibility/subjects/{subject}/versions/{version}", compatibility),
        web.get("/config", get_config), web.put("/config", w(put_config)), web.delete("/config", w(delete_config)),
        web.get("/config/{subject}", get_config), web.put("/config/{subject}", w(put_config)),
        web.delete("/config/{subject}", w(delete_config)),
        web.get("/mode", mode), web.get("/mode/{subject}", mode),
    ]


def make_app(registry: Registry, access: AccessPolicy | None = None,
             forwarder: Forwarder | None = None) -> web.Application:
    """The application; the registry (and the forwarder, on a follower) must be started by the caller or a cleanup
    context.

    `access` None: no authentication (tests of the API itself); cross-site writes and non-JSON bodies are refused
    whatever the policy. `forwarder`: a follower, whose writes go to the primary."""
    def has_versions(subject: str) -> bool:
        return bool(registry.state.versions(subject, deleted=True))

    middlewares = [errors_middleware, make_access_middleware(access or AccessPolicy(), has_versions)]
    app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
    app[REGISTRY] = registry
    if forwarder is not None:
        app[FORWARDER] = forwarder
    app.add_routes(routes(follower=forwarder is not None))
    return app
