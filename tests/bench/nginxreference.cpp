#include "nginxreference.h"

#include <QCoroTimer>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QStandardPaths>
#include <QTcpServer>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Bench {

NginxReference::NginxReference(QObject *parent)
    : QObject(parent)
{}

NginxReference::~NginxReference()
{
    stop();
}

QString NginxReference::binary()
{
    return QStandardPaths::findExecutable(u"nginx"_s, {u"/usr/sbin"_s, u"/usr/local/sbin"_s});
}

QCoro::Task<bool> NginxReference::start(QMap<QString, QByteArray> files)
{
    const QString program = binary();
    if (program.isEmpty()) {
        m_error = u"nginx is not installed (apt-get install nginx-light)"_s;
        co_return false;
    }
    if (!m_dir.isValid()) {
        m_error = u"cannot create a temporary dir"_s;
        co_return false;
    }
    const QDir dir(m_dir.path());
    dir.mkpath(u"www"_s);
    dir.mkpath(u"temp"_s);
    for (auto it = files.cbegin(); it != files.cend(); ++it) {
        QFile file(dir.filePath(u"www"_s + it.key()));
        if (!file.open(QIODevice::WriteOnly) || file.write(it.value()) != it.value().size()) {
            m_error = u"cannot write "_s + file.fileName();
            co_return false;
        }
    }
    // A free port, taken back at once: nginx binds it next.
    {
        QTcpServer probe;
        if (!probe.listen(QHostAddress::LocalHost, 0)) {
            m_error = u"no free port"_s;
            co_return false;
        }
        m_port = probe.serverPort();
    }
    // One process that is the worker (no master): its CPU is all of nginx's.
    const QString temp = dir.filePath(u"temp"_s);
    const QString config =
        u"daemon off;\nmaster_process off;\nworker_processes 1;\npid %1/nginx.pid;\n"
        "error_log %1/error.log warn;\nevents { worker_connections 4096; }\n"
        "http {\n  access_log off;\n  keepalive_requests 1000000000;\n  keepalive_timeout 600s;\n"
        "  client_body_temp_path %2/body;\n  proxy_temp_path %2/proxy;\n"
        "  fastcgi_temp_path %2/fastcgi;\n  uwsgi_temp_path %2/uwsgi;\n  scgi_temp_path %2/scgi;\n"
        "  default_type application/json;\n"
        "  server { listen 127.0.0.1:%3; root %1/www; }\n}\n"_s.arg(dir.path(), temp)
            .arg(m_port);
    QFile file(dir.filePath(u"nginx.conf"_s));
    if (!file.open(QIODevice::WriteOnly) || file.write(config.toUtf8()) < 0) {
        m_error = u"cannot write "_s + file.fileName();
        co_return false;
    }
    file.close();
    m_process.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    m_process.start(program, {u"-c"_s, file.fileName(), u"-p"_s, dir.path()});
    if (!m_process.waitForStarted(5000)) {
        m_error = u"nginx did not start: "_s + m_process.errorString();
        co_return false;
    }
    m_workerPid = m_process.processId();
    // Ready once a file comes back whole.
    const QString first = files.firstKey();
    const QDeadlineTimer deadline(10s);
    while (!deadline.hasExpired() && m_process.state() == QProcess::Running) {
        HttpConnection connection(endpoint());
        auto opening = connection.open(1s);
        if (co_await std::move(opening)) {
            auto asking = connection.request(connection.makeRequest("GET", first.toUtf8()), 2s);
            const HttpResult result = co_await std::move(asking);
            if (result.status == 200 && result.body == files.first())
                co_return true;
        }
        co_await QCoro::sleepFor(20ms);
    }
    m_error = u"nginx did not answer on port %1 (see %2/error.log)"_s.arg(m_port).arg(dir.path());
    m_dir.setAutoRemove(false);
    co_return false;
}

void NginxReference::stop()
{
    if (m_process.state() == QProcess::NotRunning)
        return;
    m_process.terminate();
    if (!m_process.waitForFinished(5000))
        m_process.kill();
    m_process.waitForFinished(2000);
}

} // namespace AgentDeck::Bench
