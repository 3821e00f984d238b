#pragma once

#include "wiretypes.h"

#include <QCoroTask>
#include <QList>

#include <memory>

namespace AgentDeck {

// What an agent wants to do next, decided from the conversation so far.
struct AgentStep
{
    enum class Kind
    {
        RunCommand,
        Reply,
        Finish,
        Fail
    };
    Kind kind = Kind::Finish;
    QString text;      // the command, the reply or the error sentence
    QString errorCode; // for Fail
};

// Turns the history into the next step. Agents keep no state between steps: a fresh instance
// given the same history decides the same, which is what makes an interrupted run resumable.
class Agent
{
public:
    virtual ~Agent() = default;
    virtual QCoro::Task<AgentStep> next(const QList<Event> &history) = 0;
};

class AgentFactory
{
public:
    virtual ~AgentFactory() = default;
    virtual bool knows(const QString &kind) const = 0;
    virtual QStringList kinds() const = 0;
    virtual std::unique_ptr<Agent> create(const QString &kind) const = 0;
};

// The built-in agents: "shell" runs each user message as a command, "echo" replies with it.
class BuiltinAgentFactory final : public AgentFactory
{
public:
    bool knows(const QString &kind) const override;
    QStringList kinds() const override;
    std::unique_ptr<Agent> create(const QString &kind) const override;
};

} // namespace AgentDeck
