#include "dockerengine.h"

#include "logging.h"

#include <QCoroSignal>
#include <QCoroTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QJsonArray>
#include <QJsonObject>
#include <QPointer>
#include <QUrl>
#include <QtEndian>

#include <curl/curl.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck {

// Transfers run on a worker thread of the client that drives a curl multi handle with
// curl_multi_poll(), rather than on QSocketNotifiers fed by CURLMOPT_SOCKETFUNCTION: curl calls
// those callbacks from inside curl_multi_socket_action(), where a notifier that Qt is still
// dispatching may have to be deleted or re-armed, and an answer would resume a coroutine in the
// middle of curl's own call stack. With a thread, curl only ever runs in one plain loop, the
// Qt side only queues handles and receives finished transfers as queued calls, and a busy event
// loop cannot stall a transfer past its deadline. The cost, one idle thread per engine, is small:
// a server talks to one engine or a few.

namespace {
// The oldest API that has everything used here (Docker 20.10); newer engines still serve it.
constexpr auto ApiPrefix = "/v1.41";
// No answer of the engine that this client reads is anywhere near this; a runaway one is cut.
constexpr qint64 MaxAnswerBytes = 64 * 1024 * 1024;
// How long after an exec's output ends its exit code may take to be recorded.
constexpr std::chrono::milliseconds ExitRecordedWithin = 5s;

void initialiseCurl()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

QByteArray encoded(const QString &segment, const QByteArray &keep = {})
{
    return QUrl::toPercentEncoding(segment, keep);
}

// The engine's own explanation from an error body ({"message": ...}), else the raw text.
QString engineMessage(const DockerResult &result)
{
    const QString message = result.json.object().value("message"_L1).toString();
    if (!message.isEmpty())
        return message;
    return QString::fromUtf8(result.body.left(300)).trimmed();
}
} // namespace

// One HTTP exchange. Owned jointly by the calling side and the worker; the easy handle is freed
// with the last owner, which is always after the worker has taken it out of the multi handle.
struct Transfer
{
    quint64 id = 0;
    CURL *easy = nullptr;
    curl_slist *headers = nullptr;
    QByteArray method;
    QByteArray path;
    QByteArray requestBody;
    QByteArray answer;
    DockerEngine::Sink sink; // a 2xx answer's body goes here instead of into `answer`
    bool tooLarge = false;
    std::chrono::milliseconds timeout{};
    char errorText[CURL_ERROR_SIZE] = {};
    // Filled by the worker when the transfer ends.
    CURLcode code = CURLE_OK;
    long status = 0;
    long osErrno = 0;

    ~Transfer()
    {
        if (easy)
            curl_easy_cleanup(easy);
        if (headers)
            curl_slist_free_all(headers);
    }
};

namespace {
size_t collectAnswer(char *data, size_t size, size_t count, void *user)
{
    auto *transfer = static_cast<Transfer *>(user);
    const size_t bytes = size * count;
    if (transfer->sink) {
        long status = 0;
        curl_easy_getinfo(transfer->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status <= 299) {
            transfer->sink(QByteArrayView(data, qsizetype(bytes)));
            return bytes;
        }
    }
    if (transfer->answer.size() + qint64(bytes) > MaxAnswerBytes) {
        transfer->tooLarge = true;
        return 0; // makes curl end the transfer with CURLE_WRITE_ERROR
    }
    transfer->answer.append(data, qsizetype(bytes));
    return bytes;
}
} // namespace

// Resumes the coroutine waiting for one transfer.
class DockerCallWaiter : public QObject
{
    Q_OBJECT
public:
    DockerResult result;
Q_SIGNALS:
    void finished();
};

class DockerEngine::Private
{
public:
    DockerEngine *q = nullptr;
    QString host;
    QString hostError;
    QByteArray baseUrl;    // "http://localhost" for a socket, "http://host:port" for TCP
    QByteArray socketPath; // empty for TCP
    // TLS (setTlsDirectory()): the engine's CA and this client's certificate and key.
    QByteArray caFile, certFile, keyFile;
    std::chrono::milliseconds defaultTimeout = 30s;

    // Shared with the worker.
    CURLM *multi = nullptr;
    std::mutex mutex;
    std::vector<std::shared_ptr<Transfer>> incoming;
    std::atomic<bool> stopping = false;
    std::thread worker;

    // The calling thread's side.
    quint64 nextId = 1;
    bool shutDown = false;
    QHash<quint64, std::shared_ptr<Transfer>> inFlight;
    QHash<quint64, QPointer<DockerCallWaiter>> waiters;

    void parseHost();
    void run();
    void submit(const std::shared_ptr<Transfer> &transfer);
    void finish(const std::shared_ptr<Transfer> &transfer);
    DockerResult resultOf(const Transfer &transfer) const;
    void shutdown();
};

void DockerEngine::Private::parseHost()
{
    if (host.startsWith("unix://"_L1)) {
        const QString path = host.mid(7);
        if (path.isEmpty() || !path.startsWith(u'/')) {
            hostError = u"The Docker host %1 does not name an absolute socket path"_s.arg(host);
            return;
        }
        socketPath = path.toLocal8Bit();
        baseUrl = "http://localhost";
        return;
    }
    if (host.startsWith("tcp://"_L1)) {
        const QUrl url(u"http://"_s + host.mid(6));
        if (!url.isValid() || url.host().isEmpty() || url.port() <= 0) {
            hostError = u"The Docker host %1 does not name a host and port"_s.arg(host);
            return;
        }
        QByteArray name = url.host(QUrl::FullyEncoded).toUtf8();
        if (name.contains(':')) // an IPv6 address, which QUrl gives without its brackets
            name = '[' + name + ']';
        baseUrl = "http://" + name + ':' + QByteArray::number(url.port());
        return;
    }
    hostError = u"The Docker host %1 is neither unix:///path nor tcp://host:port"_s.arg(host);
}

void DockerEngine::Private::run()
{
    std::unordered_set<std::shared_ptr<Transfer>> running;
    while (!stopping.load()) {
        {
            std::lock_guard lock(mutex);
            for (auto &transfer : incoming) {
                curl_easy_setopt(transfer->easy, CURLOPT_PRIVATE, transfer.get());
                curl_multi_add_handle(multi, transfer->easy);
                running.insert(std::move(transfer));
            }
            incoming.clear();
        }
        int active = 0;
        curl_multi_perform(multi, &active);
        int queued = 0;
        while (CURLMsg *message = curl_multi_info_read(multi, &queued)) {
            if (message->msg != CURLMSG_DONE)
                continue;
            Transfer *raw = nullptr;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &raw);
            raw->code = message->data.result;
            curl_easy_getinfo(raw->easy, CURLINFO_RESPONSE_CODE, &raw->status);
            curl_easy_getinfo(raw->easy, CURLINFO_OS_ERRNO, &raw->osErrno);
            curl_multi_remove_handle(multi, raw->easy);
            auto found = std::find_if(running.begin(), running.end(),
                                      [raw](const auto &held) { return held.get() == raw; });
            std::shared_ptr<Transfer> transfer = *found;
            running.erase(found);
            // Queued to the calling thread; dropped there if the client is gone by then.
            QMetaObject::invokeMethod(
                q, [this, transfer] { finish(transfer); }, Qt::QueuedConnection);
        }
        // Wakes for socket activity, for curl's own timers (deadlines included) and for
        // curl_multi_wakeup() from submit() and shutdown().
        curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    for (const auto &transfer : running)
        curl_multi_remove_handle(multi, transfer->easy);
}

void DockerEngine::Private::submit(const std::shared_ptr<Transfer> &transfer)
{
    inFlight.insert(transfer->id, transfer);
    {
        std::lock_guard lock(mutex);
        incoming.push_back(transfer);
    }
    curl_multi_wakeup(multi);
}

DockerResult DockerEngine::Private::resultOf(const Transfer &transfer) const
{
    DockerResult result;
    const QString call = QString::fromLatin1(transfer.method + ' ' + transfer.path);
    if (transfer.code != CURLE_OK) {
        switch (transfer.code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
            result.error = u"The Docker engine at %1 is not reachable (%2)"_s.arg(
                host, transfer.osErrno ? qt_error_string(int(transfer.osErrno))
                                       : QString::fromLocal8Bit(transfer.errorText));
            break;
        case CURLE_OPERATION_TIMEDOUT:
            result.error = u"The Docker engine at %1 did not finish %2 within %3 ms"_s.arg(
                host, call, QString::number(transfer.timeout.count()));
            break;
        case CURLE_WRITE_ERROR:
            if (transfer.tooLarge) {
                result.error = u"The Docker engine at %1 answered %2 with more than %3 bytes"_s.arg(
                    host, call, QString::number(MaxAnswerBytes));
                break;
            }
            [[fallthrough]];
        default:
            result.error = u"The call %1 to the Docker engine at %2 failed: %3"_s.arg(
                call, host,
                transfer.errorText[0] ? QString::fromLocal8Bit(transfer.errorText)
                                      : QString::fromLatin1(curl_easy_strerror(transfer.code)));
        }
        return result;
    }
    result.status = int(transfer.status);
    result.body = transfer.answer;
    QJsonParseError parseError;
    result.json = QJsonDocument::fromJson(result.body, &parseError);
    if (result.status < 200 || result.status > 299) {
        result.error = u"The Docker engine at %1 refused %2 (HTTP %3): %4"_s.arg(
            host, call, QString::number(result.status), engineMessage(result));
    }
    return result;
}

void DockerEngine::Private::finish(const std::shared_ptr<Transfer> &transfer)
{
    inFlight.remove(transfer->id);
    const QPointer<DockerCallWaiter> waiter = waiters.take(transfer->id);
    if (!waiter)
        return;
    waiter->result = resultOf(*transfer);
    Q_EMIT waiter->finished();
}

void DockerEngine::Private::shutdown()
{
    if (shutDown)
        return;
    shutDown = true;
    stopping = true;
    curl_multi_wakeup(multi);
    worker.join();
    // Every handle is out of the multi handle now; the transfers free them when released.
    {
        std::lock_guard lock(mutex);
        incoming.clear();
    }
    inFlight.clear();
    curl_multi_cleanup(multi);
    multi = nullptr;
    // Whoever still waits gets an answer; a call they make next fails at once (shutDown).
    const auto pending = std::exchange(waiters, {});
    for (const QPointer<DockerCallWaiter> &waiter : pending) {
        if (!waiter)
            continue;
        waiter->result.error = u"The client of the Docker engine at %1 was shut down"_s.arg(host);
        Q_EMIT waiter->finished();
    }
}

QString DockerEngine::defaultHost()
{
    const QString fromEnvironment = qEnvironmentVariable("DOCKER_HOST");
    return fromEnvironment.isEmpty() ? u"unix:///var/run/docker.sock"_s : fromEnvironment;
}

DockerEngine::DockerEngine(const QString &host, QObject *parent)
    : QObject(parent)
    , d(std::make_unique<Private>())
{
    initialiseCurl();
    d->q = this;
    d->host = host;
    d->parseHost();
    d->multi = curl_multi_init();
    d->worker = std::thread([this] { d->run(); });
}

DockerEngine::~DockerEngine()
{
    d->shutdown();
}

QString DockerEngine::host() const
{
    return d->host;
}

QString DockerEngine::hostError() const
{
    return d->hostError;
}

void DockerEngine::setTlsDirectory(const QString &dir)
{
    if (dir.isEmpty() || !d->hostError.isEmpty())
        return;
    if (!d->socketPath.isEmpty()) {
        d->hostError = u"TLS (--docker-tls-dir) is for tcp:// engines, not %1"_s.arg(d->host);
        return;
    }
    const QDir directory(dir);
    for (const auto &[name, target] :
         {std::pair{"ca.pem", &d->caFile}, std::pair{"cert.pem", &d->certFile},
          std::pair{"key.pem", &d->keyFile}}) {
        const QString path = directory.absoluteFilePath(QLatin1StringView(name));
        if (!QFileInfo(path).isReadable()) {
            d->hostError = u"The TLS directory of the Docker engine at %1 has no readable %2"_s.arg(
                d->host, path);
            return;
        }
        *target = QFile::encodeName(path);
    }
    d->baseUrl.replace(0, 7, "https://"); // "http://" -> "https://"
}

QString DockerEngine::defaultTlsDirectory()
{
    if (qEnvironmentVariableIsEmpty("DOCKER_TLS_VERIFY"))
        return {};
    const QString path = qEnvironmentVariable("DOCKER_CERT_PATH");
    return path.isEmpty() ? QDir::homePath() + u"/.docker"_s : path;
}

void DockerEngine::setDefaultTimeout(std::chrono::milliseconds timeout)
{
    d->defaultTimeout = timeout;
}

QCoro::Task<DockerResult> DockerEngine::request(const char *method, QString path, QByteArray body,
                                                std::optional<std::chrono::milliseconds> timeout,
                                                const char *contentType, Sink sink)
{
    if (!d->hostError.isEmpty())
        co_return DockerResult{.error = d->hostError};
    if (d->shutDown) {
        co_return DockerResult{
            .error = u"The client of the Docker engine at %1 was shut down"_s.arg(d->host)};
    }

    auto transfer = std::make_shared<Transfer>();
    transfer->id = d->nextId++;
    transfer->method = method;
    transfer->path = path.toUtf8();
    transfer->requestBody = body;
    transfer->timeout = timeout.value_or(d->defaultTimeout);
    transfer->sink = std::move(sink);
    CURL *easy = curl_easy_init();
    transfer->easy = easy;
    const QByteArray url = d->baseUrl + ApiPrefix + transfer->path;
    curl_easy_setopt(easy, CURLOPT_URL, url.constData());
    if (!d->socketPath.isEmpty())
        curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, d->socketPath.constData());
    if (!d->caFile.isEmpty()) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, d->caFile.constData());
        curl_easy_setopt(easy, CURLOPT_SSLCERT, d->certFile.constData());
        curl_easy_setopt(easy, CURLOPT_SSLKEY, d->keyFile.constData());
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
    }
    // The engine is named exactly; a proxy from the environment must never carry its calls.
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
    curl_easy_setopt(easy, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, long(transfer->timeout.count()));
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, long(transfer->timeout.count()));
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer->errorText);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collectAnswer);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, transfer.get());
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, transfer->method.constData());
    if (!body.isNull() || qstrcmp(method, "POST") == 0) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, transfer->requestBody.constData());
        if (!body.isNull()) {
            transfer->headers = curl_slist_append(
                transfer->headers,
                QByteArray(QByteArray("Content-Type: ") + contentType).constData());
        }
    }
    // Bodies go at once: waiting for "100 Continue" only delays an image import.
    transfer->headers = curl_slist_append(transfer->headers, "Expect:");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer->headers);

    DockerCallWaiter waiter;
    d->waiters.insert(transfer->id, &waiter);
    d->submit(transfer);
    transfer.reset();
    co_await qCoro(&waiter, &DockerCallWaiter::finished);
    if (!waiter.result.ok())
        qCDebug(lcRuntime) << waiter.result.error;
    co_return std::move(waiter.result);
}

QCoro::Task<DockerResult> DockerEngine::ping()
{
    co_return co_await request("GET", u"/_ping"_s);
}

QCoro::Task<DockerResult> DockerEngine::version()
{
    co_return co_await request("GET", u"/version"_s);
}

QCoro::Task<DockerResult> DockerEngine::inspectImage(QString image)
{
    co_return co_await request("GET", u"/images/"_s + QString::fromLatin1(encoded(image, "/:@")) +
                                          u"/json"_s);
}

QCoro::Task<DockerResult> DockerEngine::importImage(QByteArray tarball, QString repository,
                                                    QString tag)
{
    const QString path = u"/images/create?fromSrc=-&repo=%1&tag=%2"_s.arg(
        QString::fromLatin1(encoded(repository, "/")), QString::fromLatin1(encoded(tag)));
    DockerResult result = co_await request("POST", path, tarball, std::chrono::milliseconds(5min),
                                           "application/x-tar");
    // The answer is a stream of progress objects; a failure is reported in one of them with 200.
    if (result.ok()) {
        const QList<QByteArray> lines = result.body.trimmed().split('\n');
        const QJsonObject last = QJsonDocument::fromJson(lines.last()).object();
        if (last.contains("error"_L1)) {
            result.error = u"The Docker engine at %1 could not import %2:%3: %4"_s.arg(
                d->host, repository, tag, last.value("error"_L1).toString());
        }
        result.json = QJsonDocument(last);
    }
    co_return result;
}

QJsonDocument DockerContainerSpec::toJson() const
{
    QJsonObject labelObject;
    for (auto it = labels.cbegin(); it != labels.cend(); ++it)
        labelObject.insert(it.key(), it.value());
    QJsonObject hostConfig{
        {"NetworkMode"_L1, networkMode},
        {"Binds"_L1, QJsonArray::fromStringList(binds)},
        {"CapDrop"_L1, QJsonArray{u"ALL"_s}},
        {"SecurityOpt"_L1, QJsonArray{u"no-new-privileges"_s}},
        {"ReadonlyRootfs"_L1, readOnlyRootfs},
        {"Tmpfs"_L1, QJsonObject{{"/tmp"_L1, tmpfsOptions}}},
        // The runtime decides when a container goes; the engine never restarts or removes one.
        {"RestartPolicy"_L1, QJsonObject{{"Name"_L1, u"no"_s}}},
        {"AutoRemove"_L1, false},
    };
    if (memoryBytes > 0) {
        hostConfig.insert("Memory"_L1, memoryBytes);
        // Swap would let a command use more than the limit says.
        hostConfig.insert("MemorySwap"_L1, memoryBytes);
    }
    if (pidsLimit > 0)
        hostConfig.insert("PidsLimit"_L1, pidsLimit);
    if (nanoCpus > 0)
        hostConfig.insert("NanoCpus"_L1, nanoCpus);
    if (init)
        hostConfig.insert("Init"_L1, true);
    if (shmBytes > 0)
        hostConfig.insert("ShmSize"_L1, shmBytes);
    if (!dns.isEmpty())
        hostConfig.insert("Dns"_L1, QJsonArray::fromStringList(dns));
    QJsonArray limits;
    for (auto it = ulimits.cbegin(); it != ulimits.cend(); ++it)
        limits.append(QJsonObject{{"Name"_L1, it.key()}, {"Soft"_L1, *it}, {"Hard"_L1, *it}});
    if (!limits.isEmpty())
        hostConfig.insert("Ulimits"_L1, limits);
    QJsonObject body{
        {"Image"_L1, image},
        {"Env"_L1, QJsonArray::fromStringList(environment)},
        {"Labels"_L1, labelObject},
        {"HostConfig"_L1, hostConfig},
        // Disabled, the engine writes no /etc/resolv.conf.
        {"NetworkDisabled"_L1, networkMode == "none"_L1 && dns.isEmpty()},
        {"AttachStdin"_L1, false},
        {"AttachStdout"_L1, false},
        {"AttachStderr"_L1, false},
        {"OpenStdin"_L1, openStdin},
        {"Tty"_L1, false},
    };
    if (!command.isEmpty())
        body.insert("Cmd"_L1, QJsonArray::fromStringList(command));
    if (!workingDir.isEmpty())
        body.insert("WorkingDir"_L1, workingDir);
    if (!user.isEmpty())
        body.insert("User"_L1, user);
    return QJsonDocument(body);
}

QCoro::Task<DockerResult> DockerEngine::createContainer(DockerContainerSpec spec, QString name)
{
    QString path = u"/containers/create"_s;
    if (!name.isEmpty())
        path += u"?name="_s + QString::fromLatin1(encoded(name));
    DockerResult result =
        co_await request("POST", path, spec.toJson().toJson(QJsonDocument::Compact));
    if (result.status == 404) {
        result.error = u"The Docker engine at %1 has no image %2: %3"_s.arg(d->host, spec.image,
                                                                            engineMessage(result));
    }
    co_return result;
}

QCoro::Task<DockerResult> DockerEngine::startContainer(QString id)
{
    DockerResult result =
        co_await request("POST", u"/containers/%1/start"_s.arg(QString::fromLatin1(encoded(id))));
    if (result.status == 304) // already running: what was asked for
        result.error.clear();
    co_return result;
}

QCoro::Task<DockerResult> DockerEngine::inspectContainer(QString id)
{
    co_return co_await request("GET",
                               u"/containers/%1/json"_s.arg(QString::fromLatin1(encoded(id))));
}

QCoro::Task<DockerResult> DockerEngine::listContainers(QStringList labels, bool withSize)
{
    const QJsonObject filters{{"label"_L1, QJsonArray::fromStringList(labels)}};
    const QByteArray filterText = QJsonDocument(filters).toJson(QJsonDocument::Compact);
    co_return co_await request(
        "GET", u"/containers/json?all=true"_s + (withSize ? u"&size=true"_s : QString()) +
                   u"&filters="_s +
                   QString::fromLatin1(QUrl::toPercentEncoding(QString::fromUtf8(filterText))));
}

QCoro::Task<DockerResult> DockerEngine::pauseContainer(QString id)
{
    co_return co_await request("POST",
                               u"/containers/%1/pause"_s.arg(QString::fromLatin1(encoded(id))));
}

QCoro::Task<DockerResult> DockerEngine::unpauseContainer(QString id)
{
    co_return co_await request("POST",
                               u"/containers/%1/unpause"_s.arg(QString::fromLatin1(encoded(id))));
}

QCoro::Task<DockerResult> DockerEngine::stopContainer(QString id, std::chrono::seconds grace)
{
    // The engine waits `grace` before it kills; the call may take that long and a little more.
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(grace) + d->defaultTimeout;
    DockerResult result =
        co_await request("POST",
                         u"/containers/%1/stop?t=%2"_s.arg(QString::fromLatin1(encoded(id)),
                                                           QString::number(grace.count())),
                         QByteArray(), timeout);
    if (result.status == 304) // already stopped
        result.error.clear();
    co_return result;
}

QCoro::Task<DockerResult> DockerEngine::removeContainer(QString id)
{
    co_return co_await request(
        "DELETE", u"/containers/%1?force=true&v=true"_s.arg(QString::fromLatin1(encoded(id))));
}

bool DockerStreamDemuxer::feed(QByteArrayView data, const Output &output)
{
    while (!m_broken && !data.isEmpty()) {
        if (m_left == 0) {
            const qsizetype taken = std::min<qsizetype>(8 - m_header.size(), data.size());
            m_header.append(data.first(taken));
            data = data.sliced(taken);
            if (m_header.size() < 8)
                break;
            m_stream = quint8(m_header.at(0));
            m_left = qFromBigEndian<quint32>(m_header.constData() + 4);
            m_header.clear();
            // 0 is stdin, which the engine never writes for an exec without one.
            m_broken = m_stream > 2;
            continue;
        }
        const qsizetype taken = std::min<qsizetype>(m_left, data.size());
        output(m_stream == 2 ? 2 : 1, data.first(taken));
        data = data.sliced(taken);
        m_left -= quint32(taken);
    }
    return !m_broken;
}

bool DockerEngine::demultiplex(const QByteArray &stream, QByteArray *standardOutput,
                               QByteArray *standardError)
{
    DockerStreamDemuxer demuxer;
    const bool framed = demuxer.feed(stream, [&](int kind, QByteArrayView payload) {
        (kind == 2 ? standardError : standardOutput)->append(payload);
    });
    return framed && demuxer.atBoundary();
}

QCoro::Task<DockerExecResult> DockerEngine::exec(QString id, QStringList command,
                                                 std::chrono::milliseconds timeout,
                                                 QStringList environment, QString workingDir,
                                                 QString user, DockerStreamDemuxer::Output output)
{
    QJsonObject create{
        {"AttachStdin"_L1, false},
        {"AttachStdout"_L1, true},
        {"AttachStderr"_L1, true},
        {"Tty"_L1, false},
        {"Cmd"_L1, QJsonArray::fromStringList(command)},
    };
    if (!environment.isEmpty())
        create.insert("Env"_L1, QJsonArray::fromStringList(environment));
    if (!workingDir.isEmpty())
        create.insert("WorkingDir"_L1, workingDir);
    if (!user.isEmpty())
        create.insert("User"_L1, user);
    const DockerResult created =
        co_await request("POST", u"/containers/%1/exec"_s.arg(QString::fromLatin1(encoded(id))),
                         QJsonDocument(create).toJson(QJsonDocument::Compact));
    if (!created.ok())
        co_return DockerExecResult{.error = created.error};
    const QString execId = created.json.object().value("Id"_L1).toString();

    // Without a terminal the engine answers with the multiplexed stream and closes the
    // connection when the command ends, so the transfer lasts exactly as long as the command.
    // A command over its deadline keeps running in the container: ending it (and its process
    // tree) is the runtime's job, which knows how it wants that done.
    const QJsonObject start{{"Detach"_L1, false}, {"Tty"_L1, false}};
    // Streamed, the demuxer is the worker thread's alone until the transfer has ended.
    auto demuxer = std::make_shared<DockerStreamDemuxer>();
    auto framed = std::make_shared<std::atomic<bool>>(true);
    Sink sink;
    if (output) {
        sink = [demuxer, framed, output](QByteArrayView piece) {
            if (!demuxer->feed(piece, output))
                framed->store(false);
        };
    }
    const DockerResult started = co_await request(
        "POST", u"/exec/%1/start"_s.arg(execId),
        QJsonDocument(start).toJson(QJsonDocument::Compact), timeout, "application/json", sink);
    DockerExecResult result;
    if (!started.ok()) {
        result.error = started.error;
        co_return result;
    }
    const bool wellFramed =
        output ? framed->load() && demuxer->atBoundary()
               : demultiplex(started.body, &result.standardOutput, &result.standardError);
    if (!wellFramed) {
        result.error = u"The Docker engine at %1 sent an exec stream that is not framed as "
                       "expected (%2 bytes)"_s.arg(d->host, QString::number(started.body.size()));
        co_return result;
    }
    // The output can end a moment before the engine has recorded the exit, so a "still
    // running" is asked again, briefly.
    QElapsedTimer sinceOutputEnded;
    sinceOutputEnded.start();
    QJsonObject state;
    for (auto pause = 5ms;; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
        const DockerResult inspected = co_await request("GET", u"/exec/%1/json"_s.arg(execId));
        if (!inspected.ok()) {
            result.error = inspected.error;
            co_return result;
        }
        state = inspected.json.object();
        if (!state.value("Running"_L1).toBool())
            break;
        if (sinceOutputEnded.elapsed() > ExitRecordedWithin.count()) {
            result.error = u"The Docker engine at %1 still reports exec %2 as running %3 ms "
                           "after its output ended"_s.arg(
                               d->host, execId, QString::number(ExitRecordedWithin.count()));
            co_return result;
        }
        co_await QCoro::sleepFor(pause);
    }
    result.exitCode = state.value("ExitCode"_L1).toInt(-1);
    co_return result;
}

} // namespace AgentDeck

#include "dockerengine.moc"
