#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QMutex>
#include <QObject>

#include <functional>
#include <optional>
#include <utility>

namespace AgentDeck {

// The bash events of /api/bash (OpenHands' BashCommand, BashOutput and BashError), oldest first,
// in memory: past MaxEvents the oldest go. Written in the main thread by the workspace routes;
// the bash-events sockets (BashStreamSession) follow it from the streams' thread, through
// added() and snapshot(), and start commands through start().
class BashEventLog : public QObject
{
    Q_OBJECT
public:
    static constexpr qsizetype MaxEvents = 200;
    // Starts the command of an ExecuteBashRequest, in the main thread; calls `refused` with the
    // error's code and sentence when it is not one it can start.
    using Starter = std::function<void(const QJsonObject &request,
                                       std::function<void(QString code, QString detail)> refused)>;

    void add(const QJsonObject &event);
    std::optional<QJsonObject> find(const QString &id) const;
    QList<QJsonObject> all() const;
    qsizetype clear();

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
    mutable QMutex m_mutex; // the streams' thread reads snapshot()
    QList<Numbered> m_events;
    quint64 m_last = 0;
    Starter m_starter;
};

} // namespace AgentDeck
