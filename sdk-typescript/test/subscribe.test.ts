/** Unit tests of subscribe(): the event-stream parser, and reconnects against a scripted loopback HTTP server. */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { SseParser, subscribe, SubscriptionError } from "../src/subscribe.js";

type Answer = [number, Record<string, string>, string];

async function scripted(answers: Answer[]): Promise<{ url: string; seen: (string | undefined)[]; close: () => void }> {
  const seen: (string | undefined)[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(req.headers["last-event-id"] as string | undefined);
    const [status, headers, body] = answers.shift() ?? [503, { "Retry-After": "1" }, "{}"];
    res.writeHead(status, headers);
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => { server.closeAllConnections(); server.close(); } };
}

function record(i: number): string {
  return `id: t-${i + 1}\ndata: ${JSON.stringify({ stream: "rule.r", partition: 0, offset: i, timestamp: 1, key: null,
    value: { n: i } })}\n\n`;
}

const SSE = { "Content-Type": "text/event-stream" };

describe("subscribe", () => {
  it("parses lines split anywhere and keeps the last id", () => {
    const text = 'retry: 1500\r\nid: p-1\r\n\r\n: hb\n\nid: p-2\ndata: {"a":\ndata: 1}\n\nevent: cutoff\rid: p-3\rdata: {}\r\r';
    for (const size of [1, 2, 5, text.length]) {
      const parser = new SseParser();
      const got = [];
      for (let i = 0; i < text.length; i += size) got.push(...parser.feed(text.slice(i, i + size)));
      assert.deepEqual(got.map((m) => [m.event, m.data, m.id]), [["message", '{"a":\n1}', "p-2"], ["cutoff", "{}", "p-3"]]);
      assert.equal(parser.retryMs, 1500);
    }
  });

  it("reconnects from the last position after an end, a 503 and a cut-off", async () => {
    const srv = await scripted([
      [200, SSE, "retry: 10\nid: t-0\n\n" + record(0) + record(1)],
      [503, { "Retry-After": "0", "Content-Type": "application/json" }, '{"code":"instance_full","message":"x"}'],
      [200, SSE, record(2) + 'event: cutoff\nid: t-3\ndata: {"code":"subscriber_too_slow"}\n\n'],
      [200, SSE, "id: t-3\n\n" + record(3) + 'event: gap\ndata: {"code":"retention"}\n\n' + record(4)],
    ]);
    const sub = subscribe(srv.url, "hwr_k", "rule.r", { maxBackoffMs: 50 });
    const got: [number, string][] = [];
    for await (const rec of sub) {
      got.push([rec.offset, rec.id]);
      if (got.length === 5) break;
    }
    srv.close();
    assert.deepEqual(got, [0, 1, 2, 3, 4].map((i) => [i, `t-${i + 1}`]));
    assert.deepEqual(srv.seen, [undefined, "t-2", "t-2", "t-3"]);
    assert.equal(sub.cutoffs, 1);
    assert.deepEqual(sub.gaps, [{ code: "retention" }]);
    assert.equal(sub.lastEventId, "t-5");
  });

  it("throws a refusal that retrying would not fix", async () => {
    const srv = await scripted([[403, { "Content-Type": "application/json" }, '{"code":"stream_not_allowed","message":"no"}']]);
    const sub = subscribe(srv.url, "hwr_k", "event.page_view");
    await assert.rejects(async () => {
      for await (const record of sub) assert.fail(`no record expected, got ${record.id}`);
    }, (err: unknown) => err instanceof SubscriptionError && err.status === 403 && err.code === "stream_not_allowed");
    srv.close();
  });
});
