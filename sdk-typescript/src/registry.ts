/** The schema cache of the Avro fast path: latest writer schema and id per event type, from the registry. */

import { AvroCompiler, type AvroWriter } from "./avro.js";
import { TransportError } from "./errors.js";
import type { Transport } from "./transport.js";

export const SUBJECT_PREFIX = "headwater.events."; // RecordNameStrategy subject of an event type

/** A registered schema: its registry id and compiled writer. */
export interface WriterSchema {
  id: number;
  version: number;
  write: (w: AvroWriter, value: unknown) => void;
}

/**
 * `GET {registry}/subjects/headwater.events.<type>/versions/latest`, cached for `refreshMs`. A missing subject
 * is cached too (as null) so unknown types do not hammer the registry; `invalidate` forgets one type.
 */
export class SchemaCache {
  private readonly cache = new Map<string, { until: number; schema: Promise<WriterSchema | null> }>();
  private readonly base: string;

  constructor(registryUrl: string, private readonly transport: Transport, private readonly refreshMs: number,
              private readonly timeoutMs: number) {
    this.base = registryUrl.replace(/\/+$/, "");
  }

  /** The latest schema of `eventType`, null if no such subject; rejects with TransportError if unreachable. */
  get(eventType: string): Promise<WriterSchema | null> {
    const hit = this.cache.get(eventType);
    if (hit !== undefined && hit.until > Date.now()) return hit.schema;
    const schema = this.fetch(eventType);
    this.cache.set(eventType, { until: Date.now() + this.refreshMs, schema });
    schema.catch(() => this.cache.delete(eventType)); // a failed look-up is not cached
    return schema;
  }

  invalidate(eventType: string): void {
    this.cache.delete(eventType);
  }

  private async fetch(eventType: string): Promise<WriterSchema | null> {
    const url = `${this.base}/subjects/${SUBJECT_PREFIX}${eventType}/versions/latest`;
    const resp = await this.transport.send({ method: "GET", url, headers: { Accept: "application/vnd.schemaregistry.v1+json" },
      body: Buffer.alloc(0) }, this.timeoutMs);
    if (resp.status === 404) return null;
    if (resp.status !== 200) throw new TransportError(`registry answered HTTP ${resp.status} for ${eventType}`, "registry_unavailable");
    try {
      const doc = JSON.parse(resp.body.toString("utf8")) as { id: unknown; version?: unknown; schema: unknown };
      const compiled = new AvroCompiler().compile(JSON.parse(String(doc.schema)) as Record<string, unknown>);
      return { id: Number(doc.id), version: Number(doc.version ?? 0), write: compiled.write };
    } catch (err) {
      throw new TransportError(`registry answer for ${eventType} unusable: ${(err as Error).message}`, "registry_unavailable");
    }
  }
}
