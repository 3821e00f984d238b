#pragma once

#include "clock.h"
#include "runtime/runtime.h"

#include <QHash>
#include <QList>
#include <QObject>
#include <QStringList>
#include <QTcpServer>
#include <QUrl>
#include <QUuid>

namespace AgentDeck::Testing {

// A clock that only moves when told to (and by one millisecond per reading, so that events
// written in one test keep a strict order).
class FakeClock final : public Clock
{
public:
    explicit FakeClock(qint64 startMs = 1'700'000'000'000)
        : m_now(startMs)
    {}
    qint64 nowMs() const override { return m_now++; }
    void advance(qint64 ms) { m_now += ms; }
    void set(qint64 ms) { m_now = ms; }

private:
    mutable qint64 m_now;
};

// Shared state of the fake runtimes, visible to the test.
class FakeRuntimeControl : public QObject
{
    Q_OBJECT
public:
    // Commands seen, in order.
    QStringList commands;
    // Output per command; a command not listed answers "ran: <command>".
    QHash<QString, CommandResult> results;
    // Commands that do not finish until release() or an interrupt.
    QStringList blocking;
    bool failProvisioning = false;
    // Provisioning does not finish until finishProvisioning().
    bool holdProvisioning = false;
    int acquisitions = 0;
    int releases = 0;
    QList<QUuid> releasedIds; // the conversations of the releases, in order

    void release()
    {
        ++releasedTimes;
        Q_EMIT released();
    }
    void finishProvisioning()
    {
        ++provisionedTimes;
        Q_EMIT provisioned();
    }
    int releasedTimes = 0;
    int provisionedTimes = 0;

Q_SIGNALS:
    void released();
    void provisioned();
    void interrupted();
    void commandStarted(const QString &command);
};

class FakeRuntimeProvider final : public RuntimeProvider
{
public:
    explicit FakeRuntimeProvider(FakeRuntimeControl &control)
        : m_control(control)
    {}
    QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo conversation) override;
    void release(const QUuid &conversationId) override;
    void describe(QList<ConversationInfo> &conversations) const override;

private:
    FakeRuntimeControl &m_control;
};

// A web server that is not AgentDeck, on a free loopback port: every request gets the same
// 200 HTML page, as a login page, or another service on the port one meant, would answer.
class NotAgentDeckServer final : public QTcpServer
{
public:
    // Answers every request with a page of HTML and `status`.
    explicit NotAgentDeckServer(int status = 200);
    QUrl url() const;
    // "GET /path?query HTTP/1.1" of each request, in the order they came.
    QList<QByteArray> requestLines() const { return m_requestLines; }

private:
    QList<QByteArray> m_requestLines;
    int m_status;
};

} // namespace AgentDeck::Testing
