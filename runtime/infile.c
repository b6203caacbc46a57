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
#include <stdarg.h>
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

FILE *rt_open_read(const char *path, char *err, size_t errlen)
{
    if (!path) {
        if (err && errlen)
            snprintf(err, errlen, "(null): no path given");
        errno = EINVAL;
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
        close(fd);
        errno = e;
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: not a regular file (it is %s)", path, kind_of(st.st_mode));
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return NULL;
    }
    FILE *f = NULL;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
        close(fd);
        errno = e;
        return NULL;
    }
    return f;
}
