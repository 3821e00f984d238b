#pragma once

#include "router.h"

#include <QAbstractHttpServer>
#include <QElapsedTimer>
#include <QPointer>

class QTcpSocket;
class QHttpServerResponder;

namespace AgentDeck {

class ApiAuth;
class Metrics;

// The one dispatch point of the HTTP API: route lookup (404/405), readiness, authentication,
// body limits, error mapping and metrics. Handlers never write to a socket themselves.
class ApiServer : public QAbstractHttpServer
{
    Q_OBJECT
public:
    ApiServer(const Router &router, const ApiAuth &auth, Metrics &metrics, HttpLimits limits,
              QObject *parent = nullptr);
    void setReady(bool ready) { m_ready = ready; }
    bool isReady() const { return m_ready; }

protected:
    bool handleRequest(const QHttpServerRequest &request, QTcpSocket *socket) override;
    void missingHandler(const QHttpServerRequest &request, QTcpSocket *socket) override;

private:
    QCoro::Task<> answerAsync(const Router::Route *route, HttpRequest request,
                              QHttpServerResponder responder, QPointer<QTcpSocket> socket,
                              QElapsedTimer timer);
    void answer(QHttpServerResponder &responder, const QString &route, QByteArray method,
                const HttpResponse &response, const QElapsedTimer &timer);

    const Router &m_router;
    const ApiAuth &m_auth;
    Metrics &m_metrics;
    HttpLimits m_limits;
    bool m_ready = false;
};

} // namespace AgentDeck
