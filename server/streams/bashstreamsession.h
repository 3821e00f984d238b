#pragma once

#include <QObject>
#include <QTimer>

#include <memory>
#include <optional>

namespace AgentDeck {

class EventStreams;
class WebSocketConnection;

// One client of /sockets/bash-events (OpenHands' bash-events socket): after its key (the URL's,
// the X-Session-API-Key header's, or an auth frame within the auth timeout), every bash event
// as it is added, after those stored when it connected if it asked for them
// (resend_mode=all). A frame it sends is an ExecuteBashRequest, started as
// /api/bash/start_bash_command starts one; a refusal comes back as a BashError frame. States:
// authenticating, live, closed.
class BashStreamSession : public QObject
{
    Q_OBJECT
public:
    BashStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial, bool resendAll,
                      std::optional<QByteArray> key, EventStreams &streams,
                      QObject *parent = nullptr);
    ~BashStreamSession() override;

    void start();
    quint64 serial() const { return m_serial; }
    void closeWith(int code, const QString &reason);
    // A command this client asked for was refused.
    void sendBashError(const QString &code, const QString &detail);

Q_SIGNALS:
    void finished(AgentDeck::BashStreamSession *session);

private:
    enum class State
    {
        Authenticating,
        Live,
        Closed
    };

    void beginStreaming();
    void onAdded(quint64 number, const QByteArray &json);
    void onTextMessage(const QByteArray &message);

    std::unique_ptr<WebSocketConnection> m_socket;
    quint64 m_serial;
    bool m_resendAll;
    std::optional<QByteArray> m_key;
    EventStreams &m_streams;
    State m_state = State::Authenticating;
    quint64 m_lastNumber = 0; // of the last event sent
    QTimer m_authTimer;
};

} // namespace AgentDeck
