/** TLS: the system store by default, a private CA through `caBundle`, keep-alive over TLS (one connection). */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ConfigError, Headwater, UndeliveredError } from "../src/index.js";

/** A private CA and a certificate for 127.0.0.1 signed by it, made with the openssl command. */
function privateCa(dir: string): { ca: string; cert: string; key: string } {
  const run = (...args: string[]): void => { execFileSync("openssl", args, { stdio: "ignore" }); };
  const p = (name: string): string => join(dir, name);
  run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", p("ca.key"),
    "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=headwater test CA");
  run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", p("gw.key"), "-out", p("gw.csr"),
    "-subj", "/CN=gateway");
  writeFileSync(p("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  run("x509", "-req", "-in", p("gw.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial", "-out", p("gw.pem"),
    "-days", "2", "-extfile", p("ext.cnf"));
  return { ca: p("ca.pem"), cert: p("gw.pem"), key: p("gw.key") };
}

describe("TLS", () => {
  let dir: string;
  let files: { ca: string; cert: string; key: string };
  let server: https.Server;
  let url: string;
  let connections = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hw-tls-"));
    files = privateCa(dir);
    const { readFileSync } = await import("node:fs");
    server = https.createServer({ cert: readFileSync(files.cert), key: readFileSync(files.key) }, (req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"accepted":1,"rejected":[]}');
      });
    });
    server.on("secureConnection", () => { connections += 1; });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers through a private CA given as caBundle, on one kept-alive connection", async () => {
    connections = 0;
    const c = new Headwater({ endpoint: url, writeKey: "k", caBundle: files.ca, handleExit: false, maxInFlight: 1,
      maxBatchEvents: 1, lingerMs: 1 });
    for (let i = 0; i < 20; i++) {
      c.track("page_view", { i });
      assert.equal(await c.flush({ timeoutMs: 10_000 }), true);
    }
    await c.close({ timeoutMs: 10_000 });
    assert.equal(connections, 1);
  });

  it("refuses the server's certificate without the CA (the system store)", async () => {
    const c = new Headwater({ endpoint: url, writeKey: "k", handleExit: false, lingerMs: 1, retryBaseMs: 5, retryMaxMs: 20,
      retryDeadlineMs: 300 });
    const failures: string[] = [];
    c.on("failure", (e) => failures.push(e.message));
    c.track("page_view", {});
    await assert.rejects(c.close({ timeoutMs: 10_000 }), UndeliveredError);
    assert.ok(failures.some((m) => /certificate/i.test(m)), failures.join("; "));
  });

  it("names a caBundle that is not a readable PEM file", () => {
    assert.throws(() => new Headwater({ endpoint: url, writeKey: "k", handleExit: false, caBundle: join(dir, "missing.pem") }), ConfigError);
  });
});
