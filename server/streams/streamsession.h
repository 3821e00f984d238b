#pragma once

#include "http/actor.h"

#include <QObject>
#include <QTimer>

#include <memory>
#include <optional>

namespace AgentDeck {

class EventStreams;
class WebSocketConnection;

// What every socket of /sockets/ does alike, whatever it streams: it authenticates with the key
// its URL or X-Session-API-Key header gave, judged at once, or else with an auth frame within
// the auth timeout (anything else before it closes the socket with 4001: answered instead, a
// client without the key could keep the server writing for it); it closes at most once; and it
// says when its connection is gone. A subclass streams from beginStreaming() on and hears the
// client's frames in onFrame().
class StreamSession : public QObject
{
    Q_OBJECT
public:
    // Close codes beyond RFC 6455's: 4000 + the HTTP status they stand for, and 1013 for a
    // client that does not read.
    static constexpr int CloseUnauthorized = 4001;
    static constexpr int CloseNotFound = 4004;
    static constexpr int CloseInvalidParameter = 4022;
    static constexpr int CloseSlowConsumer = 1013;

    ~StreamSession() override;

    void start();
    quint64 serial() const { return m_serial; }
    // Who the changes its client asks for are made by: the name of the key it authenticated
    // with, and the client its upgrade's User-Agent names.
    const Actor &actor() const { return m_actor; }
    // A slow consumer's unsent frames are dropped: the close frame goes next, so that it reads
    // why as soon as it reads again. A client that stopped reading never answers the close
    // handshake: it is cut after 5 s without progress.
    void closeWith(int code, const QString &reason);

Q_SIGNALS:
    void finished(AgentDeck::StreamSession *session);

protected:
    StreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                  std::optional<QByteArray> urlKey, QString client, EventStreams &streams,
                  QObject *parent);

    // Authenticated: what the client asked for starts.
    virtual void beginStreaming() = 0;
    // A frame of the authenticated client while the socket is open (a binary one as empty).
    virtual void onFrame(const QByteArray &frame) = 0;
    // The socket closes, by either side: it lets go of what it follows (once).
    virtual void stopped() {}
    bool isAuthenticated() const { return m_authenticated; }
    bool isClosed() const { return m_closed; }
    bool isStreaming() const { return m_authenticated && !m_closed; }

    const std::unique_ptr<WebSocketConnection> m_socket;
    EventStreams &m_streams;

private:
    void onMessage(const QByteArray &message);
    void markClosed();

    const quint64 m_serial;
    const std::optional<QByteArray> m_urlKey;
    Actor m_actor;
    QTimer m_authTimer;
    bool m_authenticated = false;
    bool m_closed = false;
};

} // namespace AgentDeck
