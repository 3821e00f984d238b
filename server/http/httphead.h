#pragma once

#include <QByteArrayView>

#include <functional>

// Reading the head of an HTTP/1.1 request (request line and header lines).
namespace AgentDeck {

// Whether a comma-separated header value holds `token`, compared case-insensitively.
bool headerHasToken(QByteArrayView value, QByteArrayView token);

// Calls `visit` with the name and the value (both trimmed) of each header line of `head`; the
// request line and lines without a colon are skipped.
void forEachHeader(QByteArrayView head,
                   const std::function<void(QByteArrayView name, QByteArrayView value)> &visit);

} // namespace AgentDeck
