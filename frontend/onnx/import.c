/* An ONNX model (protobuf, onnx.proto of ONNX 1.12 decoded by protobuf-c)
 * as a TE program: graph inputs become inputs, each dim_param a dim whose
 * range the caller gives, initializers and Constant nodes constants, and
 * each node the statements of its operator, numpy broadcasting made
 * explicit. Nothing below the frontend knows ONNX.
 *
 * Problems with the model are diagnostics (one line each, naming the node
 * by name, op_type and index); every unsupported operator of a model is
 * listed in one diagnostic with its count. What is built so far: the
 * default domain at opsets 13..21, FLOAT, INT32, INT64 and BOOL tensors,
 * elementwise and comparison operators with broadcasting, Where, Cast,
 * MatMul, Gemm, Softmax, LogSoftmax, Transpose and the Reduce operators;
 * docs/ONNX.md lists them and what is missing.
 */
#include "dietcode/onnx.h"
#include "onnx.pb-c.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAXR = 8, MAX_MODEL_BYTES = 1 << 30 };

/* ONNX's TensorProto.DataType values used here */
enum { OT_FLOAT = 1, OT_INT32 = 6, OT_INT64 = 7, OT_BOOL = 9, OT_FLOAT16 = 10, OT_DOUBLE = 11,
       OT_BFLOAT16 = 16 };

enum { MAXK = 8 }; /* the most elements of a shape value */

typedef struct Val {
    const char *onnx; /* its ONNX name */
    Tensor *t;
    DType dt;
    int rank;
    Expr *shape[MAXR];
    /* a shape value: an integer scalar or vector of at most MAXK elements
     * whose elements are known when compiling as expressions over the dims
     * (a constant's, a Shape's and what integer arithmetic, Gather,
     * Slice, Concat, Unsqueeze and the like make of them); nknown -1 if not */
    int nknown;
    Expr *known[MAXK];
} Val;

typedef struct Imp {
    FeUnit *u;
    TeProgram *p;
    ExprCtx *c;
    const Onnx__GraphProto *g;
    const FeDimRange *ranges;
    int nranges;
    const char *dir; /* the model's folder, where its external data is */
    int64_t opset;
    Val **vals; /* each in the arena: a Val * stays valid as others are added */
    int nvals, capvals;
    bool failed;
    /* the node being imported, for messages */
    const Onnx__NodeProto *node;
    int node_index;
} Imp;

/* ---- messages ---- */

static void fail(Imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(Imp *I, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *dom = I->node && I->node->domain && strcmp(I->node->domain, "ai.onnx") != 0
                      ? I->node->domain : "";
    if (I->node)
        ir_diag(&I->u->diags, (SrcLoc){0, 0}, "node %d ('%s', %s%s%s): %s", I->node_index,
                I->node->name ? I->node->name : "", dom, dom[0] ? "." : "", I->node->op_type, msg);
    else
        ir_diag(&I->u->diags, (SrcLoc){0, 0}, "%s", msg);
    I->failed = true;
}

/* ---- names ---- */

/* Whether name is one the importer gives its axes (i0, k, k0, c, q0, r2,
 * j), which a tensor's would shadow in a .tex program. */
static bool axis_name(const char *name)
{
    if (!name[0] || !strchr("ijkcqr", name[0]))
        return false;
    if (!name[1])
        return name[0] != 'i' && name[0] != 'q' && name[0] != 'r';
    for (const char *p = name + 1; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return name[0] != 'j' && name[0] != 'c';
}

/* ONNX's name as an identifier of the program: letters, digits and _
 * (others become _), not starting with a digit or _, unique, and neither
 * a name the language reserves nor an axis's. */
static const char *ident(Imp *I, const char *onnx, const char *fallback)
{
    char buf[96];
    size_t n = 0;
    const char *s = onnx && *onnx ? onnx : fallback;
    for (; *s && n < sizeof buf - 8; s++) {
        char ch = isalnum((unsigned char)*s) ? *s : '_';
        if (ch == '_' && (n == 0 || buf[n - 1] == '_'))
            continue;
        buf[n++] = ch;
    }
    while (n > 0 && buf[n - 1] == '_')
        n--;
    if (n == 0 || isdigit((unsigned char)buf[0])) {
        memmove(buf + 1, buf, n);
        buf[0] = 'v';
        n++;
    }
    buf[n] = '\0';
    char name[112];
    snprintf(name, sizeof name, "%s", buf);
    for (int k = 2; ir_te_find_tensor(I->p, name) || ir_te_find_dim(I->p, name) ||
                    fe_reserved_name(name) || axis_name(name); k++)
        snprintf(name, sizeof name, "%s_%d", buf, k);
    return ir_arena_strdup(I->u->arena, name);
}

/* ---- values ---- */

static Val *find(Imp *I, const char *name)
{
    for (int i = I->nvals - 1; i >= 0; i--)
        if (strcmp(I->vals[i]->onnx, name) == 0)
            return I->vals[i];
    return NULL;
}

static Val *add_val(Imp *I, const char *onnx, Tensor *t)
{
    if (I->nvals == I->capvals) {
        I->capvals = I->capvals ? 2 * I->capvals : 64;
        I->vals = realloc(I->vals, sizeof *I->vals * (size_t)I->capvals);
        if (!I->vals)
            ir_panic(__FILE__, __LINE__, "out of memory");
    }
    Val *v = I->vals[I->nvals++] = IR_NEW(I->u->arena, Val);
    *v = (Val){ir_arena_strdup(I->u->arena, onnx), t, t->dtype, t->rank, {0}, -1, {0}};
    for (int i = 0; i < t->rank; i++)
        v->shape[i] = t->shape[i];
    int64_t n = 1;
    bool small = t->rank <= 1 && (t->rank == 0 || ir_is_const(t->shape[0], &n)) && n <= MAXK;
    if (t->data && small && (t->dtype == DT_I64 || t->dtype == DT_I32)) {
        v->nknown = (int)n;
        for (int64_t i = 0; i < n; i++)
            v->known[i] = ir_int(I->c, t->dtype == DT_I64 ? ((const int64_t *)t->data)[i]
                                                          : ((const int32_t *)t->data)[i]);
    }
    return v;
}

static bool dtype_of(Imp *I, int32_t ot, const char *what, DType *dt)
{
    switch (ot) {
    case OT_FLOAT: *dt = DT_F32; return true;
    case OT_INT32: *dt = DT_I32; return true;
    case OT_INT64: *dt = DT_I64; return true;
    case OT_BOOL: *dt = DT_BOOL; return true;
    }
    const char *name = ot == OT_FLOAT16 ? "float16" : ot == OT_DOUBLE ? "double" :
                       ot == OT_BFLOAT16 ? "bfloat16" : NULL;
    if (name)
        fail(I, "%s is %s: not supported yet (f32, i32, i64 and bool are)", what, name);
    else
        fail(I, "%s has element type %d: not supported (f32, i32, i64 and bool are)", what, ot);
    return false;
}

/* ---- tensors in files ---- */

/* Parses a decimal byte count of external data; false on anything else. */
static bool parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* The bytes external data describes (location relative to dir, offset,
 * length), malloc'd: a file inside dir, at most its end; NULL and err. */
static void *external_data(const Onnx__TensorProto *tp, const char *dir, size_t bytes, char *err,
                           size_t errlen)
{
    const char *loc = NULL;
    uint64_t offset = 0, length = bytes;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        if (strcmp(k, "location") == 0)
            loc = v;
        else if ((strcmp(k, "offset") == 0 && !parse_size(v, &offset)) ||
                 (strcmp(k, "length") == 0 && !parse_size(v, &length))) {
            snprintf(err, errlen, "external data: %s '%.64s' is not a byte count", k, v);
            return NULL;
        }
    }
    if (!dir) {
        snprintf(err, errlen, "its data is in an external file, which a lone tensor cannot refer to");
        return NULL;
    }
    if (!loc || !*loc) {
        snprintf(err, errlen, "external data without a location");
        return NULL;
    }
    /* ONNX Runtime's rule: a relative path that stays in the model's folder */
    bool escapes = loc[0] == '/';
    for (const char *s = loc; !escapes && s; s = strchr(s, '/') ? strchr(s, '/') + 1 : NULL)
        escapes = strncmp(s, "..", 2) == 0 && (s[2] == '/' || !s[2]);
    if (escapes) {
        snprintf(err, errlen, "external data '%.200s' points outside the model's folder", loc);
        return NULL;
    }
    if (length != bytes) {
        snprintf(err, errlen, "external data '%.200s' holds %llu bytes, its elements need %zu", loc,
                 (unsigned long long)length, bytes);
        return NULL;
    }
    char path[4096], real[PATH_MAX], realdir[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, loc);
    size_t dl = realpath(dir, realdir) ? strlen(realdir) : 0;
    if (!realpath(path, real)) {
        snprintf(err, errlen, "external data '%.200s': %s", path, strerror(errno));
        return NULL;
    }
    if (!dl || strncmp(real, realdir, dl) != 0 || (real[dl] != '/' && dl > 1)) {
        snprintf(err, errlen, "external data '%.200s' points outside the model's folder (to %.200s)",
                 loc, real);
        return NULL;
    }
    FILE *f = rt_open_read(path, err, errlen); /* a regular file */
    if (!f)
        return NULL;
    struct stat st;
    void *out = NULL;
    if (fstat(fileno(f), &st) != 0)
        snprintf(err, errlen, "external data '%.200s': %s", path, strerror(errno));
    else if (offset > (uint64_t)st.st_size || bytes > (uint64_t)st.st_size - offset)
        snprintf(err, errlen, "external data '%.200s': %zu bytes at offset %llu run past its end "
                 "(%lld bytes)", path, bytes, (unsigned long long)offset, (long long)st.st_size);
    else if (!(out = malloc(bytes ? bytes : 1)))
        snprintf(err, errlen, "external data '%.200s': out of memory for %zu bytes", path, bytes);
    else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(out, 1, bytes, f) != bytes) {
        snprintf(err, errlen, "external data '%.200s': cannot read it", path);
        free(out);
        out = NULL;
    }
    fclose(f);
    return out;
}

/* The elements of a TensorProto (raw_data little-endian, the typed fields,
 * or external data in a file of dir, NULL where there is no model), dims
 * and type checked, into a malloc'd buffer; or, where borrowed is
 * non-NULL and raw_data holds them as they are, raw_data itself
 * (*borrowed set: a model's largest weight is not copied twice at once). */
static void *tensor_data(const Onnx__TensorProto *tp, DType dt, const char *dir, int64_t *numel,
                         bool *borrowed, char *err, size_t errlen)
{
    int64_t n = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || (tp->dims[i] > 0 && n > INT64_MAX / 16 / tp->dims[i])) {
            snprintf(err, errlen, "dimension %zu is %lld", i, (long long)tp->dims[i]);
            return NULL;
        }
        n *= tp->dims[i];
    }
    size_t size = (size_t)ir_dtype_size(dt), bytes = (size_t)n * size;
    *numel = n;
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    size_t have = dt == DT_F32 ? tp->n_float_data : dt == DT_I64 ? tp->n_int64_data :
                  tp->n_int32_data;
    /* the data is there before any memory is taken for it */
    if (!external && tp->has_raw_data && tp->raw_data.len != bytes) {
        snprintf(err, errlen, "raw_data holds %zu bytes, its %lld elements need %zu",
                 tp->raw_data.len, (long long)n, bytes);
        return NULL;
    }
    if (!external && !tp->has_raw_data && have != (size_t)n) {
        snprintf(err, errlen, "it holds %zu elements, its dims %lld", have, (long long)n);
        return NULL;
    }
    if (borrowed) /* x86-64: little-endian as the file */
        *borrowed = !external && tp->has_raw_data && dt != DT_BOOL && bytes;
    if (borrowed && *borrowed)
        return tp->raw_data.data;
    void *out = external ? external_data(tp, dir, bytes, err, errlen) : malloc(bytes ? bytes : 1);
    if (!out) {
        if (!external)
            snprintf(err, errlen, "out of memory for %lld elements", (long long)n);
        return NULL;
    }
    if (external) {
        if (dt == DT_BOOL)
            for (size_t i = 0; i < bytes; i++)
                ((uint8_t *)out)[i] = ((uint8_t *)out)[i] != 0;
        return out;
    }
    if (tp->has_raw_data) {
        if (dt == DT_BOOL)
            for (size_t i = 0; i < bytes; i++)
                ((uint8_t *)out)[i] = tp->raw_data.data[i] != 0;
        else
            memcpy(out, tp->raw_data.data, bytes); /* x86-64: little-endian as the file */
        return out;
    }
    for (int64_t i = 0; i < n; i++)
        switch (dt) {
        case DT_F32: ((float *)out)[i] = tp->float_data[i]; break;
        case DT_I64: ((int64_t *)out)[i] = tp->int64_data[i]; break;
        case DT_I32: ((int32_t *)out)[i] = tp->int32_data[i]; break;
        case DT_BOOL: ((uint8_t *)out)[i] = tp->int32_data[i] != 0; break;
        }
    return out;
}

/* A constant of the program from a TensorProto (an initializer, a
 * Constant node's value). Its elements are taken, not copied, where they
 * are a block of their own: decoded or read for it, or (take) tp's
 * raw_data, which tp then no longer holds; so the largest weight is not
 * held twice while the model is imported. */
static Val *add_tensor_proto(Imp *I, const char *onnx, Onnx__TensorProto *tp, bool take)
{
    char what[160], err[1024];
    snprintf(what, sizeof what, "tensor '%s'", onnx);
    DType dt;
    if (!dtype_of(I, tp->has_data_type ? tp->data_type : 0, what, &dt))
        return NULL;
    if (tp->n_dims > MAXR) {
        fail(I, "%s has rank %zu; at most %d is supported", what, tp->n_dims, MAXR);
        return NULL;
    }
    int64_t n;
    bool borrowed;
    void *data = tensor_data(tp, dt, I->dir, &n, &borrowed, err, sizeof err);
    if (!data) {
        fail(I, "%s: %s", what, err);
        return NULL;
    }
    Expr *shape[MAXR] = {NULL};
    for (size_t i = 0; i < tp->n_dims; i++)
        shape[i] = ir_int(I->c, tp->dims[i]);
    bool empty = n == 0, own = !borrowed || take;
    size_t bytes = (size_t)n * (size_t)ir_dtype_size(dt);
    const char *name = ident(I, onnx, "const");
    Tensor *t = empty ? NULL :
                own ? ir_te_adopt_const(I->p, name, dt, (int)tp->n_dims, shape, data, bytes, onnx) :
                      ir_te_add_const(I->p, name, dt, (int)tp->n_dims, shape, data, bytes, onnx);
    if (t && borrowed && take) {
        tp->raw_data.data = NULL;
        tp->raw_data.len = 0;
        tp->has_raw_data = false;
    } else if (!t && !borrowed) {
        free(data);
    }
    if (empty) {
        fail(I, "%s has no elements: not supported", what);
        return NULL;
    }
    return add_val(I, onnx, t);
}

/* The whole file at path (at most MAX_MODEL_BYTES), malloc'd; NULL and a
 * one-line message starting with path. */
static uint8_t *read_all(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = rt_open_read(path, err, errlen);
    if (!f)
        return NULL;
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    *len = 0;
    for (size_t r; buf && (r = fread(buf + *len, 1, cap - *len, f)) > 0;) {
        *len += r;
        if (*len < cap)
            continue;
        uint8_t *nb = cap < (size_t)MAX_MODEL_BYTES ? realloc(buf, cap * 2) : NULL;
        if (!nb) {
            free(buf);
            buf = NULL;
            snprintf(err, errlen, "%s: larger than 1 GB (save a model this large with its "
                     "weights as external data)", path);
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
        snprintf(err, errlen, "%s: cannot read it", path);
    }
    fclose(f);
    return buf;
}

int fe_onnx_read_tensor(const char *path, RtArray *out, char *name, size_t namelen, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t len;
    uint8_t *buf = read_all(path, &len, err, errlen);
    if (!buf)
        return -1;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp) {
        snprintf(err, errlen, "%s: not an ONNX TensorProto", path);
        return -1;
    }
    int rc = -1;
    DType dt = DT_F32;
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    bool known = ot == OT_FLOAT || ot == OT_INT32 || ot == OT_INT64 || ot == OT_BOOL;
    if (known)
        dt = ot == OT_FLOAT ? DT_F32 : ot == OT_INT32 ? DT_I32 : ot == OT_INT64 ? DT_I64 : DT_BOOL;
    if (!known)
        snprintf(err, errlen, "%s: element type %d is not supported", path, ot);
    else if (tp->n_dims > RT_NPY_MAX_RANK)
        snprintf(err, errlen, "%s: rank %zu", path, tp->n_dims);
    else {
        int64_t n;
        char why[1024];
        out->data = tensor_data(tp, dt, NULL, &n, NULL, why, sizeof why);
        if (!out->data)
            snprintf(err, errlen, "%s: %s", path, why);
        else {
            out->rank = (int)tp->n_dims;
            for (size_t i = 0; i < tp->n_dims; i++)
                out->shape[i] = tp->dims[i];
            out->dtype = (int32_t)dt;
            if (name && namelen)
                snprintf(name, namelen, "%s", tp->name ? tp->name : "");
            rc = 0;
        }
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return rc;
}

/* ---- building statements ---- */

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t def)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0 && n->attribute[i]->has_i)
            return n->attribute[i]->i;
    return def;
}

static double attr_float(const Onnx__NodeProto *n, const char *name, double def)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0 && n->attribute[i]->has_f)
            return n->attribute[i]->f;
    return def;
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static bool is_one(Expr *e)
{
    int64_t v;
    return ir_is_const(e, &v) && v == 1;
}

static Var **axes_of(Imp *I, int rank, Expr *const *shape)
{
    Var **ax = IR_NEWN(I->p->arena, Var *, rank ? rank : 1);
    for (int i = 0; i < rank; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "i%d", i);
        ax[i] = ir_var(I->c, nm, VK_AXIS, shape[i]);
    }
    return ax;
}

/* Whether two extents are equal for every value of the dims: the same
 * expression once simplified (ir_simplify's canonical polynomials make
 * s + s and 2 * s, b * s and s * b, (b * s * 768) / 768 and b * s one),
 * or a difference that simplifies to 0. */
static bool same_extent(Imp *I, Expr *a, Expr *b)
{
    a = ir_simplify(I->c, a);
    b = ir_simplify(I->c, b);
    int64_t d;
    return a == b || (ir_is_const(ir_simplify(I->c, ir_binop(I->c, EX_SUB, a, b)), &d) && d == 0);
}

/* An extent as text, for messages. */
static const char *ext_str(Imp *I, Expr *e)
{
    return ir_expr_str(I->u->arena, ir_simplify(I->c, e));
}

/* The broadcast shape of n values (numpy's rule): extents equal, or 1. An
 * extent that may be 1 is never stretched: only the constant 1 is, and
 * other extents must be proven equal. */
static bool broadcast(Imp *I, Val *const *v, int n, int *rank, Expr **shape)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        r = v[i]->rank > r ? v[i]->rank : r;
    for (int d = 0; d < r; d++) {
        Expr *e = NULL;
        for (int i = 0; i < n; i++) {
            int k = d - (r - v[i]->rank);
            if (k < 0)
                continue;
            Expr *x = ir_simplify(I->c, v[i]->shape[k]);
            if (!e || is_one(e))
                e = x;
            else if (!is_one(x) && !same_extent(I, x, e)) {
                int64_t a, b;
                if (ir_is_const(x, &a) && ir_is_const(e, &b))
                    fail(I, "inputs do not broadcast: extents %lld and %lld on axis %d",
                         (long long)a, (long long)b, d);
                else
                    fail(I, "inputs do not broadcast: extents %s and %s on axis %d are not "
                            "proven equal", ext_str(I, e), ext_str(I, x), d);
                return false;
            }
        }
        shape[d] = e;
    }
    *rank = r;
    return true;
}

/* v read at the output point axes (rank r), broadcast axes at 0. */
static Expr *read_at(Imp *I, Val *v, int r, Var *const *axes)
{
    /* a constant of one f32 or i64 element is its value (a literal the
     * kernels compute with, not a load) */
    int64_t one = v->t->data != NULL, e;
    for (int k = 0; k < v->rank && one; k++)
        one = ir_is_const(ir_simplify(I->c, v->shape[k]), &e) && e == 1;
    if (one && v->t->dtype == DT_F32)
        return ir_float(I->c, *(const float *)v->t->data);
    if (one && v->t->dtype == DT_I64)
        return ir_int(I->c, *(const int64_t *)v->t->data);
    Expr *idx[MAXR];
    for (int k = 0; k < v->rank; k++) {
        int d = r - v->rank + k;
        bool stretched = is_one(ir_simplify(I->c, v->shape[k])) &&
                         !is_one(ir_simplify(I->c, axes[d]->extent));
        idx[k] = stretched ? ir_int(I->c, 0) : ir_varref(I->c, axes[d]);
    }
    return ir_load(I->c, v->t, v->rank, idx, false);
}

static bool is_graph_output(Imp *I, const char *name)
{
    for (size_t i = 0; i < I->g->n_output; i++)
        if (strcmp(I->g->output[i]->name, name) == 0)
            return true;
    return false;
}

/* Output k of the node: NAME[axes] TYPE = body. */
static Val *define(Imp *I, int k, DType dt, int rank, Var **axes, Expr *body)
{
    const char *onnx = I->node->output[k];
    Tensor *t = ir_te_add_compute_as(I->p, ident(I, onnx, I->node->op_type),
                                     is_graph_output(I, onnx) ? TK_OUTPUT : TK_TEMP, dt, rank,
                                     axes, body);
    if (!t) {
        fail(I, "cannot define output '%s'", onnx);
        return NULL;
    }
    t->source = ir_arena_strdup(I->p->arena, onnx);
    return add_val(I, onnx, t);
}

/* An intermediate of the node's own, not an ONNX value. */
static Tensor *temp(Imp *I, const char *suffix, DType dt, int rank, Var **axes, Expr *body)
{
    char nm[128];
    snprintf(nm, sizeof nm, "%s_%s", I->node->output[0], suffix);
    return ir_te_add_compute_as(I->p, ident(I, nm, suffix), TK_TEMP, dt, rank, axes, body);
}

static Val *input(Imp *I, int k)
{
    const Onnx__NodeProto *n = I->node;
    if ((size_t)k >= n->n_input || !n->input[k][0])
        return NULL;
    Val *v = find(I, n->input[k]);
    if (!v)
        fail(I, "input '%s' is no graph input, initializer or earlier node's output",
             n->input[k]);
    return v;
}

/* The elements of a constant input (an initializer), as int64, or NULL. */
static const int64_t *const_ints(Imp *I, Val *v, int64_t *n)
{
    if (v && v->nknown >= 0) { /* a shape value whose elements are numbers */
        int64_t *out = IR_NEWN(I->u->arena, int64_t, MAXK);
        for (int i = 0; i < v->nknown; i++)
            if (!ir_is_const(ir_simplify(I->c, v->known[i]), &out[i]))
                return NULL;
        *n = v->nknown;
        return out;
    }
    if (!v || !v->t->data || v->rank > 1 || (v->dt != DT_I64 && v->dt != DT_I32))
        return NULL;
    int64_t e = 1;
    if (v->rank == 1 && !ir_is_const(v->shape[0], &e))
        return NULL;
    int64_t *out = IR_NEWN(I->u->arena, int64_t, e ? e : 1);
    for (int64_t i = 0; i < e; i++)
        out[i] = v->dt == DT_I64 ? ((const int64_t *)v->t->data)[i] :
                                   ((const int32_t *)v->t->data)[i];
    *n = e;
    return out;
}

static Val *define_const(Imp *I, int k, DType dt, int rank, const int64_t *dims, const void *data);

/* Output k as a shape value of n elements (rank 0 when scalar): a
 * constant when they are numbers, else computed from the dims. */
static Val *define_known(Imp *I, int k, DType dt, bool scalar, int n, Expr *const *e)
{
    int64_t num[MAXK];
    bool consts = true;
    for (int i = 0; i < n; i++)
        consts &= ir_is_const(ir_simplify(I->c, e[i]), &num[i]);
    Val *v;
    int64_t len = n;
    if (consts && !is_graph_output(I, I->node->output[k])) {
        if (dt == DT_I64)
            v = define_const(I, k, DT_I64, scalar ? 0 : 1, &len, num);
        else {
            int32_t n32[MAXK];
            for (int i = 0; i < n; i++)
                n32[i] = (int32_t)num[i];
            v = define_const(I, k, dt, scalar ? 0 : 1, &len, dt == DT_I32 ? (void *)n32 : (void *)num);
        }
    } else {
        Expr *shape = ir_int(I->c, n);
        Var **ax = axes_of(I, scalar ? 0 : 1, &shape);
        Expr *body = ir_simplify(I->c, e[n - 1]);
        for (int i = n - 2; i >= 0; i--)
            body = ir_select(I->c, ir_binop(I->c, EX_EQ, ir_varref(I->c, ax[0]), ir_int(I->c, i)),
                             ir_simplify(I->c, e[i]), body);
        v = define(I, k, dt, scalar ? 0 : 1, ax, body);
    }
    if (v) {
        v->nknown = n;
        for (int i = 0; i < n; i++)
            v->known[i] = ir_simplify(I->c, e[i]);
    }
    return v;
}

static int norm_axis(Imp *I, int64_t a, int rank)
{
    if (a < -rank || a >= rank) {
        fail(I, "axis %lld is out of range for rank %d", (long long)a, rank);
        return -1;
    }
    return (int)(a < 0 ? a + rank : a);
}

/* The operators that are not one IR operator, by kind. */
enum { K_SOFTMAX = 1, K_LOGSOFTMAX, K_WHERE, K_CAST, K_IDENTITY, K_MATMUL, K_GEMM, K_TRANSPOSE,
       K_REDUCE, K_MEAN, K_CONSTANT, K_DROPOUT, K_RECIP, K_CLIP, K_RESHAPE, K_CONCAT, K_GATHER,
       K_LAYERNORM, K_EXPAND, K_MEANOF, K_PRELU, K_SHAPE, K_SIZE, K_CONSTOFSHAPE, K_SLICE, K_SPLIT,
       K_REDUCE_L1, K_REDUCE_L2, K_REDUCE_SQ, K_REDUCE_LOGSUM, K_REDUCE_LSE, K_TRILU, K_RANGE,
       K_ARGMAX, K_ARGMIN, K_GATHER_ELEMENTS, K_BATCHNORM, K_MOD, K_CONV, K_MAXPOOL, K_AVGPOOL,
       K_GMAXPOOL, K_GAVGPOOL, K_TILE, K_D2S, K_S2D, K_CUMSUM, K_GATHER_ND };

/* ---- operators ---- */

typedef struct OpUnary { const char *name; ExprKind k; } OpUnary;
static const OpUnary unary_ops[] = {
    {"Neg", EX_NEG}, {"Abs", EX_ABS},   {"Exp", EX_EXP},         {"Log", EX_LOG},
    {"Sqrt", EX_SQRT}, {"Tanh", EX_TANH}, {"Erf", EX_ERF},       {"Sigmoid", EX_SIGMOID},
    {"Relu", EX_RELU}, {"Not", EX_NOT},
};

typedef struct OpBinary { const char *name; ExprKind k; bool swap, cmp; } OpBinary;
static const OpBinary binary_ops[] = {
    {"Add", EX_ADD, false, false},      {"Sub", EX_SUB, false, false},
    {"Mul", EX_MUL, false, false},      {"Div", EX_DIV, false, false},
    {"Pow", EX_POW, false, false},      {"Equal", EX_EQ, false, true},
    {"Less", EX_LT, false, true},       {"LessOrEqual", EX_LE, false, true},
    {"Greater", EX_LT, true, true},     {"GreaterOrEqual", EX_LE, true, true},
    {"And", EX_AND, false, true},       {"Or", EX_OR, false, true},
    {"Xor", EX_NE, false, true},
    {"Max", EX_MAX, false, false},      {"Min", EX_MIN, false, false},
    {"Sum", EX_ADD, false, false},
};

static bool op_unary(Imp *I, ExprKind k)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    Var **ax = axes_of(I, x->rank, x->shape);
    Expr *v = read_at(I, x, x->rank, ax);
    if (k != EX_NOT && x->dt != DT_F32 && k != EX_NEG && k != EX_ABS && k != EX_RELU) {
        fail(I, "%s of %s is not supported", I->node->op_type, ir_dtype_name(x->dt));
        return false;
    }
    return define(I, 0, x->dt, x->rank, ax, ir_unop(I->c, k, v)) != NULL;
}

static Expr *fl(Imp *I, double v) { return ir_float(I->c, v); }

/* The elementwise operators that are compositions of the IR's, of x (an
 * f32 value) and the node's attributes; NULL when op is none of them. */
static Expr *composite(Imp *I, const char *op, Expr *x)
{
    ExprCtx *c = I->c;
    const Onnx__NodeProto *n = I->node;
    Expr *zero = fl(I, 0.0), *one = fl(I, 1.0);
    if (strcmp(op, "LeakyRelu") == 0)
        return ir_select(c, ir_binop(c, EX_LT, x, zero),
                         ir_binop(c, EX_MUL, fl(I, attr_float(n, "alpha", 0.01)), x), x);
    if (strcmp(op, "Elu") == 0)
        return ir_select(c, ir_binop(c, EX_LT, x, zero),
                         ir_binop(c, EX_MUL, fl(I, attr_float(n, "alpha", 1.0)),
                                  ir_binop(c, EX_SUB, ir_unop(c, EX_EXP, x), one)), x);
    if (strcmp(op, "Selu") == 0) {
        Expr *alpha = fl(I, attr_float(n, "alpha", 1.67326319217681884765625));
        Expr *gamma = fl(I, attr_float(n, "gamma", 1.05070102214813232421875));
        Expr *neg = ir_binop(c, EX_SUB, ir_binop(c, EX_MUL, alpha, ir_unop(c, EX_EXP, x)), alpha);
        return ir_binop(c, EX_MUL, gamma, ir_select(c, ir_binop(c, EX_LE, x, zero), neg, x));
    }
    if (strcmp(op, "Celu") == 0) {
        Expr *alpha = fl(I, attr_float(n, "alpha", 1.0));
        Expr *e = ir_binop(c, EX_MUL, alpha,
                           ir_binop(c, EX_SUB, ir_unop(c, EX_EXP, ir_binop(c, EX_DIV, x, alpha)), one));
        return ir_binop(c, EX_ADD, ir_binop(c, EX_MAX, zero, x), ir_binop(c, EX_MIN, zero, e));
    }
    if (strcmp(op, "HardSigmoid") == 0 || strcmp(op, "HardSwish") == 0) {
        bool swish = op[4] == 'S' && op[5] == 'w';
        double alpha = swish ? 1.0 / 6 : attr_float(n, "alpha", 0.2);
        double beta = swish ? 0.5 : attr_float(n, "beta", 0.5);
        Expr *h = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, fl(I, alpha), x), fl(I, beta));
        h = ir_binop(c, EX_MAX, zero, ir_binop(c, EX_MIN, one, h));
        return swish ? ir_binop(c, EX_MUL, x, h) : h;
    }
    if (strcmp(op, "Softplus") == 0)
        return ir_unop(c, EX_LOG, ir_binop(c, EX_ADD, ir_unop(c, EX_EXP, x), one));
    if (strcmp(op, "Softsign") == 0)
        return ir_binop(c, EX_DIV, x, ir_binop(c, EX_ADD, one, ir_unop(c, EX_ABS, x)));
    if (strcmp(op, "Sign") == 0)
        return ir_select(c, ir_binop(c, EX_LT, zero, x), one,
                         ir_select(c, ir_binop(c, EX_LT, x, zero), fl(I, -1.0), zero));
    if (strcmp(op, "ThresholdedRelu") == 0)
        return ir_select(c, ir_binop(c, EX_LT, fl(I, attr_float(n, "alpha", 1.0)), x), x, zero);
    if (strcmp(op, "Mish") == 0)
        return ir_binop(c, EX_MUL, x,
                        ir_unop(c, EX_TANH, ir_unop(c, EX_LOG, ir_binop(c, EX_ADD, ir_unop(c, EX_EXP, x), one))));
    if (strcmp(op, "Gelu") == 0) {
        const Onnx__AttributeProto *ap = attr(n, "approximate");
        bool tanh_form = ap && ap->has_s && ap->s.len == 4 && memcmp(ap->s.data, "tanh", 4) == 0;
        Expr *inner;
        if (tanh_form) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
            Expr *x3 = ir_binop(c, EX_MUL, x, ir_binop(c, EX_MUL, x, x));
            inner = ir_unop(c, EX_TANH,
                            ir_binop(c, EX_MUL, fl(I, 0.7978845608028654),
                                     ir_binop(c, EX_ADD, x, ir_binop(c, EX_MUL, fl(I, 0.044715), x3))));
        } else {
            inner = ir_unop(c, EX_ERF, ir_binop(c, EX_MUL, x, fl(I, 0.7071067811865476)));
        }
        return ir_binop(c, EX_MUL, ir_binop(c, EX_MUL, fl(I, 0.5), x), ir_binop(c, EX_ADD, one, inner));
    }
    if (strcmp(op, "IsNaN") == 0)
        return ir_binop(c, EX_NE, x, x);
    if (strcmp(op, "IsInf") == 0) {
        bool pos = attr_int(n, "detect_positive", 1), neg = attr_int(n, "detect_negative", 1);
        Expr *p = ir_binop(c, EX_EQ, x, fl(I, INFINITY)), *m = ir_binop(c, EX_EQ, x, fl(I, -INFINITY));
        return pos && neg ? ir_binop(c, EX_OR, p, m) : pos ? p : neg ? m : ir_binop(c, EX_NE, zero, zero);
    }
    return NULL;
}

static const char *const composite_ops[] = {
    "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
    "Sign", "ThresholdedRelu", "Mish", "Gelu", "IsNaN", "IsInf",
};

static bool op_composite(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (x->dt != DT_F32) {
        fail(I, "%s of %s is not supported", I->node->op_type, ir_dtype_name(x->dt));
        return false;
    }
    Var **ax = axes_of(I, x->rank, x->shape);
    Expr *e = composite(I, I->node->op_type, read_at(I, x, x->rank, ax));
    return define(I, 0, e->type == DT_BOOL ? DT_BOOL : DT_F32, x->rank, ax, e) != NULL;
}

/* ONNX's integer division truncates toward zero; the IR's floors. */
static Expr *trunc_div(ExprCtx *c, Expr *a, Expr *b)
{
    Expr *q = ir_binop(c, EX_DIV, a, b);
    Expr *inexact = ir_binop(c, EX_NE, ir_binop(c, EX_MOD, a, b), ir_int(c, 0));
    Expr *neg = ir_binop(c, EX_NE, ir_binop(c, EX_LT, a, ir_int(c, 0)),
                         ir_binop(c, EX_LT, b, ir_int(c, 0)));
    return ir_select(c, ir_binop(c, EX_AND, inexact, neg), ir_binop(c, EX_ADD, q, ir_int(c, 1)), q);
}

static bool op_nary(Imp *I, const OpBinary *op)
{
    int n = (int)I->node->n_input;
    Val *v[16];
    if (n < 1 || n > 16 || (n != 2 && strcmp(op->name, "Max") && strcmp(op->name, "Min") &&
                            strcmp(op->name, "Sum"))) {
        fail(I, "%d inputs", n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!(v[i] = input(I, i)))
            return false;
    for (int i = 1; i < n; i++)
        if (v[i]->dt != v[0]->dt) {
            fail(I, "inputs of types %s and %s", ir_dtype_name(v[0]->dt), ir_dtype_name(v[i]->dt));
            return false;
        }
    if (op->k == EX_POW && v[0]->dt != DT_F32) {
        fail(I, "Pow of %s is not supported", ir_dtype_name(v[0]->dt));
        return false;
    }
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, v, n, &r, shape))
        return false;
    Var **ax = axes_of(I, r, shape);
    Expr *e = read_at(I, v[0], r, ax);
    for (int i = 1; i < n; i++) {
        Expr *b = read_at(I, v[i], r, ax);
        double y = b->kind == EX_FLOAT ? b->fval : 0;
        if (op->k == EX_DIV && v[0]->dt != DT_F32)
            e = trunc_div(I->c, e, b);
        else if (op->k == EX_POW && (y == 2.0 || y == 3.0)) /* as ONNX Runtime: x*x, x*x*x */
            e = y == 2.0 ? ir_binop(I->c, EX_MUL, e, e)
                         : ir_binop(I->c, EX_MUL, ir_binop(I->c, EX_MUL, e, e), e);
        else
            e = op->swap ? ir_binop(I->c, op->k, b, e) : ir_binop(I->c, op->k, e, b);
    }
    return define(I, 0, op->cmp ? DT_BOOL : v[0]->dt, r, ax, e) != NULL;
}

static bool op_where(Imp *I)
{
    Val *v[3] = {input(I, 0), input(I, 1), input(I, 2)};
    if (!v[0] || !v[1] || !v[2])
        return false;
    if (v[1]->dt != v[2]->dt) {
        fail(I, "branches of types %s and %s", ir_dtype_name(v[1]->dt), ir_dtype_name(v[2]->dt));
        return false;
    }
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, v, 3, &r, shape))
        return false;
    Var **ax = axes_of(I, r, shape);
    Expr *cond = ir_cast(I->c, DT_BOOL, read_at(I, v[0], r, ax));
    return define(I, 0, v[1]->dt, r, ax,
                  ir_select(I->c, cond, read_at(I, v[1], r, ax), read_at(I, v[2], r, ax))) != NULL;
}

static bool op_cast(Imp *I)
{
    Val *x = input(I, 0);
    DType to;
    if (!x || !dtype_of(I, (int32_t)attr_int(I->node, "to", 0), "Cast's target", &to))
        return false;
    Var **ax = axes_of(I, x->rank, x->shape);
    Expr *v = read_at(I, x, x->rank, ax);
    if (to == DT_I64 && x->dt == DT_F32)
        v = ir_cast(I->c, DT_I64, v);
    else if (to == DT_BOOL)
        v = ir_cast(I->c, DT_BOOL, v);
    else if (to == DT_I32)
        v = ir_cast(I->c, DT_I32, v);
    return define(I, 0, to, x->rank, ax, v) != NULL; /* f32: converted as stored */
}

static bool op_identity(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    Var **ax = axes_of(I, x->rank, x->shape);
    return define(I, 0, x->dt, x->rank, ax, read_at(I, x, x->rank, ax)) != NULL;
}

/* Y[batch..., i, j] = sum[k](A[..., i, k] * B[..., k, j]), 1-D operands
 * as numpy: A [K] a row, B [K] a column, that axis then dropped. */
static bool op_matmul(Imp *I)
{
    Val *a = input(I, 0), *b = input(I, 1);
    if (!a || !b)
        return false;
    if (a->dt != DT_F32 || b->dt != DT_F32 || a->rank < 1 || b->rank < 1) {
        fail(I, "MatMul of %s and %s (rank %d and %d) is not supported", ir_dtype_name(a->dt),
             ir_dtype_name(b->dt), a->rank, b->rank);
        return false;
    }
    Val A = *a, B = *b;
    bool arow = A.rank == 1, bcol = B.rank == 1;
    if (arow) {
        A.shape[1] = A.shape[0];
        A.shape[0] = ir_int(I->c, 1);
        A.rank = 2;
    }
    if (bcol) {
        B.shape[1] = ir_int(I->c, 1);
        B.rank = 2;
    }
    Expr *K = ir_simplify(I->c, A.shape[A.rank - 1]);
    if (!same_extent(I, K, B.shape[B.rank - 2])) {
        fail(I, "the operands' inner extents %s and %s are not proven equal", ext_str(I, K),
             ext_str(I, B.shape[B.rank - 2]));
        return false;
    }
    /* the batch axes broadcast */
    Val ab = A, bb = B;
    ab.rank -= 2;
    bb.rank -= 2;
    Val *bv[2] = {&ab, &bb};
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, bv, 2, &r, shape))
        return false;
    if (r + 2 > MAXR) {
        fail(I, "rank %d", r + 2);
        return false;
    }
    shape[r] = A.shape[A.rank - 2];
    shape[r + 1] = B.shape[B.rank - 1];
    Var **ax = axes_of(I, r + 2, shape);
    Var *k = ir_var(I->c, "k", VK_AXIS, K);
    Expr *ai[MAXR], *bi[MAXR];
    for (int d = 0; d < ab.rank; d++) {
        int o = r - ab.rank + d;
        ai[d] = is_one(ir_simplify(I->c, ab.shape[d])) && !is_one(shape[o]) ? ir_int(I->c, 0)
                                                                            : ir_varref(I->c, ax[o]);
    }
    for (int d = 0; d < bb.rank; d++) {
        int o = r - bb.rank + d;
        bi[d] = is_one(ir_simplify(I->c, bb.shape[d])) && !is_one(shape[o]) ? ir_int(I->c, 0)
                                                                            : ir_varref(I->c, ax[o]);
    }
    int na = 0, nb = 0;
    na = ab.rank;
    if (!arow)
        ai[na++] = ir_varref(I->c, ax[r]);
    ai[na++] = ir_varref(I->c, k);
    nb = bb.rank;
    bi[nb++] = ir_varref(I->c, k);
    if (!bcol)
        bi[nb++] = ir_varref(I->c, ax[r + 1]);
    Expr *prod = ir_binop(I->c, EX_MUL, ir_load(I->c, a->t, na, ai, false),
                          ir_load(I->c, b->t, nb, bi, false));
    Expr *sum = ir_reduce(I->c, RD_SUM, 1, &k, prod);
    /* drop the axes a 1-D operand added */
    int orank = r + 2 - arow - bcol;
    Var *oax[MAXR];
    int o = 0;
    for (int d = 0; d < r + 2; d++)
        if (!(arow && d == r) && !(bcol && d == r + 1))
            oax[o++] = ax[d];
    Expr *from_v[2], *to_e[2];
    Var *from[2];
    int nsub = 0;
    if (arow) {
        from[nsub] = ax[r];
        to_e[nsub++] = ir_int(I->c, 0);
    }
    if (bcol) {
        from[nsub] = ax[r + 1];
        to_e[nsub++] = ir_int(I->c, 0);
    }
    (void)from_v;
    sum = ir_subst_many(I->c, sum, nsub, from, to_e);
    Var **keep = IR_NEWN(I->p->arena, Var *, orank ? orank : 1);
    memcpy(keep, oax, sizeof *keep * (size_t)orank);
    return define(I, 0, DT_F32, orank, keep, sum) != NULL;
}

/* Y = alpha * A' B' + beta * C, A' = A or A^T, B' likewise. */
static bool op_gemm(Imp *I)
{
    Val *a = input(I, 0), *b = input(I, 1), *cv = input(I, 2);
    if (!a || !b || I->failed)
        return false;
    if (a->rank != 2 || b->rank != 2 || a->dt != DT_F32 || b->dt != DT_F32) {
        fail(I, "Gemm of rank %d and %d %s operands is not supported", a->rank, b->rank,
             ir_dtype_name(a->dt));
        return false;
    }
    bool ta = attr_int(I->node, "transA", 0), tb = attr_int(I->node, "transB", 0);
    double alpha = attr_float(I->node, "alpha", 1.0), beta = attr_float(I->node, "beta", 1.0);
    Expr *M = a->shape[ta ? 1 : 0], *K = ir_simplify(I->c, a->shape[ta ? 0 : 1]);
    Expr *N = b->shape[tb ? 0 : 1];
    if (!same_extent(I, K, b->shape[tb ? 1 : 0])) {
        fail(I, "the operands' inner extents %s and %s are not proven equal", ext_str(I, K),
             ext_str(I, b->shape[tb ? 1 : 0]));
        return false;
    }
    Expr *shape[2] = {M, N};
    Var **ax = axes_of(I, 2, shape);
    Var *k = ir_var(I->c, "k", VK_AXIS, K);
    Expr *i = ir_varref(I->c, ax[0]), *j = ir_varref(I->c, ax[1]), *kr = ir_varref(I->c, k);
    Expr *ai[2] = {ta ? kr : i, ta ? i : kr}, *bi[2] = {tb ? j : kr, tb ? kr : j};
    Expr *e = ir_reduce(I->c, RD_SUM, 1, &k,
                        ir_binop(I->c, EX_MUL, ir_load(I->c, a->t, 2, ai, false),
                                 ir_load(I->c, b->t, 2, bi, false)));
    if (alpha != 1.0)
        e = ir_binop(I->c, EX_MUL, ir_float(I->c, alpha), e);
    if (cv) {
        Val out = {.rank = 2, .shape = {M, N}};
        Val *bc[2] = {&out, cv};
        int r;
        Expr *s2[MAXR] = {NULL};
        if (cv->dt != DT_F32 || cv->rank > 2 || !broadcast(I, bc, 2, &r, s2)) {
            if (!I->failed)
                fail(I, "C does not broadcast to the product");
            return false;
        }
        Expr *cr = read_at(I, cv, 2, ax);
        e = ir_binop(I->c, EX_ADD, e, beta != 1.0 ? ir_binop(I->c, EX_MUL, ir_float(I->c, beta), cr) : cr);
    }
    return define(I, 0, DT_F32, 2, ax, e) != NULL;
}

/* Softmax (opset 13: along one axis) and LogSoftmax: the statements of
 * examples/softmax.tex, max, exp of the difference, sum, quotient. */
static bool op_softmax(Imp *I, bool log_of)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (x->dt != DT_F32 || x->rank < 1) {
        fail(I, "%s of a rank %d %s tensor", I->node->op_type, x->rank, ir_dtype_name(x->dt));
        return false;
    }
    int a = norm_axis(I, attr_int(I->node, "axis", -1), x->rank);
    if (a < 0)
        return false;
    int r = x->rank;
    /* the row statistics over every axis but a */
    Expr *rs[MAXR];
    int nr = 0;
    for (int d = 0; d < r; d++)
        if (d != a)
            rs[nr++] = x->shape[d];
    Var **rax = axes_of(I, nr, rs);
    Var *j = ir_var(I->c, "j", VK_AXIS, x->shape[a]);
    Expr *xi[MAXR];
    for (int d = 0, o = 0; d < r; d++)
        xi[d] = d == a ? ir_varref(I->c, j) : ir_varref(I->c, rax[o++]);
    Tensor *M = temp(I, "max", DT_F32, nr, rax,
                     ir_reduce(I->c, RD_MAX, 1, &j, ir_load(I->c, x->t, r, xi, false)));
    Var **ax = axes_of(I, r, x->shape);
    Expr *mi[MAXR], *pi[MAXR];
    for (int d = 0, o = 0; d < r; d++) {
        pi[d] = ir_varref(I->c, ax[d]);
        if (d != a)
            mi[o++] = ir_varref(I->c, ax[d]);
    }
    Expr *diff = ir_binop(I->c, EX_SUB, ir_load(I->c, x->t, r, pi, false), ir_load(I->c, M, nr, mi, false));
    Tensor *E = temp(I, "exp", DT_F32, r, ax, ir_unop(I->c, EX_EXP, diff));
    Var **zax = axes_of(I, nr, rs);
    Var *j2 = ir_var(I->c, "j", VK_AXIS, x->shape[a]);
    for (int d = 0, o = 0; d < r; d++)
        xi[d] = d == a ? ir_varref(I->c, j2) : ir_varref(I->c, zax[o++]);
    Tensor *Z = temp(I, "sum", DT_F32, nr, zax,
                     ir_reduce(I->c, RD_SUM, 1, &j2, ir_load(I->c, E, r, xi, false)));
    Var **oax = axes_of(I, r, x->shape);
    Expr *oi[MAXR], *zi[MAXR];
    for (int d = 0, o = 0; d < r; d++) {
        oi[d] = ir_varref(I->c, oax[d]);
        if (d != a)
            zi[o++] = ir_varref(I->c, oax[d]);
    }
    Expr *z = ir_load(I->c, Z, nr, zi, false);
    Expr *y;
    if (log_of) {
        Expr *xo = ir_load(I->c, x->t, r, oi, false), *mo = ir_load(I->c, M, nr, zi, false);
        y = ir_binop(I->c, EX_SUB, ir_binop(I->c, EX_SUB, xo, mo), ir_unop(I->c, EX_LOG, z));
    } else {
        y = ir_binop(I->c, EX_DIV, ir_load(I->c, E, r, oi, false), z);
    }
    return define(I, 0, DT_F32, r, oax, y) != NULL;
}

static bool op_transpose(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    int r = x->rank, perm[MAXR];
    const Onnx__AttributeProto *pa = attr(I->node, "perm");
    bool seen[MAXR] = {false};
    for (int d = 0; d < r; d++) {
        int64_t p = pa ? (pa->n_ints == (size_t)r ? pa->ints[d] : -1) : r - 1 - d;
        if (p < 0 || p >= r || seen[p]) {
            fail(I, "perm is not a permutation of 0..%d", r - 1);
            return false;
        }
        seen[p] = true;
        perm[d] = (int)p;
    }
    Expr *shape[MAXR] = {NULL}, *idx[MAXR];
    for (int d = 0; d < r; d++)
        shape[d] = x->shape[perm[d]];
    Var **ax = axes_of(I, r, shape);
    for (int d = 0; d < r; d++)
        idx[perm[d]] = ir_varref(I->c, ax[d]);
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, r, idx, false)) != NULL;
}

/* ReduceSum/Mean/Max/Min/Prod: axes from the attribute (older opsets) or
 * the second input (a constant), keepdims, noop_with_empty_axes. */
static bool op_reduce(Imp *I, ReduceOp op, int kind)
{
    bool mean = kind == K_MEAN;
    Val *x = input(I, 0);
    if (!x)
        return false;
    int r = x->rank;
    bool red[MAXR] = {false};
    int64_t na = 0;
    const int64_t *axs = NULL;
    const Onnx__AttributeProto *aa = attr(I->node, "axes");
    if (aa) {
        axs = aa->ints;
        na = (int64_t)aa->n_ints;
    } else if (I->node->n_input > 1 && I->node->input[1][0]) {
        axs = const_ints(I, input(I, 1), &na);
        if (!axs) {
            if (!I->failed)
                fail(I, "axes must be a constant (an initializer) of int64");
            return false;
        }
    }
    if (na == 0 && attr_int(I->node, "noop_with_empty_axes", 0))
        return op_identity(I);
    for (int d = 0; d < r; d++)
        red[d] = na == 0;
    for (int64_t i = 0; i < na; i++) {
        int a = norm_axis(I, axs[i], r);
        if (a < 0)
            return false;
        red[a] = true;
    }
    bool keep = attr_int(I->node, "keepdims", 1);
    Expr *shape[MAXR] = {NULL};
    int orank = 0;
    for (int d = 0; d < r; d++)
        if (!red[d])
            shape[orank++] = x->shape[d];
        else if (keep)
            shape[orank++] = ir_int(I->c, 1);
    Var **ax = axes_of(I, orank, shape);
    Var *rv[MAXR];
    Expr *idx[MAXR], *count = ir_int(I->c, 1);
    int nr = 0;
    for (int d = 0, o = 0; d < r; d++) {
        if (red[d]) {
            char nm[16];
            snprintf(nm, sizeof nm, "r%d", d);
            rv[nr] = ir_var(I->c, nm, VK_AXIS, x->shape[d]);
            idx[d] = ir_varref(I->c, rv[nr++]);
            count = ir_binop(I->c, EX_MUL, count, x->shape[d]);
            if (keep)
                o++;
        } else {
            idx[d] = ir_varref(I->c, ax[o++]);
        }
    }
    Expr *body = ir_load(I->c, x->t, r, idx, false);
    if (kind == K_REDUCE_L1)
        body = ir_unop(I->c, EX_ABS, body);
    else if (kind == K_REDUCE_L2 || kind == K_REDUCE_SQ)
        body = ir_binop(I->c, EX_MUL, body, body);
    else if (kind == K_REDUCE_LSE)
        body = ir_unop(I->c, EX_EXP, body);
    if (x->dt == DT_BOOL) {
        fail(I, "%s of bool is not supported", I->node->op_type);
        return false;
    }
    Expr *e = nr ? ir_reduce(I->c, op, nr, rv, body) : body;
    if (kind == K_REDUCE_L2)
        e = ir_unop(I->c, EX_SQRT, e);
    else if (kind == K_REDUCE_LOGSUM || kind == K_REDUCE_LSE)
        e = ir_unop(I->c, EX_LOG, e);
    if (mean)
        e = ir_binop(I->c, EX_DIV, e, ir_cast(I->c, DT_F32, ir_simplify(I->c, count)));
    return define(I, 0, x->dt, orank, ax, e) != NULL;
}

static bool op_constant(Imp *I)
{
    const Onnx__AttributeProto *v = attr(I->node, "value");
    if (!v || !v->t) {
        fail(I, "only a 'value' tensor is supported");
        return false;
    }
    if (is_graph_output(I, I->node->output[0])) {
        fail(I, "a graph output that is a Constant is not supported");
        return false;
    }
    return add_tensor_proto(I, I->node->output[0], v->t, false) != NULL;
}

/* Clip(x, min, max): the bounds optional inputs (attributes before opset 11). */
static bool op_clip(Imp *I)
{
    Val *x = input(I, 0), *lo = input(I, 1), *hi = input(I, 2);
    if (!x || I->failed)
        return false;
    Var **ax = axes_of(I, x->rank, x->shape);
    Expr *e = read_at(I, x, x->rank, ax);
    Val *b[2] = {lo, hi};
    for (int k = 0; k < 2; k++) {
        Expr *bound = NULL;
        if (b[k]) {
            if (b[k]->rank != 0 || b[k]->dt != x->dt) {
                fail(I, "the %s bound must be a scalar of the input's type", k ? "upper" : "lower");
                return false;
            }
            bound = ir_load(I->c, b[k]->t, 0, NULL, false);
        } else if (I->opset < 11 && attr(I->node, k ? "max" : "min")) {
            bound = fl(I, attr_float(I->node, k ? "max" : "min", 0));
        }
        if (bound)
            e = ir_binop(I->c, k ? EX_MIN : EX_MAX, e, bound);
    }
    return define(I, 0, x->dt, x->rank, ax, e) != NULL;
}

/* The output point's flat position in a row-major shape, as an index
 * expression, and back: the indices of that position in another shape. */
static Expr *numel_of(Imp *I, int rank, Expr *const *shape)
{
    Expr *n = ir_int(I->c, 1);
    for (int d = 0; d < rank; d++)
        n = ir_binop(I->c, EX_MUL, n, shape[d]);
    return ir_simplify(I->c, n);
}

/* Splits e into its factors (a product's operands, recursively). */
static void factors(Expr *e, Expr **f, int *n, int cap)
{
    if (e->kind == EX_MUL && *n + 2 <= cap) {
        factors(e->op.a, f, n, cap);
        factors(e->op.b, f, n, cap);
    } else if (*n < cap) {
        f[(*n)++] = e;
    }
}

/* The product of num divided by the product of den, where it divides
 * exactly factor by factor (Reshape's -1: [b, s, 768] over [b, s, -1,
 * 64] is 12); NULL otherwise. */
static Expr *exact_quotient(Imp *I, Expr *const *num, int nn, Expr *const *den, int nd)
{
    enum { CAP = 4 * MAXR };
    Expr *f[CAP], *g[CAP];
    int a = 0, b = 0;
    for (int i = 0; i < nn; i++)
        factors(ir_simplify(I->c, num[i]), f, &a, CAP);
    for (int i = 0; i < nd; i++)
        factors(ir_simplify(I->c, den[i]), g, &b, CAP);
    int64_t cn = 1, cd = 1, v;
    for (int j = 0; j < b; j++) {
        if (ir_is_const(g[j], &v)) {
            if (v < 1 || __builtin_mul_overflow(cd, v, &cd))
                return NULL;
            continue;
        }
        int k = 0;
        while (k < a && f[k] != g[j])
            k++;
        if (k == a)
            return NULL;
        f[k] = NULL;
    }
    Expr *q = ir_int(I->c, 1);
    for (int k = 0; k < a; k++) {
        if (!f[k])
            continue;
        if (!ir_is_const(f[k], &v))
            q = ir_binop(I->c, EX_MUL, q, f[k]);
        else if (v < 0 || __builtin_mul_overflow(cn, v, &cn))
            return NULL;
    }
    if (cn % cd != 0)
        return NULL;
    return ir_simplify(I->c, ir_binop(I->c, EX_MUL, q, ir_int(I->c, cn / cd)));
}

/* x viewed with another shape of as many elements (row-major). */
static bool view(Imp *I, Val *x, int rank, Expr **shape)
{
    Expr *to = numel_of(I, rank, shape), *from = numel_of(I, x->rank, x->shape);
    if (!same_extent(I, to, from)) {
        int64_t a, b;
        if (ir_is_const(to, &a) && ir_is_const(from, &b))
            fail(I, "the new shape has %lld elements, the input %lld", (long long)a, (long long)b);
        else
            fail(I, "the new shape's element count %s is not proven equal to the input's, %s",
                 ext_str(I, to), ext_str(I, from));
        return false;
    }
    Var **ax = axes_of(I, rank, shape);
    /* leading axes of the same extents map one to one (BERT's [b, s, 768]
     * to [b, s, 12, 64]); the rest through the flat position */
    int lead = 0;
    while (lead < rank - 1 && lead < x->rank - 1 && same_extent(I, shape[lead], x->shape[lead]))
        lead++;
    Expr *f = ir_flat_index(I->c, rank - lead, shape + lead, ax + lead), *idx[MAXR];
    Expr *inner = ir_int(I->c, 1);
    for (int d = x->rank - 1; d >= lead; d--) {
        Expr *q = ir_binop(I->c, EX_DIV, f, inner);
        idx[d] = ir_simplify(I->c, d == lead ? q : ir_binop(I->c, EX_MOD, q, x->shape[d]));
        inner = ir_binop(I->c, EX_MUL, inner, x->shape[d]);
    }
    for (int d = 0; d < lead; d++)
        idx[d] = ir_varref(I->c, ax[d]);
    return define(I, 0, x->dt, rank, ax, ir_load(I->c, x->t, x->rank, idx, false)) != NULL;
}

/* Axes from the attribute (older opsets) or the constant second input. */
static bool axes_arg(Imp *I, const char *name, const int64_t **axs, int64_t *na)
{
    const Onnx__AttributeProto *aa = attr(I->node, name);
    *na = 0;
    *axs = NULL;
    if (aa) {
        *axs = aa->ints;
        *na = (int64_t)aa->n_ints;
        return true;
    }
    if (I->node->n_input > 1 && I->node->input[1][0]) {
        *axs = const_ints(I, input(I, 1), na);
        if (!*axs) {
            if (!I->failed)
                fail(I, "%s must be a constant (an initializer) of int64", name);
            return false;
        }
    }
    return true;
}

static bool op_reshape(Imp *I, const char *op)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    Expr *shape[MAXR] = {NULL};
    int rank = 0;
    if (strcmp(op, "Flatten") == 0) {
        int a = (int)attr_int(I->node, "axis", 1);
        a = a < 0 ? a + x->rank : a;
        if (a < 0 || a > x->rank) {
            fail(I, "axis %d is out of range for rank %d", a, x->rank);
            return false;
        }
        shape[0] = numel_of(I, a, x->shape);
        shape[1] = numel_of(I, x->rank - a, x->shape + a);
        return view(I, x, 2, shape);
    }
    const int64_t *v;
    int64_t n;
    if (strcmp(op, "Reshape") == 0) {
        Val *sv = input(I, 1);
        if (!sv || sv->nknown < 0) {
            if (!I->failed)
                fail(I, "the shape is not known when compiling: it must be a constant or "
                        "computed from shapes (Shape, Gather, Concat, arithmetic)");
            return false;
        }
        n = sv->nknown;
        if (n > MAXR) {
            fail(I, "rank %lld", (long long)n);
            return false;
        }
        bool allowzero = attr_int(I->node, "allowzero", 0);
        int minus = -1, nknown = 0;
        Expr *known[MAXR];
        for (int64_t d = 0; d < n; d++) {
            Expr *e = ir_simplify(I->c, sv->known[d]);
            int64_t c = 1;
            bool num = ir_is_const(e, &c);
            if (num && c == 0 && !allowzero && d < x->rank)
                shape[d] = x->shape[d];
            else if (num && c == -1 && minus < 0)
                minus = (int)d;
            else if (!num || c >= 1)
                shape[d] = e; /* a dim's expression is >= 1 */
            else {
                fail(I, "shape element %lld is %lld", (long long)d, (long long)c);
                return false;
            }
            if (d != minus)
                known[nknown++] = shape[d];
        }
        if (minus >= 0) {
            shape[minus] = exact_quotient(I, x->shape, x->rank, known, nknown);
            if (!shape[minus])
                shape[minus] = ir_simplify(I->c, ir_binop(I->c, EX_DIV, numel_of(I, x->rank, x->shape),
                                                          numel_of(I, nknown, known)));
        }
        return view(I, x, (int)n, shape);
    }
    if (!axes_arg(I, "axes", &v, &n))
        return false;
    bool squeeze = strcmp(op, "Squeeze") == 0;
    if (squeeze) {
        bool drop[MAXR] = {false};
        for (int64_t i = 0; i < n; i++) {
            int a = norm_axis(I, v[i], x->rank);
            if (a < 0)
                return false;
            if (!is_one(ir_simplify(I->c, x->shape[a]))) {
                fail(I, "axis %d has an extent that is not 1", a);
                return false;
            }
            drop[a] = true;
        }
        for (int d = 0; d < x->rank; d++)
            if (n ? !drop[d] : !is_one(ir_simplify(I->c, x->shape[d])))
                shape[rank++] = x->shape[d];
        return view(I, x, rank, shape);
    }
    rank = x->rank + (int)n;
    if (rank > MAXR) {
        fail(I, "rank %d", rank);
        return false;
    }
    bool add[MAXR] = {false};
    for (int64_t i = 0; i < n; i++) {
        int a = norm_axis(I, v[i], rank);
        if (a < 0)
            return false;
        add[a] = true;
    }
    for (int d = 0, k = 0; d < rank; d++)
        shape[d] = add[d] ? ir_int(I->c, 1) : x->shape[k++];
    return view(I, x, rank, shape);
}

/* Concat along one axis: a select over the inputs' ranges on it. */
static bool op_concat(Imp *I)
{
    int n = (int)I->node->n_input;
    Val *v[32];
    if (n < 1 || n > 32) {
        fail(I, "%d inputs", n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!(v[i] = input(I, i)))
            return false;
    int r = v[0]->rank, a = norm_axis(I, attr_int(I->node, "axis", 0), r);
    if (a < 0)
        return false;
    Expr *shape[MAXR] = {NULL}, *total = ir_int(I->c, 0);
    for (int i = 0; i < n; i++) {
        if (v[i]->rank != r || v[i]->dt != v[0]->dt) {
            fail(I, "input %d has another rank or type", i);
            return false;
        }
        for (int d = 0; d < r; d++)
            if (d != a && !same_extent(I, v[i]->shape[d], v[0]->shape[d])) {
                fail(I, "input %d's extent %s on axis %d is not proven equal to the first's, %s", i,
                     ext_str(I, v[i]->shape[d]), d, ext_str(I, v[0]->shape[d]));
                return false;
            }
        total = ir_binop(I->c, EX_ADD, total, v[i]->shape[a]);
    }
    for (int d = 0; d < r; d++)
        shape[d] = d == a ? ir_simplify(I->c, total) : v[0]->shape[d];
    Var **ax = axes_of(I, r, shape);
    Expr *e = NULL, *start[33];
    start[0] = ir_int(I->c, 0);
    for (int i = 0; i < n; i++)
        start[i + 1] = ir_simplify(I->c, ir_binop(I->c, EX_ADD, start[i], v[i]->shape[a]));
    for (int i = n - 1; i >= 0; i--) {
        Expr *idx[MAXR];
        for (int d = 0; d < r; d++)
            idx[d] = d == a ? ir_simplify(I->c, ir_binop(I->c, EX_SUB, ir_varref(I->c, ax[a]), start[i]))
                            : ir_varref(I->c, ax[d]);
        Expr *part = ir_load(I->c, v[i]->t, r, idx, true);
        e = !e ? part : ir_select(I->c, ir_binop(I->c, EX_LT, ir_varref(I->c, ax[a]), start[i + 1]), part, e);
    }
    return define(I, 0, v[0]->dt, r, ax, e) != NULL;
}

/* Gather(data, indices, axis): data's axis indexed by indices' values,
 * checked when it runs (a negative index counts from the end). */
static bool op_gather(Imp *I)
{
    Val *x = input(I, 0), *ix = input(I, 1);
    if (!x || !ix)
        return false;
    int a = norm_axis(I, attr_int(I->node, "axis", 0), x->rank);
    if (a < 0)
        return false;
    if (ix->dt != DT_I64 && ix->dt != DT_I32) {
        fail(I, "indices of type %s", ir_dtype_name(ix->dt));
        return false;
    }
    int r = x->rank - 1 + ix->rank;
    if (r > MAXR) {
        fail(I, "rank %d", r);
        return false;
    }
    Expr *shape[MAXR] = {NULL};
    for (int d = 0, o = 0; d < x->rank; d++) {
        if (d == a)
            for (int k = 0; k < ix->rank; k++)
                shape[o++] = ix->shape[k];
        else
            shape[o++] = x->shape[d];
    }
    Var **ax = axes_of(I, r, shape);
    Expr *ii[MAXR], *xi[MAXR];
    for (int k = 0; k < ix->rank; k++)
        ii[k] = ir_varref(I->c, ax[a + k]);
    Expr *pos = ir_flat_index(I->c, r, shape, ax);
    Expr *id = ir_load(I->c, ix->t, ix->rank, ii, false);
    for (int d = 0; d < x->rank; d++)
        xi[d] = d < a ? ir_varref(I->c, ax[d]) :
                d == a ? ir_op(I->c, EX_CHECK, id, x->shape[a], pos)
                       : ir_varref(I->c, ax[d - 1 + ix->rank]);
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, x->rank, xi, false)) != NULL;
}

/* LayerNormalization (opset 17) over the axes from axis on: the mean, the
 * variance of the centred values, and (x - mean) * rsqrt(var + eps) * scale
 * + bias, the statements of examples/layernorm.tex. */
static bool op_layernorm(Imp *I)
{
    Val *x = input(I, 0), *sc = input(I, 1), *b = input(I, 2);
    if (!x || !sc || I->failed)
        return false;
    int r = x->rank, a = norm_axis(I, attr_int(I->node, "axis", -1), r);
    if (a < 0)
        return false;
    if (x->dt != DT_F32) {
        fail(I, "LayerNormalization of %s is not supported", ir_dtype_name(x->dt));
        return false;
    }
    /* scale and bias stretch to x, never x to them */
    Val *bv[3] = {x, sc, b};
    int br;
    Expr *bs[MAXR] = {NULL};
    if (!broadcast(I, bv, b ? 3 : 2, &br, bs))
        return false;
    bool fits = br == r && sc->dt == DT_F32 && (!b || b->dt == DT_F32);
    for (int d = 0; fits && d < r; d++)
        fits = same_extent(I, bs[d], x->shape[d]);
    if (!fits) {
        fail(I, "scale and bias must be f32 and broadcast to the input's shape");
        return false;
    }
    double eps = attr_float(I->node, "epsilon", 1e-5);
    Expr *count = numel_of(I, r - a, x->shape + a);
    Var **sax = axes_of(I, a, x->shape);
    Var *rv[MAXR];
    Expr *xi[MAXR];
    for (int d = 0; d < r; d++) {
        if (d < a)
            xi[d] = ir_varref(I->c, sax[d]);
        else {
            char nm[16];
            snprintf(nm, sizeof nm, "r%d", d);
            rv[d - a] = ir_var(I->c, nm, VK_AXIS, x->shape[d]);
            xi[d] = ir_varref(I->c, rv[d - a]);
        }
    }
    Expr *fcount = ir_cast(I->c, DT_F32, count);
    Tensor *M = temp(I, "mean", DT_F32, a, sax,
                     ir_binop(I->c, EX_DIV, ir_reduce(I->c, RD_SUM, r - a, rv, ir_load(I->c, x->t, r, xi, false)), fcount));
    Var **vax = axes_of(I, a, x->shape);
    Var *rv2[MAXR];
    Expr *xi2[MAXR], *mi[MAXR];
    for (int d = 0; d < r; d++) {
        if (d < a) {
            xi2[d] = ir_varref(I->c, vax[d]);
            mi[d] = xi2[d];
        } else {
            char nm[16];
            snprintf(nm, sizeof nm, "r%d", d);
            rv2[d - a] = ir_var(I->c, nm, VK_AXIS, x->shape[d]);
            xi2[d] = ir_varref(I->c, rv2[d - a]);
        }
    }
    Expr *dev = ir_binop(I->c, EX_SUB, ir_load(I->c, x->t, r, xi2, false), ir_load(I->c, M, a, mi, false));
    Tensor *V = temp(I, "var", DT_F32, a, vax,
                     ir_binop(I->c, EX_DIV, ir_reduce(I->c, RD_SUM, r - a, rv2, ir_binop(I->c, EX_MUL, dev, dev)), fcount));
    Var **ax = axes_of(I, r, x->shape);
    Expr *pi[MAXR];
    for (int d = 0; d < r; d++)
        pi[d] = ir_varref(I->c, ax[d]);
    Expr *centred = ir_binop(I->c, EX_SUB, ir_load(I->c, x->t, r, pi, false), ir_load(I->c, M, a, pi, false));
    Expr *e = ir_binop(I->c, EX_MUL, centred,
                       ir_unop(I->c, EX_RSQRT, ir_binop(I->c, EX_ADD, ir_load(I->c, V, a, pi, false), fl(I, eps))));
    e = ir_binop(I->c, EX_MUL, e, read_at(I, sc, r, ax));
    if (b)
        e = ir_binop(I->c, EX_ADD, e, read_at(I, b, r, ax));
    if (!define(I, 0, DT_F32, r, ax, e))
        return false;
    /* Mean and InvStdDev, of the input's shape with 1 from axis on */
    for (int k = 1; k < 3 && (size_t)k < I->node->n_output; k++) {
        if (!I->node->output[k][0])
            continue;
        Expr *s1[MAXR] = {NULL}, *si[MAXR];
        for (int d = 0; d < r; d++)
            s1[d] = d < a ? x->shape[d] : ir_int(I->c, 1);
        Var **kax = axes_of(I, r, s1);
        for (int d = 0; d < a; d++)
            si[d] = ir_varref(I->c, kax[d]);
        Expr *val = k == 1 ? ir_load(I->c, M, a, si, false)
                           : ir_unop(I->c, EX_RSQRT, ir_binop(I->c, EX_ADD, ir_load(I->c, V, a, si, false), fl(I, eps)));
        if (!define(I, k, DT_F32, r, kax, val))
            return false;
    }
    return true;
}

/* Expand(x, shape): x broadcast to a constant shape. */
static bool op_expand(Imp *I)
{
    Val *x = input(I, 0), *sv = x ? input(I, 1) : NULL;
    if (!sv || sv->nknown < 0) {
        if (!I->failed)
            fail(I, "the shape is not known when compiling: it must be a constant or computed "
                    "from shapes");
        return false;
    }
    int n = sv->nknown;
    if (n > MAXR) {
        fail(I, "rank %d", n);
        return false;
    }
    Val to = {.rank = n};
    for (int d = 0; d < n; d++) {
        int64_t c;
        Expr *e = ir_simplify(I->c, sv->known[d]);
        to.shape[d] = ir_is_const(e, &c) && c < 1 ? ir_int(I->c, 1) : e;
    }
    Val *bv[2] = {x, &to};
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, bv, 2, &r, shape))
        return false;
    Var **ax = axes_of(I, r, shape);
    return define(I, 0, x->dt, r, ax, read_at(I, x, r, ax)) != NULL;
}

/* Mean of n inputs, PRelu(x, slope): broadcasting as the binary ones. */
static bool op_mean_prelu(Imp *I, bool prelu)
{
    int n = (int)I->node->n_input;
    Val *v[16];
    if (n < 1 || n > 16 || (prelu && n != 2)) {
        fail(I, "%d inputs", n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!(v[i] = input(I, i)) || v[i]->dt != DT_F32) {
            if (!v[i] && !I->failed)
                fail(I, "input %d is missing", i);
            else if (!I->failed)
                fail(I, "%s of %s is not supported", I->node->op_type, ir_dtype_name(v[i]->dt));
            return false;
        }
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, v, n, &r, shape))
        return false;
    Var **ax = axes_of(I, r, shape);
    Expr *e = read_at(I, v[0], r, ax);
    if (prelu) {
        Expr *s = read_at(I, v[1], r, ax);
        e = ir_select(I->c, ir_binop(I->c, EX_LT, e, fl(I, 0.0)), ir_binop(I->c, EX_MUL, s, e), e);
    } else {
        for (int i = 1; i < n; i++)
            e = ir_binop(I->c, EX_ADD, e, read_at(I, v[i], r, ax));
        e = ir_binop(I->c, EX_DIV, e, fl(I, n));
    }
    return define(I, 0, DT_F32, r, ax, e) != NULL;
}

/* A constant the importer computed (a static shape, a filled tensor). */
static Val *define_const(Imp *I, int k, DType dt, int rank, const int64_t *dims, const void *data)
{
    Expr *shape[MAXR] = {NULL};
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        shape[d] = ir_int(I->c, dims[d]);
        n *= dims[d];
    }
    const char *onnx = I->node->output[k];
    if (is_graph_output(I, onnx)) {
        fail(I, "a graph output known when compiling is not supported");
        return NULL;
    }
    Tensor *t = ir_te_add_const(I->p, ident(I, onnx, I->node->op_type), dt, rank, shape, data,
                                (size_t)n * (size_t)ir_dtype_size(dt), onnx);
    return t ? add_val(I, onnx, t) : NULL;
}

/* Shape and Size of a tensor of fixed extents: constants. */
static bool op_shape(Imp *I, bool size)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (size) {
        Expr *n = numel_of(I, x->rank, x->shape);
        return define_known(I, 0, DT_I64, true, 1, &n) != NULL;
    }
    int64_t lo = attr_int(I->node, "start", 0), hi = attr_int(I->node, "end", x->rank);
    lo = lo < 0 ? lo + x->rank : lo;
    hi = hi < 0 ? hi + x->rank : hi;
    lo = lo < 0 ? 0 : lo > x->rank ? x->rank : lo;
    hi = hi < lo ? lo : hi > x->rank ? x->rank : hi;
    int64_t len = hi - lo;
    if (len == 0 || len > MAXK) {
        fail(I, "a shape of %lld elements is not supported", (long long)len);
        return false;
    }
    return define_known(I, 0, DT_I64, false, (int)len, x->shape + lo) != NULL;
}

/* ConstantOfShape(shape): a constant shape filled with value. */
static bool op_constant_of_shape(Imp *I)
{
    int64_t n;
    Val *sv = input(I, 0);
    const int64_t *v = const_ints(I, sv, &n);
    if (!v && sv && sv->nknown >= 0 && sv->nknown <= MAXR) {
        /* a shape over the dims: the value computed at every point */
        const Onnx__AttributeProto *va = attr(I->node, "value");
        DType dt = DT_F32;
        Expr *value = fl(I, 0.0);
        char err[1024];
        if (va && va->t) {
            int64_t m;
            if (!dtype_of(I, va->t->has_data_type ? va->t->data_type : 0, "value", &dt))
                return false;
            void *d = tensor_data(va->t, dt, I->dir, &m, NULL, err, sizeof err);
            if (!d || m != 1) {
                free(d);
                fail(I, "value must hold one element");
                return false;
            }
            value = dt == DT_F32 ? fl(I, ((const float *)d)[0]) :
                    dt == DT_I64 ? ir_int(I->c, ((const int64_t *)d)[0]) :
                    dt == DT_I32 ? ir_int(I->c, ((const int32_t *)d)[0]) :
                                   ir_int(I->c, ((const uint8_t *)d)[0] != 0);
            free(d);
        }
        Expr *shape[MAXR] = {NULL};
        for (int d = 0; d < sv->nknown; d++)
            shape[d] = sv->known[d];
        Var **ax = axes_of(I, sv->nknown, shape);
        return define(I, 0, dt, sv->nknown, ax, value) != NULL;
    }
    if (!v) {
        if (!I->failed)
            fail(I, "the shape is not known when compiling");
        return false;
    }
    int64_t total = 1;
    for (int64_t d = 0; d < n; d++) {
        if (v[d] < 1 || total > (INT64_C(1) << 28) / v[d]) {
            fail(I, v[d] < 1 ? "shape element %lld is %lld"
                             : "shape element %lld is %lld: a constant of more than 2^28 elements",
                 (long long)d, (long long)v[d]);
            return false;
        }
        total *= v[d];
    }
    if (n > MAXR) {
        fail(I, "rank %lld", (long long)n);
        return false;
    }
    const Onnx__AttributeProto *va = attr(I->node, "value");
    DType dt = DT_F32;
    char one[8] = {0}, err[1024];
    if (va && va->t) {
        int64_t m;
        if (!dtype_of(I, va->t->has_data_type ? va->t->data_type : 0, "value", &dt))
            return false;
        void *d = tensor_data(va->t, dt, I->dir, &m, NULL, err, sizeof err);
        if (!d || m != 1) {
            free(d);
            fail(I, "value must hold one element");
            return false;
        }
        memcpy(one, d, (size_t)ir_dtype_size(dt));
        free(d);
    }
    size_t size = (size_t)ir_dtype_size(dt);
    char *data = malloc((size_t)total * size);
    if (!data) {
        fail(I, "out of memory for %lld elements", (long long)total);
        return false;
    }
    for (int64_t i = 0; i < total; i++)
        memcpy(data + (size_t)i * size, one, size);
    Val *r = define_const(I, 0, dt, (int)n, v, data);
    free(data);
    return r != NULL;
}

/* The dims an expression uses (a slice bound's). */
enum { MAX_SLICE_DIMS = 16 };
typedef struct DimSet {
    Var *v[MAX_SLICE_DIMS];
    int n;
    bool more; /* more than MAX_SLICE_DIMS */
} DimSet;

static void collect_dims(Expr *e, void *ud)
{
    DimSet *s = ud;
    if (e->kind != EX_VAR || e->var->kind != VK_DIM)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == e->var)
            return;
    if (s->n == MAX_SLICE_DIMS)
        s->more = true;
    else
        s->v[s->n++] = e->var;
}

/* Whether e >= 0 is proven for every size, or else within the declared
 * ranges. Then the dims it uses accept no size where it is not proven: of
 * one dim, the largest size up to which it holds (the first `sequence`
 * rows of a table of 512: sequence up to 512, as ONNX Runtime runs it); of
 * several, none above their ranges (as a .tex program's unprovable access). */
static bool proven_nonneg(Imp *I, Expr *e)
{
    e = ir_simplify(I->c, e);
    if (ir_prove_nonneg(I->c, e, RANGE_OPEN))
        return true;
    if (!ir_prove_nonneg(I->c, e, RANGE_DECLARED))
        return false;
    DimSet s = {.n = 0};
    ir_expr_visit(e, collect_dims, &s);
    if (s.more)
        return false;
    if (s.n == 1) { /* bisect: holds at lo (proven: hi), fails above hi_ */
        Var *v = s.v[0];
        int64_t lo = v->hi < v->max ? v->hi : v->max, hi_ = v->max;
        while (lo < hi_) {
            int64_t mid = lo + (hi_ - lo + 1) / 2;
            v->max = mid;
            if (ir_prove_nonneg(I->c, e, RANGE_OPEN))
                lo = mid;
            else
                hi_ = mid - 1;
        }
        v->max = lo;
        return true;
    }
    for (int i = 0; i < s.n; i++)
        s.v[i]->max = s.v[i]->hi;
    return true;
}

/* The elements of a Slice parameter: a shape value's expressions, or an
 * attribute's numbers (before opset 10). */
static bool slice_arg(Imp *I, int k, const char *name, Expr **out, int64_t *n)
{
    if (I->opset < 10) {
        const Onnx__AttributeProto *at = attr(I->node, name);
        *n = at ? (int64_t)at->n_ints : 0;
        for (int64_t i = 0; i < *n && i < MAXR; i++)
            out[i] = ir_int(I->c, at->ints[i]);
        return at != NULL || k > 2;
    }
    *n = 0;
    if ((size_t)k >= I->node->n_input || !I->node->input[k][0])
        return k > 2; /* axes and steps may be absent */
    Val *v = input(I, k);
    if (!v || v->nknown < 0)
        return false;
    *n = v->nknown;
    for (int i = 0; i < v->nknown; i++)
        out[i] = ir_simplify(I->c, v->known[i]);
    return true;
}

/* Slice with starts, ends, axes and steps known when compiling (opset 10+;
 * attributes before): out[..., j, ...] = x[..., start + j * step, ...].
 * Numbers clamp as numpy does; a start or end over the dims (the first
 * `sequence` rows of a position table) needs step 1 and a proof that it
 * lies within the axis. */
static bool op_slice(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    Expr *st[MAXR], *en[MAXR], *axe[MAXR], *ste[MAXR];
    int64_t ns = 0, ne = 0, na = 0, nst = 0;
    bool ok = slice_arg(I, 1, "starts", st, &ns) && slice_arg(I, 2, "ends", en, &ne) &&
              slice_arg(I, 3, "axes", axe, &na) && slice_arg(I, 4, "steps", ste, &nst);
    if (!ok || ns != ne || ns > MAXR || (na && na != ns) || (nst && nst != ns)) {
        if (!I->failed)
            fail(I, "starts, ends, axes and steps must be known when compiling, of one length");
        return false;
    }
    int r = x->rank;
    Expr *start[MAXR], *shape[MAXR] = {NULL};
    int64_t step[MAXR];
    bool sliced[MAXR] = {false};
    for (int d = 0; d < r; d++) {
        start[d] = ir_int(I->c, 0);
        step[d] = 1;
        shape[d] = x->shape[d];
    }
    for (int64_t i = 0; i < ns; i++) {
        int64_t av = i, s = 1, e, b, f;
        if ((na && !ir_is_const(axe[i], &av)) || (nst && !ir_is_const(ste[i], &s))) {
            fail(I, "axes and steps must be constants");
            return false;
        }
        int a = norm_axis(I, av, r);
        if (a < 0)
            return false;
        if (sliced[a] || s == 0) {
            fail(I, "axis %d: %s", a, s == 0 ? "step 0" : "sliced twice");
            return false;
        }
        sliced[a] = true;
        step[a] = s;
        Expr *E = ir_simplify(I->c, x->shape[a]);
        if (ir_is_const(E, &e) && ir_is_const(st[i], &b) && ir_is_const(en[i], &f)) {
            int64_t len;
            /* numpy's clamping: negatives from the end, then into range */
            b = b < 0 ? b + e : b;
            f = f < 0 ? f + e : f;
            if (s > 0) {
                b = b < 0 ? 0 : b > e ? e : b;
                f = f < 0 ? 0 : f > e ? e : f;
                len = f > b ? (f - b + s - 1) / s : 0;
            } else {
                b = b < 0 ? -1 : b > e - 1 ? e - 1 : b;
                f = f < -1 ? -1 : f > e - 1 ? e - 1 : f;
                len = b > f ? (b - f + (-s) - 1) / (-s) : 0;
            }
            if (len == 0) {
                fail(I, "an empty slice on axis %d is not supported", a);
                return false;
            }
            start[a] = ir_int(I->c, b);
            shape[a] = ir_int(I->c, len);
            continue;
        }
        if (s != 1) {
            fail(I, "axis %d: a step other than 1 with bounds over the dims", a);
            return false;
        }
        Expr *bx = st[i], *fx = en[i];
        int64_t c;
        if (ir_is_const(bx, &c) && c < 0)
            bx = ir_binop(I->c, EX_ADD, E, bx);
        if (ir_is_const(fx, &c) && (c < 0 || c >= INT32_MAX))
            fx = c < 0 ? ir_binop(I->c, EX_ADD, E, fx) : E; /* INT64_MAX: to the end */
        Expr *len = ir_simplify(I->c, ir_binop(I->c, EX_SUB, fx, bx));
        if (!proven_nonneg(I, bx) || !proven_nonneg(I, ir_binop(I->c, EX_SUB, len, ir_int(I->c, 1))) ||
            !proven_nonneg(I, ir_binop(I->c, EX_SUB, E, fx))) {
            Arena *ar = I->u->arena;
            fail(I, "axis %d: the slice from %s to %s is not proven to lie within the axis of "
                    "%s elements and hold one, for the declared ranges (narrow them with --dims)",
                 a, ir_expr_str(ar, ir_simplify(I->c, bx)), ir_expr_str(ar, ir_simplify(I->c, fx)),
                 ir_expr_str(ar, ir_simplify(I->c, E)));
            return false;
        }
        start[a] = ir_simplify(I->c, bx);
        shape[a] = len;
    }
    Var **ax = axes_of(I, r, shape);
    Expr *idx[MAXR];
    for (int d = 0; d < r; d++)
        idx[d] = ir_simplify(I->c, ir_binop(I->c, EX_ADD, start[d],
                                            ir_binop(I->c, EX_MUL, ir_varref(I->c, ax[d]),
                                                     ir_int(I->c, step[d]))));
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, r, idx, false)) != NULL;
}

/* Split into the node's outputs along axis: sizes from the constant input
 * (or attribute), else equal parts. */
static bool op_split(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    int r = x->rank, a = norm_axis(I, attr_int(I->node, "axis", 0), r), n = (int)I->node->n_output;
    int64_t e, ns = 0;
    if (a < 0)
        return false;
    if (!ir_is_const(ir_simplify(I->c, x->shape[a]), &e)) {
        fail(I, "the split axis's extent uses dims (not supported yet)");
        return false;
    }
    const int64_t *sizes = NULL;
    const Onnx__AttributeProto *sa = attr(I->node, "split");
    if (sa) {
        sizes = sa->ints;
        ns = (int64_t)sa->n_ints;
    } else if (I->node->n_input > 1 && I->node->input[1][0]) {
        if (!(sizes = const_ints(I, input(I, 1), &ns))) {
            if (!I->failed)
                fail(I, "split must be a constant");
            return false;
        }
    }
    if (n < 1 || n > 64 || (sizes && ns != n)) {
        fail(I, "%d outputs for %lld sizes", n, (long long)ns);
        return false;
    }
    int64_t at = 0, part = (e + n - 1) / n;
    for (int k = 0; k < n; k++) {
        int64_t len = sizes ? sizes[k] : (k < n - 1 ? part : e - part * (n - 1));
        if (len < 1 || at + len > e) {
            fail(I, "part %d has %lld elements", k, (long long)len);
            return false;
        }
        Expr *shape[MAXR] = {NULL}, *idx[MAXR];
        for (int d = 0; d < r; d++)
            shape[d] = d == a ? ir_int(I->c, len) : x->shape[d];
        Var **ax = axes_of(I, r, shape);
        for (int d = 0; d < r; d++)
            idx[d] = d == a ? ir_simplify(I->c, ir_binop(I->c, EX_ADD, ir_varref(I->c, ax[d]),
                                                         ir_int(I->c, at)))
                            : ir_varref(I->c, ax[d]);
        if (!define(I, k, x->dt, r, ax, ir_load(I->c, x->t, r, idx, false)))
            return false;
        at += len;
    }
    if (!sizes && at != e) {
        fail(I, "%lld elements do not split into %d parts", (long long)e, n);
        return false;
    }
    return true;
}

/* Trilu(x, k): the upper (or lower) triangle of the last two axes, the
 * diagonal shifted by the constant k, zeros elsewhere. */
static bool op_trilu(Imp *I)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    int64_t k = 0, n = 1;
    if (I->node->n_input > 1 && I->node->input[1][0]) {
        const int64_t *kv = const_ints(I, input(I, 1), &n);
        if (!kv || n != 1) {
            if (!I->failed)
                fail(I, "k must be a constant");
            return false;
        }
        k = kv[0];
    }
    if (x->rank < 2) {
        fail(I, "rank %d", x->rank);
        return false;
    }
    int r = x->rank;
    Var **ax = axes_of(I, r, x->shape);
    Expr *diag = ir_binop(I->c, EX_SUB, ir_varref(I->c, ax[r - 1]), ir_varref(I->c, ax[r - 2]));
    bool upper = attr_int(I->node, "upper", 1);
    Expr *keep = upper ? ir_binop(I->c, EX_LE, ir_int(I->c, k), diag)
                       : ir_binop(I->c, EX_LE, diag, ir_int(I->c, k));
    Expr *zero = ir_zero(I->c, x->dt);
    return define(I, 0, x->dt, r, ax, ir_select(I->c, keep, read_at(I, x, r, ax), zero)) != NULL;
}

/* Range(start, limit, delta) of shape values (integer; delta a nonzero
 * constant): start + i * delta for i below ceil((limit - start) / delta),
 * an extent over the dims where limit is one (GPT-2's position ids). */
static bool op_range(Imp *I)
{
    Val *v[3] = {input(I, 0), input(I, 1), input(I, 2)};
    if (!v[0] || !v[1] || !v[2])
        return false;
    int64_t delta;
    for (int i = 0; i < 3; i++)
        if (v[i]->nknown != 1 || (v[i]->dt != DT_I64 && v[i]->dt != DT_I32)) {
            fail(I, "start, limit and delta must be integers known when compiling");
            return false;
        }
    if (!ir_is_const(v[2]->known[0], &delta) || delta == 0) {
        fail(I, "delta must be a nonzero constant");
        return false;
    }
    Expr *span = ir_binop(I->c, EX_SUB, v[1]->known[0], v[0]->known[0]);
    if (delta < 0)
        span = ir_unop(I->c, EX_NEG, span);
    int64_t d = delta < 0 ? -delta : delta, e;
    Expr *len = ir_simplify(I->c, ir_binop(I->c, EX_DIV, ir_binop(I->c, EX_ADD, span, ir_int(I->c, d - 1)),
                                           ir_int(I->c, d)));
    if (ir_is_const(len, &e) && e < 1) {
        fail(I, "an empty range is not supported");
        return false;
    }
    Var **ax = axes_of(I, 1, &len);
    Expr *body = ir_binop(I->c, EX_ADD, v[0]->known[0],
                          ir_binop(I->c, EX_MUL, ir_varref(I->c, ax[0]), ir_int(I->c, delta)));
    return define(I, 0, v[0]->dt, 1, ax, body) != NULL;
}

/* ArgMax/ArgMin along axis: the extreme value M (an intermediate), then
 * the least index holding it (the greatest with select_last_index), both
 * exact reductions; int64, keepdims as the Reduce operators. */
static bool op_argext(Imp *I, bool max)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (x->dt == DT_BOOL || x->rank < 1) {
        fail(I, "%s of a rank %d %s tensor", I->node->op_type, x->rank, ir_dtype_name(x->dt));
        return false;
    }
    int r = x->rank, a = norm_axis(I, attr_int(I->node, "axis", 0), r);
    if (a < 0)
        return false;
    bool keep = attr_int(I->node, "keepdims", 1), last = attr_int(I->node, "select_last_index", 0);
    Expr *ms[MAXR] = {NULL};
    for (int d = 0, o = 0; d < r; d++)
        if (d != a)
            ms[o++] = x->shape[d];
    Var **max_ax = axes_of(I, r - 1, ms);
    Var *j = ir_var(I->c, "j", VK_AXIS, x->shape[a]);
    Expr *xi[MAXR];
    for (int d = 0, o = 0; d < r; d++)
        xi[d] = d == a ? ir_varref(I->c, j) : ir_varref(I->c, max_ax[o++]);
    Tensor *M = temp(I, max ? "max" : "min", x->dt, r - 1, max_ax,
                     ir_reduce(I->c, max ? RD_MAX : RD_MIN, 1, &j, ir_load(I->c, x->t, r, xi, false)));
    Expr *os[MAXR] = {NULL};
    int orank = 0;
    for (int d = 0; d < r; d++)
        if (d != a)
            os[orank++] = x->shape[d];
        else if (keep)
            os[orank++] = ir_int(I->c, 1);
    Var **ax = axes_of(I, orank, os);
    Var *k = ir_var(I->c, "k", VK_AXIS, x->shape[a]);
    Expr *mi[MAXR];
    for (int d = 0, o = 0, m = 0; d < r; d++) {
        if (d == a) {
            xi[d] = ir_varref(I->c, k);
            o += keep;
        } else {
            xi[d] = ir_varref(I->c, ax[o++]);
            mi[m++] = xi[d];
        }
    }
    Expr *hit = ir_binop(I->c, EX_EQ, ir_load(I->c, x->t, r, xi, false), ir_load(I->c, M, r - 1, mi, false));
    Expr *none = ir_int(I->c, last ? -1 : INT32_MAX);
    Expr *e = ir_reduce(I->c, last ? RD_MAX : RD_MIN, 1, &k, ir_select(I->c, hit, ir_varref(I->c, k), none));
    return define(I, 0, DT_I64, orank, ax, e) != NULL;
}

/* GatherElements(data, indices, axis): out[p] = data[p with its axis
 * coordinate replaced by indices[p]], checked when it runs. */
static bool op_gather_elements(Imp *I)
{
    Val *x = input(I, 0), *ix = input(I, 1);
    if (!x || !ix)
        return false;
    int r = x->rank, a = norm_axis(I, attr_int(I->node, "axis", 0), r);
    if (a < 0)
        return false;
    if (ix->rank != r || (ix->dt != DT_I64 && ix->dt != DT_I32)) {
        fail(I, "indices must be integers of the data's rank");
        return false;
    }
    Var **ax = axes_of(I, r, ix->shape);
    Expr *ii[MAXR], *xi[MAXR];
    for (int d = 0; d < r; d++)
        ii[d] = ir_varref(I->c, ax[d]);
    Expr *id = ir_load(I->c, ix->t, r, ii, false);
    Expr *pos = ir_flat_index(I->c, r, ix->shape, ax);
    for (int d = 0; d < r; d++) /* the other axes: within data's (index extents <= data's) */
        xi[d] = d == a ? ir_op(I->c, EX_CHECK, id, x->shape[a], pos)
                       : ir_op(I->c, EX_CHECK, ir_varref(I->c, ax[d]), x->shape[d], pos);
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, r, xi, false)) != NULL;
}

/* GatherND (batch_dims b): the last axis of indices, of k elements known
 * when compiling, picks a position on data's axes b..b+k-1 (negative ones
 * from the end, checked as Gather's); out[i..., j...] = data[i[:b]...,
 * ix[i..., 0], ..., ix[i..., k-1], j...]. */
static bool op_gather_nd(Imp *I)
{
    Val *x = input(I, 0), *ix = input(I, 1);
    if (!x || !ix)
        return false;
    int64_t b = attr_int(I->node, "batch_dims", 0), k = 0;
    int q = ix->rank;
    if (ix->dt != DT_I64 || q < 1 || !ir_is_const(ir_simplify(I->c, ix->shape[q - 1]), &k)) {
        fail(I, "indices must be int64 with a last axis known when compiling");
        return false;
    }
    if (b < 0 || b >= q || k < 1 || b + k > x->rank) {
        fail(I, "batch_dims %lld and %lld indices per position do not fit data of rank %d and "
                "indices of rank %d", (long long)b, (long long)k, x->rank, q);
        return false;
    }
    for (int d = 0; d < b; d++)
        if (!same_extent(I, x->shape[d], ix->shape[d])) {
            fail(I, "batch axis %d of data and indices (%s and %s) is not proven equal", d,
                 ext_str(I, x->shape[d]), ext_str(I, ix->shape[d]));
            return false;
        }
    int r = q - 1 + x->rank - (int)(b + k);
    if (r > MAXR) {
        fail(I, "rank %d", r);
        return false;
    }
    Expr *shape[MAXR] = {NULL};
    for (int d = 0; d < q - 1; d++)
        shape[d] = ix->shape[d];
    for (int d = (int)(b + k); d < x->rank; d++)
        shape[q - 1 + d - (int)(b + k)] = x->shape[d];
    Var **ax = axes_of(I, r, shape);
    Expr *pos = ir_flat_index(I->c, r, shape, ax), *ii[MAXR], *xi[MAXR];
    for (int d = 0; d < q - 1; d++)
        ii[d] = ir_varref(I->c, ax[d]);
    for (int d = 0; d < x->rank; d++) {
        if (d < b) {
            xi[d] = ir_varref(I->c, ax[d]);
        } else if (d < b + k) {
            ii[q - 1] = ir_int(I->c, d - b);
            xi[d] = ir_op(I->c, EX_CHECK, ir_load(I->c, ix->t, q, ii, false), x->shape[d], pos);
        } else {
            xi[d] = ir_varref(I->c, ax[q - 1 + d - (int)(b + k)]);
        }
    }
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, x->rank, xi, false)) != NULL;
}

/* BatchNormalization (inference): scale (x - mean) / sqrt(var + eps) + B
 * over the channels, axis 1. */
static bool op_batchnorm(Imp *I)
{
    Val *v[5];
    for (int i = 0; i < 5; i++)
        if (!(v[i] = input(I, i)))
            return false;
    Val *x = v[0];
    if (x->rank < 2 || x->dt != DT_F32 || attr_int(I->node, "training_mode", 0) ||
        I->node->n_output > 1) {
        fail(I, "only inference on f32 tensors of rank 2 or more is supported");
        return false;
    }
    for (int i = 1; i < 5; i++)
        if (v[i]->rank != 1 || v[i]->dt != DT_F32 ||
            !same_extent(I, v[i]->shape[0], x->shape[1])) {
            fail(I, "scale, B, mean and var must be vectors over the channels");
            return false;
        }
    double eps = attr_float(I->node, "epsilon", 1e-5);
    Var **ax = axes_of(I, x->rank, x->shape);
    Expr *c = ir_varref(I->c, ax[1]);
    Expr *p[4];
    for (int i = 1; i < 5; i++)
        p[i - 1] = ir_load(I->c, v[i]->t, 1, &c, false);
    Expr *e = ir_binop(I->c, EX_SUB, read_at(I, x, x->rank, ax), p[2]);
    e = ir_binop(I->c, EX_MUL, e, ir_unop(I->c, EX_RSQRT, ir_binop(I->c, EX_ADD, p[3], fl(I, eps))));
    e = ir_binop(I->c, EX_ADD, ir_binop(I->c, EX_MUL, p[0], e), p[1]);
    return define(I, 0, DT_F32, x->rank, ax, e) != NULL;
}

/* Mod: integers with fmod 0 as Python's % (the IR's floor modulo), with
 * fmod 1 truncated as C's %; floats are not supported. */
static bool op_mod(Imp *I)
{
    Val *v[2] = {input(I, 0), input(I, 1)};
    if (!v[0] || !v[1])
        return false;
    if (v[0]->dt == DT_F32 || v[0]->dt != v[1]->dt || v[0]->dt == DT_BOOL) {
        fail(I, "Mod of %s is not supported (integers are)", ir_dtype_name(v[0]->dt));
        return false;
    }
    int r;
    Expr *shape[MAXR] = {NULL};
    if (!broadcast(I, v, 2, &r, shape))
        return false;
    Var **ax = axes_of(I, r, shape);
    Expr *a = read_at(I, v[0], r, ax), *b = read_at(I, v[1], r, ax);
    Expr *e = attr_int(I->node, "fmod", 0)
                  ? ir_binop(I->c, EX_SUB, a, ir_binop(I->c, EX_MUL, trunc_div(I->c, a, b), b))
                  : ir_binop(I->c, EX_MOD, a, b);
    return define(I, 0, v[0]->dt, r, ax, e) != NULL;
}

/* The window geometry of Conv and the pools over the spatial axes 2..:
 * kernel extents, strides, dilations, and, as expressions over the dims
 * (numbers where the input's extents are), the input's extents, the
 * leading and trailing padding and the output extents (auto_pad, pads,
 * ceil_mode as ONNX defines them). */
typedef struct Window {
    int nsp;
    int64_t k[MAXR], stride[MAXR], dil[MAXR];
    Expr *in[MAXR], *pad[MAXR], *pad_end[MAXR], *out[MAXR];
    bool past_end; /* ceil_mode: the last window may reach past the trailing padding */
} Window;

static bool ints_attr(Imp *I, const char *name, int n, int64_t *out, int64_t def)
{
    const Onnx__AttributeProto *a = attr(I->node, name);
    for (int i = 0; i < n; i++)
        out[i] = def;
    if (!a)
        return true;
    if ((int)a->n_ints != n) {
        fail(I, "%s has %zu values, the node needs %d", name, a->n_ints, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        out[i] = a->ints[i];
    return true;
}

static Expr *num(Imp *I, int64_t v) { return ir_int(I->c, v); }
static Expr *plus(Imp *I, Expr *a, int64_t v) { return ir_binop(I->c, EX_ADD, a, num(I, v)); }

/* The output extent of ceil_mode on an axis of in elements, lead and end
 * padding, a window spanning span elements and stride s: ceil(room / s) + 1
 * windows, room = in + lead + end - span >= 0, less the last where it
 * would start at or past in + lead (ONNX's rule). Written with floor
 * divisions only, so that it is an extent: with t = span - end, the last
 * window is dropped exactly when no multiple of s lies in in + lead - t ..
 * in + lead - 1, which never happens for t >= s, always for t <= 0, and
 * for 0 < t < s leaves (in + lead - 1) / s + 1 windows. */
static Expr *ceil_windows(Imp *I, Expr *in, int64_t lead, int64_t end, int64_t span, int64_t s)
{
    Expr *room = plus(I, in, lead + end - span);
    int64_t t = span - end;
    if (t >= s)
        return plus(I, ir_binop(I->c, EX_DIV, plus(I, room, s - 1), num(I, s)), 1);
    if (t >= 1)
        return plus(I, ir_binop(I->c, EX_DIV, plus(I, in, lead - 1), num(I, s)), 1);
    return ir_binop(I->c, EX_DIV, plus(I, room, s - 1), num(I, s));
}

static bool window(Imp *I, Val *x, const int64_t *kernel, Window *w)
{
    w->nsp = x->rank - 2;
    w->past_end = false;
    if (w->nsp < 1 || w->nsp > MAXR - 2) {
        fail(I, "an input of rank %d", x->rank);
        return false;
    }
    int64_t pads[2 * MAXR];
    if (!ints_attr(I, "strides", w->nsp, w->stride, 1) || !ints_attr(I, "dilations", w->nsp, w->dil, 1) ||
        !ints_attr(I, "pads", 2 * w->nsp, pads, 0))
        return false;
    const Onnx__AttributeProto *ap = attr(I->node, "auto_pad");
    char mode[16] = "NOTSET";
    if (ap && ap->has_s && ap->s.len < sizeof mode) {
        memcpy(mode, ap->s.data, ap->s.len);
        mode[ap->s.len] = '\0';
    }
    bool ceil_mode = attr_int(I->node, "ceil_mode", 0);
    for (int i = 0; i < w->nsp; i++) {
        w->k[i] = kernel[i];
        Expr *in = w->in[i] = ir_simplify(I->c, x->shape[2 + i]);
        int64_t s = w->stride[i];
        if (s < 1 || w->dil[i] < 1 || w->k[i] < 1) {
            fail(I, "strides, dilations and kernel extents must be positive");
            return false;
        }
        int64_t span = w->dil[i] * (w->k[i] - 1) + 1;
        if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
            /* ceil(in / s) windows; the padding they need, (out - 1) * s +
             * span - in, is span - 1 - (in - 1) % s, or 0 */
            w->out[i] = ir_simplify(I->c, ir_binop(I->c, EX_DIV, plus(I, in, s - 1), num(I, s)));
            Expr *m = ir_binop(I->c, EX_MOD, plus(I, in, -1), num(I, s));
            Expr *total = ir_binop(I->c, EX_MAX, num(I, 0),
                                   ir_binop(I->c, EX_SUB, num(I, span - 1), m));
            Expr *lead = ir_binop(I->c, EX_DIV, mode[5] == 'U' ? total : plus(I, total, 1),
                                  num(I, 2));
            w->pad[i] = ir_simplify(I->c, lead);
            w->pad_end[i] = ir_simplify(I->c, ir_binop(I->c, EX_SUB, total, lead));
            continue;
        }
        if (strcmp(mode, "VALID") == 0)
            pads[i] = pads[i + w->nsp] = 0;
        int64_t lead = pads[i], end = pads[i + w->nsp];
        w->pad[i] = num(I, lead);
        w->pad_end[i] = num(I, end);
        Expr *room = ir_simplify(I->c, plus(I, in, lead + end - span));
        if (!proven_nonneg(I, room)) {
            int64_t n;
            fail(I, "the window (%lld elements) is larger than the padded input (%s) on spatial "
                    "axis %d%s", (long long)span, ext_str(I, plus(I, in, lead + end)), i,
                 ir_is_const(in, &n) ? ""
                                     : " at some sizes in the declared ranges (narrow them with --dims)");
            return false;
        }
        if (!ceil_mode) {
            w->out[i] = ir_simplify(I->c, plus(I, ir_binop(I->c, EX_DIV, room, num(I, s)), 1));
            continue;
        }
        w->out[i] = ir_simplify(I->c, ceil_windows(I, in, lead, end, span, s));
        /* the last window reaches past the trailing padding where its end,
         * (out - 1) * s + span, may exceed in + lead + end */
        Expr *last = ir_binop(I->c, EX_MUL, plus(I, w->out[i], -1), num(I, s));
        w->past_end |= !ir_prove_nonneg(I->c, ir_simplify(I->c, ir_binop(I->c, EX_SUB, room, last)),
                                        RANGE_OPEN);
    }
    return true;
}

/* The input coordinate of output position o and window position k on
 * spatial axis i. */
static Expr *win_at(Imp *I, const Window *w, int i, Var *o, Var *k)
{
    Expr *e = ir_binop(I->c, EX_ADD, ir_binop(I->c, EX_MUL, ir_varref(I->c, o), num(I, w->stride[i])),
                       ir_binop(I->c, EX_MUL, ir_varref(I->c, k), num(I, w->dil[i])));
    return ir_simplify(I->c, ir_binop(I->c, EX_SUB, e, w->pad[i]));
}

/* Conv(x, w, B): out[n, m, o...] = sum[c, k...](x?[n, group's c, o * s + k * d - pad]
 * * w[m, c, k...]) + B[m]; zeros where the window leaves x. */
static bool op_conv(Imp *I)
{
    Val *x = input(I, 0), *wv = input(I, 1), *b = input(I, 2);
    if (!x || !wv || I->failed)
        return false;
    if (x->dt != DT_F32 || wv->dt != DT_F32 || wv->rank != x->rank) {
        fail(I, "Conv of %s tensors of rank %d and %d", ir_dtype_name(x->dt), x->rank, wv->rank);
        return false;
    }
    int64_t kernel[MAXR], M = 0, Cg = 0, C = 0, g = attr_int(I->node, "group", 1);
    for (int i = 0; i + 2 < wv->rank; i++)
        if (!ir_is_const(ir_simplify(I->c, wv->shape[i + 2]), &kernel[i])) {
            fail(I, "kernel extents over the dims");
            return false;
        }
    Window w;
    if (!window(I, x, kernel, &w))
        return false;
    if (!ir_is_const(ir_simplify(I->c, wv->shape[0]), &M) || !ir_is_const(ir_simplify(I->c, wv->shape[1]), &Cg) ||
        !ir_is_const(ir_simplify(I->c, x->shape[1]), &C) || g < 1 || C != Cg * g || M % g) {
        fail(I, "channels: %lld input, %lld per group in the weights, group %lld",
             (long long)C, (long long)Cg, (long long)g);
        return false;
    }
    int r = x->rank;
    Expr *shape[MAXR] = {NULL};
    shape[0] = x->shape[0];
    shape[1] = ir_int(I->c, M);
    for (int i = 0; i < w.nsp; i++)
        shape[2 + i] = w.out[i];
    Var **ax = axes_of(I, r, shape);
    Var *red[MAXR];
    red[0] = ir_var(I->c, "c", VK_AXIS, ir_int(I->c, Cg));
    for (int i = 0; i < w.nsp; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "k%d", i);
        red[1 + i] = ir_var(I->c, nm, VK_AXIS, ir_int(I->c, w.k[i]));
    }
    Expr *xi[MAXR], *wi[MAXR];
    xi[0] = ir_varref(I->c, ax[0]);
    Expr *chan = ir_varref(I->c, red[0]);
    if (g > 1)
        chan = ir_binop(I->c, EX_ADD, ir_binop(I->c, EX_MUL, ir_binop(I->c, EX_DIV, ir_varref(I->c, ax[1]),
                                                                       ir_int(I->c, M / g)),
                                                ir_int(I->c, Cg)), chan);
    xi[1] = ir_simplify(I->c, chan);
    wi[0] = ir_varref(I->c, ax[1]);
    wi[1] = ir_varref(I->c, red[0]);
    for (int i = 0; i < w.nsp; i++) {
        xi[2 + i] = win_at(I, &w, i, ax[2 + i], red[1 + i]);
        wi[2 + i] = ir_varref(I->c, red[1 + i]);
    }
    Expr *e = ir_reduce(I->c, RD_SUM, 1 + w.nsp, red,
                        ir_binop(I->c, EX_MUL, ir_load(I->c, x->t, r, xi, true), ir_load(I->c, wv->t, r, wi, false)));
    if (b) {
        Expr *m = ir_varref(I->c, ax[1]);
        e = ir_binop(I->c, EX_ADD, e, ir_load(I->c, b->t, 1, &m, false));
    }
    return define(I, 0, DT_F32, r, ax, e) != NULL;
}

/* Whether the input coordinates at (one per spatial axis) lie inside x,
 * or with padded inside the padded input (from -lead to the extent plus
 * the trailing padding). */
static Expr *within(Imp *I, const Window *w, Expr *const *at, bool padded)
{
    Expr *all = NULL;
    for (int i = 0; i < w->nsp; i++) {
        Expr *lo = num(I, 0), *hi = w->in[i];
        if (padded) {
            lo = ir_simplify(I->c, ir_unop(I->c, EX_NEG, w->pad[i]));
            hi = ir_simplify(I->c, ir_binop(I->c, EX_ADD, hi, w->pad_end[i]));
        }
        Expr *in = ir_binop(I->c, EX_AND, ir_binop(I->c, EX_LE, lo, at[i]),
                            ir_binop(I->c, EX_LT, at[i], hi));
        all = all ? ir_binop(I->c, EX_AND, all, in) : in;
    }
    return all;
}

/* MaxPool and AveragePool (one output): the window's max (padding never
 * wins) or mean: over the elements inside x, or with count_include_pad
 * over the whole window, less what of the last one (ceil_mode) reaches
 * past the padding, as ONNX Runtime and ONNX's reference count. */
static bool op_pool(Imp *I, bool max)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (x->dt != DT_F32 || I->node->n_output > 1 || attr_int(I->node, "storage_order", 0)) {
        fail(I, "only the f32 pooled output is supported (not Indices)");
        return false;
    }
    int64_t kernel[MAXR];
    Window w;
    w.nsp = x->rank - 2;
    if (w.nsp < 1 || !ints_attr(I, "kernel_shape", w.nsp, kernel, 0) || !window(I, x, kernel, &w))
        return false;
    int r = x->rank;
    Expr *shape[MAXR] = {NULL};
    shape[0] = x->shape[0];
    shape[1] = x->shape[1];
    for (int i = 0; i < w.nsp; i++)
        shape[2 + i] = w.out[i];
    Var **ax = axes_of(I, r, shape);
    Var *red[MAXR];
    Expr *xi[MAXR], *count = num(I, 1);
    xi[0] = ir_varref(I->c, ax[0]);
    xi[1] = ir_varref(I->c, ax[1]);
    for (int i = 0; i < w.nsp; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "k%d", i);
        red[i] = ir_var(I->c, nm, VK_AXIS, num(I, w.k[i]));
        xi[2 + i] = win_at(I, &w, i, ax[2 + i], red[i]);
        count = ir_binop(I->c, EX_MUL, count, num(I, w.k[i]));
    }
    Expr *v = ir_load(I->c, x->t, r, xi, true);
    Expr *e;
    if (max) {
        e = ir_reduce(I->c, RD_MAX, w.nsp, red, ir_select(I->c, within(I, &w, xi + 2, false), v,
                                                           fl(I, -INFINITY)));
    } else {
        e = ir_reduce(I->c, RD_SUM, w.nsp, red, v);
        Expr *n = ir_cast(I->c, DT_F32, ir_simplify(I->c, count));
        bool pads = attr_int(I->node, "count_include_pad", 0);
        if (!pads || w.past_end) { /* the count inside: over axes of its own */
            Var *red2[MAXR];
            Expr *at[MAXR];
            for (int i = 0; i < w.nsp; i++) {
                char nm[16];
                snprintf(nm, sizeof nm, "q%d", i);
                red2[i] = ir_var(I->c, nm, VK_AXIS, num(I, w.k[i]));
                at[i] = win_at(I, &w, i, ax[2 + i], red2[i]);
            }
            Expr *one = ir_select(I->c, within(I, &w, at, pads), num(I, 1), num(I, 0));
            n = ir_cast(I->c, DT_F32, ir_reduce(I->c, RD_SUM, w.nsp, red2, one));
        }
        e = ir_binop(I->c, EX_DIV, e, n);
    }
    return define(I, 0, DT_F32, r, ax, e) != NULL;
}

/* GlobalAveragePool and GlobalMaxPool: over every spatial axis, kept as 1. */
static bool op_global_pool(Imp *I, bool max)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    if (x->dt != DT_F32 || x->rank < 3) {
        fail(I, "a rank %d %s input", x->rank, ir_dtype_name(x->dt));
        return false;
    }
    int r = x->rank;
    Expr *shape[MAXR] = {NULL}, *xi[MAXR], *count = ir_int(I->c, 1);
    Var *red[MAXR];
    for (int d = 0; d < r; d++)
        shape[d] = d < 2 ? x->shape[d] : ir_int(I->c, 1);
    Var **ax = axes_of(I, r, shape);
    for (int d = 0; d < r; d++) {
        if (d < 2) {
            xi[d] = ir_varref(I->c, ax[d]);
            continue;
        }
        char nm[16];
        snprintf(nm, sizeof nm, "r%d", d);
        red[d - 2] = ir_var(I->c, nm, VK_AXIS, x->shape[d]);
        xi[d] = ir_varref(I->c, red[d - 2]);
        count = ir_binop(I->c, EX_MUL, count, x->shape[d]);
    }
    Expr *e = ir_reduce(I->c, max ? RD_MAX : RD_SUM, r - 2, red, ir_load(I->c, x->t, r, xi, false));
    if (!max)
        e = ir_binop(I->c, EX_DIV, e, ir_cast(I->c, DT_F32, ir_simplify(I->c, count)));
    return define(I, 0, DT_F32, r, ax, e) != NULL;
}

/* Tile(x, repeats): out[i...] = x[i % e...], repeats a shape value. */
static bool op_tile(Imp *I)
{
    Val *x = input(I, 0), *rv = x ? input(I, 1) : NULL;
    if (!rv || rv->nknown != x->rank) {
        if (!I->failed)
            fail(I, "repeats must be known when compiling, one per axis");
        return false;
    }
    int r = x->rank;
    Expr *shape[MAXR] = {NULL}, *idx[MAXR];
    for (int d = 0; d < r; d++) {
        int64_t c;
        if (ir_is_const(rv->known[d], &c) && c < 1) {
            fail(I, "repeats of %lld on axis %d", (long long)c, d);
            return false;
        }
        shape[d] = ir_simplify(I->c, ir_binop(I->c, EX_MUL, x->shape[d], rv->known[d]));
    }
    Var **ax = axes_of(I, r, shape);
    for (int d = 0; d < r; d++)
        idx[d] = ir_simplify(I->c, ir_binop(I->c, EX_MOD, ir_varref(I->c, ax[d]), x->shape[d]));
    return define(I, 0, x->dt, r, ax, ir_load(I->c, x->t, r, idx, false)) != NULL;
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth of [N, C, H, W]: index maps. */
static bool op_depth_space(Imp *I, bool to_space /* DepthToSpace */)
{
    Val *x = input(I, 0);
    if (!x)
        return false;
    int64_t b = attr_int(I->node, "blocksize", 0), C, H, W;
    if (x->rank != 4 || b < 1 || !ir_is_const(ir_simplify(I->c, x->shape[1]), &C) ||
        !ir_is_const(ir_simplify(I->c, x->shape[2]), &H) || !ir_is_const(ir_simplify(I->c, x->shape[3]), &W) ||
        (to_space ? C % (b * b) : H % b || W % b)) {
        fail(I, "a rank 4 input of fixed extents that blocksize %lld divides", (long long)b);
        return false;
    }
    const Onnx__AttributeProto *ma = attr(I->node, "mode");
    bool crd = ma && ma->has_s && ma->s.len == 3 && memcmp(ma->s.data, "CRD", 3) == 0;
    ExprCtx *c = I->c;
    Expr *B = ir_int(c, b);
    Expr *shape[4] = {x->shape[0], ir_int(c, to_space ? C / (b * b) : C * b * b),
                      ir_int(c, to_space ? H * b : H / b), ir_int(c, to_space ? W * b : W / b)};
    Var **ax = axes_of(I, 4, shape);
    Expr *n = ir_varref(c, ax[0]), *ch = ir_varref(c, ax[1]), *h = ir_varref(c, ax[2]), *w = ir_varref(c, ax[3]);
    Expr *idx[4] = {n, NULL, NULL, NULL};
    if (to_space) { /* out[n, c, h, w] = x[n, channel of (h % b, w % b, c), h / b, w / b] */
        Expr *bh = ir_binop(c, EX_MOD, h, B), *bw = ir_binop(c, EX_MOD, w, B);
        Expr *Co = shape[1];
        idx[1] = crd ? ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ch, ir_int(c, b * b)),
                                ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, bh, B), bw))
                     : ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, bh, B), bw), Co), ch);
        idx[2] = ir_binop(c, EX_DIV, h, B);
        idx[3] = ir_binop(c, EX_DIV, w, B);
    } else { /* SpaceToDepth: out[n, (bh * b + bw) * C + c, h, w] = x[n, c, h * b + bh, w * b + bw] */
        Expr *blk = ir_binop(c, EX_DIV, ch, ir_int(c, C)), *cc = ir_binop(c, EX_MOD, ch, ir_int(c, C));
        idx[1] = cc;
        idx[2] = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, h, B), ir_binop(c, EX_DIV, blk, B));
        idx[3] = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, w, B), ir_binop(c, EX_MOD, blk, B));
    }
    for (int d = 1; d < 4; d++)
        idx[d] = ir_simplify(c, idx[d]);
    return define(I, 0, x->dt, 4, ax, ir_load(c, x->t, 4, idx, false)) != NULL;
}

/* CumSum(x, axis): out[.., j, ..] = sum over k <= j (k < j exclusive, k >= j
 * reverse) of x[.., k, ..], axis a constant. */
static bool op_cumsum(Imp *I)
{
    Val *x = input(I, 0);
    int64_t n;
    const int64_t *av = x ? const_ints(I, input(I, 1), &n) : NULL;
    if (!av || n != 1) {
        if (!I->failed)
            fail(I, "axis must be a constant");
        return false;
    }
    int r = x->rank, a = norm_axis(I, av[0], r);
    if (a < 0)
        return false;
    if (x->dt == DT_BOOL) {
        fail(I, "CumSum of bool");
        return false;
    }
    bool excl = attr_int(I->node, "exclusive", 0), rev = attr_int(I->node, "reverse", 0);
    Var **ax = axes_of(I, r, x->shape);
    Var *k = ir_var(I->c, "k", VK_AXIS, x->shape[a]);
    Expr *xi[MAXR];
    for (int d = 0; d < r; d++)
        xi[d] = d == a ? ir_varref(I->c, k) : ir_varref(I->c, ax[d]);
    Expr *kk = ir_varref(I->c, k), *j = ir_varref(I->c, ax[a]);
    Expr *in = rev ? ir_binop(I->c, excl ? EX_LT : EX_LE, j, kk) : ir_binop(I->c, excl ? EX_LT : EX_LE, kk, j);
    Expr *zero = ir_zero(I->c, x->dt);
    Expr *e = ir_reduce(I->c, RD_SUM, 1, &k, ir_select(I->c, in, ir_load(I->c, x->t, r, xi, false), zero));
    return define(I, 0, x->dt, r, ax, e) != NULL;
}

typedef struct OpKind { const char *name; int kind; ReduceOp rop; } OpKind;
static const OpKind other_ops[] = {
    {"Softmax", K_SOFTMAX, 0},         {"LogSoftmax", K_LOGSOFTMAX, 0},
    {"Where", K_WHERE, 0},             {"Cast", K_CAST, 0},
    {"Identity", K_IDENTITY, 0},       {"MatMul", K_MATMUL, 0},
    {"Gemm", K_GEMM, 0},               {"Transpose", K_TRANSPOSE, 0},
    {"ReduceSum", K_REDUCE, RD_SUM},   {"ReduceMax", K_REDUCE, RD_MAX},
    {"ReduceMin", K_REDUCE, RD_MIN},   {"ReduceProd", K_REDUCE, RD_PROD},
    {"ReduceMean", K_MEAN, RD_SUM},    {"Constant", K_CONSTANT, 0},
    {"Dropout", K_DROPOUT, 0},         {"Reciprocal", K_RECIP, 0},
    {"Clip", K_CLIP, 0},               {"Reshape", K_RESHAPE, 0},
    {"Flatten", K_RESHAPE, 0},         {"Squeeze", K_RESHAPE, 0},
    {"Unsqueeze", K_RESHAPE, 0},       {"Concat", K_CONCAT, 0},
    {"Gather", K_GATHER, 0},           {"LayerNormalization", K_LAYERNORM, 0},
    {"Expand", K_EXPAND, 0},           {"Mean", K_MEANOF, 0},
    {"PRelu", K_PRELU, 0},             {"Shape", K_SHAPE, 0},
    {"Size", K_SIZE, 0},               {"ConstantOfShape", K_CONSTOFSHAPE, 0},
    {"Slice", K_SLICE, 0},             {"Split", K_SPLIT, 0},
    {"ReduceL1", K_REDUCE_L1, RD_SUM}, {"ReduceL2", K_REDUCE_L2, RD_SUM},
    {"ReduceSumSquare", K_REDUCE_SQ, RD_SUM}, {"ReduceLogSum", K_REDUCE_LOGSUM, RD_SUM},
    {"ReduceLogSumExp", K_REDUCE_LSE, RD_SUM}, {"Trilu", K_TRILU, 0},
    {"Range", K_RANGE, 0},             {"ArgMax", K_ARGMAX, 0},
    {"ArgMin", K_ARGMIN, 0},           {"GatherElements", K_GATHER_ELEMENTS, 0},
    {"BatchNormalization", K_BATCHNORM, 0}, {"Mod", K_MOD, 0},
    {"Conv", K_CONV, 0},               {"MaxPool", K_MAXPOOL, 0},
    {"AveragePool", K_AVGPOOL, 0},     {"GlobalMaxPool", K_GMAXPOOL, 0},
    {"GlobalAveragePool", K_GAVGPOOL, 0}, {"Tile", K_TILE, 0},
    {"DepthToSpace", K_D2S, 0},        {"SpaceToDepth", K_S2D, 0},
    {"CumSum", K_CUMSUM, 0},           {"GatherND", K_GATHER_ND, 0},
};

/* The lowering of op_type: 0 none (unsupported), else a code for dispatch. */
static int op_code(const char *op)
{
    for (size_t i = 0; i < sizeof unary_ops / sizeof *unary_ops; i++)
        if (strcmp(op, unary_ops[i].name) == 0)
            return 100 + (int)i;
    for (size_t i = 0; i < sizeof binary_ops / sizeof *binary_ops; i++)
        if (strcmp(op, binary_ops[i].name) == 0)
            return 200 + (int)i;
    for (size_t i = 0; i < sizeof other_ops / sizeof *other_ops; i++)
        if (strcmp(op, other_ops[i].name) == 0)
            return 300 + (int)i;
    for (size_t i = 0; i < sizeof composite_ops / sizeof *composite_ops; i++)
        if (strcmp(op, composite_ops[i]) == 0)
            return 400;
    return 0;
}

/* Whether e is an index over the variables of ax alone (no load). */
static bool plain_index(const Expr *e)
{
    switch (e->kind) {
    case EX_INT: return true;
    case EX_VAR: return e->var->kind != VK_DIM;
    case EX_ADD: case EX_SUB: case EX_MUL: case EX_DIV: case EX_MOD: case EX_MIN: case EX_MAX:
        return plain_index(e->op.a) && plain_index(e->op.b);
    default: return false;
    }
}

/* The node just imported, where its inputs are shape values and its
 * output a scalar or short vector: its elements known too. An output
 * that reads input 0 at plain indices (Identity, Reshape, Unsqueeze,
 * Squeeze, Flatten, Slice) takes the elements there; Gather by constant
 * indices, Concat, Cast to an integer and integer arithmetic compute them. */
static void propagate_known(Imp *I)
{
    const Onnx__NodeProto *n = I->node;
    Val *out = find(I, n->output[0]);
    if (!out || out->nknown >= 0 || out->rank > 1 || out->dt == DT_F32)
        return;
    int64_t len = 1;
    if (out->rank == 1 && (!ir_is_const(ir_simplify(I->c, out->shape[0]), &len) || len > MAXK))
        return;
    Val *in[16] = {NULL};
    int nin = (int)n->n_input < 16 ? (int)n->n_input : 16;
    for (int i = 0; i < nin; i++)
        in[i] = n->input[i][0] ? find(I, n->input[i]) : NULL;
    if (!in[0] || in[0]->nknown < 0)
        return;
    Expr *k[MAXK];
    const char *op = n->op_type;
    const Expr *body = out->t->body;
    if (strcmp(op, "Gather") == 0) {
        int64_t m;
        const int64_t *ix = const_ints(I, in[1], &m);
        if (!ix || m != len)
            return;
        for (int64_t j = 0; j < m; j++) {
            int64_t i = ix[j] < 0 ? ix[j] + in[0]->nknown : ix[j];
            if (i < 0 || i >= in[0]->nknown)
                return;
            k[j] = in[0]->known[i];
        }
    } else if (strcmp(op, "Concat") == 0) {
        int at = 0;
        for (int i = 0; i < nin; i++) {
            if (!in[i] || in[i]->nknown < 0 || at + in[i]->nknown > MAXK)
                return;
            for (int j = 0; j < in[i]->nknown; j++)
                k[at++] = in[i]->known[j];
        }
        if (at != len)
            return;
    } else if (body && body->kind == EX_LOAD && body->load.t == in[0]->t) {
        for (int64_t j = 0; j < len; j++) {
            int64_t flat = 0;
            for (int d = 0; d < body->load.n; d++) {
                if (!plain_index(body->load.idx[d]))
                    return;
                Var *ax = out->rank ? out->t->axes[0] : NULL;
                int64_t x = ir_eval_at(body->load.idx[d], ax ? 1 : 0, &ax, &j);
                int64_t e = 1;
                if (!ir_is_const(ir_simplify(I->c, in[0]->t->shape[d]), &e))
                    return;
                flat = flat * e + x;
            }
            if (flat < 0 || flat >= in[0]->nknown)
                return;
            k[j] = in[0]->known[flat];
        }
    } else if (strcmp(op, "Where") == 0) {
        if (nin != 3 || !in[1] || !in[2] || in[1]->nknown < 0 || in[2]->nknown < 0)
            return;
        for (int64_t j = 0; j < len; j++) {
            Expr *c = in[0]->known[in[0]->nknown == 1 ? 0 : j];
            Expr *a = in[1]->known[in[1]->nknown == 1 ? 0 : j];
            Expr *b = in[2]->known[in[2]->nknown == 1 ? 0 : j];
            k[j] = ir_select(I->c, ir_cast(I->c, DT_BOOL, c), a, b);
        }
    } else if (strcmp(op, "Equal") == 0 || strcmp(op, "Not") == 0) {
        bool eq = op[0] == 'E';
        if (eq && (nin != 2 || !in[1] || in[1]->nknown < 0))
            return;
        for (int64_t j = 0; j < len; j++) {
            Expr *a = in[0]->known[in[0]->nknown == 1 ? 0 : j];
            k[j] = eq ? ir_binop(I->c, EX_EQ, a, in[1]->known[in[1]->nknown == 1 ? 0 : j])
                      : ir_unop(I->c, EX_NOT, ir_cast(I->c, DT_BOOL, a));
        }
    } else if (strcmp(op, "Cast") == 0) {
        if (len != in[0]->nknown)
            return;
        memcpy(k, in[0]->known, sizeof *k * (size_t)len);
    } else {
        ExprKind kind = strcmp(op, "Add") == 0 ? EX_ADD : strcmp(op, "Sub") == 0 ? EX_SUB :
                        strcmp(op, "Mul") == 0 ? EX_MUL : strcmp(op, "Div") == 0 ? EX_DIV :
                        strcmp(op, "Max") == 0 ? EX_MAX : strcmp(op, "Min") == 0 ? EX_MIN : EX_INT;
        if (kind == EX_INT || nin != 2 || !in[1] || in[1]->nknown < 0)
            return;
        for (int64_t j = 0; j < len; j++) {
            Expr *a = in[0]->known[in[0]->nknown == 1 ? 0 : j];
            Expr *b = in[1]->known[in[1]->nknown == 1 ? 0 : j];
            int64_t x, y;
            bool nums = ir_is_const(a, &x) && ir_is_const(b, &y);
            if (kind == EX_DIV && nums) /* ONNX's integer division truncates */
                k[j] = y == 0 ? NULL : ir_int(I->c, x / y);
            else
                k[j] = ir_simplify(I->c, ir_binop(I->c, kind, a, b)); /* of dims: >= 0, floor = trunc */
            if (!k[j])
                return;
        }
    }
    out->nknown = (int)len;
    for (int64_t j = 0; j < len; j++)
        out->known[j] = ir_simplify(I->c, k[j]);
}

static bool import_node(Imp *I, int code)
{
    if (code == 400)
        return op_composite(I);
    if (code >= 300) {
        const OpKind *o = &other_ops[code - 300];
        switch (o->kind) {
        case K_SOFTMAX: case K_LOGSOFTMAX:
            if (I->opset < 13) {
                fail(I, "%s before opset 13 (which flattens to 2-D) is not supported",
                     I->node->op_type);
                return false;
            }
            return op_softmax(I, o->kind == K_LOGSOFTMAX);
        case K_WHERE: return op_where(I);
        case K_CAST: return op_cast(I);
        case K_IDENTITY: return op_identity(I);
        case K_DROPOUT: { /* inference: the identity, unless training_mode may be true */
            Val *tm = I->node->n_input > 2 ? input(I, 2) : NULL;
            if (tm && (!tm->t->data || tm->dt != DT_BOOL || ((const uint8_t *)tm->t->data)[0])) {
                fail(I, "Dropout in training mode is not supported (inference only)");
                return false;
            }
            return op_identity(I);
        }
        case K_CLIP: return op_clip(I);
        case K_RESHAPE: return op_reshape(I, o->name);
        case K_CONCAT: return op_concat(I);
        case K_GATHER: return op_gather(I);
        case K_GATHER_ND: return op_gather_nd(I);
        case K_LAYERNORM: return op_layernorm(I);
        case K_EXPAND: return op_expand(I);
        case K_MEANOF: return op_mean_prelu(I, false);
        case K_PRELU: return op_mean_prelu(I, true);
        case K_SHAPE: return op_shape(I, false);
        case K_SIZE: return op_shape(I, true);
        case K_CONSTOFSHAPE: return op_constant_of_shape(I);
        case K_SLICE: return op_slice(I);
        case K_SPLIT: return op_split(I);
        case K_TRILU: return op_trilu(I);
        case K_RANGE: return op_range(I);
        case K_ARGMAX: case K_ARGMIN: return op_argext(I, o->kind == K_ARGMAX);
        case K_GATHER_ELEMENTS: return op_gather_elements(I);
        case K_BATCHNORM: return op_batchnorm(I);
        case K_MOD: return op_mod(I);
        case K_CONV: return op_conv(I);
        case K_MAXPOOL: case K_AVGPOOL: return op_pool(I, o->kind == K_MAXPOOL);
        case K_GMAXPOOL: case K_GAVGPOOL: return op_global_pool(I, o->kind == K_GMAXPOOL);
        case K_TILE: return op_tile(I);
        case K_D2S: case K_S2D: return op_depth_space(I, o->kind == K_D2S);
        case K_CUMSUM: return op_cumsum(I);
        case K_REDUCE_L1: case K_REDUCE_L2: case K_REDUCE_SQ: case K_REDUCE_LOGSUM:
        case K_REDUCE_LSE:
            return op_reduce(I, RD_SUM, o->kind);
        case K_MATMUL: return op_matmul(I);
        case K_GEMM: return op_gemm(I);
        case K_TRANSPOSE: return op_transpose(I);
        case K_REDUCE: case K_MEAN: return op_reduce(I, o->rop, o->kind);
        case K_CONSTANT: return op_constant(I);
        case K_RECIP: {
            Val *x = input(I, 0);
            if (!x)
                return false;
            Var **ax = axes_of(I, x->rank, x->shape);
            return define(I, 0, DT_F32, x->rank, ax,
                          ir_binop(I->c, EX_DIV, ir_float(I->c, 1.0), read_at(I, x, x->rank, ax))) != NULL;
        }
        }
        IR_UNREACHABLE();
    }
    if (code >= 200)
        return op_nary(I, &binary_ops[code - 200]);
    return op_unary(I, unary_ops[code - 100].k);
}

/* ---- the graph ---- */

static Expr *dim_of(Imp *I, const Onnx__TensorShapeProto__Dimension *d, const char *what,
                    int axis)
{
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 1) {
            fail(I, "%s has extent %lld on axis %d", what, (long long)d->dim_value, axis);
            return NULL;
        }
        return ir_int(I->c, d->dim_value);
    }
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM || !d->dim_param[0]) {
        fail(I, "%s has a dynamic extent without a name on axis %d: give it one in the export "
                "(dynamic_axes / dynamic_shapes)", what, axis);
        return NULL;
    }
    Var *v = ir_te_find_dim(I->p, d->dim_param);
    if (!v) {
        for (int i = 0; i < I->nranges; i++)
            if (strcmp(I->ranges[i].name, d->dim_param) == 0) {
                v = ir_te_add_dim(I->p, d->dim_param, I->ranges[i].lo, I->ranges[i].hi);
                v->max = INT32_MAX; /* the importer's accesses hold for every size */
            }
        if (!v) {
            fail(I, "%s: dim '%s' has no range: give it one with --dims %s=LO..HI", what,
                 d->dim_param, d->dim_param);
            return NULL;
        }
    }
    return ir_varref(I->c, v);
}

static bool known_name(Imp *I, const char *name, const bool *done)
{
    if (!name[0] || find(I, name))
        return true;
    for (size_t j = 0; j < I->g->n_node; j++)
        if (done[j])
            for (size_t k = 0; k < I->g->node[j]->n_output; k++)
                if (strcmp(I->g->node[j]->output[k], name) == 0)
                    return true;
    return false;
}

/* The nodes in an order in which each one's inputs come first (the file's
 * order where it is one, as ONNX requires), or NULL and a diagnostic: an
 * input that nothing computes, or a cycle. */
static size_t *topo_order(Imp *I)
{
    const Onnx__GraphProto *g = I->g;
    size_t n = g->n_node, m = 0;
    size_t *order = IR_NEWN(I->u->arena, size_t, n + 1);
    bool *done = calloc(n + 1, 1);
    for (bool progress = true; m < n && progress;) {
        progress = false;
        for (size_t i = 0; i < n; i++) {
            bool ready = !done[i];
            for (size_t k = 0; ready && k < g->node[i]->n_input; k++)
                ready = known_name(I, g->node[i]->input[k], done);
            if (ready) {
                done[i] = true;
                order[m++] = i;
                progress = true;
            }
        }
    }
    for (size_t i = 0; m < n && i < n; i++) {
        if (done[i])
            continue;
        const char *missing = NULL;
        for (size_t k = 0; !missing && k < g->node[i]->n_input; k++) {
            const char *in = g->node[i]->input[k];
            bool computed = false;
            for (size_t j = 0; j < n && !computed; j++)
                for (size_t o = 0; o < g->node[j]->n_output; o++)
                    computed |= strcmp(g->node[j]->output[o], in) == 0;
            if (!computed && !known_name(I, in, done))
                missing = in;
        }
        I->node = g->node[i];
        I->node_index = (int)i;
        if (missing)
            fail(I, "input '%s' is no graph input, initializer or node's output", missing);
        else
            fail(I, "the graph has a cycle through this node");
        I->node = NULL;
        free(done);
        return NULL;
    }
    free(done);
    return order;
}

/* Whether every name the importer reads is there (protobuf-c leaves an
 * absent optional string NULL); a diagnostic for the first that is not. */
static bool names_present(Imp *I)
{
    const Onnx__GraphProto *g = I->g;
    for (size_t i = 0; i < g->n_node; i++)
        if (!g->node[i]->op_type) {
            fail(I, "node %zu has no op_type", i);
            return false;
        }
    for (size_t i = 0; i < g->n_input; i++)
        if (!g->input[i]->name) {
            fail(I, "graph input %zu has no name", i);
            return false;
        }
    for (size_t i = 0; i < g->n_output; i++)
        if (!g->output[i]->name) {
            fail(I, "graph output %zu has no name", i);
            return false;
        }
    return true;
}

static void import_graph(Imp *I)
{
    const Onnx__GraphProto *g = I->g;
    if (!names_present(I))
        return;
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *tp = g->initializer[i];
        if (tp->name)
            add_tensor_proto(I, tp->name, tp, true);
        if (tp->has_raw_data) { /* not taken (a bool's, a failure's): it goes now */
            free(tp->raw_data.data); /* protobuf-c's default allocator: malloc */
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
            tp->has_raw_data = false;
        }
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (find(I, vi->name))
            continue; /* an initializer (a default the caller could override): a constant */
        char what[160];
        snprintf(what, sizeof what, "input '%s'", vi->name);
        const Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type->shape) {
            fail(I, "%s is not a tensor of known rank", what);
            continue;
        }
        DType dt;
        const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
        if (!dtype_of(I, tp->tensor_type->elem_type, what, &dt))
            continue;
        if (sh->n_dim > MAXR) {
            fail(I, "%s has rank %zu; at most %d is supported", what, sh->n_dim, MAXR);
            continue;
        }
        Expr *shape[MAXR] = {NULL};
        bool ok = true;
        for (size_t d = 0; d < sh->n_dim && ok; d++)
            ok = (shape[d] = dim_of(I, sh->dim[d], what, (int)d)) != NULL;
        if (ok) {
            Tensor *t = ir_te_add_input(I->p, ident(I, vi->name, "input"), dt, (int)sh->n_dim, shape);
            t->source = ir_arena_strdup(I->p->arena, vi->name);
            add_val(I, vi->name, t);
        }
    }
    if (I->failed)
        return;
    /* every unsupported operator, with counts, in one message */
    char list[512] = "";
    int nbad = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        bool domain = n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0;
        if (!domain && op_code(n->op_type))
            continue;
        bool before = false;
        for (size_t j = 0; j < i && !before; j++)
            before = strcmp(g->node[j]->op_type, n->op_type) == 0 &&
                     (!domain || !op_code(n->op_type));
        if (before)
            continue;
        int count = 0;
        for (size_t j = i; j < g->n_node; j++)
            count += strcmp(g->node[j]->op_type, n->op_type) == 0;
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s%s%s %d", nbad ? ", " : "",
                 domain ? n->domain : "", domain ? "." : "", n->op_type, count);
        nbad++;
    }
    if (nbad) {
        fail(I, "unsupported operator%s: %s", nbad == 1 ? "" : "s", list);
        return;
    }
    size_t *order = topo_order(I);
    for (size_t o = 0; order && o < g->n_node && !I->failed; o++) {
        size_t i = order[o];
        I->node = g->node[i];
        I->node_index = (int)i;
        if (I->node->n_output < 1 || !I->node->output[0][0]) {
            fail(I, "no output");
            break;
        }
        bool many = strcmp(I->node->op_type, "Split") == 0 ||
                    strcmp(I->node->op_type, "LayerNormalization") == 0;
        for (size_t k = 1; k < I->node->n_output && !many; k++)
            if (I->node->output[k][0] && strcmp(I->node->op_type, "Dropout") != 0) {
                fail(I, "more than one output is not supported");
                break;
            }
        if (I->failed)
            break;
        if (import_node(I, op_code(I->node->op_type)))
            propagate_known(I);
        else if (!I->failed) /* an operator that needs an input given as "" or not at all */
            fail(I, "an input it needs is missing");
    }
    I->node = NULL;
    for (size_t i = 0; i < g->n_output && !I->failed; i++) {
        Val *v = find(I, g->output[i]->name);
        if (!v)
            fail(I, "output '%s' is computed by no node", g->output[i]->name);
        else if (v->t->kind != TK_OUTPUT)
            fail(I, "output '%s' is an input or a constant: not supported", g->output[i]->name);
    }
}

/* ---- model-local functions ----
 *
 * A node that calls a function of the model (its op_type and domain are
 * the function's) is replaced by the function's nodes: its formal inputs
 * and outputs renamed to the call's, every other name it computes given
 * the call's name as a prefix, and attributes that refer to the call's
 * (ref_attr_name) taking their values (absent: the operator's default).
 * Calls inside functions expand in turn, to a depth of MAX_INLINE. */

enum { MAX_INLINE = 16, MAX_EXPANDED = 1 << 20 };

typedef struct Nodes {
    Onnx__NodeProto **a;
    size_t n, cap;
    size_t visited; /* nodes and calls expanded: at most MAX_EXPANDED */
} Nodes;

static const Onnx__FunctionProto *function_of(const Onnx__ModelProto *m, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < m->n_functions; i++) {
        const Onnx__FunctionProto *f = m->functions[i];
        const char *fd = f->domain ? f->domain : "", *nd = n->domain ? n->domain : "";
        if (f->name && strcmp(f->name, n->op_type) == 0 && strcmp(fd, nd) == 0)
            return f;
    }
    return NULL;
}

/* name inside f's body as the call sees it */
static char *renamed(Imp *I, const Onnx__FunctionProto *f, const Onnx__NodeProto *call,
                     const char *prefix, const char *name)
{
    if (!name[0])
        return (char *)name;
    for (size_t i = 0; i < f->n_input; i++)
        if (strcmp(f->input[i], name) == 0)
            return i < call->n_input ? call->input[i] : (char *)"";
    for (size_t i = 0; i < f->n_output; i++)
        if (strcmp(f->output[i], name) == 0)
            return i < call->n_output ? call->output[i] : (char *)"";
    size_t n = strlen(prefix) + strlen(name) + 2;
    char *s = IR_NEWN(I->u->arena, char, n);
    snprintf(s, n, "%s/%s", prefix, name);
    return s;
}

static bool expand_nodes(Imp *I, const Onnx__ModelProto *m, Onnx__NodeProto *const *nodes,
                         size_t n, int depth, Nodes *out)
{
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto *call = nodes[i];
        const Onnx__FunctionProto *f = call->op_type ? function_of(m, call) : NULL;
        if (!depth) { /* messages name the graph's node */
            I->node = call;
            I->node_index = (int)i;
        }
        if (++out->visited > MAX_EXPANDED) {
            fail(I, "the functions' calls expand to more than %d nodes", MAX_EXPANDED);
            return false;
        }
        if (!f) {
            if (out->n == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 64;
                out->a = realloc(out->a, out->cap * sizeof *out->a);
            }
            out->a[out->n++] = call;
            continue;
        }
        if (depth == MAX_INLINE) {
            fail(I, "calls to functions nest deeper than %d (a recursive function?)", MAX_INLINE);
            return false;
        }
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%s", call->name && call->name[0] ? call->name : f->name);
        Onnx__NodeProto **body = IR_NEWN(I->u->arena, Onnx__NodeProto *, f->n_node + 1);
        for (size_t k = 0; k < f->n_node; k++) {
            const Onnx__NodeProto *b = f->node[k];
            Onnx__NodeProto *c = IR_NEW(I->u->arena, Onnx__NodeProto);
            *c = *b;
            c->input = IR_NEWN(I->u->arena, char *, b->n_input + 1);
            c->output = IR_NEWN(I->u->arena, char *, b->n_output + 1);
            for (size_t j = 0; j < b->n_input; j++)
                c->input[j] = renamed(I, f, call, prefix, b->input[j] ? b->input[j] : "");
            for (size_t j = 0; j < b->n_output; j++)
                c->output[j] = renamed(I, f, call, prefix, b->output[j] ? b->output[j] : "");
            c->name = renamed(I, f, call, prefix, b->name && b->name[0] ? b->name : b->op_type ? b->op_type : "");
            c->attribute = IR_NEWN(I->u->arena, Onnx__AttributeProto *, b->n_attribute + 1);
            c->n_attribute = 0;
            for (size_t j = 0; j < b->n_attribute; j++) {
                Onnx__AttributeProto *a = b->attribute[j];
                if (a->ref_attr_name && a->ref_attr_name[0]) {
                    Onnx__AttributeProto *given = NULL;
                    for (size_t q = 0; q < call->n_attribute; q++)
                        if (call->attribute[q]->name &&
                            strcmp(call->attribute[q]->name, a->ref_attr_name) == 0)
                            given = call->attribute[q];
                    if (!given)
                        continue;
                    Onnx__AttributeProto *copy = IR_NEW(I->u->arena, Onnx__AttributeProto);
                    *copy = *given;
                    copy->name = a->name;
                    a = copy;
                }
                c->attribute[c->n_attribute++] = a;
            }
            body[k] = c;
        }
        if (!expand_nodes(I, m, body, f->n_node, depth + 1, out))
            return false;
    }
    return true;
}

/* The graph with every call to a model-local function expanded, in the
 * arena (the protobuf's own nodes shared). */
static const Onnx__GraphProto *inline_functions(Imp *I, const Onnx__ModelProto *m)
{
    if (!m->n_functions)
        return m->graph;
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (!m->graph->node[i]->op_type) /* names_present reports it */
            return m->graph;
    Nodes out = {0};
    if (!expand_nodes(I, m, m->graph->node, m->graph->n_node, 0, &out)) {
        free(out.a);
        return NULL;
    }
    Onnx__GraphProto *g = IR_NEW(I->u->arena, Onnx__GraphProto);
    *g = *m->graph;
    g->n_node = out.n;
    g->node = IR_NEWN(I->u->arena, Onnx__NodeProto *, out.n + 1);
    if (out.n)
        memcpy(g->node, out.a, out.n * sizeof *out.a);
    free(out.a);
    I->node = NULL;
    return g;
}

static void import_model(Imp *I, const Onnx__ModelProto *m)
{
    if (!m->has_ir_version || m->ir_version < 3) {
        fail(I, "ir_version %lld: at least 3 is supported", (long long)m->ir_version);
        return;
    }
    I->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
            I->opset = o->version;
    }
    if (I->opset < 7 || I->opset > 21) {
        fail(I, "default-domain opset %lld: opsets 7 to 21 are supported", (long long)I->opset);
        return;
    }
    if (!m->graph) {
        fail(I, "the model has no graph");
        return;
    }
    I->g = inline_functions(I, m);
    if (I->g)
        import_graph(I);
}

/* How import_bytes holds a model's bytes: the caller's, malloc'd (freed
 * once decoded), or a mapping of its file (unmapped once decoded). */
typedef enum Bytes { BYTES_BORROWED, BYTES_MALLOCED, BYTES_MAPPED } Bytes;

static int import_bytes(const char *path, const uint8_t *buf, size_t len, Bytes how,
                        const FeDimRange *ranges, int nranges, FeUnit *u, char *err, size_t errlen);

/* The model file at path mapped read-only (*len bytes, at most
 * MAX_MODEL_BYTES); NULL when it is empty or cannot be mapped (read_all
 * then says why, or reads it). */
static const uint8_t *map_model(const char *path, size_t *len)
{
    FILE *f = rt_open_read(path, NULL, 0);
    struct stat st;
    void *m = MAP_FAILED;
    if (f && fstat(fileno(f), &st) == 0 && st.st_size > 0 && st.st_size <= MAX_MODEL_BYTES) {
        *len = (size_t)st.st_size;
        m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    }
    if (f)
        fclose(f);
    return m == MAP_FAILED ? NULL : m;
}

/* Decoding a mapped model: protobuf-c copies each bytes field (a weight's
 * raw_data) out of the buffer in the buffer's order, allocating each copy
 * just before making it. So when a block of COPY_MIN or more is asked
 * for, the earlier such blocks' sizes add up to no more than the file
 * copied so far (other fields lie between them), and the mapping's pages
 * up to there are dropped (MADV_DONTNEED): the file and its decoded copy
 * are not both held whole. A page dropped too early (a large block that
 * was not a copy) is read again from the page cache when touched, as a
 * private read-only mapping of a file allows. */
typedef struct Mapped {
    const uint8_t *base;
    size_t copied, dropped;
} Mapped;

enum { COPY_MIN = 1 << 20 };

static void *mapped_alloc(void *ud, size_t size)
{
    Mapped *m = ud;
    if (size >= COPY_MIN) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE), upto = m->copied / page * page;
        if (upto > m->dropped && madvise((void *)(m->base + m->dropped), upto - m->dropped,
                                         MADV_DONTNEED) == 0)
            m->dropped = upto;
        m->copied += size;
    }
    return malloc(size);
}

static void mapped_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

int fe_parse_dim_ranges(char *spec, FeDimRange *out, int max, char *err, size_t errlen)
{
    if (!IR_ARG_OK(spec, err, errlen) || !IR_ARG_OK(out, err, errlen))
        return -1;
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(spec, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(s, '='), *end = NULL;
        long long lo = 0, hi = 0;
        if (eq && eq != s) {
            lo = strtoll(eq + 1, &end, 10);
            hi = end && strncmp(end, "..", 2) == 0 ? strtoll(end + 2, &end, 10) : 0;
        }
        if (!end || *end || lo < 1 || lo > hi) {
            snprintf(err, errlen, "expected NAME=LO..HI with 1 <= LO <= HI, got '%s'", s);
            return -1;
        }
        if (n == max) {
            snprintf(err, errlen, "more than %d dims", max);
            return -1;
        }
        *eq = 0;
        out[n++] = (FeDimRange){s, lo, hi};
    }
    return n;
}

bool fe_is_onnx(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcmp(path + n - 5, ".onnx") == 0;
}

int fe_load_onnx(const char *path, const FeDimRange *ranges, int nranges, FeUnit *u, char *err,
                 size_t errlen)
{
    if (!IR_ARG_OK(u, err, errlen))
        return -1;
    memset(u, 0, sizeof *u);
    if (!IR_ARG_OK(path, err, errlen))
        return -1;
    u->arena = ir_arena_new();
    size_t len;
    const uint8_t *mapped = map_model(path, &len);
    if (mapped)
        return import_bytes(path, mapped, len, BYTES_MAPPED, ranges, nranges, u, err, errlen);
    uint8_t *buf = read_all(path, &len, err, errlen);
    if (!buf)
        return -1;
    return import_bytes(path, buf, len, BYTES_MALLOCED, ranges, nranges, u, err, errlen);
}

int fe_load_onnx_bytes(const char *path, const uint8_t *data, size_t len, const FeDimRange *ranges,
                       int nranges, FeUnit *u, char *err, size_t errlen)
{
    if (!IR_ARG_OK(u, err, errlen))
        return -1;
    memset(u, 0, sizeof *u);
    if (!IR_ARG_OK(path, err, errlen) || (len && !IR_ARG_OK(data, err, errlen)))
        return -1;
    u->arena = ir_arena_new();
    return import_bytes(path, data, len, BYTES_BORROWED, ranges, nranges, u, err, errlen);
}

/* buf is let go once decoded, as how says (a model's bytes, its weights'
 * values among them, are held about once at a time: the file's, then the
 * decoded message's, then the constants'). */
static int import_bytes(const char *path, const uint8_t *buf, size_t len, Bytes how,
                        const FeDimRange *ranges, int nranges, FeUnit *u, char *err, size_t errlen)
{
    u->src = (Source){ir_arena_strdup(u->arena, path), "", 0};
    ir_diags_init(&u->diags, u->arena, &u->src);
    Mapped mp = {buf, 0, 0};
    ProtobufCAllocator dropping = {mapped_alloc, mapped_free, &mp};
    /* its blocks are malloc's: the message is freed with the default allocator */
    Onnx__ModelProto *m = onnx__model_proto__unpack(how == BYTES_MAPPED ? &dropping : NULL, len, buf);
    if (how == BYTES_MAPPED)
        munmap((void *)buf, len);
    else if (how == BYTES_MALLOCED)
        free((void *)buf);
    if (!m) {
        ir_diag(&u->diags, (SrcLoc){0, 0}, "not an ONNX model (the protobuf does not decode)");
        return 1;
    }
    char *dir = ir_arena_strdup(u->arena, path), *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = 0; /* "/m.onnx": "/" */
    Imp I = {.u = u, .ranges = ranges, .nranges = nranges, .dir = slash ? dir : "."};
    I.p = ir_te_new(fe_program_name(u->arena, path));
    I.c = I.p->ctx;
    import_model(&I, m);
    for (int i = 0; i < nranges && !I.failed; i++)
        if (!ir_te_find_dim(I.p, ranges[i].name))
            fail(&I, "--dims %s: no input of the model has a dim named '%s'", ranges[i].name,
                 ranges[i].name);
    onnx__model_proto__free_unpacked(m, NULL);
    free(I.vals);
    if (!I.failed && !ir_verify_te(I.p, err, errlen)) {
        ir_diag(&u->diags, (SrcLoc){0, 0}, "internal error: the imported program: %s", err);
        I.failed = true;
    }
    if (I.failed) {
        ir_te_destroy(I.p);
        return 1;
    }
    u->prog = I.p;
    return 0;
}
