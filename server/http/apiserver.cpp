#include "apiserver.h"

#include "answerline.h"
#include "apiauth.h"
#include "apierror.h"
#include "logging.h"
#include "metrics.h"
#include "requestpath.h"
#include "signalwait.h"
#include "storage/auditlog.h"
#include "storage/database.h"
#include "storage/leasestore.h"
#include "wiretypes.h"

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTcpSocket>
#include <QUrlQuery>

#include <functional>
#include <memory>

#include <sys/socket.h>
#include <sys/uio.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
const QString UnmatchedRoute = u"(unmatched)"_s;

// Writes an answer's head and body on the socket: straight to the kernel, in one sendmsg(2)
// and without copying the body behind the head, when the socket holds nothing unsent (nearly
// every answer), and what the kernel did not take through the socket's buffer. Written through
// the buffer alone, each answer had Qt switch the socket's write notifier on and off around
// it, which cost an /alive as much as its route.
void writeNow(QTcpSocket *socket, QByteArrayView head, QByteArrayView body)
{
    qint64 sent = 0;
    if (socket->bytesToWrite() == 0) {
        iovec parts[2] = {{const_cast<char *>(head.data()), size_t(head.size())},
                          {const_cast<char *>(body.data()), size_t(body.size())}};
        msghdr message{};
        message.msg_iov = parts;
        message.msg_iovlen = body.isEmpty() ? 1 : 2;
        const ssize_t written =
            ::sendmsg(int(socket->socketDescriptor()), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
        // A failure (a reset, a full buffer) is left to the socket: it writes the whole answer
        // and reports what it finds as it always does.
        sent = std::max<qint64>(written, 0);
    }
    if (sent < head.size())
        socket->write(head.data() + sent, head.size() - sent);
    const qint64 bodySent = std::max<qint64>(sent - head.size(), 0);
    if (bodySent < body.size())
        socket->write(body.data() + bodySent, body.size() - bodySent);
    // What the socket's own writes say; the connection counts an answer written as activity.
    if (sent > 0)
        Q_EMIT socket->bytesWritten(sent);
}

// What of OpenHands' agent server a path asks for that AgentDeck does not offer: a client is
// told which feature, not only that there is no route. By the path's first segments under /api/
// ("*" is a conversation id).
std::optional<QString> notOffered(const QString &path)
{
    struct Feature
    {
        QStringList segments;
        QLatin1StringView name;
    };
    static const QList<Feature> features{
        {{u"acp"_s}, "ACP (agent client protocol) agents"_L1},
        {{u"profiles"_s}, "profiles"_L1},
        {{u"agent_profiles"_s}, "agent profiles"_L1},
        {{u"llm_profiles"_s}, "LLM profiles"_L1},
        {{u"meta_profiles"_s}, "profiles"_L1},
        {{u"settings"_s}, "settings"_L1},
        {{u"skills"_s}, "skills"_L1},
        {{u"plugins"_s}, "plugins"_L1},
        {{u"mcp"_s}, "MCP servers"_L1},
        {{u"vscode"_s}, "VS Code"_L1},
        {{u"desktop"_s}, "the desktop"_L1},
        {{u"llm"_s}, "the catalog of LLM providers and models"_L1},
        {{u"hooks"_s}, "hooks"_L1},
        {{u"conversations"_s, u"*"_s, u"switch_profile"_s}, "profiles"_L1},
        {{u"conversations"_s, u"*"_s, u"switch_llm"_s}, "switching a conversation's LLM"_L1},
        {{u"conversations"_s, u"*"_s, u"ask_agent"_s}, "questions to the agent beside its run"_L1},
        {{u"conversations"_s, u"*"_s, u"condense"_s}, "condensing a history"_L1},
        {{u"conversations"_s, u"*"_s, u"generate_title"_s}, "generated titles"_L1},
        {{u"conversations"_s, u"*"_s, u"security_analyzer"_s}, "security analyzers"_L1},
        {{u"conversations"_s, u"*"_s, u"goal"_s}, "goal loops"_L1},
    };
    const QStringList segments = path.split(u'/', Qt::SkipEmptyParts);
    if (segments.size() < 2 || segments.first() != u"api"_s)
        return std::nullopt;
    for (const Feature &feature : features) {
        if (segments.size() - 1 < feature.segments.size())
            continue;
        bool matches = true;
        for (qsizetype i = 0; i < feature.segments.size() && matches; ++i)
            matches = feature.segments[i] == u"*"_s || feature.segments[i] == segments[i + 1];
        if (matches)
            return u"AgentDeck does not offer OpenHands' %1 (%2); docs/OPERATIONS.md lists what "
                   "it offers"_s.arg(feature.name, path);
    }
    return std::nullopt;
}

} // namespace

// Runs a handler, turning what it throws into an answer. Unexpected failures are logged and
// answered without internals; storage failures are 503 (the request may be retried, except on a
// damaged database, which also makes the server not ready).
template<typename Call> HttpResponse ApiServer::guarded(Call &&call)
{
    try {
        return call();
    } catch (const ApiError &error) {
        return HttpResponse::error(error);
    } catch (const StorageError &error) {
        if (error.corrupt()) {
            if (!std::exchange(m_storageCorrupt, true))
                qCCritical(lcHttp)
                    << "the database is damaged; restore it from a backup:" << error.what();
            return HttpResponse::error(
                {503, u"storage_corrupt"_s,
                 u"The server's database is damaged; its operator must restore it from a "
                 "backup"_s});
        }
        if (error.lockTimeout()) {
            qCWarning(lcHttp) << "a row lock is held elsewhere:" << error.what();
            return HttpResponse::error(
                {503, u"conversation_locked"_s,
                 u"Another replica holds this conversation in a transaction and does not "
                 "finish it (it may be frozen); retry shortly"_s,
                 1});
        }
        qCWarning(lcHttp) << "storage failure:" << error.what();
        if (error.diskFull())
            return HttpResponse::error({503, u"storage_full"_s,
                                        u"The server's disk is full: nothing can be stored until "
                                        "space is freed"_s,
                                        30});
        return HttpResponse::error(
            {503, u"storage_unavailable"_s, u"Storage is unavailable; retry shortly"_s, 1});
    } catch (const LeaseLostError &error) {
        // Another owner took the conversation while the request ran; nothing was written.
        qCWarning(lcHttp) << "lease lost during a request:" << error.what();
        ApiError conflict = ApiError::conflict(
            u"lease_lost"_s, u"Conversation was taken over while the request ran; retry"_s);
        conflict.retryAfterSeconds = 1;
        return HttpResponse::error(conflict);
    } catch (const std::exception &error) {
        qCCritical(lcHttp) << "unexpected failure:" << error.what();
        return HttpResponse::error({500, u"internal_error"_s, u"Internal server error"_s});
    }
}

// What a request needs to be answered, taken when it arrives.
struct ApiServer::Answer
{
    QPointer<QTcpSocket> socket;
    QString route;
    QByteArray method;
    QElapsedTimer timer;
    bool headOnly = false; // HEAD: the GET answer's status and headers, no body
};

ApiServer::ApiServer(const Router &router, const ApiAuth &auth, Metrics &metrics, HttpLimits limits,
                     QObject *parent)
    : QObject(parent)
    , m_router(router)
    , m_auth(auth)
    , m_metrics(metrics)
    , m_limits(limits)
{}

void ApiServer::handle(HttpRequest copy, QTcpSocket *socket)
{
    QElapsedTimer timer;
    timer.start();
    const QByteArray method = Router::methodName(copy.method);
    // HEAD is GET without the body (RFC 9110): load balancers probe health routes with it.
    const bool head = copy.method == HttpMethod::Head;
    if (head)
        copy.method = HttpMethod::Get;
    const Router::Match match = m_router.match(copy.method, copy.path);
    Answer pending{socket, match.route ? match.route->pattern : UnmatchedRoute, method, timer,
                   head};

    const auto reject = [&](const ApiError &error,
                            QList<QPair<QByteArray, QByteArray>> headers = {}) {
        HttpResponse response = HttpResponse::error(error);
        response.headers.append(headers);
        record(audited(match.route, copy), response);
        answer(socket, std::move(pending), std::move(response));
    };

    // A path of another spelling is refused before anything looks at it: the checks below and
    // the router see the one spelling (see RequestPath).
    if (!copy.pathFault.isEmpty())
        return reject(pathRefusal(copy.pathFault));
    // Who asks first: without the key, or from a web page of another site, nothing but the
    // open routes answers, not even whether a route exists.
    const bool open = match.route && match.route->access == Router::Access::Open;
    if (!open) {
        if (auto refusal = m_auth.browserRefusal(copy.header("Host"), copy.header("Origin")))
            return reject(*refusal);
        if (m_auth.enabled()) {
            std::optional<QString> name = m_auth.nameOf(copy.header("X-Session-API-Key"));
            if (!name)
                return reject(
                    {401, u"unauthorized"_s, u"Missing or wrong X-Session-API-Key header"_s});
            copy.keyName = std::move(*name);
        }
    }
    if (!match.route) {
        if (!match.allowedMethods.isEmpty())
            return reject({405, u"method_not_allowed"_s,
                           u"%1 is not allowed here; use %2"_s.arg(
                               QString::fromLatin1(pending.method),
                               QString::fromLatin1(match.allowedMethods.join(", ")))},
                          {{"Allow", match.allowedMethods.join(", ")}});
        if (const auto feature = notOffered(copy.path))
            return reject({404, u"not_offered"_s, *feature});
        return reject(ApiError::notFound(
            u"No route for %1 %2"_s.arg(QString::fromLatin1(pending.method), copy.path)));
    }
    // The listener refuses such a body from its head or chunks before it is read (see
    // HttpRequestFollower); this is the backstop should a framing slip past it.
    if (copy.body.size() > m_limits.maxBodyBytes)
        return reject(ApiError::payloadTooLarge(m_limits.maxBodyBytes));
    if (!open && m_stopping)
        return reject({503, u"shutting_down"_s,
                       u"The server is stopping; send the request again once it has started "
                       "again, or to another replica"_s,
                       1});
    if (!open && !m_ready)
        return reject({503, u"not_ready"_s, u"The server is starting; retry shortly"_s, 1});

    copy.args = match.args;
    std::optional<Audited> call = audited(match.route, copy);
    if (match.route->sync) {
        HttpResponse response = guarded([&] { return match.route->sync(copy); });
        record(call, response);
        answer(socket, std::move(pending), std::move(response));
        return;
    }
    AnswerLine &line = AnswerLine::on(socket);
    const quint64 place = line.join();
    ++m_handling;
    answerAsync(match.route, std::move(copy), std::move(pending), &line, place, std::move(call));
}

std::optional<ApiServer::Audited> ApiServer::audited(const Router::Route *route,
                                                     const HttpRequest &request) const
{
    if (!m_audit || !route || route->auditAction.isEmpty())
        return std::nullopt;
    const ChangeCause cause = request.cause();
    Audited call{route->auditAction, cause.actor, {}, cause.reason};
    // The route's {id}, read as it would be; a path the route refuses names no conversation.
    const qsizetype idAt = route->segments.indexOf(u"{id}"_s);
    if (idAt >= 0) {
        const QStringList segments = request.path.split(u'/', Qt::SkipEmptyParts);
        if (idAt < segments.size())
            call.conversationId = parseWireId(segments.at(idAt)).value_or(QUuid());
    }
    return call;
}

void ApiServer::record(const std::optional<Audited> &call, const HttpResponse &response)
{
    if (!call)
        return;
    QUuid conversation = call->conversationId;
    if (conversation.isNull() && response.status >= 200 && response.status < 300)
        conversation =
            parseWireId(QJsonDocument::fromJson(response.body).object().value(u"id"_s).toString())
                .value_or(QUuid());
    m_audit->record(call->actor, call->action, conversation, call->reason, response.status);
}

QCoro::Task<> ApiServer::answerAsync(const Router::Route *route, HttpRequest request, Answer answer,
                                     QPointer<AnswerLine> line, quint64 place,
                                     std::optional<Audited> call)
{
    HttpResponse response;
    try {
        auto handling = route->async(std::move(request));
        response = co_await std::move(handling);
    } catch (...) {
        response = guarded([]() -> HttpResponse { throw; });
    }
    record(call, response);
    --m_handling;
    Q_EMIT handlerFinished();
    // The client may have gone while the handler ran; its socket, and the line, are then
    // deleted.
    if (!line) {
        m_metrics.recordRequest(answer.route, answer.method, 499,
                                answer.timer.nsecsElapsed() / 1e9);
        co_return;
    }
    line->fill(place, writing(std::move(answer), std::move(response)));
}

QCoro::Task<bool> ApiServer::drain(std::chrono::milliseconds timeout)
{
    QDeadlineTimer deadline(timeout);
    while (m_handling > 0 && !deadline.hasExpired()) {
        auto finished = signalOrTimeout(this, &ApiServer::handlerFinished,
                                        std::chrono::milliseconds(deadline.remainingTime()));
        co_await std::move(finished);
    }
    co_return m_handling == 0;
}

void ApiServer::answer(QTcpSocket *socket, Answer answer, HttpResponse response)
{
    AnswerLine *line = AnswerLine::of(socket);
    if (!line || line->isEmpty()) {
        write(answer, response);
        return;
    }
    line->fill(line->join(), writing(std::move(answer), std::move(response)));
}

std::function<void()> ApiServer::writing(Answer answer, HttpResponse response)
{
    // std::function wants a copyable callable; the responder is not.
    auto pending = std::make_shared<Answer>(std::move(answer));
    return [this, pending, response = std::move(response)] { write(*pending, response); };
}

void ApiServer::write(Answer &answer, const HttpResponse &response)
{
    const double seconds = answer.timer.nsecsElapsed() / 1e9;
    if (!answer.socket || answer.socket->state() != QAbstractSocket::ConnectedState) {
        m_metrics.recordRequest(answer.route, answer.method, 499, seconds);
        return;
    }
    const bool withBody = !answer.headOnly && !response.nextPart;
    writeNow(answer.socket, response.wireHead(),
             withBody ? QByteArrayView(response.body) : QByteArrayView());
    if (response.nextPart && !answer.headOnly) {
        AnswerLine &line = AnswerLine::on(answer.socket);
        line.hold();
        streamBody(std::move(answer), response);
        return;
    }
    // Out now: a stopping server may not turn its event loop again before the socket goes.
    if (m_stopping)
        answer.socket->flush();
    m_metrics.recordRequest(answer.route, answer.method, response.status, seconds);
}

QCoro::Task<> ApiServer::streamBody(Answer answer, HttpResponse response)
{
    const QPointer<QTcpSocket> socket = answer.socket;
    const QPointer<AnswerLine> line = AnswerLine::of(socket);
    qint64 sent = 0;
    QElapsedTimer stalled;
    stalled.start();
    while (sent < response.streamedLength && socket &&
           socket->state() == QAbstractSocket::ConnectedState) {
        // What the client has not read yet stays bounded: the next part is made once most of
        // the one before is out.
        if (socket->bytesToWrite() > StreamedUnsentBytes) {
            if (stalled.elapsed() > StreamStallLimit.count())
                break;
            auto written =
                signalOrTimeout(socket.data(), &QTcpSocket::bytesWritten, std::chrono::seconds(1));
            co_await std::move(written);
            continue;
        }
        stalled.start();
        std::optional<QByteArray> part;
        try {
            auto making = response.nextPart();
            part = co_await std::move(making);
        } catch (const std::exception &error) {
            qCWarning(lcHttp) << "a streamed answer failed:" << error.what();
        }
        if (!part || part->isEmpty() || sent + part->size() > response.streamedLength)
            break;
        if (!socket)
            break;
        socket->write(*part);
        sent += part->size();
    }
    const bool whole = sent == response.streamedLength;
    m_metrics.recordRequest(answer.route, answer.method, whole ? response.status : 499,
                            answer.timer.nsecsElapsed() / 1e9);
    if (!socket)
        co_return;
    // Short of the length the head promised, the client would take the next answer for the
    // rest of this one: the connection ends instead.
    if (!whole) {
        qCInfo(lcHttp) << "closing a connection whose streamed answer stopped after" << sent << "of"
                       << response.streamedLength << "bytes";
        socket->disconnectFromHost();
        co_return;
    }
    if (line)
        line->release();
}

} // namespace AgentDeck
