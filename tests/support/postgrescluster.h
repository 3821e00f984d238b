#pragma once

#include <QString>
#include <QTemporaryDir>
#include <QUrl>

#include <memory>

namespace AgentDeck::Testing {

// A throwaway PostgreSQL cluster for one test run: initdb in a temporary directory, a server on
// a free loopback port with its socket in that directory, torn down (and deleted) on
// destruction. No system service is assumed; as root it runs as the `postgres` user, which
// initdb requires. Durability is switched off (fsync=off): nothing here outlives the test.
class PostgresCluster
{
public:
    PostgresCluster();
    ~PostgresCluster();
    PostgresCluster(const PostgresCluster &) = delete;
    PostgresCluster &operator=(const PostgresCluster &) = delete;

    // Finds the PostgreSQL binaries, initialises and starts the cluster; false with a reason.
    bool start(QString *error);
    void stop();
    // Stops the server (fast: connections are cut) and starts it again on the same port.
    bool restart(QString *error);
    // The same in two steps, for a test that does something while the server is down.
    bool pause(QString *error);
    bool resume(QString *error);
    // Creates an empty database owned by the login role `agentdeck` (no superuser) and returns its
    // URL as that role; url() is the cluster's superuser's.
    QUrl createDatabase(const QString &name, QString *error);
    QUrl url(const QString &database) const;
    quint16 port() const { return m_port; }
    // Runs SQL on `database` through psql; returns its output or a null string on failure.
    QString psql(const QString &database, const QString &sql, QString *error = nullptr);

private:
    bool run(const QString &program, const QStringList &arguments, QString *output);
    bool startServer(QString *output);

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_bin;
    QString m_user;
    quint16 m_port = 0;
    bool m_running = false;
    bool m_asPostgres = false;
    bool m_ownerCreated = false;
};

} // namespace AgentDeck::Testing
