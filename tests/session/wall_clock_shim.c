/* A preload library that steps one process tree's wall clock, the machine's clock left alone:
 * clock_gettime(CLOCK_REALTIME*) and gettimeofday() answer the real time plus the seconds written
 * in the file named by WALL_CLOCK_OFFSET_FILE (re-read at most every 20 ms); every other clock
 * (CLOCK_MONOTONIC, CLOCK_BOOTTIME) and every sleep are untouched, as on a host whose NTP daemon
 * steps the time. Built by tests/session/wall_clock.py with the machine's C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real;
    if (!real) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    return real;
}

static long long offset_ns(void) {
    static long long cached, read_at = -1;
    struct timespec now;
    real_clock_gettime()(CLOCK_MONOTONIC, &now);
    long long mono = now.tv_sec * 1000000000LL + now.tv_nsec;
    if (read_at >= 0 && mono - read_at < 20000000LL) return __atomic_load_n(&cached, __ATOMIC_RELAXED);
    const char *path = getenv("WALL_CLOCK_OFFSET_FILE");
    double seconds = 0;
    FILE *file = path ? fopen(path, "r") : NULL;
    if (file) {
        if (fscanf(file, "%lf", &seconds) != 1) seconds = 0;
        fclose(file);
    }
    __atomic_store_n(&cached, (long long)(seconds * 1e9), __ATOMIC_RELAXED);
    read_at = mono;
    return (long long)(seconds * 1e9);
}

static void shift(struct timespec *ts) {
    long long ns = ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int result = real_clock_gettime()(id, ts);
    if (result == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
