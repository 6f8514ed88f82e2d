/*
 * bench-watch-worker: one of tools/bench-watch's part-1 watcher processes, in C
 * (WORKER=c, the default), so that the client's own work per frame costs what a
 * native client's does. It does what worker_main + open_watchers do in the
 * Python file, without decoding protobuf: it hands every frame's payload back to
 * the Python orchestrator, which checks them (check_initial, the round checks).
 *
 * usage: bench-watch-worker SOCKET COUNT ROUND_TIMEOUT_S OPEN_TIMEOUT_S FRAME_HEX [PARENT_PID]
 *
 *   SOCKET           groserd's Unix socket
 *   COUNT            watcher connections to open
 *   ROUND_TIMEOUT_S  how long a round waits for the frames (seconds, may be fractional)
 *   OPEN_TIMEOUT_S   how long opening the connections and reading their initial frames may take
 *   FRAME_HEX        the whole Watch request frame (length prefix included), in hex
 *   PARENT_PID       exit at once if our parent is no longer this process
 *
 * Opening, as open_watchers: connections in chunks of 500, each sent FRAME;
 * every connection's first frame is its initial frame. A connection whose
 * connect or send fails, that is closed before its initial frame, or whose
 * initial frame does not come within OPEN_TIMEOUT_S is an error (counted; the
 * first 5 messages are reported). If no connection at all could be opened the
 * worker exits 1 with the first error (a wrong socket path, groserd gone).
 *
 * Frames: a 4-byte big-endian payload length, then the payload (take_frame in
 * tools/bench-watch); a frame longer than MAX_FRAME is an error.
 *
 * Control channel. Commands on stdin, one a line:
 *   arm R            start round R: answer "armed", then read until every live
 *                    connection has a frame or ROUND_TIMEOUT_S has passed, then
 *                    report the round
 *   drop I J ...     close these connections (their initial frame failed the
 *                    orchestrator's check); the others keep their order, and
 *                    slot numbers are positions in that order; answered "dropped"
 *   quit             exit 0 (also accepted during a round)
 * EOF on stdin: exit 1 (our parent is gone).
 *
 * Records on stdout: u32 length of what follows (tag included), a one-byte tag,
 * then the body; integers big-endian, times int64 CLOCK_MONOTONIC nanoseconds:
 *   'I' initial frame   u32 index, payload (the rest)
 *   'R' ready           u32 initial frames read, u32 errors, u32 n shown,
 *                       n times (u32 length, message)
 *   'D' dropped         u32 connections left
 *   'A' armed           u32 round, u32 strays (frames read outside a round since the last arm)
 *   'S' round           u32 round, u32 n slots, u32 extras, i64 busy ns, u32 wakes,
 *                       u32 dead, then n slots: u8 0 (no frame) or u8 1, i64 t_wake,
 *                       i64 t_read, u32 payload length, payload
 * Timing as worker_main: t_wake right after epoll_wait returns, t_read right
 * after the recv that completed the frame; busy sums, over the round's
 * wake-ups, t_wake to the end of that wake-up's work; wakes counts them.
 * Epoll is level-triggered; a ready socket is read until a recv returns less
 * than the 64 KiB buffer (a Unix stream socket then has nothing more queued).
 *
 * Errors go to stderr, then exit 1. The worker asks for SIGKILL when its
 * parent dies (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 500                    /* connections opened before their initial frames are read */
#define READ_SIZE (64 * 1024)        /* one recv, as the Python worker's recv(1 << 16) */
#define MAX_FRAME (16u << 20)        /* largest payload accepted */
#define MAX_COUNT 1000000
#define MAX_SHOWN 5                  /* error messages reported */
#define CTRL_MAX 65536               /* longest command line */
#define CTRL_ID UINT64_MAX           /* epoll data of stdin */

static const char *prog = "bench-watch-worker";

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s[%d]: ", prog, (int)getpid());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        fail("out of memory (%zu bytes)", n);
    return q;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* -- a growable byte buffer ------------------------------------------------ */

struct buf {
    unsigned char *p;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_add(struct buf *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void buf_u8(struct buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    buf_add(b, &c, 1);
}

static void buf_u32(struct buf *b, uint32_t v)
{
    unsigned char c[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
    buf_add(b, c, 4);
}

static void buf_i64(struct buf *b, int64_t v)
{
    uint64_t u = (uint64_t)v;
    buf_u32(b, (uint32_t)(u >> 32));
    buf_u32(b, (uint32_t)u);
}

static void buf_free(struct buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* -- records to the orchestrator ------------------------------------------- */

static struct buf out;          /* one record being built */

static void rec_begin(char tag)
{
    out.len = 0;
    buf_u32(&out, 0);           /* length, patched by rec_end */
    buf_u8(&out, (unsigned char)tag);
}

static void rec_end(void)
{
    size_t n = out.len - 4;
    if (n > UINT32_MAX)
        fail("a record of %zu bytes is too long", n);
    out.p[0] = (unsigned char)(n >> 24);
    out.p[1] = (unsigned char)(n >> 16);
    out.p[2] = (unsigned char)(n >> 8);
    out.p[3] = (unsigned char)n;
    size_t off = 0;
    while (off < out.len) {
        ssize_t w = write(STDOUT_FILENO, out.p + off, out.len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            fail("writing to the orchestrator: %s", strerror(errno));
        }
        off += (size_t)w;
    }
}

/* -- connections ----------------------------------------------------------- */

struct conn {
    int fd;
    int alive;
    struct buf in;              /* bytes of an incomplete frame */
    /* this round's first frame */
    int got;
    int64_t t_wake, t_read;
    size_t off, len;            /* in `arena` */
};

static struct conn *conns;      /* the open watches, in the order their initial frames came */
static size_t nconns;
static struct buf arena;        /* this round's kept payloads */

enum phase { OPENING, IDLE, ROUND };
static enum phase phase = OPENING;
static uint32_t strays, extras, wakes;
static size_t remaining;
static int64_t busy;

/* OPENING only */
static uint32_t nerrors, nshown, ninitial;
static struct buf shown;        /* u32 length + message, MAX_SHOWN of them */

static void open_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void open_error(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nerrors++;
    if (nshown < MAX_SHOWN) {
        nshown++;
        buf_u32(&shown, (uint32_t)strlen(msg));
        buf_add(&shown, msg, strlen(msg));
    }
}

/* A complete frame of connection c (OPENING: c is in `pending`, not `conns`). */
static void on_frame(struct conn *c, const unsigned char *payload, size_t n, int64_t t_wake, int64_t t_read)
{
    if (phase != ROUND) {
        strays++;
    } else if (!c->got) {
        c->got = 1;
        c->t_wake = t_wake;
        c->t_read = t_read;
        c->off = arena.len;
        c->len = n;
        buf_add(&arena, payload, n);
        remaining--;
    } else {
        extras++;
    }
}

/* Cuts complete frames off the front of `data`; returns the bytes used.
 * With `first_only`, stops after one frame (an initial frame), handing it to
 * *first instead of on_frame. */
static size_t split_frames(struct conn *c, const unsigned char *data, size_t n, int64_t t_wake,
                           int64_t t_read, int first_only, const unsigned char **first, size_t *first_len)
{
    size_t used = 0;
    while (n - used >= 4) {
        const unsigned char *h = data + used;
        uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        if (len > MAX_FRAME)
            fail("groserd sent a frame of %" PRIu32 " bytes, more than the %u this worker accepts",
                 len, MAX_FRAME);
        if (n - used - 4 < len)
            break;
        if (first_only) {
            *first = h + 4;
            *first_len = len;
            return used + 4 + len;
        }
        on_frame(c, h + 4, len, t_wake, t_read);
        used += 4 + len;
    }
    return used;
}

/* Adds what a recv brought to c's frames. */
static void take(struct conn *c, const unsigned char *data, size_t n, int64_t t_wake, int64_t t_read)
{
    if (c->in.len == 0) {
        size_t used = split_frames(c, data, n, t_wake, t_read, 0, NULL, NULL);
        if (used < n)
            buf_add(&c->in, data + used, n - used);
        return;
    }
    buf_add(&c->in, data, n);
    size_t used = split_frames(c, c->in.p, c->in.len, t_wake, t_read, 0, NULL, NULL);
    memmove(c->in.p, c->in.p + used, c->in.len - used);
    c->in.len -= used;
}

static unsigned char scratch[READ_SIZE];

/* -- opening (open_watchers) ---------------------------------------------- */

static int connect_one(const char *path, const unsigned char *frame, size_t frame_len, int64_t deadline)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        open_error("connect/send: [Errno %d] %s", e, strerror(e));
        return -1;
    }
    /* Blocking, with the time left as send timeout: a Unix connect waits at
     * most that long for room in a full backlog (Python's settimeout). */
    int64_t left = deadline - now_ns();
    if (left < 100000000)
        left = 100000000;
    struct timeval tv = {.tv_sec = left / 1000000000, .tv_usec = (left % 1000000000) / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path));
    size_t off = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        goto err;
    while (off < frame_len) {
        ssize_t w = send(fd, frame + off, frame_len - off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            goto err;
        }
        off += (size_t)w;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        goto err;
    return fd;
err:;
    int e = errno;
    close(fd);
    open_error("connect/send: [Errno %d] %s", e, strerror(e));
    return -1;
}

static void add_conn(struct conn *p)
{
    conns[nconns] = *p;
    conns[nconns].alive = 1;
    nconns++;
}

static void open_watchers(const char *path, size_t count, const unsigned char *frame, size_t frame_len,
                          double timeout_s)
{
    int64_t deadline = now_ns() + (int64_t)(timeout_s * 1e9);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        fail("epoll_create1: %s", strerror(errno));
    struct conn *pending = xrealloc(NULL, sizeof *pending * CHUNK);
    struct epoll_event *evs = xrealloc(NULL, sizeof *evs * CHUNK);
    for (size_t start = 0; start < count; start += CHUNK) {
        size_t want = count - start < CHUNK ? count - start : CHUNK;
        size_t npending = 0, open = 0;
        for (size_t k = 0; k < want; k++) {
            int fd = connect_one(path, frame, frame_len, deadline);
            if (fd < 0)
                continue;
            struct conn *c = &pending[npending];
            memset(c, 0, sizeof *c);
            c->fd = fd;
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = npending};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
                fail("epoll_ctl: %s", strerror(errno));
            npending++;
            open++;
        }
        while (open > 0) {
            int64_t left = deadline - now_ns();
            if (left <= 0) {
                open_error("%zu initial frames not read within %g s", open, timeout_s);
                for (size_t k = 0; k < npending; k++) {
                    if (pending[k].fd >= 0) {
                        close(pending[k].fd);
                        buf_free(&pending[k].in);
                        pending[k].fd = -1;
                    }
                }
                open = 0;
                break;
            }
            int ms = (int)((left + 999999) / 1000000);
            int ne = epoll_wait(ep, evs, CHUNK, ms);
            if (ne < 0) {
                if (errno == EINTR)
                    continue;
                fail("epoll_wait: %s", strerror(errno));
            }
            for (int e = 0; e < ne; e++) {
                struct conn *c = &pending[evs[e].data.u64];
                if (c->fd < 0)
                    continue;
                ssize_t r = recv(c->fd, scratch, sizeof scratch, 0);
                char why[300];
                if (r < 0) {
                    int er = errno;
                    if (er == EAGAIN || er == EWOULDBLOCK || er == EINTR)
                        continue;
                    snprintf(why, sizeof why, "[Errno %d] %s", er, strerror(er));
                } else if (r == 0) {
                    snprintf(why, sizeof why, "closed by groserd before its initial frame");
                }
                if (r <= 0) {
                    open_error("%s", why);
                    close(c->fd); /* leaves the epoll set */
                    buf_free(&c->in);
                    c->fd = -1;
                    open--;
                    continue;
                }
                buf_add(&c->in, scratch, (size_t)r);
                const unsigned char *p = NULL;
                size_t plen = 0;
                size_t used = split_frames(c, c->in.p, c->in.len, 0, 0, 1, &p, &plen);
                if (!p)
                    continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                open--;
                rec_begin('I');
                buf_u32(&out, (uint32_t)nconns);
                buf_add(&out, p, plen);
                rec_end();
                ninitial++;
                memmove(c->in.p, c->in.p + used, c->in.len - used);
                c->in.len -= used;
                /* Frames already behind the initial one came outside a round. */
                struct buf rest = c->in;
                c->in = (struct buf){0};
                add_conn(c);
                if (rest.len)
                    take(&conns[nconns - 1], rest.p, rest.len, 0, 0);
                buf_free(&rest);
                c->fd = -1;
            }
        }
    }
    free(pending);
    free(evs);
    close(ep);
}

/* -- the control channel --------------------------------------------------- */

static char ctrl[CTRL_MAX + 1];
static size_t ctrl_len;

/* One command line, without its newline, or NULL when none is complete.
 * Reads stdin once when `readable`. */
static char *next_command(int readable)
{
    static size_t consumed;
    if (consumed) {
        memmove(ctrl, ctrl + consumed, ctrl_len - consumed);
        ctrl_len -= consumed;
        consumed = 0;
    }
    char *nl = memchr(ctrl, '\n', ctrl_len);
    if (!nl && readable) {
        if (ctrl_len == CTRL_MAX)
            fail("a command line longer than %d bytes", CTRL_MAX);
        ssize_t r;
        do
            r = read(STDIN_FILENO, ctrl + ctrl_len, CTRL_MAX - ctrl_len);
        while (r < 0 && errno == EINTR);
        if (r < 0)
            fail("reading commands: %s", strerror(errno));
        if (r == 0)
            fail("the orchestrator closed the control channel (stdin) without \"quit\"");
        ctrl_len += (size_t)r;
        nl = memchr(ctrl, '\n', ctrl_len);
    }
    if (!nl)
        return NULL;
    *nl = '\0';
    consumed = (size_t)(nl - ctrl) + 1;
    return ctrl;
}

static int ctrl_pending(void)
{
    return memchr(ctrl, '\n', ctrl_len) != NULL;
}

static unsigned long parse_num(const char **s, const char *what)
{
    while (**s == ' ')
        (*s)++;
    if (**s < '0' || **s > '9')
        fail("bad %s in a command", what);
    char *end;
    errno = 0;
    unsigned long v = strtoul(*s, &end, 10);
    if (errno)
        fail("bad %s in a command", what);
    *s = end;
    return v;
}

static void drop(const char *args, int ep)
{
    char *gone = xrealloc(NULL, nconns ? nconns : 1);
    memset(gone, 0, nconns ? nconns : 1);
    const char *s = args;
    while (*s == ' ')
        s++;
    while (*s) {
        unsigned long i = parse_num(&s, "connection index");
        if (i >= nconns)
            fail("drop: no connection %lu (there are %zu)", i, nconns);
        gone[i] = 1;
        while (*s == ' ')
            s++;
    }
    size_t k = 0;
    for (size_t i = 0; i < nconns; i++) {
        if (gone[i]) {
            if (conns[i].alive) {
                epoll_ctl(ep, EPOLL_CTL_DEL, conns[i].fd, NULL);
                close(conns[i].fd);
            }
            buf_free(&conns[i].in);
            continue;
        }
        conns[k] = conns[i];
        if (conns[k].alive) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = k};
            if (epoll_ctl(ep, EPOLL_CTL_MOD, conns[k].fd, &ev) < 0)
                fail("epoll_ctl: %s", strerror(errno));
        }
        k++;
    }
    nconns = k;
    free(gone);
    rec_begin('D');
    buf_u32(&out, (uint32_t)nconns);
    rec_end();
}

static size_t alive_count(void)
{
    size_t a = 0;
    for (size_t i = 0; i < nconns; i++)
        a += conns[i].alive != 0;
    return a;
}

/* Returns 1 on "quit". */
static int command(char *line, int ep, uint32_t *round, int64_t *deadline, int64_t round_timeout)
{
    if (strcmp(line, "quit") == 0)
        return 1;
    if (phase == ROUND)
        fail("command %.40s during a round", line);
    if (strncmp(line, "arm ", 4) == 0) {
        const char *s = line + 4;
        unsigned long r = parse_num(&s, "round");
        if (*s)
            fail("bad command %.40s", line);
        *round = (uint32_t)r;
        for (size_t i = 0; i < nconns; i++)
            conns[i].got = 0;
        arena.len = 0;
        remaining = alive_count();
        extras = wakes = 0;
        busy = 0;
        phase = ROUND;
        rec_begin('A');
        buf_u32(&out, *round);
        buf_u32(&out, strays);
        rec_end();
        strays = 0;
        *deadline = now_ns() + round_timeout;
        return 0;
    }
    if (strcmp(line, "drop") == 0 || strncmp(line, "drop ", 5) == 0) {
        drop(line + 4, ep);
        return 0;
    }
    fail("unknown command %.40s", line);
}

static void report_round(uint32_t round)
{
    rec_begin('S');
    buf_u32(&out, round);
    buf_u32(&out, (uint32_t)nconns);
    buf_u32(&out, extras);
    buf_i64(&out, busy);
    buf_u32(&out, wakes);
    buf_u32(&out, (uint32_t)(nconns - alive_count()));
    for (size_t i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (!c->got) {
            buf_u8(&out, 0);
            continue;
        }
        buf_u8(&out, 1);
        buf_i64(&out, c->t_wake);
        buf_i64(&out, c->t_read);
        buf_u32(&out, (uint32_t)c->len);
        buf_add(&out, arena.p + c->off, c->len);
    }
    rec_end();
}

/* -- the rounds (worker_main) ---------------------------------------------- */

static void serve(double round_timeout_s)
{
    int64_t round_timeout = (int64_t)(round_timeout_s * 1e9);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        fail("epoll_create1: %s", strerror(errno));
    for (size_t i = 0; i < nconns; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0)
            fail("epoll_ctl: %s", strerror(errno));
    }
    struct epoll_event cev = {.events = EPOLLIN, .data.u64 = CTRL_ID};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, STDIN_FILENO, &cev) < 0)
        fail("epoll_ctl(stdin): %s", strerror(errno));
    size_t maxev = nconns + 1;
    struct epoll_event *evs = xrealloc(NULL, sizeof *evs * maxev);
    uint32_t round = 0;
    int64_t deadline = 0;
    for (;;) {
        /* A command already read (several can come in one read) runs first. */
        if (phase != ROUND && ctrl_pending()) {
            if (command(next_command(0), ep, &round, &deadline, round_timeout))
                break;
            if (phase == ROUND && remaining == 0) {
                report_round(round);
                phase = IDLE;
            }
            continue;
        }
        int timeout = -1;
        if (phase == ROUND) {
            int64_t left = deadline - now_ns();
            timeout = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
        }
        int ne = epoll_wait(ep, evs, (int)maxev, timeout);
        int64_t t_wake = now_ns();
        if (ne < 0) {
            if (errno == EINTR)
                continue;
            fail("epoll_wait: %s", strerror(errno));
        }
        if (phase == ROUND)
            wakes++;
        for (int e = 0; e < ne; e++) {
            if (evs[e].data.u64 == CTRL_ID) {
                char *line = next_command(1);
                if (!line)
                    continue;
                int was_drop = strncmp(line, "drop", 4) == 0;
                if (command(line, ep, &round, &deadline, round_timeout))
                    goto quit;
                if (was_drop)
                    break; /* indices moved; level-triggered epoll reports the rest again */
                continue;
            }
            struct conn *c = &conns[evs[e].data.u64];
            if (!c->alive)
                continue;
            for (;;) {
                ssize_t r = recv(c->fd, scratch, sizeof scratch, 0);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    break;
                int64_t t_read = now_ns();
                if (r <= 0) {
                    /* closed (or failed): as the Python worker, the watch is dead */
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->alive = 0;
                    if (phase == ROUND && !c->got)
                        remaining--;
                    break;
                }
                take(c, scratch, (size_t)r, t_wake, t_read);
                if ((size_t)r < sizeof scratch)
                    break;
            }
        }
        if (phase == ROUND) {
            int64_t t = now_ns();
            busy += t - t_wake;
            if (remaining == 0 || t >= deadline) {
                report_round(round);
                phase = IDLE;
            }
        }
    }
quit:
    free(evs);
    close(ep);
}

/* -- main ------------------------------------------------------------------ */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static double parse_seconds(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 86400)
        fail("%s %s is not a number of seconds in (0, 86400]", what, s);
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s SOCKET COUNT ROUND_TIMEOUT_S OPEN_TIMEOUT_S FRAME_HEX [PARENT_PID]\n", prog);
        return 2;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        fail("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    if (argc == 7) {
        char *end;
        long ppid = strtol(argv[6], &end, 10);
        if (*end || ppid <= 0)
            fail("PARENT_PID %s is not a process id", argv[6]);
        if (getppid() != (pid_t)ppid)
            fail("the parent process %ld is gone", ppid);
    }
    signal(SIGPIPE, SIG_IGN);

    const char *path = argv[1];
    struct sockaddr_un sa;
    if (path[0] == '\0' || strlen(path) >= sizeof sa.sun_path)
        fail("socket path %s is empty or longer than %zu bytes", path, sizeof sa.sun_path - 1);
    char *end;
    errno = 0;
    long count = strtol(argv[2], &end, 10);
    if (errno || *end || count < 0 || count > MAX_COUNT)
        fail("COUNT %s is not a number in [0, %d]", argv[2], MAX_COUNT);
    double round_timeout = parse_seconds(argv[3], "ROUND_TIMEOUT_S");
    double open_timeout = parse_seconds(argv[4], "OPEN_TIMEOUT_S");
    const char *hex = argv[5];
    size_t hl = strlen(hex);
    if (hl == 0 || hl % 2)
        fail("FRAME_HEX is empty or of odd length");
    size_t frame_len = hl / 2;
    unsigned char *frame = xrealloc(NULL, frame_len);
    for (size_t i = 0; i < frame_len; i++) {
        int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
        if (a < 0 || b < 0)
            fail("FRAME_HEX is not hex");
        frame[i] = (unsigned char)(a << 4 | b);
    }
    if (frame_len < 4 || ((uint32_t)frame[0] << 24 | (uint32_t)frame[1] << 16 | (uint32_t)frame[2] << 8 | frame[3]) != frame_len - 4)
        fail("FRAME_HEX is not one frame (4-byte big-endian length, then that many bytes)");

    conns = xrealloc(NULL, sizeof *conns * (size_t)(count ? count : 1));
    open_watchers(path, (size_t)count, frame, frame_len, open_timeout);
    free(frame);
    if (count > 0 && ninitial == 0)
        fail("no watch could be opened on %s: %u errors, the first: %.*s", path, nerrors,
             nshown ? (int)((uint32_t)shown.p[0] << 24 | (uint32_t)shown.p[1] << 16 | (uint32_t)shown.p[2] << 8 | shown.p[3]) : 0,
             nshown ? (const char *)shown.p + 4 : "");
    rec_begin('R');
    buf_u32(&out, ninitial);
    buf_u32(&out, nerrors);
    buf_u32(&out, nshown);
    buf_add(&out, shown.p, shown.len);
    rec_end();
    buf_free(&shown);
    phase = IDLE;
    serve(round_timeout);
    for (size_t i = 0; i < nconns; i++) {
        if (conns[i].alive)
            close(conns[i].fd);
        buf_free(&conns[i].in);
    }
    free(conns);
    buf_free(&arena);
    buf_free(&out);
    return 0;
}
