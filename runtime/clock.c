/* runtime/clock.c: the monotonic clock every timing in dcc, the tuner and
 * the benchmarks reads. */
#include "dietcode/runtime.h"

#include <time.h>

double rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
