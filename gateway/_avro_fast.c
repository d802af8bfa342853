/* The Avro fast path's per-event work in one pass, compiled (gateway/avro_fast.py is its Python side and its
 * fallback when this extension is not built):
 *
 *   envelopes(events, factory) -> list: for each framed event (magic byte + 4-byte schema id + Avro body), the
 *       envelope fields every event schema starts with (string event_id, event_type, producer_id; long seq;
 *       string node_id; long created_at, sent_at) as factory(...), or None when they are unreadable.
 *   skip(program, framed) -> int: reads the whole body as the schema `program` describes (bytecode made by
 *       avro_fast.compile_program) and returns where it ended; ValueError when the bytes are not a value of
 *       that schema (truncated, varint over 10 bytes, negative length, union branch or enum symbol out of
 *       range, boolean other than 0/1, int beyond 32 bits, string not UTF-8).
 *
 * Nothing here allocates per field: strings are checked in place, only the envelope's become Python objects.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { OP_NULL, OP_BOOLEAN, OP_INT, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_STRING, OP_FIXED, OP_ENUM,
       OP_ARRAY, OP_MAP, OP_UNION, OP_RECORD };

#define MAX_DEPTH 64

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    const char *error;
} Cursor;

static int read_long(Cursor *c, int64_t *out) {
    uint64_t acc = 0;
    int shift = 0;
    while (1) {
        if (c->p >= c->end) { c->error = "truncated varint"; return -1; }
        unsigned char b = *c->p++;
        acc |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) { c->error = "varint too long"; return -1; }
    }
    *out = (int64_t)((acc >> 1) ^ (~(acc & 1) + 1));
    return 0;
}

static int read_length(Cursor *c, Py_ssize_t *out) {
    int64_t n;
    if (read_long(c, &n) < 0) return -1;
    if (n < 0) { c->error = "negative length"; return -1; }
    if (n > (int64_t)(c->end - c->p)) { c->error = "length beyond the end of the event"; return -1; }
    *out = (Py_ssize_t)n;
    return 0;
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF), checked in place. */
static int valid_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) { i++; continue; }
        int len;
        uint32_t cp;
        if ((b & 0xE0) == 0xC0) { len = 2; cp = b & 0x1F; }
        else if ((b & 0xF0) == 0xE0) { len = 3; cp = b & 0x0F; }
        else if ((b & 0xF8) == 0xF0) { len = 4; cp = b & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

static uint32_t u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* The end of the node starting at `prog` (every node's size is known from its header). */
static const unsigned char *node_end(const unsigned char *prog) {
    switch (*prog) {
    case OP_FIXED: case OP_ENUM: return prog + 5;
    case OP_ARRAY: case OP_MAP: case OP_UNION: case OP_RECORD: return prog + 9 + u32(prog + 5);
    default: return prog + 1;
    }
}

static int skip_node(Cursor *c, const unsigned char *prog, int depth);

static int skip_blocks(Cursor *c, const unsigned char *item, int is_map, int depth) {
    while (1) {
        int64_t count;
        if (read_long(c, &count) < 0) return -1;
        if (count == 0) return 0;
        if (count < 0) {
            int64_t size;
            if (count == INT64_MIN) { c->error = "block count out of range"; return -1; }
            count = -count;
            if (read_long(c, &size) < 0) return -1;
        }
        if (count > (int64_t)(c->end - c->p)) { c->error = "block count beyond the end of the event"; return -1; }
        for (int64_t i = 0; i < count; i++) {
            if (is_map) {
                Py_ssize_t n;
                if (read_length(c, &n) < 0) return -1;
                if (!valid_utf8(c->p, n)) { c->error = "map key is not UTF-8"; return -1; }
                c->p += n;
            }
            if (skip_node(c, item, depth + 1) < 0) return -1;
        }
    }
}

static int skip_node(Cursor *c, const unsigned char *prog, int depth) {
    Py_ssize_t n;
    int64_t v;
    if (depth > MAX_DEPTH) { c->error = "nested too deeply"; return -1; }
    switch (*prog) {
    case OP_NULL:
        return 0;
    case OP_BOOLEAN:
        if (c->p >= c->end) { c->error = "truncated boolean"; return -1; }
        if (*c->p > 1) { c->error = "boolean byte is not 0 or 1"; return -1; }
        c->p++;
        return 0;
    case OP_INT:
        if (read_long(c, &v) < 0) return -1;
        if (v < INT32_MIN || v > INT32_MAX) { c->error = "int beyond 32 bits"; return -1; }
        return 0;
    case OP_LONG:
        return read_long(c, &v);
    case OP_FLOAT: case OP_DOUBLE:
        n = *prog == OP_FLOAT ? 4 : 8;
        if (c->end - c->p < n) { c->error = "truncated number"; return -1; }
        c->p += n;
        return 0;
    case OP_BYTES: case OP_STRING:
        if (read_length(c, &n) < 0) return -1;
        if (*prog == OP_STRING && !valid_utf8(c->p, n)) { c->error = "string is not UTF-8"; return -1; }
        c->p += n;
        return 0;
    case OP_FIXED:
        n = (Py_ssize_t)u32(prog + 1);
        if (c->end - c->p < n) { c->error = "truncated fixed"; return -1; }
        c->p += n;
        return 0;
    case OP_ENUM:
        if (read_long(c, &v) < 0) return -1;
        if (v < 0 || v >= (int64_t)u32(prog + 1)) { c->error = "enum symbol out of range"; return -1; }
        return 0;
    case OP_ARRAY: case OP_MAP:
        return skip_blocks(c, prog + 9, *prog == OP_MAP, depth);
    case OP_UNION: {
        const unsigned char *branch = prog + 9;
        if (read_long(c, &v) < 0) return -1;
        if (v < 0 || v >= (int64_t)u32(prog + 1)) { c->error = "union branch out of range"; return -1; }
        for (int64_t i = 0; i < v; i++) branch = node_end(branch);
        return skip_node(c, branch, depth + 1);
    }
    case OP_RECORD: {
        const unsigned char *field = prog + 9;
        for (uint32_t i = 0, count = u32(prog + 1); i < count; i++) {
            if (skip_node(c, field, depth + 1) < 0) return -1;
            field = node_end(field);
        }
        return 0;
    }
    default:
        c->error = "corrupt program";
        return -1;
    }
}

static PyObject *fast_skip(PyObject *self, PyObject *args) {
    Py_buffer program, framed;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*", &program, &framed)) return NULL;
    PyObject *result = NULL;
    if (program.len < 1 || framed.len < 5) {
        PyErr_SetString(PyExc_ValueError, framed.len < 5 ? "event shorter than its framing" : "empty program");
    } else {
        Cursor c = {(const unsigned char *)framed.buf + 5, (const unsigned char *)framed.buf + framed.len, NULL};
        if (skip_node(&c, (const unsigned char *)program.buf, 0) < 0)
            PyErr_SetString(PyExc_ValueError, c.error ? c.error : "unreadable");
        else
            result = PyLong_FromSsize_t(c.p - (const unsigned char *)framed.buf);
    }
    PyBuffer_Release(&program);
    PyBuffer_Release(&framed);
    return result;
}

static PyObject *read_str(Cursor *c) {
    Py_ssize_t n;
    if (read_length(c, &n) < 0) return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)c->p, n, "strict");
    c->p += n;
    return s;
}

/* One event's envelope as factory(event_id, event_type, producer_id, seq, node_id, created_at, sent_at), or
 * NULL with no exception set when it is unreadable (NULL with an exception: out of memory). */
static PyObject *envelope(const unsigned char *data, Py_ssize_t len, PyObject *factory) {
    Cursor c = {data + 5, data + len, NULL};
    PyObject *f[7] = {NULL};
    int64_t v;
    int ok = 1;
    for (int i = 0; i < 7 && ok; i++) {
        if (i == 3 || i == 5 || i == 6) {
            ok = read_long(&c, &v) == 0 && (f[i] = PyLong_FromLongLong(v)) != NULL;
        } else {
            ok = (f[i] = read_str(&c)) != NULL;
        }
    }
    PyObject *env = NULL;
    if (ok) {
        env = PyObject_CallFunctionObjArgs(factory, f[0], f[1], f[2], f[3], f[4], f[5], f[6], NULL);
    } else if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    for (int i = 0; i < 7; i++) Py_XDECREF(f[i]);
    return env;
}

static PyObject *fast_envelopes(PyObject *self, PyObject *args) {
    PyObject *events, *factory;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &events, &factory)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(events);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(events, i);
        if (!PyBytes_Check(item)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "events must be bytes");
            return NULL;
        }
        PyObject *env = NULL;
        if (PyBytes_GET_SIZE(item) >= 5)
            env = envelope((const unsigned char *)PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item), factory);
        if (env == NULL) {
            if (PyErr_Occurred()) { Py_DECREF(out); return NULL; }
            env = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(out, i, env);
    }
    return out;
}

/* gateway.avro_batch.envelope_problem's UUID rule: `^[0-9a-fA-F]{8}-…-[0-9a-fA-F]{12}$` with Python's `$`, which also
 * matches before one trailing newline. */
static int is_uuid(PyObject *s) {
    if (!PyUnicode_Check(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 37 && PyUnicode_READ_CHAR(s, 36) == '\n') n = 36;
    if (n != 36) return 0;
    for (Py_ssize_t i = 0; i < 36; i++) {
        Py_UCS4 ch = PyUnicode_READ_CHAR(s, i);
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (ch != '-') return 0;
        } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))) {
            return 0;
        }
    }
    return 1;
}

/* The index and kind (1: ids, 2: negative numbers, 3: long texts) of the first envelope breaking the rules of
 * envelope_problem, in its order of checks; None when all are fine. Envelopes are (event_id, event_type,
 * producer_id, seq, node_id, created_at, sent_at) tuples, or None (unreadable, skipped). */
static PyObject *fast_first_problem(PyObject *self, PyObject *args) {
    PyObject *envs;
    Py_ssize_t max_text;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &envs, &max_text)) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(envs); i++) {
        PyObject *env = PyList_GET_ITEM(envs, i);
        if (env == Py_None) continue;
        if (!PyTuple_Check(env) || PyTuple_GET_SIZE(env) != 7) {
            PyErr_SetString(PyExc_TypeError, "envelopes must be 7-tuples or None");
            return NULL;
        }
        int kind = 0;
        if (!is_uuid(PyTuple_GET_ITEM(env, 0)) || !is_uuid(PyTuple_GET_ITEM(env, 2))) {
            kind = 1;
        } else {
            int idx[3] = {3, 5, 6};
            for (int k = 0; k < 3 && !kind; k++) {  /* longs read by envelopes(): each fits 64 bits */
                long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(env, idx[k]));
                if (v == -1 && PyErr_Occurred()) return NULL;
                if (v < 0) kind = 2;
            }
            if (!kind && (PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(env, 4)) > max_text
                          || PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(env, 1)) > max_text)) {
                kind = 3;
            }
        }
        if (kind) return Py_BuildValue("(ni)", i, kind);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"first_problem", fast_first_problem, METH_VARARGS, "The first envelope breaking the envelope rules, or None."},
    {"skip", fast_skip, METH_VARARGS, "Read a framed event's body with a compiled schema program; its end."},
    {"envelopes", fast_envelopes, METH_VARARGS, "The envelope of each framed event (None: unreadable)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_avro_fast", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__avro_fast(void) { return PyModule_Create(&module); }
