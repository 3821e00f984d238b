#include "conversationlifecycle.h"

#include "execution/conversationrunner.h"
#include "runtime/runtime.h"

#include <QCoreApplication>

#include <algorithm>

namespace AgentDeck {

ConversationRunner *ConversationLifecycle::runner() const
{
    return m_run == Run::Running ? m_runner.data() : nullptr;
}

bool ConversationLifecycle::beginStart(quint64 number, const LeaseToken &lease)
{
    if (m_run != Run::None)
        return false;
    m_run = Run::Starting;
    m_start = number;
    m_lease = lease;
    m_stopAsked = StopAsked::None;
    m_stopCause.reset();
    m_runsAgain = false;
    return true;
}

bool ConversationLifecycle::askStop(StopAsked how, const std::optional<ChangeCause> &cause)
{
    if (m_run != Run::Starting)
        return false;
    m_stopAsked = std::max(m_stopAsked, how);
    if (!m_stopCause)
        m_stopCause = cause;
    return true;
}

std::optional<ConversationLifecycle::StopAsked>
ConversationLifecycle::startSucceeded(quint64 number, ConversationRunner *runner,
                                      std::shared_ptr<Runtime> runtime)
{
    if (!isStart(number))
        return std::nullopt;
    const StopAsked asked = m_stopAsked;
    m_run = Run::Running;
    m_runner = runner;
    m_runtime = std::move(runtime);
    m_stopAsked = StopAsked::None;
    return asked;
}

bool ConversationLifecycle::startFailed(quint64 number)
{
    if (!isStart(number))
        return false;
    m_run = Run::None;
    m_stopAsked = StopAsked::None;
    m_runsAgain = false;
    m_lease = {};
    return true;
}

std::optional<bool> ConversationLifecycle::runnerStopped(const ConversationRunner *runner,
                                                         UnwrittenEnd unwritten)
{
    // A runner destroyed first (the service going away) leaves a null pointer behind.
    if (m_run != Run::Running || (m_runner && m_runner != runner))
        return std::nullopt;
    const bool again = m_runsAgain;
    m_runsAgain = false;
    m_runner = nullptr;
    m_runtime.reset();
    if (unwritten.events.isEmpty()) {
        m_run = Run::None;
        m_lease = {};
    } else {
        m_run = Run::EndUnwritten;
        m_lease = unwritten.lease;
        m_end = std::move(unwritten);
    }
    return again;
}

bool ConversationLifecycle::endWritten()
{
    if (m_run != Run::EndUnwritten)
        return false;
    m_run = Run::None;
    m_end = {};
    m_lease = {};
    return true;
}

bool ConversationLifecycle::askRunAfterStop(bool runnerStopping)
{
    const bool stopping = (m_run == Run::Running && runnerStopping) ||
                          (m_run == Run::Starting && m_stopAsked != StopAsked::None);
    if (!stopping || isHalting())
        return false;
    m_runsAgain = true;
    return true;
}

ConversationRunner *ConversationLifecycle::forget()
{
    ConversationRunner *runner = this->runner();
    m_run = Run::None;
    m_runner = nullptr;
    m_runtime.reset();
    m_stopAsked = StopAsked::None;
    m_runsAgain = false;
    m_end = {};
    m_lease = {};
    return runner;
}

void ConversationLifecycle::haltBegan()
{
    ++m_halts;
    m_runsAgain = false;
}

ConversationLifecycles::Turn::Turn(ConversationLifecycles *owner, const QUuid &id)
    : m_owner(owner)
    , m_context(owner->m_context)
    , m_guarded(owner->m_context != nullptr)
    , m_id(id)
{}

ConversationLifecycles::Turn::Turn(Turn &&other) noexcept
    : m_owner(std::exchange(other.m_owner, nullptr))
    , m_context(std::move(other.m_context))
    , m_guarded(other.m_guarded)
    , m_id(other.m_id)
{}

ConversationLifecycles::Turn &ConversationLifecycles::Turn::operator=(Turn &&other) noexcept
{
    if (this != &other) {
        release();
        m_owner = std::exchange(other.m_owner, nullptr);
        m_context = std::move(other.m_context);
        m_guarded = other.m_guarded;
        m_id = other.m_id;
    }
    return *this;
}

void ConversationLifecycles::Turn::release()
{
    ConversationLifecycles *owner = std::exchange(m_owner, nullptr);
    if (owner && (!m_guarded || m_context))
        owner->handOverTurn(m_id);
}

bool ConversationLifecycles::tryTakeTurn(const QUuid &id)
{
    ConversationLifecycle &lifecycle = at(id);
    if (lifecycle.m_turnTaken)
        return false;
    lifecycle.m_turnTaken = true;
    return true;
}

void ConversationLifecycles::handOverTurn(const QUuid &id)
{
    ConversationLifecycle *lifecycle = find(id);
    if (!lifecycle)
        return;
    if (lifecycle->m_waitingForTurn.isEmpty()) {
        lifecycle->m_turnTaken = false;
        settle(id);
        return;
    }
    // Still taken: it passes to the first waiting, resumed from the event loop rather than
    // inside the request that let it go (which is in the middle of its own end).
    const std::coroutine_handle<> next = lifecycle->m_waitingForTurn.takeFirst();
    QObject *context = m_context ? m_context : QCoreApplication::instance();
    QMetaObject::invokeMethod(
        context, [next] { next.resume(); }, Qt::QueuedConnection);
}

ConversationLifecycle *ConversationLifecycles::find(const QUuid &id)
{
    const auto it = m_lifecycles.find(id);
    return it == m_lifecycles.end() ? nullptr : &*it;
}

const ConversationLifecycle *ConversationLifecycles::find(const QUuid &id) const
{
    const auto it = m_lifecycles.constFind(id);
    return it == m_lifecycles.cend() ? nullptr : &*it;
}

void ConversationLifecycles::settle(const QUuid &id)
{
    if (const auto *lifecycle = find(id); lifecycle && lifecycle->isSettled())
        m_lifecycles.remove(id);
}

bool ConversationLifecycles::isRunningHere(const QUuid &id) const
{
    const auto *lifecycle = find(id);
    return lifecycle && lifecycle->isRunningHere();
}

bool ConversationLifecycles::isInUse(const QUuid &id) const
{
    const auto *lifecycle = find(id);
    return lifecycle && lifecycle->isInUse();
}

ConversationRunner *ConversationLifecycles::runner(const QUuid &id) const
{
    const auto *lifecycle = find(id);
    return lifecycle ? lifecycle->runner() : nullptr;
}

QList<QUuid> ConversationLifecycles::in(ConversationLifecycle::Run run) const
{
    QList<QUuid> ids;
    for (auto it = m_lifecycles.cbegin(); it != m_lifecycles.cend(); ++it) {
        if (it->run() == run)
            ids.append(it.key());
    }
    return ids;
}

QList<ConversationRunner *> ConversationLifecycles::runners() const
{
    QList<ConversationRunner *> runners;
    for (const ConversationLifecycle &lifecycle : m_lifecycles) {
        if (ConversationRunner *runner = lifecycle.runner())
            runners.append(runner);
    }
    return runners;
}

QHash<QUuid, qint64> ConversationLifecycles::runningLeaseEpochs() const
{
    QHash<QUuid, qint64> epochs;
    for (auto it = m_lifecycles.cbegin(); it != m_lifecycles.cend(); ++it) {
        if (it->run() == ConversationLifecycle::Run::Running)
            epochs.insert(it.key(), it->lease().epoch);
    }
    return epochs;
}

int ConversationLifecycles::runningCount() const
{
    return int(std::count_if(m_lifecycles.cbegin(), m_lifecycles.cend(),
                             [](const ConversationLifecycle &lifecycle) {
                                 return lifecycle.run() == ConversationLifecycle::Run::Running;
                             }));
}

} // namespace AgentDeck
