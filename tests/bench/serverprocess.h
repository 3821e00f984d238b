#pragma once

#include "httpconnection.h"
#include "procinfo.h"

#include <QCoroTask>
#include <QObject>
#include <QProcess>
#include <QStringList>

namespace AgentDeck::Bench {

// The real agentdeck binary as a subprocess: `--headless --listen 127.0.0.1:0 --data-dir DIR`.
// Its stderr is drained continuously (a full pipe would stall the server) and the last lines
// are kept for the report.
class ServerProcess : public QObject
{
    Q_OBJECT
public:
    ServerProcess(QString binary, QString dataDir, QObject *parent = nullptr);
    ~ServerProcess() override;

    // Before start(): the server's limit of open files, soft and hard.
    void setOpenFileLimit(qint64 limit);

    // Options after the bench's own (--headless, --listen, --data-dir), for the next start().
    void setExtraArguments(QStringList arguments) { m_extraArguments = std::move(arguments); }
    // Starts the process, reads the port from "listening on http://127.0.0.1:PORT" and waits
    // until GET /ready answers 200. False with errorString() on failure.
    QCoro::Task<bool> start(std::chrono::milliseconds timeout);
    // SIGTERM, then SIGKILL if it has not exited within `grace`.
    QCoro::Task<> stop(std::chrono::milliseconds grace = std::chrono::seconds(20));

    Endpoint endpoint() const { return {QStringLiteral("127.0.0.1"), m_port}; }
    qint64 pid() const { return m_process.processId(); }
    std::optional<ProcessMemory> memory() const { return readMemory(pid()); }
    QString errorString() const { return m_error; }
    QStringList recentLog() const { return m_recent; }
    // stderr lines at warning level or above since start.
    int warningCount() const { return m_warnings; }
    // Wall time from launch to the first 200 of /ready.
    qint64 startupNs() const { return m_startupNs; }
    // How long the server's integrity check after startup took, as it logs it ("checked the
    // catalog's integrity in N ms"); -1 when it did not say so within `timeout`.
    QCoro::Task<qint64> integrityCheckMs(std::chrono::milliseconds timeout);

Q_SIGNALS:
    void portKnown();
    void integrityChecked();

private:
    void readStderr();

    QString m_binary;
    QString m_dataDir;
    QStringList m_extraArguments;
    QProcess m_process;
    QByteArray m_partialLine;
    QStringList m_recent;
    int m_warnings = 0;
    quint16 m_port = 0;
    qint64 m_startupNs = 0;
    qint64 m_integrityCheckMs = -1;
    QString m_error;
};

} // namespace AgentDeck::Bench
