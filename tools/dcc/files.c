/* dcc's output files.
 *
 * Every file a command writes goes through one RtOutFiles (the rule in
 * runtime/outfile.c): written to temporaries, renamed only when all are
 * complete; symlinks written through, devices and FIFOs in place; an
 * output that is one of the command's inputs refused. */
#include "dcc.h"

#include <errno.h>
#include <signal.h>

/* The outputs being written, for the signal handler to remove their
 * temporaries (one command writes one set at a time). */
static RtOutFiles *volatile live_outputs;

void on_fatal_signal(int sig)
{
    rt_out_abandon(live_outputs);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Every file the command reads (the program, records but where tune
 * appends to them, --input, --shapes-file, --warm-start), as inputs no
 * output may be. */
RtOutFiles *outputs_new(const Args *a, bool records_in)
{
    RtOutFiles *o = rt_out_new();
    if (!o)
        fail("out of memory");
    const char *read[] = {a->file, records_in ? a->val[O_RECORDS] : NULL, a->val[O_SHAPES_FILE],
                          a->val[O_WARM]};
    for (size_t i = 0; i < sizeof read / sizeof *read; i++)
        if (read[i])
            rt_out_input(o, read[i]);
    for (int i = 0; i < a->named[O_INPUT].n; i++)
        rt_out_input(o, a->named[O_INPUT].a[i].value);
    return o;
}

RtOutFiles *outputs_begin(const Args *a)
{
    RtOutFiles *o = outputs_new(a, true);
    live_outputs = o;
    return o;
}

void outputs_add(RtOutFiles *o, const char *path, const void *head, size_t hlen,
                        const void *data, size_t len)
{
    char err[1024];
    if (rt_out_add(o, path, head, hlen, data, len, err, sizeof err) != 0) {
        live_outputs = NULL;
        rt_out_free(o);
        fail("%s", err);
    }
}

void outputs_commit(RtOutFiles *o)
{
    char err[1024];
    /* what was printed comes before an output to /dev/stdout, and a
     * command whose stdout fails changes no file */
    int rc = fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
    if (rc != 0)
        snprintf(err, sizeof err, "cannot write to standard output: %s", strerror(errno));
    else
        rc = rt_out_commit(o, err, sizeof err);
    live_outputs = NULL;
    rt_out_free(o);
    if (rc != 0)
        fail("%s", err);
}

/* Writes text to path (all or nothing), or to stdout when path is NULL. */
void write_output(const Args *a, const char *path, const char *text, size_t len)
{
    if (!path) {
        fwrite(text, 1, len, stdout); /* errors: checked once, at exit */
        return;
    }
    RtOutFiles *o = outputs_begin(a);
    outputs_add(o, path, text, len, "", 0);
    outputs_commit(o);
}


/* Where the object or header goes: -o itself for one output or a stream
 * (-, a device: never a name derived from it), else the stem of -o or of
 * the program's file name with ext. */
char *aot_path(const char *out, const char *file, const char *ext, bool both)
{
    if (out && (!both || rt_out_is_stream(out)))
        return strdup(out);
    const char *src = out ? out : file;
    const char *base = out ? src : (strrchr(src, '/') ? strrchr(src, '/') + 1 : src);
    const char *slash = strrchr(base, '/');
    const char *dot = strrchr(slash ? slash + 1 : base, '.');
    size_t n = dot && dot != (slash ? slash + 1 : base) ? (size_t)(dot - base) : strlen(base);
    char *p = malloc(n + strlen(ext) + 1);
    memcpy(p, base, n);
    strcpy(p + n, ext);
    return p;
}
