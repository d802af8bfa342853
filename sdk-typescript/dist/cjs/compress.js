"use strict";
/**
 * Request-body compression: the codec a client uses, chosen once per process.
 *
 * zstd comes from `node:zlib` where the runtime has it (Node >= 22.15 and 23.8), else from the optional
 * `zstd-napi` binding (a native module built by its install script). Where neither loads (Node 20 or 22.14 with
 * install scripts disabled, as pnpm and some CI setups do), the client sends gzip instead, which every gateway
 * accepts, and says so once with a process warning (code `HEADWATER_ZSTD_UNAVAILABLE`). `codecFor()` tells
 * which was chosen; the client's `codec()` too.
 */
var __createBinding = (this && this.__createBinding) || (Object.create ? (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    var desc = Object.getOwnPropertyDescriptor(m, k);
    if (!desc || ("get" in desc ? !m.__esModule : desc.writable || desc.configurable)) {
      desc = { enumerable: true, get: function() { return m[k]; } };
    }
    Object.defineProperty(o, k2, desc);
}) : (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    o[k2] = m[k];
}));
var __setModuleDefault = (this && this.__setModuleDefault) || (Object.create ? (function(o, v) {
    Object.defineProperty(o, "default", { enumerable: true, value: v });
}) : function(o, v) {
    o["default"] = v;
});
var __importStar = (this && this.__importStar) || (function () {
    var ownKeys = function(o) {
        ownKeys = Object.getOwnPropertyNames || function (o) {
            var ar = [];
            for (var k in o) if (Object.prototype.hasOwnProperty.call(o, k)) ar[ar.length] = k;
            return ar;
        };
        return ownKeys(o);
    };
    return function (mod) {
        if (mod && mod.__esModule) return mod;
        var result = {};
        if (mod != null) for (var k = ownKeys(mod), i = 0; i < k.length; i++) if (k[i] !== "default") __createBinding(result, mod, k[i]);
        __setModuleDefault(result, mod);
        return result;
    };
})();
Object.defineProperty(exports, "__esModule", { value: true });
exports.chooseZstd = chooseZstd;
exports.codecFor = codecFor;
const zlib = __importStar(require("node:zlib"));
const GZIP = { encoding: "gzip", implementation: "zlib", compress: (b) => zlib.gzipSync(b, { level: 6 }) };
const IDENTITY = { encoding: "identity", implementation: "none", compress: (b) => b };
let zstd;
/** zstd from `native` (zlib's) if given, else from the module `load` imports (zstd-napi), else gzip (warned). */
async function chooseZstd(native, load) {
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
function codecFor(encoding) {
    if (encoding === "gzip")
        return Promise.resolve(GZIP);
    if (encoding === "identity")
        return Promise.resolve(IDENTITY);
    zstd ??= chooseZstd(zlib.zstdCompressSync, () => Promise.resolve().then(() => __importStar(require("zstd-napi"))));
    return zstd;
}
