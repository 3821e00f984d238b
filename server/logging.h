#pragma once

#include <QElapsedTimer>
#include <QLoggingCategory>
#include <QString>

#include <chrono>

namespace AgentDeck {
Q_DECLARE_LOGGING_CATEGORY(lcServer)
Q_DECLARE_LOGGING_CATEGORY(lcHttp)
Q_DECLARE_LOGGING_CATEGORY(lcStreams)
Q_DECLARE_LOGGING_CATEGORY(lcStorage)
Q_DECLARE_LOGGING_CATEGORY(lcExecution)
Q_DECLARE_LOGGING_CATEGORY(lcRuntime)

// A failure of work that repeats on a timer is logged when it begins, then at most once per
// `interval` with how often it happened since, and once more when the work succeeds again. A
// checkpoint failing every 200 ms on a full disk wrote 18,000 lines an hour, each saying what
// the first one had.
class RepeatedFailureLog
{
public:
    using Category = const QLoggingCategory &(*)();
    RepeatedFailureLog(Category category, QString what,
                       std::chrono::milliseconds interval = std::chrono::minutes(1));

    void failed(const QString &why);
    void succeeded();

private:
    Category m_category;
    QString m_what;
    std::chrono::milliseconds m_interval;
    qint64 m_failures = 0;   // since the work last succeeded
    qint64 m_unreported = 0; // since the last line
    QElapsedTimer m_sinceReport;
};
} // namespace AgentDeck
