#pragma once

#include "streamsession.h"

namespace AgentDeck {

// One client of /sockets/bash-events (OpenHands' bash-events socket): after its key (the URL's,
// the X-Session-API-Key header's, or an auth frame within the auth timeout), every bash event
// as it is added, after those stored when it connected if it asked for them
// (resend_mode=all). A frame it sends is an ExecuteBashRequest, started as
// /api/bash/start_bash_command starts one; a refusal comes back as a BashError frame.
class BashStreamSession : public StreamSession
{
    Q_OBJECT
public:
    BashStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial, bool resendAll,
                      std::optional<QByteArray> key, QString client, EventStreams &streams,
                      QObject *parent = nullptr);

    // A command this client asked for was refused.
    void sendBashError(const QString &code, const QString &detail);

private:
    void beginStreaming() override;
    void onFrame(const QByteArray &frame) override;
    void onAdded(quint64 number, const QByteArray &json);

    const bool m_resendAll;
    quint64 m_lastNumber = 0; // of the last event sent
};

} // namespace AgentDeck
