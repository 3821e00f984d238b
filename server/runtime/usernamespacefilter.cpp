#include "usernamespacefilter.h"

#include <cerrno>
#include <cstddef>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

namespace AgentDeck::UserNamespaceFilter {

namespace {

#if defined(__x86_64__)
constexpr __u32 NativeArch = AUDIT_ARCH_X86_64;
constexpr __u32 X32Bit = 0x40000000; // __X32_SYSCALL_BIT: x32 calls share the architecture
#elif defined(__aarch64__)
constexpr __u32 NativeArch = AUDIT_ARCH_AARCH64;
constexpr __u32 X32Bit = 0;
#else
#error "the user namespace filter knows x86-64 and AArch64 only"
#endif

constexpr __u32 Allow = SECCOMP_RET_ALLOW;
constexpr __u32 RefusePermission = SECCOMP_RET_ERRNO | EPERM;
constexpr __u32 RefuseAsMissing = SECCOMP_RET_ERRNO | ENOSYS;

sock_filter statement(__u16 code, __u32 value)
{
    return BPF_STMT(code, value);
}

sock_filter jumpIfEqual(__u32 value, __u8 ifEqual, __u8 otherwise = 0)
{
    return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, ifEqual, otherwise);
}

std::vector<sock_filter> instructions()
{
    constexpr __u32 Arch = offsetof(seccomp_data, arch);
    constexpr __u32 Number = offsetof(seccomp_data, nr);
    // The low half of the first argument (little-endian): the flags of unshare() and clone().
    constexpr __u32 Flags = offsetof(seccomp_data, args);
    // A jump's offsets count the instructions it skips when true, and when false.
    return {
        statement(BPF_LD | BPF_W | BPF_ABS, Arch),
        jumpIfEqual(NativeArch, 1),
        statement(BPF_RET | BPF_K, RefusePermission),
        statement(BPF_LD | BPF_W | BPF_ABS, Number),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32Bit ? X32Bit : 0xffffffff, 0, 1),
        statement(BPF_RET | BPF_K, RefusePermission),
        jumpIfEqual(__NR_setns, 0, 1),
        statement(BPF_RET | BPF_K, RefusePermission),
        jumpIfEqual(__NR_clone3, 0, 1),
        statement(BPF_RET | BPF_K, RefuseAsMissing),
        jumpIfEqual(__NR_unshare, 1),
        jumpIfEqual(__NR_clone, 0, 3),
        statement(BPF_LD | BPF_W | BPF_ABS, Flags),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
        statement(BPF_RET | BPF_K, RefusePermission),
        statement(BPF_RET | BPF_K, Allow),
    };
}

} // namespace

QByteArray program()
{
    const std::vector<sock_filter> filter = instructions();
    return QByteArray(reinterpret_cast<const char *>(filter.data()),
                      qsizetype(filter.size() * sizeof(sock_filter)));
}

int programFile()
{
    const QByteArray bytes = program();
    const int file = ::memfd_create("agentdeck-seccomp", MFD_CLOEXEC);
    if (file < 0)
        return -1;
    if (::write(file, bytes.constData(), size_t(bytes.size())) != bytes.size() ||
        ::lseek(file, 0, SEEK_SET) != 0) {
        const int error = errno;
        ::close(file);
        errno = error;
        return -1;
    }
    return file;
}

bool install()
{
    std::vector<sock_filter> filter = instructions();
    const sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
    return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) == 0;
}

} // namespace AgentDeck::UserNamespaceFilter
