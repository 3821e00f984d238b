#include "logoutput.h"

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <atomic>
#include <cstdio>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::LogOutput {

namespace {

std::atomic<Format> g_format{Format::Text};

// systemd sets JOURNAL_STREAM to the device and inode of the stream it gave as stdout/stderr;
// the journal is ours only while stderr is that stream (not once redirected elsewhere).
bool stderrIsJournal()
{
    static const bool journal = [] {
        const QByteArray stream = qgetenv("JOURNAL_STREAM");
        struct stat status
        {};
        if (stream.isEmpty() || ::fstat(STDERR_FILENO, &status) != 0)
            return false;
        return stream == QByteArray::number(quint64(status.st_dev)) + ':' +
                             QByteArray::number(quint64(status.st_ino));
    }();
    return journal;
}

const char *levelOf(QtMsgType type)
{
    switch (type) {
    case QtDebugMsg:
        return "debug";
    case QtInfoMsg:
        return "info";
    case QtWarningMsg:
        return "warning";
    case QtCriticalMsg:
        return "critical";
    case QtFatalMsg:
        return "fatal";
    }
    return "info";
}

int priorityOf(QtMsgType type)
{
    switch (type) {
    case QtDebugMsg:
        return LOG_DEBUG;
    case QtInfoMsg:
        return LOG_INFO;
    case QtWarningMsg:
        return LOG_WARNING;
    case QtCriticalMsg:
        return LOG_ERR;
    case QtFatalMsg:
        return LOG_CRIT;
    }
    return LOG_INFO;
}

QString plainIds(const QString &message)
{
    if (!message.contains(u"QUuid("_s))
        return message;
    static const QRegularExpression quoted(u"QUuid\\(\"\\{([0-9a-fA-F-]{36})\\}\"\\)"_s);
    return QString(message).replace(quoted, u"\\1"_s);
}

void write(QtMsgType type, const QMessageLogContext &context, const QString &text)
{
    const QString message = plainIds(text);
    const char *category = context.category ? context.category : "default";
    if (stderrIsJournal()) {
        const QByteArray utf8 = message.toUtf8();
        if (sd_journal_send("MESSAGE=%s", utf8.constData(), "PRIORITY=%d", priorityOf(type),
                            "SYSLOG_IDENTIFIER=agentdeck", "AGENTDECK_CATEGORY=%s", category,
                            nullptr) >= 0)
            return;
    }
    const QDateTime now = QDateTime::currentDateTime();
    const QString time = now.toOffsetFromUtc(now.offsetFromUtc()).toString(Qt::ISODateWithMs);
    QByteArray line;
    if (g_format.load() == Format::Json) {
        line = QJsonDocument(QJsonObject{{u"time"_s, time},
                                         {u"level"_s, QString::fromLatin1(levelOf(type))},
                                         {u"category"_s, QString::fromUtf8(category)},
                                         {u"message"_s, message}})
                   .toJson(QJsonDocument::Compact);
    } else {
        line = time.toUtf8() + ' ' + levelOf(type) + ' ' + category + ": " + message.toUtf8();
    }
    line += '\n';
    std::fwrite(line.constData(), 1, size_t(line.size()), stderr);
    std::fflush(stderr);
    // A fatal message ends the process after its handler returns (Qt does it): a handler chained
    // after this one (the console's refusal without a window system) still runs.
}

} // namespace

std::optional<Format> formatFromString(const QString &text)
{
    if (text == u"text"_s)
        return Format::Text;
    if (text == u"json"_s)
        return Format::Json;
    return std::nullopt;
}

void install(Format format)
{
    g_format = format;
    qInstallMessageHandler(write);
}

} // namespace AgentDeck::LogOutput
