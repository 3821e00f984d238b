#pragma once

#include "serverconfig.h"

#include <QObject>
#include <QThread>
#include <QUrl>

namespace AgentDeck {

class AgentDeckServer;

// The console's own server, in a thread of its own. The console talks to it over loopback HTTP
// and WebSocket like any remote client; nothing else crosses the thread boundary.
class EmbeddedServer : public QObject
{
    Q_OBJECT
public:
    explicit EmbeddedServer(ServerConfig config, QObject *parent = nullptr);
    ~EmbeddedServer() override;

    // Starts the server thread and waits until it listens and has recovered. Returns the URL,
    // or an empty URL with the reason in *error.
    QUrl start(QString *error);
    // Stops gracefully (runs paused at a safe point, leases released) and joins the thread.
    void stop();

Q_SIGNALS:
    // The server cannot go on (AgentDeckServer::cannotGoOn), in the console's thread.
    void cannotGoOn(const QString &reason);

private:
    ServerConfig m_config;
    QThread m_thread;
    AgentDeckServer *m_server = nullptr;
};

} // namespace AgentDeck
