#include "dockerdaemon.h"

#include "runtime/dockerengine.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTcpServer>

#include <QCoroTask>

#include <algorithm>
#include <csignal>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Testing {

QJsonArray containersLabelled(DockerEngine &engine, const QStringList &labels)
{
    return QCoro::waitFor(engine.listContainers(labels)).json.array();
}

namespace {
constexpr int StartTimeoutMs = 60'000;
constexpr int StopTimeoutMs = 30'000;

// A mount point as /proc/self/mountinfo writes it: space, tab, newline and backslash escaped
// in octal.
QString unescapeMountPoint(const QByteArray &field)
{
    QByteArray path;
    for (qsizetype i = 0; i < field.size(); ++i) {
        if (field.at(i) == '\\' && i + 3 < field.size()) {
            path.append(char(field.mid(i + 1, 3).toInt(nullptr, 8)));
            i += 3;
        } else {
            path.append(field.at(i));
        }
    }
    return QString::fromLocal8Bit(path);
}
} // namespace

DockerDaemon::DockerDaemon() = default;

DockerDaemon::~DockerDaemon()
{
    stop();
}

QString DockerDaemon::host() const
{
    return m_execRoot ? u"unix://"_s + m_execRoot->filePath(u"docker.sock"_s) : QString();
}

QString DockerDaemon::logTail() const
{
    QFile log(m_dataRoot->filePath(u"dockerd.log"_s));
    if (!log.open(QIODevice::ReadOnly))
        return {};
    const QByteArray text = log.readAll();
    return QString::fromLocal8Bit(text.right(2000));
}

namespace {
// A CA, a server certificate for 127.0.0.1 and a client certificate of it in `dir` (ca.pem,
// server-cert.pem, server-key.pem, cert.pem, key.pem); false with openssl's words.
bool makeCertificates(const QString &dir, QString *error)
{
    const QString script = uR"(set -e
cd "$1"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj /CN=agentdeck-test-ca
openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth
' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile server.ext -out server-cert.pem
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj /CN=agentdeck-test-client
printf 'extendedKeyUsage=clientAuth
' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile client.ext -out cert.pem
)"_s;
    QDir().mkpath(dir);
    QProcess openssl;
    openssl.setProcessChannelMode(QProcess::MergedChannels);
    openssl.start(u"bash"_s, {u"-c"_s, script, u"certificates"_s, dir});
    if (!openssl.waitForFinished(60'000) || openssl.exitCode() != 0) {
        *error = u"cannot make the test's certificates: "_s +
                 QString::fromLocal8Bit(openssl.readAll().right(500));
        return false;
    }
    return true;
}

quint16 freeLoopbackPort()
{
    QTcpServer probe;
    probe.listen(QHostAddress::LocalHost, 0);
    return probe.serverPort();
}
} // namespace

QString DockerDaemon::tlsDirectory() const
{
    return m_execRoot ? m_execRoot->filePath(u"tls"_s) : QString();
}

QString DockerDaemon::foreignTlsDirectory() const
{
    return m_execRoot ? m_execRoot->filePath(u"foreign-tls"_s) : QString();
}

bool DockerDaemon::start(QString *error, bool tls)
{
    if (::geteuid() != 0) {
        *error = u"dockerd needs root, and this test runs as uid %1"_s.arg(::geteuid());
        return false;
    }
    const QString dockerd = QStandardPaths::findExecutable(u"dockerd"_s);
    if (dockerd.isEmpty()) {
        *error = u"dockerd is not installed; packaging/install-deps.sh installs docker.io"_s;
        return false;
    }
    m_dataRoot = std::make_unique<QTemporaryDir>(QDir::tempPath() + u"/agentdeck-docker-XXXXXX"_s);
    m_execRoot = std::make_unique<QTemporaryDir>(u"/tmp/adx-XXXXXX"_s);
    if (!m_dataRoot->isValid() || !m_execRoot->isValid()) {
        *error = u"cannot create the temporary directories of dockerd"_s;
        return false;
    }
    const QString socket = m_execRoot->filePath(u"docker.sock"_s);
    QStringList tlsArguments;
    if (tls) {
        if (!makeCertificates(tlsDirectory(), error) ||
            !makeCertificates(foreignTlsDirectory(), error))
            return false;
        m_tlsHost = u"tcp://127.0.0.1:%1"_s.arg(freeLoopbackPort());
        const QDir dir(tlsDirectory());
        tlsArguments = {u"-H"_s,
                        m_tlsHost,
                        u"--tlsverify"_s,
                        u"--tlscacert"_s,
                        dir.filePath(u"ca.pem"_s),
                        u"--tlscert"_s,
                        dir.filePath(u"server-cert.pem"_s),
                        u"--tlskey"_s,
                        dir.filePath(u"server-key.pem"_s)};
    }
    m_process = std::make_unique<QProcess>();
    m_process->setProgram(dockerd);
    m_process->setArguments(QStringList{
                                u"--bridge=none"_s,
                                u"--iptables=false"_s,
                                u"--ip6tables=false"_s,
                                u"--data-root"_s,
                                m_dataRoot->filePath(u"data"_s),
                                u"--exec-root"_s,
                                m_execRoot->filePath(u"x"_s),
                                u"--pidfile"_s,
                                m_execRoot->filePath(u"dockerd.pid"_s),
                                u"-H"_s,
                                u"unix://"_s + socket,
                            } +
                            tlsArguments);
    // The engine's own settings and a user's must not leak in, nor a proxy.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    for (const QString &name : environment.keys()) {
        if (name.startsWith(u"DOCKER_"_s) || name.endsWith(u"_proxy"_s, Qt::CaseInsensitive))
            environment.remove(name);
    }
    m_process->setProcessEnvironment(environment);
    m_process->setStandardOutputFile(m_dataRoot->filePath(u"dockerd.log"_s));
    m_process->setProcessChannelMode(QProcess::SeparateChannels);
    // dockerd logs to stderr; waitForReadyRead() waits on the read channel.
    m_process->setReadChannel(QProcess::StandardError);
    // Its stderr is read here for the line saying the API listens; a dead test takes it along.
    m_process->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });

    QElapsedTimer elapsed;
    elapsed.start();
    m_process->start();
    if (!m_process->waitForStarted()) {
        *error = u"cannot start %1: %2"_s.arg(dockerd, m_process->errorString());
        return false;
    }
    QFile log(m_dataRoot->filePath(u"dockerd.log"_s));
    log.open(QIODevice::Append);
    const QByteArray ready = "API listen on " + socket.toLocal8Bit();
    QByteArray seen;
    const QDeadlineTimer deadline(StartTimeoutMs);
    while (!seen.contains(ready)) {
        if (m_process->state() != QProcess::Running || deadline.hasExpired() ||
            !m_process->waitForReadyRead(int(deadline.remainingTime()))) {
            seen += m_process->readAllStandardError();
            log.write(seen);
            log.close();
            *error = m_process->state() == QProcess::Running
                         ? u"dockerd did not listen within %1 ms; its log ends:\n%2"_s.arg(
                               QString::number(StartTimeoutMs), logTail())
                         : u"dockerd exited before it listened; its log ends:\n%1"_s.arg(logTail());
            return false;
        }
        seen += m_process->readAllStandardError();
    }
    log.write(seen);
    log.close();
    // Once listening, its log goes to the file like the rest.
    QObject::connect(m_process.get(), &QProcess::readyReadStandardError, m_process.get(), [this] {
        QFile file(m_dataRoot->filePath(u"dockerd.log"_s));
        if (file.open(QIODevice::Append))
            file.write(m_process->readAllStandardError());
    });

    DockerEngine engine(host());
    const DockerResult pong = QCoro::waitFor(engine.ping());
    m_startMilliseconds = elapsed.elapsed();
    if (!pong.ok() || pong.body != "OK") {
        *error = u"dockerd listens but does not answer /_ping: %1"_s.arg(pong.error);
        return false;
    }
    return true;
}

void DockerDaemon::stop()
{
    if (m_process && m_process->state() != QProcess::NotRunning) {
        // SIGTERM: dockerd stops its containers and its containerd, and unmounts their layers.
        m_process->terminate();
        if (!m_process->waitForFinished(StopTimeoutMs)) {
            qWarning("dockerd did not stop within %d ms; killing it", StopTimeoutMs);
            m_process->kill();
            m_process->waitForFinished(5000);
        }
    }
    m_process.reset();
    unmountLeftovers();
    m_dataRoot.reset();
    m_execRoot.reset();
}

// After a killed dockerd, layers and a container's mounts may still be mounted below its
// directories, and deleting through them would fail (or reach a bind-mounted workspace).
void DockerDaemon::unmountLeftovers()
{
    QStringList roots;
    if (m_dataRoot)
        roots << m_dataRoot->path() + u'/';
    if (m_execRoot)
        roots << m_execRoot->path() + u'/';
    if (roots.isEmpty())
        return;
    QFile mountInfo(u"/proc/self/mountinfo"_s);
    if (!mountInfo.open(QIODevice::ReadOnly))
        return;
    QStringList mounted;
    for (const QByteArray &line : mountInfo.readAll().split('\n')) {
        const QList<QByteArray> fields = line.split(' ');
        if (fields.size() < 5)
            continue;
        const QString point = unescapeMountPoint(fields.at(4));
        for (const QString &root : roots) {
            if (point.startsWith(root))
                mounted << point;
        }
    }
    // Deepest first, so nothing is unmounted from under a mount still inside it.
    std::sort(mounted.begin(), mounted.end(),
              [](const QString &a, const QString &b) { return a.size() > b.size(); });
    for (const QString &point : mounted)
        ::umount2(QFile::encodeName(point).constData(), MNT_DETACH);
}

bool DockerDaemon::importBusyboxImage(const QString &repository, const QString &tag, QString *error)
{
    return importImage(repository, tag, false, error);
}

bool DockerDaemon::startWithTestImage(QString *error, bool tls)
{
    return start(error, tls) && importShellImage(u"agentdeck-test"_s, u"shell"_s, error);
}

std::unique_ptr<DockerEngine> DockerDaemon::client() const
{
    auto engine = std::make_unique<DockerEngine>(host());
    engine->setDefaultTimeout(std::chrono::seconds(20));
    return engine;
}

bool DockerDaemon::importShellImage(const QString &repository, const QString &tag, QString *error)
{
    return importImage(repository, tag, true, error);
}

bool DockerDaemon::importImage(const QString &repository, const QString &tag, bool withBash,
                               QString *error)
{
    const QString busybox = u"/bin/busybox"_s;
    QProcess list;
    list.start(busybox, {u"--list"_s});
    if (!list.waitForFinished(10'000) || list.exitCode() != 0) {
        *error = u"cannot run %1 --list; packaging/install-deps.sh installs busybox-static"_s.arg(
            busybox);
        return false;
    }
    QTemporaryDir root;
    const QDir dir(root.path());
    for (const char *sub : {"bin", "tmp", "workspace", "etc", "proc", "sys", "dev"})
        dir.mkpath(QString::fromLatin1(sub));
    // As in every image: the engine's tmpfs on /tmp takes the mode of the image's /tmp.
    ::chmod(QFile::encodeName(root.filePath(u"tmp"_s)).constData(), 01777);
    if (!QFile::copy(busybox, root.filePath(u"bin/busybox"_s))) {
        *error = u"cannot copy %1 into the image's root"_s.arg(busybox);
        return false;
    }
    for (const QByteArray &applet : list.readAllStandardOutput().split('\n')) {
        const QString name = QString::fromLatin1(applet.trimmed());
        if (!name.isEmpty() && name != "busybox"_L1)
            QFile::link(u"busybox"_s, root.filePath(u"bin/"_s + name));
    }
    if (withBash) {
        // bash and what ldd says it loads, at the same paths.
        QProcess ldd;
        ldd.start(u"ldd"_s, {u"/bin/bash"_s});
        if (!ldd.waitForFinished(10'000) || ldd.exitCode() != 0) {
            *error = u"cannot list the libraries of /bin/bash"_s;
            return false;
        }
        QStringList files{u"/bin/bash"_s};
        static const QRegularExpression path(u"(/\\S+)"_s);
        for (const QString &line :
             QString::fromLocal8Bit(ldd.readAllStandardOutput()).split(u'\n')) {
            if (const auto match = path.match(line); match.hasMatch())
                files << match.captured(1);
        }
        for (const QString &file : std::as_const(files)) {
            const QString target = root.filePath(file.mid(1));
            QFile::remove(target);
            if (!dir.mkpath(QFileInfo(target).path()) || !QFile::copy(file, target)) {
                *error = u"cannot copy %1 into the image's root"_s.arg(file);
                return false;
            }
        }
    }
    QProcess tar;
    tar.start(u"tar"_s, {u"-C"_s, root.path(), u"--numeric-owner"_s, u"-cf"_s, u"-"_s, u"."_s});
    if (!tar.waitForFinished(60'000) || tar.exitCode() != 0) {
        *error = u"cannot pack the image's root: %1"_s.arg(
            QString::fromLocal8Bit(tar.readAllStandardError()));
        return false;
    }
    DockerEngine engine(host());
    const DockerResult imported =
        QCoro::waitFor(engine.importImage(tar.readAllStandardOutput(), repository, tag));
    if (!imported.ok()) {
        *error = imported.error;
        return false;
    }
    return true;
}

} // namespace AgentDeck::Testing
