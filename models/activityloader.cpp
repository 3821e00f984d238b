#include "activityloader.h"

#include "serverconnection.h"

#include <QPointer>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ActivityLoader::ActivityLoader(ActivityModel *model, QObject *parent)
    : QObject(parent)
    , m_model(model)
{}

void ActivityLoader::setConnection(int source, ServerConnection *connection)
{
    m_connections.insert(source, connection);
}

void ActivityLoader::setQuery(const AuditQuery &query)
{
    if (query == m_model->query())
        return;
    ++m_generation;
    m_model->setQuery(query);
}

QCoro::Task<> ActivityLoader::refresh()
{
    // One refresh of a query at a time: a timer's while one waits for a slow server would pile
    // up. One of a new query starts at once.
    const quint64 generation = m_generation;
    if (m_refreshing == generation)
        co_return;
    m_refreshing = generation;
    QPointer self(this);
    co_await readPages(m_model->liveSources(), /*newest=*/true);
    if (self && m_refreshing == generation)
        m_refreshing.reset();
}

QCoro::Task<> ActivityLoader::readMore()
{
    const quint64 generation = m_generation;
    if (m_readingMore == generation)
        co_return;
    m_readingMore = generation;
    QPointer self(this);
    co_await readPages(m_model->sourcesToReadMore(), /*newest=*/false);
    if (self && m_readingMore == generation)
        m_readingMore.reset();
}

QCoro::Task<> ActivityLoader::readPages(QList<int> sources, bool newest)
{
    QPointer self(this);
    const quint64 generation = m_generation;
    const AuditQuery query = m_model->query();
    struct Asked
    {
        int source;
        QCoro::Task<std::optional<AuditPage>> page;
        std::unique_ptr<ApiReply> failure;
    };
    std::vector<Asked> asked;
    ++m_reading;
    // All asked at once (the tasks are eager); a slow server delays only its own rows.
    for (const int source : std::as_const(sources)) {
        ServerConnection *connection = m_connections.value(source);
        if (!connection)
            continue;
        auto failure = std::make_unique<ApiReply>();
        auto page = connection->searchAudit(query, newest ? QString() : m_model->nextPageId(source),
                                            failure.get());
        asked.push_back({source, std::move(page), std::move(failure)});
    }
    for (Asked &one : asked) {
        const std::optional<AuditPage> page = co_await std::move(one.page);
        if (!self)
            co_return;
        if (generation != m_generation)
            continue;
        if (!page) {
            m_problems.insert(one.source, one.failure->errorSentence());
            continue;
        }
        m_problems.remove(one.source);
        // A read of the next page that crossed a refresh starting the source over.
        if (!newest && !m_model->isLoaded(one.source))
            continue;
        m_model->addPage(one.source, *page, newest);
    }
    --m_reading;
    m_model->titlesChanged();
    Q_EMIT read();
}

} // namespace AgentDeck
