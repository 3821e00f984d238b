#include "consolecontroller.h"

#include <QJsonArray>
#include <QSet>
#include <QUrlQuery>

#include <algorithm>

using namespace Qt::StringLiterals;

// ConsoleController: reading the list from the server (refreshes, the rows past them as a tab
// is scrolled, and the filter box's searches).

namespace AgentDeck {

namespace {
// Rows missing from a pass and found still there, per refresh (the batch route takes 100 ids);
// rows found gone do not count.
constexpr int MaxConfirmedPerRefresh = 200;
} // namespace

QCoro::Task<bool> ConsoleController::refresh()
{
    if (m_refreshing)
        co_return false;
    m_refreshing = true;
    m_changedDuringRefresh.clear();
    const bool settles = std::exchange(m_unsettled, false);
    QPointer<ConsoleController> self(this);
    ConversationFilter all;
    all.archive = ArchiveFilter::All;
    // Read before what an answer or the stream changed meanwhile: a deleted row came back for
    // a refresh, an archived one went back to Active, a finished run showed `running` again.
    const auto changedSinceRead = [this](const ConversationInfo &info) {
        return m_changedDuringRefresh.contains(info.id);
    };
    QList<ConversationInfo> seen;
    QString pageId;
    bool complete = false;
    for (int page = 0; page < RefreshedRows / PageSize; ++page) {
        ApiReply failure;
        auto searching = m_connection->searchConversations(all, ConversationSort::UpdatedAtDesc,
                                                           pageId, PageSize, &failure);
        const auto result = co_await std::move(searching);
        if (!self)
            co_return false;
        if (!result) {
            m_refreshing = false;
            m_unsettled = m_unsettled || settles;
            m_needsKey = failure.status == 401;
            // In the server's words: a wrong key or a 503 is not "the server did not answer".
            setReachable(outageOf(failure),
                         tr("Cannot list conversations: %1").arg(failure.errorSentence()));
            co_return false;
        }
        // Shown as it comes: the first rows do not wait for the last page.
        QList<ConversationInfo> fresh = result->items;
        fresh.removeIf(changedSinceRead);
        m_conversations.upsert(fresh);
        seen.append(result->items);
        pageId = result->nextPageId;
        if (pageId.isEmpty()) {
            complete = true;
            break;
        }
    }
    // A row missing from the pass is not proof of a deletion: paging by update time, a
    // conversation updated meanwhile moves to a page already read (rows vanished for a refresh
    // while conversations were busy), and rows loadMore() read lie past the pages a refresh
    // reads. Missing rows are looked up by id: gone ones leave, the others are brought up to
    // date. Only those still there count towards the bound of a refresh (a server replaced by
    // another at the same address, a new data dir, left its thousands of rows in the list,
    // taken down 200 a refresh, for minutes); each refresh starts where the last one stopped.
    QSet<QUuid> present;
    for (const ConversationInfo &info : std::as_const(seen))
        present.insert(info.id);
    QList<QUuid> missing;
    for (int row = 0; row < m_conversations.rowCount(); ++row) {
        if (!present.contains(m_conversations.at(row).id))
            missing.append(m_conversations.at(row).id);
    }
    if (m_confirmFrom >= missing.size())
        m_confirmFrom = 0;
    std::rotate(missing.begin(), missing.begin() + m_confirmFrom, missing.end());
    int stillThere = 0;
    for (qsizetype first = 0; first < missing.size() && stillThere < MaxConfirmedPerRefresh;
         first += 100) {
        const QList<QUuid> batch = missing.mid(first, 100);
        QStringList ids;
        for (const QUuid &id : batch)
            ids.append(toWireId(id));
        auto getting =
            m_connection->get(u"/api/conversations"_s, QUrlQuery{{u"ids"_s, ids.join(u',')}});
        const ApiReply reply = co_await std::move(getting);
        if (!self)
            co_return false;
        const QJsonArray answers = reply.json.toArray();
        if (!reply.ok() || answers.size() != batch.size())
            break; // asked again at the next refresh
        QList<ConversationInfo> current;
        QSet<QUuid> gone;
        for (qsizetype i = 0; i < batch.size(); ++i) {
            if (answers[i].isNull())
                gone.insert(batch[i]);
            else if (const auto info = ConversationInfo::fromJson(answers[i].toObject()))
                current.append(*info);
        }
        m_conversations.remove(gone);
        current.removeIf(changedSinceRead);
        m_conversations.upsert(current);
        stillThere += int(current.size());
        m_confirmFrom += current.size();
    }
    m_complete = complete;
    if (complete)
        m_more = {};
    m_activeOnServer.reset();
    m_archivedOnServer.reset();
    if (!complete) {
        // For the tabs: "5000+" was all they could say, on both, also of an empty partition.
        ConversationFilter partition;
        partition.archive = ArchiveFilter::Active;
        auto active = m_connection->countConversations(partition);
        const std::optional<qint64> activeCount = co_await std::move(active);
        partition.archive = ArchiveFilter::Archived;
        auto archived = m_connection->countConversations(partition);
        const std::optional<qint64> archivedCount = co_await std::move(archived);
        if (!self)
            co_return false;
        m_activeOnServer = activeCount;
        m_archivedOnServer = archivedCount;
    }
    // Read again once the server is back: it may be another one (restarted without bubblewrap).
    if (!m_serverInfoRead || !isReachable() || m_serverInfoDue.hasExpired())
        readServerInfo();
    m_needsKey = false;
    m_lastRefreshed = QDateTime::currentDateTime();
    m_unreachableByProbe = false;
    setReachable(Outage::None, {});
    m_refreshing = false;
    Q_EMIT refreshed();
    if (settles)
        Q_EMIT outcomeSettled();
    co_return true;
}

bool ConsoleController::hasMore(ArchiveFilter partition) const
{
    return !m_complete && !m_more[partition == ArchiveFilter::Archived ? 1 : 0].exhausted;
}

QCoro::Task<> ConsoleController::loadMore(ArchiveFilter partition)
{
    if (!hasMore(partition) || m_loadingMore)
        co_return;
    QPointer<ConsoleController> self(this);
    m_loadingMore = true;
    MoreRows &more = moreRows(partition);
    // The refresh's rows are of both partitions, newest first: where this partition's end in
    // them is no page of its own. Its own search begins from the start, once, and reads on
    // past the rows the list holds.
    int held = 0;
    for (int row = 0; row < m_conversations.rowCount(); ++row)
        held += (m_conversations.at(row).archivedAt.has_value() ==
                 (partition == ArchiveFilter::Archived));
    const int wanted = std::max(more.read, held) + LoadMoreRows;
    ConversationFilter filter;
    filter.archive = partition;
    while (more.read < wanted) {
        auto searching = m_connection->searchConversations(filter, ConversationSort::UpdatedAtDesc,
                                                           more.nextPageId, PageSize);
        const auto result = co_await std::move(searching);
        if (!self)
            co_return;
        if (!result)
            break; // asked again when the view comes to its end again
        QList<ConversationInfo> rows = result->items;
        rows.removeIf([this](const ConversationInfo &info) {
            return m_changedDuringRefresh.contains(info.id);
        });
        m_conversations.upsert(rows);
        more.read += int(result->items.size());
        more.nextPageId = result->nextPageId;
        if (more.nextPageId.isEmpty()) {
            more.exhausted = true;
            break;
        }
    }
    m_loadingMore = false;
}

QCoro::Task<QSet<QUuid>> ConsoleController::findOnServer(ConversationSearch search)
{
    QPointer<ConsoleController> self(this);
    QSet<QUuid> inEvents;
    // One search per alternative, each its newest 100: what any of them finds is a row.
    for (const ConversationFilter &filter : std::as_const(search.alternatives)) {
        const bool looksInEvents = !filter.bodyContains.isEmpty();
        if (m_complete && !looksInEvents)
            continue; // the rows tell
        auto searching =
            m_connection->searchConversations(filter, ConversationSort::UpdatedAtDesc, {}, 100);
        const auto result = co_await std::move(searching);
        if (!self)
            co_return {};
        if (!result)
            continue;
        m_conversations.upsert(result->items);
        if (looksInEvents) {
            for (const ConversationInfo &info : result->items)
                inEvents.insert(info.id);
        }
    }
    co_return inEvents;
}

} // namespace AgentDeck
