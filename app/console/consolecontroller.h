#pragma once

#include "conversationlistmodel.h"
#include "eventlistmodel.h"
#include "lifecycle.h"
#include "lifecyclefeed.h"
#include "serverconnection.h"

#include <QDateTime>
#include <QDeadlineTimer>
#include <QMultiHash>
#include <QObject>
#include <QPointer>
#include <QSet>
#include <QTimer>

#include <array>

namespace AgentDeck {

// The console's logic without widgets: keeps the list model in step with the server (search
// pages, upserted row by row) and the selected conversation's timeline live (its WebSocket),
// and performs the one-click actions. The window only displays and forwards clicks.
class ConsoleController : public QObject
{
    Q_OBJECT
public:
    enum class Action
    {
        Recover,
        RunAgain, // the interrupted command the outcome offers (outcome/retry)
        Dismiss,  // acknowledges a failed or interrupted outcome
        Run,
        Pause,
        Interrupt, // stops the command in flight
        Accept,    // the action waiting for confirmation
        Reject,
        Reprovision,
        StartFresh, // an expired runtime, with an empty workspace
        Archive,
        Unarchive,
        Delete
    };
    Q_ENUM(Action)
    // In the order the window shows them.
    static constexpr std::array AllActions{
        Action::Recover,     Action::RunAgain,   Action::Dismiss, Action::Run,
        Action::Pause,       Action::Interrupt,  Action::Accept,  Action::Reject,
        Action::Reprovision, Action::StartFresh, Action::Archive, Action::Unarchive,
        Action::Delete};

    explicit ConsoleController(ServerConnection *connection, QObject *parent = nullptr);

    ConversationListModel *conversations() { return &m_conversations; }
    EventListModel *timeline() { return &m_timeline; }
    ServerConnection *connection() { return m_connection; }
    QUuid selected() const { return m_selected; }
    bool isBusy() const { return m_busy > 0; }
    // Whether an action on `id` waits for the server's answer.
    bool isActingOn(const QUuid &id) const { return m_acting.contains(id); }
    // A refresh reads the RefreshedRows most recently updated conversations, a page of
    // PageSize at a time, each shown as it comes; the list is not loaded whole. Scrolled to
    // its end, a tab reads LoadMoreRows more of its partition (loadMore()).
    static constexpr int PageSize = 100;
    static constexpr int RefreshedRows = 1000;
    static constexpr int LoadMoreRows = 1000;
    // Whether the last refresh read every page.
    bool isListComplete() const { return m_complete; }
    // Whether `partition` (Active or Archived) has rows on the server the list does not hold.
    bool hasMore(ArchiveFilter partition) const;
    // The next LoadMoreRows of `partition`, newest updated first, after those the list holds.
    QCoro::Task<> loadMore(ArchiveFilter partition);
    // What the server counted in `partition` (Active or Archived) at the last refresh that
    // did not read every page; nothing once one did, or when the count failed.
    std::optional<qint64> serverCount(ArchiveFilter partition) const
    {
        return partition == ArchiveFilter::Archived ? m_archivedOnServer : m_activeOnServer;
    }

    // Refreshes the list every `interval`, and probes the server's health every ProbeInterval on
    // a connection of its own: a frozen server (SIGSTOP, a paused VM) left the list "Connected"
    // and its rows live for the 30 s a request may wait. It follows the server's lifecycle feed
    // too: a change made elsewhere (archived, deleted, created, ...) reads its conversation at
    // once, and while the feed is connected the list is read only every FeedFallbackInterval
    // (a run's own progress is not in the feed).
    void startRefreshing(std::chrono::milliseconds interval);
    static constexpr std::chrono::milliseconds FeedFallbackInterval{15'000};
    // The server's lifecycle feed once startRefreshing() opened it (lifecycleRecord() outlives a
    // reopening with a new key).
    LifecycleFeed *lifecycleFeed() const { return m_feed; }
    static constexpr std::chrono::milliseconds ProbeInterval{1000};
    // How long the probe waits for /alive before the server is taken for unreachable.
    static constexpr std::chrono::milliseconds ProbeTimeout{2500};
    // Asks /alive once; false when it did not answer (the list is then marked unreachable).
    QCoro::Task<bool> probe();
    bool isReachable() const { return m_outage == Outage::None; }
    // How the server is out of reach: it refused the connection or has no address (Down),
    // took the connection and said nothing in time (NotAnswering: frozen, or overloaded), or
    // answered with an error (Failing: a key asked for, a 503).
    enum class Outage
    {
        None,
        Down,
        NotAnswering,
        Failing
    };
    Q_ENUM(Outage)
    Outage outage() const { return m_outage; }
    // Why the server is taken for unreachable, in the words reachabilityChanged() said it.
    QString unreachableReason() const { return m_unreachableReason; }
    // Whether the last refresh was refused for a missing or wrong session API key (401).
    bool needsKey() const { return m_needsKey; }
    // Uses `key` from now on (the list, the probe, the selected conversation's stream) and
    // refreshes with it: whether the server took it.
    QCoro::Task<bool> useApiKey(QString key);
    // When the list was last read whole from the server (invalid before the first time).
    QDateTime lastRefreshed() const { return m_lastRefreshed; }
    QCoro::Task<bool> refresh();
    // Past the rows a refresh reads, the filter box's search is also made on the server (each
    // of its alternatives: `q`, `tag`, `id_prefix`, `status`), and what it finds joins the
    // list; otherwise the oldest conversations could not be found from the console. The
    // alternatives that look in events (`body`) are always asked: the ids they found.
    QCoro::Task<QSet<QUuid>> findOnServer(ConversationSearch search);
    void select(const QUuid &id);
    // `reason`: a Reject's, which the agent is told (none: the server's default).
    QCoro::Task<bool> perform(Action action, QUuid id, QString reason = {});
    QCoro::Task<bool> sendMessage(QUuid id, QString text);
    // `action` on each of `ids` in turn (the list's bulk actions), with bulkProgress() after
    // each: what was done, and what failed and why, for one summary instead of a banner each.
    struct BulkFailure
    {
        QUuid id;
        QString title;
        QString why;
    };
    struct BulkResult
    {
        int asked = 0;
        int done = 0;
        int unanswered = 0; // of the failures: no answer in time, may still take effect
        QList<BulkFailure> failures;
    };
    QCoro::Task<BulkResult> performAll(Action action, QList<QUuid> ids);
    // A new title or new tags, as edited in the list (ConversationListModel::labelsEdited()):
    // PATCHed, and the row follows the server's answer.
    QCoro::Task<bool> editLabels(QUuid id, ConversationLabels labels);
    struct Creation
    {
        QUuid id;
        // The server made the conversation but its initial message did not start (every
        // sandbox taken, say): why, in its words. Empty when it started, or there was none.
        QString messageFailure;
    };
    // Creates a conversation; what was made once the server made it and the list holds it,
    // nothing when the server refused (failed() says why).
    QCoro::Task<std::optional<Creation>> create(CreateConversationRequest request);

    static QString actionName(Action action);
    // Whether `action` can be done on `info` as it is, and if not, why.
    static Lifecycle::Availability availability(Action action, const ConversationInfo &info);
    // How the server contains its commands, once it said (/server_info): empty when they are
    // isolated, else a sentence saying they are not, and why.
    QString isolationWarning() const { return m_isolationWarning; }
    // The webhooks /server_info reports failing, a line each; empty when none is.
    QString webhookWarning() const { return m_webhookWarning; }
    // Tests: how often a refresh reads /server_info again (default 30 s).
    void setServerInfoInterval(std::chrono::milliseconds interval)
    {
        m_serverInfoInterval = interval;
        m_serverInfoDue.setRemainingTime(interval);
    }

Q_SIGNALS:
    void busyChanged(bool busy);
    // A failure in the server's words, for the non-modal banner.
    void failed(const QString &sentence);
    // An action got no answer in time: it may or may not have taken effect. A refresh is asked
    // for; outcomeSettled() follows once one that began afterwards has read the list.
    void outcomeUnknown(const QString &sentence);
    void outcomeSettled();
    // The list could (not) be refreshed; `why` says what failed. Emitted on changes only, of
    // reachability or of the outage's kind (outage()).
    void reachabilityChanged(bool reachable, const QString &why);
    void isolationWarningChanged(const QString &warning);
    void webhookWarningChanged(const QString &warning);
    void refreshed();
    void actionFinished(AgentDeck::ConsoleController::Action action, bool ok,
                        const QUuid &conversationId);
    // Recover on `id` was answered: what it did in words ("Recovered: started the runtime"),
    // or "Nothing to recover". Emitted before its actionFinished().
    void recovered(const QUuid &conversationId, const QString &sentence);
    // An action on `id` began or got its answer (see isActingOn()).
    void actingChanged(const QUuid &id);
    void bulkProgress(int finished, int total);
    // A change made on the server, from its lifecycle feed (LifecycleFeed::recordArrived()).
    void lifecycleRecord(const QJsonObject &record);

private:
    void setBusy(bool busy);
    // The request of `action` and what its success changes in the list; no signal of its
    // outcome (perform() and performAll() say it, each in its way).
    QCoro::Task<ApiReply> act(Action action, QUuid id, QString reason);
    void setReachable(Outage outage, const QString &why);
    static Outage outageOf(const ApiReply &failure);
    // What a refresh under way read of the conversation is older than the list's row now.
    void noteChanged(const QUuid &id);
    // Puts the events before the timeline's first row in front of it, a page at a time.
    QCoro::Task<> loadEarlierEvents();
    // (Re)opens the lifecycle feed with the connection's key, after the last record seen.
    void openFeed();
    // The row of a conversation a feed record says changed, read again (or removed).
    QCoro::Task<> followChange(QJsonObject record);

    ServerConnection *m_connection;
    ConversationListModel m_conversations;
    EventListModel m_timeline;
    QUuid m_selected;
    QPointer<EventStream> m_stream;
    QTimer m_refreshTimer;
    std::chrono::milliseconds m_refreshInterval{0}; // startRefreshing()'s, without the feed
    QPointer<LifecycleFeed> m_feed;
    // The latest feed record of each conversation being read again: an older one's answer,
    // perhaps read before a deletion, is not shown over it.
    QHash<QUuid, QString> m_followedRecord;
    bool m_refreshing = false;
    QTimer m_probeTimer;
    std::unique_ptr<ServerConnection> m_probeConnection; // its own TCP connection
    bool m_probing = false;
    bool m_unreachableByProbe = false; // the probe, not a refresh, found it unreachable
    QDateTime m_lastRefreshed;
    bool m_unsettled = false; // an action's outcome awaits a refresh that begins after it
    // Conversations an answer or the stream changed (created, deleted, archived, ...) while a
    // refresh read its pages: what the refresh read of them is older than what the list shows.
    QSet<QUuid> m_changedDuringRefresh;
    Outage m_outage = Outage::None;
    bool m_needsKey = false;
    QString m_unreachableReason;
    QString m_isolationWarning;
    QString m_webhookWarning;
    bool m_serverInfoRead = false;
    // /server_info is read again this often, for the webhooks' state.
    std::chrono::milliseconds m_serverInfoInterval{30'000};
    QDeadlineTimer m_serverInfoDue;
    QCoro::Task<> readServerInfo();
    bool m_complete = true; // the last refresh read every page
    // Where loadMore() goes on in a partition: its own search, which a refresh does not read.
    struct MoreRows
    {
        QString nextPageId;
        int read = 0; // rows its pages gave
        bool exhausted = false;
    };
    std::array<MoreRows, 2> m_more;
    bool m_loadingMore = false;
    MoreRows &moreRows(ArchiveFilter partition)
    {
        return m_more[partition == ArchiveFilter::Archived ? 1 : 0];
    }
    // Where the next refresh starts looking up rows it did not read (loaded by loadMore()).
    qsizetype m_confirmFrom = 0;
    std::optional<qint64> m_activeOnServer; // see serverCount()
    std::optional<qint64> m_archivedOnServer;
    int m_busy = 0;
    bool m_loadingEarlier = false;
    QMultiHash<QUuid, Action> m_acting; // actions waiting for the server's answer
};

} // namespace AgentDeck
