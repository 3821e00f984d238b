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

// Follows a run's history as it grows: an agent looks at it after every step, and reading it
// whole each time made a backlog of N messages cost N² (8,000 took 7 s, all of it comparing
// kinds).
class OpenMessageTracker
{
public:
    OpenMessage oldest(const QList<Event> &history)
    {
        if (history.size() < m_seen) // not the history followed so far
            *this = {};
        for (; m_seen < history.size(); ++m_seen)
            take(history[m_seen], m_seen);
        const auto at = [&history](qsizetype index) {
            return index < 0 ? nullptr : &history[index];
        };
        return {m_open.isEmpty() ? nullptr : &history[m_open.head()], at(m_action), at(m_outcome)};
    }

private:
    void take(const Event &event, qsizetype index)
    {
        if (event.kind == EventKind::Message && event.source == EventSource::User) {
            m_open.enqueue(index);
        } else if (event.kind == EventKind::Message && event.source == EventSource::Agent) {
            if (!m_open.isEmpty())
                m_open.dequeue();
            m_action = m_outcome = -1;
        } else if (event.kind == EventKind::Action) {
            if (!m_open.isEmpty() && m_action < 0) {
                m_action = index;
                m_actionId = toWireId(event.id);
            }
        } else if (m_action >= 0 &&
                   (event.kind == EventKind::Observation || event.kind == EventKind::UserReject) &&
                   event.actionId() == m_actionId) {
            m_outcome = index;
        }
    }

    qsizetype m_seen = 0;
    QQueue<qsizetype> m_open; // user messages not answered yet, oldest first
    qsizetype m_action = -1;  // the action taken for the oldest of them
    QString m_actionId;
    qsizetype m_outcome = -1; // and how it ended
};

class EchoAgent final : public Agent
{
public:
    HistoryScope historyScope() const override { return HistoryScope::OpenMessages; }
    bool runsCommands() const override { return false; }
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const OpenMessage open = m_messages.oldest(history);
        if (!open.message)
            co_return AgentStep{AgentStep::Kind::Finish};
        co_return AgentStep{AgentStep::Kind::Reply, open.message->messageText()};
    }

private:
    OpenMessageTracker m_messages;
};

class ShellAgent final : public Agent
{
public:
    HistoryScope historyScope() const override { return HistoryScope::OpenMessages; }
    QCoro::Task<AgentStep> next(const QList<Event> &history) override
    {
        const OpenMessage open = m_messages.oldest(history);
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
    OpenMessageTracker m_messages;

    static QString replyFor(const Event &outcome)
    {
        if (outcome.kind == EventKind::UserReject) {
            // A reject without a reason (the console's button) stores an empty one.
            const QString reason = outcome.fields.value(u"rejection_reason"_s).toString().trimmed();
            return u"Command rejected: "_s + (reason.isEmpty() ? u"no reason given"_s : reason);
        }
        const QJsonObject observation = outcome.fields.value(u"observation"_s).toObject();
        // What an interrupted command printed is in its observation, once: repeated here, a
        // reply written when the conversation ran again (a retry, after a restart) read as that
        // run's fresh output, and was glued to the interruption's own line.
        if (observation.value(u"interrupted"_s).toBool())
            return u"[command interrupted]"_s;
        QString reply = observation.value(u"output"_s).toString();
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
