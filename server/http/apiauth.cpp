#include "apiauth.h"

#include <QCryptographicHash>
#include <QHostAddress>
#include <QSysInfo>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
QByteArray digest(const QByteArray &key)
{
    return QCryptographicHash::hash(key, QCryptographicHash::Sha256);
}

QString normalizedOrigin(QString origin)
{
    origin = origin.trimmed().toLower();
    while (origin.endsWith(u'/'))
        origin.chop(1);
    return origin;
}

// The name in a Host header value: "name", "name:port" or "[v6]:port".
QString hostName(QByteArrayView host)
{
    QString name = QString::fromLatin1(host).trimmed().toLower();
    if (name.startsWith(u'[')) {
        const qsizetype end = name.indexOf(u']');
        return end < 0 ? name : name.mid(1, end - 1);
    }
    const qsizetype colon = name.lastIndexOf(u':');
    if (colon >= 0)
        name.truncate(colon);
    while (name.endsWith(u'.'))
        name.chop(1);
    return name;
}
} // namespace

ApiAuth::ApiAuth(const QStringList &keys, const Browsers &browsers)
{
    for (const QString &key : keys) {
        if (!key.isEmpty())
            m_digests.append(digest(key.toUtf8()));
    }
    for (const QString &origin : browsers.allowedOrigins)
        m_allowedOrigins.append(normalizedOrigin(origin));
    for (const QString &host : browsers.allowedHosts)
        m_allowedHosts.append(host.trimmed().toLower());
}

bool ApiAuth::accepts(const QByteArray &key) const
{
    const QByteArray candidate = digest(key);
    bool accepted = false;
    for (const QByteArray &known : m_digests) {
        unsigned char difference = 0;
        for (qsizetype i = 0; i < known.size(); ++i)
            difference |= static_cast<unsigned char>(known[i] ^ candidate[i]);
        accepted |= difference == 0;
    }
    return accepted;
}

std::optional<ApiError> ApiAuth::browserRefusal(QByteArrayView host, QByteArrayView origin) const
{
    // Without a key, the name a request was addressed by must be one no web page can make
    // resolve here.
    if (!enabled() && !allowsHostHeader(host)) {
        return ApiError{403, u"host_not_allowed"_s,
                        u"Requests for host \"%1\" are refused by a server without a session API "
                        "key (a web page could have made its name lead here); use localhost or an "
                        "IP address, start the server with --allow-host %1, or with a key"_s.arg(
                            hostName(host))};
    }
    if (origin.isEmpty())
        return std::nullopt; // not sent by a web page
    const QString page = normalizedOrigin(QString::fromLatin1(origin));
    const QString self = QString::fromLatin1(host).trimmed().toLower();
    if (m_allowedOrigins.contains(u"*"_s) || m_allowedOrigins.contains(page) ||
        (!self.isEmpty() && (page == u"http://"_s + self || page == u"https://"_s + self)))
        return std::nullopt;
    return ApiError{403, u"origin_not_allowed"_s,
                    u"Requests from web pages at %1 are refused; start the server with "
                    "--allow-origin %1 to allow them"_s.arg(page)};
}

bool ApiAuth::allowsHostHeader(QByteArrayView host) const
{
    // Bounded: a client that sends a new value each time only makes it start over.
    constexpr qsizetype MaxRemembered = 64;
    // Compared in place: a lookup by a copy of the header cost a GET by id 3 % of its time.
    const std::lock_guard lock(m_hostsMutex);
    for (const auto &[known, allowed] : std::as_const(m_hostVerdicts)) {
        if (known == host)
            return allowed;
    }
    const QString name = hostName(host);
    const bool allowed = name.isEmpty() || allowsHost(name);
    if (m_hostVerdicts.size() >= MaxRemembered)
        m_hostVerdicts.clear();
    m_hostVerdicts.append({host.toByteArray(), allowed});
    return allowed;
}

bool ApiAuth::allowsHost(const QString &name) const
{
    return name == u"localhost"_s || name.endsWith(u".localhost"_s) ||
           !QHostAddress(name).isNull() || name == QSysInfo::machineHostName().toLower() ||
           m_allowedHosts.contains(name) || m_allowedHosts.contains(u"*"_s);
}

} // namespace AgentDeck
