#pragma once

#include "storage/basheventstore.h"

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QMutex>
#include <QObject>

#include <functional>
#include <memory>
#include <optional>
#include <utility>

namespace AgentDeck {

// The bash events of /api/bash (OpenHands' BashCommand, BashOutput and BashError): stored in the
// catalog (BashEventStore, once attached), where they are found and searched, and the newest
// MaxEvents also in memory for the bash-events sockets (BashStreamSession), which follow it from
// the streams' thread through added() and snapshot(), and start commands through start().
// Written and read in the main thread by the workspace routes.
class BashEventLog : public QObject
{
    Q_OBJECT
public:
    static constexpr qsizetype MaxEvents = 200;

    // From now on events are stored there; the newest of those it holds already are the ones
    // a socket asking for all of them gets.
    void attach(std::unique_ptr<BashEventStore> store);
    // Starts the command of an ExecuteBashRequest, in the main thread; calls `refused` with the
    // error's code and sentence when it is not one it can start.
    using Starter = std::function<void(const QJsonObject &request,
                                       std::function<void(QString code, QString detail)> refused)>;

    void add(const QJsonObject &event);
    std::optional<QJsonObject> find(const QString &id) const;
    // What matches, a page of it, and whether more follow (nothing is found before attach()).
    std::pair<QList<QJsonObject>, bool> search(const BashEventStore::Query &query) const;
    qint64 clear();

    // Every event as JSON, with the number of the last: a socket that follows added() from
    // before it asks drops what comes again with a number up to that.
    std::pair<QList<QByteArray>, quint64> snapshot() const;

    void setStarter(Starter starter) { m_starter = std::move(starter); }
    // The main thread only.
    void start(const QJsonObject &request,
               std::function<void(QString code, QString detail)> refused) const;

Q_SIGNALS:
    // Emitted in the thread of add(), the main one.
    void added(quint64 number, const QByteArray &json);

private:
    struct Numbered
    {
        quint64 number;
        QJsonObject event;
    };
    std::unique_ptr<BashEventStore> m_store;
    mutable QMutex m_mutex; // the streams' thread reads snapshot()
    QList<Numbered> m_events;
    quint64 m_last = 0;
    Starter m_starter;
};

} // namespace AgentDeck
