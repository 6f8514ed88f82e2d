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
