/* Runs a program with the rseq system call refused (ENOSYS) by a seccomp filter, as a sandbox or an
 * old kernel would: tests/api/percpu.sh runs the per-CPU tests under it (with glibc's own
 * registration off, GLIBC_TUNABLES=glibc.pthread.rseq=0) to reach the per-thread mode.
 * usage: no_rseq PROGRAM [ARGS...]; exit status 77 when the filter cannot be installed. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: no_rseq PROGRAM [ARGS...]\n");
        return 2;
    }
#ifdef SYS_rseq
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rseq, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("no_rseq: seccomp");
        return 77;
    }
#endif
    execvp(argv[1], argv + 1);
    perror("no_rseq: exec");
    return 127;
}
