/* Small helpers the records file and the decision tree share: error
 * messages into a caller's buffer, and the exact-integer rule for numbers
 * read from JSON. */
#include "dietcode/search.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

bool srch_exact_int(double x, double lo, double hi)
{
    return isfinite(x) && x == floor(x) && x >= lo && x <= hi;
}

void srch_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
