#pragma once

#include "actor.h"

#include <QByteArray>
#include <QCoroTask>
#include <QJsonValue>
#include <QList>
#include <QStringList>
#include <QUrlQuery>
#include <QUuid>

#include <chrono>
#include <functional>
#include <optional>

namespace AgentDeck {

struct ApiError;

// The request methods of HTTP/1.1 (RFC 9110, 9.3, and PATCH); any other is Unknown.
enum class HttpMethod
{
    Unknown,
    Get,
    Head,
    Post,
    Put,
    Delete,
    Patch,
    Options,
    Connect,
    Trace
};

struct HttpLimits
{
    qsizetype maxBodyBytes = 4 * 1024 * 1024;
    // A request's head must arrive whole within this of its first byte, and its body may not
    // pause for longer (else 408); a connection with nothing to do for idleTimeout is closed.
    // Neither applies to WebSocket streams.
    std::chrono::milliseconds requestTimeout{60'000};
    std::chrono::milliseconds idleTimeout{300'000};
    // A connection whose answers waiting to be sent pass this when it sends more is closed: its
    // client does not read them.
    qint64 maxUnsentBytes = 16 * 1024 * 1024;
};

// A request as handlers see it (HttpConnection::toRequest()); it owns its bytes, so it stays
// valid in a coroutine after the connection is gone.
struct HttpRequest
{
    HttpMethod method = HttpMethod::Get;
    QString path; // decoded, in its one spelling (see RequestPath)
    // Why the target's spelling is refused (400) before routing and every check; empty when not.
    QString pathFault;
    QUrlQuery query;
    QByteArray body;
    // The request line and header lines as they came (shared with the connection's copy, not
    // split into a list: a list of headers cost every request three allocations); header()
    // reads them.
    QByteArray head;
    QStringList args; // the {placeholders} of the matched route, in order
    // The name of the key the request carried (see ApiAuth); empty on a server without keys.
    QString keyName;

    QByteArray header(QByteArrayView name) const;
    // Who makes the request: its key's name and its client.
    Actor actor() const { return {keyName, Actor::clientFrom(header("User-Agent"))}; }
    // Who makes the request and why: the `reason` query parameter, as the audit log records it.
    ChangeCause cause() const;
    // The body as a JSON object; an empty body is an empty object. Throws 400 otherwise.
    QJsonObject jsonObject() const;
    // The i-th path argument as a conversation or event id. Throws 422.
    QUuid idArg(qsizetype index) const;
    // Ids from repeated parameters or comma-separated lists, in order; at most 100 (else 422).
    QList<QUuid> idsParam(const QString &name) const;
    // Query parameter helpers; they throw 422 naming the parameter.
    int intParam(const QString &name, int defaultValue, int min, int max) const;
    std::optional<qint64> timeParam(const QString &name) const;
    std::optional<bool> boolParam(const QString &name) const;
    QString stringParam(const QString &name) const;
};

struct HttpResponse
{
    int status = 200;
    QByteArray body;
    QByteArray contentType = QByteArrayLiteral("application/json"); // no allocation per answer
    QList<QPair<QByteArray, QByteArray>> headers;
    // A body made while it is sent, instead of `body`: `streamedLength` bytes in all, in the
    // parts nextPart() gives, each asked for once the socket has sent most of the one before.
    // A part it cannot make (nullopt) or one past the length ends the connection, since the
    // length was promised in the head.
    std::function<QCoro::Task<std::optional<QByteArray>>()> nextPart;
    qint64 streamedLength = 0;

    static HttpResponse json(const QJsonValue &value, int status = 200);
    static HttpResponse rawJson(QByteArray json, int status = 200);
    static HttpResponse error(const ApiError &error);

    // The answer's status line and header lines as HTTP/1.1 bytes, up to the empty line; the
    // body is sent beside it, not copied behind it. Its Content-Length is the body's, also for
    // a HEAD's answer, which has no body.
    QByteArray wireHead() const;
    // ... with `Connection: close`: for a connection closed after it (the listener's refusals,
    // a refused WebSocket upgrade).
    QByteArray closingAnswer() const;
};

// "[a,b,c]" from already serialized JSON values, without parsing them again.
QByteArray joinJsonArray(const QList<QByteArray> &items);

} // namespace AgentDeck
