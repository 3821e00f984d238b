#pragma once

#include <QHostAddress>
#include <QString>
#include <QStringList>

#include <chrono>

namespace AgentDeck {

struct ServerConfig
{
    QHostAddress address = QHostAddress::LocalHost;
    quint16 port = 8000;
    QString dataDir;
    QStringList apiKeys;
    QString replicaId;
    std::chrono::milliseconds commandTimeout{0};
    std::chrono::milliseconds shutdownGrace{10'000};
    qint64 streamBudgetBytes = 16 * 1024 * 1024;
    int streamAuthTimeoutMs = 10'000;
    qsizetype maxBodyBytes = 4 * 1024 * 1024;
};

} // namespace AgentDeck
