/** The package as users get it: the curated export list, and the same API from ESM `import` and CJS `require`. */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";
import * as api from "../src/index.js";

const EXPORTED = [
  "BatchRejectedError", "ConfigError", "DEFAULTS", "DeliveryError", "EventRejectedError", "EventsDroppedError", "Headwater",
  "HeadwaterError", "InvalidEventError", "MemoryTransport", "RetryableStatusError", "SDK_NAME", "SpoolLockedError", "TransportError",
  "USER_AGENT", "UndeliveredError", "VERSION", "envName",
  "Subscription", "SubscriptionError", "subscribe", // live subscriptions (src/subscribe.ts)
];
const PKG = join(import.meta.dirname, "..", "..");

describe("package", () => {
  it("exports exactly the public API", () => {
    assert.deepEqual(Object.keys(api).sort(), [...EXPORTED].sort());
  });
  it("loads the same API with require() and import", () => {
    const names = (code: string, type: string): string[] =>
      JSON.parse(execFileSync(process.execPath, ["--input-type", type, "-e", code], { cwd: PKG, encoding: "utf8" })) as string[];
    const cjs = names("console.log(JSON.stringify(Object.keys(require('@headwater/node')).sort()))", "commonjs");
    const esm = names("import * as m from '@headwater/node'; console.log(JSON.stringify(Object.keys(m).sort()))", "module");
    assert.deepEqual(cjs, [...EXPORTED].sort());
    assert.deepEqual(esm, [...EXPORTED].sort());
  });
  it("every error has a stable code and is a HeadwaterError", () => {
    const e = new api.EventsDroppedError("queue_full", 1, "x");
    assert.ok(e instanceof api.DeliveryError && e instanceof api.HeadwaterError && e instanceof Error);
    assert.equal(e.code, "queue_full");
    assert.equal(e.name, "EventsDroppedError");
    assert.equal(new api.ConfigError("bad").code, "config_error");
  });
});
