/* test_stateless_seccomp.c: the stateless tier's BPF filter, run here by a
 * small interpreter of the instructions it uses, over syscalls it must
 * refuse and ones it must let through. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "stateless_seccomp.h"
#include "unit.h"

/* -1 on an instruction the interpreter does not know or a jump out of the
 * program (either would be a bug in the generator). */
static long long bpf_run(const struct sock_filter *p, size_t n, const struct seccomp_data *d)
{
	uint32_t a = 0;
	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *i = &p[pc];
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (i->k + 4 > sizeof(*d))
				return -1;
			memcpy(&a, (const char *)d + i->k, 4);
			break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += a == i->k ? i->jt : i->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += a >= i->k ? i->jt : i->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (a & i->k) ? i->jt : i->jf; break;
		case BPF_RET | BPF_K: return i->k;
		default: return -1;
		}
	}
	return -1;
}

static long long verdict(int nr, uint64_t a0, uint64_t a1)
{
	size_t n;
	struct sock_filter *p = stateless_seccomp_program(&n);
	struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64, .args = {a0, a1}};
#if defined(__aarch64__)
	d.arch = AUDIT_ARCH_AARCH64;
#endif
	long long v = bpf_run(p, n, &d);
	free(p);
	return v;
}

#define EPERM_RET (SECCOMP_RET_ERRNO | EPERM)

TEST(stateless_seccomp_refuses_the_dangerous_syscalls)
{
	int denied[] = {SYS_ptrace,
			SYS_mount,
			SYS_umount2,
			SYS_unshare,
			SYS_setns,
			SYS_keyctl,
			SYS_bpf,
			SYS_perf_event_open,
			SYS_userfaultfd,
			SYS_kexec_load,
			SYS_init_module,
			SYS_finit_module,
			SYS_io_uring_setup,
			SYS_open_by_handle_at,
			SYS_process_vm_readv,
			SYS_pivot_root};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		CHECK(verdict(denied[i], 0, 0) == EPERM_RET);
	CHECK(verdict(SYS_clone3, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS));
	CHECK(verdict(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0) == EPERM_RET);
	CHECK(verdict(SYS_clone, CLONE_NEWNET, 0) == EPERM_RET);
	CHECK(verdict(SYS_socket, AF_PACKET, 0) == EPERM_RET);
	CHECK(verdict(SYS_socket, AF_VSOCK, 0) == EPERM_RET);
	CHECK(verdict(SYS_ioctl, 0, TIOCSTI) == EPERM_RET);
}

TEST(stateless_seccomp_lets_ordinary_code_through)
{
	int allowed[] = {SYS_read,   SYS_write,  SYS_openat, SYS_mmap, SYS_exit_group,
			 SYS_getpid, SYS_execve, SYS_wait4,  SYS_futex};
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		CHECK(verdict(allowed[i], 0, 0) == SECCOMP_RET_ALLOW);
	/* threads and fork */
	CHECK(verdict(SYS_clone, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD,
		      0) == SECCOMP_RET_ALLOW);
	CHECK(verdict(SYS_clone, SIGCHLD, 0) == SECCOMP_RET_ALLOW);
	CHECK(verdict(SYS_socket, AF_UNIX, 0) == SECCOMP_RET_ALLOW);
	CHECK(verdict(SYS_socket, AF_INET6, 0) == SECCOMP_RET_ALLOW);
	CHECK(verdict(SYS_ioctl, 1, 0x5401 /* TCGETS */) == SECCOMP_RET_ALLOW);
}

TEST(stateless_seccomp_kills_a_foreign_architecture)
{
	size_t n;
	struct sock_filter *p = stateless_seccomp_program(&n);
	struct seccomp_data d = {.nr = SYS_read, .arch = AUDIT_ARCH_I386};
	CHECK(bpf_run(p, n, &d) == SECCOMP_RET_KILL_PROCESS);
#if defined(__x86_64__)
	d.arch = AUDIT_ARCH_X86_64;
	d.nr = 0x40000000 | SYS_read; /* x32 */
	CHECK(bpf_run(p, n, &d) == SECCOMP_RET_KILL_PROCESS);
#endif
	CHECK(n < 255); /* every jump offset fits its 8 bits */
	free(p);
}
