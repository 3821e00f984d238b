#pragma once

#include "execution/agent.h"
#include "execution/llm/chatclient.h"

#include <QJsonArray>

#include <memory>

namespace AgentDeck {

// The llm agent's settings: the conversation's `agent` object over the server-wide defaults.
struct LlmSettings
{
    QString baseUrl;
    QString model;
    QString apiKey;
    // A per-conversation key was sent, but it is no longer in memory (the server restarted).
    bool apiKeyLost = false;
    bool stream = false;
    std::chrono::milliseconds timeout{120'000};
    int maxRetries = 4;
    std::chrono::milliseconds retryDelay{1'000};
    std::chrono::milliseconds maxRetryDelay{60'000};
    QString systemPrompt;
    int maxIterations = 50;
    qint64 maxContextTokens = 100'000;
    // The tools the model is offered (`agent.tools`), finish always among them; nothing: all.
    std::optional<QStringList> tools;

    // What a redacted key looks like in the `agent` object.
    static inline const QString RedactedKey = QStringLiteral("********");
    static QString defaultSystemPrompt();
    // Checks the `agent` object (without kind) of a create request and moves the API key out of
    // it into `*apiKey` (leaving the redacted marker). Returns an error sentence or nothing.
    static QString validate(QJsonObject &config, const LlmDefaults &defaults, QString *apiKey);
    static LlmSettings resolve(const QJsonObject &config, const LlmDefaults &defaults,
                               const QString &conversationKey);
};

// Drives a conversation with an OpenAI-compatible chat model. Stateless over the history: the
// events become chat messages on every step, so a fresh instance continues an interrupted run.
class LlmAgent final : public Agent
{
public:
    LlmAgent(LlmSettings settings, AgentContext context);
    ~LlmAgent() override;

    QCoro::Task<AgentStep> next(const QList<Event> &history) override;
    void cancel() override;
    bool offers(const QString &toolName) const override;

    // The chat messages for a history (system prompt first), older tool results truncated when
    // the estimate (characters / 4) exceeds `maxContextTokens`. Exposed for tests.
    static QJsonArray messagesFor(const QList<Event> &history, const QString &systemPrompt,
                                  qint64 maxContextTokens);
    // Model turns (answers that called tools) since the last user message or the last
    // max_iterations error.
    static int iterationsSinceInput(const QList<Event> &history);

private:
    LlmSettings m_settings;
    AgentContext m_context;
    std::unique_ptr<ChatClient> m_client;
};

} // namespace AgentDeck
