#include "changerelay.h"

#include "conversationservice.h"
#include "logging.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "streams/eventhub.h"

#include <QSqlDriver>
#include <QSqlQuery>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ChangeRelay::ChangeRelay(QUrl databaseUrl, QString source, ConversationStore &store, EventHub &hub,
                         ConversationService &service, QObject *parent)
    : QObject(parent)
    , m_url(std::move(databaseUrl))
    , m_source(std::move(source))
    , m_store(store)
    , m_hub(hub)
    , m_service(service)
{
    // A dropped listening connection (a database restart) is noticed here and opened again.
    connect(&m_watchdog, &QTimer::timeout, this, [this] {
        if (!m_listener || !QSqlQuery(m_listener->connection()).exec(u"SELECT 1"_s))
            reconnect();
    });
}

ChangeRelay::~ChangeRelay() = default;

bool ChangeRelay::start(QString *error)
{
    m_listener = Database::openPostgres(m_url, error, Database::Migrations::Skip);
    if (!m_listener)
        return false;
    QSqlDriver *driver = m_listener->connection().driver();
    if (!driver->subscribeToNotification(ConversationStore::ChangeChannel)) {
        *error = u"cannot listen for changes of other replicas"_s;
        return false;
    }
    connect(driver, &QSqlDriver::notification, this,
            [this](const QString &, QSqlDriver::NotificationSource, const QVariant &payload) {
                onAnnouncement(payload.toString());
            });
    m_watchdog.start(5000);
    return true;
}

void ChangeRelay::reconnect()
{
    qCWarning(lcStreams) << "change listener lost its connection; reconnecting";
    m_listener.reset();
    QString error;
    if (!start(&error)) {
        qCWarning(lcStreams) << "change listener:" << error;
        return;
    }
    qCInfo(lcStreams) << "change listener reconnected";
    // Announcements sent while it was down are lost: the latest event of every streamed
    // conversation is published again, and each stream reads what it missed before it. One
    // deleted meanwhile is forgotten, as its announcement would have had it.
    for (const QUuid &id : m_hub.subscribedConversations()) {
        try {
            const auto info = m_store.find(id);
            if (!info) {
                m_lastSeq.remove(id);
                m_service.forgetDeletedElsewhere(id);
                continue;
            }
            if (info->eventCount == 0)
                continue;
            for (const StoredEvent &event : m_store.eventsAfter(id, info->eventCount - 1, 1))
                m_hub.publish(id, event.seq, event.json);
        } catch (const std::exception &failure) {
            qCWarning(lcStreams) << "cannot catch up" << id << ":" << failure.what();
        }
    }
}

void ChangeRelay::onAnnouncement(const QString &payload)
{
    // "<source> <id> <first> <last>", "<source> <id> deleted", "<source> <id> pause|interrupt",
    // "<source> <id> release"
    const QStringList parts = payload.split(u' ');
    if (parts.size() < 3 || parts[0] == m_source)
        return;
    const QUuid id = QUuid::fromString(parts[1]);
    if (id.isNull())
        return;
    if (parts[2] == u"deleted"_s) {
        m_lastSeq.remove(id);
        m_service.forgetDeletedElsewhere(id);
        return;
    }
    if (parts[2] == u"release"_s) {
        m_service.releaseRequestedElsewhere(id);
        return;
    }
    if (parts[2] == u"pause"_s || parts[2] == u"interrupt"_s) {
        m_service.stopRequestedElsewhere(
            id, parts[2] == u"pause"_s ? LeaseStore::Cancel::Pause : LeaseStore::Cancel::Interrupt);
        return;
    }
    if (m_hub.subscriberCount(id) == 0) {
        m_lastSeq.remove(id);
        return;
    }
    const qint64 first = parts[2].toLongLong();
    const qint64 last = parts.value(3).toLongLong();
    if (first <= 0 || last < first)
        return;
    const qint64 from = std::min(first - 1, m_lastSeq.value(id, first - 1));
    try {
        const QList<StoredEvent> events = m_store.eventsAfter(id, from, int(last - from));
        for (const StoredEvent &event : events) {
            m_hub.publish(id, event.seq, event.json);
            ++m_relayed;
        }
        if (!events.isEmpty())
            m_lastSeq.insert(id, events.last().seq);
    } catch (const std::exception &error) {
        qCWarning(lcStreams) << "cannot relay events of" << id << ":" << error.what();
    }
}

} // namespace AgentDeck
