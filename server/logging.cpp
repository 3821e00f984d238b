#include "logging.h"

namespace AgentDeck {
Q_LOGGING_CATEGORY(lcServer, "agentdeck.server", QtInfoMsg)
Q_LOGGING_CATEGORY(lcHttp, "agentdeck.http", QtInfoMsg)
Q_LOGGING_CATEGORY(lcStreams, "agentdeck.streams", QtInfoMsg)
Q_LOGGING_CATEGORY(lcStorage, "agentdeck.storage", QtInfoMsg)
Q_LOGGING_CATEGORY(lcExecution, "agentdeck.execution", QtInfoMsg)
Q_LOGGING_CATEGORY(lcRuntime, "agentdeck.runtime", QtInfoMsg)
} // namespace AgentDeck

namespace AgentDeck {

RepeatedFailureLog::RepeatedFailureLog(Category category, QString what,
                                       std::chrono::milliseconds interval)
    : m_category(category)
    , m_what(std::move(what))
    , m_interval(interval)
{}

void RepeatedFailureLog::failed(const QString &why)
{
    ++m_failures;
    ++m_unreported;
    if (m_failures == 1) {
        qCWarning(m_category).noquote() << m_what << "failed:" << why;
    } else if (m_sinceReport.elapsed() >= m_interval.count()) {
        qCWarning(m_category).noquote()
            << m_what << "failed" << m_unreported << "more times:" << why;
    } else {
        return;
    }
    m_unreported = 0;
    m_sinceReport.start();
}

void RepeatedFailureLog::succeeded()
{
    if (m_failures == 0)
        return;
    qCInfo(m_category).noquote() << m_what << "works again after" << m_failures
                                 << (m_failures == 1 ? "failure" : "failures");
    m_failures = 0;
    m_unreported = 0;
}

} // namespace AgentDeck
