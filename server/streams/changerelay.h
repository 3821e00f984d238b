#pragma once

#include <QHash>
#include <QObject>
#include <QTimer>
#include <QUrl>
#include <QUuid>

#include <memory>

namespace AgentDeck {

class ConversationService;
class ConversationStore;
class Database;
class EventHub;

// Several replicas: brings what other replicas write to this replica's streams. It listens on
// its own PostgreSQL connection for the store's change announcements, reads the announced events
// from the catalog and publishes them to the local subscribers, in seq order; streams drop what
// they already sent, so an event seen in a replay and then announced goes out once. A deletion
// elsewhere ends this replica's streams and runs of that conversation.
class ChangeRelay : public QObject
{
    Q_OBJECT
public:
    ChangeRelay(QUrl databaseUrl, QString source, ConversationStore &store, EventHub &hub,
                ConversationService &service, QObject *parent = nullptr);
    ~ChangeRelay() override;

    // Connects and subscribes; false with a sentence when PostgreSQL refuses.
    bool start(QString *error);
    qint64 relayedCount() const { return m_relayed; }

private:
    void onAnnouncement(const QString &payload);
    void reconnect();

    QUrl m_url;
    QString m_source;
    ConversationStore &m_store;
    EventHub &m_hub;
    ConversationService &m_service;
    std::unique_ptr<Database> m_listener;
    // The last seq published per conversation: the next announcement is read from there, so an
    // announcement missed while reconnecting leaves no gap once the next one arrives.
    QHash<QUuid, qint64> m_lastSeq;
    QTimer m_watchdog;
    qint64 m_relayed = 0;
};

} // namespace AgentDeck
