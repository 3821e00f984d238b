#pragma once

#include <QObject>

class QSocketNotifier;

namespace AgentDeck {

// Turns SIGTERM, SIGINT and SIGHUP (unless ignored) into a Qt signal, through a self-pipe: the
// handler only writes a byte.
class UnixSignals : public QObject
{
    Q_OBJECT
public:
    explicit UnixSignals(QObject *parent = nullptr);
    ~UnixSignals() override;

Q_SIGNALS:
    void terminationRequested(int signal);

private:
    QSocketNotifier *m_notifier = nullptr;
    bool m_hangUpHandled = false;
};

} // namespace AgentDeck
