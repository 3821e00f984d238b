#pragma once

#include "httpconnection.h"

#include <QByteArrayView>
#include <QString>

namespace AgentDeck::Bench {

// Plain POSIX sockets for the bench's hot clients (the publisher and the subscribers), which
// run on epoll in threads of their own: a Qt socket's machinery per read and write would cost
// the bench CPU that the server, on the same machine, then lacks.

// A blocking TCP connection to `endpoint` with TCP_NODELAY; -1 (and `error`) on failure.
int connectTcp(const Endpoint &endpoint, QString *error);
// Switches `fd` to non-blocking.
void setNonBlocking(int fd);
// Writes all of `data`, also on a non-blocking socket (the bench's requests and control frames
// are small, so a full send buffer is the only, unexpected, reason to loop).
bool sendAll(int fd, QByteArrayView data);
// "what: strerror(errno)".
QString systemError(const char *what);

} // namespace AgentDeck::Bench
