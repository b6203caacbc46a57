/* What ptxas says of a kernel: registers per thread and spills, for the
 * GPU cost model (a feature of the learned part, and the register limit on
 * blocks per SM in the analytic part). Runs `ptxas -v` from the CUDA
 * toolkit when it is installed ($DC_PTXAS, else /usr/local/cuda/bin/ptxas);
 * without it the information is simply absent.
 *
 * ptxas -v prints, per entry, on stderr:
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_80'
 *   ptxas info    : Function properties for NAME
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, ...
 * Each field is read by its own token: they are optional and unordered.
 */
#include "dietcode/search.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *srch_ptxas_path(void)
{
    const char *p = getenv("DC_PTXAS");
    if (!p || !*p)
        p = "/usr/local/cuda/bin/ptxas";
    return access(p, X_OK) == 0 ? p : NULL;
}

/* The number before `word` on line, or -1. */
static long number_before(const char *line, const char *word)
{
    const char *w = strstr(line, word);
    if (!w)
        return -1;
    const char *p = w;
    while (p > line && p[-1] == ' ')
        p--;
    const char *e = p;
    while (p > line && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p < e ? strtol(p, NULL, 10) : -1;
}

bool srch_ptxas_info(const char *ptx, const char *arch, const char *kernel, SrchPtxInfo *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *ptxas = srch_ptxas_path();
    if (!ptxas) {
        srch_seterr(err, errlen, "ptxas not found");
        return false;
    }
    char in[] = "/tmp/dc_ptx_XXXXXX", log[] = "/tmp/dc_ptxlog_XXXXXX";
    int fi = mkstemp(in), fl = fi >= 0 ? mkstemp(log) : -1;
    bool ok = fi >= 0 && fl >= 0;
    size_t n = strlen(ptx);
    ok = ok && write(fi, ptx, n) == (ssize_t)n;
    if (fi >= 0)
        close(fi);
    char archarg[32];
    snprintf(archarg, sizeof archarg, "-arch=%s", arch ? arch : "sm_80");
    char *argv[] = {(char *)ptxas, archarg, "-v", in, "-o", "/dev/null", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (ok) {
        posix_spawn_file_actions_adddup2(&fa, fl, 1);
        posix_spawn_file_actions_adddup2(&fa, fl, 2);
    }
    pid_t pid;
    int status = 0;
    ok = ok && posix_spawn(&pid, ptxas, &fa, NULL, argv, environ) == 0 &&
         waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    posix_spawn_file_actions_destroy(&fa);
    FILE *f = ok ? fopen(log, "r") : NULL;
    bool mine = false, found = false;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        const char *q = strstr(line, "entry function '");
        if (q) {
            q += strlen("entry function '");
            size_t kl = strlen(kernel);
            mine = strncmp(q, kernel, kl) == 0 && q[kl] == '\'';
            found |= mine;
            continue;
        }
        long v, spills = 0;
        if ((v = number_before(line, "bytes spill stores")) >= 0)
            spills += v;
        if ((v = number_before(line, "bytes spill loads")) >= 0)
            spills += v;
        out->stage_spill_bytes += (int)spills; /* every entry's */
        if (!mine)
            continue;
        out->spill_bytes += (int)spills;
        if ((v = number_before(line, "registers")) >= 0)
            out->regs = (int)v;
        if ((v = number_before(line, "bytes smem")) >= 0)
            out->smem_bytes = (int)v;
    }
    if (f)
        fclose(f);
    if (fl >= 0)
        close(fl);
    unlink(in);
    unlink(log);
    if (!ok || !found) {
        srch_seterr(err, errlen, ok ? "ptxas did not report kernel %s" : "ptxas failed on %s",
                    kernel);
        return false;
    }
    return true;
}
