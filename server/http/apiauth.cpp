#include "apiauth.h"

#include "actor.h"

#include "logging.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QHostAddress>
#include <QRegularExpression>
#include <QSysInfo>
#include <QTimer>

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

namespace {
// The keys of a key file's content; see ApiAuth::readKeyFile().
std::optional<QList<ApiAuth::NamedKey>> parseKeys(const QByteArray &content, const QString &path,
                                                  QString *error)
{
    static const QRegularExpression namePattern(u"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$"_s);
    static const QRegularExpression hexPattern(u"^[0-9A-Fa-f]{64}$"_s);
    constexpr QLatin1StringView HashPrefix("sha256:");
    QList<ApiAuth::NamedKey> keys;
    QList<int> lineOf; // of each key
    const QList<QByteArray> lines = content.split('\n');
    for (qsizetype index = 0; index < lines.size(); ++index) {
        const int number = int(index + 1);
        const QString line = QString::fromUtf8(lines.at(index)).trimmed();
        if (line.isEmpty() || line.startsWith(u'#'))
            continue;
        const auto fail = [&](const QString &why) {
            *error = u"%1:%2: %3"_s.arg(path).arg(number).arg(why);
            return std::nullopt;
        };
        const QStringList fields = line.split(QRegularExpression(u"\\s+"_s));
        if (fields.size() != 2)
            return fail(u"not a \"NAME KEY\" or \"NAME sha256:HEX\" line"_s);
        const QString &name = fields.at(0);
        const QString &key = fields.at(1);
        if (!namePattern.match(name).hasMatch())
            return fail(u"a key's name is letters, digits and . _ @ + - (at most 64, from a "
                        "letter or digit)"_s);
        if (name == Actor::Server)
            return fail(u"\"server\" names the server's own changes; give the key another "
                        "name"_s);
        QByteArray hash;
        if (key.startsWith(HashPrefix, Qt::CaseInsensitive)) {
            const QString hex = key.mid(HashPrefix.size());
            if (!hexPattern.match(hex).hasMatch())
                return fail(u"sha256: takes the key's SHA-256 as 64 hexadecimal digits"_s);
            hash = QByteArray::fromHex(hex.toLatin1());
        } else {
            for (const QChar c : key) {
                if (c.unicode() < 0x20 || c.unicode() == 0x7f)
                    return fail(u"a key cannot contain control characters"_s);
            }
            hash = digest(key.toUtf8());
        }
        for (qsizetype other = 0; other < keys.size(); ++other) {
            if (keys.at(other).digest == hash)
                return fail(u"the same key as on line %1"_s.arg(lineOf.at(other)));
        }
        keys.append({name, hash});
        lineOf.append(number);
    }
    return keys;
}
} // namespace

ApiAuth::ApiAuth(const QStringList &keys, const Browsers &browsers, const QString &keyFile)
    : m_keyFile(keyFile)
    , m_keys(std::make_shared<Keys>())
{
    for (const QString &key : keys) {
        if (!key.isEmpty())
            m_sessionDigests.append(digest(key.toUtf8()));
    }
    m_enabled = !m_sessionDigests.isEmpty() || !m_keyFile.isEmpty();
    for (const QString &origin : browsers.allowedOrigins)
        m_allowedOrigins.append(normalizedOrigin(origin));
    for (const QString &host : browsers.allowedHosts)
        m_allowedHosts.append(host.trimmed().toLower());
    if (!m_keyFile.isEmpty()) {
        reloadKeyFile();
        watchKeyFile();
    }
}

ApiAuth::~ApiAuth() = default;

std::optional<QList<ApiAuth::NamedKey>> ApiAuth::readKeyFile(const QString &path, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = u"cannot read the key file %1: %2"_s.arg(path, file.errorString());
        return std::nullopt;
    }
    return parseKeys(file.readAll(), path, error);
}

void ApiAuth::reloadKeyFile()
{
    QFile file(m_keyFile);
    if (!file.open(QIODevice::ReadOnly)) {
        // An editor that replaces the file leaves a moment without it; the next change reads it.
        qCWarning(lcServer).noquote()
            << u"cannot read the key file %1 (%2); the keys stay as they were"_s.arg(
                   m_keyFile, file.errorString());
        return;
    }
    const QByteArray content = file.readAll();
    if (!m_keyFileContent.isNull() && content == m_keyFileContent)
        return;
    QString error;
    auto named = parseKeys(content, m_keyFile, &error);
    if (!named) {
        qCWarning(lcServer).noquote() << error + u"; the keys stay as they were"_s;
        return;
    }
    const bool first = m_keyFileContent.isNull();
    m_keyFileContent = content.isNull() ? QByteArray("") : content;
    auto fresh = std::make_shared<Keys>(Keys{std::move(*named)});
    const qsizetype count = fresh->keys.size();
    {
        const std::lock_guard lock(m_keysMutex);
        m_keys = std::move(fresh);
    }
    // The count only: a key's name is not for a log anyone may read.
    qCInfo(lcServer).noquote() << u"the key file %1 %2 %3 keys"_s
                                      .arg(m_keyFile, first ? u"holds"_s : u"changed: it holds"_s)
                                      .arg(count);
}

void ApiAuth::watchKeyFile()
{
    // The file and its directory: an editor (or a mounted secret) replaces the file, and a
    // watch on the file alone ends with the file it watched.
    m_watcher = std::make_unique<QFileSystemWatcher>();
    m_settle = std::make_unique<QTimer>();
    // A file being written sends several changes: it is read once they have settled.
    m_settle->setSingleShot(true);
    m_settle->setInterval(100);
    QObject::connect(m_settle.get(), &QTimer::timeout, m_settle.get(), [this] {
        reloadKeyFile();
        if (!m_watcher->files().contains(m_keyFile) && QFileInfo::exists(m_keyFile))
            m_watcher->addPath(m_keyFile);
    });
    const auto changed = [this] { m_settle->start(); };
    QObject::connect(m_watcher.get(), &QFileSystemWatcher::fileChanged, m_settle.get(), changed);
    QObject::connect(m_watcher.get(), &QFileSystemWatcher::directoryChanged, m_settle.get(),
                     changed);
    m_watcher->addPath(m_keyFile);
    m_watcher->addPath(QFileInfo(m_keyFile).absolutePath());
}

std::shared_ptr<const ApiAuth::Keys> ApiAuth::keys() const
{
    const std::lock_guard lock(m_keysMutex);
    return m_keys;
}

std::optional<QString> ApiAuth::nameOf(const QByteArray &key) const
{
    const QByteArray candidate = digest(key);
    const auto matches = [&candidate](const QByteArray &known) {
        unsigned char difference = 0;
        for (qsizetype i = 0; i < known.size(); ++i)
            difference |= static_cast<unsigned char>(known[i] ^ candidate[i]);
        return difference == 0;
    };
    // Every key is compared, whichever matches.
    bool session = false;
    for (const QByteArray &known : m_sessionDigests)
        session |= matches(known);
    const std::shared_ptr<const Keys> named = keys();
    const NamedKey *found = nullptr;
    for (const NamedKey &known : named->keys) {
        if (matches(known.digest) && !found)
            found = &known;
    }
    if (found)
        return found->name;
    if (session)
        return SessionKeyName.toString();
    return std::nullopt;
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
