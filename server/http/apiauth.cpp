#include "apiauth.h"

#include <QCryptographicHash>

namespace AgentDeck {

namespace {
QByteArray digest(const QByteArray &key)
{
    return QCryptographicHash::hash(key, QCryptographicHash::Sha256);
}
} // namespace

ApiAuth::ApiAuth(const QStringList &keys)
{
    for (const QString &key : keys) {
        if (!key.isEmpty())
            m_digests.append(digest(key.toUtf8()));
    }
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

} // namespace AgentDeck
