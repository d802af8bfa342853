/**
 * A small Avro binary writer for the fast path (protocol.md section 3): schemas compiled into writer
 * functions (records, enums, arrays, maps, unions, fixed, primitives, named references), values mapped as
 * protocol.md section 2 maps JSON onto Avro (bytes and fixed as base64), and batch.avsc's record.
 */
/** A value does not match the schema: the event is rejected locally (`schema_mismatch`). */
export declare class AvroMismatch extends Error {
}
/** A growable output buffer. */
export declare class AvroWriter {
    buf: Buffer<ArrayBuffer>;
    pos: number;
    private room;
    byte(b: number): void;
    long(n: number | bigint): void;
    bytes(b: Buffer): void;
    raw(b: Buffer): void;
    string(s: string): void;
    float(x: number): void;
    double(x: number): void;
    result(): Buffer;
}
type Write = (w: AvroWriter, value: unknown) => void;
type Schema = string | Schema[] | {
    [key: string]: unknown;
};
interface Compiled {
    write: Write;
    /** Does `value` belong to this branch (for unions)? */
    accepts: (value: unknown) => boolean;
}
/** Compiles schemas; named types (records, enums, fixed) are shared across the schemas of one compiler. */
export declare class AvroCompiler {
    private readonly named;
    compile(schema: Schema, namespace?: string, path?: string): Compiled;
    private name;
    private record;
    private union;
}
/** The Avro batch body (batch.avsc): batch_id, sent_at, sdk_name, sdk_version, events (framed bytes). */
export declare function avroBatchBody(batchId: string, sentAt: number, sdkName: string, sdkVersion: string, events: Buffer[]): Buffer;
/** One event in Confluent framing: magic 0, the 4-byte big-endian schema id, the record's Avro binary. */
export declare function framed(schemaId: number, write: Write, record: unknown): Buffer;
export {};
