#pragma once

#include <QJsonArray>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>

#include <memory>

namespace AgentDeck {
class DockerEngine;
}

namespace AgentDeck::Testing {

// The containers (running or not) that carry every one of `labels` ("KEY=VALUE", or "KEY" for
// any value), as `engine` lists them; empty when it cannot.
QJsonArray containersLabelled(DockerEngine &engine, const QStringList &labels);

// A Docker engine of the test's own: a dockerd (Debian's docker.io) with its data, state and API
// socket in temporary directories, no bridge and no iptables rules, so it creates no network and
// touches nothing of the host's; stopped, and its directories deleted, on destruction. As root
// only: dockerd cannot run rootless here.
class DockerDaemon
{
public:
    DockerDaemon();
    ~DockerDaemon();
    DockerDaemon(const DockerDaemon &) = delete;
    DockerDaemon &operator=(const DockerDaemon &) = delete;

    // Starts dockerd and waits until its API answers /_ping; false with a reason (including
    // the end of its log) when it cannot. With `tls`, it also listens on a loopback TCP port
    // that requires TLS with a client certificate (--tlsverify), of a CA made for the test.
    bool start(QString *error, bool tls = false);
    void stop();
    // "unix:///tmp/.../docker.sock", for DockerEngine.
    QString host() const;
    // With start(tls): "tcp://127.0.0.1:PORT", and the dir of a client's ca.pem, cert.pem and
    // key.pem for it (DockerEngine::setTlsDirectory()); a second dir of another CA's.
    QString tlsHost() const { return m_tlsHost; }
    QString tlsDirectory() const;
    QString foreignTlsDirectory() const;
    // How long start() waited for the engine to answer.
    qint64 startMilliseconds() const { return m_startMilliseconds; }

    // Imports an image `repository:tag` made without a registry: a root file system of
    // busybox-static (busybox and its applets in /bin, so /bin/sh) with empty /tmp and
    // /workspace. False with a reason.
    bool importBusyboxImage(const QString &repository, const QString &tag, QString *error);
    // The same with the host's bash and the libraries it links in, for the shell agent.
    bool importShellImage(const QString &repository, const QString &tag, QString *error);

    // The image the tests' containers run (importShellImage()'s), and start() with it imported.
    static constexpr auto TestImage = "agentdeck-test:shell";
    bool startWithTestImage(QString *error, bool tls = false);
    // A client of this engine that waits up to 20 s a call, as a loaded machine may need.
    std::unique_ptr<DockerEngine> client() const;

private:
    bool importImage(const QString &repository, const QString &tag, bool withBash, QString *error);
    QString logTail() const;
    void unmountLeftovers();

    std::unique_ptr<QTemporaryDir> m_dataRoot;
    // The exec root holds containerd's sockets, whose paths must stay under 108 bytes.
    std::unique_ptr<QTemporaryDir> m_execRoot;
    std::unique_ptr<QProcess> m_process;
    QString m_tlsHost;
    qint64 m_startMilliseconds = 0;
};

} // namespace AgentDeck::Testing
