/* stateless_seccomp.h: the stateless tier's seccomp filter, classic BPF
 * generated here (libseccomp is not a dependency), handed to bubblewrap
 * with --seccomp FD, which loads it last, just before it runs python.
 *
 * A deny list over the syscalls the container profile refuses and that
 * matter to a process sandbox on the host: other processes' memory
 * (ptrace family), mounts, keyrings, bpf, perf, userfaultfd, new
 * namespaces (unshare, setns, clone with CLONE_NEW*; clone3 answers ENOSYS
 * so that libc falls back to clone, whose flags can be checked), kexec,
 * kernel modules, io_uring, handles to host files (open_by_handle_at),
 * memory that RLIMIT_AS does not see (SysV shm and queues, memfd_create),
 * socket families other than unix, inet, inet6 and netlink, and TIOCSTI.
 * Refusals answer EPERM; a foreign architecture (x32 on x86-64 included)
 * kills the process. */
#ifndef CI_STATELESS_SECCOMP_H
#define CI_STATELESS_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

/* The program; *len instructions. Caller frees. */
struct sock_filter *stateless_seccomp_program(size_t *len);

#endif
