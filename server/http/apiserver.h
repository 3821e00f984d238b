#pragma once

#include "router.h"

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>

#include <functional>
#include <optional>

class QTcpSocket;

namespace AgentDeck {

class AnswerLine;
class ApiAuth;
class AuditLog;
class Metrics;

// The one dispatch point of the HTTP API: route lookup (404/405), readiness, authentication,
// body limits, error mapping and metrics. Its requests come from the connections of an
// HttpListener (see handle()). Handlers never write to a socket themselves; the answers of a
// connection go out in the order of its requests, however long each one's handler takes
// (HTTP/1.1 pipelining).
class ApiServer : public QObject
{
    Q_OBJECT
public:
    ApiServer(const Router &router, const ApiAuth &auth, Metrics &metrics, HttpLimits limits,
              QObject *parent = nullptr);
    void setReady(bool ready) { m_ready = ready; }
    // Where the calls of the routes with an audit action (Router::audit()) are recorded, done or
    // refused; none: nowhere.
    void setAuditLog(AuditLog *log) { m_audit = log; }
    bool isReady() const { return m_ready; }
    // A graceful stop began: API requests are answered 503 `shutting_down` (they were told the
    // server was starting), and /ready says `stopping`.
    void setStopping()
    {
        m_ready = false;
        m_stopping = true;
    }
    bool isStopping() const { return m_stopping; }
    // A request, or the check at startup, met a damaged database: /ready says so.
    bool storageCorrupt() const { return m_storageCorrupt; }
    void markStorageCorrupt() { m_storageCorrupt = true; }
    // Waits until no request is in an asynchronous handler, or for `timeout`; false if one still
    // is. A stopping server lets them finish, so that their clients get answers.
    QCoro::Task<bool> drain(std::chrono::milliseconds timeout);

    // Answers `request`, which came whole on `socket`: now, or once its handler has finished
    // and the answers to the connection's earlier requests are out.
    void handle(HttpRequest request, QTcpSocket *socket);

Q_SIGNALS:
    void handlerFinished();

private:
    struct Answer;
    // A call of an audited route, as its record will say.
    struct Audited
    {
        QString action;
        Actor actor;
        QUuid conversationId; // null: the answer's `id` (a create)
        QString reason;
    };
    std::optional<Audited> audited(const Router::Route *route, const HttpRequest &request) const;
    void record(const std::optional<Audited> &call, const HttpResponse &response);

    QCoro::Task<> answerAsync(const Router::Route *route, HttpRequest request, Answer answer,
                              QPointer<AnswerLine> line, quint64 place,
                              std::optional<Audited> call);
    // Writes `response` now, or once the answers to the connection's earlier requests are out.
    void answer(QTcpSocket *socket, Answer answer, HttpResponse response);
    void write(Answer &answer, const HttpResponse &response);
    // Sends the body of a streamed answer (HttpResponse::nextPart) after its head, then lets
    // the connection's next answers go.
    QCoro::Task<> streamBody(Answer answer, HttpResponse response);
    // What a streamed answer leaves unsent before it makes its next part, and how long a client
    // may read nothing of it before the connection is closed.
    static constexpr qint64 StreamedUnsentBytes = 1024 * 1024;
    static constexpr std::chrono::seconds StreamStallLimit{60};
    // write() of this answer, for the AnswerLine to call in turn.
    std::function<void()> writing(Answer answer, HttpResponse response);

    template<typename Call> HttpResponse guarded(Call &&call);

    const Router &m_router;
    const ApiAuth &m_auth;
    Metrics &m_metrics;
    AuditLog *m_audit = nullptr;
    HttpLimits m_limits;
    bool m_ready = false;
    bool m_stopping = false;
    bool m_storageCorrupt = false;
    int m_handling = 0; // requests in asynchronous handlers
};

} // namespace AgentDeck
