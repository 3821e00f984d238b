#include "bashevents.h"

#include <QJsonDocument>
#include <QMetaMethod>

namespace AgentDeck {

void BashEventLog::add(const QJsonObject &event)
{
    quint64 number;
    {
        const QMutexLocker lock(&m_mutex);
        number = ++m_last;
        m_events.append({number, event});
        while (m_events.size() > MaxEvents)
            m_events.removeFirst();
    }
    // Written out only for a bash-events socket that follows (an output may be 1 MiB).
    if (isSignalConnected(QMetaMethod::fromSignal(&BashEventLog::added)))
        Q_EMIT added(number, QJsonDocument(event).toJson(QJsonDocument::Compact));
}

std::optional<QJsonObject> BashEventLog::find(const QString &id) const
{
    const QMutexLocker lock(&m_mutex);
    for (const Numbered &numbered : m_events) {
        if (numbered.event.value(QLatin1StringView("id")).toString() == id)
            return numbered.event;
    }
    return std::nullopt;
}

QList<QJsonObject> BashEventLog::all() const
{
    const QMutexLocker lock(&m_mutex);
    QList<QJsonObject> events;
    events.reserve(m_events.size());
    for (const Numbered &numbered : m_events)
        events.append(numbered.event);
    return events;
}

qsizetype BashEventLog::clear()
{
    const QMutexLocker lock(&m_mutex);
    const qsizetype count = m_events.size();
    m_events.clear();
    return count;
}

std::pair<QList<QByteArray>, quint64> BashEventLog::snapshot() const
{
    const QMutexLocker lock(&m_mutex);
    QList<QByteArray> events;
    events.reserve(m_events.size());
    for (const Numbered &numbered : m_events)
        events.append(QJsonDocument(numbered.event).toJson(QJsonDocument::Compact));
    return {events, m_last};
}

void BashEventLog::start(const QJsonObject &request,
                         std::function<void(QString code, QString detail)> refused) const
{
    if (!m_starter) {
        refused(QStringLiteral("not_available"), QStringLiteral("This server runs no commands"));
        return;
    }
    m_starter(request, std::move(refused));
}

} // namespace AgentDeck
