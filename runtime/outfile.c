/* Output files written all or nothing (the rule for every file dcc and
 * libdcrt write; see dietcode/runtime.h).
 *
 * A path is resolved first: symlinks are followed, so their targets are
 * written and the links stay. An existing regular file, or a new one, gets
 * a temporary beside its resolved path, written and flushed to disk
 * (fsync) at once; the temporaries are renamed over their targets only in
 * rt_out_commit, after every output was written, so a failure before that
 * leaves every path as it was. A path that exists and is not a regular
 * file (a device, a FIFO, /dev/stdout on a pipe) is written in place at
 * commit time, never replaced; such outputs are outside the guarantee.
 * Outputs that resolve to an input, to each other or to a directory are
 * refused.
 *
 * The renames are one at a time (POSIX has no rename of several files at
 * once), so rt_out_commit first keeps each existing target as a backup (a
 * hard link, TARGET.bak.PID.X beside it: no copy); when a rename fails,
 * the targets already renamed over are put back from their backups (new
 * ones removed) before it returns, and so does rt_out_abandon, from a
 * signal handler, when a command is interrupted in the middle. The
 * backups go once every rename is done, and the directories are flushed.
 * What remains outside the guarantee: a process killed outright (SIGKILL,
 * power loss) between two renames leaves some outputs new and the rest
 * old, with the old contents of the renamed ones still in their backups;
 * and a file system without hard links gets no backups, so a failed
 * rename there cannot put back the outputs renamed before it.
 */
#include "dietcode/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct OutFile {
    char *path;          /* as given: messages name it */
    char *target;        /* resolved */
    char *tmp;           /* regular: the temporary beside target, until commit */
    char *backup;        /* during commit: a hard link to target's old contents */
    volatile sig_atomic_t renamed; /* during commit: tmp is now target */
    bool in_place;       /* exists and is not a regular file, or is an open descriptor */
    int fd;              /* /dev/stdout, /dev/fd/N...: that descriptor; else -1 */
    bool exists;
    dev_t dev;
    ino_t ino;
    const void *head, *data; /* in place: written at commit */
    size_t hlen, len;
} OutFile;

typedef struct FileId {
    dev_t dev;
    ino_t ino;
    const char *path;
} FileId;

struct RtOutFiles {
    OutFile *f;
    int n, cap;
    FileId *in;
    int nin, incap;
};

__attribute__((format(printf, 4, 5))) static int fail(const char *path, char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    if (!err || !errlen)
        return -1;
    int k = snprintf(err, errlen, "%s: ", path);
    if (k >= 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

RtOutFiles *rt_out_new(void)
{
    return calloc(1, sizeof(RtOutFiles));
}

static bool grow(void **p, int *cap, int n, size_t size)
{
    if (n < *cap)
        return true;
    int c = *cap ? 2 * *cap : 4;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

int rt_out_input(RtOutFiles *o, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0; /* nothing there: no output can be it */
    if (!grow((void **)&o->in, &o->incap, o->nin, sizeof *o->in))
        return -1;
    o->in[o->nin++] = (FileId){st.st_dev, st.st_ino, path};
    return 0;
}

/* The input st is, or NULL. */
static const char *input_of(const RtOutFiles *o, const struct stat *st)
{
    for (int i = 0; S_ISREG(st->st_mode) && i < o->nin; i++)
        if (o->in[i].dev == st->st_dev && o->in[i].ino == st->st_ino)
            return o->in[i].path;
    return NULL;
}

#define IS_INPUT "is also an input of this command (%s): refusing to overwrite it"

int rt_out_check(const RtOutFiles *o, const char *path, char *err, size_t errlen)
{
    struct stat st;
    const char *in = stat(path, &st) == 0 ? input_of(o, &st) : NULL;
    return in ? fail(path, err, errlen, IS_INPUT, in) : 0;
}

static char *join(const char *dir, size_t dlen, const char *base)
{
    size_t blen = strlen(base);
    char *s = malloc(dlen + blen + 2);
    if (!s)
        return NULL;
    memcpy(s, dir, dlen);
    size_t k = dlen;
    if (k == 0 || s[k - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, base, blen + 1);
    return s;
}

/* The file path names after following every symlink, including a dangling
 * last one (its target is created); the directories are made absolute.
 * NULL with errno set when a directory does not exist or links loop. */
static char *resolve(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) == 0 && S_ISLNK(ls.st_mode)) {
            char link[PATH_MAX];
            ssize_t n = readlink(cur, link, sizeof link - 1);
            if (n < 0) {
                free(cur);
                return NULL;
            }
            link[n] = 0;
            const char *slash = strrchr(cur, '/');
            char *next = link[0] == '/' || !slash ? strdup(link)
                                                  : join(cur, (size_t)(slash - cur) + 1, link);
            free(cur);
            cur = next;
            continue;
        }
        const char *slash = strrchr(cur, '/');
        const char *base = slash ? slash + 1 : cur;
        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
            free(cur);
            errno = EISDIR;
            return NULL;
        }
        char *dir = slash ? strndup(cur, slash == cur ? 1 : (size_t)(slash - cur)) : strdup(".");
        char *rdir = dir ? realpath(dir, NULL) : NULL;
        char *full = rdir ? join(rdir, strlen(rdir), base) : NULL;
        int e = errno;
        free(dir);
        free(rdir);
        free(cur);
        errno = e;
        return full;
    }
    free(cur);
    errno = ELOOP;
    return NULL;
}

/* N for - and /dev/stdout (1), /dev/stderr (2), /dev/fd/N and
 * /proc/self/fd/N: those name a descriptor this process already has open,
 * which is written where it stands (appending to a file the shell opened
 * with >>, say); else -1. */
static int descriptor_of(const char *path)
{
    if (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdout") == 0)
        return 1;
    if (strcmp(path, "/dev/stderr") == 0)
        return 2;
    const char *num = strncmp(path, "/dev/fd/", 8) == 0         ? path + 8
                      : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14
                                                                 : NULL;
    if (!num || *num < '0' || *num > '9' || strlen(num) > 6)
        return -1;
    char *end;
    long n = strtol(num, &end, 10);
    return *end || fcntl((int)n, F_GETFD) < 0 ? -1 : (int)n;
}

bool rt_out_is_stream(const char *path)
{
    struct stat st; /* stat follows symlinks: a link to a device is one */
    return descriptor_of(path) >= 0 ||
           (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode));
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Makes a new file beside target named TARGET.KIND.PID.X (when that name
 * would be too long for the file system, DIR/.dcc.KIND.PID.X), trying
 * names until make (open exclusively, or link) does not fail with EEXIST;
 * its result, and the name in *name (malloc'd; NULL when out of memory). */
static int beside(const char *target, const char *kind, char **name,
                  int (*make)(const char *name, const void *ud), const void *ud)
{
    size_t cap = strlen(target) + 48;
    if (!(*name = malloc(cap)))
        return -1;
    const char *slash = strrchr(target, '/');
    bool short_name = strlen(slash ? slash + 1 : target) > 200;
    int dlen = slash ? (int)(slash - target) + 1 : 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (unsigned long i = 0; i < 100; i++) {
        unsigned long x = ((unsigned long)ts.tv_sec << 30 ^ (unsigned long)ts.tv_nsec) + i;
        if (short_name)
            snprintf(*name, cap, "%.*s.dcc.%s.%d.%lx", dlen, target, kind, (int)getpid(), x);
        else
            snprintf(*name, cap, "%s.%s.%d.%lx", target, kind, (int)getpid(), x);
        int rc = make(*name, ud);
        if (rc >= 0 || errno != EEXIST)
            return rc;
    }
    return -1;
}

static int create(const char *name, const void *mode)
{
    return open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, *(const mode_t *)mode);
}

static int hard_link(const char *name, const void *target) { return link(target, name); }

/* Creates TARGET.tmp.PID.X exclusively with mode (less the umask). */
static int open_temp(const char *target, char **tmp, mode_t mode)
{
    return beside(target, "tmp", tmp, create, &mode);
}

int rt_out_add(RtOutFiles *o, const char *path, const void *head, size_t hlen, const void *data,
               size_t len, char *err, size_t errlen)
{
    if (!*path)
        return fail("''", err, errlen, "an empty output path");
    if (!grow((void **)&o->f, &o->cap, o->n, sizeof *o->f))
        return fail(path, err, errlen, "out of memory");
    OutFile f = {.path = strdup(path), .fd = descriptor_of(path), .head = head, .hlen = hlen,
                 .data = data, .len = len};
    struct stat st;
    bool have = f.fd >= 0 ? fstat(f.fd, &st) == 0 : stat(path, &st) == 0;
    if (!f.path) {
        return fail(path, err, errlen, "out of memory");
    } else if (f.fd >= 0 || (have && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
        /* a descriptor, a device or a FIFO: written in place at commit */
        f.in_place = true;
        f.target = strdup(path);
        f.exists = have;
    } else if (!(f.target = resolve(path))) {
        int e = errno;
        free(f.path);
        return fail(path, err, errlen, "cannot write: %s", strerror(e));
    } else {
        f.exists = stat(f.target, &st) == 0;
        f.in_place = f.exists && !S_ISREG(st.st_mode); /* a link to a device */
    }
    const char *why = NULL, *other = NULL;
    if (f.exists) {
        f.dev = st.st_dev;
        f.ino = st.st_ino;
        if (S_ISDIR(st.st_mode))
            why = "is a directory";
        if (!why && (other = input_of(o, &st)))
            why = IS_INPUT;
    }
    /* one file named twice, also through a descriptor (> o.txt and o.txt) */
    for (int i = 0; !why && i < o->n; i++)
        if (f.exists ? o->f[i].exists && o->f[i].dev == f.dev && o->f[i].ino == f.ino
                     : !o->f[i].exists && strcmp(o->f[i].target, f.target) == 0)
            why = "is the same file as the output %s", other = o->f[i].path;
    if (!why && !f.in_place) {
        int fd = open_temp(f.target, &f.tmp, f.exists ? st.st_mode & 07777 : 0666);
        bool ok = fd >= 0;
        if (ok && f.exists)
            (void)fchmod(fd, st.st_mode & 07777); /* the replaced file's mode, umask aside */
        ok = ok && write_all(fd, head, hlen) && write_all(fd, data, len) && fsync(fd) == 0;
        int e = errno;
        if (fd >= 0 && close(fd) != 0 && ok)
            ok = false, e = errno;
        if (!ok) {
            if (fd >= 0)
                unlink(f.tmp);
            free(f.tmp);
            free(f.target);
            free(f.path);
            return fail(path, err, errlen, "cannot write: %s", strerror(e));
        }
    }
    if (why) {
        free(f.target);
        free(f.path);
        return fail(path, err, errlen, why, other);
    }
    o->f[o->n++] = f;
    return 0;
}

static void remove_temps(RtOutFiles *o)
{
    for (int i = 0; i < o->n; i++)
        if (o->f[i].tmp) {
            unlink(o->f[i].tmp);
            free(o->f[i].tmp);
            o->f[i].tmp = NULL;
        }
}

/* Puts back every target renamed over (its backup renamed back, a new one
 * removed) and removes the backups; async-signal-safe. */
static void roll_back(const RtOutFiles *o)
{
    for (int i = 0; i < o->n; i++) {
        const OutFile *f = &o->f[i];
        if (f->renamed && f->backup)
            rename(f->backup, f->target);
        else if (f->renamed && !f->exists)
            unlink(f->target);
        else if (f->backup)
            unlink(f->backup);
    }
}

static void forget_backups(RtOutFiles *o)
{
    for (int i = 0; i < o->n; i++) {
        free(o->f[i].backup);
        o->f[i].backup = NULL;
        o->f[i].renamed = 0;
    }
}

/* fsync of the directory path names a file in, so its renames last. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int rt_out_commit(RtOutFiles *o, char *err, size_t errlen)
{
    for (int i = 0; i < o->n; i++) {
        OutFile *f = &o->f[i];
        if (!f->in_place)
            continue;
        int fd = f->fd >= 0 ? f->fd : open(f->target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        struct stat st;
        bool ok = fd >= 0;
        int e = errno;
        if (ok && f->fd < 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
            ok = false, e = EEXIST; /* became a regular file since rt_out_add */
        ok = ok && write_all(fd, f->head, f->hlen) && write_all(fd, f->data, f->len);
        if (!ok && e != EEXIST)
            e = errno;
        if (fd >= 0 && f->fd < 0 && close(fd) != 0 && ok)
            ok = false, e = errno;
        if (!ok) {
            remove_temps(o);
            return fail(f->path, err, errlen, "cannot write: %s", strerror(e));
        }
    }
    /* the old contents kept (a file system without links keeps none) */
    for (int i = 0; i < o->n; i++) {
        OutFile *f = &o->f[i];
        char *name = NULL;
        if (f->tmp && f->exists && beside(f->target, "bak", &name, hard_link, f->target) == 0)
            f->backup = name;
        else
            free(name);
    }
    for (int i = 0; i < o->n; i++) {
        OutFile *f = &o->f[i];
        if (f->tmp && rename(f->tmp, f->target) != 0) {
            int e = errno;
            roll_back(o);
            forget_backups(o);
            remove_temps(o);
            return fail(f->path, err, errlen, "cannot write: %s", strerror(e));
        }
        if (f->tmp)
            f->renamed = 1;
    }
    for (int i = 0; i < o->n; i++) {
        OutFile *f = &o->f[i];
        if (f->backup)
            unlink(f->backup);
        if (f->renamed)
            sync_dir(f->target);
        free(f->tmp);
        f->tmp = NULL;
    }
    forget_backups(o);
    return 0;
}

void rt_out_abandon(const RtOutFiles *o)
{
    if (!o)
        return;
    roll_back(o);
    for (int i = 0; i < o->n; i++)
        if (o->f[i].tmp && !o->f[i].renamed)
            unlink(o->f[i].tmp);
}

void rt_out_free(RtOutFiles *o)
{
    if (!o)
        return;
    remove_temps(o);
    for (int i = 0; i < o->n; i++) {
        free(o->f[i].path);
        free(o->f[i].target);
    }
    free(o->f);
    free(o->in);
    free(o);
}
