/* An LD_PRELOAD shim that steps CLOCK_REALTIME only, as NTP or a person steps a host's clock:
 * clock_gettime(CLOCK_REALTIME*), gettimeofday() and time() are offset by the whole seconds
 * written in the file named by $CLOCK_SHIM_FILE (e.g. "-3600"), read again at most every 50 ms
 * of monotonic time, so a test can step the clock of a running process. CLOCK_MONOTONIC and
 * CLOCK_BOOTTIME are untouched, as on a real host (libfaketime moves them, or breaks sleep). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real;
    if (!real)
        real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    return real;
}

static long long offset_seconds(void) {
    static long long offset;
    static struct timespec read_at;
    struct timespec now;
    real_clock_gettime()(CLOCK_MONOTONIC, &now);
    long long since = (now.tv_sec - read_at.tv_sec) * 1000000000LL + (now.tv_nsec - read_at.tv_nsec);
    if (read_at.tv_sec != 0 && since < 50000000LL)
        return offset;
    read_at = now;
    const char *path = getenv("CLOCK_SHIM_FILE");
    if (!path)
        return offset;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return offset;
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n > 0) {
        text[n] = 0;
        offset = strtoll(text, NULL, 10);
    }
    return offset;
}

static int is_realtime(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real_clock_gettime()(id, ts);
    if (rc == 0 && is_realtime(id))
        ts->tv_sec += offset_seconds();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    (void)tz;
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
