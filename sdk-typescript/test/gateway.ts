/** A scripted gateway for tests: real HTTP on loopback, records every request (decompressed), answers by script. */

import { once } from "node:events";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import { decompress } from "zstd-napi";

export interface Recorded {
  headers: http.IncomingHttpHeaders;
  body: { batch_id: string; sent_at: number; sdk: { name: string; version: string }; events: Array<Record<string, unknown>> };
}

export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Destroy the socket instead of answering. */
  reset?: boolean;
  /** Answer only once this settles. */
  after?: Promise<unknown>;
}

export type Script = (req: Recorded, n: number) => Answer | undefined;

/** A loopback gateway; `script` answers each request (default: 200 with every event accepted). */
export class TestGateway {
  readonly requests: Recorded[] = [];
  /** TCP connections accepted so far. */
  connections = 0;
  private server: http.Server;
  url = "";

  constructor(public script: Script = () => undefined) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        let raw: Buffer = Buffer.concat(chunks);
        const enc = req.headers["content-encoding"];
        if (enc === "zstd") raw = decompress(raw);
        else if (enc === "gzip") raw = gunzipSync(raw);
        const rec: Recorded = { headers: req.headers, body: JSON.parse(raw.toString("utf8")) as Recorded["body"] };
        this.requests.push(rec);
        const answer = this.script(rec, this.requests.length - 1) ?? {
          status: 200,
          body: { batch_id: rec.body.batch_id, accepted: rec.body.events.length, rejected: [] },
        };
        void (answer.after ?? Promise.resolve()).then(() => {
          if (answer.reset) {
            req.socket.destroy();
            return;
          }
          res.writeHead(answer.status, { "content-type": "application/json", ...(answer.headers ?? {}) });
          res.end(typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? {}));
        });
      });
    });
  }

  async start(): Promise<this> {
    this.server.on("connection", () => {
      this.connections += 1;
    });
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Every event received, in arrival order. */
  events(): Array<Record<string, unknown>> {
    return this.requests.flatMap((r) => r.body.events);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, "close");
  }
}
