/* tests/unit/test_search_records.c: the tuning records file.
 *
 * Round trips through the file; a resumed run finds what was measured
 * (whatever the dim order or micro-kernel spacing); damaged lines of every
 * kind are reported with their line number and skipped while the good
 * ones around them survive; lines of another workload are ignored, lines
 * of version 1 counted and reported once, and so are lines of another
 * lowering (or none), which a tune measures anew and leaves in the file;
 * trees and fuse lines are stored and read back, the latest winning; a kernel past the micro-kernel
 * budgets is never compiled from a tree or measurements; appending after a cut line keeps
 * both; a child SIGKILLed while appending leaves every fully written
 * record readable; random corruptions never crash; 100k records load and look up quickly. Scratch files live in
 * a mkdtemp directory under DC_BUILD_DIR (or /tmp) that the teardown removes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/search.h"

static char scratch[4096];
static char path[4200];

static int setup(void **state)
{
    const char *b = getenv("DC_BUILD_DIR");
    snprintf(scratch, sizeof scratch, "%s/records-test-XXXXXX", b && *b ? b : "/tmp");
    if (!mkdtemp(scratch))
        return -1;
    snprintf(path, sizeof path, "%s/records.jsonl", scratch);
    return 0;
}

static int teardown(void **state)
{
    DIR *d = opendir(scratch);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", scratch, de->d_name);
        unlink(p);
        rmdir(p);
    }
    if (d)
        closedir(d);
    rmdir(scratch);
    return 0;
}

static const char *const MK1 = "threads [4, 8] tile [6, 32] rchunk 256 unroll 1 vec 16";
static const char *const MK2 = "threads [16, 16] tile [1, 4] rchunk 32 unroll 4 vec 4 along reduction staged";

static const char *names2[] = {"M", "N"};

static MicroKernel mk_of(const char *text)
{
    MicroKernel mk;
    int nsp;
    assert_true(pass_parse_microkernel(text, &mk, &nsp));
    assert_int_equal(nsp, 2);
    return mk;
}

static SrchRecord make_rec(const char *mk, int64_t m, int64_t n, double *times, int ntimes,
                           SrchRecordKind kind, int64_t trial, int64_t *vals)
{
    vals[0] = m;
    vals[1] = n;
    return (SrchRecord){.workload = "wl1", .target = "cpu", .arch = "skx", .stage = "C",
                        .mk = mk_of(mk), .nspatial = 2, .ndims = 2, .dim_names = names2,
                        .dim_values = vals, .ntimes = ntimes, .times_ms = times,
                        .kind = kind, .trial = trial, .ts = 1700000000 + trial};
}

static SrchRecords *open_ok(const char *fp)
{
    char err[512] = "";
    SrchRecords *r = srch_records_open(path, 1, &fp, err, sizeof err);
    if (!r)
        fail_msg("open: %s", err);
    return r;
}

static void write_file(const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static char *slurp(size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

static void append_ok(SrchRecords *r, const SrchRecord *rec)
{
    char err[512] = "";
    if (!srch_records_append(r, rec, err, sizeof err))
        fail_msg("append: %s", err);
}

/* How a line of this dcc's lowering starts: {"v":2,"lowering":N, */
static const char *head(void)
{
    static char h[64];
    snprintf(h, sizeof h, "{\"v\":2,\"lowering\":%d,", PASS_LOWERING_VERSION);
    return h;
}

/* One good record line of workload fp and target tg, trial t. */
static void good_line(char *buf, size_t n, const char *fp, const char *tg, int t)
{
    snprintf(buf, n,
             "%s\"workload\":\"%s\",\"target\":\"%s\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"%s\","
             "\"shape\":{\"M\":%d,\"N\":768},\"kind\":\"trial\",\"trial\":%d,"
             "\"times_ms\":[1.5,1.25,2],\"median_ms\":1.5,\"ts\":1700000000}\n",
             head(), fp, tg, MK1, 16 + t, t);
}

static void test_round_trip(void **state)
{
    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 0);
    double t1[] = {0.5, 0.25, 0.75}, t2[] = {3.0, 1.0}, t3[] = {0.1};
    int64_t v1[2], v2[2], v3[2];
    SrchRecord a = make_rec(MK1, 128, 768, t1, 3, RK_TRIAL, 0, v1);
    SrchRecord b = make_rec(MK2, 1, 3072, t2, 2, RK_SELECT, 1, v2);
    SrchRecord c = make_rec(MK1, 7, 9, t3, 1, RK_BASELINE, 2, v3);
    append_ok(r, &a);
    append_ok(r, &b);
    append_ok(r, &c);
    assert_int_equal(srch_records_count(r), 3);
    srch_records_close(r);

    /* every line is one compact JSON object of version 2 and this lowering */
    size_t len;
    char *text = slurp(&len);
    int lines = 0;
    for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = 0;
        cJSON *o = cJSON_Parse(p);
        assert_non_null(o);
        assert_int_equal(cJSON_GetObjectItem(o, "v")->valueint, 2);
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "lowering")));
        assert_int_equal(cJSON_GetObjectItem(o, "lowering")->valueint, PASS_LOWERING_VERSION);
        assert_string_equal(cJSON_GetObjectItem(o, "workload")->valuestring, "wl1");
        assert_string_equal(cJSON_GetObjectItem(o, "target")->valuestring, "cpu");
        assert_string_equal(cJSON_GetObjectItem(o, "arch")->valuestring, "skx");
        assert_string_equal(cJSON_GetObjectItem(o, "mk")->valuestring, lines == 1 ? MK2 : MK1);
        assert_true(cJSON_IsObject(cJSON_GetObjectItem(o, "shape")));
        cJSON_Delete(o);
        lines++;
    }
    assert_int_equal(lines, 3);
    free(text);

    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 3);
    assert_int_equal(srch_records_ncorrupt(r), 0);
    assert_int_equal(srch_records_nforeign(r), 0);
    const SrchRecord *x = srch_records_at(r, 0);
    assert_string_equal(x->stage, "C");
    assert_string_equal(x->workload, "wl1");
    assert_string_equal(x->arch, "skx");
    MicroKernel m1 = mk_of(MK1), m2 = mk_of(MK2);
    assert_int_equal(ir_microkernel_cmp(&x->mk, &m1), 0);
    assert_int_equal(x->nspatial, 2);
    assert_int_equal(x->ndims, 2);
    assert_string_equal(x->dim_names[0], "M");
    assert_int_equal(x->dim_values[0], 128);
    assert_string_equal(x->dim_names[1], "N");
    assert_int_equal(x->dim_values[1], 768);
    assert_int_equal(x->ntimes, 3);
    assert_true(x->times_ms[0] == 0.5 && x->times_ms[1] == 0.25 && x->times_ms[2] == 0.75);
    assert_true(x->median_ms == 0.5);
    assert_int_equal(x->kind, RK_TRIAL);
    assert_int_equal(x->trial, 0);
    assert_int_equal(x->ts, 1700000000);
    x = srch_records_at(r, 1);
    assert_int_equal(ir_microkernel_cmp(&x->mk, &m2), 0);
    assert_true(x->median_ms == 2.0); /* even count: mean of the middle two */
    assert_int_equal(x->kind, RK_SELECT);
    x = srch_records_at(r, 2);
    assert_int_equal(x->kind, RK_BASELINE);
    assert_true(x->times_ms[0] == 0.1);
    assert_null(srch_records_at(r, 3));
    assert_string_equal(srch_record_kind_name(RK_SELECT), "select");
    assert_string_equal(srch_record_kind_name(RK_TURNS), "turns");
    srch_records_close(r);
}

static void test_resume_finds(void **state)
{
    SrchRecords *r = open_ok("wl1");
    double t[] = {1.0};
    int64_t v[2];
    for (int i = 0; i < 50; i++) {
        SrchRecord a = make_rec(i % 2 ? MK1 : MK2, i, 2 * i, t, 1, RK_TRIAL, i, v);
        append_ok(r, &a);
    }
    srch_records_close(r);

    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 50);
    const char *rev[] = {"N", "M"};
    MicroKernel m1 = mk_of(MK1), m2 = mk_of(MK2);
    for (int i = 0; i < 50; i++) {
        int64_t vv[2] = {i, 2 * i}, rv[2] = {2 * i, i};
        const MicroKernel *mk = i % 2 ? &m1 : &m2, *other = i % 2 ? &m2 : &m1;
        const SrchRecord *x = srch_records_find(r, "wl1", mk, 2, names2, vv);
        assert_non_null(x);
        assert_int_equal(x->trial, i);
        /* the shape is a set: dim order does not matter */
        assert_ptr_equal(srch_records_find(r, "wl1", mk, 2, rev, rv), x);
        /* not measured: the other kernel, another workload, another value */
        assert_null(srch_records_find(r, "wl1", other, 2, names2, vv));
        assert_null(srch_records_find(r, "wl2", mk, 2, names2, vv));
        vv[1]++;
        assert_null(srch_records_find(r, "wl1", mk, 2, names2, vv));
        assert_null(srch_records_find(r, "wl1", mk, 1, names2, vv));
    }
    /* spacing of a micro-kernel's text does not matter once parsed */
    int64_t v1[2] = {1, 2};
    MicroKernel spaced;
    assert_true(pass_parse_microkernel("threads [4,8]  tile [6,32] rchunk 256 unroll 1 vec 16",
                                       &spaced, NULL));
    assert_non_null(srch_records_find(r, "wl1", &spaced, 2, names2, v1));

    /* a later measurement of the same key wins, now and after reopening */
    double t2[] = {9.0};
    SrchRecord a = make_rec(MK1, 1, 2, t2, 1, RK_SELECT, 99, v);
    append_ok(r, &a);
    assert_int_equal(srch_records_find(r, "wl1", &m1, 2, names2, v1)->trial, 99);
    srch_records_close(r);
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 51);
    assert_int_equal(srch_records_find(r, "wl1", &m1, 2, names2, v1)->trial, 99);
    srch_records_close(r);
}

/* A stored tree is read back, the latest per workload; only asked-for
 * workloads' trees load. */
static void test_trees(void **state)
{
    SrchRecords *r = open_ok("wl1");
    MicroKernel ks[2] = {mk_of(MK1), mk_of(MK2)};
    SrchTreeNode nodes[3] = {{TN_SPLIT, 0, 0, 16, 1, 2}, {TN_LEAF, 0, 0, 0, 0, 0},
                             {TN_LEAF, 1, 0, 0, 0, 0}};
    char *dn[1] = {"M"};
    SrchTree t = {1, dn, 2, ks, 2, 3, nodes};
    char err[512] = "";
    assert_null(srch_records_tree(r, "wl1"));
    assert_false(srch_records_tree_current(r, "wl1"));
    assert_true(srch_records_append_tree(r, "wl1", "cpu", "skx", "C", &t, err, sizeof err));
    assert_true(srch_records_tree_current(r, "wl1"));
    /* a measurement after the tree: the tree is no longer a finished tune's */
    int64_t v[2];
    double t1[] = {1.0};
    SrchRecord a = make_rec(MK1, 1, 2, t1, 1, RK_SELECT, 0, v);
    append_ok(r, &a);
    assert_false(srch_records_tree_current(r, "wl1"));
    nodes[0].le = 32;
    assert_true(srch_records_append_tree(r, "wl1", "cpu", "skx", "C", &t, err, sizeof err));
    assert_true(srch_records_append_tree(r, "wl2", "cpu", "skx", "D", &t, err, sizeof err));
    const SrchTree *got = srch_records_tree(r, "wl1");
    assert_non_null(got);
    assert_int_equal(got->nodes[0].le, 32);
    assert_true(srch_records_tree_current(r, "wl1"));
    srch_records_close(r);

    r = open_ok("wl1");
    assert_true(srch_records_tree_current(r, "wl1")); /* read back: the tree came last */
    got = srch_records_tree(r, "wl1");
    assert_non_null(got);
    assert_int_equal(got->nnodes, 3);
    assert_int_equal(got->nodes[0].le, 32);
    assert_int_equal(got->nspatial, 2);
    assert_int_equal(ir_microkernel_cmp(&got->kernels[1], &ks[1]), 0);
    assert_null(srch_records_tree(r, "wl2"));
    assert_int_equal(srch_records_count(r), 1);
    assert_int_equal(srch_records_nforeign(r), 1);
    srch_records_close(r);
    /* every workload's */
    r = srch_records_open(path, 0, NULL, err, sizeof err);
    assert_non_null(srch_records_tree(r, "wl2"));
    srch_records_close(r);
}

static void collect_warning(void *ud, const char *msg)
{
    snprintf(ud, 1024, "%s", msg);
}

/* A kernel past pass_check_microkernel's budgets (issue 31: 8 MiB of a
 * staged block's accumulators, which overflowed the stack) is never
 * compiled from records: a stored tree holding one is not used, with a
 * warning naming the stage, the size and the limit; the tree is refit to
 * the measurements, which leave its records out however fast they say it
 * is; and the pipeline refuses it given directly. */
static void test_over_budget_kernels(void **state)
{
    (void)state;
    FeUnit u;
    assert_int_equal(fe_load_text("d.tex", "d",
                                  "dim T in 1..64\ninput X[T, 64] f32\ninput W[64, 64] f32\n"
                                  "output Y[i: T, j: 64] = sum[k: 64](X[i, k] * W[j, k])\n",
                                  &u),
                     0);
    TeProgram *p = u.prog;
    Expr *bodies[4];
    bool mat[4];
    pass_inline(p, bodies, mat);
    const Tensor *y = ir_te_find(p, "Y");
    char *fp = srch_fingerprint(p, y, mat, "cpu", "skx");
    static const char *const BIG = "threads [16, 32] tile [64, 64] rchunk 64 unroll 1 vec 16 staged";
    char err[1024] = "", warned[1024] = "";
    SrchRecords *r = srch_records_open(path, 0, NULL, err, sizeof err);
    assert_non_null(r);
    const char *dn[1] = {"T"};
    for (int t = 0; t < 4; t++) {
        int64_t v = t < 2 ? 8 : 40;
        double ms = t % 2 ? 0.5 : 1.0; /* the big kernel "faster" */
        SrchRecord rec = {.workload = fp, .target = "cpu", .arch = "skx", .stage = "Y",
                          .mk = mk_of(t % 2 ? BIG : MK1), .nspatial = 2, .ndims = 1,
                          .dim_names = dn, .dim_values = &v, .ntimes = 1, .times_ms = &ms,
                          .kind = RK_SELECT, .trial = t, .ts = 1700000000};
        append_ok(r, &rec);
    }
    MicroKernel ks[2] = {mk_of(MK1), mk_of(BIG)};
    SrchTreeNode nodes[3] = {{TN_SPLIT, 0, 0, 16, 1, 2}, {TN_LEAF, 0, 0, 0, 0, 0},
                             {TN_LEAF, 1, 0, 0, 0, 0}};
    char *tn[1] = {"T"};
    SrchTree tree = {1, tn, 2, ks, 2, 3, nodes};
    assert_true(srch_records_append_tree(r, fp, "cpu", "skx", "Y", &tree, err, sizeof err));
    srch_records_close(r);

    StageSchedule sched[4];
    assert_int_equal(srch_schedule_from_records(p, path, "cpu", "skx", sched, NULL, NULL, 0,
                                                collect_warning, warned, err, sizeof err),
                     0);
    assert_string_equal(warned, "records: the stored tree of Y is not used: Y: micro-kernel "
                                "needs 8 MiB of accumulators on a CPU block's stack (512 threads "
                                "x tile 64 x 64 x 4 bytes); the limit is 3 MiB (a staged block's "
                                "1 MiB of staging aside)");
    assert_int_equal(sched[y->id].nvariants, 1);
    assert_int_equal(ir_microkernel_cmp(&sched[y->id].variants[0], &ks[0]), 0);
    TargetInfo ti = pass_target_info(PT_CPU);
    assert_non_null(pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err));
    sched[y->id] = (StageSchedule){1, &ks[1], NULL};
    assert_null(pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err));
    assert_non_null(strstr(err, "Y: micro-kernel needs 8 MiB of accumulators"));
    free(fp);
    fe_unload(&u);
}

static void assert_warning(SrchRecords *r, int i, int64_t line, const char *needle)
{
    const SrchWarning *w = srch_records_warning(r, i);
    assert_non_null(w);
    char prefix[4400];
    snprintf(prefix, sizeof prefix, "%s:%lld: ", path, (long long)line);
    if (w->line != line || strncmp(w->msg, prefix, strlen(prefix)) != 0 ||
        !strstr(w->msg, needle) || strchr(w->msg, '\n'))
        fail_msg("warning %d: want line %lld with '%s', got %lld '%s'", i, (long long)line,
                 needle, (long long)w->line, w->msg);
}

/* Fuse lines: the latest per (program, tensor) wins, in memory at once
 * and read back; "cost" reads as FUSE_COST; another program's are foreign;
 * a bad choice or a missing tensor is a damaged line. */
/* The check's kinds of both classes, and the runs a timing dropped: kept
 * through a round trip ("dropped" written only when some were); a count
 * that is not one is damage. */
static void test_check_kinds_and_dropped(void **state)
{
    SrchRecords *r = open_ok("wl1");
    double t1[] = {0.5, 0.25}, t2[] = {0.3};
    int64_t v1[2], v2[2];
    SrchRecord a = make_rec(MK1, 4, 768, t1, 2, RK_CHECK, 0, v1);
    SrchRecord b = make_rec(MK1, 4, 768, t2, 1, RK_BASELINE_CHECK, 0, v2);
    a.ndropped = 3;
    append_ok(r, &a);
    append_ok(r, &b);
    srch_records_close(r);
    size_t len;
    char *text = slurp(&len);
    char *second = strchr(text, '\n') + 1;
    assert_non_null(strstr(text, "\"kind\":\"check\""));
    assert_true(strstr(text, "\"dropped\":3") && strstr(text, "\"dropped\":3") < second);
    assert_null(strstr(second, "dropped"));
    assert_non_null(strstr(second, "\"kind\":\"baseline-check\""));
    free(text);

    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 2);
    assert_int_equal(srch_records_ncorrupt(r), 0);
    const SrchRecord *x = srch_records_at(r, 0), *y = srch_records_at(r, 1);
    assert_int_equal(x->kind, RK_CHECK);
    assert_int_equal(x->ndropped, 3);
    assert_int_equal(y->kind, RK_BASELINE_CHECK);
    assert_int_equal(y->ndropped, 0);
    assert_true(srch_record_is_turns(RK_CHECK) && srch_record_is_check(RK_CHECK));
    assert_true(srch_record_is_turns(RK_TURNS) && !srch_record_is_check(RK_TURNS));
    assert_true(srch_record_is_baseline(RK_BASELINE_CHECK) && !srch_record_is_baseline(RK_CHECK));
    /* each class finds its own */
    int64_t vals[2] = {4, 768};
    assert_ptr_equal(srch_records_find_class(r, "wl1", &x->mk, 2, names2, vals, false), x);
    assert_ptr_equal(srch_records_find_class(r, "wl1", &x->mk, 2, names2, vals, true), y);
    srch_records_close(r);

    const char *bad[] = {"-1", "1.5", "\"2\"", "1e12"};
    char line[1024], *buf = calloc(1, 8192);
    for (int i = 0; i < 4; i++) {
        good_line(line, sizeof line, "wl1", "cpu", i);
        snprintf(strrchr(line, '}'), 64, ",\"dropped\":%s}\n", bad[i]);
        strcat(buf, line);
    }
    write_file(buf, strlen(buf));
    free(buf);
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 0);
    assert_int_equal(srch_records_ncorrupt(r), 4);
    for (int i = 0; i < 4; i++)
        assert_warning(r, i, i + 1, "\"dropped\"");
    srch_records_close(r);
}

static void test_fuse_lines(void **state)
{
    (void)state;
    SrchRecords *r = open_ok("prog");
    char err[512] = "";
    assert_int_equal(srch_records_fuse(r, "prog", "E"), FUSE_COST);
    assert_true(srch_records_append_fuse(r, "prog", "cpu", "skx", "E", FUSE_MATERIALIZE, err,
                                         sizeof err));
    assert_true(srch_records_append_fuse(r, "prog", "cpu", "skx", "P", FUSE_INLINE, err,
                                         sizeof err));
    assert_int_equal(srch_records_fuse(r, "prog", "E"), FUSE_MATERIALIZE);
    assert_true(srch_records_append_fuse(r, "prog", "cpu", "skx", "E", FUSE_COST, err,
                                         sizeof err));
    assert_true(srch_records_append_fuse(r, "other", "cpu", "skx", "E", FUSE_INLINE, err,
                                         sizeof err));
    assert_int_equal(srch_records_fuse(r, "prog", "E"), FUSE_COST);
    srch_records_close(r);
    FILE *f = fopen(path, "a");
    fprintf(f,
            "%s\"workload\":\"prog\",\"target\":\"cpu\",\"arch\":\"skx\","
            "\"stage\":\"P\",\"kind\":\"fuse\",\"fuse\":\"sometimes\"}\n"
            "%s\"workload\":\"prog\",\"target\":\"cpu\",\"arch\":\"skx\","
            "\"kind\":\"fuse\",\"fuse\":\"inline\"}\n",
            head(), head());
    fclose(f);
    r = open_ok("prog");
    assert_int_equal(srch_records_fuse(r, "prog", "E"), FUSE_COST);
    assert_int_equal(srch_records_fuse(r, "prog", "P"), FUSE_INLINE);
    assert_int_equal(srch_records_fuse(r, "prog", "Q"), FUSE_COST);
    assert_int_equal(srch_records_fuse(r, "other", "E"), FUSE_COST); /* not wanted */
    assert_int_equal(srch_records_nforeign(r), 1);
    assert_int_equal(srch_records_count(r), 0);
    assert_int_equal(srch_records_ncorrupt(r), 2);
    assert_warning(r, 0, 5, "\"fuse\" is not");
    assert_warning(r, 1, 6, "\"stage\"");
    srch_records_close(r);
}


static void test_damaged_lines(void **state)
{
    size_t cap = 4 << 20, len = 0;
    char *buf = malloc(cap), line[1024];
#define ADD(s)                                                                               \
    do {                                                                                     \
        size_t n_ = strlen(s);                                                               \
        memcpy(buf + len, s, n_);                                                            \
        len += n_;                                                                           \
    } while (0)
    good_line(line, sizeof line, "wl1", "cpu", 0);
    ADD(line);                                                       /* 1: good */
    ADD("this is not json\n");                                       /* 2 */
    good_line(line, sizeof line, "other", "cpu", 1);
    ADD(line);                                                       /* 3: foreign */
    good_line(line, sizeof line, "wl3", "cuda", 2);
    ADD(line);                                                       /* 4: foreign */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"x\"}\n"); /* 5 */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"threads [4] "
        "tile [2] rchunk 1 unroll 1 vec 1\",\"shape\":{\"M\":1},\"kind\":\"trial\","
        "\"trial\":\"seven\",\"times_ms\":[1],\"median_ms\":1,\"ts\":1}\n");   /* 6: wrong type */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"threads [4] "
        "tile [2] rchunk 1 unroll 1 vec 1\",\"shape\":{\"M\":1e400},\"kind\":\"trial\","
        "\"trial\":1,\"times_ms\":[1],\"median_ms\":1,\"ts\":1}\n");           /* 7: out of range */
    ADD("{\"v\":3,\"workload\":\"wl1\",\"target\":\"cpu\"}\n");       /* 8: version */
    for (int i = 0; i < 5000; i++)                                  /* 9: too deep */
        ADD("[");
    for (int i = 0; i < 5000; i++)
        ADD("]");
    ADD("\n");
    for (int i = 0; i < 500; i++)                                   /* 10: deep, valid */
        ADD("[");
    for (int i = 0; i < 500; i++)
        ADD("]");
    ADD("\n");
    ADD("\n");                                                       /* 11: blank, ignored */
    ADD(head());
    ADD("\"workload\":\"wl1\"}\n");                          /* 12: no target */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"threads [4] "
        "tile [2] rchunk 1 unroll 1 vec 1\",\"shape\":{\"M\":1},\"kind\":\"trial\","
        "\"trial\":1,\"times_ms\":[],\"median_ms\":1,\"ts\":1}\n");            /* 13: no times */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"threads [4] "
        "tile [2] rchunk 1 unroll 1 vec 1\",\"shape\":{\"M\":1,\"M\":2},\"kind\":\"trial\","
        "\"trial\":1,\"times_ms\":[1],\"median_ms\":1,\"ts\":1}\n");           /* 14: dim twice */
    ADD("{\"v\":2} trailing\n");                                     /* 15 */
    ADD(head());
    ADD("\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"threads [4] "
        "tile [2] rchunk 1 unroll 1 vec 1\",\"shape\":{\"M\":1},\"kind\":\"bogus\","
        "\"trial\":1,\"times_ms\":[1],\"median_ms\":1,\"ts\":1}\n");           /* 16: kind */
    ADD("{\"v\":1,\"work");                                        /* 17: a NUL byte */
    buf[len++] = 0;
    ADD("x\n"); /* still line 17 */
    for (int i = 0; i < (1 << 20) + 10; i++)                         /* 18: huge line */
        buf[len++] = 'a';
    buf[len++] = '\n';
    good_line(line, sizeof line, "wl1", "cpu", 4);
    ADD(line);                                                       /* 19: good */
    ADD("{\"v\":1,\"workload\":\"wl1\",\"target\":\"cpu\"}\n"); /* 20: an old version */
    good_line(line, sizeof line, "wl1", "cpu", 5);
    line[strlen(line) / 2] = 0;
    ADD(line);                                                       /* 21: cut, no newline */
    write_file(buf, len);

    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 2);
    assert_int_equal(srch_records_at(r, 0)->trial, 0);
    assert_int_equal(srch_records_at(r, 1)->trial, 4);
    assert_int_equal(srch_records_nforeign(r), 2);
    assert_int_equal(srch_records_ncorrupt(r), 15);
    assert_int_equal(srch_records_nold(r), 1);
    assert_int_equal(srch_records_nwarnings(r), 16);
    int w = 0;
    assert_warning(r, w++, 2, "not valid JSON");
    assert_warning(r, w++, 5, "missing field \"kind\"");
    assert_warning(r, w++, 6, "\"trial\"");
    assert_warning(r, w++, 7, "shape");
    assert_warning(r, w++, 8, "version");
    assert_warning(r, w++, 9, "not valid JSON");
    assert_warning(r, w++, 10, "not a JSON object");
    assert_warning(r, w++, 12, "\"target\"");
    assert_warning(r, w++, 13, "times_ms");
    assert_warning(r, w++, 14, "dim repeated");
    assert_warning(r, w++, 15, "text after");
    assert_warning(r, w++, 16, "kind");
    assert_warning(r, w++, 17, "NUL");
    assert_warning(r, w++, 18, "longer than");
    assert_warning(r, w++, 21, "truncated last line");
    assert_int_equal(w, 15);
    /* the old version: one line for all of them, naming it */
    const SrchWarning *old = srch_records_warning(r, 15);
    assert_non_null(old);
    assert_non_null(strstr(old->msg, "1 record of version 1 (an older dcc) not read"));
    assert_null(srch_records_warning(r, 16));
    srch_records_close(r);
    free(buf);
#undef ADD
}

static void test_missing_field(void **state)
{
    char line[1024];
    good_line(line, sizeof line, "wl1", "cpu", 0);
    char *p = strstr(line, "\"median_ms\":1.5,");
    memmove(p, p + strlen("\"median_ms\":1.5,"), strlen(p + strlen("\"median_ms\":1.5,")) + 1);
    write_file(line, strlen(line));
    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 0);
    assert_int_equal(srch_records_ncorrupt(r), 1);
    assert_warning(r, 0, 1, "missing field \"median_ms\"");
    srch_records_close(r);
}

static void test_append_after_cut_line(void **state)
{
    char a[1024], b[1024];
    good_line(a, sizeof a, "wl1", "cpu", 0);
    good_line(b, sizeof b, "wl1", "cpu", 1);
    b[strlen(b) - 20] = 0; /* cut off, no newline */
    char text[2048];
    snprintf(text, sizeof text, "%s%s", a, b);
    write_file(text, strlen(text));

    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 1);
    assert_int_equal(srch_records_ncorrupt(r), 1);
    double t[] = {2.0};
    int64_t v[2];
    SrchRecord x = make_rec(MK2, 5, 6, t, 1, RK_TRIAL, 7, v);
    append_ok(r, &x);
    append_ok(r, &x);
    srch_records_close(r);

    size_t len;
    char *after = slurp(&len);
    assert_memory_equal(after, text, strlen(text)); /* nothing lost, nothing rewritten */
    assert_int_equal(after[strlen(text)], '\n');
    free(after);

    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 3);
    assert_int_equal(srch_records_ncorrupt(r), 1);
    assert_warning(r, 0, 2, "not valid JSON"); /* no longer the last line */
    assert_int_equal(srch_records_at(r, 0)->trial, 0);
    assert_int_equal(srch_records_at(r, 1)->trial, 7);
    srch_records_close(r);

    /* a complete record whose newline was lost is kept */
    good_line(a, sizeof a, "wl1", "cpu", 3);
    a[strlen(a) - 1] = 0;
    write_file(a, strlen(a));
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 1);
    append_ok(r, &x);
    srch_records_close(r);
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 2);
    assert_int_equal(srch_records_ncorrupt(r), 0);
    srch_records_close(r);
}

static void test_kill_while_appending(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *wl = "wl1";
        SrchRecords *r = srch_records_open(path, 1, &wl, NULL, 0);
        if (!r)
            _exit(3);
        double t[] = {1.0, 2.0, 3.0};
        int64_t v[2];
        for (int i = 0;; i++) {
            SrchRecord x = make_rec(MK1, i, i + 1, t, 3, RK_TRIAL, i, v);
            if (!srch_records_append(r, &x, NULL, 0))
                _exit(4);
        }
    }
    /* wait until some records are on disk, then kill mid-stream */
    struct stat st;
    for (int i = 0; i < 20000; i++) {
        if (stat(path, &st) == 0 && st.st_size > 20000)
            break;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    size_t len;
    char *text = slurp(&len);
    int complete = 0;
    for (size_t i = 0; i < len; i++)
        complete += text[i] == '\n';
    bool cut = len && text[len - 1] != '\n';
    free(text);
    assert_true(complete > 10);

    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), complete);
    assert_int_equal(srch_records_ncorrupt(r), cut ? 1 : 0);
    for (int i = 0; i < complete; i++)
        assert_int_equal(srch_records_at(r, i)->trial, i);
    /* resume: the next append lands on its own line */
    double t[] = {1.0};
    int64_t v[2];
    SrchRecord x = make_rec(MK1, 1, 1, t, 1, RK_SELECT, complete, v);
    append_ok(r, &x);
    srch_records_close(r);
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), complete + 1);
    srch_records_close(r);
}

static void test_bad_appends_and_opens(void **state)
{
    SrchRecords *r = open_ok("wl1");
    char err[512];
    double t[] = {1.0}, nan_t[] = {NAN};
    int64_t v[2];
    SrchRecord x = make_rec(MK1, 1, 2, t, 1, RK_TRIAL, 0, v);
    x.arch = "";
    assert_false(srch_records_append(r, &x, err, sizeof err));
    assert_non_null(strstr(err, "empty workload, target or arch"));
    x = make_rec(MK1, 1, 2, nan_t, 1, RK_TRIAL, 0, v);
    assert_false(srch_records_append(r, &x, err, sizeof err));
    x = make_rec(MK1, 1, 2, t, 0, RK_TRIAL, 0, v);
    assert_false(srch_records_append(r, &x, err, sizeof err));
    x = make_rec(MK1, -1, 2, t, 1, RK_TRIAL, 0, v);
    assert_false(srch_records_append(r, &x, err, sizeof err));
    x = make_rec(MK1, 1, 2, t, 1, (SrchRecordKind)7, 0, v);
    assert_false(srch_records_append(r, &x, err, sizeof err));
    const char *same[] = {"M", "M"};
    x = make_rec(MK1, 1, 2, t, 1, RK_TRIAL, 0, v);
    x.dim_names = same;
    assert_false(srch_records_append(r, &x, err, sizeof err));
    assert_null(strchr(err, '\n'));
    assert_int_equal(srch_records_count(r), 0);
    srch_records_close(r);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 0); /* nothing was written */

    /* a directory and a FIFO: clear errors, no hang */
    char err2[512] = "";
    const char *wl = "wl1";
    assert_null(srch_records_open(scratch, 1, &wl, err2, sizeof err2));
    assert_non_null(strstr(err2, scratch));
    char fifo[4300];
    snprintf(fifo, sizeof fifo, "%s/fifo", scratch);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_null(srch_records_open(fifo, 1, &wl, err2, sizeof err2));
    assert_non_null(strstr(err2, "not a regular file"));
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/no/such/dir", scratch);
    assert_null(srch_records_open(missing, 1, &wl, err2, sizeof err2));
    assert_null(strchr(err2, '\n'));

    /* read only: an absent file an error with its reason, nothing created,
     * the records there, appending refused */
    char absent[4300];
    snprintf(absent, sizeof absent, "%s/absent.jsonl", scratch);
    SrchRecords *ro = srch_records_read(absent, 0, NULL, err2, sizeof err2);
    assert_null(ro);
    assert_non_null(strstr(err2, "No such file or directory"));
    assert_int_not_equal(stat(absent, &st), 0);
    r = open_ok("wl1");
    x = make_rec(MK1, 1, 2, t, 1, RK_TRIAL, 0, v);
    append_ok(r, &x);
    srch_records_close(r);
    assert_int_equal(stat(path, &st), 0);
    off_t size = st.st_size;
    ro = srch_records_read(path, 0, NULL, err2, sizeof err2);
    assert_non_null(ro);
    assert_int_equal(srch_records_count(ro), 1);
    assert_false(srch_records_append(ro, &x, err2, sizeof err2));
    assert_non_null(strstr(err2, "read-only"));
    srch_records_close(ro);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, size);
}

/* good_line with its "lowering" field replaced by field ("" drops it). */
static void lowering_line(char *buf, size_t n, const char *field, int t)
{
    char line[1024];
    good_line(line, sizeof line, "wl1", "cpu", t);
    const char *at = strstr(line, "\"lowering\":");
    const char *rest = strchr(at, ',') + 1;
    snprintf(buf, n, "%.*s%s%s", (int)(at - line), line, field, rest);
}

/* Lines of another lowering: not read (records, trees and fuse lines
 * alike), with one warning for all of them; lines that lack the field
 * are lowering 0; a field that is no count is damage. A measurement
 * found only among them is measured anew, and appending leaves them as
 * they were. */
static void test_lowering(void **state)
{
    (void)state;
    char other[32], line[1024], *buf = calloc(1, 16384);
    snprintf(other, sizeof other, "\"lowering\":%d,", PASS_LOWERING_VERSION + 1);
    lowering_line(line, sizeof line, "\"lowering\":0,", 0);
    strcat(buf, line);                                               /* 1: lowering 0 */
    lowering_line(line, sizeof line, "", 1);
    strcat(buf, line);                                               /* 2: no field */
    lowering_line(line, sizeof line, other, 2);
    strcat(buf, line);                                               /* 3: a later one */
    good_line(line, sizeof line, "wl1", "cpu", 3);
    strcat(buf, line);                                               /* 4: this one */
    lowering_line(line, sizeof line, "\"lowering\":\"1\",", 4);
    strcat(buf, line);                                               /* 5: damaged */
    lowering_line(line, sizeof line, "\"lowering\":1.5,", 5);
    strcat(buf, line);                                               /* 6: damaged */
    strcat(buf, "{\"v\":2,\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":"
                "\"C\",\"kind\":\"fuse\",\"fuse\":\"inline\"}\n");      /* 7: an old fuse line */
    strcat(buf, "{\"v\":2,\"lowering\":0,\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":"
                "\"skx\",\"stage\":\"C\",\"kind\":\"tree\",\"tree\":{\"v\":1,\"dims\":[],"
                "\"kernels\":[\"threads [4, 8] tile [6, 32] rchunk 256 unroll 1 vec 16\"],"
                "\"tree\":{\"kernel\":0}}}\n");                          /* 8: an old tree */
    strcat(buf, "{\"v\":1,\"workload\":\"wl1\"}\n");                   /* 9: version 1 */
    size_t len = strlen(buf);
    write_file(buf, len);

    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 1);
    assert_int_equal(srch_records_at(r, 0)->trial, 3);
    assert_int_equal(srch_records_nstale(r), 5);
    assert_int_equal(srch_records_nold(r), 1);
    assert_int_equal(srch_records_ncorrupt(r), 2);
    assert_null(srch_records_tree(r, "wl1"));
    assert_int_equal(srch_records_fuse(r, "wl1", "C"), FUSE_COST);
    assert_int_equal(srch_records_nwarnings(r), 4);
    assert_warning(r, 0, 5, "\"lowering\" is not an integer");
    assert_warning(r, 1, 6, "\"lowering\" is not an integer");
    assert_non_null(strstr(srch_records_warning(r, 2)->msg, "1 record of version 1"));
    char want[128];
    snprintf(want, sizeof want, "5 records of another lowering than this dcc's %d",
             PASS_LOWERING_VERSION);
    const SrchWarning *w = srch_records_warning(r, 3);
    if (w->line != 0 || strncmp(w->msg, path, strlen(path)) != 0 || !strstr(w->msg, want) ||
        !strstr(w->msg, "tuning again measures anew"))
        fail_msg("the lowering's warning: '%s'", w->msg);
    /* trial 0's key (M = 16): none, so it is measured again and appended */
    MicroKernel m1 = mk_of(MK1);
    int64_t key[2] = {16, 768};
    assert_null(srch_records_find(r, "wl1", &m1, 2, names2, key));
    double t[] = {4.0};
    int64_t v[2];
    SrchRecord x = make_rec(MK1, 16, 768, t, 1, RK_TRIAL, 9, v);
    append_ok(r, &x);
    char err[256];
    assert_true(srch_records_append_fuse(r, "wl1", "cpu", "skx", "C", FUSE_MATERIALIZE, err,
                                         sizeof err));
    srch_records_close(r);

    size_t after;
    char *text = slurp(&after);
    assert_memory_equal(text, buf, len); /* nothing rewritten, nothing lost */
    int added = 0;
    for (char *p = text + len, *nl; (nl = strchr(p, '\n')); p = nl + 1, added++) {
        *nl = 0;
        cJSON *o = cJSON_Parse(p);
        assert_non_null(o);
        assert_int_equal(cJSON_GetObjectItem(o, "lowering")->valueint, PASS_LOWERING_VERSION);
        cJSON_Delete(o);
    }
    assert_int_equal(added, 2);
    free(text);

    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 2);
    assert_int_equal(srch_records_nstale(r), 5);
    const SrchRecord *y = srch_records_find(r, "wl1", &m1, 2, names2, key);
    assert_non_null(y);
    assert_int_equal(y->trial, 9);
    assert_int_equal(srch_records_fuse(r, "wl1", "C"), FUSE_MATERIALIZE);
    srch_records_close(r);
    free(buf);
}

/* Random corruptions of a good file: never a crash, every line accounted for. */
static void test_random_corruption(void **state)
{
    char base[8192];
    size_t blen = 0;
    for (int i = 0; i < 8; i++) {
        good_line(base + blen, sizeof base - blen, i == 3 ? "other" : "wl1", "cpu", i);
        blen += strlen(base + blen);
    }
    srand(12345);
    char buf[8192];
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(buf, base, blen);
        size_t len = blen;
        int nmut = 1 + rand() % 4;
        for (int m = 0; m < nmut; m++) {
            size_t at = (size_t)rand() % len;
            switch (rand() % 4) {
            case 0: buf[at] = (char)(rand() % 256); break;
            case 1: len = at + 1; break; /* cut */
            case 2: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
            default: buf[at] = "{}[]\",:0e-\n"[rand() % 11]; break;
            }
        }
        write_file(buf, len);
        int lines = len && buf[len - 1] != '\n';
        for (size_t i = 0; i < len; i++)
            lines += buf[i] == '\n';
        SrchRecords *r = open_ok("wl1");
        int seen = srch_records_count(r) + srch_records_ncorrupt(r) + srch_records_nforeign(r);
        assert_true(seen <= lines);
        srch_records_close(r);
    }
}

static void test_many_records_fast(void **state)
{
    enum { N = 100000 };
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < N; i++)
        fprintf(f,
                "%s\"workload\":\"wl1\",\"target\":\"cpu\",\"arch\":\"skx\",\"stage\":\"C\",\"mk\":\"%s\","
                "\"shape\":{\"M\":%d,\"N\":%d},\"kind\":\"select\",\"trial\":%d,"
                "\"times_ms\":[1],\"median_ms\":1,\"ts\":1}\n",
                head(), i % 3 ? MK1 : MK2, i % 1000, i / 1000, i);
    fclose(f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SrchRecords *r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), N);
    MicroKernel m1 = mk_of(MK1), m2 = mk_of(MK2);
    for (int i = 0; i < N; i++) {
        int64_t v[2] = {i % 1000, i / 1000};
        const SrchRecord *x = srch_records_find(r, "wl1", i % 3 ? &m1 : &m2, 2, names2, v);
        assert_non_null(x);
        assert_int_equal(x->trial, i);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    assert_true(s < 30); /* seconds, ASan included: a linear scan would take far longer */
    srch_records_close(r);
}

/* A search trial's features and adapted work: written with the record
 * (a missing feature as null), read back the same; damaged ones are
 * damaged lines, another dcc's feature count is no feature at all. */
static void test_features(void **state)
{
    (void)state;
    SrchRecords *r = open_ok("wl1");
    double t[] = {2.0};
    int64_t v[2];
    float f[SRCH_NFEAT];
    for (int i = 0; i < SRCH_NFEAT; i++)
        f[i] = (float)(i * 0.1 + 1.0 / 3);
    f[3] = NAN;
    SrchRecord a = make_rec(MK1, 8, 16, t, 1, RK_TRIAL, 0, v);
    a.nfeat = SRCH_NFEAT, a.features = f, a.work = 3e9;
    append_ok(r, &a);
    SrchRecord b = make_rec(MK2, 8, 16, t, 1, RK_SELECT, 1, v); /* none */
    append_ok(r, &b);
    a.work = -1; /* refused */
    char err[256];
    assert_false(srch_records_append(r, &a, err, sizeof err));
    assert_non_null(strstr(err, "work"));
    srch_records_close(r);
    size_t len;
    char *text = slurp(&len);
    assert_non_null(strstr(text, "null"));
    /* a line of another feature set, and two damaged */
    char *nf = strstr(text, "\"features\":[");
    assert_non_null(nf);
    char *line1 = strndup(text, (size_t)(strchr(text, '\n') - text));
    char other[8192], bad1[8192], bad2[8192];
    char *cut = strstr(line1, "\"features\":[") + strlen("\"features\":[");
    snprintf(other, sizeof other, "%.*s1,2,3],\"work\":5}\n", (int)(cut - line1), line1);
    snprintf(bad1, sizeof bad1, "%.*s\"x\"%s\n", (int)(cut - line1), line1, strchr(cut, ','));
    snprintf(bad2, sizeof bad2, "%.*s1]}\n", (int)(cut - line1), line1);
    FILE *fp = fopen(path, "ab");
    fputs(other, fp);
    fputs(bad1, fp);
    fputs(bad2, fp);
    fclose(fp);
    free(line1);
    free(text);
    r = open_ok("wl1");
    assert_int_equal(srch_records_count(r), 3);
    assert_int_equal(srch_records_ncorrupt(r), 2);
    const SrchRecord *x = srch_records_at(r, 0);
    assert_int_equal(x->nfeat, SRCH_NFEAT);
    for (int i = 0; i < SRCH_NFEAT; i++)
        assert_true(i == 3 ? isnan(x->features[i]) : x->features[i] == f[i]);
    assert_true(x->work == 3e9);
    assert_int_equal(srch_records_at(r, 1)->nfeat, 0);
    assert_int_equal(srch_records_at(r, 2)->nfeat, 0); /* three features: another dcc's */
    assert_non_null(strstr(srch_records_warning(r, 0)->msg, "features"));
    assert_non_null(strstr(srch_records_warning(r, 1)->msg, "work"));
    srch_records_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_kinds_and_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_features, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_finds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_over_budget_kernels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fuse_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lowering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_after_cut_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_while_appending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_appends_and_opens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_records_fast, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
