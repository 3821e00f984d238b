#include "postgrescluster.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTcpServer>

#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {
// The newest /usr/lib/postgresql/<version>/bin that has initdb.
QString findBinaries()
{
    const QDir root(u"/usr/lib/postgresql"_s);
    QStringList versions = root.entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    std::sort(versions.begin(), versions.end(),
              [](const QString &a, const QString &b) { return a.toDouble() > b.toDouble(); });
    for (const QString &version : versions) {
        const QString bin = root.filePath(version + u"/bin"_s);
        if (QFile::exists(bin + u"/initdb"_s))
            return bin;
    }
    return {};
}

quint16 freeLoopbackPort()
{
    QTcpServer probe;
    return probe.listen(QHostAddress::LocalHost, 0) ? probe.serverPort() : 0;
}
} // namespace

PostgresCluster::PostgresCluster() = default;

PostgresCluster::~PostgresCluster()
{
    stop();
}

bool PostgresCluster::run(const QString &program, const QStringList &arguments, QString *output)
{
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    // The cluster must not find a user's or the system's settings.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    for (const QString &name : environment.keys()) {
        if (name.startsWith(u"PG"_s))
            environment.remove(name);
    }
    process.setProcessEnvironment(environment);
    process.setWorkingDirectory(m_dir->path());
    if (m_asPostgres)
        process.start(u"runuser"_s,
                      QStringList{u"-u"_s, u"postgres"_s, u"--"_s, program} + arguments);
    else
        process.start(program, arguments);
    const bool finished = process.waitForFinished(120'000);
    *output = QString::fromLocal8Bit(process.readAll());
    return finished && process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0;
}

bool PostgresCluster::start(QString *error)
{
    m_bin = findBinaries();
    if (m_bin.isEmpty()) {
        *error = u"PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); "
                 "packaging/install-deps.sh installs it"_s;
        return false;
    }
    m_dir = std::make_unique<QTemporaryDir>(QDir::tempPath() + u"/agentdeck-pg-XXXXXX"_s);
    if (!m_dir->isValid()) {
        *error = u"cannot create a temporary directory"_s;
        return false;
    }
    m_asPostgres = ::geteuid() == 0;
    m_user = m_asPostgres ? u"postgres"_s : qEnvironmentVariable("USER", u"postgres"_s);
    QString output;
    if (m_asPostgres) {
        // chown itself runs as root; runuser is only for the PostgreSQL programs.
        m_asPostgres = false;
        const bool owned = run(u"chown"_s, {u"postgres:postgres"_s, m_dir->path()}, &output);
        m_asPostgres = true;
        if (!owned) {
            *error = u"cannot hand the cluster directory to postgres: "_s + output;
            return false;
        }
    }
    const QString data = m_dir->filePath(u"data"_s);
    if (!run(m_bin + u"/initdb"_s,
             {u"-D"_s, data, u"-U"_s, m_user, u"--auth=trust"_s, u"--encoding=UTF8"_s,
              u"--no-sync"_s},
             &output)) {
        *error = u"initdb failed: "_s + output;
        return false;
    }
    // A free port can be taken by someone else before the server binds it: try a few.
    for (int attempt = 0; attempt < 5 && !m_running; ++attempt) {
        m_port = freeLoopbackPort();
        m_running = startServer(&output);
    }
    if (!m_running) {
        QFile log(m_dir->filePath(u"server.log"_s));
        log.open(QIODevice::ReadOnly);
        *error = u"pg_ctl start failed: "_s + output + QString::fromLocal8Bit(log.readAll());
    }
    return m_running;
}

bool PostgresCluster::startServer(QString *output)
{
    const QString options =
        u"-p %1 -k %2 -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=300"_s.arg(m_port)
            .arg(m_dir->path());
    return run(m_bin + u"/pg_ctl"_s,
               {u"-D"_s, m_dir->filePath(u"data"_s), u"-l"_s, m_dir->filePath(u"server.log"_s),
                u"-o"_s, options, u"-w"_s, u"-t"_s, u"60"_s, u"start"_s},
               output);
}

bool PostgresCluster::pause(QString *error)
{
    QString output;
    if (!run(m_bin + u"/pg_ctl"_s,
             {u"-D"_s, m_dir->filePath(u"data"_s), u"-m"_s, u"fast"_s, u"-w"_s, u"stop"_s},
             &output)) {
        *error = u"pg_ctl stop failed: "_s + output;
        return false;
    }
    return true;
}

bool PostgresCluster::resume(QString *error)
{
    QString output;
    if (!startServer(&output)) {
        *error = u"pg_ctl start failed: "_s + output;
        return false;
    }
    return true;
}

bool PostgresCluster::restart(QString *error)
{
    QString output;
    if (!run(m_bin + u"/pg_ctl"_s,
             {u"-D"_s, m_dir->filePath(u"data"_s), u"-m"_s, u"fast"_s, u"-w"_s, u"-t"_s, u"60"_s,
              u"restart"_s},
             &output)) {
        *error = u"pg_ctl restart failed: "_s + output;
        return false;
    }
    return true;
}

void PostgresCluster::stop()
{
    if (!m_running)
        return;
    QString output;
    run(m_bin + u"/pg_ctl"_s,
        {u"-D"_s, m_dir->filePath(u"data"_s), u"-m"_s, u"immediate"_s, u"-w"_s, u"stop"_s},
        &output);
    m_running = false;
}

QUrl PostgresCluster::url(const QString &database) const
{
    QUrl url;
    url.setScheme(u"postgresql"_s);
    url.setUserName(m_user);
    url.setHost(u"127.0.0.1"_s);
    url.setPort(m_port);
    url.setPath(u'/' + database);
    return url;
}

QString PostgresCluster::psql(const QString &database, const QString &sql, QString *error)
{
    QString output;
    if (!run(m_bin + u"/psql"_s,
             {u"-h"_s, u"127.0.0.1"_s, u"-p"_s, QString::number(m_port), u"-U"_s, m_user, u"-d"_s,
              database, u"-v"_s, u"ON_ERROR_STOP=1"_s, u"-A"_s, u"-t"_s, u"-q"_s, u"-c"_s, sql},
             &output)) {
        if (error)
            *error = output;
        return {};
    }
    return output.trimmed().isNull() ? u""_s : output.trimmed();
}

QUrl PostgresCluster::createDatabase(const QString &name, QString *error)
{
    // As docs/OPERATIONS.md's recipe makes it (createuser, createdb --owner): a login role that is
    // no superuser owns the database, and the server creates its tables as that role.
    static constexpr auto Owner = "agentdeck";
    QString failure;
    if (!m_ownerCreated) {
        if (psql(u"postgres"_s,
                 u"CREATE ROLE %1 LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"_s.arg(
                     QLatin1StringView(Owner)),
                 &failure)
                .isNull()) {
            *error = u"cannot create the role %1: %2"_s.arg(QLatin1StringView(Owner), failure);
            return {};
        }
        m_ownerCreated = true;
    }
    if (psql(u"postgres"_s,
             u"CREATE DATABASE \"%1\" OWNER %2 ENCODING 'UTF8'"_s.arg(name,
                                                                      QLatin1StringView(Owner)),
             &failure)
            .isNull()) {
        *error = u"cannot create database %1: %2"_s.arg(name, failure);
        return {};
    }
    QUrl owned = url(name);
    owned.setUserName(QLatin1StringView(Owner));
    return owned;
}

} // namespace AgentDeck::Testing
