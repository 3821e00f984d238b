#pragma once

#include <QByteArray>
#include <QList>
#include <QStringList>

namespace AgentDeck {

// Session API keys. Compared in constant time over fixed-length digests, so neither the content
// nor the length of a configured key leaks through timing.
class ApiAuth
{
public:
    explicit ApiAuth(const QStringList &keys = {});
    bool enabled() const { return !m_digests.isEmpty(); }
    bool accepts(const QByteArray &key) const;

private:
    QList<QByteArray> m_digests;
};

} // namespace AgentDeck
