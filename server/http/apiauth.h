#pragma once

#include "apierror.h"

#include <QByteArray>
#include <QByteArrayView>
#include <QList>
#include <QStringList>

#include <memory>
#include <mutex>
#include <optional>

class QFileSystemWatcher;
class QTimer;

namespace AgentDeck {

// Who may use /api and the event sockets.
//
// Session API keys, compared in constant time over fixed-length digests, so neither the content
// nor the length of a configured key leaks through timing. A key of the key file
// (--api-key-file) carries a name, which every request made with it is made by; the file is read
// again when it changes, so a key is revoked without a restart. The --session-api-key keys are
// named "session-key".
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

    // One key of the key file: its name and its SHA-256.
    struct NamedKey
    {
        QString name;
        QByteArray digest;
    };
    // The name the --session-api-key keys carry.
    static constexpr QStringView SessionKeyName = u"session-key";

    // `keyFile`: the key file's path, or empty; it must read (see readKeyFile()).
    explicit ApiAuth(const QStringList &keys = {}, const Browsers &browsers = {},
                     const QString &keyFile = {});
    ~ApiAuth();
    bool enabled() const { return m_enabled; }
    bool accepts(const QByteArray &key) const { return nameOf(key).has_value(); }
    // The name of the key `key` is, if it is one (in constant time over every key).
    std::optional<QString> nameOf(const QByteArray &key) const;

    // The keys of a key file: lines "NAME KEY" or "NAME sha256:HEX" (the key's SHA-256 in hex),
    // blank lines and lines starting with '#' aside. Nothing, with `error` naming the file and
    // line (never the line's content: it may hold a key), when one is malformed.
    static std::optional<QList<NamedKey>> readKeyFile(const QString &path, QString *error);
    // Reads the key file again; on a malformed or unreadable file keeps the keys it had, with a
    // warning. Called when the file or its directory changes.
    void reloadKeyFile();

    // Why a request with these `Host` and `Origin` header values (empty when absent) is
    // refused, if it is: 403 origin_not_allowed or host_not_allowed.
    std::optional<ApiError> browserRefusal(QByteArrayView host, QByteArrayView origin) const;

private:
    bool allowsHost(const QString &name) const;
    // allowsHost() for a Host header value, remembered: every /api request asks, and clients
    // send the same few values (the answer took a tenth of the server's own work for a GET).
    bool allowsHostHeader(QByteArrayView host) const;

    struct Keys
    {
        QList<NamedKey> keys;
    };
    std::shared_ptr<const Keys> keys() const;
    void watchKeyFile();

    bool m_enabled = false;
    QList<QByteArray> m_sessionDigests;
    QString m_keyFile;
    QByteArray m_keyFileContent; // as last read: a change event that changed nothing is no reload
    // The request thread and the streams thread read the keys the key file's reload replaces.
    mutable std::mutex m_keysMutex;
    std::shared_ptr<const Keys> m_keys;
    std::unique_ptr<QFileSystemWatcher> m_watcher;
    std::unique_ptr<QTimer> m_settle;
    QStringList m_allowedOrigins; // lower case, without a trailing slash
    QStringList m_allowedHosts;   // lower case
    // The request thread and the streams thread both ask.
    mutable std::mutex m_hostsMutex;
    mutable QList<std::pair<QByteArray, bool>> m_hostVerdicts; // a few: looked through in turn
};

} // namespace AgentDeck
