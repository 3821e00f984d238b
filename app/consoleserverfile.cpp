#include "consoleserverfile.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QSaveFile>
#include <QStandardPaths>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// $XDG_RUNTIME_DIR when it is a dir of this user's that no one else may enter.
QString sessionRuntimeDir()
{
    const QByteArray dir = qgetenv("XDG_RUNTIME_DIR");
    struct stat status
    {};
    if (dir.isEmpty() || ::stat(dir.constData(), &status) != 0 || !S_ISDIR(status.st_mode) ||
        status.st_uid != ::geteuid() || (status.st_mode & 077) != 0)
        return {};
    return QFile::decodeName(dir);
}

// Written whole or not at all, and readable by its user alone whatever the umask: it holds a
// key.
bool writePrivately(const QString &path, const QByteArray &content)
{
    QSaveFile file(path);
    return file.open(QIODevice::WriteOnly) && file.write(content) == content.size() &&
           file.commit() &&
           QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner);
}

QJsonObject readObject(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(file.readAll()).object();
}
} // namespace

QString defaultDataDir()
{
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + u"/agentdeck"_s;
}

QString consoleServerFile(const QString &dataDir)
{
    const QString runtime = sessionRuntimeDir();
    return runtime.isEmpty() ? QDir(dataDir).filePath(u"console-server"_s)
                             : QDir(runtime).filePath(u"agentdeck-console"_s);
}

bool writeConsoleServer(const QString &dataDir, const QUrl &url, const QString &apiKey)
{
    const QJsonObject written{{u"url"_s, url.toString()},
                              {u"pid"_s, QCoreApplication::applicationPid()},
                              {u"api_key"_s, apiKey},
                              {u"data_dir"_s, QDir(dataDir).absolutePath()}};
    return writePrivately(consoleServerFile(dataDir),
                          QJsonDocument(written).toJson(QJsonDocument::Compact) + '\n');
}

void removeConsoleServer(const QString &dataDir)
{
    // Only its own: a second console started later wrote its server there since.
    const QString path = consoleServerFile(dataDir);
    if (readObject(path).value(u"pid"_s).toInteger() == QCoreApplication::applicationPid())
        QFile::remove(path);
}

std::optional<ConsoleServer> runningConsoleServer()
{
    const QString path = consoleServerFile(defaultDataDir());
    const QJsonObject written = readObject(path);
    const qint64 pid = written.value(u"pid"_s).toInteger();
    // A console killed leaves it behind, and its pid may be another process's in time: the
    // pid must still be an agentdeck.
    if (pid <= 0 || ::kill(pid_t(pid), 0) != 0)
        return std::nullopt;
    QFile command(u"/proc/%1/cmdline"_s.arg(pid));
    if (!command.open(QIODevice::ReadOnly) || !command.readAll().contains("agentdeck"))
        return std::nullopt;
    const QUrl url(written.value(u"url"_s).toString());
    if (!url.isValid() || url.scheme() != u"http"_s)
        return std::nullopt;
    return ConsoleServer{url, written.value(u"api_key"_s).toString(), path};
}

QString consoleApiKey(const QString &dataDir, QString *error)
{
    const QString path = QDir(dataDir).filePath(u"console.key"_s);
    QFile existing(path);
    if (existing.open(QIODevice::ReadOnly)) {
        const QString key = QString::fromLatin1(existing.readAll()).trimmed();
        if (!key.isEmpty())
            return key;
    }
    quint32 random[8];
    QRandomGenerator::system()->fillRange(random);
    const QString key = QString::fromLatin1(
        QByteArray(reinterpret_cast<const char *>(random), sizeof random).toHex());
    if (!QDir().mkpath(dataDir) || !writePrivately(path, key.toLatin1() + '\n')) {
        *error = u"cannot write the console's key to "_s + path;
        return {};
    }
    return key;
}

} // namespace AgentDeck
