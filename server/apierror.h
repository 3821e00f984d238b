#pragma once

#include <QJsonObject>
#include <QString>

#include <optional>

namespace AgentDeck {

// A failure a request handler reports to its caller. Handlers throw it; the HTTP dispatcher maps
// it to a status and a {"detail", "code"} body in one place.
struct ApiError
{
    int status = 400;
    QString code;
    QString detail;
    std::optional<int> retryAfterSeconds;
    // Further fields of the error body beside detail and code (e.g. who owns a conversation).
    QJsonObject extra;

    static ApiError badRequest(const QString &detail)
    {
        return {400, QStringLiteral("bad_request"), detail};
    }
    static ApiError invalidParameter(const QString &detail)
    {
        return {422, QStringLiteral("invalid_parameter"), detail};
    }
    static ApiError notFound(const QString &detail)
    {
        return {404, QStringLiteral("not_found"), detail};
    }
    static ApiError payloadTooLarge(qint64 maxBytes)
    {
        return {413, QStringLiteral("payload_too_large"),
                QStringLiteral("The request body is larger than %1 bytes").arg(maxBytes)};
    }
    static ApiError conflict(const QString &code, const QString &detail)
    {
        return {409, code, detail};
    }
};

} // namespace AgentDeck
