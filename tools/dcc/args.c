/* dcc's command line. Every option of every command is one row of
 * opt_table, and parse_args reads argv with it alone; dcc.h says what is
 * status 2 and what is 1. */
#include "dcc.h"

#include <errno.h>

typedef enum OptArg {
    ARG_FLAG,  /* no value; may repeat */
    ARG_TEXT,  /* one value: from choices, or one valid() accepts, when given */
    ARG_COUNT, /* one integer in lo..hi */
    ARG_NAMED, /* NAME=VALUE, repeatable with distinct names; valid() checks VALUE */
} OptArg;

typedef struct OptSpec {
    OptId id;
    const char *name;  /* --name */
    char letter;       /* -x, or 0 */
    unsigned cmds;     /* the commands that take it */
    OptArg arg;
    const char *form;  /* the value as messages show it */
    const char *choices;             /* ARG_TEXT: the values allowed, space-separated */
    bool (*valid)(const char *value); /* ARG_TEXT, ARG_NAMED: NULL accepts any */
    int64_t lo, hi;                  /* ARG_COUNT */
} OptSpec;

bool parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0 || s[0] < '0' || s[0] > '9')
        return false;
    *out = v;
    return true;
}

static bool valid_count(const char *s)
{
    int64_t v;
    return parse_int(s, &v);
}

/* milliseconds: a finite number from 0 to a million */
static bool valid_ms(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return end != s && !*end && errno == 0 && v >= 0 && v <= 1e6;
}

static bool valid_emit(const char *s)
{
    static const char *const kinds[] = {"te", "tex", "loops", "plan", "llvm", "asm", "ptx", "obj",
                                        "header", "obj,header", "header,obj", "dispatch", NULL};
    for (int i = 0; kinds[i]; i++)
        if (strcmp(s, kinds[i]) == 0)
            return true;
    return false;
}

static bool valid_pass(const char *s)
{
    for (const char *const *n = pass_names(); *n; n++)
        if (strcmp(*n, s) == 0)
            return true;
    return false;
}

static bool valid_dump(const char *s)
{
    return strcmp(s, "all") == 0 || valid_pass(s);
}

static bool valid_mk(const char *s)
{
    MicroKernel mk;
    int ns = 0;
    return pass_parse_microkernel(s, &mk, &ns);
}

static bool valid_fuse(const char *s)
{
    Fuse f;
    return pass_parse_fuse(s, &f);
}

/* LO..HI[:COUNT] (--shapes), into r when r is non-NULL. */
bool parse_range(const char *s, int64_t *lo, int64_t *hi, int64_t *count)
{
    const char *dots = strstr(s, "..");
    if (!dots)
        return false;
    char buf[64];
    const char *colon = strchr(dots, ':');
    size_t n = (size_t)(dots - s);
    bool ok = n < sizeof buf;
    if (ok) {
        memcpy(buf, s, n);
        buf[n] = 0;
        ok = parse_int(buf, lo);
    }
    n = colon ? (size_t)(colon - dots - 2) : strlen(dots + 2);
    if (ok && n < sizeof buf) {
        memcpy(buf, dots + 2, n);
        buf[n] = 0;
        ok = parse_int(buf, hi);
    } else {
        ok = false;
    }
    *count = 0;
    if (ok && colon)
        ok = parse_int(colon + 1, count) && *count >= 1 && *count <= 4096;
    return ok;
}

static bool valid_range(const char *s)
{
    int64_t lo, hi, count;
    return parse_range(s, &lo, &hi, &count) && lo <= hi;
}

static bool valid_dim_range(const char *s)
{
    int64_t lo, hi, count;
    return parse_range(s, &lo, &hi, &count) && count == 0 && lo >= 1 && lo <= hi &&
           hi <= INT32_MAX;
}

enum { CMD_ALL = CMD_COMPILE | CMD_RUN | CMD_TUNE | CMD_REPORT };

static const OptSpec opt_table[] = {
    {O_EMIT, "emit", 0, CMD_COMPILE, ARG_TEXT, "KIND[,KIND]", NULL, valid_emit, 0, 0},
    {O_OUT, "output", 'o', CMD_COMPILE | CMD_REPORT, ARG_TEXT, "OUT", NULL, NULL, 0, 0},
    {O_DUMP, "dump-after", 0, CMD_COMPILE, ARG_TEXT, "PASS|all", NULL, valid_dump, 0, 0},
    {O_STOP, "stop-after", 0, CMD_COMPILE, ARG_TEXT, "PASS", NULL, valid_pass, 0, 0},
    {O_VERIFY, "verify-each", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TIME, "time-passes", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_COMPILE, ARG_TEXT, "TARGET", "cpu nvptx", NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_RUN, ARG_TEXT, "TARGET", "cpu reference loops emu cuda", NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_TUNE, ARG_TEXT, "TARGET", "cpu cuda model", NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_COMPILE, ARG_TEXT, "ARCH[,ARCH]", NULL, NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_TUNE, ARG_TEXT, "sm_XX", "sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a",
     NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_RUN, ARG_TEXT, "sm_XX", "sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a",
     NULL, 0, 0},
    {O_NOLIBDEV, "no-libdevice", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_RECORDS, "records", 0, CMD_ALL, ARG_TEXT, "FILE", NULL, NULL, 0, 0},
    {O_SET, "set", 0, CMD_COMPILE | CMD_RUN, ARG_NAMED, "NAME=INTEGER", NULL, valid_count, 0, 0},
    {O_MK, "mk", 0, CMD_COMPILE | CMD_RUN, ARG_NAMED, "NAME=MICROKERNEL", NULL, valid_mk, 0, 0},
    {O_INPUT, "input", 0, CMD_RUN, ARG_NAMED, "NAME=PATH.npy", NULL, NULL, 0, 0},
    {O_OUTPUT, "output", 0, CMD_RUN, ARG_NAMED, "NAME=PATH.npy", NULL, NULL, 0, 0},
    {O_SEED, "seed", 0, CMD_RUN | CMD_TUNE, ARG_COUNT, "N", NULL, NULL, 0, INT64_MAX},
    {O_CHECK, "check", 0, CMD_RUN, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_BENCH, "bench", 0, CMD_RUN, ARG_COUNT, "N", NULL, NULL, 1, 1000000},
    {O_PROFILE, "profile", 0, CMD_RUN, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TRIALS, "trials", 0, CMD_TUNE, ARG_COUNT, "N", NULL, NULL, 1, 1000000},
    {O_SHAPES, "shapes", 0, CMD_TUNE, ARG_NAMED, "NAME=LO..HI[:COUNT], LO <= HI", NULL, valid_range, 0, 0},
    {O_SHAPES_FILE, "shapes-file", 0, CMD_TUNE, ARG_TEXT, "FILE.json", NULL, NULL, 0, 0},
    {O_PER_SHAPE, "per-shape", 0, CMD_TUNE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_WARM, "warm-start", 0, CMD_TUNE, ARG_TEXT, "FILE", NULL, NULL, 0, 0},
    {O_ATOMIC, "atomic-split", 0, CMD_TUNE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_CONTESTS, "contests", 0, CMD_TUNE, ARG_COUNT, "N", NULL, NULL, 0, 1000000},
    {O_PROBE, "probe-ms", 0, CMD_TUNE, ARG_TEXT, "time in ms", NULL, valid_ms, 0, 0},
    {O_FUSE, "fuse", 0, CMD_COMPILE | CMD_RUN | CMD_TUNE, ARG_NAMED, "NAME=inline|materialize",
     NULL, valid_fuse, 0, 0},
    {O_FPCONTRACT, "fp-contract", 0, CMD_COMPILE | CMD_RUN | CMD_TUNE, ARG_TEXT, "on|off",
     "on off", NULL, 0, 0},
    {O_DIMS, "dims", 0, CMD_ALL, ARG_NAMED, "NAME=LO..HI[,NAME=LO..HI...], 1 <= LO <= HI", NULL,
     valid_dim_range, 0, 0},
};
enum { NSPECS = sizeof opt_table / sizeof opt_table[0] };


static const char *cmd_name(unsigned cmd)
{
    return cmd == CMD_RUN      ? "dcc run"
           : cmd == CMD_TUNE   ? "dcc tune"
           : cmd == CMD_REPORT ? "dcc report"
                               : "dcc FILE.tex";
}

/* "a, b or c" from "a b c". */
static void choices_str(char *buf, size_t n, const char *choices)
{
    size_t k = 0;
    int nwords = 0;
    for (const char *c = choices; *c; c++)
        nwords += *c != ' ' && (c == choices || c[-1] == ' ');
    int w = 0;
    for (const char *c = choices; *c && k + 8 < n;) {
        size_t len = strcspn(c, " ");
        if (w)
            k += (size_t)snprintf(buf + k, n - k, w == nwords - 1 ? " or " : ", ");
        k += (size_t)snprintf(buf + k, n - k, "%.*s", (int)len, c);
        w++;
        c += len;
        c += *c == ' ';
    }
    buf[k < n ? k : n - 1] = 0;
}

static bool in_choices(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, " ");
        if (len == n && strncmp(c, v, n) == 0)
            return true;
        c += len;
        c += *c == ' ';
    }
    return false;
}

/* The row for --name (letter 0) or -letter of cmd; NULL when cmd has none
 * and *other gets the commands that do. */
static const OptSpec *find_opt(unsigned cmd, const char *name, size_t len, char letter,
                               unsigned *other)
{
    *other = 0;
    for (int i = 0; i < NSPECS; i++) {
        const OptSpec *s = &opt_table[i];
        bool match = letter ? s->letter == letter
                            : strlen(s->name) == len && strncmp(s->name, name, len) == 0;
        if (match && (s->cmds & cmd))
            return s;
        if (match)
            *other |= s->cmds;
    }
    return NULL;
}

static void store_opt(Args *a, const OptSpec *s, const char *shown, const char *v)
{
    char expected[256];
    if (s->arg == ARG_FLAG) {
        a->val[s->id] = "";
        return;
    }
    if (!*v)
        usage_error("option '%s' needs a value (%s)", shown, s->form);
    const char *comma = s->id == O_DIMS ? strchr(v, ',') : NULL;
    if (comma) { /* --dims a=1..8,b=1..512: each in turn */
        char *first = strndup(v, (size_t)(comma - v));
        store_opt(a, s, shown, first);
        NamedArgs *arr = &a->named[s->id];
        arr->a[arr->n - 1].owned = first; /* freed with the arguments */
        store_opt(a, s, shown, comma + 1);
        return;
    }
    if (s->arg == ARG_NAMED) {
        NamedArgs *arr = &a->named[s->id];
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1])
            usage_error("--%s expects %s, got '%s'", s->name, s->form, v);
        if (arr->n == MAX_ARGS)
            usage_error("too many --%s options (at most %d)", s->name, MAX_ARGS);
        for (int i = 0; i < arr->n; i++)
            if (strlen(arr->a[i].name) == (size_t)(eq - v) &&
                strncmp(arr->a[i].name, v, (size_t)(eq - v)) == 0)
                usage_error("--%s %.*s is given twice", s->name, (int)(eq - v), v);
        if (s->valid && !s->valid(eq + 1))
            usage_error("--%s expects %s, got '%s'%s", s->name, s->form, v,
                        s->id == O_MK ? " (a micro-kernel as --emit=loops prints it, e.g. "
                                        "'threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4')"
                                      : "");
        arr->a[arr->n].name = strndup(v, (size_t)(eq - v));
        arr->a[arr->n++].value = eq + 1;
        return;
    }
    if (a->val[s->id])
        usage_error("option '%s' is given twice ('%s' and '%s')", shown, a->val[s->id], v);
    if (s->arg == ARG_COUNT) {
        if (!parse_int(v, &a->num[s->id]) || a->num[s->id] < s->lo || a->num[s->id] > s->hi) {
            if (s->hi == INT64_MAX)
                usage_error("--%s expects a non-negative integer, got '%s'", s->name, v);
            usage_error("--%s expects a count from %lld to %lld, got '%s'", s->name,
                        (long long)s->lo, (long long)s->hi, v);
        }
    } else if (s->choices && !in_choices(s->choices, v)) {
        choices_str(expected, sizeof expected, s->choices);
        usage_error("unknown --%s '%s' for %s (expected %s)", s->name, v, cmd_name(a->cmd),
                    expected);
    } else if (s->valid && !s->valid(v)) {
        usage_error("--%s: '%s' is not a valid %s", s->name, v, s->form);
    }
    a->val[s->id] = v;
}

Args parse_args(unsigned cmd, int argc, char **argv)
{
    Args a = {.cmd = cmd};
    bool only_files = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_files || arg[0] != '-' || !arg[1]) {
            if (a.file)
                usage_error("more than one input file ('%s' and '%s')", a.file, arg);
            a.file = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_files = true;
            continue;
        }
        bool is_long = arg[1] == '-';
        const char *name = arg + (is_long ? 2 : 1);
        const char *eq = is_long ? strchr(name, '=') : NULL;
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        char letter = is_long ? 0 : name[0];
        unsigned other;
        const OptSpec *s = find_opt(cmd, name, len, letter, &other);
        char shown[64];
        snprintf(shown, sizeof shown, "%s%.*s", is_long ? "--" : "-", is_long ? (int)len : 1,
                 name);
        if (!s && cmd == CMD_RUN && letter == 'o')
            usage_error("'-o' is not an option of dcc run: write outputs with --output "
                        "NAME=PATH.npy");
        if (!s && other) {
            char which[64] = "";
            for (unsigned c = 1; c <= CMD_REPORT; c <<= 1)
                if (other & c)
                    snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s",
                             which[0] ? " and " : "", cmd_name(c));
            usage_error("option '%s' is for %s, not %s", shown, which, cmd_name(cmd));
        }
        if (!s)
            usage_error("unknown option '%s'", shown);
        const char *v = NULL;
        if (s->arg == ARG_FLAG) {
            if (eq || (!is_long && name[1]))
                usage_error("option '%s' takes no value", shown);
        } else if (eq) {
            v = eq + 1;
        } else if (!is_long && name[1]) {
            v = name + 1; /* -oFILE */
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            usage_error("option '%s' needs a value (%s)", shown, s->form);
        }
        store_opt(&a, s, shown, v);
    }
    if (cmd == CMD_REPORT && a.file)
        usage_error("dcc report reads no program: give the records with --records FILE");
    if (!a.file && cmd != CMD_REPORT)
        usage_error("no input file");
    return a;
}

void free_args(Args *a)
{
    for (int i = 0; i < NOPTS; i++)
        for (int j = 0; j < a->named[i].n; j++) {
            free((char *)a->named[i].a[j].name);
            free(a->named[i].a[j].owned);
        }
}
