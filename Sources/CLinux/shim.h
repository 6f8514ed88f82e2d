// Linux calls that Glibc's Swift module leaves out or hides behind
// _GNU_SOURCE (the Glibc module is built without it).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

struct groser_ucred { pid_t pid; uid_t uid; gid_t gid; };

static inline int groser_peercred(int fd, struct groser_ucred *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, out, &len);
}

#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);

#include <sys/random.h>

#include <malloc.h>

#include <sys/syscall.h>
#include <unistd.h>
/// The calling thread's id (gettid is hidden behind _GNU_SOURCE).
static inline pid_t groser_gettid(void) { return (pid_t)syscall(SYS_gettid); }

#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <cpuid.h>
/// Whether the CPU has SSE 4.2's crc32 instruction (CPUID 1, ECX bit 20).
static inline int groser_has_crc32c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 20 & 1);
}
/// CRC-32C of `n` bytes with the crc32 instruction, 8 bytes a step
/// (`crc` in and out without the final inversion). Only where
/// groser_has_crc32c() says so.
__attribute__((target("sse4.2")))
static inline uint32_t groser_crc32c_update(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n > 0) { c32 = __builtin_ia32_crc32qi(c32, *p++); n--; }
    return c32;
}
#else
static inline int groser_has_crc32c(void) { return 0; }
static inline uint32_t groser_crc32c_update(uint32_t crc, const unsigned char *p, size_t n) { (void)p; (void)n; return crc; }
#endif

#include <fcntl.h>
extern int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags);
/// Writes the file's dirty pages in [offset, offset + count) to the disk and
/// waits for them (SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER): no
/// metadata, no cache flush; an fdatasync still makes them durable.
static inline int groser_write_out_range(int fd, off_t offset, off_t count) {
    return sync_file_range(fd, offset, count, 1 | 2 | 4);
}
