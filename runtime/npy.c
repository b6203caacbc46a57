/* runtime/npy.c: NumPy .npy files of float32, int32, int64 and bool, read
 * and written.
 *
 * A .npy file is the magic "\x93NUMPY", a major and minor version byte, a
 * little-endian header length (2 bytes in version 1.0, 4 in 2.0 and 3.0),
 * the header, and the raw data. The header is a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces to a newline. We only deal in little-endian types in C order
 * ('<f4', '<i4', '<i8', and '|b1' for bool, one byte each), which is what
 * the host (x86-64) holds in memory, so the data is copied as it is.
 *
 * Inputs come from users, so the reader trusts nothing: the header is
 * parsed as the small Python grammar it is (keys in any order, either
 * quote, free whitespace, trailing commas, () and (5,) tuples) rather than
 * searched with strstr, every length is checked against the file's real
 * size before anything is allocated, and a file must end exactly where its
 * data does. The writer produces the bytes numpy's own np.save produces and
 * replaces its target atomically through a temporary file and rename.
 */
#include "dietcode/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "npy.c copies float32 data as little-endian bytes");

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define ALIGN 64             /* numpy aligns the data offset to this */
#define GROWTH_DIGITS 21     /* numpy leaves room for shape[0] to grow */
#define MAX_HEADER (1 << 20) /* numpy itself refuses more than 10000 */

/* Each element type: numpy's name and descr, and its size. */
static const struct {
    const char *name, *descr;
    int size;
} types[] = {
    [DCRT_F32] = {"float32", "<f4", 4},
    [DCRT_I32] = {"int32", "<i4", 4},
    [DCRT_I64] = {"int64", "<i8", 8},
    [DCRT_BOOL] = {"bool", "|b1", 1},
};
enum { NTYPES = sizeof types / sizeof *types };
/* The most elements of an array of dtype: its size in bytes fits in int64_t. */
#define MAX_NUMEL(dtype) (INT64_MAX / types[dtype].size)

static bool known(int32_t dtype) { return dtype >= 0 && dtype < NTYPES; }

int rt_dtype_size(int32_t dtype) { return known(dtype) ? types[dtype].size : 0; }

const char *rt_dtype_name(int32_t dtype) { return known(dtype) ? types[dtype].name : "?"; }

typedef struct Err {
    const char *path;
    char *buf;
    size_t len;
} Err;

/* Writes "PATH: message" to the caller's buffer as one line and returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(const Err *e, const char *fmt, ...)
{
    if (!e->buf || !e->len)
        return -1;
    int n = snprintf(e->buf, e->len, "%s: ", e->path);
    if (n >= 0 && (size_t)n < e->len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->buf + n, e->len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    for (char *p = e->buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return -1;
}

int64_t rt_array_numel(const RtArray *a)
{
    if (!a || a->rank < 0 || a->rank > RT_NPY_MAX_RANK || !known(a->dtype))
        return -1;
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) {
        if (a->shape[i] < 0 || a->shape[i] > MAX_NUMEL(a->dtype) / (n ? n : 1))
            return -1;
        n *= a->shape[i];
    }
    return n;
}

void rt_array_free(RtArray *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- header parsing ---- */

enum { K_DESCR, K_FORTRAN, K_SHAPE, K_COUNT };
static const char *const keys[K_COUNT] = {"descr", "fortran_order", "shape"};

typedef struct Lex {
    const char *p, *end;
    const Err *e;
} Lex;

typedef struct Header {
    const char *descr; /* points into the header text */
    size_t descr_len;
    bool fortran;
    int rank;
    int64_t shape[RT_NPY_MAX_RANK];
} Header;

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) { return is_digit(c) || c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

static void skip_ws(Lex *l)
{
    while (l->p < l->end && is_space(*l->p))
        l->p++;
}

static bool eat(Lex *l, char c)
{
    skip_ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return true;
    }
    return false;
}

static int expected(Lex *l, const char *what)
{
    skip_ws(l);
    if (l->p == l->end)
        return fail(l->e, "bad header: expected %s, found the end", what);
    int n = l->end - l->p < 12 ? (int)(l->end - l->p) : 12;
    return fail(l->e, "bad header: expected %s at \"%.*s\"", what, n, l->p);
}

/* A quoted string without escapes, as repr() writes a dtype or a key. */
static bool string(Lex *l, const char **s, size_t *n)
{
    skip_ws(l);
    if (l->p == l->end || (*l->p != '\'' && *l->p != '"'))
        return false;
    const char *q = l->p + 1;
    while (q < l->end && *q != *l->p && *q != '\\' && *q != '\n')
        q++;
    if (q == l->end || *q != *l->p)
        return false;
    *s = l->p + 1;
    *n = (size_t)(q - *s);
    l->p = q + 1;
    return true;
}

static bool word(Lex *l, const char *w)
{
    skip_ws(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n))
        return false;
    const char *q = l->p + n;
    if (q < l->end && is_ident(*q))
        return false;
    l->p = q;
    return true;
}

static int dim(Lex *l, int64_t *out)
{
    skip_ws(l);
    bool neg = l->p < l->end && *l->p == '-';
    l->p += neg;
    if (l->p == l->end || !is_digit(*l->p))
        return expected(l, "a dimension");
    int64_t v = 0;
    for (; l->p < l->end && is_digit(*l->p); l->p++) {
        if (v > (INT64_MAX - (*l->p - '0')) / 10)
            return fail(l->e, "bad header: dimension too large in shape");
        v = v * 10 + (*l->p - '0');
    }
    if (l->p < l->end && *l->p == 'L') /* Python 2 long */
        l->p++;
    if (neg && v)
        return fail(l->e, "negative dimension -%lld in shape", (long long)v);
    *out = v;
    return 0;
}

static int shape(Lex *l, Header *h)
{
    if (!eat(l, '('))
        return expected(l, "a shape tuple");
    if (eat(l, ')'))
        return 0;
    for (;;) {
        if (h->rank == RT_NPY_MAX_RANK)
            return fail(l->e, "shape has more than %d dimensions", RT_NPY_MAX_RANK);
        if (dim(l, &h->shape[h->rank++]) < 0)
            return -1;
        if (eat(l, ',')) {
            if (eat(l, ')'))
                return 0;
        } else if (h->rank > 1 && eat(l, ')')) {
            return 0;
        } else {
            return expected(l, h->rank == 1 ? "','" : "',' or ')'");
        }
    }
}

static int parse_header(Lex *l, Header *h)
{
    if (l->p == l->end || l->end[-1] != '\n')
        return fail(l->e, "bad header: not terminated by a newline");
    if (!eat(l, '{'))
        return expected(l, "'{'");
    unsigned seen = 0;
    while (!eat(l, '}')) {
        const char *s;
        size_t n;
        if (!string(l, &s, &n))
            return expected(l, "a quoted key or '}'");
        int k = 0;
        while (k < K_COUNT && (strlen(keys[k]) != n || memcmp(keys[k], s, n)))
            k++;
        if (k == K_COUNT)
            return fail(l->e, "bad header: unexpected key '%.*s'", n > 40 ? 40 : (int)n, s);
        if (seen & 1u << k)
            return fail(l->e, "bad header: duplicate key '%s'", keys[k]);
        seen |= 1u << k;
        if (!eat(l, ':'))
            return expected(l, "':'");
        if (k == K_DESCR && !string(l, &h->descr, &h->descr_len))
            return fail(l->e, "dtype is not a simple type string, expected one of '<f4' '<i4' "
                              "'<i8' '|b1'");
        if (k == K_FORTRAN && !(h->fortran = word(l, "True")) && !word(l, "False"))
            return expected(l, "True or False");
        if (k == K_SHAPE && shape(l, h) < 0)
            return -1;
        if (!eat(l, ',')) {
            if (!eat(l, '}'))
                return expected(l, "',' or '}'");
            break;
        }
    }
    skip_ws(l);
    if (l->p != l->end)
        return expected(l, "the end of the header");
    for (int k = 0; k < K_COUNT; k++)
        if (!(seen & 1u << k))
            return fail(l->e, "bad header: no '%s' key", keys[k]);
    return 0;
}

/* ---- reading ---- */

static bool read_all(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n; }

static int read_npy(FILE *f, const Err *e, RtArray *out, char **hbuf)
{
    struct stat st;
    if (fstat(fileno(f), &st) < 0) /* a regular file: rt_open_read */
        return fail(e, "%s", strerror(errno));
    int64_t size = st.st_size;
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    if (!got || memcmp(pre, MAGIC, got < MAGIC_LEN ? got : MAGIC_LEN))
        return fail(e, "not a .npy file (bad magic)");
    if (got < 10)
        return fail(e, "truncated: file ends inside the preamble");
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return fail(e, "unsupported .npy format version %d.%d", pre[6], pre[7]);
    int64_t hlen = pre[8] | pre[9] << 8, off = 10;
    if (pre[6] > 1) {
        if (!read_all(f, pre + 10, 2))
            return fail(e, "truncated: file ends inside the preamble");
        hlen |= (int64_t)pre[10] << 16 | (int64_t)pre[11] << 24;
        off = 12;
    }
    if (hlen > size - off)
        return fail(e, "truncated: header is %lld bytes, file has %lld after the preamble",
                    (long long)hlen, (long long)(size - off));
    if (hlen > MAX_HEADER)
        return fail(e, "header is %lld bytes, more than the %d allowed", (long long)hlen,
                    MAX_HEADER);
    if (!(*hbuf = malloc((size_t)hlen + 1)))
        return fail(e, "out of memory");
    if (!read_all(f, *hbuf, (size_t)hlen))
        return fail(e, "read error: %s", ferror(f) ? strerror(errno) : "file shrank");
    Header h = {0};
    Lex l = {*hbuf, *hbuf + hlen, e};
    if (parse_header(&l, &h) < 0)
        return -1;
    int32_t dt = 0;
    while (dt < NTYPES && (h.descr_len != 3 || memcmp(h.descr, types[dt].descr, 3)))
        dt++;
    if (dt == NTYPES)
        return fail(e, "dtype is '%.*s', expected float32 '<f4', int32 '<i4', int64 '<i8' or "
                       "bool '|b1'",
                    h.descr_len > 40 ? 40 : (int)h.descr_len, h.descr);
    if (h.fortran)
        return fail(e, "fortran_order arrays are not supported");
    RtArray a = {.rank = h.rank, .dtype = dt};
    int64_t sz = types[dt].size;
    memcpy(a.shape, h.shape, sizeof a.shape);
    int64_t n = rt_array_numel(&a), have = size - off - hlen;
    if (n < 0)
        return fail(e, "shape is too large (more than %lld elements)", (long long)MAX_NUMEL(dt));
    if (have < sz * n)
        return fail(e, have % sz ? "truncated: header says %lld elements, file has %lld bytes"
                                 : "truncated: header says %lld elements, file has %lld",
                    (long long)n, (long long)(have % sz ? have : have / sz));
    if (have > sz * n)
        return fail(e, "trailing data: %lld bytes after the %lld elements the header says",
                    (long long)(have - sz * n), (long long)n);
    if ((uint64_t)n > SIZE_MAX / (uint64_t)sz || !(a.data = malloc(n ? (size_t)(n * sz) : 8)))
        return fail(e, "out of memory for %lld elements", (long long)n);
    if (!read_all(f, a.data, (size_t)(n * sz)) || fgetc(f) != EOF) {
        free(a.data);
        return fail(e, "read error: %s", ferror(f) ? strerror(errno) : "file changed");
    }
    *out = a;
    return 0;
}

int rt_npy_read(const char *path, RtArray *out, char *err, size_t errlen)
{
    Err e = {path, err, errlen};
    memset(out, 0, sizeof *out);
    FILE *f = rt_open_read(path, err, errlen);
    if (!f)
        return -1;
    char *hbuf = NULL;
    int rc = read_npy(f, &e, out, &hbuf);
    free(hbuf);
    fclose(f);
    return rc;
}

/* ---- writing ---- */

/* Formats the preamble and header exactly as numpy 2's np.save does into
 * buf (HEAD_MAX bytes) and returns their length. */
#define HEAD_MAX RT_NPY_HEAD_MAX
static size_t format_header(char *buf, const RtArray *a)
{
    char dict[HEAD_MAX - 12 - ALIGN], *p = dict;
    p += sprintf(p, "{'descr': '%s', 'fortran_order': False, 'shape': (", types[a->dtype].descr);
    for (int i = 0; i < a->rank; i++)
        p += sprintf(p, i ? ", %lld" : "%lld", (long long)a->shape[i]);
    p += sprintf(p, a->rank == 1 ? ",), }" : "), }");
    if (a->rank > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)a->shape[0]);
        p += sprintf(p, "%*s", GROWTH_DIGITS - digits, "");
    }
    size_t len = (size_t)(p - dict) + 1, lenb = 2; /* +1 for the final '\n' */
    size_t hlen = len + ALIGN - (MAGIC_LEN + 2 + lenb + len) % ALIGN;
    if (hlen > 65535) { /* version 2.0; cannot happen with 8 dimensions */
        lenb = 4;
        hlen = len + ALIGN - (MAGIC_LEN + 2 + lenb + len) % ALIGN;
    }
    memcpy(buf, MAGIC, MAGIC_LEN);
    buf[6] = lenb == 2 ? 1 : 2;
    buf[7] = 0;
    for (size_t i = 0; i < lenb; i++)
        buf[8 + i] = (char)(hlen >> 8 * i);
    char *h = buf + 8 + lenb;
    memcpy(h, dict, len - 1);
    memset(h + len - 1, ' ', hlen - len);
    h[hlen - 1] = '\n';
    return 8 + lenb + hlen;
}

size_t rt_npy_header(const RtArray *a, char buf[RT_NPY_HEAD_MAX])
{
    if (!a || a->rank < 0 || a->rank > RT_NPY_MAX_RANK || rt_array_numel(a) < 0 ||
        !known(a->dtype))
        return 0;
    return format_header(buf, a);
}

int rt_npy_write(const char *path, const RtArray *a, char *err, size_t errlen)
{
    Err e = {path, err, errlen};
    if (!a || a->rank < 0 || a->rank > RT_NPY_MAX_RANK)
        return fail(&e, "rank %d is out of range 0..%d", a ? a->rank : -1, RT_NPY_MAX_RANK);
    int64_t n = rt_array_numel(a);
    if (n < 0)
        return fail(&e, "shape has a negative dimension or is too large");
    if (n > 0 && !a->data)
        return fail(&e, "array has no data");
    if (!known(a->dtype))
        return fail(&e, "unknown element type %d", (int)a->dtype);
    char head[HEAD_MAX];
    size_t hlen = format_header(head, a);
    RtOutFiles *o = rt_out_new();
    if (!o)
        return fail(&e, "out of memory");
    int rc = rt_out_add(o, path, head, hlen, a->data, (size_t)n * (size_t)types[a->dtype].size,
                        err, errlen);
    if (rc == 0)
        rc = rt_out_commit(o, err, errlen);
    rt_out_free(o);
    return rc;
}
