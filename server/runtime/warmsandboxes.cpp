#include "warmsandboxes.h"

#include "dockerengine.h"
#include "logging.h"
#include "sandboxcontainers.h"
#include "wiretypes.h"
#include "workspacedisks.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QPointer>
#include <QSet>

using namespace Qt::StringLiterals;

namespace AgentDeck {

WarmSandboxes::WarmSandboxes(SandboxContainers *containers, WarmSandboxSettings settings,
                             QObject *parent)
    : QObject(parent)
    , m_containers(containers)
    , m_settings(std::move(settings))
    , m_fingerprint(m_containers->warmFingerprint(m_settings.policy))
{
    connect(&m_check, &QTimer::timeout, this, &WarmSandboxes::refill);
}

WarmSandboxes::~WarmSandboxes() = default;

QString WarmSandboxes::runtimeDirOf(const QUuid &id) const
{
    return QDir(m_settings.runtimesRoot).filePath(toWireId(id));
}

QString WarmSandboxes::workspaceOf(const QUuid &id) const
{
    return QDir(m_settings.workspacesRoot).filePath(toWireId(id));
}

QString WarmSandboxes::markerOf(const QUuid &id) const
{
    return QDir(runtimeDirOf(id)).filePath(QLatin1StringView(MarkerName));
}

void WarmSandboxes::start()
{
    // Also with --sandbox-warm 0: what a server with a pool left is removed.
    m_check.start(CheckInterval);
    refill();
}

std::optional<QUuid> WarmSandboxes::claim(const SandboxPolicy &policy)
{
    if (m_ready.isEmpty() || m_containers->warmFingerprint(policy) != m_fingerprint)
        return std::nullopt;
    while (!m_ready.isEmpty()) {
        const QUuid id = m_ready.takeFirst();
        // Removed first: from here on the reservation is the conversation's, also for a server
        // that restarts before the conversation is stored (its sweep of dirs the catalog does
        // not know removes it then).
        if (!QFile::remove(markerOf(id)))
            continue;
        qCInfo(lcRuntime) << "a new conversation takes the warm container of" << id << ";"
                          << m_ready.size() << "of" << m_settings.count << "left ready";
        QTimer::singleShot(RefillDelay, this, &WarmSandboxes::refill);
        return id;
    }
    refill();
    return std::nullopt;
}

bool WarmSandboxes::isReserved(const QUuid &id) const
{
    return QFile::exists(markerOf(id));
}

QByteArray WarmSandboxes::metrics() const
{
    return "# HELP agentdeck_sandboxes_warm Warm containers ready for new conversations "
           "(--sandbox-warm).\n"
           "# TYPE agentdeck_sandboxes_warm gauge\n"
           "agentdeck_sandboxes_warm " +
           QByteArray::number(m_ready.size()) + '\n';
}

void WarmSandboxes::refill()
{
    if (m_running) {
        m_again = true;
        return;
    }
    m_running = true;
    QCoro::connect(reconcile(), this, [this] {
        m_running = false;
        if (std::exchange(m_again, false))
            refill();
    });
}

QCoro::Task<void> WarmSandboxes::reconcile()
{
    QPointer<WarmSandboxes> self(this);
    auto listing = m_containers->listWarm();
    const DockerResult listed = co_await std::move(listing);
    if (!self)
        co_return;
    auto inspecting = m_containers->inspectDefaultImage();
    const DockerResult image = co_await std::move(inspecting);
    if (!self)
        co_return;
    if (!listed.ok() && m_settings.count == 0)
        co_return; // nothing to fill, and nothing it knows of to remove
    if (!listed.ok() || !image.ok()) {
        const QString problem = listed.ok() ? image.error : listed.error;
        if (problem != m_lastProblem)
            qCWarning(lcRuntime).noquote() << "cannot fill the warm pool (--sandbox-warm"
                                           << m_settings.count << "):" << problem;
        m_lastProblem = problem;
        co_return;
    }
    const QString imageId = image.json.object().value("Id"_L1).toString();

    // What is there: free ones that fit are kept (as many as wanted), the others go.
    QList<QUuid> fit;
    QSet<QUuid> listedIds;
    QList<std::pair<QUuid, QString>> unfit;
    for (const QJsonValue &entry : listed.json.array()) {
        const QJsonObject container = entry.toObject();
        const QJsonObject labels = container.value("Labels"_L1).toObject();
        const auto id = parseWireId(
            labels.value(QLatin1StringView(SandboxContainers::ConversationLabel)).toString());
        if (!id)
            continue;
        listedIds.insert(*id);
        if (!isReserved(*id))
            continue; // claimed: the conversation's
        if (container.value("State"_L1).toString() != "running"_L1)
            unfit.append({*id, u"it is %1"_s.arg(container.value("State"_L1).toString())});
        else if (container.value("ImageID"_L1).toString() != imageId)
            unfit.append({*id, u"its image is not the one --sandbox-image names any more"_s});
        else if (labels.value(QLatin1StringView(SandboxContainers::WarmLabel)).toString() !=
                 m_fingerprint)
            unfit.append({*id, u"it was made with other sandbox options"_s});
        else if (fit.size() >= m_settings.count)
            unfit.append({*id, u"--sandbox-warm is %1"_s.arg(m_settings.count)});
        else
            fit.append(*id);
    }
    // Reserved dirs whose container is gone (removed on the engine, or never made).
    const QDir root(m_settings.runtimesRoot);
    for (const QString &name : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        const auto id = parseWireId(name);
        if (id && !listedIds.contains(*id) && isReserved(*id))
            unfit.append({*id, u"its container is gone"_s});
    }
    // None of them is handed out from here on, while the others are removed.
    for (const auto &[id, why] : std::as_const(unfit))
        m_ready.removeAll(id);
    for (const auto &[id, why] : std::as_const(unfit)) {
        if (!isReserved(id))
            continue; // claimed before it was found unfit: its conversation's now
        auto discarding = discard(id, why);
        co_await std::move(discarding);
        if (!self)
            co_return;
    }
    // Claimed meanwhile: not ready any more.
    m_ready.clear();
    for (const QUuid &id : std::as_const(fit)) {
        if (!isReserved(id))
            continue;
        m_ready.append(id);
        if (m_settings.prestart)
            m_settings.prestart(id, workspaceOf(id)); // nothing when it runs already
    }

    if (m_ready.size() < m_settings.count)
        qCInfo(lcRuntime) << "filling the warm pool:" << m_ready.size() << "of" << m_settings.count
                          << "containers ready";
    while (m_ready.size() < m_settings.count) {
        auto making = makeOne();
        const bool made = co_await std::move(making);
        if (!self)
            co_return;
        if (!made)
            co_return; // tried again at the next check
    }
    m_lastProblem.clear();
}

QCoro::Task<bool> WarmSandboxes::makeOne()
{
    QPointer<WarmSandboxes> self(this);
    const QUuid id = QUuid::createUuid();
    const QString runtimeDir = runtimeDirOf(id);
    const QString home = QDir(runtimeDir).filePath(u"home"_s);
    const QString workspace = workspaceOf(id);
    // The marker first: the sweeps leave the dirs and the container alone from the start.
    QFile marker(markerOf(id));
    QString problem;
    if (!QDir().mkpath(home) || !marker.open(QIODevice::WriteOnly) || !QDir().mkpath(workspace))
        problem = u"cannot create its directories under the data dir"_s;
    marker.close();
    if (problem.isEmpty() && m_settings.disks) {
        auto making = m_settings.disks->make(id, workspace);
        problem = co_await std::move(making);
        if (!self)
            co_return false;
    }
    if (problem.isEmpty()) {
        auto preparing = m_containers->prepareWarm(
            id, workspace, m_settings.roots.aliasesOf(workspace), home, m_settings.policy);
        const SandboxContainers::Prepared prepared = co_await std::move(preparing);
        if (!self)
            co_return false;
        problem = prepared.error;
    }
    if (!problem.isEmpty()) {
        if (problem != m_lastProblem)
            qCWarning(lcRuntime).noquote() << "cannot fill the warm pool (--sandbox-warm"
                                           << m_settings.count << "):" << problem;
        m_lastProblem = problem;
        auto discarding = discard(id, {});
        co_await std::move(discarding);
        co_return false;
    }
    if (!isReserved(id))
        co_return true; // discarded meanwhile (never claimed: it was not ready)
    m_ready.append(id);
    if (m_settings.prestart)
        m_settings.prestart(id, workspace);
    qCInfo(lcRuntime) << "warm container ready for" << id << ";" << m_ready.size() << "of"
                      << m_settings.count;
    co_return true;
}

QCoro::Task<void> WarmSandboxes::discard(QUuid id, QString why)
{
    QPointer<WarmSandboxes> self(this);
    if (!why.isEmpty())
        qCInfo(lcRuntime).noquote()
            << "removing the warm container of" << toWireId(id) << ":" << why;
    if (m_settings.release)
        m_settings.release(id); // its host, and its container in the background
    auto removing = m_containers->removeNow(id);
    const QString failed = co_await std::move(removing);
    if (!self)
        co_return;
    if (!failed.isEmpty()) {
        // Kept reserved: the next check tries again.
        qCWarning(lcRuntime).noquote()
            << "cannot remove the warm container of" << toWireId(id) << ":" << failed;
        co_return;
    }
    m_settings.removeTree(workspaceOf(id));
    m_settings.removeTree(runtimeDirOf(id));
}

} // namespace AgentDeck
