/* stateless_seccomp.c: the stateless tier's classic BPF filter. */
#include "stateless_seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "xalloc.h"

#if defined(__x86_64__)
#define STATELESS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define STATELESS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "stateless_seccomp.c: unsupported architecture"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define OFF_NR offsetof(struct seccomp_data, nr)
#define OFF_ARCH offsetof(struct seccomp_data, arch)
/* The low 32 bits of an argument (little-endian: flags, families and ioctl
 * requests all fit there; the high half of a clone flag word is unused). */
#define OFF_ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))

/* Refused outright with EPERM. */
static const int stateless_denied[] = {
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
#ifdef SYS_process_madvise
    SYS_process_madvise,
#endif
#ifdef SYS_pidfd_getfd
    SYS_pidfd_getfd,
#endif
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
#ifdef SYS_open_tree
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
#endif
#ifdef SYS_mount_setattr
    SYS_mount_setattr,
#endif
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_unshare,
    SYS_setns,
    SYS_kexec_load,
#ifdef SYS_kexec_file_load
    SYS_kexec_file_load,
#endif
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
#endif
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_reboot,
    SYS_swapon,
    SYS_swapoff,
    SYS_acct,
    SYS_quotactl,
    SYS_syslog,
    SYS_settimeofday,
    SYS_clock_settime,
    SYS_clock_adjtime,
    SYS_adjtimex,
    /* Memory outside RLIMIT_AS: SysV segments and queues outlive their
     * mappings (until the run's IPC namespace ends), and a memfd is
     * written without a mapping; 128 descriptors of RLIMIT_FSIZE each
     * would be gigabytes. /dev/shm (POSIX shared memory, multiprocessing's)
     * is a tmpfs of a fixed size instead. */
    SYS_shmget,
    SYS_shmat,
    SYS_shmctl,
    SYS_msgget,
    SYS_msgsnd,
    SYS_msgctl,
    SYS_memfd_create,
#ifdef SYS_memfd_secret
    SYS_memfd_secret,
#endif
    SYS_personality,
    SYS_vhangup,
#ifdef SYS_iopl
    SYS_iopl,
    SYS_ioperm,
#endif
#ifdef SYS_uselib
    SYS_uselib,
#endif
#ifdef SYS_lookup_dcookie
    SYS_lookup_dcookie,
#endif
#ifdef SYS_fanotify_init
    SYS_fanotify_init,
#endif
};

struct prog {
	struct sock_filter *ins;
	size_t len, cap;
};

static void emit(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->len == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->ins = xrealloc(p->ins, p->cap * sizeof(*p->ins));
	}
	p->ins[p->len++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

#define RET_EPERM (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define RET_ENOSYS (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))

/* When nr matches, refuse by an argument's low word: when (arg & mask) != 0
 * (a mask), or when it is none of allowed[] (a list); else allow. Every
 * path of the block returns; a non-matching nr jumps over it. */
static void emit_arg_rule(struct prog *p, int nr, unsigned arg, uint32_t mask,
			  const uint32_t *allowed, size_t n_allowed)
{
	size_t n = mask ? 1 : n_allowed;
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, (uint8_t)(n + 3), (uint32_t)nr);
	emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)OFF_ARG_LO(arg));
	if (mask)
		emit(p, BPF_JMP | BPF_JSET | BPF_K, 0, 1, mask); /* set: refuse */
	else
		for (size_t j = 0; j < n_allowed; j++) /* one of them: allow */
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(n_allowed - j), 0, allowed[j]);
	emit(p, BPF_RET | BPF_K, 0, 0, RET_EPERM);
	emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
}

struct sock_filter *stateless_seccomp_program(size_t *len)
{
	struct prog p = {0};
	/* The architecture first: syscall numbers mean nothing without it. */
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)OFF_ARCH);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, STATELESS_AUDIT_ARCH);
	emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)OFF_NR);
#if defined(__x86_64__)
	/* x32 syscalls share the arch value, numbered from 0x40000000. */
	emit(&p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 0x40000000u);
	emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
#endif
	for (size_t i = 0; i < sizeof(stateless_denied) / sizeof(stateless_denied[0]); i++) {
		emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)stateless_denied[i]);
		emit(&p, BPF_RET | BPF_K, 0, 0, RET_EPERM);
	}
#ifdef SYS_clone3
	/* clone3's flags are behind a pointer: ENOSYS sends libc to clone. */
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, SYS_clone3);
	emit(&p, BPF_RET | BPF_K, 0, 0, RET_ENOSYS);
#endif
	emit_arg_rule(&p, SYS_clone, 0,
		      CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
			  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME,
		      NULL, 0);
	static const uint32_t families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
	emit_arg_rule(&p, SYS_socket, 0, 0, families, sizeof(families) / sizeof(families[0]));
	/* TIOCSTI pushes input into a terminal's queue (bwrap's --new-session
	 * already detaches; this is the belt to those braces). */
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, SYS_ioctl);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)OFF_ARG_LO(1));
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, TIOCSTI);
	emit(&p, BPF_RET | BPF_K, 0, 0, RET_EPERM);
	emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
	emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
	*len = p.len;
	return p.ins;
}
