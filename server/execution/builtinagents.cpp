#include "agent.h"

#include "llm/llmagent.h"

#include <QHash>
#include <QQueue>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// The user messages not yet answered by an agent message, oldest first. Each agent message
// answers the oldest open one.
QQueue<const Event *> openUserMessages(const QList<Event> &history)
{
    QQueue<const Event *> open;
    for (const Event &event : history) {
        if (event.kind != EventKind::Message)
            continue;
        if (event.source == EventSource::User)
            open.enqueue(&event);
        else if (event.source == EventSource::Agent && !open.isEmpty())
            open.dequeue();
    }
    return open;
}

class EchoAgent final : public Agent
{
public:
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const auto open = openUserMessages(history);
        if (open.isEmpty())
            co_return AgentStep{AgentStep::Kind::Finish};
        co_return AgentStep{AgentStep::Kind::Reply, open.head()->messageText()};
    }
};

class ShellAgent final : public Agent
{
public:
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const auto open = openUserMessages(history);
        if (open.isEmpty())
            co_return AgentStep{AgentStep::Kind::Finish};
        const Event *message = open.head();

        // The action this agent took for the message, and how it ended.
        const Event *action = nullptr;
        const Event *outcome = nullptr;
        for (const Event &event : history) {
            if (event.seq <= message->seq)
                continue;
            if (event.kind == EventKind::Action && !action)
                action = &event;
            else if (action && event.actionId() == toWireId(action->id) &&
                     (event.kind == EventKind::Observation || event.kind == EventKind::UserReject))
                outcome = &event;
        }
        if (!action)
            co_return AgentStep{AgentStep::Kind::RunCommand, message->messageText()};
        if (!outcome)
            co_return AgentStep{AgentStep::Kind::Fail,
                                u"The shell agent found its command without a result"_s,
                                u"agent_inconsistent"_s};
        co_return AgentStep{AgentStep::Kind::Reply, replyFor(*outcome)};
    }

private:
    static QString replyFor(const Event &outcome)
    {
        if (outcome.kind == EventKind::UserReject)
            return u"Command rejected: "_s +
                   outcome.fields.value(u"rejection_reason"_s).toString(u"no reason given"_s);
        const QJsonObject observation = outcome.fields.value(u"observation"_s).toObject();
        QString reply = observation.value(u"output"_s).toString();
        if (observation.value(u"interrupted"_s).toBool())
            return reply + u"[command interrupted]"_s;
        const int exitCode = observation.value(u"exit_code"_s).toInt();
        if (exitCode != 0)
            reply += u"[exit code %1]"_s.arg(exitCode);
        return reply;
    }
};

} // namespace

BuiltinAgentFactory::BuiltinAgentFactory(LlmDefaults llm)
    : m_llm(std::move(llm))
{}

bool BuiltinAgentFactory::knows(const QString &kind) const
{
    return kinds().contains(kind);
}

QStringList BuiltinAgentFactory::kinds() const
{
    return {u"shell"_s, u"echo"_s, u"llm"_s};
}

std::unique_ptr<Agent> BuiltinAgentFactory::createFor(const QString &kind,
                                                      const AgentContext &context) const
{
    if (kind == u"llm"_s)
        return std::make_unique<LlmAgent>(
            LlmSettings::resolve(context.config, m_llm, context.apiKey), context);
    return create(kind);
}

QString BuiltinAgentFactory::validate(const QString &kind, QJsonObject &config,
                                      QString *secret) const
{
    if (kind == u"llm"_s)
        return LlmSettings::validate(config, m_llm, secret);
    return {};
}

std::unique_ptr<Agent> BuiltinAgentFactory::create(const QString &kind) const
{
    if (kind == u"shell"_s)
        return std::make_unique<ShellAgent>();
    if (kind == u"echo"_s)
        return std::make_unique<EchoAgent>();
    if (kind == u"llm"_s)
        return createFor(kind, AgentContext{});
    return nullptr;
}

} // namespace AgentDeck
