// The Debian package: `cpack -G DEB` on this build tree, extracted into a throwaway root with
// `dpkg -x`. Checks its files, its dependencies (including the run-time-loaded ones dpkg-shlibdeps
// cannot see), the unit (and its sandboxing's exposure score), desktop entry and metainfo with
// their validators where installed, that the packaged daemon, started the way the unit starts it,
// reads the packaged conf and tells systemd when it is ready and when it stops, and that prerm
// stops the daemon's sandbox hosts.
#include "toolrun.h"
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QUuid>

#include <algorithm>
#include <csignal>
#include <memory>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

constexpr int CpackTimeoutMs = 240'000;
constexpr int DaemonTimeoutMs = 30'000;

// A NOTIFY_SOCKET for the daemon: what systemd listens on for READY=1 and STOPPING=1.
class NotifySocket
{
public:
    explicit NotifySocket(const QString &path)
        : m_path(path)
    {
        m_fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        const QByteArray encoded = QFile::encodeName(path);
        if (m_fd < 0 || encoded.size() >= qsizetype(sizeof(address.sun_path)))
            return;
        std::copy(encoded.begin(), encoded.end(), address.sun_path);
        if (::bind(m_fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0) {
            ::close(m_fd);
            m_fd = -1;
        }
    }
    ~NotifySocket()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    NotifySocket(const NotifySocket &) = delete;
    NotifySocket &operator=(const NotifySocket &) = delete;

    bool isValid() const { return m_fd >= 0; }
    QString path() const { return m_path; }

    // Reads whatever arrived; true once a message containing `wanted` was among them.
    bool received(const QByteArray &wanted)
    {
        char buffer[4096];
        for (;;) {
            const ssize_t size = ::recv(m_fd, buffer, sizeof(buffer), 0);
            if (size <= 0)
                break;
            m_messages.append(QByteArray(buffer, size));
        }
        return std::any_of(m_messages.cbegin(), m_messages.cend(),
                           [&](const QByteArray &message) { return message.contains(wanted); });
    }
    QByteArray message(const QByteArray &containing) const
    {
        for (const QByteArray &message : m_messages)
            if (message.contains(containing))
                return message;
        return {};
    }
    QString describe() const { return QString::fromUtf8(m_messages.join(" | ")); }

private:
    QString m_path;
    int m_fd = -1;
    QList<QByteArray> m_messages;
};

// Runs argv[2:] under the seccomp filter of the unit argv[1] names, as systemd builds it: its
// SystemCallFilter= allow-list (groups expanded by systemd-analyze), EPERM for anything else, and
// socket() for its RestrictAddressFamilies= only.
constexpr char UnitSeccomp[] = R"(
import ctypes, errno, os, re, socket, subprocess, sys
unit = open(sys.argv[1]).read()
groups, group = {}, None
for line in subprocess.run(['systemd-analyze', 'syscall-filter'], capture_output=True,
                           text=True, check=True).stdout.splitlines():
    if line.startswith('@'):
        group = line.split()[0]
        groups[group] = []
    elif line.startswith('    ') and group and not line.strip().startswith('#'):
        groups[group].append(line.strip())
def expand(name, seen):
    if not name.startswith('@'):
        return {name}
    if name in seen:
        return set()
    seen.add(name)
    return set().union(*[expand(member, seen) for member in groups[name]])
allowed = set()
for name in re.search(r'^SystemCallFilter=(.*)$', unit, re.M).group(1).split():
    allowed |= expand(name, set())
families = [getattr(socket, name) for name in
            re.search(r'^RestrictAddressFamilies=(.*)$', unit, re.M).group(1).split()]
lib = ctypes.CDLL('libseccomp.so.2')
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
class Compare(ctypes.Structure):
    _fields_ = [('arg', ctypes.c_uint), ('op', ctypes.c_int), ('a', ctypes.c_uint64),
                ('b', ctypes.c_uint64)]
lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                       ctypes.c_uint, ctypes.POINTER(Compare)]
ALLOW, EQUAL = 0x7fff0000, 4
context = lib.seccomp_init(0x00050000 | errno.EPERM)
for name in sorted(allowed - {'socket'}):
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number >= 0:
        lib.seccomp_rule_add_array(context, ALLOW, number, 0, None)
for family in families:
    compare = (Compare * 1)(Compare(0, EQUAL, family, 0))
    lib.seccomp_rule_add_array(context, ALLOW, lib.seccomp_syscall_resolve_name(b'socket'), 1,
                               compare)
assert lib.seccomp_load(context) == 0
os.execv(sys.argv[2], sys.argv[2:])
)";

// The unit's mount settings, as systemd makes them in the service's mount namespace, before the
// daemon starts as nobody without capabilities: ProtectSystem=strict (roughly: the system dirs
// read-only), ProtectHome=yes, ProtectControlGroups=yes, ProtectHostname=yes (a UTS namespace),
// the tun device with Debian's mode 0666, and what the unit ($UNIT) says of /proc.
constexpr char UnitMounts[] = R"(
set -e
for dir in /usr /etc /var /opt /boot /srv; do
    if [ -d $dir ]; then mount --bind $dir $dir; mount -o remount,bind,ro $dir; fi
done
for dir in /home /root /run/user; do
    if [ -d $dir ]; then mount -t tmpfs -o ro,mode=000 tmpfs $dir; fi
done
options=rw
if grep -qx 'ProtectProc=invisible' "$UNIT"; then options=$options,hidepid=invisible; fi
if grep -qx 'ProcSubset=pid' "$UNIT"; then options=$options,subset=pid; fi
mount -t proc -o $options proc /proc
if grep -qx 'ProtectKernelTunables=yes' "$UNIT"; then
    mount --bind /proc/sys /proc/sys
    mount -o remount,bind,ro /proc/sys
fi
if grep -qx 'ProtectKernelLogs=yes' "$UNIT"; then mount --bind /dev/null /proc/kmsg; fi
mount --bind /sys/fs/cgroup /sys/fs/cgroup
mount -o remount,bind,ro /sys/fs/cgroup
hostname agentdeck-unit
mknod "$WORK/tun" c 10 200
chmod 0666 "$WORK/tun"
mount --bind "$WORK/tun" /dev/net/tun
exec setpriv --reuid=nobody --regid=nogroup --clear-groups --no-new-privs --bounding-set -all \
    --inh-caps -all "$@"
)";

} // namespace

class PackagingTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void packageFileName();
    void installsFile_data();
    void installsFile();
    void confIsPrivateConffile();
    void maintainerScriptsCreateServiceUser();
    void dependsOnRuntimeLoadedModules_data();
    void dependsOnRuntimeLoadedModules();
    void unitPassesSystemdAnalyzeVerify();
    void unitRunsDedicatedNotifyService();
    void unitExposureIsAtMostFour();
    void prermStopsTheDataDirsSandboxHosts();
    void desktopEntryValidates();
    void metainfoValidates();
    void packagedDaemonNotifiesSystemd();
    void sandboxesStartUnderTheUnitsSandboxing();
    void badDatabaseUrlsFailClearly();
    void shipsDocumentation_data();
    void shipsDocumentation();
    void copyrightIsMachineReadable();
    void changelogNamesThisVersion();
    void lintianFindsNoErrors();

private:
    QString field(const QString &name) const;
    QStringList execStart() const;
    QString rootPath(const QString &path) const { return m_root + path; }

    QTemporaryDir m_work;
    QString m_deb;
    QString m_root;
};

void PackagingTest::initTestCase()
{
    for (const QString &tool : {u"dpkg-deb"_s, u"dpkg-shlibdeps"_s})
        if (QStandardPaths::findExecutable(tool).isEmpty())
            QSKIP(qPrintable(tool + u" is not installed (dpkg-dev)"_s));
    QVERIFY(m_work.isValid());

    // With Ninja, cpack installs what is built and builds nothing itself; the test target
    // depends on agentdeck, so the binary is current.
    const QString output = m_work.filePath(u"out"_s);
    const ToolResult cpack =
        runTool(QStringLiteral(AGENTDECK_CPACK), {u"-G"_s, u"DEB"_s, u"-B"_s, output},
                CpackTimeoutMs, QStringLiteral(AGENTDECK_BUILD_DIR));
    QVERIFY2(cpack.ok(), qPrintable(cpack.output));

    const QStringList debs = QDir(output).entryList({u"*.deb"_s}, QDir::Files);
    QVERIFY2(debs.size() == 1, qPrintable(cpack.output));
    m_deb = QDir(output).filePath(debs.constFirst());

    m_root = m_work.filePath(u"root"_s);
    const ToolResult extract = runTool(u"dpkg-deb"_s, {u"-x"_s, m_deb, m_root});
    QVERIFY2(extract.ok(), qPrintable(extract.output));
}

QString PackagingTest::field(const QString &name) const
{
    const ToolResult result = runTool(u"dpkg-deb"_s, {u"-f"_s, m_deb, name});
    return result.ok() ? result.output.trimmed() : QString();
}

void PackagingTest::packageFileName()
{
    const ToolResult arch = runTool(u"dpkg"_s, {u"--print-architecture"_s});
    QVERIFY(arch.ok());
    QCOMPARE(QFileInfo(m_deb).fileName(), u"agentdeck_"_s + QStringLiteral(AGENTDECK_VERSION) +
                                              u'_' + arch.output.trimmed() + u".deb"_s);
    QCOMPARE(field(u"Package"_s), u"agentdeck"_s);
    QCOMPARE(field(u"Version"_s), QStringLiteral(AGENTDECK_VERSION));
}

void PackagingTest::installsFile_data()
{
    QTest::addColumn<QString>("path");
    QTest::addColumn<bool>("executable");
    QTest::addRow("binary") << u"/usr/bin/agentdeck"_s << true;
    QTest::addRow("unit") << u"/usr/lib/systemd/system/agentdeck.service"_s << false;
    QTest::addRow("conf") << u"/etc/agentdeck/agentdeck.conf"_s << false;
    QTest::addRow("desktop entry")
        << u"/usr/share/applications/org.agentdeck.AgentDeck.desktop"_s << false;
    QTest::addRow("metainfo") << u"/usr/share/metainfo/org.agentdeck.AgentDeck.metainfo.xml"_s
                              << false;
    QTest::addRow("scalable icon")
        << u"/usr/share/icons/hicolor/scalable/apps/agentdeck.svg"_s << false;
    for (int size : {48, 128, 256})
        QTest::addRow("%dpx icon", size)
            << u"/usr/share/icons/hicolor/%1x%1/apps/agentdeck.png"_s.arg(size) << false;
    QTest::addRow("readme") << u"/usr/share/doc/agentdeck/README.md"_s << false;
}

void PackagingTest::installsFile()
{
    QFETCH(QString, path);
    QFETCH(bool, executable);
    const QFileInfo info(rootPath(path));
    QVERIFY2(info.isFile() && info.size() > 0, qPrintable(path + u" is missing or empty"_s));
    QCOMPARE(info.isExecutable(), executable);
    // The unit runs the binary itself: no wrapper reads the conf.
    QVERIFY(!QFileInfo::exists(rootPath(u"/usr/libexec/agentdeck"_s)));
}

// The unit's command line, split at blanks (it has no quotes).
QStringList PackagingTest::execStart() const
{
    QFile unit(rootPath(u"/usr/lib/systemd/system/agentdeck.service"_s));
    if (!unit.open(QIODevice::ReadOnly))
        return {};
    const QStringList lines = QString::fromUtf8(unit.readAll()).split(u'\n');
    const QString line = lines.filter(QRegularExpression(u"^ExecStart="_s)).value(0);
    return line.mid(10).split(u' ', Qt::SkipEmptyParts);
}

void PackagingTest::confIsPrivateConffile()
{
    // The conf may hold API keys: root only, and dpkg keeps the operator's edits on upgrade.
    const QFileInfo conf(rootPath(u"/etc/agentdeck/agentdeck.conf"_s));
    const auto others = QFile::ReadGroup | QFile::WriteGroup | QFile::ExeGroup | QFile::ReadOther |
                        QFile::WriteOther | QFile::ExeOther;
    QCOMPARE(conf.permissions() & others, QFile::Permissions());
    const ToolResult conffiles = runTool(u"dpkg-deb"_s, {u"-I"_s, m_deb, u"conffiles"_s});
    QVERIFY2(conffiles.ok(), qPrintable(conffiles.output));
    QCOMPARE(conffiles.output.trimmed(), u"/etc/agentdeck/agentdeck.conf"_s);

    // Every documented key.
    QFile file(conf.filePath());
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(file.readAll());
    for (const QString &key : {u"AGENTDECK_LISTEN="_s, u"AGENTDECK_SESSION_API_KEYS="_s,
                               u"AGENTDECK_RUNTIME_RETENTION="_s, u"AGENTDECK_DATABASE_URL="_s,
                               u"AGENTDECK_ADVERTISE_URL="_s, u"AGENTDECK_ALLOW_ORIGINS="_s,
                               u"AGENTDECK_ALLOW_HOSTS="_s})
        QVERIFY2(text.contains(key), qPrintable(key));
}

void PackagingTest::maintainerScriptsCreateServiceUser()
{
    const ToolResult postinst = runTool(u"dpkg-deb"_s, {u"-I"_s, m_deb, u"postinst"_s});
    QVERIFY2(postinst.ok(), qPrintable(postinst.output));
    QVERIFY(postinst.output.contains(
        u"adduser --system --group --home /var/lib/agentdeck --no-create-home"_s));
    // The daemon reads its conf as the agentdeck user.
    QVERIFY(postinst.output.contains(u"chown root:agentdeck \"$conf\""_s));
    QVERIFY(postinst.output.contains(u"chmod 0640 \"$conf\""_s));
    for (const QString &script : {u"postinst"_s, u"prerm"_s, u"postrm"_s}) {
        const ToolResult syntax = runTool(
            u"sh"_s, {u"-n"_s, QStringLiteral(AGENTDECK_SOURCE_DIR "/packaging/debian/") + script});
        QVERIFY2(syntax.ok(), qPrintable(script + u": "_s + syntax.output));
    }
}

void PackagingTest::dependsOnRuntimeLoadedModules_data()
{
    QTest::addColumn<QString>("package");
    // Loaded at run time, invisible to dpkg-shlibdeps.
    for (const char *name :
         {"libqt6sql6-sqlite", "libqt6sql6-psql", "qt6-qpa-plugins", "qml6-module-qtquick",
          "qml6-module-qtquick-controls", "qml6-module-qtquick-layouts",
          "qml6-module-qtquick-templates", "qml6-module-qtquick-window",
          "qml6-module-qtqml-workerscript", "adduser"})
        QTest::addRow("%s", name) << QString::fromLatin1(name);
    // Found by dpkg-shlibdeps: proof that it ran.
    QTest::addRow("shlibdeps: libqt6core6") << u"libqt6core6"_s;
    QTest::addRow("shlibdeps: libsystemd0") << u"libsystemd0"_s;
    // The Docker engine client (server/runtime/dockerengine).
    QTest::addRow("shlibdeps: libcurl4") << u"libcurl4"_s;
}

void PackagingTest::dependsOnRuntimeLoadedModules()
{
    QFETCH(QString, package);
    const QString depends = field(u"Depends"_s);
    const QRegularExpression entry(u"(^|,\\s*)"_s + QRegularExpression::escape(package) +
                                   u"[a-z0-9]*(\\s|,|$)"_s);
    QVERIFY2(entry.match(depends).hasMatch(), qPrintable(u"Depends: "_s + depends));
    // What isolates commands, and what makes the workspaces' disks (--sandbox-disk).
    QCOMPARE(field(u"Recommends"_s), u"bubblewrap, e2fsprogs"_s);
}

void PackagingTest::unitPassesSystemdAnalyzeVerify()
{
    const QString analyze = QStandardPaths::findExecutable(u"systemd-analyze"_s);
    if (analyze.isEmpty())
        QSKIP("systemd-analyze is not installed");
    // verify checks that ExecStart is executable, and the package is not installed on this host:
    // a copy of the unit points into the extracted root instead. (--root would need the host's
    // own units in the throwaway root.) unitRunsDedicatedNotifyService checks the real paths.
    QFile unit(rootPath(u"/usr/lib/systemd/system/agentdeck.service"_s));
    QVERIFY(unit.open(QIODevice::ReadOnly));
    QString text = QString::fromUtf8(unit.readAll());
    text.replace(u"\nExecStart=/"_s, u"\nExecStart="_s + m_root + u'/');
    QVERIFY(QDir().mkpath(m_work.filePath(u"verify"_s)));
    QFile copy(m_work.filePath(u"verify/agentdeck.service"_s));
    QVERIFY(copy.open(QIODevice::WriteOnly));
    copy.write(text.toUtf8());
    copy.close();

    const ToolResult verify = runTool(analyze, {u"verify"_s, copy.fileName()});
    if (!verify.ok() && verify.output.contains(u"Failed to initialize manager"_s))
        QSKIP(qPrintable(u"systemd-analyze cannot run here: "_s + verify.output));
    QVERIFY2(verify.ok(), qPrintable(verify.output));
    // Warnings count too: verify exits 0 after "Unknown key" or "Failed to parse".
    QVERIFY2(!verify.output.contains(u"agentdeck.service"_s), qPrintable(verify.output));
}

void PackagingTest::unitRunsDedicatedNotifyService()
{
    QFile file(rootPath(u"/usr/lib/systemd/system/agentdeck.service"_s));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(file.readAll()).split(u'\n');
    for (const QString &wanted :
         {u"Type=notify"_s, u"User=agentdeck"_s, u"StateDirectory=agentdeck"_s,
          u"ExecStart=/usr/bin/agentdeck --headless --config /etc/agentdeck/agentdeck.conf"_s,
          u"RestartPreventExitStatus=2"_s, u"Restart=on-failure"_s, u"KillSignal=SIGTERM"_s,
          u"WantedBy=multi-user.target"_s})
        QVERIFY2(lines.contains(wanted), qPrintable(wanted));
    // Longer than the default --shutdown-grace of 10s, with room for the stop after it.
    const QString timeout = lines.filter(QRegularExpression(u"^TimeoutStopSec=\\d+s$"_s)).value(0);
    QVERIFY2(!timeout.isEmpty(), "TimeoutStopSec=Ns is missing");
    QVERIFY(timeout.mid(15).chopped(1).toInt() >= 20);
}

// `systemd-analyze security` rated the unit 8.9 EXPOSED; what bubblewrap needs for the sandboxes
// (user, mount and network namespaces, mount(2)) is what keeps it above 0.
void PackagingTest::unitExposureIsAtMostFour()
{
    const QString analyze = QStandardPaths::findExecutable(u"systemd-analyze"_s);
    if (analyze.isEmpty())
        QSKIP("systemd-analyze is not installed (systemd; packaging/install-deps.sh installs it)");
    const QString unit = rootPath(u"/usr/lib/systemd/system/agentdeck.service"_s);
    const ToolResult security =
        runTool(analyze, {u"security"_s, u"--offline=true"_s, u"--no-pager"_s, unit});
    static const QRegularExpression overall(
        u"Overall exposure level for agentdeck\\.service: (\\d+\\.\\d)"_s);
    const auto match = overall.match(security.output);
    QVERIFY2(match.hasMatch(), qPrintable(security.output));
    const double exposure = match.captured(1).toDouble();
    QVERIFY2(exposure <= 4.0, qPrintable(security.output));
    // The settings that are there for the sandboxes, and would be tightened by mistake.
    QFile file(unit);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(file.readAll()).split(u'\n');
    for (const QString &wanted : {u"RestrictNamespaces=user mnt pid net ipc uts cgroup"_s,
                                  u"SystemCallFilter=@system-service @mount seccomp pidfd_getfd"_s,
                                  u"DeviceAllow=/dev/net/tun rw"_s,
                                  u"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK"_s})
        QVERIFY2(lines.contains(wanted), qPrintable(wanted));
    for (const QString &breaksBubblewrap :
         {u"ProtectKernelTunables=yes"_s, u"ProtectKernelLogs=yes"_s, u"ProcSubset=pid"_s,
          u"MemoryDenyWriteExecute=yes"_s})
        QVERIFY2(!lines.contains(breaksBubblewrap), qPrintable(breaksBubblewrap));
}

// The sandbox hosts of the daemon's data dir outlive a stop of the daemon (a restart adopts them);
// removing the package stops them, before their binary goes, and nobody else's. A fake host
// stands in: a script named agentdeck, started with a sandbox host's arguments.
void PackagingTest::prermStopsTheDataDirsSandboxHosts()
{
    const QString fake = m_work.filePath(u"fake/agentdeck"_s);
    QVERIFY(QDir().mkpath(QFileInfo(fake).path()));
    QFile script(fake);
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write("#!/bin/sh\ntrap 'exit 0' TERM\nwhile :; do sleep 1; done\n");
    script.close();
    QVERIFY(script.setPermissions(script.permissions() | QFile::ExeOwner));
    const QString ours =
        u"/var/lib/agentdeck/runtimes/%1"_s.arg(QUuid::createUuid().toString(QUuid::WithoutBraces));
    const QString others = m_work.filePath(u"elsewhere/runtimes/one"_s);
    std::vector<std::unique_ptr<QProcess>> hosts;
    for (const QString &runtimeDir : {ours, others}) {
        auto &host = hosts.emplace_back(std::make_unique<QProcess>());
        host->start(fake, {u"sandbox-host"_s, u"--runtime-dir"_s, runtimeDir, u"--socket"_s,
                           runtimeDir + u"/socket"_s});
        QVERIFY2(host->waitForStarted(), qPrintable(host->errorString()));
    }
    const auto cleanup = qScopeGuard([&hosts] {
        for (auto &host : hosts) {
            host->kill();
            host->waitForFinished();
        }
    });
    const QString prerm = QStringLiteral(AGENTDECK_SOURCE_DIR "/packaging/debian/prerm");

    // An upgrade leaves them: the daemon postinst restarts adopts them.
    ToolResult result = runTool(u"sh"_s, {prerm, u"upgrade"_s, u"0.1.0"_s});
    QVERIFY2(result.ok(), qPrintable(result.output));
    QCOMPARE(hosts[0]->state(), QProcess::Running);

    result = runTool(u"sh"_s, {prerm, u"remove"_s});
    QVERIFY2(result.ok(), qPrintable(result.output));
    QTRY_COMPARE_WITH_TIMEOUT(hosts[0]->state(), QProcess::NotRunning, DaemonTimeoutMs);
    QCOMPARE(hosts[1]->state(), QProcess::Running);
}

void PackagingTest::desktopEntryValidates()
{
    const QString validate = QStandardPaths::findExecutable(u"desktop-file-validate"_s);
    if (validate.isEmpty())
        QSKIP("desktop-file-validate is not installed (desktop-file-utils)");
    const QString path = rootPath(u"/usr/share/applications/org.agentdeck.AgentDeck.desktop"_s);
    const ToolResult result = runTool(validate, {path});
    QVERIFY2(result.ok() && result.output.trimmed().isEmpty(), qPrintable(result.output));
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(file.readAll());
    QVERIFY(text.contains(u"\nExec=agentdeck\n"_s));
    QVERIFY(text.contains(u"\nIcon=agentdeck\n"_s));
}

void PackagingTest::metainfoValidates()
{
    const QString appstreamcli = QStandardPaths::findExecutable(u"appstreamcli"_s);
    if (appstreamcli.isEmpty())
        QSKIP("appstreamcli is not installed (appstream)");
    const ToolResult result = runTool(
        appstreamcli, {u"validate"_s, u"--no-net"_s,
                       rootPath(u"/usr/share/metainfo/org.agentdeck.AgentDeck.metainfo.xml"_s)});
    QVERIFY2(result.ok(), qPrintable(result.output));
}

void PackagingTest::packagedDaemonNotifiesSystemd()
{
    // Started as the unit starts it: its ExecStart on the shipped conf, a state dir and a
    // NOTIFY_SOCKET, as systemd would provide them. Variables of the environment (a drop-in's
    // Environment=) win over the conf.
    NotifySocket notify(m_work.filePath(u"notify"_s));
    QVERIFY(notify.isValid());
    const QString state = m_work.filePath(u"state"_s);
    QVERIFY(QDir().mkpath(state));
    QStringList command = execStart();
    QCOMPARE(command.value(0), u"/usr/bin/agentdeck"_s);
    QCOMPARE(command.value(3), u"/etc/agentdeck/agentdeck.conf"_s);
    for (QString &argument : command)
        if (argument.startsWith(u'/'))
            argument = rootPath(argument);

    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(u"AGENTDECK_LISTEN"_s, u"127.0.0.1:0"_s);
    environment.insert(u"STATE_DIRECTORY"_s, state);
    environment.insert(u"NOTIFY_SOCKET"_s, notify.path());
    environment.insert(u"AGENTDECK_REPLICA_ID"_s, u"packaged"_s);
    environment.insert(u"AGENTDECK_RUNTIME"_s, u"local"_s);
    environment.insert(u"AGENTDECK_ALLOW_HOSTS"_s, u"agentdeck.lan,deck.lan"_s);
    environment.insert(u"AGENTDECK_MAX_SANDBOXES"_s, u"3"_s);

    QProcess daemon;
    daemon.setProcessEnvironment(environment);
    daemon.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    daemon.start(command.constFirst(), command.mid(1));
    QVERIFY2(daemon.waitForStarted(), qPrintable(daemon.errorString()));
    const auto cleanup = qScopeGuard([&daemon] {
        if (daemon.state() != QProcess::NotRunning) {
            daemon.kill();
            daemon.waitForFinished();
        }
    });

    QTRY_VERIFY2_WITH_TIMEOUT(notify.received("READY=1") || daemon.state() == QProcess::NotRunning,
                              qPrintable(notify.describe()), DaemonTimeoutMs);
    QVERIFY2(notify.received("READY=1"), "the daemon exited before it was ready");
    const QRegularExpression status(u"STATUS=serving on (http://127\\.0\\.0\\.1:\\d+)"_s);
    const auto match = status.match(QString::fromUtf8(notify.message("READY=1")));
    QVERIFY2(match.hasMatch(), qPrintable(notify.describe()));
    QVERIFY2(QFileInfo::exists(state + u"/agentdeck.db"_s), "the catalog is not in the state dir");

    // Ready means usable: /ready answers 200 at once. The variables became options.
    QNetworkAccessManager network;
    std::unique_ptr<QNetworkReply> ready(
        network.get(QNetworkRequest(QUrl(match.captured(1) + u"/ready"_s))));
    QTRY_VERIFY_WITH_TIMEOUT(ready->isFinished(), DaemonTimeoutMs);
    QCOMPARE(ready->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(), 200);
    std::unique_ptr<QNetworkReply> info(
        network.get(QNetworkRequest(QUrl(match.captured(1) + u"/server_info"_s))));
    QTRY_VERIFY_WITH_TIMEOUT(info->isFinished(), DaemonTimeoutMs);
    const QJsonObject server = QJsonDocument::fromJson(info->readAll()).object();
    QCOMPARE(server.value(u"replica_id"_s).toString(), u"packaged"_s);
    for (const auto &[host, status] : {std::pair{"deck.lan"_ba, 200}, {"evil.example"_ba, 403}}) {
        QNetworkRequest request(QUrl(match.captured(1) + u"/api/conversations/count"_s));
        request.setRawHeader("Host", host);
        std::unique_ptr<QNetworkReply> count(network.get(request));
        QTRY_VERIFY_WITH_TIMEOUT(count->isFinished(), DaemonTimeoutMs);
        QCOMPARE(count->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(), status);
    }

    QVERIFY(!notify.received("STOPPING=1"));
    ::kill(pid_t(daemon.processId()), SIGTERM);
    QTRY_VERIFY2_WITH_TIMEOUT(notify.received("STOPPING=1"), qPrintable(notify.describe()),
                              DaemonTimeoutMs);
    // It may have exited while the loop above processed events.
    QVERIFY(daemon.state() == QProcess::NotRunning || daemon.waitForFinished(DaemonTimeoutMs));
    QCOMPARE(daemon.exitStatus(), QProcess::NormalExit);
    QCOMPARE(daemon.exitCode(), 0);
}

// The unit's sandboxing is what bubblewrap, slirp4netns and the egress filter get: under its mount
// settings and its system call filter, as nobody, a sandbox starts and an egress command has its
// network. (ProtectKernelLogs= and a filter without pidfd_getfd each broke one of them.) Not the
// unit under systemd itself: what needs systemd (the device policy, namespace restrictions) is
// left out.
void PackagingTest::sandboxesStartUnderTheUnitsSandboxing()
{
    if (::geteuid() != 0)
        QSKIP("needs root, to make the unit's mounts");
    for (const QString &tool : {u"unshare"_s, u"setpriv"_s, u"python3"_s, u"bwrap"_s,
                                u"slirp4netns"_s, u"systemd-analyze"_s, u"mknod"_s})
        if (QStandardPaths::findExecutable(tool).isEmpty())
            QSKIP(qPrintable(tool + u" is not installed"_s));
    if (!QFileInfo::exists(u"/usr/lib/x86_64-linux-gnu/libseccomp.so.2"_s) &&
        runTool(u"python3"_s, {u"-c"_s, u"import ctypes; ctypes.CDLL('libseccomp.so.2')"_s})
            .exitCode)
        QSKIP("libseccomp is not installed");
    if (!QFileInfo::exists(u"/dev/net/tun"_s))
        QSKIP("no /dev/net/tun");

    // nobody reaches the extracted binary and conf, and owns the state dir.
    QVERIFY(QFile::setPermissions(m_work.path(), QFile::ReadOwner | QFile::WriteOwner |
                                                     QFile::ExeOwner | QFile::ReadOther |
                                                     QFile::ExeOther));
    const QString state = m_work.filePath(u"unit-state"_s);
    QVERIFY(QDir().mkpath(state));
    QVERIFY(runTool(u"chown"_s, {u"nobody:nogroup"_s, state}).ok());
    const QString seccomp = m_work.filePath(u"unit-seccomp.py"_s);
    QFile script(seccomp);
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write(UnitSeccomp);
    script.close();
    // Copies nobody can read: the extracted conf is root's alone, as packaged.
    const QString unit = m_work.filePath(u"unit-agentdeck.service"_s);
    const QString conf = m_work.filePath(u"unit-agentdeck.conf"_s);
    QVERIFY(QFile::copy(rootPath(u"/usr/lib/systemd/system/agentdeck.service"_s), unit));
    QVERIFY(QFile::copy(rootPath(u"/etc/agentdeck/agentdeck.conf"_s), conf));
    for (const QString &path : {unit, conf})
        QVERIFY(QFile::setPermissions(path, QFile::ReadOwner | QFile::ReadOther));

    QStringList command = execStart();
    for (QString &argument : command)
        if (argument.startsWith(u'/'))
            argument = rootPath(argument);
    command[3] = conf;
    QProcess daemon;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(u"WORK"_s, m_work.path());
    environment.insert(u"UNIT"_s, unit);
    daemon.setProcessEnvironment(environment);
    daemon.start(u"unshare"_s,
                 QStringList{u"--mount"_s, u"--uts"_s, u"--propagation"_s, u"private"_s, u"sh"_s,
                             u"-c"_s, QString::fromLatin1(UnitMounts), u"unit-mounts"_s, u"env"_s,
                             u"-i"_s, u"PATH=/usr/bin:/bin"_s, u"STATE_DIRECTORY="_s + state,
                             u"AGENTDECK_LISTEN=127.0.0.1:0"_s,
                             u"AGENTDECK_REQUIRE_ISOLATION=yes"_s,
                             u"AGENTDECK_SANDBOX_NETWORK=egress"_s, u"python3"_s, seccomp, unit} +
                     command);
    QVERIFY2(daemon.waitForStarted(), qPrintable(daemon.errorString()));
    const auto cleanup = qScopeGuard([&daemon] {
        daemon.kill();
        daemon.waitForFinished();
    });
    QByteArray log;
    const QRegularExpression listening(u"listening on (http://127\\.0\\.0\\.1:\\d+)"_s);
    QTRY_VERIFY2_WITH_TIMEOUT(
        (log += daemon.readAllStandardError(), listening.match(QString::fromUtf8(log)).hasMatch() ||
                                                   daemon.state() == QProcess::NotRunning),
        log.constData(), DaemonTimeoutMs);
    const auto match = listening.match(QString::fromUtf8(log));
    QVERIFY2(match.hasMatch(), log.constData());

    QNetworkAccessManager network;
    const auto call = [&](const QString &path, const QByteArray &body) {
        QNetworkRequest request(QUrl(match.captured(1) + path));
        request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);
        std::unique_ptr<QNetworkReply> reply(body.isEmpty() ? network.get(request)
                                                            : network.post(request, body));
        if (!QTest::qWaitFor([&] { return reply->isFinished(); }, DaemonTimeoutMs))
            return QJsonObject{{u"timed_out"_s, true}};
        return QJsonDocument::fromJson(reply->readAll()).object();
    };
    const QJsonObject sandbox = call(u"/server_info"_s, {}).value(u"sandbox"_s).toObject();
    QCOMPARE(sandbox.value(u"isolation"_s).toString(), u"bubblewrap"_s);
    QVERIFY2(sandbox.value(u"not_enforced"_s).toArray().isEmpty(),
             QJsonDocument(sandbox).toJson().constData());
    const QJsonObject output =
        call(u"/api/bash/execute_bash_command"_s,
             R"({"command": "id -un; cat /proc/net/dev", "timeout": 20})"_ba);
    QCOMPARE(output.value(u"exit_code"_s).toInt(-1), 0);
    const QString stdoutText = output.value(u"stdout"_s).toString();
    QVERIFY2(stdoutText.contains(u"tap0:"_s),
             qPrintable(stdoutText + output.value(u"stderr"_s).toString()));
    QVERIFY2(output.value(u"stderr"_s).toString().isEmpty(),
             qPrintable(output.value(u"stderr"_s).toString()));
}

void PackagingTest::badDatabaseUrlsFailClearly()
{
    // A URL that cannot be right exits 2, which is in RestartPreventExitStatus (no restart loop
    // on a configuration mistake); an unreachable database exits 1, and systemd tries again.
    for (const auto &[url, exitCode, words] :
         {std::tuple{u"mysql://db.example/agentdeck"_s, 2, "AGENTDECK_DATABASE_URL"_ba},
          std::tuple{u"postgresql://agentdeck:hunter2@127.0.0.1:1/agentdeck"_s, 1,
                     "cannot connect"_ba}}) {
        QProcess daemon;
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(u"AGENTDECK_DATABASE_URL"_s, url);
        environment.insert(u"STATE_DIRECTORY"_s, m_work.filePath(u"refused"_s));
        daemon.setProcessEnvironment(environment);
        daemon.start(
            rootPath(u"/usr/bin/agentdeck"_s),
            {u"--headless"_s, u"--config"_s, rootPath(u"/etc/agentdeck/agentdeck.conf"_s)});
        QVERIFY(daemon.waitForFinished(DaemonTimeoutMs));
        QCOMPARE(daemon.exitCode(), exitCode);
        const QByteArray stderrText = daemon.readAllStandardError();
        QVERIFY2(stderrText.contains(words), stderrText.constData());
        // The password never reaches the log.
        QVERIFY2(!stderrText.contains("hunter2"), stderrText.constData());
    }
}

void PackagingTest::shipsDocumentation_data()
{
    QTest::addColumn<QString>("path");
    for (const char *path :
         {"/usr/share/doc/agentdeck/copyright", "/usr/share/doc/agentdeck/changelog.gz",
          "/usr/share/man/man1/agentdeck.1.gz", "/usr/share/man/man1/agentdeck-ctl.1.gz",
          "/usr/share/bash-completion/completions/agentdeck",
          "/usr/share/zsh/vendor-completions/_agentdeck"})
        QTest::addRow("%s", path) << QString::fromLatin1(path);
    // All of docs/, laid out as in the repository so that the README's links hold.
    const QDir docs(QStringLiteral(AGENTDECK_SOURCE_DIR "/docs"));
    for (QDirIterator it(docs.path(), QDir::Files, QDirIterator::Subdirectories); it.hasNext();) {
        const QString relative = docs.relativeFilePath(it.next());
        QTest::addRow("docs/%s", qPrintable(relative))
            << u"/usr/share/doc/agentdeck/docs/"_s + relative;
    }
}

void PackagingTest::shipsDocumentation()
{
    QFETCH(QString, path);
    const QFileInfo info(rootPath(path));
    QVERIFY2(info.isFile() && info.size() > 0, qPrintable(path + u" is missing or empty"_s));
    QVERIFY(!info.isExecutable());
}

void PackagingTest::copyrightIsMachineReadable()
{
    QFile file(rootPath(u"/usr/share/doc/agentdeck/copyright"_s));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(file.readAll()).split(u'\n');
    QCOMPARE(lines.value(0),
             u"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"_s);
    QVERIFY(lines.contains(u"Files: *"_s));
    QCOMPARE(lines.count(u"License: Apache-2.0"_s), 2); // the files' and the license's paragraph
    // The repository's license is the one the copyright file names.
    QFile license(QStringLiteral(AGENTDECK_SOURCE_DIR "/LICENSE"));
    QVERIFY(license.open(QIODevice::ReadOnly));
    QVERIFY(license.readAll().trimmed().startsWith("Apache License\n"));
}

void PackagingTest::changelogNamesThisVersion()
{
    const ToolResult changelog =
        runTool(u"gzip"_s, {u"-dc"_s, rootPath(u"/usr/share/doc/agentdeck/changelog.gz"_s)});
    QVERIFY2(changelog.ok(), qPrintable(changelog.output));
    QVERIFY2(
        changelog.output.startsWith(u"agentdeck ("_s + QStringLiteral(AGENTDECK_VERSION) + u") "_s),
        qPrintable(changelog.output.section(u'\n', 0, 0)));
}

void PackagingTest::lintianFindsNoErrors()
{
    const QString lintian = QStandardPaths::findExecutable(u"lintian"_s);
    if (lintian.isEmpty())
        QSKIP("lintian is not installed");
    const ToolResult result = runTool(lintian, {u"--fail-on"_s, u"error"_s, m_deb}, CpackTimeoutMs);
    QVERIFY2(result.ok(), qPrintable(result.output));
}

QTEST_GUILESS_MAIN(PackagingTest)
#include "tst_packaging.moc"
