/* search/records.c: the records file, one measurement per JSON line.
 *
 * Tuning takes long and may be killed at any moment, so the file is only
 * ever appended to, one whole line per write() on an O_APPEND descriptor,
 * each followed by fdatasync: what was written before a kill is intact, and
 * at worst the last line is cut short. Reading is the mirror image: every
 * line stands alone, and one that is not a valid record of version 2
 * (truncated, garbage, wrong types, out of range) is reported with its line
 * number and skipped, never fatal; version 1 lines, and lines of another
 * lowering (PASS_LOWERING_VERSION: their times are another kernel's), are
 * counted and left alone. When the file does not end in a newline the next
 * append starts on a fresh line so the cut line stays isolated.
 *
 * Records of the workloads asked for live in an arena, their micro-kernels
 * parsed; a hash table keyed by (workload, micro-kernel, shape as a set of
 * name=value pairs) answers "was this measured already?" in constant time,
 * so a resumed run skips what it has. Tree lines are parsed into trees,
 * the latest per workload kept.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dietcode/hash.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"


typedef struct TreeEntry {
    const char *workload;
    SrchTree *tree;
    int after; /* the measurements read or appended before it */
} TreeEntry;

/* A fuse line: the tuner's (or a user's) choice for one intermediate of
 * a program, filed under the program's fingerprint. */
typedef struct FuseEntry {
    const char *workload, *stage;
    Fuse fuse;
} FuseEntry;

struct SrchRecords {
    Arena *arena;
    const char *path;
    int nwant;                  /* workloads asked for; -1: every one */
    const char **want;
    int fd;
    bool need_newline;  /* the file does not end in '\n' */
    SrchRecord **recs;
    int nrecs, cap;
    TreeEntry *trees;
    int ntrees;
    FuseEntry *fuses;
    int nfuses;
    int nforeign, ncorrupt, nold;
    int nstale; /* lines of another lowering */
    SrchWarning warnings[SRCH_MAX_WARNINGS];
    int nwarnings;
    /* open addressing: slot holds record index + 1, 0 when empty */
    int *slots;
    uint64_t *hashes;
    size_t nslots, nused;
};

static const char *const kind_names[] = {"trial", "select", "baseline",
                                         "turns", "check",  "baseline-check"};
enum { NKINDS = sizeof kind_names / sizeof kind_names[0] };

bool srch_record_is_baseline(SrchRecordKind k)
{
    return k == RK_BASELINE || k == RK_BASELINE_CHECK;
}

bool srch_record_is_turns(SrchRecordKind k) { return k == RK_TURNS || srch_record_is_check(k); }

bool srch_record_is_check(SrchRecordKind k) { return k == RK_CHECK || k == RK_BASELINE_CHECK; }

const char *srch_record_kind_name(SrchRecordKind k)
{
    return (unsigned)k < NKINDS ? kind_names[k] : "?";
}

static bool wanted(const SrchRecords *r, const char *workload)
{
    if (r->nwant < 0)
        return true;
    for (int i = 0; i < r->nwant; i++)
        if (strcmp(r->want[i], workload) == 0)
            return true;
    return false;
}

static double median_of(const double *t, int n)
{
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s)
        return t[0];
    memcpy(s, t, sizeof *s * (size_t)n);
    for (int i = 1; i < n; i++) /* insertion sort: repeats are few */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double x = s[j];
            s[j] = s[j - 1];
            s[j - 1] = x;
        }
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

static bool exact_int(double x, double lo) { return srch_exact_int(x, lo, SRCH_MAX_EXACT); }

/* Why rec cannot be a record, or NULL. */
static const char *check_record(const SrchRecord *rec)
{
    if (!rec->workload || !*rec->workload || !rec->target || !*rec->target || !rec->arch ||
        !*rec->arch)
        return "empty workload, target or arch";
    if (!rec->stage || !*rec->stage)
        return "empty stage";
    if (rec->nspatial < 0 || rec->nspatial > MK_MAX_AXES)
        return "a micro-kernel of too many axes";
    if (rec->ndims < 0 || rec->ndims > SRCH_MAX_DIMS)
        return "too many dims in shape";
    for (int i = 0; i < rec->ndims; i++) {
        if (!rec->dim_names[i] || !*rec->dim_names[i])
            return "empty dim name in shape";
        if (rec->dim_values[i] < 0 || (double)rec->dim_values[i] > SRCH_MAX_EXACT)
            return "shape value out of range";
        for (int j = 0; j < i; j++)
            if (strcmp(rec->dim_names[i], rec->dim_names[j]) == 0)
                return "dim repeated in shape";
    }
    if (rec->ntimes < 1)
        return "no times";
    if (rec->ndropped < 0)
        return "a negative count of dropped runs";
    for (int i = 0; i < rec->ntimes; i++)
        if (!isfinite(rec->times_ms[i]) || rec->times_ms[i] < 0)
            return "time not a finite number >= 0";
    if (!isfinite(rec->median_ms) || rec->median_ms < 0)
        return "median not a finite number >= 0";
    if ((unsigned)rec->kind >= NKINDS)
        return "unknown kind";
    if (rec->nfeat != 0 && (rec->nfeat != SRCH_NFEAT || !rec->features))
        return "features not SRCH_NFEAT numbers";
    for (int i = 0; i < rec->nfeat; i++)
        if (isinf(rec->features[i]))
            return "a feature not a finite number or missing";
    if (rec->nfeat && !(isfinite(rec->work) && rec->work > 0))
        return "work not a finite number > 0";
    if (rec->trial < 0 || (double)rec->trial > SRCH_MAX_EXACT)
        return "trial index out of range";
    if (rec->ts < 0 || (double)rec->ts > SRCH_MAX_EXACT)
        return "timestamp out of range";
    return NULL;
}

/* ---- hash table ---- */

static uint64_t key_hash(const char *workload, const MicroKernel *mk, int ndims,
                         const char *const *names, const int64_t *values)
{
    uint64_t h = dc_fnv1a(DC_FNV_OFFSET, workload, strlen(workload) + 1);
    int f[2 * MK_MAX_AXES + 6] = {mk->rchunk, mk->unroll, mk->vec, (int)mk->vaxis, mk->stage,
                                  mk->split};
    memcpy(f + 6, mk->threads, sizeof mk->threads);
    memcpy(f + 6 + MK_MAX_AXES, mk->tile, sizeof mk->tile);
    h = dc_fnv1a(h, f, sizeof f);
    /* a set of pairs: combine their hashes order-independently */
    uint64_t sum = 0;
    for (int i = 0; i < ndims; i++) {
        uint64_t d = dc_fnv1a(DC_FNV_OFFSET, names[i], strlen(names[i]) + 1);
        d = dc_fnv1a(d, &values[i], sizeof values[i]);
        d ^= d >> 29;
        d *= 0xbf58476d1ce4e5b9ull;
        d ^= d >> 32;
        sum += d;
    }
    h = dc_fnv1a(h, &sum, sizeof sum);
    h = dc_fnv1a(h, &ndims, sizeof ndims);
    return h;
}

bool srch_record_has_key(const SrchRecord *r, const char *workload, const MicroKernel *mk,
                         int ndims, const char *const *names, const int64_t *values)
{
    if (r->ndims != ndims || strcmp(r->workload, workload) != 0 ||
        ir_microkernel_cmp(&r->mk, mk) != 0)
        return false;
    for (int i = 0; i < ndims; i++) {
        int j = 0;
        while (j < ndims && strcmp(r->dim_names[j], names[i]) != 0)
            j++;
        if (j == ndims || r->dim_values[j] != values[i])
            return false;
    }
    return true;
}

/* The slot holding an equal key, or the empty slot where it would go. */
static size_t find_slot(const SrchRecords *r, uint64_t h, const char *workload,
                        const MicroKernel *mk, int ndims, const char *const *names,
                        const int64_t *values)
{
    size_t mask = r->nslots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        int s = r->slots[i];
        if (!s)
            return i;
        if (r->hashes[i] == h &&
            srch_record_has_key(r->recs[s - 1], workload, mk, ndims, names, values))
            return i;
    }
}

static void table_insert(SrchRecords *r, int idx);

static void table_grow(SrchRecords *r)
{
    int *old = r->slots;
    uint64_t *oldh = r->hashes;
    size_t oldn = r->nslots;
    r->nslots = oldn ? oldn * 2 : 1024;
    r->slots = calloc(r->nslots, sizeof *r->slots);
    r->hashes = calloc(r->nslots, sizeof *r->hashes);
    if (!r->slots || !r->hashes)
        ir_panic(__FILE__, __LINE__, "out of memory");
    r->nused = 0;
    for (size_t i = 0; i < oldn; i++)
        if (old[i])
            table_insert(r, old[i] - 1);
    free(old);
    free(oldh);
}

/* Makes recs[idx] the answer for its key (the latest measurement wins). */
static void table_insert(SrchRecords *r, int idx)
{
    if ((r->nused + 1) * 2 > r->nslots)
        table_grow(r);
    const SrchRecord *rec = r->recs[idx];
    uint64_t h = key_hash(rec->workload, &rec->mk, rec->ndims, rec->dim_names, rec->dim_values);
    size_t i = find_slot(r, h, rec->workload, &rec->mk, rec->ndims, rec->dim_names,
                         rec->dim_values);
    if (!r->slots[i])
        r->nused++;
    r->slots[i] = idx + 1;
    r->hashes[i] = h;
}

/* A copy of s in the arena, shared with an equal string stored before
 * (workloads, targets and archs repeat on every line). */
static const char *intern(SrchRecords *r, const char *s)
{
    for (int i = r->nrecs - 1; i >= 0 && i >= r->nrecs - 4; i--) {
        const SrchRecord *x = r->recs[i];
        const char *c[] = {x->workload, x->target, x->arch, x->stage};
        for (int j = 0; j < 4; j++)
            if (strcmp(c[j], s) == 0)
                return c[j];
    }
    return ir_arena_strdup(r->arena, s);
}

/* Copies rec into the arena and indexes it. */
static void store(SrchRecords *r, const SrchRecord *rec)
{
    Arena *a = r->arena;
    SrchRecord *c = IR_NEW(a, SrchRecord);
    *c = *rec;
    c->workload = intern(r, rec->workload);
    c->target = intern(r, rec->target);
    c->arch = intern(r, rec->arch);
    c->stage = intern(r, rec->stage);
    c->dim_names = IR_NEWN(a, const char *, rec->ndims > 0 ? rec->ndims : 1);
    c->dim_values = IR_NEWN(a, int64_t, rec->ndims > 0 ? rec->ndims : 1);
    for (int i = 0; i < rec->ndims; i++) {
        c->dim_names[i] = ir_arena_strdup(a, rec->dim_names[i]);
        c->dim_values[i] = rec->dim_values[i];
    }
    c->times_ms = IR_NEWN(a, double, rec->ntimes);
    memcpy(c->times_ms, rec->times_ms, sizeof(double) * (size_t)rec->ntimes);
    if (rec->nfeat) {
        float *f = IR_NEWN(a, float, rec->nfeat);
        memcpy(f, rec->features, sizeof(float) * (size_t)rec->nfeat);
        c->features = f;
    }
    if (r->nrecs == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 256;
        SrchRecord **n = realloc(r->recs, sizeof *n * (size_t)r->cap);
        if (!n)
            ir_panic(__FILE__, __LINE__, "out of memory");
        r->recs = n;
    }
    r->recs[r->nrecs] = c;
    table_insert(r, r->nrecs++);
}

/* ---- reading ---- */

static void warn(SrchRecords *r, int64_t line, const char *reason)
{
    r->ncorrupt++;
    if (r->nwarnings == SRCH_MAX_WARNINGS)
        return;
    SrchWarning *w = &r->warnings[r->nwarnings++];
    w->line = line;
    w->msg = ir_arena_printf(r->arena, "%s:%lld: %s", r->path, (long long)line, reason);
}

static const char *get_string(const cJSON *o, const char *name, const char **out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!x)
        return "missing field";
    if (!cJSON_IsString(x) || !x->valuestring)
        return "field is not a string";
    *out = x->valuestring;
    return NULL;
}

static const char *get_int(const cJSON *o, const char *name, int64_t *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!x)
        return "missing field";
    if (!cJSON_IsNumber(x))
        return "field is not a number";
    if (!exact_int(x->valuedouble, 0))
        return "field is not an integer in 0..2^53";
    *out = (int64_t)x->valuedouble;
    return NULL;
}

/* Decodes the rest of a record of ours into rec (strings point into o,
 * times into *times, which the caller frees). Returns the reason it is not
 * a record, in reason[], or NULL. */
static const char *decode(const cJSON *o, SrchRecord *rec, const char **names, int64_t *values,
                          double **times, float *feat, char *reason, size_t rlen)
{
    static const char *const fields[] = {"stage", "mk", "kind", "trial", "ts"};
    const char *why = NULL, *kind = NULL, *mk = NULL;
    int f = 0;
    if ((why = get_string(o, fields[f = 0], &rec->stage)) ||
        (why = get_string(o, fields[f = 1], &mk)) ||
        (why = get_string(o, fields[f = 2], &kind)) ||
        (why = get_int(o, fields[f = 3], &rec->trial)) ||
        (why = get_int(o, fields[f = 4], &rec->ts))) {
        snprintf(reason, rlen, "%s \"%s\"", why, fields[f]);
        return reason;
    }
    if (!pass_parse_microkernel(mk, &rec->mk, &rec->nspatial))
        return "field \"mk\" is not a micro-kernel";
    int k = 0;
    while (k < NKINDS && strcmp(kind, kind_names[k]) != 0)
        k++;
    if (k == NKINDS)
        return "unknown \"kind\"";
    rec->kind = (SrchRecordKind)k;

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    if (!cJSON_IsObject(shape))
        return shape ? "field \"shape\" is not an object" : "missing field \"shape\"";
    rec->ndims = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        if (rec->ndims == SRCH_MAX_DIMS)
            return "too many dims in \"shape\"";
        if (!d->string || !cJSON_IsNumber(d))
            return "a dim of \"shape\" is not a number";
        if (!exact_int(d->valuedouble, 0))
            return "a dim of \"shape\" is not an integer in 0..2^53";
        names[rec->ndims] = d->string;
        values[rec->ndims++] = (int64_t)d->valuedouble;
    }

    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "times_ms");
    if (!cJSON_IsArray(t))
        return t ? "field \"times_ms\" is not an array" : "missing field \"times_ms\"";
    int n = cJSON_GetArraySize(t);
    if (n < 1)
        return "field \"times_ms\" is empty";
    *times = malloc(sizeof **times * (size_t)n);
    if (!*times)
        return "out of memory";
    rec->ntimes = 0;
    for (const cJSON *x = t->child; x && rec->ntimes < n; x = x->next) {
        if (!cJSON_IsNumber(x))
            return "an entry of \"times_ms\" is not a number";
        (*times)[rec->ntimes++] = x->valuedouble;
    }
    rec->times_ms = *times;

    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "median_ms");
    if (!cJSON_IsNumber(m))
        return m ? "field \"median_ms\" is not a number" : "missing field \"median_ms\"";
    rec->median_ms = m->valuedouble;
    /* optional: the runs dropped (0 when absent, as an older dcc wrote) */
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(o, "dropped");
    if (dr && (!cJSON_IsNumber(dr) || !(dr->valuedouble >= 0 && dr->valuedouble <= INT32_MAX) ||
               dr->valuedouble != (double)(int)dr->valuedouble))
        return "field \"dropped\" is not a count";
    rec->ndropped = dr ? (int)dr->valuedouble : 0;

    /* optional, together: the model's features and the adapted work; a
     * list of another length is another dcc's feature set, not damage */
    const cJSON *ft = cJSON_GetObjectItemCaseSensitive(o, "features");
    const cJSON *wk = cJSON_GetObjectItemCaseSensitive(o, "work");
    if (!ft != !wk)
        return "field \"features\" without \"work\" or the other way round";
    if (!ft)
        return NULL;
    if (!cJSON_IsArray(ft))
        return "field \"features\" is not an array";
    if (!cJSON_IsNumber(wk))
        return "field \"work\" is not a number";
    if (cJSON_GetArraySize(ft) != SRCH_NFEAT)
        return NULL;
    rec->nfeat = 0;
    for (const cJSON *x = ft->child; x && rec->nfeat < SRCH_NFEAT; x = x->next) {
        if (cJSON_IsNull(x)) { /* a feature the model takes as missing */
            feat[rec->nfeat++] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(x) || !(fabs(x->valuedouble) <= FLT_MAX))
            return "an entry of \"features\" is neither a float nor null";
        feat[rec->nfeat++] = (float)x->valuedouble;
    }
    rec->features = feat;
    rec->work = wk->valuedouble;
    return NULL;
}

static bool blank(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return !*s;
}

/* A tree line of a wanted workload: its tree, the latest one winning. */
static const char *read_tree(SrchRecords *r, const cJSON *o, const char *workload)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tree");
    if (!t)
        return "missing field \"tree\"";
    char *text = cJSON_PrintUnformatted(t);
    char err[256] = "out of memory";
    SrchTree *tree = text ? srch_tree_from_json(text, strlen(text), err, sizeof err) : NULL;
    free(text);
    if (!tree)
        return ir_arena_printf(r->arena, "field \"tree\": %s", err);
    for (int i = 0; i < r->ntrees; i++)
        if (strcmp(r->trees[i].workload, workload) == 0) {
            srch_tree_free(r->trees[i].tree);
            r->trees[i].tree = tree;
            r->trees[i].after = r->nrecs;
            return NULL;
        }
    TreeEntry *n = realloc(r->trees, sizeof *n * (size_t)(r->ntrees + 1));
    if (!n)
        ir_panic(__FILE__, __LINE__, "out of memory");
    r->trees = n;
    r->trees[r->ntrees++] = (TreeEntry){ir_arena_strdup(r->arena, workload), tree, r->nrecs};
    return NULL;
}

/* The fuse entry of (program workload, tensor stage), or NULL. */
static FuseEntry *find_fuse(const SrchRecords *r, const char *workload, const char *stage)
{
    for (int i = 0; i < r->nfuses; i++)
        if (strcmp(r->fuses[i].workload, workload) == 0 && strcmp(r->fuses[i].stage, stage) == 0)
            return &r->fuses[i];
    return NULL;
}

/* A fuse line of a wanted program: the latest one per tensor wins. */
static const char *read_fuse(SrchRecords *r, const cJSON *o, const char *workload)
{
    const char *stage, *text;
    Fuse f;
    if (get_string(o, "stage", &stage))
        return "fuse line without a string field \"stage\"";
    static const char *const bad = "field \"fuse\" is not \"inline\", \"materialize\" or \"cost\"";
    if (get_string(o, "fuse", &text))
        return bad;
    if (strcmp(text, "cost") == 0)
        f = FUSE_COST;
    else if (!pass_parse_fuse(text, &f))
        return bad;
    FuseEntry *had = find_fuse(r, workload, stage);
    if (had) {
        had->fuse = f;
        return NULL;
    }
    FuseEntry *n = realloc(r->fuses, sizeof *n * (size_t)(r->nfuses + 1));
    if (!n)
        ir_panic(__FILE__, __LINE__, "out of memory");
    r->fuses = n;
    r->fuses[r->nfuses++] =
        (FuseEntry){ir_arena_strdup(r->arena, workload), ir_arena_strdup(r->arena, stage), f};
    return NULL;
}

/* One line of the file (NUL-terminated, no newline). */
static void read_line(SrchRecords *r, int64_t lineno, const char *buf, bool last_cut)
{
    if (blank(buf))
        return;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(buf, &end, 0);
    if (!o) {
        warn(r, lineno, last_cut ? "truncated last line (no newline at end of file)"
                                 : "not valid JSON");
        return;
    }
    char reason[128];
    const char *why = NULL;
    SrchRecord rec = {0};
    const char *names[SRCH_MAX_DIMS];
    int64_t values[SRCH_MAX_DIMS];
    double *times = NULL;
    float feat[SRCH_NFEAT];
    const char *fp = NULL, *tg = NULL, *arch = NULL, *kind = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "v");
    /* absent: written before lowerings were versioned (lowering 0) */
    const cJSON *lw = cJSON_GetObjectItemCaseSensitive(o, "lowering");
    if (!blank(end))
        why = "text after the JSON value";
    else if (!cJSON_IsObject(o))
        why = "not a JSON object";
    else if (!v)
        why = "missing field \"v\"";
    else if (!cJSON_IsNumber(v))
        why = "field \"v\" is not a number";
    else if (v->valuedouble == 1)
        r->nold++;
    else if (v->valuedouble != SRCH_RECORDS_VERSION)
        why = "unsupported record version (this dcc reads version 2)";
    else if (lw && !(cJSON_IsNumber(lw) && exact_int(lw->valuedouble, 0)))
        why = "field \"lowering\" is not an integer in 0..2^53";
    else if (!lw || lw->valuedouble != PASS_LOWERING_VERSION)
        r->nstale++;
    else if ((why = get_string(o, "workload", &fp)) || (why = get_string(o, "target", &tg)) ||
             (why = get_string(o, "arch", &arch))) {
        snprintf(reason, sizeof reason, "%s \"%s\"", why, !fp ? "workload" : !tg ? "target" : "arch");
        why = reason;
    } else if (!wanted(r, fp)) {
        r->nforeign++;
    } else if (get_string(o, "kind", &kind) == NULL && strcmp(kind, "tree") == 0) {
        why = read_tree(r, o, fp);
    } else if (kind && strcmp(kind, "fuse") == 0) {
        why = read_fuse(r, o, fp);
    } else if (!(why = decode(o, &rec, names, values, &times, feat, reason, sizeof reason))) {
        rec.workload = fp;
        rec.target = tg;
        rec.arch = arch;
        rec.dim_names = names;
        rec.dim_values = values;
        if (!(why = check_record(&rec)))
            store(r, &rec);
    }
    if (why)
        warn(r, lineno, why);
    free(times);
    cJSON_Delete(o);
}

/* Reads every line of f. Returns false on a read error. */
static bool read_all(SrchRecords *r, FILE *f)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return false;
    int64_t lineno = 1;
    bool toolong = false, nul = false;
    int c, lastc = '\n';
    for (;;) {
        c = getc_unlocked(f);
        if (c == EOF || c == '\n') {
            if (c == EOF && len == 0 && !toolong && !nul)
                break;
            buf[len] = 0;
            if (toolong)
                warn(r, lineno, "line longer than 1 MiB");
            else if (nul)
                warn(r, lineno, "NUL byte in line");
            else
                read_line(r, lineno, buf, c == EOF);
            if (c == EOF)
                break;
            lastc = c;
            lineno++;
            len = 0;
            toolong = nul = false;
            continue;
        }
        lastc = c;
        if (c == 0)
            nul = true;
        if (toolong)
            continue;
        if (len + 1 >= (size_t)SRCH_MAX_LINE) {
            toolong = true;
            continue;
        }
        if (len + 1 >= cap) {
            char *n = realloc(buf, cap *= 2);
            if (!n) {
                free(buf);
                return false;
            }
            buf = n;
        }
        buf[len++] = (char)c;
    }
    free(buf);
    r->need_newline = lastc != '\n';
    return !ferror(f);
}

/* The one warning for the n lines of a file that are not read because
 * they are what (of an older version, of another lowering). */
static void warn_unread(SrchRecords *r, int n, const char *what)
{
    if (n && r->nwarnings < SRCH_MAX_WARNINGS)
        r->warnings[r->nwarnings++] = (SrchWarning){
            0, ir_arena_printf(r->arena, "%s: %d record%s %s not read: tuning again measures anew",
                               r->path, n, n == 1 ? "" : "s", what)};
}

/* srch_records_open and srch_records_read: append says whether the file
 * is then opened (created) for appending. */
static SrchRecords *load(const char *path, int n, const char *const *workloads, bool append,
                         char *err, size_t errlen)
{
    if (!path || n < 0 || (n > 0 && !workloads)) {
        srch_seterr(err, errlen, "records: no path or workloads");
        return NULL;
    }
    SrchRecords *r = calloc(1, sizeof *r);
    if (!r) {
        srch_seterr(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    r->arena = ir_arena_new();
    r->path = ir_arena_strdup(r->arena, path);
    r->nwant = workloads ? n : -1;
    r->want = IR_NEWN(r->arena, const char *, n + 1);
    for (int i = 0; workloads && i < n; i++)
        r->want[i] = ir_arena_strdup(r->arena, workloads[i]);
    r->fd = -1;
    table_grow(r);

    /* the rule for files read (a FIFO cannot hang the open); none yet is
     * an empty records file when appending, and an error when reading */
    char why[1024];
    FILE *f = rt_open_read(path, why, sizeof why);
    if (!f && (errno != ENOENT || !append)) {
        srch_seterr(err, errlen, "records file %s", why);
        goto fail;
    }
    if (f) {
        bool ok = read_all(r, f);
        int e = errno;
        fclose(f);
        if (!ok) {
            srch_seterr(err, errlen, "%s: cannot read records: %s", path, strerror(e));
            goto fail;
        }
        warn_unread(r, r->nold, "of version 1 (an older dcc)");
        warn_unread(r, r->nstale,
                    ir_arena_printf(r->arena,
                                    "of another lowering than this dcc's %d (their "
                                    "micro-kernels now build other kernels)",
                                    PASS_LOWERING_VERSION));
    }
    if (!append)
        return r;
    r->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (r->fd < 0) {
        srch_seterr(err, errlen, "%s: cannot open records for appending: %s", path, strerror(errno));
        goto fail;
    }
    return r;
fail:
    srch_records_close(r);
    return NULL;
}

SrchRecords *srch_records_open(const char *path, int n, const char *const *workloads, char *err,
                               size_t errlen)
{
    return load(path, n, workloads, true, err, errlen);
}

SrchRecords *srch_records_read(const char *path, int n, const char *const *workloads, char *err,
                               size_t errlen)
{
    return load(path, n, workloads, false, err, errlen);
}

/* ---- writing ---- */

static bool write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Appends the JSON object o as one line; false and err when it cannot. */
static bool append_line(SrchRecords *r, cJSON *o, char *err, size_t errlen)
{
    if (r->fd < 0) {
        srch_seterr(err, errlen, "%s: opened read-only (srch_records_read)", r->path);
        return false;
    }
    char *text = cJSON_PrintUnformatted(o);
    if (!text) {
        srch_seterr(err, errlen, "%s: out of memory", r->path);
        return false;
    }
    size_t n = strlen(text);
    char *line = malloc(n + 3);
    if (!line) {
        free(text);
        srch_seterr(err, errlen, "%s: out of memory", r->path);
        return false;
    }
    size_t off = 0;
    if (r->need_newline)
        line[off++] = '\n';
    memcpy(line + off, text, n);
    off += n;
    line[off++] = '\n';
    free(text);
    bool ok = write_all(r->fd, line, off) && fdatasync(r->fd) == 0;
    int e = errno;
    free(line);
    if (!ok) {
        r->need_newline = true; /* a part may have been written */
        srch_seterr(err, errlen, "%s: cannot write record: %s", r->path, strerror(e));
        return false;
    }
    r->need_newline = false;
    return true;
}

/* The fields every line starts with. */
static cJSON *line_head(const char *workload, const char *target, const char *arch,
                        const char *stage)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "v", SRCH_RECORDS_VERSION);
    cJSON_AddNumberToObject(o, "lowering", PASS_LOWERING_VERSION);
    cJSON_AddStringToObject(o, "workload", workload);
    cJSON_AddStringToObject(o, "target", target);
    cJSON_AddStringToObject(o, "arch", arch);
    cJSON_AddStringToObject(o, "stage", stage);
    return o;
}

bool srch_records_append(SrchRecords *r, const SrchRecord *in, char *err, size_t errlen)
{
    SrchRecord rec = *in;
    const char *why = NULL;
    rec.median_ms = rec.ntimes >= 1 && rec.times_ms ? median_of(rec.times_ms, rec.ntimes) : 0;
    if (!rec.ts)
        rec.ts = (int64_t)time(NULL);
    if (rec.ndims > 0 && (!rec.dim_names || !rec.dim_values))
        why = "shape without names or values";
    else if (rec.ntimes > 0 && !rec.times_ms)
        why = "no times";
    else
        why = check_record(&rec);
    if (why) {
        srch_seterr(err, errlen, "%s: cannot record a measurement: %s", r->path, why);
        return false;
    }

    char *mk = srch_mk_str(&rec.mk, rec.nspatial);
    cJSON *o = line_head(rec.workload, rec.target, rec.arch, rec.stage);
    cJSON_AddStringToObject(o, "mk", mk);
    free(mk);
    cJSON *shape = cJSON_AddObjectToObject(o, "shape");
    for (int i = 0; i < rec.ndims; i++)
        cJSON_AddNumberToObject(shape, rec.dim_names[i], (double)rec.dim_values[i]);
    cJSON_AddStringToObject(o, "kind", kind_names[rec.kind]);
    cJSON_AddNumberToObject(o, "trial", (double)rec.trial);
    cJSON_AddItemToObject(o, "times_ms", cJSON_CreateDoubleArray(rec.times_ms, rec.ntimes));
    cJSON_AddNumberToObject(o, "median_ms", rec.median_ms);
    if (rec.ndropped > 0)
        cJSON_AddNumberToObject(o, "dropped", rec.ndropped);
    cJSON_AddNumberToObject(o, "ts", (double)rec.ts);
    if (rec.nfeat) {
        cJSON *f = cJSON_AddArrayToObject(o, "features");
        for (int i = 0; i < rec.nfeat; i++) /* null: missing (ptxas's, on the CPU) */
            cJSON_AddItemToArray(f, isnan(rec.features[i]) ? cJSON_CreateNull()
                                                           : cJSON_CreateNumber(rec.features[i]));
        cJSON_AddNumberToObject(o, "work", rec.work);
    }
    /* keep the times as the line reads back (cJSON may print a double
     * with 15 digits that is only nearly equal), so this run and a later
     * reader of the file see the same numbers and decide the same way */
    char *text = cJSON_PrintUnformatted(o);
    double *back = malloc(sizeof *back * (size_t)(rec.ntimes + 1));
    cJSON *b = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(b, "times_ms");
    const cJSON *bm = cJSON_GetObjectItemCaseSensitive(b, "median_ms");
    if (back && cJSON_IsArray(bt) && cJSON_GetArraySize(bt) == rec.ntimes && cJSON_IsNumber(bm)) {
        for (int i = 0; i < rec.ntimes; i++)
            back[i] = cJSON_GetArrayItem(bt, i)->valuedouble;
        rec.times_ms = back;
        rec.median_ms = bm->valuedouble;
    }
    cJSON_Delete(b);
    bool ok = append_line(r, o, err, errlen);
    cJSON_Delete(o);
    if (ok)
        store(r, &rec);
    free(back);
    return ok;
}

/* Appends line o (a tree or a fuse line, its time stamp added) and, for a
 * wanted workload, reads it back through read as the file's lines are;
 * frees o. */
static bool append_kept(SrchRecords *r, cJSON *o, const char *workload,
                        const char *(*read)(SrchRecords *, const cJSON *, const char *),
                        char *err, size_t errlen)
{
    cJSON_AddNumberToObject(o, "ts", (double)time(NULL));
    bool ok = append_line(r, o, err, errlen);
    if (ok && wanted(r, workload))
        read(r, o, workload);
    cJSON_Delete(o);
    return ok;
}

bool srch_records_append_tree(SrchRecords *r, const char *workload, const char *target,
                              const char *arch, const char *stage, const SrchTree *t, char *err,
                              size_t errlen)
{
    cJSON *o = line_head(workload, target, arch, stage);
    cJSON_AddStringToObject(o, "kind", "tree");
    cJSON_AddItemToObject(o, "tree", srch_tree_json(t));
    return append_kept(r, o, workload, read_tree, err, errlen);
}

bool srch_records_append_fuse(SrchRecords *r, const char *workload, const char *target,
                              const char *arch, const char *stage, Fuse f, char *err,
                              size_t errlen)
{
    cJSON *o = line_head(workload, target, arch, stage);
    cJSON_AddStringToObject(o, "kind", "fuse");
    cJSON_AddStringToObject(o, "fuse", pass_fuse_name(f));
    return append_kept(r, o, workload, read_fuse, err, errlen);
}

/* ---- lookups ---- */

const SrchRecord *srch_records_find(const SrchRecords *r, const char *workload,
                                    const MicroKernel *mk, int ndims,
                                    const char *const *dim_names, const int64_t *dim_values)
{
    if (!workload || !mk || ndims < 0 || ndims > SRCH_MAX_DIMS)
        return NULL;
    for (int i = 0; i < ndims; i++)
        if (!dim_names[i])
            return NULL;
    uint64_t h = key_hash(workload, mk, ndims, dim_names, dim_values);
    size_t i = find_slot(r, h, workload, mk, ndims, dim_names, dim_values);
    return r->slots[i] ? r->recs[r->slots[i] - 1] : NULL;
}

const SrchRecord *srch_records_find_class(const SrchRecords *r, const char *workload,
                                          const MicroKernel *mk, int ndims,
                                          const char *const *dim_names,
                                          const int64_t *dim_values, bool baseline)
{
    const SrchRecord *last = srch_records_find(r, workload, mk, ndims, dim_names, dim_values);
    if (!last || srch_record_is_baseline(last->kind) == baseline)
        return last;
    /* rare (both kinds of search in one file): the latest of this class */
    for (int i = r->nrecs - 1; i >= 0; i--) {
        const SrchRecord *x = r->recs[i];
        if (srch_record_is_baseline(x->kind) == baseline &&
            srch_record_has_key(x, workload, mk, ndims, dim_names, dim_values))
            return x;
    }
    return NULL;
}

const SrchTree *srch_records_tree(const SrchRecords *r, const char *workload)
{
    for (int i = 0; i < r->ntrees; i++)
        if (strcmp(r->trees[i].workload, workload) == 0)
            return r->trees[i].tree;
    return NULL;
}

bool srch_records_tree_current(const SrchRecords *r, const char *workload)
{
    for (int i = 0; i < r->ntrees; i++)
        if (strcmp(r->trees[i].workload, workload) == 0) {
            for (int k = r->trees[i].after; k < r->nrecs; k++)
                if (strcmp(r->recs[k]->workload, workload) == 0)
                    return false;
            return true;
        }
    return false;
}

Fuse srch_records_fuse(const SrchRecords *r, const char *workload, const char *stage)
{
    const FuseEntry *e = find_fuse(r, workload, stage);
    return e ? e->fuse : FUSE_COST;
}

int srch_records_archs(const SrchRecords *r, const char *target, const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < r->nrecs; i++) {
        const SrchRecord *x = r->recs[i];
        if (strcmp(x->target, target) != 0)
            continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++)
            seen = strcmp(out[j], x->arch) == 0;
        if (!seen && n < max)
            out[n++] = x->arch;
    }
    return n;
}

int srch_records_count(const SrchRecords *r) { return r->nrecs; }
int srch_records_nforeign(const SrchRecords *r) { return r->nforeign; }
int srch_records_ncorrupt(const SrchRecords *r) { return r->ncorrupt; }
int srch_records_nold(const SrchRecords *r) { return r->nold; }
int srch_records_nstale(const SrchRecords *r) { return r->nstale; }
int srch_records_nwarnings(const SrchRecords *r) { return r->nwarnings; }

const SrchRecord *srch_records_at(const SrchRecords *r, int i)
{
    return i >= 0 && i < r->nrecs ? r->recs[i] : NULL;
}

const SrchWarning *srch_records_warning(const SrchRecords *r, int i)
{
    return i >= 0 && i < r->nwarnings ? &r->warnings[i] : NULL;
}

void srch_records_close(SrchRecords *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (int i = 0; i < r->ntrees; i++)
        srch_tree_free(r->trees[i].tree);
    free(r->trees);
    free(r->fuses);
    free(r->recs);
    free(r->slots);
    free(r->hashes);
    ir_arena_destroy(r->arena);
    free(r);
}
