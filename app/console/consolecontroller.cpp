#include "consolecontroller.h"

#include "lifecycle.h"

#include <QJsonObject>

#include <QCoroTimer>
#include <QJsonArray>
#include <QSet>
#include <QUrlQuery>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Earlier events are read a page of the events route at a time.
constexpr int EarlierEventsPage = 100;
} // namespace

ConsoleController::ConsoleController(ServerConnection *connection, QObject *parent)
    : QObject(parent)
    , m_connection(connection)
{
    connect(&m_refreshTimer, &QTimer::timeout, this, [this] { refresh(); });
    m_probeTimer.setInterval(ProbeInterval);
    connect(&m_probeTimer, &QTimer::timeout, this, [this] { probe(); });
    connect(&m_timeline, &EventListModel::earlierWanted, this, [this] { loadEarlierEvents(); });
    connect(&m_conversations, &ConversationListModel::labelsEdited, this,
            [this](const QUuid &id, const ConversationLabels &labels) { editLabels(id, labels); });
    connect(&m_conversations, &ConversationListModel::labelsRefused, this,
            [this](const QUuid &, const QString &error) {
                Q_EMIT failed(tr("The tags were not changed: %1").arg(error));
            });
}

Lifecycle::Availability ConsoleController::availability(Action action, const ConversationInfo &info)
{
    switch (action) {
    case Action::Recover:
        return Lifecycle::canRecover(info);
    case Action::RunAgain:
        return Lifecycle::canRunAgain(info);
    case Action::Dismiss:
        return Lifecycle::canDismiss(info);
    case Action::Run:
        return Lifecycle::canRun(info);
    case Action::Pause:
        return Lifecycle::canPause(info);
    case Action::Interrupt:
        return Lifecycle::canInterrupt(info);
    case Action::Accept:
    case Action::Reject:
        return Lifecycle::canRespond(info);
    case Action::Reprovision:
        return Lifecycle::canReprovision(info);
    case Action::StartFresh:
        return Lifecycle::canStartFresh(info);
    case Action::Archive:
        return Lifecycle::canArchive(info);
    case Action::Unarchive:
        return Lifecycle::canUnarchive(info);
    case Action::Delete:
        return {true, {}};
    }
    return {};
}

QString ConsoleController::actionName(Action action)
{
    switch (action) {
    case Action::Recover:
        return tr("Recover");
    case Action::RunAgain:
        return tr("Run again");
    case Action::Dismiss:
        return tr("Dismiss");
    case Action::Run:
        return tr("Run");
    case Action::Pause:
        return tr("Pause");
    case Action::Interrupt:
        return tr("Interrupt");
    case Action::Accept:
        return tr("Accept");
    case Action::Reject:
        return tr("Reject");
    case Action::Reprovision:
        return tr("Reprovision");
    case Action::StartFresh:
        return tr("Start fresh");
    case Action::Archive:
        return tr("Archive");
    case Action::Unarchive:
        return tr("Unarchive");
    case Action::Delete:
        return tr("Delete");
    }
    return {};
}

void ConsoleController::setBusy(bool busy)
{
    const bool was = isBusy();
    m_busy += busy ? 1 : -1;
    if (was != isBusy())
        Q_EMIT busyChanged(isBusy());
}

void ConsoleController::startRefreshing(std::chrono::milliseconds interval)
{
    m_refreshInterval = interval;
    m_refreshTimer.start(interval);
    m_probeTimer.start();
    openFeed();
    refresh();
}

void ConsoleController::openFeed()
{
    std::optional<qint64> after;
    if (m_feed) {
        after = m_feed->lastId();
        m_feed->disconnect(this);
        m_feed->deleteLater();
    }
    m_feed = m_connection->openLifecycleFeed(after, this);
    // Connected, changes come as they are made: the list is read again now (for what was made
    // while no feed was connected), and then only as a fallback.
    connect(m_feed, &LifecycleFeed::connected, this, [this] {
        m_refreshTimer.setInterval(std::max(m_refreshInterval, FeedFallbackInterval));
        refresh();
    });
    const auto poll = [this] { m_refreshTimer.setInterval(m_refreshInterval); };
    connect(m_feed, &LifecycleFeed::disconnected, this, poll);
    connect(m_feed, &LifecycleFeed::closedByServer, this, poll);
    connect(m_feed, &LifecycleFeed::recordArrived, this, [this](const QJsonObject &record) {
        Q_EMIT lifecycleRecord(record);
        followChange(record);
    });
}

QCoro::Task<> ConsoleController::followChange(QJsonObject record)
{
    const QUuid id = LifecycleFeed::conversationOf(record);
    if (id.isNull()) {
        refresh();
        co_return;
    }
    noteChanged(id);
    const QString recordId = record.value(u"id"_s).toString();
    if (record.value(u"action"_s) == u"delete"_s) {
        m_followedRecord.remove(id);
        m_conversations.remove(id);
        co_return;
    }
    m_followedRecord.insert(id, recordId);
    QPointer<ConsoleController> self(this);
    auto reading = m_connection->conversation(id);
    const auto info = co_await std::move(reading);
    if (!self || m_followedRecord.value(id) != recordId)
        co_return;
    m_followedRecord.remove(id);
    if (!info)
        co_return;
    noteChanged(id);
    m_conversations.upsert({*info});
}

QCoro::Task<bool> ConsoleController::probe()
{
    if (m_probing)
        co_return isReachable();
    m_probing = true;
    QPointer<ConsoleController> self(this);
    if (!m_probeConnection) {
        m_probeConnection = std::make_unique<ServerConnection>(m_connection->baseUrl());
        m_probeConnection->setSilenceTimeout(ProbeTimeout);
    }
    m_probeConnection->setApiKey(m_connection->apiKey());
    auto asking = m_probeConnection->get(u"/alive"_s);
    const ApiReply reply = co_await std::move(asking);
    if (!self)
        co_return false;
    m_probing = false;
    if (reply.ok()) {
        // Back: the list is read again now, not at the next refresh, and says so then.
        if (!isReachable() && m_unreachableByProbe)
            refresh();
        co_return true;
    }
    // The probe tells a frozen server from a stopped one as it goes on failing.
    if (isReachable() || m_unreachableByProbe) {
        m_unreachableByProbe = true;
        setReachable(
            outageOf(reply),
            tr("The server does not answer: its health check %1")
                .arg(reply.timedOut
                         ? tr("got no answer within %1 s").arg(ProbeTimeout.count() / 1000.0)
                         : reply.errorSentence()));
    }
    co_return false;
}

void ConsoleController::noteChanged(const QUuid &id)
{
    if (m_refreshing)
        m_changedDuringRefresh.insert(id);
}

QCoro::Task<> ConsoleController::readServerInfo()
{
    m_serverInfoRead = true;
    m_serverInfoDue.setRemainingTime(m_serverInfoInterval);
    QPointer<ConsoleController> self(this);
    auto reading = m_connection->get(u"/server_info"_s);
    const ApiReply reply = co_await std::move(reading);
    if (!self || !reply.ok())
        co_return;
    QStringList failing;
    for (const QJsonValue webhook : reply.json.toObject().value(u"webhooks"_s).toArray()) {
        const QJsonObject one = webhook.toObject();
        if (one.value(u"state"_s).toString() == u"failing"_s)
            failing.append(tr("Webhook %1 failing since %2: %3 (%4 records waiting)")
                               .arg(one.value(u"url"_s).toString(),
                                    one.value(u"failing_since"_s).toString(),
                                    one.value(u"last_error"_s).toString())
                               .arg(one.value(u"pending"_s).toInteger()));
    }
    if (const QString webhookWarning = failing.join(u'\n'); webhookWarning != m_webhookWarning) {
        m_webhookWarning = webhookWarning;
        Q_EMIT webhookWarningChanged(webhookWarning);
    }
    const QJsonObject sandbox = reply.json.toObject().value(u"sandbox"_s).toObject();
    // A server that does not say (an older one) is taken at its word elsewhere: no warning.
    QString warning;
    if (sandbox.value(u"isolation"_s).toString() == u"none"_s) {
        const QString reason = sandbox.value(u"reason"_s).toString();
        warning = reason.isEmpty() ? tr("Commands on this server are not isolated")
                                   : tr("Commands on this server are not isolated: %1").arg(reason);
    }
    if (warning == m_isolationWarning)
        co_return;
    m_isolationWarning = warning;
    Q_EMIT isolationWarningChanged(warning);
}

ConsoleController::Outage ConsoleController::outageOf(const ApiReply &failure)
{
    if (!failure.unreachable())
        return Outage::Failing;
    return failure.timedOut ? Outage::NotAnswering : Outage::Down;
}

void ConsoleController::setReachable(Outage outage, const QString &why)
{
    // Said once per change: a refresh failing every 3 s used to replace whatever the banner
    // said (an action's failure among others), and nothing took it down once the server was
    // back.
    if (outage == m_outage)
        return;
    m_outage = outage;
    const bool reachable = outage == Outage::None;
    m_unreachableReason = reachable ? QString() : why;
    // Its rows are what it said when the list was last read whole.
    m_conversations.setStale(!reachable, m_lastRefreshed);
    // The list is back; the timeline follows now rather than after its stream's backoff.
    if (reachable && m_stream)
        m_stream->reconnectNow();
    Q_EMIT reachabilityChanged(reachable, why);
}

QCoro::Task<bool> ConsoleController::useApiKey(QString key)
{
    m_connection->setApiKey(key);
    if (m_probeConnection)
        m_probeConnection->setApiKey(key);
    if (m_feed)
        openFeed();
    // The stream asked with the old key: opened again with the new one.
    const QUuid selected = std::exchange(m_selected, {});
    select(selected);
    // A refresh under way asked with the old key: the answer is the next one's.
    QPointer<ConsoleController> self(this);
    while (m_refreshing) {
        co_await QCoro::sleepFor(std::chrono::milliseconds(20));
        if (!self)
            co_return false;
    }
    auto refreshing = refresh();
    co_return co_await std::move(refreshing);
}

void ConsoleController::select(const QUuid &id)
{
    if (id == m_selected)
        return;
    m_selected = id;
    if (m_stream) {
        // Nothing more of it counts: a conversation deleted here closed its stream with 4004
        // after it was let go, and the banner said that it no longer existed.
        m_stream->disconnect(this);
        m_stream->deleteLater();
    }
    // A long history opens with its newest events; the earlier ones come when asked for. The
    // count may be behind: the stream then brings more, and the timeline keeps the newest.
    const int row = m_conversations.rowOf(id);
    const qint64 known = row < 0 ? 0 : m_conversations.at(row).eventCount;
    const qint64 afterSeq = std::max<qint64>(0, known - EventListModel::KeptEvents);
    m_timeline.clear(afterSeq);
    m_timeline.setFollowing(!id.isNull());
    m_timeline.setLive(false);
    if (id.isNull())
        return;
    m_stream = m_connection->openEventStream(id, afterSeq, this);
    connect(m_stream, &EventStream::connected, this, [this] { m_timeline.setLive(true); });
    connect(m_stream, &EventStream::disconnected, this, [this] { m_timeline.setLive(false); });
    connect(m_stream, &EventStream::transientReceived, this,
            [this, output = CommandOutputFollower()](const QJsonObject &frame) mutable {
                if (const auto piece = output.take(frame); !piece.text.isEmpty())
                    m_timeline.addLiveOutput(piece.actionId, piece.text);
            });
    connect(m_stream, &EventStream::eventReceived, this, [this, id](const Event &event) {
        m_timeline.append(event);
        m_conversations.applyEvent(id, event);
    });
    connect(
        m_stream, &EventStream::closedByServer, this, [this, id](int code, const QString &reason) {
            m_timeline.setLive(false);
            // Gone: its row goes too, rather than staying with every action enabled. Deleted
            // from here, the stream's close may come before the answer, and is no failure.
            if (code == 4004) {
                noteChanged(id);
                m_conversations.remove(id);
                if (m_acting.contains(id, Action::Delete))
                    return;
            }
            Q_EMIT failed(code == 4004
                              ? tr("This conversation no longer exists on the server.")
                              : tr("The event stream was closed by the server: %1").arg(reason));
        });
}

QCoro::Task<> ConsoleController::loadEarlierEvents()
{
    if (m_loadingEarlier)
        co_return;
    const QUuid id = m_selected;
    const qint64 before = m_timeline.earlierCount() + 1;
    const qint64 afterSeq = std::max<qint64>(0, before - 1 - EarlierEventsPage);
    QPointer<ConsoleController> self(this);
    m_loadingEarlier = true;
    ApiReply failure;
    auto reading = m_connection->eventsAfter(id, afterSeq, int(before - 1 - afterSeq), &failure);
    const auto events = co_await std::move(reading);
    if (!self)
        co_return;
    m_loadingEarlier = false;
    if (id != m_selected)
        co_return;
    if (!events) {
        Q_EMIT failed(tr("Loading earlier events failed: %1").arg(failure.errorSentence()));
        co_return;
    }
    m_timeline.prepend(*events);
}

QCoro::Task<ApiReply> ConsoleController::act(Action action, QUuid id, QString reason)
{
    QPointer<ConsoleController> self(this);
    setBusy(true);
    m_acting.insert(id, action);
    Q_EMIT actingChanged(id);
    QCoro::Task<ApiReply> call = [&]() {
        switch (action) {
        case Action::Recover:
            return m_connection->conversationAction(id, u"recover"_s);
        case Action::RunAgain:
            return m_connection->conversationAction(id, u"outcome/retry"_s);
        case Action::Dismiss:
            return m_connection->conversationAction(id, u"outcome/dismiss"_s);
        case Action::Run:
            return m_connection->conversationAction(id, u"run"_s);
        case Action::Pause:
            return m_connection->conversationAction(id, u"pause"_s);
        case Action::Interrupt:
            return m_connection->conversationAction(id, u"interrupt"_s);
        case Action::Accept:
        case Action::Reject: {
            QJsonObject answer{{u"accept"_s, action == Action::Accept}};
            if (!reason.isEmpty())
                answer.insert(u"reason"_s, reason);
            return m_connection->post(
                ServerConnection::conversationPath(id, u"events/respond_to_confirmation"), answer);
        }
        case Action::Reprovision:
            return m_connection->conversationAction(id, u"runtime/reprovision"_s);
        case Action::StartFresh:
            return m_connection->conversationAction(id, u"runtime/start_fresh"_s);
        case Action::Archive:
            return m_connection->conversationAction(id, u"archive"_s);
        case Action::Unarchive:
            return m_connection->conversationAction(id, u"unarchive"_s);
        case Action::Delete:
            break;
        }
        return m_connection->deleteResource(ServerConnection::conversationPath(id));
    }();
    const ApiReply reply = co_await std::move(call);
    if (!self)
        co_return reply;
    setBusy(false);
    m_acting.remove(id, action);
    Q_EMIT actingChanged(id);
    // Deleted elsewhere: the row goes now, not at the next refresh.
    const bool gone = reply.status == 404 && reply.errorCode == u"not_found"_s;
    if (!reply.ok() && !gone)
        co_return reply;
    noteChanged(id);
    if (action == Action::Delete || gone) {
        m_conversations.remove(id); // the window lets go of the row, and so of the selection
        if (m_selected == id)
            select({});
    } else if (auto info = ConversationInfo::fromJson(reply.json.toObject())) {
        m_conversations.upsert({*info});
    }
    // A pause lets the step finish: until the run stops, its badge says so.
    if (action == Action::Pause)
        m_conversations.markPausing(id);
    co_return reply;
}

QCoro::Task<bool> ConsoleController::perform(Action action, QUuid id, QString reason)
{
    QPointer<ConsoleController> self(this);
    auto acting = act(action, id, reason);
    const ApiReply reply = co_await std::move(acting);
    if (!self)
        co_return false;
    if (reply.timedOut) {
        m_unsettled = true;
        Q_EMIT outcomeUnknown(
            tr("%1 got no answer: %2").arg(actionName(action), reply.errorSentence()));
        Q_EMIT actionFinished(action, false, id);
        refresh();
        co_return false;
    }
    if (!reply.ok()) {
        Q_EMIT failed(tr("%1 failed: %2").arg(actionName(action), reply.errorSentence()));
        Q_EMIT actionFinished(action, false, id);
        co_return false;
    }
    if (action == Action::Recover) {
        const std::optional<QStringList> actions = recoveryActionsOf(reply.json.toObject());
        Q_EMIT recovered(id, !actions ? tr("Recover done") // a server that does not say
                             : actions->isEmpty()
                                 ? tr("Nothing to recover")
                                 : tr("Recovered: %1").arg(Lifecycle::recoveryText(*actions)));
    }
    Q_EMIT actionFinished(action, true, id);
    co_return true;
}

QCoro::Task<ConsoleController::BulkResult> ConsoleController::performAll(Action action,
                                                                         QList<QUuid> ids)
{
    QPointer<ConsoleController> self(this);
    BulkResult result;
    result.asked = int(ids.size());
    Q_EMIT bulkProgress(0, result.asked);
    // One at a time: the server serializes what it does to a conversation anyway, and a
    // hundred requests at once held every other one of the console behind them.
    for (const QUuid &id : std::as_const(ids)) {
        const std::optional<ConversationInfo> info = m_conversations.conversation(id);
        auto acting = act(action, id, {});
        const ApiReply reply = co_await std::move(acting);
        if (!self)
            co_return result;
        if (reply.ok()) {
            ++result.done;
        } else {
            result.unanswered += reply.timedOut ? 1 : 0;
            result.failures.append({id, info ? info->title : QString(), reply.errorSentence()});
        }
        Q_EMIT bulkProgress(result.done + int(result.failures.size()), result.asked);
    }
    if (result.unanswered > 0) {
        m_unsettled = true;
        refresh();
    }
    co_return result;
}

QCoro::Task<std::optional<ConsoleController::Creation>>
ConsoleController::create(CreateConversationRequest request)
{
    QPointer<ConsoleController> self(this);
    setBusy(true);
    auto creating = m_connection->createConversation(std::move(request));
    const ApiReply reply = co_await std::move(creating);
    if (!self)
        co_return std::nullopt;
    auto info = reply.ok() ? ConversationInfo::fromJson(reply.json.toObject()) : std::nullopt;
    // Made, but its initial message failed: the answer names the conversation, which is read,
    // listed and handed back with the failure. It was said in a banner only, and the
    // conversation, not selected, later expired as a dead entry.
    QString messageFailure;
    if (const auto made = parseWireId(reply.json.toObject().value(u"conversation_id"_s).toString());
        !reply.ok() && made) {
        auto reading = m_connection->conversation(*made);
        info = co_await std::move(reading);
        if (!self)
            co_return std::nullopt;
        messageFailure = reply.errorSentence();
    }
    setBusy(false);
    if (!info) {
        Q_EMIT failed(tr("Creating the conversation failed: %1")
                          .arg(reply.ok() ? tr("the server's answer is not a conversation")
                                          : reply.errorSentence()));
        co_return std::nullopt;
    }
    noteChanged(info->id);
    m_conversations.upsert({*info});
    co_return Creation{info->id, messageFailure};
}

QCoro::Task<bool> ConsoleController::sendMessage(QUuid id, QString text)
{
    QPointer<ConsoleController> self(this);
    setBusy(true);
    auto sending = m_connection->sendMessage(id, MessageRequest{u"user"_s, text, true});
    const ApiReply reply = co_await std::move(sending);
    if (!self)
        co_return false;
    setBusy(false);
    if (!reply.ok()) {
        Q_EMIT failed(tr("Sending failed: %1").arg(reply.errorSentence()));
        co_return false;
    }
    co_return true;
}

QCoro::Task<bool> ConsoleController::editLabels(QUuid id, ConversationLabels labels)
{
    const QString what = labels.title ? tr("Renaming") : tr("Changing the tags");
    QPointer<ConsoleController> self(this);
    setBusy(true);
    auto patching = m_connection->patch(ServerConnection::conversationPath(id), labels.toJson());
    const ApiReply reply = co_await std::move(patching);
    if (!self)
        co_return false;
    setBusy(false);
    if (!reply.ok()) {
        Q_EMIT failed(tr("%1 failed: %2").arg(what, reply.errorSentence()));
        co_return false;
    }
    noteChanged(id);
    if (const auto info = ConversationInfo::fromJson(reply.json.toObject()))
        m_conversations.upsert({*info});
    co_return true;
}

} // namespace AgentDeck
