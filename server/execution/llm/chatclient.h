#pragma once

#include "execution/agent.h"

#include <QCoroTask>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QUrl>

#include <chrono>
#include <functional>

class QNetworkReply;

namespace AgentDeck {

// The most of an answer the client reads: a model that talks without end (or a provider that
// sends garbage) costs the server no more memory than this, and the history no event larger
// than a stream can carry.
inline constexpr qsizetype MaxAnswerBytes = 4 * 1024 * 1024;

struct ChatSettings
{
    QUrl endpoint; // .../chat/completions
    QString apiKey;
    bool stream = false;
    // Per request: the whole answer without streaming, the silence between chunks with it.
    std::chrono::milliseconds timeout{120'000};
    int maxRetries = 4;
    std::chrono::milliseconds retryDelay{1'000}; // doubled after each retry
    std::chrono::milliseconds maxRetryDelay{60'000};
};

struct ChatResult
{
    enum class Outcome
    {
        Answered,
        Cancelled,
        Failed
    };
    Outcome outcome = Outcome::Failed;
    QString content;
    QList<ToolCall> toolCalls;
    QString errorCode; // for Failed
    QString error;     // a sentence for the operator, never holding the key
    LlmUsage usage;
};

// One OpenAI-compatible chat completions endpoint, spoken like a well-behaved client: retries with
// backoff on 429, 408, 5xx and dropped connections (honouring Retry-After), a timeout per request,
// server-sent events when streaming, and a cancel that aborts the request in flight.
class ChatClient : public QObject
{
    Q_OBJECT
public:
    explicit ChatClient(ChatSettings settings, QObject *parent = nullptr);
    ~ChatClient() override;

    // Called with each text delta of a streamed answer.
    void setDeltaHandler(std::function<void(const QString &)> handler)
    {
        m_onDelta = std::move(handler);
    }
    // `body` is the request without "stream" (set from the settings).
    QCoro::Task<ChatResult> complete(QJsonObject body);
    void cancel();

Q_SIGNALS:
    void wakeUp();

private:
    struct Attempt;
    QCoro::Task<> send(QByteArray payload, Attempt *attempt);
    QCoro::Task<bool> waitBeforeRetry(std::chrono::milliseconds delay);
    QString scrubbed(QString text) const;

    ChatSettings m_settings;
    QNetworkAccessManager m_network;
    QPointer<QNetworkReply> m_reply;
    QTimer m_retryTimer;
    bool m_cancelled = false;
    std::function<void(const QString &)> m_onDelta;
};

} // namespace AgentDeck
