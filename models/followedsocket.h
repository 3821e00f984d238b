#pragma once

#include <QObject>
#include <QUrl>
#include <QUrlQuery>

#include <chrono>
#include <functional>

class QTimer;
class QWebSocket;

namespace AgentDeck {

// A WebSocket a client follows for as long as it wants it: sends the auth frame on each
// connection, reconnects with backoff after a drop (asking its owner for the query to resume
// with), and takes a socket that heard nothing for the silence timeout for lost, so that a frozen
// server ends in a reconnect rather than in silence. EventStream and LifecycleFeed follow theirs
// with it.
class FollowedSocket : public QObject
{
    Q_OBJECT
public:
    // `resume`: the URL's query for the next connection; a close with one of `finalCodes` ends
    // the following for good (closedByServer()). Connects once start() is called.
    FollowedSocket(const QUrl &url, const QString &apiKey, std::chrono::milliseconds silenceTimeout,
                   std::function<QUrlQuery()> resume, QList<int> finalCodes,
                   QObject *parent = nullptr);
    ~FollowedSocket() override;

    void start();
    bool isConnected() const;
    void close();
    // The server is known to answer again: a socket waiting to reconnect does so now rather
    // than after its backoff (up to 10 s), with the backoff started over.
    void reconnectNow();
    void sendText(const QString &text);

Q_SIGNALS:
    void connected();
    void textReceived(const QString &text);
    // Closed with a final code; no disconnected() comes with it.
    void closedByServer(int code, const QString &reason);
    // The connection dropped; it reconnects.
    void disconnected();

private:
    void connectSocket();
    void onDisconnected();
    void checkAlive();

    QUrl m_url;
    QString m_apiKey;
    std::function<QUrlQuery()> m_resume;
    QList<int> m_finalCodes;
    bool m_closing = false;
    int m_backoffMs = 250;
    QWebSocket *m_socket = nullptr;
    QTimer *m_reconnectTimer = nullptr;
    // Pings the server three times per silence timeout.
    std::chrono::milliseconds m_silenceTimeout;
    QTimer *m_aliveTimer = nullptr;
    qint64 m_lastHeardMs = 0;
};

} // namespace AgentDeck
