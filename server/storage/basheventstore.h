#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>

#include <optional>

namespace AgentDeck {

class Database;

// The bash events of /api/bash in the catalog (table bash_events): kept across restarts, shared
// by the replicas of one catalog, and searched with OpenHands' filters. The newest MaxStored
// stay; the oldest go as new ones come.
class BashEventStore
{
public:
    static constexpr qint64 MaxStored = 10'000;

    explicit BashEventStore(Database &db);

    void insert(const QJsonObject &event);
    std::optional<QJsonObject> find(const QString &id);
    // The newest `count`, oldest first.
    QList<QJsonObject> newest(int count);
    qint64 clear();

    struct Query
    {
        QString kind;                   // empty: every kind
        QString commandId;              // a BashCommand's id, or its outputs' command_id
        std::optional<qint64> fromMs;   // timestamp >= (ms since the epoch)
        std::optional<qint64> beforeMs; // timestamp <
        std::optional<int> orderAfter;  // BashOutputs past this part only
        bool descending = false;
        int offset = 0;
        int limit = 100;
    };
    // A page of what matches, and whether more follow it.
    std::pair<QList<QJsonObject>, bool> search(const Query &query);

private:
    Database &m_db;
    int m_sinceTrim = 0;
};

} // namespace AgentDeck
