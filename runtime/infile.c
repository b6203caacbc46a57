/* Files read: the one rule for every file dcc and libdcrt read (a program,
 * an .npy input, a records file, a shapes file).
 *
 * Only regular files are read. The path is opened with O_NONBLOCK, so a
 * FIFO with no writer (or a device that would wait) cannot hang the open;
 * what fstat then says is not a regular file is refused with its kind
 * named, and only a regular file gets its descriptor back in blocking mode
 * and a stdio stream. Errors start with the path as given and say why.
 */
#include "dietcode/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "of another kind";
}

/* NULL: closes fd (when >= 0), leaves e in errno and, in err, the path
 * followed by what. */
static FILE *refuse(int fd, int e, const char *path, const char *what, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", path, what);
    if (fd >= 0)
        close(fd);
    errno = e;
    return NULL;
}

FILE *rt_open_read(const char *path, char *err, size_t errlen)
{
    char why[128];
    if (!path)
        return refuse(-1, EINVAL, "(null)", "no path given", err, errlen);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    FILE *f = NULL;
    if (fd < 0) {
        int e = errno;
        snprintf(why, sizeof why, "cannot open: %s", strerror(e));
        return refuse(fd, e, path, why, err, errlen);
    }
    bool statted = fstat(fd, &st) == 0;
    if (statted && !S_ISREG(st.st_mode)) {
        snprintf(why, sizeof why, "not a regular file (it is %s)", kind_of(st.st_mode));
        return refuse(fd, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, path, why, err, errlen);
    }
    if (!statted || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        !(f = fdopen(fd, "rb"))) {
        int e = errno;
        snprintf(why, sizeof why, "cannot read: %s", strerror(e));
        return refuse(fd, e, path, why, err, errlen);
    }
    return f;
}
