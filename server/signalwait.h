#pragma once

#include <QCoroTask>
#include <QCoroTimer>
#include <QObject>
#include <QTimer>

#include <chrono>

namespace AgentDeck {

// Resumes once `sender` has emitted `signal`, or is destroyed, or `timeout` has passed,
// whichever comes first; the caller then looks at the state it waits for. This replaces QCoro 0.8's
// qCoro(sender, signal): that hands every emission to its awaiter through a queued call, so a
// signal emitted twice before the first call runs reaches an awaiter that is gone (the server
// crashed when two runs stopped at once). Here an emission only restarts a single-shot timer,
// which wakes the waiter once.
template<typename Sender, typename Signal>
QCoro::Task<> signalOrTimeout(Sender *sender, Signal signal, std::chrono::milliseconds timeout)
{
    QTimer wake;
    wake.setSingleShot(true);
    QObject::connect(sender, signal, &wake, [&wake] { wake.start(0); });
    QObject::connect(sender, &QObject::destroyed, &wake, [&wake] { wake.start(0); });
    wake.start(timeout);
    co_await wake;
}

} // namespace AgentDeck
