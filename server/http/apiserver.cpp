#include "apiserver.h"

#include "apiauth.h"
#include "apierror.h"
#include "logging.h"
#include "metrics.h"
#include "storage/database.h"

#include <QHttpServerResponder>
#include <QTcpSocket>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
const QString UnmatchedRoute = u"(unmatched)"_s;

HttpRequest copyRequest(const QHttpServerRequest &request)
{
    HttpRequest copy;
    copy.method = request.method();
    copy.path = request.url().path();
    copy.query = request.query();
    copy.body = request.body();
    copy.headers = request.headers();
    return copy;
}

// Runs a handler, turning what it throws into an answer. Unexpected failures are logged and
// answered without internals; storage failures are 503 (the request may be retried).
template<typename Call> HttpResponse guarded(Call &&call)
{
    try {
        return call();
    } catch (const ApiError &error) {
        return HttpResponse::error(error);
    } catch (const StorageError &error) {
        qCWarning(lcHttp) << "storage failure:" << error.what();
        return HttpResponse::error(
            {503, u"storage_unavailable"_s, u"Storage is unavailable; retry shortly"_s, 1});
    } catch (const std::exception &error) {
        qCCritical(lcHttp) << "unexpected failure:" << error.what();
        return HttpResponse::error({500, u"internal_error"_s, u"Internal server error"_s});
    }
}
} // namespace

ApiServer::ApiServer(const Router &router, const ApiAuth &auth, Metrics &metrics, HttpLimits limits,
                     QObject *parent)
    : QAbstractHttpServer(parent)
    , m_router(router)
    , m_auth(auth)
    , m_metrics(metrics)
    , m_limits(limits)
{}

bool ApiServer::handleRequest(const QHttpServerRequest &request, QTcpSocket *socket)
{
    // WebSocket upgrades are taken over by newWebSocketConnection; nothing may be written here.
    if (request.value("upgrade"_ba).compare("websocket", Qt::CaseInsensitive) == 0)
        return true;

    QElapsedTimer timer;
    timer.start();
    QHttpServerResponder responder = makeResponder(request, socket);
    HttpRequest copy = copyRequest(request);
    const QByteArray method = Router::methodName(copy.method);
    const Router::Match match = m_router.match(copy.method, copy.path);

    const auto reject = [&](const QString &route, const ApiError &error,
                            QList<QPair<QByteArray, QByteArray>> headers = {}) {
        HttpResponse response = HttpResponse::error(error);
        response.headers.append(headers);
        answer(responder, route, method, response, timer);
        return true;
    };

    if (!match.route) {
        if (!match.allowedMethods.isEmpty())
            return reject(UnmatchedRoute,
                          {405, u"method_not_allowed"_s,
                           u"%1 is not allowed here; use %2"_s.arg(
                               QString::fromLatin1(method),
                               QString::fromLatin1(match.allowedMethods.join(", ")))},
                          {{"Allow", match.allowedMethods.join(", ")}});
        return reject(UnmatchedRoute, ApiError::notFound(u"No route for %1 %2"_s.arg(
                                          QString::fromLatin1(method), copy.path)));
    }
    const QString &route = match.route->pattern;
    const bool isApi = copy.path.startsWith(u"/api/"_s);
    if (isApi && m_auth.enabled() && !m_auth.accepts(copy.header("X-Session-API-Key")))
        return reject(route,
                      {401, u"unauthorized"_s, u"Missing or wrong X-Session-API-Key header"_s});
    // The listener refuses such a body from its head or chunks before it is read (see
    // HttpRequestFollower); this is the backstop should a framing slip past it.
    if (copy.body.size() > m_limits.maxBodyBytes)
        return reject(route, ApiError::payloadTooLarge(m_limits.maxBodyBytes));
    if (isApi && !m_ready)
        return reject(route, {503, u"not_ready"_s, u"The server is starting; retry shortly"_s, 1});

    copy.args = match.args;
    if (match.route->sync) {
        const HttpResponse response = guarded([&] { return match.route->sync(copy); });
        answer(responder, route, method, response, timer);
    } else {
        answerAsync(match.route, std::move(copy), std::move(responder), QPointer(socket), timer);
    }
    return true;
}

void ApiServer::missingHandler(const QHttpServerRequest &request, QTcpSocket *socket)
{
    QElapsedTimer timer;
    timer.start();
    QHttpServerResponder responder = makeResponder(request, socket);
    answer(responder, UnmatchedRoute, Router::methodName(request.method()),
           HttpResponse::error(ApiError::notFound(u"No route for "_s + request.url().path())),
           timer);
}

QCoro::Task<> ApiServer::answerAsync(const Router::Route *route, HttpRequest request,
                                     QHttpServerResponder responder, QPointer<QTcpSocket> socket,
                                     QElapsedTimer timer)
{
    const QString pattern = route->pattern;
    const QByteArray method = Router::methodName(request.method);
    HttpResponse response;
    try {
        auto handling = route->async(std::move(request));
        response = co_await std::move(handling);
    } catch (...) {
        response = guarded([]() -> HttpResponse { throw; });
    }
    // The client may have gone while the handler ran; its socket is then deleted.
    if (!socket || socket->state() != QAbstractSocket::ConnectedState) {
        m_metrics.recordRequest(pattern, method, 499, timer.nsecsElapsed() / 1e9);
        co_return;
    }
    answer(responder, pattern, method, response, timer);
}

void ApiServer::answer(QHttpServerResponder &responder, const QString &route, QByteArray method,
                       const HttpResponse &response, const QElapsedTimer &timer)
{
    responder.writeStatusLine(static_cast<QHttpServerResponder::StatusCode>(response.status));
    responder.writeHeader("Content-Type", response.contentType);
    responder.writeHeader("Content-Length", QByteArray::number(response.body.size()));
    for (const auto &[key, value] : response.headers)
        responder.writeHeader(key, value);
    responder.writeBody(response.body);
    m_metrics.recordRequest(route, method, response.status, timer.nsecsElapsed() / 1e9);
}

} // namespace AgentDeck
