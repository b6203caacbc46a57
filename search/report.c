/* The report of a records file (dcc report): a self-contained SVG.
 *
 * One section per tuned stage workload (and target and arch), in the order
 * the file first mentions them. In each, one panel per dim: the latency at
 * every shape point the records hold, on a log scale, as three series:
 * what the stored dispatch tree picks there (measured), the best measured
 * by the joint search, and the per-shape baseline's best where the file
 * has it. Under the plot, one band per tree leaf: the leaf's region
 * projected on the panel's dim (for one dim, the intervals the tree cuts
 * the range into), labelled with its kernel, kN, whose micro-kernel the
 * legend spells out. Last, the tuning history: each search measurement's
 * quality (the best latency ever measured at its shape over its own) and
 * the best so far.
 *
 * Elements carry classes (series, band, axis, point) so that tests can
 * read the picture as XML.
 */
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 960, LEFT = 80, RIGHT = 20, PLOT_H = 240, LANE_H = 16, HIST_H = 160 };

typedef struct Point {
    const int64_t *dims;  /* the first record's values, in sec->names order */
    double best, baseline, dispatched; /* NAN where the records hold none */
} Point;

typedef struct Section {
    const char *workload, *target, *arch, *stage;
    int ndims;
    const char *const *names;   /* of the first record */
    Point *pts;
    int npts, cap;
    const SrchTree *tree;
} Section;

/* The length of the well-formed UTF-8 sequence at s, 0 if none. */
static int utf8_len(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
            : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 2 && s[0] < 0xc2)
        return 0; /* overlong */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* s as XML text or attribute: markup escaped, control characters and
 * bytes that are not UTF-8 (a file name, a damaged record) as U+FFFD. */
static void esc(FILE *f, const char *str)
{
    for (const unsigned char *s = (const unsigned char *)str; *s;) {
        int n = utf8_len(s);
        if (n == 0 || (n == 1 && *s < 0x20 && *s != '\t')) {
            fputs("&#xFFFD;", f);
            s++;
            continue;
        }
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fwrite(s, 1, (size_t)n, f);
        }
        s += n;
    }
}

static bool same_section(const Section *s, const SrchRecord *r)
{
    return strcmp(s->workload, r->workload) == 0 && strcmp(s->target, r->target) == 0 &&
           strcmp(s->arch, r->arch) == 0;
}

/* r's value of dim name, or -1. */
static int64_t dim_value(const SrchRecord *r, const char *name)
{
    for (int i = 0; i < r->ndims; i++)
        if (strcmp(r->dim_names[i], name) == 0)
            return r->dim_values[i];
    return -1;
}

static bool same_shape(const Section *s, const Point *p, const SrchRecord *r)
{
    if (r->ndims != s->ndims)
        return false;
    for (int i = 0; i < s->ndims; i++)
        if (dim_value(r, s->names[i]) != p->dims[i])
            return false;
    return true;
}

static Point *point_of(Section *s, const SrchRecord *r)
{
    for (int i = 0; i < s->npts; i++)
        if (same_shape(s, &s->pts[i], r))
            return &s->pts[i];
    return NULL;
}

/* The sections and their points from the records. */
static int collect(const SrchRecords *rec, Section **out)
{
    int n = 0, cap = 0;
    Section *secs = NULL;
    for (int i = 0; i < srch_records_count(rec); i++) {
        const SrchRecord *r = srch_records_at(rec, i);
        Section *s = NULL;
        for (int k = 0; k < n && !s; k++)
            if (same_section(&secs[k], r))
                s = &secs[k];
        if (!s) {
            if (n == cap) {
                cap = cap ? 2 * cap : 4;
                secs = realloc(secs, sizeof *secs * (size_t)cap);
            }
            s = &secs[n++];
            *s = (Section){r->workload, r->target, r->arch, r->stage, r->ndims, r->dim_names,
                           NULL, 0, 0, srch_records_tree(rec, r->workload)};
        }
        Point *p = point_of(s, r);
        if (!p && r->ndims == s->ndims) {
            int64_t *dims = malloc(sizeof *dims * (s->ndims > 0 ? (size_t)s->ndims : 1));
            for (int d = 0; d < s->ndims; d++)
                dims[d] = dim_value(r, s->names[d]);
            if (s->npts == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 16;
                s->pts = realloc(s->pts, sizeof *s->pts * (size_t)s->cap);
            }
            p = &s->pts[s->npts++];
            *p = (Point){dims, NAN, NAN, NAN};
        }
        if (!p)
            continue;
        double *slot = srch_record_is_baseline(r->kind) ? &p->baseline : &p->best;
        if (isnan(*slot) || r->median_ms < *slot)
            *slot = r->median_ms;
    }
    /* what the tree picks at each point, as measured */
    for (int k = 0; k < n; k++) {
        Section *s = &secs[k];
        if (!s->tree)
            continue;
        for (int i = 0; i < s->npts; i++) {
            int64_t v[SRCH_MAX_DIMS];
            bool ok = s->tree->ndims <= SRCH_MAX_DIMS;
            for (int d = 0; ok && d < s->tree->ndims; d++) {
                int j = 0;
                while (j < s->ndims && strcmp(s->names[j], s->tree->dim_names[d]) != 0)
                    j++;
                ok = j < s->ndims;
                v[d] = ok ? s->pts[i].dims[j] : 0;
            }
            if (!ok)
                continue;
            const MicroKernel *mk = &s->tree->kernels[srch_tree_predict(s->tree, v)];
            /* the joint search's measurement, else the baseline's (a tree
             * fit by --per-shape dispatches to its kernels) */
            const SrchRecord *m = srch_records_find_class(rec, s->workload, mk, s->ndims,
                                                          s->names, s->pts[i].dims, false);
            if (!m)
                m = srch_records_find_class(rec, s->workload, mk, s->ndims, s->names,
                                            s->pts[i].dims, true);
            if (m)
                s->pts[i].dispatched = m->median_ms;
        }
    }
    *out = secs;
    return n;
}

/* The region [lo, hi] of every leaf on dim d (the tree's order), from
 * [lo0, hi0]; leaf_lo and leaf_hi are indexed by node. */
static void regions(const SrchTree *t, int node, int d, int64_t lo, int64_t hi, int64_t *leaf_lo,
                    int64_t *leaf_hi)
{
    const SrchTreeNode *n = srch_tree_node(t, node);
    if (n->kind == TN_LEAF) {
        leaf_lo[node] = lo;
        leaf_hi[node] = hi;
        return;
    }
    bool on_d = n->dim == d;
    regions(t, n->then_node, d, lo, on_d && n->le < hi ? n->le : hi, leaf_lo, leaf_hi);
    regions(t, n->else_node, d, on_d && n->le + 1 > lo ? n->le + 1 : lo, hi, leaf_lo, leaf_hi);
}

typedef struct Axis {
    double x0, x1;  /* data range */
    double y0, y1;  /* log10 of the latency range */
    int top;        /* pixel row of the plot's top */
} Axis;

static double px(const Axis *a, double x)
{
    double span = a->x1 > a->x0 ? a->x1 - a->x0 : 1;
    return LEFT + (x - a->x0) / span * (W - LEFT - RIGHT);
}

static double py(const Axis *a, double ms)
{
    double span = a->y1 > a->y0 ? a->y1 - a->y0 : 1;
    return a->top + PLOT_H - (log10(ms) - a->y0) / span * PLOT_H;
}

static void axes(FILE *f, const Axis *a, const char *xname, const char *yname)
{
    fprintf(f, "<g class=\"axis x\" data-dim=\"");
    esc(f, xname);
    fprintf(f, "\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", LEFT,
            a->top + PLOT_H, W - RIGHT, a->top + PLOT_H);
    for (int i = 0; i <= 8; i++) {
        double v = a->x0 + (a->x1 - a->x0) * i / 8.0;
        long long iv = llround(v);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n", px(a, (double)iv),
                a->top + PLOT_H + 14, iv);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-weight=\"bold\">", W - RIGHT,
            a->top + PLOT_H + 28);
    esc(f, xname);
    fprintf(f, "</text></g>\n<g class=\"axis y\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"#333\"/>\n", LEFT, a->top, LEFT, a->top + PLOT_H);
    for (int e = (int)floor(a->y0); e <= (int)ceil(a->y1); e++)
        for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) { /* 1, 2, 5 */
            double ms = m * pow(10, e);
            if (log10(ms) < a->y0 - 1e-9 || log10(ms) > a->y1 + 1e-9)
                continue;
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                       "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                    LEFT, py(a, ms), W - RIGHT, py(a, ms), LEFT - 4, py(a, ms) + 4, ms);
        }
    for (int end = 0; end < 2; end++) { /* the range's ends, unless a tick is there */
        double ms = pow(10, end ? a->y1 - 0.05 : a->y0 + 0.05);
        bool near = false;
        for (int e = (int)floor(a->y0); e <= (int)ceil(a->y1); e++)
            for (int m = 1; m <= 5; m += m == 1 ? 1 : 3)
                near |= fabs(py(a, m * pow(10, e)) - py(a, ms)) < 12;
        if (!near)
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#777\">%.3g"
                       "</text>\n", LEFT - 4, py(a, ms) + 4, ms);
    }
    fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">%s"
               "</text></g>\n", a->top + PLOT_H / 2, a->top + PLOT_H / 2, yname);
}

static const char *const series_name[3] = {"dispatched", "best measured", "per-shape"};
static const char *const series_color[3] = {"#1f77b4", "#2ca02c", "#d62728"};

/* The latency panel of dim d at row *y; advances *y. */
static void panel(FILE *f, const Section *s, int d, int *y)
{
    Axis a = {INFINITY, -INFINITY, INFINITY, -INFINITY, *y};
    for (int i = 0; i < s->npts; i++) {
        const Point *p = &s->pts[i];
        a.x0 = fmin(a.x0, (double)p->dims[d]);
        a.x1 = fmax(a.x1, (double)p->dims[d]);
        double v[3] = {p->dispatched, p->best, p->baseline};
        for (int k = 0; k < 3; k++)
            if (v[k] > 0) {
                a.y0 = fmin(a.y0, log10(v[k]));
                a.y1 = fmax(a.y1, log10(v[k]));
            }
    }
    if (!(a.y0 <= a.y1))
        a.y0 = -3, a.y1 = 0;
    a.y0 -= 0.05, a.y1 += 0.05;
    fprintf(f, "<g class=\"panel\" data-dim=\"");
    esc(f, s->names[d]);
    fprintf(f, "\">\n");
    axes(f, &a, s->names[d], "latency (ms)");
    /* points in the order of the dim (then of the others) */
    int *ord = malloc(sizeof *ord * (size_t)(s->npts ? s->npts : 1));
    for (int i = 0; i < s->npts; i++)
        ord[i] = i;
    for (int i = 1; i < s->npts; i++)
        for (int j = i; j > 0 && s->pts[ord[j]].dims[d] < s->pts[ord[j - 1]].dims[d]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    int nshown = 0;
    for (int o = 0; o < 3; o++) {
        int k = (o + 1) % 3; /* best, per-shape, then the dispatch on top */
        int n = 0;
        for (int i = 0; i < s->npts; i++)
            n += (k == 0 ? s->pts[i].dispatched : k == 1 ? s->pts[i].best : s->pts[i].baseline) > 0;
        if (!n)
            continue;
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">&#9679; %s</text>\n",
                LEFT + 10 + 150 * nshown++, a.top + 12, series_color[k], series_name[k]);
        fprintf(f, "<g class=\"series\" data-series=\"%s\" fill=\"%s\" stroke=\"%s\">\n",
                series_name[k], series_color[k], series_color[k]);
        if (s->ndims == 1) { /* a line through the points */
            fprintf(f, "<polyline fill=\"none\" stroke-width=\"1.5\" points=\"");
            for (int i = 0; i < s->npts; i++) {
                const Point *p = &s->pts[ord[i]];
                double v = k == 0 ? p->dispatched : k == 1 ? p->best : p->baseline;
                if (v > 0)
                    fprintf(f, "%.1f,%.1f ", px(&a, (double)p->dims[d]), py(&a, v));
            }
            fprintf(f, "\"/>\n");
        }
        for (int i = 0; i < s->npts; i++) {
            const Point *p = &s->pts[ord[i]];
            double v = k == 0 ? p->dispatched : k == 1 ? p->best : p->baseline;
            if (v > 0)
                fprintf(f, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\"><title>%.4g "
                           "ms</title></circle>\n",
                        px(&a, (double)p->dims[d]), py(&a, v), k == 0 ? 3 : 2, v);
        }
        fprintf(f, "</g>\n");
    }
    free(ord);
    int yb = a.top + PLOT_H + 36;
    /* one band per leaf: its region on this dim */
    const SrchTree *t = s->tree;
    int td = -1;
    for (int i = 0; t && i < t->ndims; i++)
        if (strcmp(t->dim_names[i], s->names[d]) == 0)
            td = i;
    if (t) {
        int64_t *lo = calloc((size_t)t->nnodes, sizeof *lo), *hi = calloc((size_t)t->nnodes, sizeof *hi);
        regions(t, 0, td, (int64_t)a.x0, (int64_t)a.x1, lo, hi);
        int lane = 0;
        for (int k = 0; k < t->nnodes; k++) {
            const SrchTreeNode *n = srch_tree_node(t, k);
            if (n->kind != TN_LEAF)
                continue;
            double x0 = px(&a, (double)lo[k] - (a.x1 > a.x0 ? 0.5 : 0));
            double x1 = px(&a, (double)hi[k] + (a.x1 > a.x0 ? 0.5 : 0));
            x0 = fmax(x0, LEFT);
            x1 = fmin(x1, W - RIGHT);
            if (x1 < x0)
                x1 = x0;
            int yy = s->ndims == 1 ? yb : yb + lane * LANE_H;
            fprintf(f, "<rect class=\"band\" data-leaf=\"%d\" data-kernel=\"k%d\" x=\"%.1f\" "
                       "y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"hsl(%d, 55%%, 75%%)\" "
                       "stroke=\"#fff\"><title>k%d: %lld..%lld</title></rect>\n",
                    k, n->kernel, x0, yy, x1 - x0, LANE_H - 2, (n->kernel * 67) % 360, n->kernel,
                    (long long)lo[k], (long long)hi[k]);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">k%d"
                       "</text>\n", (x0 + x1) / 2, yy + LANE_H - 5, n->kernel);
            lane++;
        }
        yb += (s->ndims == 1 ? 1 : lane) * LANE_H;
        free(lo);
        free(hi);
    }
    fprintf(f, "</g>\n");
    *y = yb + 12;
}

/* The history of the joint search of s: quality of each trial and the best so far. */
static void history(FILE *f, const SrchRecords *rec, const Section *s, int *y)
{
    int n = 0, total = srch_records_count(rec);
    double *q = malloc(sizeof *q * (size_t)(total ? total : 1));
    for (int i = 0; i < total; i++) {
        const SrchRecord *r = srch_records_at(rec, i);
        if (r->kind != RK_TRIAL || !same_section(s, r))
            continue;
        const Point *p = NULL;
        for (int k = 0; k < s->npts && !p; k++)
            if (same_shape(s, &s->pts[k], r))
                p = &s->pts[k];
        if (p && p->best > 0 && r->median_ms > 0)
            q[n++] = p->best / r->median_ms;
    }
    int top = *y + 14;
    fprintf(f, "<g class=\"history\"><text x=\"%d\" y=\"%d\" font-weight=\"bold\">tuning "
               "history: each search measurement's best-at-its-shape / its latency (dots), best "
               "so far (line)</text>\n", LEFT, *y + 8);
    Axis a = {0, n > 1 ? n - 1 : 1, 0, 1, top};
    fprintf(f, "<g class=\"axis x\" data-dim=\"measurement\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"#333\"/>", LEFT, top + HIST_H, W - RIGHT, top + HIST_H);
    for (int i = 0, last = -1; i <= 4; i++) {
        int v = (int)lround(a.x1 * i / 4);
        if (v != last)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>", px(&a, v),
                    top + HIST_H + 14, v);
        last = v;
    }
    fprintf(f, "</g>\n<g class=\"axis y\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"#333\"/>", LEFT, top, LEFT, top + HIST_H);
    for (int i = 0; i <= 4; i++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>", LEFT - 4,
                top + HIST_H - HIST_H * i / 4.0 + 4, i / 4.0);
    fprintf(f, "</g>\n<g class=\"series\" data-series=\"trials\" fill=\"#999\">");
    for (int i = 0; i < n; i++)
        fprintf(f, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"1.5\"/>", px(&a, i),
                top + HIST_H - HIST_H * fmin(q[i], 1));
    fprintf(f, "</g>\n<g class=\"series\" data-series=\"best so far\"><polyline fill=\"none\" "
               "stroke=\"#ff7f0e\" stroke-width=\"2\" points=\"");
    double best = 0;
    for (int i = 0; i < n; i++) {
        best = fmax(best, fmin(q[i], 1));
        fprintf(f, "%.1f,%.1f ", px(&a, i), top + HIST_H - HIST_H * best);
    }
    fprintf(f, "\"/></g></g>\n");
    free(q);
    *y = top + HIST_H + 30;
}

char *srch_report_svg(const SrchRecords *rec, const char *title, char *err, size_t errlen)
{
    Section *secs = NULL;
    int n = collect(rec, &secs);
    if (n == 0) {
        srch_seterr(err, errlen, "%s: no measurement to report", title);
        return NULL;
    }
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    int y = 30;
    for (int k = 0; k < n; k++) {
        const Section *s = &secs[k];
        fprintf(f, "<g class=\"section\" data-stage=\"");
        esc(f, s->stage);
        fprintf(f, "\" data-workload=\"");
        esc(f, s->workload);
        fprintf(f, "\">\n<text x=\"10\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">stage ",
                y + 16);
        esc(f, s->stage);
        fputs(": ", f);
        esc(f, s->target);
        fputc(' ', f);
        esc(f, s->arch);
        fprintf(f, ", %d shape point%s%s</text>\n", s->npts, s->npts == 1 ? "" : "s",
                s->tree ? "; bands: the dispatch tree's leaves" : "; no dispatch tree stored");
        y += 30;
        for (int d = 0; d < s->ndims; d++)
            panel(f, s, d, &y);
        if (s->tree) /* the kernels of the bands */
            for (int i = 0; i < s->tree->nkernels; i++) {
                if (!srch_tree_uses(s->tree, i, s->tree->nnodes))
                    continue;
                char *mk = srch_mk_str(&s->tree->kernels[i], s->tree->nspatial);
                fprintf(f, "<text class=\"kernel\" x=\"%d\" y=\"%d\" font-size=\"11\">k%d: ", LEFT,
                        y, i);
                esc(f, mk);
                fprintf(f, "</text>\n");
                free(mk);
                y += 14;
            }
        history(f, rec, s, &y);
        fprintf(f, "</g>\n");
        y += 10;
    }
    fclose(f);
    char *out = NULL;
    size_t olen = 0;
    f = open_memstream(&out, &olen);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
               "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"10\" y=\"20\" font-size=\"14\">dcc report: ", W, y, W, y);
    esc(f, title);
    fprintf(f, "</text>\n%s</svg>\n", body);
    fclose(f);
    free(body);
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < secs[k].npts; i++)
            free((void *)secs[k].pts[i].dims);
        free(secs[k].pts);
    }
    free(secs);
    return out;
}
