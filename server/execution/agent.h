#pragma once

#include "storage/conversationstore.h"
#include "wiretypes.h"

#include <QCoroTask>
#include <QJsonObject>
#include <QList>

#include <chrono>
#include <functional>
#include <memory>

namespace AgentDeck {

// One tool call of a language model: it becomes an ActionEvent, which the runner executes.
struct ToolCall
{
    QString name;
    QString id;
    QJsonObject arguments;
    QString thought; // the model's text that came with the call
};

// What an agent wants to do next, decided from the conversation so far.
struct AgentStep
{
    enum class Kind
    {
        RunCommand,
        Reply,
        CallTools, // record `toolCalls` as actions; the runner executes them
        Finish,    // with `text`: the final message, stored before the status
        Fail,
        Cancelled // the step was cancelled (pause, interrupt): the run stops, resumable
    };
    Kind kind = Kind::Finish;
    QString text;      // the command, the reply or the error sentence
    QString errorCode; // for Fail
    QList<ToolCall> toolCalls;
    LlmUsage usage; // what deciding this step cost, added to the conversation's stats
};

// Turns the history into the next step. Agents keep no state between steps: a fresh instance
// given the same history decides the same, which is what makes an interrupted run resumable.
class Agent
{
public:
    // How much of the history next() is given.
    enum class HistoryScope
    {
        Whole,       // every event: a model's context
        OpenMessages // the events after ConversationStore::answeredThrough: an agent that
                     // answers each user message in turn and remembers nothing older
    };

    virtual ~Agent() = default;
    virtual HistoryScope historyScope() const { return HistoryScope::Whole; }
    // Whether its steps may run commands. A run of an agent that runs none (echo) brings no
    // runtime up: a load test of thousands of echo conversations started a sandbox host each.
    virtual bool runsCommands() const { return true; }
    virtual QCoro::Task<AgentStep> next(const QList<Event> &history) = 0;
    // Cancels the decision in flight (a model request): next() then returns Kind::Cancelled.
    virtual void cancel() {}
    // Whether the conversation's agent has the tool: an action naming another one (a model
    // calling a tool it was not offered) is refused rather than run.
    virtual bool offers(const QString & /*toolName*/) const { return true; }
};

// What an agent is created with, besides its kind.
struct AgentContext
{
    QUuid conversationId;
    // The conversation's `agent` object without `kind` (secrets redacted).
    QJsonObject config;
    // A per-conversation secret held in memory only (the llm API key); empty when none.
    QString apiKey;
    // Sends a transient frame (never stored, no seq) to the conversation's live subscribers.
    std::function<void(const QJsonObject &frame)> publishTransient;
};

// Server-wide settings of the llm agent, used when a conversation does not set them.
struct LlmDefaults
{
    QString baseUrl;
    QString model;
    QString apiKey;
    std::chrono::milliseconds timeout{120'000};
};

class AgentFactory
{
public:
    virtual ~AgentFactory() = default;
    virtual bool knows(const QString &kind) const = 0;
    virtual QStringList kinds() const = 0;
    virtual std::unique_ptr<Agent> create(const QString &kind) const = 0;
    // Whether an interrupted command of this kind's agent is offered to run again: its next
    // step would only report the interruption (the shell agent), where a model continues.
    virtual bool offersRetry(const QString & /*kind*/) const { return false; }
    // Creates the agent of a conversation with its settings; by default as create(kind).
    virtual std::unique_ptr<Agent> createFor(const QString &kind, const AgentContext &) const
    {
        return create(kind);
    }
    // Checks a create request's agent settings (`config`: the agent object without kind) and
    // normalizes them in place; a secret in them (an API key) is moved to `*secret`, leaving a
    // redacted marker. Returns an error sentence, empty when they are acceptable.
    virtual QString validate(const QString &, QJsonObject &, QString * /*secret*/) const
    {
        return {};
    }
};

// The built-in agents: "shell" runs each user message as a command, "echo" replies with it,
// "llm" is driven by an OpenAI-compatible chat completions endpoint.
class BuiltinAgentFactory final : public AgentFactory
{
public:
    explicit BuiltinAgentFactory(LlmDefaults llm = {});
    bool knows(const QString &kind) const override;
    QStringList kinds() const override;
    std::unique_ptr<Agent> create(const QString &kind) const override;
    bool offersRetry(const QString &kind) const override { return kind == u"shell"; }
    std::unique_ptr<Agent> createFor(const QString &kind,
                                     const AgentContext &context) const override;
    QString validate(const QString &kind, QJsonObject &config, QString *secret) const override;

private:
    LlmDefaults m_llm;
};

} // namespace AgentDeck
