/** The schema cache of the Avro fast path: latest writer schema and id per event type, from the registry. */
import { AvroCompiler } from "./avro.js";
import { TransportError } from "./errors.js";
export const SUBJECT_PREFIX = "headwater.events."; // RecordNameStrategy subject of an event type
/**
 * `GET {registry}/subjects/headwater.events.<type>/versions/latest`, cached for `refreshMs`. A missing subject
 * is cached too (as null) so unknown types do not hammer the registry; `invalidate` forgets one type.
 */
export class SchemaCache {
    transport;
    refreshMs;
    timeoutMs;
    cache = new Map();
    base;
    constructor(registryUrl, transport, refreshMs, timeoutMs) {
        this.transport = transport;
        this.refreshMs = refreshMs;
        this.timeoutMs = timeoutMs;
        this.base = registryUrl.replace(/\/+$/, "");
    }
    /** The latest schema of `eventType`, null if no such subject; rejects with TransportError if unreachable. */
    get(eventType) {
        const hit = this.cache.get(eventType);
        if (hit !== undefined && hit.until > Date.now())
            return hit.schema;
        const schema = this.fetch(eventType);
        this.cache.set(eventType, { until: Date.now() + this.refreshMs, schema });
        schema.catch(() => this.cache.delete(eventType)); // a failed look-up is not cached
        return schema;
    }
    invalidate(eventType) {
        this.cache.delete(eventType);
    }
    async fetch(eventType) {
        const url = `${this.base}/subjects/${SUBJECT_PREFIX}${eventType}/versions/latest`;
        const resp = await this.transport.send({ method: "GET", url, headers: { Accept: "application/vnd.schemaregistry.v1+json" },
            body: Buffer.alloc(0) }, this.timeoutMs);
        if (resp.status === 404)
            return null;
        if (resp.status !== 200)
            throw new TransportError(`registry answered HTTP ${resp.status} for ${eventType}`, "registry_unavailable");
        try {
            const doc = JSON.parse(resp.body.toString("utf8"));
            const compiled = new AvroCompiler().compile(JSON.parse(String(doc.schema)));
            return { id: Number(doc.id), version: Number(doc.version ?? 0), write: compiled.write };
        }
        catch (err) {
            throw new TransportError(`registry answer for ${eventType} unusable: ${err.message}`, "registry_unavailable");
        }
    }
}
