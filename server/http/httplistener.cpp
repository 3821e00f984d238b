#include "httplistener.h"

#include <QMetaMethod>
#include <QTcpSocket>

namespace AgentDeck {

bool headerHasToken(QByteArrayView value, QByteArrayView token)
{
    qsizetype start = 0;
    while (start <= value.size()) {
        qsizetype end = value.indexOf(',', start);
        if (end < 0)
            end = value.size();
        if (value.sliced(start, end - start).trimmed().compare(token, Qt::CaseInsensitive) == 0)
            return true;
        start = end + 1;
    }
    return false;
}

HttpListener::HttpListener(QObject *parent)
    : QTcpServer(parent)
{}

bool HttpListener::isWebSocketUpgrade(QByteArrayView head)
{
    qsizetype lineStart = head.indexOf('\n');
    while (lineStart >= 0 && lineStart + 1 < head.size()) {
        ++lineStart;
        qsizetype lineEnd = head.indexOf('\n', lineStart);
        if (lineEnd < 0)
            lineEnd = head.size();
        const QByteArrayView line = head.sliced(lineStart, lineEnd - lineStart);
        const qsizetype colon = line.indexOf(':');
        if (colon > 0 && line.first(colon).trimmed().compare("upgrade", Qt::CaseInsensitive) == 0 &&
            headerHasToken(line.sliced(colon + 1), "websocket"))
            return true;
        lineStart = lineEnd < head.size() ? lineEnd : -1;
    }
    return false;
}

void HttpListener::incomingConnection(qintptr handle)
{
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(handle)) {
        delete socket;
        return;
    }
    // Answers are written in pieces (head, body); with Nagle's algorithm the last piece of a
    // large answer waits for the client's delayed ACK, 40 ms on Linux, on keep-alive connections.
    socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
    connect(socket, &QTcpSocket::readyRead, this, [this, socket] { inspect(socket); });
    connect(socket, &QTcpSocket::disconnected, this, [socket] { socket->deleteLater(); });
}

void HttpListener::inspect(QTcpSocket *socket)
{
    // peek(): the HTTP server must find every byte still there.
    const QByteArray start = socket->peek(MaxHeadBytes);
    const qsizetype end = start.indexOf("\r\n\r\n");
    if (end < 0) {
        if (start.size() >= MaxHeadBytes)
            handToHttp(socket);
        return; // a partial head: wait for the rest
    }
    if (!isWebSocketUpgrade(QByteArrayView(start).first(end))) {
        handToHttp(socket);
        return;
    }
    disconnect(socket, nullptr, this, nullptr);
    const QByteArray head = socket->read(end + 4);
    static const QMetaMethod signal = QMetaMethod::fromSignal(&HttpListener::upgradeRequested);
    if (!isSignalConnected(signal)) {
        socket->abort();
        socket->deleteLater();
        return;
    }
    Q_EMIT upgradeRequested(socket, head);
}

void HttpListener::handToHttp(QTcpSocket *socket)
{
    disconnect(socket, nullptr, this, nullptr);
    // The bound QAbstractHttpServer takes pending connections as they are added, and connects
    // to readyRead; the data that is already here is announced again.
    addPendingConnection(socket);
    if (socket->bytesAvailable() > 0)
        Q_EMIT socket->readyRead();
}

} // namespace AgentDeck
