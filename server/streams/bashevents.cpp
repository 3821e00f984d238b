#include "bashevents.h"

#include "logging.h"
#include "storage/database.h"

#include <QJsonDocument>
#include <QMetaMethod>

using namespace Qt::StringLiterals;

namespace AgentDeck {

void BashEventLog::attach(std::unique_ptr<BashEventStore> store)
{
    QList<QJsonObject> kept;
    try {
        kept = store->newest(int(MaxEvents));
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "cannot read the stored bash events:" << error.what();
    }
    const QMutexLocker lock(&m_mutex);
    m_store = std::move(store);
    for (const QJsonObject &event : std::as_const(kept))
        m_events.append({++m_last, event});
}

void BashEventLog::add(const QJsonObject &event)
{
    // Kept for the sockets and the next searches even when storage refuses it (a full disk).
    if (m_store) {
        try {
            m_store->insert(event);
        } catch (const StorageError &error) {
            qCWarning(lcServer) << "cannot store a bash event:" << error.what();
        }
    }
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
    return m_store ? m_store->find(id) : std::nullopt;
}

std::pair<QList<QJsonObject>, bool> BashEventLog::search(const BashEventStore::Query &query) const
{
    return m_store ? m_store->search(query) : std::pair<QList<QJsonObject>, bool>{};
}

qint64 BashEventLog::clear()
{
    const qint64 stored = m_store ? m_store->clear() : 0;
    const QMutexLocker lock(&m_mutex);
    m_events.clear();
    return stored;
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
