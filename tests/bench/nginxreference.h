#pragma once

#include "httpconnection.h"

#include <QCoroTask>
#include <QMap>
#include <QObject>
#include <QProcess>
#include <QTemporaryDir>

namespace AgentDeck::Bench {

// nginx (Debian's nginx-light) with one worker, serving given bytes from files: the reference
// of the HTTP figures, the same answers from a server whose HTTP path is as short as they come.
// Its configuration keeps connections open as long as the bench's load does (the load generator
// does not reconnect) and logs nothing.
class NginxReference : public QObject
{
    Q_OBJECT
public:
    explicit NginxReference(QObject *parent = nullptr);
    ~NginxReference() override;

    // The nginx binary, or empty when it is not installed.
    static QString binary();

    // Serves each body at its path ("/conversation": bytes) as application/json and waits until
    // it answers; false with errorString() on failure.
    QCoro::Task<bool> start(QMap<QString, QByteArray> files);
    void stop();

    Endpoint endpoint() const { return {QStringLiteral("127.0.0.1"), m_port}; }
    // The worker's pid, for its CPU.
    qint64 workerPid() const { return m_workerPid; }
    QString errorString() const { return m_error; }

private:
    QTemporaryDir m_dir;
    QProcess m_process;
    quint16 m_port = 0;
    qint64 m_workerPid = 0;
    QString m_error;
};

} // namespace AgentDeck::Bench
