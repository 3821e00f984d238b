#pragma once

#include "apierror.h"

#include <QByteArray>
#include <QByteArrayView>
#include <QList>
#include <QStringList>

#include <mutex>
#include <optional>

namespace AgentDeck {

// Who may use /api and the event sockets.
//
// Session API keys, compared in constant time over fixed-length digests, so neither the content
// nor the length of a configured key leaks through timing.
//
// And which web pages. A browser sends what any page it shows asks it to, to any address, this
// server on the operator's loopback included: a form's POST, a `fetch` with a text/plain body
// and a WebSocket need no permission from the server, and a page whose name resolves to
// 127.0.0.1 (DNS rebinding) reads the answers too. So a request from a page of another site
// (its `Origin` names the page) is refused, and, on a server without a key, so is a request
// addressed to a host name that is neither local nor allowed: only a page that rebinds its own
// name sends one.
class ApiAuth
{
public:
    struct Browsers
    {
        // Origins (scheme://host[:port]) of pages that may call; "*": any.
        QStringList allowedOrigins;
        // Host names clients may address a server without a key by, beside localhost, names
        // under .localhost, IP addresses and this machine's name; "*": any.
        QStringList allowedHosts;
    };

    explicit ApiAuth(const QStringList &keys = {}, const Browsers &browsers = {});
    bool enabled() const { return !m_digests.isEmpty(); }
    bool accepts(const QByteArray &key) const;

    // Why a request with these `Host` and `Origin` header values (empty when absent) is
    // refused, if it is: 403 origin_not_allowed or host_not_allowed.
    std::optional<ApiError> browserRefusal(QByteArrayView host, QByteArrayView origin) const;

private:
    bool allowsHost(const QString &name) const;
    // allowsHost() for a Host header value, remembered: every /api request asks, and clients
    // send the same few values (the answer took a tenth of the server's own work for a GET).
    bool allowsHostHeader(QByteArrayView host) const;

    QList<QByteArray> m_digests;
    QStringList m_allowedOrigins; // lower case, without a trailing slash
    QStringList m_allowedHosts;   // lower case
    // The request thread and the streams thread both ask.
    mutable std::mutex m_hostsMutex;
    mutable QList<std::pair<QByteArray, bool>> m_hostVerdicts; // a few: looked through in turn
};

} // namespace AgentDeck
