#include "agent.h"

#include "llm/llmagent.h"

#include <QHash>
#include <QQueue>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// The oldest user message not yet answered by an agent message (each agent message answers the
// oldest open one), with the action taken for it and how that ended. An action belongs to the
// message that was oldest open when it was taken: messages sent while a command runs come
// after its action in the history, and wait for their own.
struct OpenMessage
{
    const Event *message = nullptr;
    const Event *action = nullptr;
    const Event *outcome = nullptr;
};

OpenMessage oldestOpenMessage(const QList<Event> &history)
{
    QQueue<const Event *> open;
    OpenMessage oldest;
    for (const Event &event : history) {
        if (event.kind == EventKind::Message && event.source == EventSource::User) {
            open.enqueue(&event);
        } else if (event.kind == EventKind::Message && event.source == EventSource::Agent) {
            if (!open.isEmpty())
                open.dequeue();
            oldest.action = oldest.outcome = nullptr;
        } else if (event.kind == EventKind::Action) {
            if (!open.isEmpty() && !oldest.action)
                oldest.action = &event;
        } else if (oldest.action && event.actionId() == toWireId(oldest.action->id) &&
                   (event.kind == EventKind::Observation || event.kind == EventKind::UserReject)) {
            oldest.outcome = &event;
        }
    }
    oldest.message = open.isEmpty() ? nullptr : open.head();
    return oldest;
}

class EchoAgent final : public Agent
{
public:
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const OpenMessage open = oldestOpenMessage(history);
        if (!open.message)
            co_return AgentStep{AgentStep::Kind::Finish};
        co_return AgentStep{AgentStep::Kind::Reply, open.message->messageText()};
    }
};

class ShellAgent final : public Agent
{
public:
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const OpenMessage open = oldestOpenMessage(history);
        if (!open.message)
            co_return AgentStep{AgentStep::Kind::Finish};
        if (!open.action)
            co_return AgentStep{AgentStep::Kind::RunCommand, open.message->messageText()};
        if (!open.outcome)
            co_return AgentStep{AgentStep::Kind::Fail,
                                u"The shell agent found its command without a result"_s,
                                u"agent_inconsistent"_s};
        co_return AgentStep{AgentStep::Kind::Reply, replyFor(*open.outcome)};
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
