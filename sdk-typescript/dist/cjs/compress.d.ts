/**
 * Request-body compression: the codec a client uses, chosen once per process.
 *
 * zstd comes from `node:zlib` where the runtime has it (Node >= 22.15 and 23.8), else from the optional
 * `zstd-napi` binding (a native module built by its install script). Where neither loads (Node 20 or 22.14 with
 * install scripts disabled, as pnpm and some CI setups do), the client sends gzip instead, which every gateway
 * accepts, and says so once with a process warning (code `HEADWATER_ZSTD_UNAVAILABLE`). `codecFor()` tells
 * which was chosen; the client's `codec()` too.
 */
import type { Compression } from "./config.js";
/** A codec: the Content-Encoding it produces, where it comes from, and the function. */
export interface Codec {
    readonly encoding: Compression;
    /** `zlib`, `zstd-napi`, `zlib-gzip` (zstd was asked for but is unavailable) or `none`. */
    readonly implementation: "zlib" | "zstd-napi" | "zlib-gzip" | "none";
    compress(body: Buffer): Buffer;
}
/** zstd from `native` (zlib's) if given, else from the module `load` imports (zstd-napi), else gzip (warned). */
export declare function chooseZstd(native: ((b: Buffer) => Buffer) | undefined, load: () => Promise<unknown>): Promise<Codec>;
/** The codec for `encoding` (zstd is looked up once per process). */
export declare function codecFor(encoding: Compression): Promise<Codec>;
