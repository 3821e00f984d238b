#include "httptypes.h"

#include "apierror.h"
#include "httphead.h"
#include "wiretypes.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <QVarLengthArray>

#include <algorithm>
#include <charconv>
#include <iterator>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QByteArray HttpRequest::header(QByteArrayView name) const
{
    QByteArray found;
    bool seen = false;
    forEachHeader(head, [&](QByteArrayView key, QByteArrayView value) {
        if (!seen && name.compare(key, Qt::CaseInsensitive) == 0) {
            found = value.toByteArray();
            seen = true;
        }
    });
    return found;
}

ChangeCause HttpRequest::cause() const
{
    return {actor(),
            ChangeCause::cleanReason(query.queryItemValue(u"reason"_s, QUrl::FullyDecoded))};
}

QJsonObject HttpRequest::jsonObject() const
{
    if (body.trimmed().isEmpty())
        return {};
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(body, &error);
    // Qt reads only objects and arrays as documents: `null`, `"x"` or `5` are JSON all the same.
    if (error.error != QJsonParseError::NoError &&
        QJsonDocument::fromJson("[" + body + "]").isArray())
        throw ApiError{400, u"malformed_json"_s, u"The request body must be a JSON object"_s};
    if (error.error != QJsonParseError::NoError)
        throw ApiError{
            400, u"malformed_json"_s,
            u"The request body is not valid JSON: %1 at offset %2"_s.arg(error.errorString())
                .arg(error.offset)};
    if (!document.isObject())
        throw ApiError{400, u"malformed_json"_s, u"The request body must be a JSON object"_s};
    return document.object();
}

QUuid HttpRequest::idArg(qsizetype index) const
{
    const auto id = parseWireId(args.value(index));
    // A well-formed id that names nothing, as OpenHands answers it.
    if (!id && isNilWireId(args.value(index)))
        throw ApiError::notFound(u"Nothing has the id %1 (the nil UUID)"_s.arg(args.value(index)));
    if (!id)
        throw ApiError::invalidParameter(
            u"\"%1\" is not a valid id (a UUID other than the nil one, dashed or 32 hex digits)"_s
                .arg(args.value(index)));
    return *id;
}

QList<QUuid> HttpRequest::idsParam(const QString &name) const
{
    QList<QUuid> ids;
    for (const QString &value : query.allQueryItemValues(name)) {
        for (const QString &part : value.split(u',', Qt::SkipEmptyParts)) {
            auto id = parseWireId(part.trimmed());
            // No conversation has it: its item is null, as an unknown id's is.
            if (!id && isNilWireId(part.trimmed()))
                id = QUuid();
            if (!id)
                throw ApiError::invalidParameter(
                    u"\"%1\" in %2 is not a valid id (a UUID other than the nil one)"_s.arg(part,
                                                                                            name));
            ids.append(*id);
        }
    }
    if (ids.size() > 100)
        throw ApiError::invalidParameter(u"%1 takes at most 100 ids"_s.arg(name));
    return ids;
}

QString HttpRequest::stringParam(const QString &name) const
{
    return query.queryItemValue(name, QUrl::FullyDecoded);
}

int HttpRequest::intParam(const QString &name, int defaultValue, int min, int max) const
{
    if (!query.hasQueryItem(name))
        return defaultValue;
    const auto value = parseWireCount(query.queryItemValue(name));
    if (!value || *value < min || *value > max)
        throw ApiError::invalidParameter(
            u"%1 must be an integer from %2 to %3"_s.arg(name).arg(min).arg(max));
    return int(*value);
}

std::optional<qint64> HttpRequest::timeParam(const QString &name) const
{
    if (!query.hasQueryItem(name))
        return std::nullopt;
    QString text = stringParam(name);
    // A '+' of the zone offset sent as it is reads as a space (see copyRequest): a time has no
    // other space past its 'T'.
    if (const qsizetype clock = text.indexOf(u'T'); clock >= 0) {
        if (const qsizetype space = text.indexOf(u' ', clock); space >= 0)
            text[space] = u'+';
    }
    // Times are stored in whole milliseconds, and a bound between two of them belongs after
    // the earlier: for `t < bound` and `t >= bound` alike, a bound of .4781 is .479. Qt rounds
    // to the nearest, which put an event at .478 on the wrong side of both.
    bool pastTheMillisecond = false;
    const qsizetype seconds = text.indexOf(u'T');
    const qsizetype point = seconds < 0 ? -1 : text.indexOf(u'.', seconds);
    if (point >= 0) {
        qsizetype end = point + 1;
        while (end < text.size() && text[end].isDigit())
            ++end;
        if (end - point - 1 > 3) {
            const QStringView beyond = QStringView(text).sliced(point + 4, end - point - 4);
            pastTheMillisecond = std::any_of(beyond.begin(), beyond.end(),
                                             [](QChar digit) { return digit != u'0'; });
            text.remove(point + 4, end - point - 4);
        }
    }
    const auto time = parseWireTime(text);
    if (!time)
        throw ApiError::invalidParameter(u"%1 must be an ISO 8601 time"_s.arg(name));
    return time->toMSecsSinceEpoch() + (pastTheMillisecond ? 1 : 0);
}

std::optional<bool> HttpRequest::boolParam(const QString &name) const
{
    if (!query.hasQueryItem(name))
        return std::nullopt;
    if (const auto value = parseWireBool(query.queryItemValue(name)))
        return value;
    throw ApiError::invalidParameter(u"%1 must be true or false"_s.arg(name));
}

HttpResponse HttpResponse::json(const QJsonValue &value, int status)
{
    QByteArray body;
    if (value.isObject())
        body = QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact);
    else if (value.isArray())
        body = QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact);
    else if (value.isDouble())
        body = QByteArray::number(value.toInteger());
    else if (value.isBool())
        body = value.toBool() ? "true" : "false";
    else if (value.isString())
        body = QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact).mid(1).chopped(1);
    else
        body = "null";
    return rawJson(std::move(body), status);
}

HttpResponse HttpResponse::rawJson(QByteArray json, int status)
{
    HttpResponse response;
    response.status = status;
    response.body = std::move(json);
    return response;
}

HttpResponse HttpResponse::error(const ApiError &error)
{
    QJsonObject body = error.extra;
    body.insert(u"detail"_s, error.detail);
    body.insert(u"code"_s, error.code);
    HttpResponse response = json(body, error.status);
    if (error.retryAfterSeconds)
        response.headers.append({"Retry-After", QByteArray::number(*error.retryAfterSeconds)});
    return response;
}

namespace {

QByteArrayView reasonPhrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage";
    default:
        return status < 300 ? "OK" : "Error";
    }
}

QByteArray answerBytes(const HttpResponse &response, bool headOnly, QByteArrayView connection)
{
    // Made in one allocation and written in place: an /alive's answer spent as long appending
    // its head piece by piece (each append a call into QByteArray::insert) as parsing its request.
    const auto decimal = [](char(&buffer)[24], qint64 value) {
        return QByteArrayView(buffer, std::to_chars(buffer, std::end(buffer), value).ptr - buffer);
    };
    char status[24];
    char length[24];
    const QByteArrayView statusText = decimal(status, response.status);
    const QByteArrayView lengthText =
        decimal(length, response.nextPart ? response.streamedLength : response.body.size());
    const QByteArrayView reason = reasonPhrase(response.status);
    const QByteArrayView body = headOnly ? QByteArrayView() : QByteArrayView(response.body);
    QVarLengthArray<QByteArrayView, 32> parts{"HTTP/1.1 ",
                                              statusText,
                                              " ",
                                              reason,
                                              "\r\nContent-Type: ",
                                              response.contentType,
                                              "\r\nContent-Length: ",
                                              lengthText,
                                              "\r\n"};
    if (!connection.isEmpty())
        parts << "Connection: " << connection << "\r\n";
    for (const auto &[name, value] : response.headers)
        parts << name << ": " << value << "\r\n";
    parts << "\r\n" << body;
    qsizetype size = 0;
    for (const QByteArrayView part : parts)
        size += part.size();
    QByteArray answer(size, Qt::Uninitialized);
    char *out = answer.data();
    for (const QByteArrayView part : parts)
        out = std::copy(part.begin(), part.end(), out);
    return answer;
}

} // namespace

QByteArray HttpResponse::wireHead() const
{
    return answerBytes(*this, true, {});
}

QByteArray HttpResponse::closingAnswer() const
{
    return answerBytes(*this, false, "close");
}

QByteArray joinJsonArray(const QList<QByteArray> &items)
{
    qsizetype size = 2 + items.size();
    for (const QByteArray &item : items)
        size += item.size();
    QByteArray out;
    out.reserve(size);
    out += '[';
    for (qsizetype i = 0; i < items.size(); ++i) {
        if (i > 0)
            out += ',';
        out += items[i];
    }
    out += ']';
    return out;
}

} // namespace AgentDeck
