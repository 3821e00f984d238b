#pragma once

#include "httpconnection.h"
#include "samples.h"

#include <QObject>
#include <QQueue>
#include <QUuid>

class QTimer;

namespace AgentDeck::Bench {

struct PublishPlan
{
    Endpoint endpoint;
    QUuid conversation;
    int ratePerSecond = 1000;
    std::chrono::milliseconds duration{5000};
    int connections = 16; // keep-alive connections the POSTs are spread over
};

struct PublishResult
{
    bool connected = false;
    qint64 planned = 0;
    qint64 sent = 0;
    qint64 stored = 0;     // 2xx answers: events that were committed and published
    qint64 failed = 0;     // other answers or failed requests
    qint64 maxBacklog = 0; // events that were due while every connection was busy
    qint64 firstSendNs = 0;
    qint64 lastSendNs = 0;
    Samples postLatency; // HTTP round trip of the POSTs

    double achievedRate() const
    {
        return lastSendNs > firstSendNs && sent > 1
                   ? double(sent - 1) * 1e9 / double(lastSendNs - firstSendNs)
                   : 0;
    }
};

// POSTs message events at a fixed rate (open loop, on schedule) from its own thread, so that the
// receivers' work in the main thread cannot delay the schedule. Each message's text carries its
// number, the time its request was written and the time it was scheduled for:
// "bench n=<n> t=<write ns> s=<scheduled ns>" on the bench's monotonic clock.
class Publisher : public QObject
{
    Q_OBJECT
public:
    explicit Publisher(PublishPlan plan);

    // Call in the publisher's thread (e.g. from QThread::started).
    QCoro::Task<> start();
    // Valid after `finished`.
    const PublishResult &result() const { return m_result; }

    static QByteArray marker() { return QByteArrayLiteral("bench n="); }

Q_SIGNALS:
    void finished();

private:
    void tick();
    void dispatch();
    void onAnswer(HttpConnection *connection, const HttpResult &result);
    void finishIfDone();
    void finish();

    PublishPlan m_plan;
    PublishResult m_result;
    QByteArray m_target;
    QList<HttpConnection *> m_connections;
    QList<HttpConnection *> m_idle;
    QQueue<qint64> m_backlog; // numbers of due events not yet written
    qint64 m_scheduled = 0;
    qint64 m_startNs = 0;
    QTimer *m_ticker = nullptr;
    QTimer *m_deadline = nullptr;
    bool m_finished = false;
};

} // namespace AgentDeck::Bench
