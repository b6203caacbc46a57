/* What the AOT client tests share: a check of dcrt_last_error(). Include
 * it after dietcode/runtime.h or a generated header. */
#ifndef DC_TESTS_AOT_LAST_ERROR_H
#define DC_TESTS_AOT_LAST_ERROR_H

#include <stdio.h>
#include <string.h>

/* Whether dcrt_last_error() contains want, after the call `after`; says so
 * on stderr when it does not. */
static int last_error_has(const char *after, const char *want)
{
    if (strstr(dcrt_last_error(), want))
        return 1;
    fprintf(stderr, "after %s, dcrt_last_error() is \"%s\", expected it to contain \"%s\"\n",
            after, dcrt_last_error(), want);
    return 0;
}

#endif
