#include "chatclient.h"

#include "logging.h"
#include "serverconfig.h"
#include "wiretypes.h"

#include <QCoroNetworkReply>
#include <QCoroSignal>
#include <QJsonArray>
#include <QJsonDocument>
#include <QMap>
#include <QNetworkReply>
#include <QUuid>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

struct PartialToolCall
{
    QString id;
    QString name;
    QString arguments;
};

QList<ToolCall> toolCallsFrom(const QMap<int, PartialToolCall> &partials)
{
    QList<ToolCall> calls;
    for (const PartialToolCall &partial : partials) {
        ToolCall call;
        call.id = partial.id.isEmpty() ? u"call_"_s + QUuid::createUuid().toString(QUuid::Id128)
                                       : partial.id;
        call.name = partial.name;
        QJsonParseError error;
        const QJsonDocument arguments = QJsonDocument::fromJson(partial.arguments.toUtf8(), &error);
        if (partial.arguments.trimmed().isEmpty())
            call.arguments = {};
        else if (error.error == QJsonParseError::NoError && arguments.isObject())
            call.arguments = arguments.object();
        else // Kept as it came: the tool then explains that its arguments are not JSON.
            call.arguments = {{u"raw_arguments"_s, partial.arguments}};
        calls.append(call);
    }
    return calls;
}

// A message's content: a string, or (some providers) a list of {"type": "text", "text"} parts.
QString contentText(const QJsonValue &content)
{
    if (!content.isArray())
        return content.toString();
    QString text;
    for (const QJsonValue &part : content.toArray())
        text += part.toObject().value(u"text"_s).toString();
    return text;
}

std::optional<std::chrono::milliseconds> retryAfter(const QByteArray &header)
{
    if (header.isEmpty())
        return std::nullopt;
    bool ok = false;
    const double seconds = header.trimmed().toDouble(&ok);
    // Bounded before it is converted: 1e17 s (or inf) overflowed, and the retry went at once.
    // The caller caps it at max_retry_delay.
    if (ok && seconds >= 0)
        return std::chrono::milliseconds(qint64(
            std::min(seconds, std::chrono::duration<double>(MaxTimerDuration).count()) * 1000));
    const QDateTime when = QDateTime::fromString(QString::fromLatin1(header), Qt::RFC2822Date);
    if (when.isValid())
        return std::chrono::milliseconds(
            std::max<qint64>(0, QDateTime::currentDateTimeUtc().msecsTo(when)));
    return std::nullopt;
}

} // namespace

// What one HTTP attempt found.
struct ChatClient::Attempt
{
    int status = 0;
    QByteArray body; // the whole body, or what did not parse as events
    QByteArray retryAfterHeader;
    bool timedOut = false;
    QString networkError;
    // Streaming state.
    QByteArray pending;
    QString content;
    QMap<int, PartialToolCall> toolCalls;
    QJsonObject usage;
    bool complete = false;
    QString streamError;
    bool streamed = false; // the answer came as events (a provider may ignore `stream`)
    qint64 received = 0;   // bytes of the body so far
    bool tooLarge = false;
};

ChatClient::ChatClient(ChatSettings settings, QObject *parent)
    : QObject(parent)
    , m_settings(std::move(settings))
{
    m_retryTimer.setSingleShot(true);
    connect(&m_retryTimer, &QTimer::timeout, this, &ChatClient::wakeUp);
}

ChatClient::~ChatClient() = default;

void ChatClient::cancel()
{
    m_cancelled = true;
    // The request ends from the event loop, as a command's interrupt does: aborting here would
    // resume the run synchronously inside a caller that may be iterating over its runs.
    QMetaObject::invokeMethod(
        this,
        [this] {
            if (m_reply)
                m_reply->abort();
            if (m_retryTimer.isActive()) {
                m_retryTimer.stop();
                Q_EMIT wakeUp();
            }
        },
        Qt::QueuedConnection);
}

QString ChatClient::scrubbed(QString text) const
{
    if (!m_settings.apiKey.isEmpty())
        text.replace(m_settings.apiKey, u"********"_s);
    return leftWhole(text, 500);
}

QCoro::Task<bool> ChatClient::waitBeforeRetry(std::chrono::milliseconds delay)
{
    if (m_cancelled)
        co_return false;
    m_retryTimer.start(delay);
    auto woken = qCoro(this, &ChatClient::wakeUp);
    co_await std::move(woken);
    co_return !m_cancelled;
}

QCoro::Task<> ChatClient::send(QByteArray payload, Attempt *attempt)
{
    QNetworkRequest request(m_settings.endpoint);
    request.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
    request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);
    if (!m_settings.apiKey.isEmpty())
        request.setRawHeader("Authorization", "Bearer " + m_settings.apiKey.toUtf8());
    if (m_settings.stream)
        request.setRawHeader("Accept", "text/event-stream");
    QNetworkReply *reply = m_network.post(request, payload);
    m_reply = reply;

    QTimer deadline;
    deadline.setSingleShot(true);
    connect(&deadline, &QTimer::timeout, reply, [attempt, reply] {
        attempt->timedOut = true;
        reply->abort();
    });
    deadline.start(m_settings.timeout);

    const auto handleEvent = [this, attempt, reply](const QByteArray &data) {
        if (data == "[DONE]") {
            // The end, whether or not the provider closes the connection: one that kept it open
            // had its whole answer thrown away as a timeout. Aborted from the event loop, not
            // from inside the reply's own signal.
            attempt->complete = true;
            QMetaObject::invokeMethod(reply, &QNetworkReply::abort, Qt::QueuedConnection);
            return;
        }
        QJsonParseError error;
        const QJsonObject chunk = QJsonDocument::fromJson(data, &error).object();
        if (error.error != QJsonParseError::NoError) {
            attempt->streamError = u"a streamed chunk is not JSON"_s;
            return;
        }
        if (chunk.value(u"error"_s).isObject()) {
            attempt->streamError =
                chunk.value(u"error"_s).toObject().value(u"message"_s).toString(u"error"_s);
            return;
        }
        if (chunk.value(u"usage"_s).isObject())
            attempt->usage = chunk.value(u"usage"_s).toObject();
        const QJsonObject choice = chunk.value(u"choices"_s).toArray().first().toObject();
        if (!choice.value(u"finish_reason"_s).toString().isEmpty())
            attempt->complete = true;
        const QJsonObject delta = choice.value(u"delta"_s).toObject();
        if (const QString text = delta.value(u"content"_s).toString(); !text.isEmpty()) {
            attempt->content += text;
            if (m_onDelta)
                m_onDelta(text);
        }
        for (const QJsonValue &value : delta.value(u"tool_calls"_s).toArray()) {
            const QJsonObject call = value.toObject();
            const QString id = call.value(u"id"_s).toString();
            // Some providers leave out `index`: a new id then starts a new call, and a piece
            // without one continues the last (they were all merged into one call before).
            int index = call.value(u"index"_s).toInt(-1);
            if (index < 0) {
                const auto last = attempt->toolCalls.isEmpty()
                                      ? attempt->toolCalls.end()
                                      : std::prev(attempt->toolCalls.end());
                const bool continues =
                    last != attempt->toolCalls.end() && (id.isEmpty() || id == last->id);
                index = continues                      ? last.key()
                        : attempt->toolCalls.isEmpty() ? 0
                                                       : attempt->toolCalls.lastKey() + 1;
            }
            PartialToolCall &partial = attempt->toolCalls[index];
            if (!id.isEmpty())
                partial.id = id;
            const QJsonObject function = call.value(u"function"_s).toObject();
            // A name comes whole, or in pieces; some providers repeat it in every piece.
            if (const QString name = function.value(u"name"_s).toString(); name != partial.name)
                partial.name += name;
            partial.arguments += function.value(u"arguments"_s).toString();
        }
    };
    const auto consumeLines = [attempt, handleEvent](const QByteArray &more, bool atEnd) {
        attempt->pending += more;
        if (atEnd && !attempt->pending.isEmpty() && !attempt->pending.endsWith('\n'))
            attempt->pending += '\n';
        qsizetype newline;
        while ((newline = attempt->pending.indexOf('\n')) >= 0) {
            QByteArray line = attempt->pending.left(newline);
            attempt->pending.remove(0, newline + 1);
            if (line.endsWith('\r'))
                line.chop(1);
            if (!line.startsWith("data:"))
                continue; // blank separators, comments, event names
            line.remove(0, 5);
            handleEvent(line.trimmed());
        }
    };
    const auto streaming = [this, attempt, reply] {
        attempt->status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        // A provider that ignores `stream` answers one JSON completion, which is read as such.
        const bool json =
            reply->header(QNetworkRequest::ContentTypeHeader).toString().contains(u"json"_s);
        attempt->streamed = m_settings.stream && attempt->status / 100 == 2 && !json;
        return attempt->streamed;
    };
    // A streamed answer is bounded by what is kept of it: its bytes on the wire are many times
    // its text (the JSON around every piece of a few characters), and an answer of 90 kB came as
    // 6.6 MiB and was refused. The wire is bounded too, more loosely, for a stream of nothing.
    const auto kept = [attempt] {
        qsizetype size = attempt->pending.size() + attempt->content.size();
        for (const PartialToolCall &call : std::as_const(attempt->toolCalls))
            size += call.name.size() + call.arguments.size();
        return size;
    };
    connect(reply, &QNetworkReply::readyRead, &deadline,
            [attempt, reply, &deadline, streaming, consumeLines, kept, this] {
                attempt->received += reply->bytesAvailable();
                const bool streamed = streaming();
                const auto refuse = [attempt, reply] {
                    attempt->tooLarge = true;
                    reply->readAll();
                    QMetaObject::invokeMethod(reply, &QNetworkReply::abort, Qt::QueuedConnection);
                };
                if (attempt->received > (streamed ? 16 * MaxAnswerBytes : MaxAnswerBytes)) {
                    refuse();
                    return;
                }
                if (!streamed) {
                    attempt->body += reply->readAll();
                    return;
                }
                // Streaming: the timeout is the silence between chunks.
                deadline.start(m_settings.timeout);
                consumeLines(reply->readAll(), false);
                if (kept() > MaxAnswerBytes)
                    refuse();
            });

    co_await reply;
    deadline.stop();
    m_reply.clear();
    reply->disconnect(&deadline);
    reply->deleteLater();
    attempt->status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    attempt->retryAfterHeader = reply->rawHeader("Retry-After");
    // An aborted reply (timeout, cancel) is closed and has nothing more to read.
    const QByteArray rest = reply->isOpen() ? reply->readAll() : QByteArray();
    if (streaming())
        consumeLines(rest, true);
    else
        attempt->body += rest;
    if (reply->error() != QNetworkReply::NoError && attempt->status == 0)
        attempt->networkError = reply->errorString();
}

QCoro::Task<ChatResult> ChatClient::complete(QJsonObject body)
{
    m_cancelled = false;
    body.insert(u"stream"_s, m_settings.stream);
    if (m_settings.stream)
        body.insert(u"stream_options"_s, QJsonObject{{u"include_usage"_s, true}});
    const QByteArray payload = QJsonDocument(body).toJson(QJsonDocument::Compact);

    ChatResult result;
    std::chrono::milliseconds backoff = m_settings.retryDelay;
    for (int attemptNumber = 0;; ++attemptNumber) {
        Attempt attempt;
        ++result.usage.requests;
        auto sending = send(payload, &attempt);
        co_await std::move(sending);
        if (m_cancelled) {
            result.outcome = ChatResult::Outcome::Cancelled;
            co_return result;
        }

        // Decide: answered, retry, or give up.
        QString failure;
        QString code;
        bool retryable = false;
        const int status = attempt.status;
        if (attempt.tooLarge) {
            code = u"llm_bad_response"_s;
            failure = u"the provider's answer is larger than %1 MiB"_s.arg(MaxAnswerBytes >> 20);
        } else if (attempt.timedOut && !(attempt.streamed && attempt.complete)) {
            // (A stream that said it was finished before it went silent is whole: answered.)
            code = u"llm_timeout"_s;
            failure = u"the model did not answer within %1 ms"_s.arg(m_settings.timeout.count());
            retryable = true;
        } else if (status == 0) {
            code = u"llm_unavailable"_s;
            failure = u"cannot reach %1: %2"_s.arg(m_settings.endpoint.toDisplayString(),
                                                   attempt.networkError);
            retryable = true;
        } else if (status == 429 || status == 408 || status >= 500) {
            code = u"llm_unavailable"_s;
            failure = u"the provider answered HTTP %1"_s.arg(status);
            retryable = true;
        } else if (status / 100 != 2) {
            code = u"llm_request_rejected"_s;
            const QJsonObject error =
                QJsonDocument::fromJson(attempt.body).object().value(u"error"_s).toObject();
            const QString message = error.value(u"message"_s).toString();
            failure = u"the provider refused the request with HTTP %1%2"_s.arg(status).arg(
                message.isEmpty() ? QString() : u": "_s + message);
        } else if (attempt.streamed) {
            if (!attempt.streamError.isEmpty()) {
                code = u"llm_bad_response"_s;
                failure = u"the provider's stream is broken: "_s + attempt.streamError;
            } else if (!attempt.complete) {
                code = u"llm_unavailable"_s;
                failure = u"the stream ended before the answer was complete"_s;
                retryable = true;
            } else {
                result.outcome = ChatResult::Outcome::Answered;
                result.content = attempt.content;
                result.toolCalls = toolCallsFrom(attempt.toolCalls);
                result.usage.promptTokens = attempt.usage.value(u"prompt_tokens"_s).toInteger();
                result.usage.completionTokens =
                    attempt.usage.value(u"completion_tokens"_s).toInteger();
                co_return result;
            }
        } else {
            QJsonParseError parseError;
            const QJsonDocument document = QJsonDocument::fromJson(attempt.body, &parseError);
            const QJsonValue choices = document.object().value(u"choices"_s);
            const QJsonValue message = choices.toArray().first().toObject().value(u"message"_s);
            if (parseError.error != QJsonParseError::NoError || !choices.isArray() ||
                !message.isObject()) {
                code = u"llm_bad_response"_s;
                failure = u"the provider's answer is not a chat completion (%1 bytes%2)"_s
                              .arg(attempt.body.size())
                              .arg(parseError.error != QJsonParseError::NoError
                                       ? u": "_s + parseError.errorString()
                                       : QString());
            } else {
                QMap<int, PartialToolCall> calls;
                int index = 0;
                for (const QJsonValue &value :
                     message.toObject().value(u"tool_calls"_s).toArray()) {
                    const QJsonObject call = value.toObject();
                    const QJsonObject function = call.value(u"function"_s).toObject();
                    const QJsonValue arguments = function.value(u"arguments"_s);
                    calls.insert(
                        index++,
                        PartialToolCall{call.value(u"id"_s).toString(),
                                        function.value(u"name"_s).toString(),
                                        arguments.isObject()
                                            ? QString::fromUtf8(QJsonDocument(arguments.toObject())
                                                                    .toJson(QJsonDocument::Compact))
                                            : arguments.toString()});
                }
                const QJsonObject usage = document.object().value(u"usage"_s).toObject();
                result.outcome = ChatResult::Outcome::Answered;
                result.content = contentText(message.toObject().value(u"content"_s));
                result.toolCalls = toolCallsFrom(calls);
                result.usage.promptTokens = usage.value(u"prompt_tokens"_s).toInteger();
                result.usage.completionTokens = usage.value(u"completion_tokens"_s).toInteger();
                co_return result;
            }
        }

        if (!retryable || attemptNumber >= m_settings.maxRetries) {
            result.outcome = ChatResult::Outcome::Failed;
            result.errorCode = code;
            result.error = scrubbed(
                retryable && attemptNumber > 0
                    ? u"%1 (gave up after %2 attempts)"_s.arg(failure).arg(attemptNumber + 1)
                    : failure);
            co_return result;
        }
        std::chrono::milliseconds delay = backoff;
        if (const auto asked = retryAfter(attempt.retryAfterHeader))
            delay = *asked;
        delay = std::min(delay, m_settings.maxRetryDelay);
        backoff = std::min(backoff * 2, m_settings.maxRetryDelay);
        qCInfo(lcExecution).noquote() << u"model request failed (%1); retry %2 in %3 ms"_s.arg(
            scrubbed(failure), QString::number(attemptNumber + 1), QString::number(delay.count()));
        ++result.usage.retries;
        auto waiting = waitBeforeRetry(delay);
        if (!co_await std::move(waiting)) {
            result.outcome = ChatResult::Outcome::Cancelled;
            co_return result;
        }
    }
}

} // namespace AgentDeck
