/** Request-body compression: zstd (zlib's where the runtime has it, else the zstd-napi binding), gzip, identity. */

import * as zlib from "node:zlib";
import { Compressor } from "zstd-napi";
import type { Compression } from "./config.js";

type ZlibWithZstd = typeof zlib & { zstdCompressSync?: (buf: Buffer) => Buffer };
const native = (zlib as ZlibWithZstd).zstdCompressSync;
let napi: Compressor | undefined;

function zstdNapi(body: Buffer): Buffer {
  if (napi === undefined) {
    napi = new Compressor();
    napi.setParameters({ compressionLevel: 3 });
  }
  return napi.compress(body);
}

/** Which zstd implementation this runtime uses: `zlib` (Node >= 22.15) or `zstd-napi`. */
export const ZSTD_IMPLEMENTATION = native ? "zlib" : "zstd-napi";

/** `body` compressed with `encoding`. */
export function compress(body: Buffer, encoding: Compression): Buffer {
  if (encoding === "zstd") return native ? native(body) : zstdNapi(body);
  if (encoding === "gzip") return zlib.gzipSync(body, { level: 6 });
  return body;
}
