#pragma once

#include "activitymodel.h"

#include <QCoroTask>
#include <QHash>
#include <QObject>
#include <QPointer>

#include <optional>

namespace AgentDeck {

class ServerConnection;

// Reads the audit log of each of an ActivityModel's sources into it: the newest page on
// refresh(), the next pages on readMore(). A page of an older query (the filter changed
// meanwhile) is dropped.
class ActivityLoader : public QObject
{
    Q_OBJECT
public:
    explicit ActivityLoader(ActivityModel *model, QObject *parent = nullptr);

    ActivityModel *model() const { return m_model; }
    // The server a source of the model reads from.
    void setConnection(int source, ServerConnection *connection);
    // What every source is asked for from the next refresh() on (the list empties when it
    // differs, and a page of the query before is dropped).
    void setQuery(const AuditQuery &query);

    // The newest page of every source: what came since joins the list.
    QCoro::Task<> refresh();
    // The next page of the sources that hold the list back (ActivityModel::sourcesToReadMore).
    QCoro::Task<> readMore();
    bool isReading() const { return m_reading > 0; }
    // Why a source's last read failed, in words; empty when it did not.
    QString problem(int source) const { return m_problems.value(source); }

Q_SIGNALS:
    // A read finished (refresh() or readMore()), whatever came of it.
    void read();

private:
    QCoro::Task<> readPages(QList<int> sources, bool newest);

    ActivityModel *m_model;
    QHash<int, QPointer<ServerConnection>> m_connections;
    QHash<int, QString> m_problems;
    quint64 m_generation = 0; // the query's: a page asked for under an older one is dropped
    int m_reading = 0;
    // The query (its generation) a refresh, or a read of older pages, is under way for.
    std::optional<quint64> m_refreshing;
    std::optional<quint64> m_readingMore;
};

} // namespace AgentDeck
