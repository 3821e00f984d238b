#include "commandleader.h"

#include "usernamespacefilter.h"

#include <QFile>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <ftw.h>
#include <grp.h>
#include <map>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

struct LeaderOptions
{
    long long uid = -1;
    long long gid = -1;
    std::vector<std::pair<int, rlim_t>> limits;
    char **command = nullptr;
};

bool parseNumber(const char *text, long long *value)
{
    char *end = nullptr;
    errno = 0;
    *value = std::strtoll(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' && *value >= 0;
}

std::optional<LeaderOptions> parseLeaderOptions(int argc, char *argv[])
{
    LeaderOptions options;
    static const std::pair<const char *, int> Resources[] = {{"--as", RLIMIT_AS},
                                                             {"--nproc", RLIMIT_NPROC},
                                                             {"--cpu", RLIMIT_CPU},
                                                             {"--fsize", RLIMIT_FSIZE}};
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0) {
            if (i + 1 >= argc)
                return std::nullopt;
            options.command = argv + i + 1;
            return options;
        }
        long long value = 0;
        if (i + 1 >= argc || !parseNumber(argv[i + 1], &value))
            return std::nullopt;
        if (std::strcmp(argv[i], "--uid") == 0) {
            options.uid = value;
        } else if (std::strcmp(argv[i], "--gid") == 0) {
            options.gid = value;
        } else {
            bool known = false;
            for (const auto &[name, resource] : Resources) {
                if (std::strcmp(argv[i], name) == 0) {
                    options.limits.emplace_back(resource, rlim_t(value));
                    known = true;
                }
            }
            if (!known)
                return std::nullopt;
        }
        ++i;
    }
    return std::nullopt;
}

// Every process under `leader`, from /proc: the parent links of all processes, walked down.
std::vector<pid_t> descendantsOf(pid_t leader)
{
    std::multimap<pid_t, pid_t> children;
    if (DIR *proc = ::opendir("/proc")) {
        while (const dirent *entry = ::readdir(proc)) {
            char *end = nullptr;
            const long pid = std::strtol(entry->d_name, &end, 10);
            if (pid <= 0 || *end != '\0')
                continue;
            char path[64];
            std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
            FILE *file = std::fopen(path, "re");
            if (!file)
                continue;
            char buffer[512];
            const size_t read = std::fread(buffer, 1, sizeof buffer - 1, file);
            std::fclose(file);
            buffer[read] = '\0';
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            const char *close = std::strrchr(buffer, ')');
            int parent = 0;
            char state = 0;
            if (close && std::sscanf(close + 1, " %c %d", &state, &parent) == 2)
                children.emplace(pid_t(parent), pid_t(pid));
        }
        ::closedir(proc);
    }
    std::vector<pid_t> found;
    std::vector<pid_t> pending{leader};
    while (!pending.empty()) {
        const pid_t parent = pending.back();
        pending.pop_back();
        const auto [first, last] = children.equal_range(parent);
        for (auto it = first; it != last; ++it) {
            found.push_back(it->second);
            pending.push_back(it->second);
        }
    }
    return found;
}

// Kills everything under this process until nothing is left, reaping what becomes its child.
void endTree()
{
    for (int round = 0; round < 1000; ++round) {
        const std::vector<pid_t> left = descendantsOf(::getpid());
        if (left.empty())
            return;
        for (const pid_t pid : left)
            ::kill(pid, SIGKILL);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        if (round > 0)
            ::usleep(1000);
    }
}

[[noreturn]] void execCommand(const LeaderOptions &options, const sigset_t &original)
{
    ::sigprocmask(SIG_SETMASK, &original, nullptr);
    ::setsid();
    for (const auto &[resource, value] : options.limits) {
        // At the soft limit of CPU time the kernel sends SIGXCPU, at the hard one SIGKILL: a
        // second apart, the command ends by the signal that names the limit.
        const rlimit limit{value, resource == RLIMIT_CPU ? value + 1 : value};
        ::setrlimit(resource, &limit);
    }
    if (options.gid >= 0 &&
        (::setgroups(0, nullptr) != 0 ||
         ::setresgid(gid_t(options.gid), gid_t(options.gid), gid_t(options.gid)) != 0)) {
        std::perror("agentdeck command-leader: setgid");
        ::_exit(126);
    }
    if (options.uid >= 0 &&
        ::setresuid(uid_t(options.uid), uid_t(options.uid), uid_t(options.uid)) != 0) {
        std::perror("agentdeck command-leader: setuid");
        ::_exit(126);
    }
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (!UserNamespaceFilter::install()) {
        std::perror("agentdeck command-leader: seccomp");
        ::_exit(126);
    }
    ::execvp(options.command[0], options.command);
    std::fprintf(stderr, "agentdeck command-leader: cannot run %s: %s\n", options.command[0],
                 std::strerror(errno));
    ::_exit(127);
}

// Gives `dir` and everything in it to uid:gid, not following links.
bool handOver(const QString &dir, uint uid, uint gid)
{
    struct stat status
    {};
    const QByteArray top = QFile::encodeName(dir);
    if (::lstat(top.constData(), &status) != 0)
        return false;
    if (status.st_uid == uid && status.st_gid == gid)
        return true; // given before: what the commands made since is theirs already
    // nftw() takes a plain function: the owner is passed beside it (the server's thread only).
    static uint owner, group;
    owner = uid;
    group = gid;
    return ::nftw(
               top.constData(),
               [](const char *path, const struct stat *, int, FTW *) {
                   ::lchown(path, owner, group);
                   return 0;
               },
               64, FTW_PHYS) == 0;
}

} // namespace

bool giveWorkspace(const QString &dir, uint uid, uint gid)
{
    // Given away, a workspace is its sandbox's alone: other sandboxes' uids see none of it.
    return handOver(dir, uid, gid) &&
           QFile::setPermissions(dir, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
}

std::optional<CommandUser> commandUserFor(const QString &workspace, bool madeByServer,
                                          const QStringList &alsoGive, uint sandboxUid,
                                          QString *error)
{
    struct stat status
    {};
    if (::stat(QFile::encodeName(workspace).constData(), &status) != 0) {
        *error = u"cannot read the workspace "_s + workspace;
        return std::nullopt;
    }
    const CommandUser user = status.st_uid != 0 ? CommandUser{status.st_uid, status.st_gid}
                                                : CommandUser{sandboxUid, sandboxUid};
    if (user.uid == 0) {
        *error = u"no uid to run the commands as"_s;
        return std::nullopt;
    }
    if (status.st_uid == 0 && madeByServer && !giveWorkspace(workspace, user.uid, user.gid)) {
        *error = u"cannot give the workspace %1 to uid %2"_s.arg(workspace).arg(user.uid);
        return std::nullopt;
    }
    for (const QString &dir : alsoGive) {
        if (!handOver(dir, user.uid, user.gid)) {
            *error = u"cannot give %1 to uid %2"_s.arg(dir).arg(user.uid);
            return std::nullopt;
        }
    }
    return user;
}

int runCommandLeader(int argc, char *argv[])
{
    const auto options = parseLeaderOptions(argc, argv);
    if (!options) {
        std::fputs("usage: agentdeck command-leader [--uid U --gid G] [--as BYTES] [--nproc N] "
                   "[--cpu SECONDS] [--fsize BYTES] -- PROGRAM [ARGS...] (started by the "
                   "server)\n",
                   stderr);
        return 2;
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    // Its parent (the sandbox host, the server) dying is a stop like any other.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    sigset_t handled, original;
    sigemptyset(&handled);
    for (const int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
        sigaddset(&handled, signal);
    ::sigprocmask(SIG_BLOCK, &handled, &original);
    if (::getppid() == 1)
        return 128 + SIGTERM;

    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("agentdeck command-leader: fork");
        return 126;
    }
    if (child == 0)
        execCommand(*options, original);

    int status = -1;
    for (;;) {
        siginfo_t info;
        if (::sigwaitinfo(&handled, &info) < 0)
            continue;
        if (info.si_signo != SIGCHLD) {
            endTree();
            status = W_EXITCODE(0, SIGKILL);
            break;
        }
        bool commandEnded = false;
        int reaped = 0;
        pid_t pid;
        while ((pid = ::waitpid(-1, &reaped, WNOHANG)) > 0) {
            if (pid == child) {
                status = reaped;
                commandEnded = true;
            }
        }
        if (commandEnded) {
            endTree();
            break;
        }
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + SIGKILL;
}

QStringList commandLeaderArguments(const SandboxPolicy &limits, std::optional<CommandUser> user,
                                   const QString &program, const QStringList &arguments)
{
    QStringList leader{u"command-leader"_s};
    if (user)
        leader << u"--uid"_s << QString::number(user->uid) << u"--gid"_s
               << QString::number(user->gid);
    for (const auto &[option, value] :
         {std::pair{u"--as"_s, limits.memoryBytes}, std::pair{u"--nproc"_s, limits.processes},
          std::pair{u"--cpu"_s, limits.cpuSeconds},
          std::pair{u"--fsize"_s, limits.fileSizeBytes}}) {
        if (value > 0)
            leader << option << QString::number(value);
    }
    return leader << u"--"_s << program << arguments;
}

QStringList prlimitArguments(const SandboxPolicy &policy)
{
    QStringList arguments;
    for (const auto &[option, value] :
         {std::pair{u"--as="_s, policy.memoryBytes}, std::pair{u"--nproc="_s, policy.processes},
          std::pair{u"--cpu="_s, policy.cpuSeconds},
          std::pair{u"--fsize="_s, policy.fileSizeBytes}}) {
        if (value > 0)
            arguments << option + QString::number(value) +
                             (option == u"--cpu="_s ? u":%1"_s.arg(value + 1) : QString());
    }
    return arguments;
}

QString limitNote(const SandboxPolicy &policy, int exitCode, const QString &output)
{
    if (policy.cpuSeconds > 0 && exitCode == 128 + SIGXCPU)
        return u"[stopped by the sandbox's limit of %1 s of CPU time per process]"_s.arg(
            policy.cpuSeconds);
    if (policy.fileSizeBytes > 0 &&
        (exitCode == 128 + SIGXFSZ || output.contains(u"File size limit exceeded"_s)))
        return u"[stopped by the sandbox's limit of %1 bytes per file]"_s.arg(policy.fileSizeBytes);
    if (exitCode == 0)
        return {};
    if (policy.memoryBytes > 0 &&
        (output.contains(u"cannot allocate"_s, Qt::CaseInsensitive) ||
         output.contains(u"MemoryError"_s) || output.contains(u"bad_alloc"_s) ||
         output.contains(u"out of memory"_s, Qt::CaseInsensitive)))
        return u"[the sandbox's limit of %1 bytes of memory per process was reached]"_s.arg(
            policy.memoryBytes);
    if (policy.processes > 0 && output.contains(u"fork"_s, Qt::CaseInsensitive) &&
        output.contains(u"Resource temporarily unavailable"_s))
        return u"[the sandbox's limit of %1 processes was reached]"_s.arg(policy.processes);
    return {};
}

QString limitSaidIn(const QString &output)
{
    const QString last = output.trimmed().section(u'\n', -1);
    if (!last.startsWith(u'[') || !last.endsWith(u']') ||
        !last.contains(u"the sandbox's limit of"_s))
        return {};
    return last.mid(1, last.size() - 2);
}

} // namespace AgentDeck
