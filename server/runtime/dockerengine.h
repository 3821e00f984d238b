#pragma once

#include <QByteArray>
#include <QJsonDocument>
#include <QMap>
#include <QObject>
#include <QString>
#include <QStringList>

#include <QCoroTask>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace AgentDeck {

// What the engine answered to one call. `error` is empty exactly when the call did what was
// asked: a 2xx answer, or 304 to starting a running or stopping a stopped container. Otherwise it
// is one sentence an operator can act on (the engine is unreachable, the call timed out, or the
// engine's own message with the status).
struct DockerResult
{
    int status = 0; // HTTP status; 0 when no answer arrived
    QJsonDocument json;
    QByteArray body;
    QString error;

    bool ok() const { return error.isEmpty(); }
};

// One command run through exec: its output split back into the two streams, and its exit code
// (-1 when it is unknown because the call failed).
struct DockerExecResult
{
    QByteArray standardOutput;
    QByteArray standardError;
    int exitCode = -1;
    QString error;

    bool ok() const { return error.isEmpty(); }
};

// A container as the sandbox runtime asks for it. The defaults are the contained ones: no
// network, every capability dropped, no privilege gain, a read-only root with a tmpfs /tmp.
struct DockerContainerSpec
{
    QString image;
    QStringList command;
    QStringList environment; // "NAME=value"
    QMap<QString, QString> labels;
    QStringList binds; // "host:container[:ro]"
    QString workingDir;
    QString user; // "uid:gid"; empty keeps the image's
    QString networkMode = QStringLiteral("none");
    // The container's resolvers (its /etc/resolv.conf); with `none`, a network namespace with only
    // its loopback that a network is attached to later. Empty: the engine's.
    QStringList dns;
    qint64 memoryBytes = 0; // 0: no limit
    qint64 pidsLimit = 0;   // 0: no limit
    qint64 nanoCpus = 0;    // 1e9 is one CPU; 0: no limit
    bool readOnlyRootfs = true;
    QString tmpfsOptions = QStringLiteral("rw,nosuid,nodev,size=64m");
    qint64 shmBytes = 0; // /dev/shm; 0: the engine's default (64 MiB)
    // The engine's init as PID 1, which reaps what the commands leave behind.
    bool init = false;
    // Stdin kept open: a shell as the command waits on it for good.
    bool openStdin = false;
    // Resource limits of every process, soft and hard alike ("cpu": seconds, "fsize": bytes).
    QMap<QString, qint64> ulimits;

    // The body of POST /containers/create.
    QJsonDocument toJson() const;
};

// Docker's multiplexed stream (an 8-byte header per frame: stream, 3 zero bytes, a big-endian
// length), split back into its streams as it arrives, in pieces cut anywhere.
class DockerStreamDemuxer
{
public:
    using Output = std::function<void(int stream, QByteArrayView payload)>;
    // Passes each frame's payload (or the part of it in `data`) to `output`: stream 1 is the
    // standard output, 2 the standard error. False once the framing is broken.
    bool feed(QByteArrayView data, const Output &output);
    // Between two frames: a stream that ends here ended whole.
    bool atBoundary() const { return m_header.isEmpty() && m_left == 0; }

private:
    QByteArray m_header; // the part of a frame's header seen so far
    int m_stream = 0;
    quint32 m_left = 0; // of the current frame's payload
    bool m_broken = false;
};

// An asynchronous client of the Docker Engine API on libcurl, for one engine:
// `unix:///path/docker.sock` or `tcp://host:port` (plain HTTP, or HTTPS with client certificates:
// setTlsDirectory()).
//
// Every call has a deadline and answers with a value, never an exception or a hang. Calls are
// made and answered on the thread that created the client; the transfers themselves run on a
// worker thread of the client (see dockerengine.cpp for why). Destroying the client answers the
// calls still in flight with an error.
class DockerEngine : public QObject
{
    Q_OBJECT
public:
    // The engine named by `--docker-host`, else $DOCKER_HOST, else the system socket.
    static QString defaultHost();

    explicit DockerEngine(const QString &host, QObject *parent = nullptr);
    ~DockerEngine() override;

    QString host() const;
    // Empty when `host` names an engine this client can talk to, else why not.
    QString hostError() const;
    // A tcp:// engine that requires TLS (dockerd --tlsverify) is reached with https and the
    // client certificates in `dir`, as Docker's own clients keep them: ca.pem (the engine's CA),
    // cert.pem and key.pem. Empty: plain HTTP.
    void setTlsDirectory(const QString &dir);
    // $DOCKER_CERT_PATH when $DOCKER_TLS_VERIFY is set, as Docker's clients read them; else empty.
    static QString defaultTlsDirectory();
    // The deadline of calls that do not name one (connecting included).
    void setDefaultTimeout(std::chrono::milliseconds timeout);

    // The body of a 2xx answer as it arrives, instead of in the result: called on the client's
    // worker thread, so it must only touch what is safe there.
    using Sink = std::function<void(QByteArrayView piece)>;

    // One raw call: `path` is below the API version prefix ("/containers/json?..."). A null
    // `body` sends none; a non-null one is sent with `contentType`.
    QCoro::Task<DockerResult> request(const char *method, QString path,
                                      QByteArray body = QByteArray(),
                                      std::optional<std::chrono::milliseconds> timeout = {},
                                      const char *contentType = "application/json", Sink sink = {});

    QCoro::Task<DockerResult> ping();
    QCoro::Task<DockerResult> version();
    QCoro::Task<DockerResult> inspectImage(QString image);
    // Imports a root file system (an uncompressed tar) as image `repository:tag`, without a
    // registry.
    QCoro::Task<DockerResult> importImage(QByteArray tarball, QString repository, QString tag);

    // Answers with {"Id": ...} in `json`.
    QCoro::Task<DockerResult> createContainer(DockerContainerSpec spec, QString name = QString());
    QCoro::Task<DockerResult> startContainer(QString id);
    QCoro::Task<DockerResult> inspectContainer(QString id);
    // Containers (running or not) carrying every label of `labels` ("key" or "key=value"); with
    // `withSize`, each with the size of its writable layer (SizeRw), which the engine adds up.
    QCoro::Task<DockerResult> listContainers(QStringList labels, bool withSize = false);
    QCoro::Task<DockerResult> pauseContainer(QString id);
    QCoro::Task<DockerResult> unpauseContainer(QString id);
    QCoro::Task<DockerResult> stopContainer(QString id, std::chrono::seconds grace);
    // Kills it if it runs, and removes it with its anonymous volumes.
    QCoro::Task<DockerResult> removeContainer(QString id);

    // Runs `command` in the running container `id` without a terminal, waits (at most
    // `timeout`) for it to end, and answers with its two streams and exit code. With `output`,
    // the streams go to it as they arrive (on the client's worker thread, see Sink) instead of
    // into the result.
    QCoro::Task<DockerExecResult> exec(QString id, QStringList command,
                                       std::chrono::milliseconds timeout,
                                       QStringList environment = {}, QString workingDir = QString(),
                                       QString user = QString(),
                                       DockerStreamDemuxer::Output output = {});

    // Splits a whole multiplexed stream (see DockerStreamDemuxer) into stdout and stderr. False
    // when the framing is broken.
    static bool demultiplex(const QByteArray &stream, QByteArray *standardOutput,
                            QByteArray *standardError);

private:
    class Private;
    std::unique_ptr<Private> d;
};

} // namespace AgentDeck
