/**
 * Request-body compression: the codec a client uses, chosen once per process.
 *
 * zstd comes from `node:zlib` where the runtime has it (Node >= 22.15 and 23.8), else from the optional
 * `zstd-napi` binding (a native module built by its install script). Where neither loads (Node 20 or 22.14 with
 * install scripts disabled, as pnpm and some CI setups do), the client sends gzip instead, which every gateway
 * accepts, and says so once with a process warning (code `HEADWATER_ZSTD_UNAVAILABLE`). `codecFor()` tells
 * which was chosen; the client's `codec()` too.
 */

import * as zlib from "node:zlib";
import type { Compression } from "./config.js";

/** A codec: the Content-Encoding it produces, where it comes from, and the function. */
export interface Codec {
  readonly encoding: Compression;
  /** `zlib`, `zstd-napi`, `zlib-gzip` (zstd was asked for but is unavailable) or `none`. */
  readonly implementation: "zlib" | "zstd-napi" | "zlib-gzip" | "none";
  compress(body: Buffer): Buffer;
}

type ZlibWithZstd = typeof zlib & { zstdCompressSync?: (buf: Buffer) => Buffer };
interface ZstdNapi {
  Compressor: new () => { setParameters(p: { compressionLevel: number }): void; compress(b: Buffer): Buffer };
}

const GZIP: Codec = { encoding: "gzip", implementation: "zlib", compress: (b) => zlib.gzipSync(b, { level: 6 }) };
const IDENTITY: Codec = { encoding: "identity", implementation: "none", compress: (b) => b };
let zstd: Promise<Codec> | undefined;

/** zstd from `native` (zlib's) if given, else from the module `load` imports (zstd-napi), else gzip (warned). */
export async function chooseZstd(native: ((b: Buffer) => Buffer) | undefined, load: () => Promise<unknown>): Promise<Codec> {
  if (native !== undefined) return { encoding: "zstd", implementation: "zlib", compress: (b) => native(b) };
  let reason: string;
  try {
    const mod = (await load()) as ZstdNapi & { default?: ZstdNapi };
    const Compressor = mod.Compressor ?? mod.default?.Compressor;
    const c = new Compressor();
    c.setParameters({ compressionLevel: 3 });
    return { encoding: "zstd", implementation: "zstd-napi", compress: (b) => c.compress(b) };
  } catch (err) {
    reason = err instanceof Error ? err.message.split("\n")[0] ?? "" : String(err);
  }
  process.emitWarning(`headwater: zstd is unavailable (Node ${process.versions.node} has no zlib zstd, and the optional ` +
    `zstd-napi binding did not load: ${reason}); sending gzip instead. Install with scripts enabled, or use ` +
    "Node >= 22.15, to send zstd.", { code: "HEADWATER_ZSTD_UNAVAILABLE" });
  return { ...GZIP, implementation: "zlib-gzip" };
}

/** The codec for `encoding` (zstd is looked up once per process). */
export function codecFor(encoding: Compression): Promise<Codec> {
  if (encoding === "gzip") return Promise.resolve(GZIP);
  if (encoding === "identity") return Promise.resolve(IDENTITY);
  zstd ??= chooseZstd((zlib as ZlibWithZstd).zstdCompressSync, () => import("zstd-napi"));
  return zstd;
}
