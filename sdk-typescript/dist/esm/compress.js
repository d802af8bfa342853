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
const GZIP = { encoding: "gzip", implementation: "zlib", compress: (b) => zlib.gzipSync(b, { level: 6 }) };
const IDENTITY = { encoding: "identity", implementation: "none", compress: (b) => b };
let zstd;
/** zstd from `native` (zlib's) if given, else from the module `load` imports (zstd-napi), else gzip (warned). */
export async function chooseZstd(native, load) {
    if (native !== undefined)
        return { encoding: "zstd", implementation: "zlib", compress: (b) => native(b) };
    let reason;
    try {
        const mod = (await load());
        const Compressor = mod.Compressor ?? mod.default?.Compressor;
        const c = new Compressor();
        c.setParameters({ compressionLevel: 3 });
        return { encoding: "zstd", implementation: "zstd-napi", compress: (b) => c.compress(b) };
    }
    catch (err) {
        reason = err instanceof Error ? err.message.split("\n")[0] ?? "" : String(err);
    }
    process.emitWarning(`headwater: zstd is unavailable (Node ${process.versions.node} has no zlib zstd, and the optional ` +
        `zstd-napi binding did not load: ${reason}); sending gzip instead. Install with scripts enabled, or use ` +
        "Node >= 22.15, to send zstd.", { code: "HEADWATER_ZSTD_UNAVAILABLE" });
    return { ...GZIP, implementation: "zlib-gzip" };
}
/** The codec for `encoding` (zstd is looked up once per process). */
export function codecFor(encoding) {
    if (encoding === "gzip")
        return Promise.resolve(GZIP);
    if (encoding === "identity")
        return Promise.resolve(IDENTITY);
    zstd ??= chooseZstd(zlib.zstdCompressSync, () => import("zstd-napi"));
    return zstd;
}
