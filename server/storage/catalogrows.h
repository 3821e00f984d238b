#pragma once

#include "conversationfilter.h"
#include "database.h"
#include "wiretypes.h"

#include <QSqlQuery>
#include <QStringList>
#include <QVariantList>

#include <optional>
#include <utility>

// The catalog's codecs, apart from its queries (ConversationStore): what a conversation row
// reads as, what a filter's WHERE clause is, and how a page's cursor is written.
namespace AgentDeck {
struct EventFilter;
}

namespace AgentDeck::CatalogRows {

// The columns conversationFromRow() reads, in its order.
extern const QString ConversationColumns;
// Several replicas: the owner of a live lease, whose replica holds the runtime (column 25).
extern const QString LiveLeaseOwnerColumn;
// A conversation being deleted is gone to every read (see ConversationStore::beginRemoval()).
extern const QString NotBeingRemoved;

QDateTime fromMs(qint64 ms);
std::optional<QDateTime> optionalTime(const QVariant &value);
QVariant nullableMs(const std::optional<QDateTime> &time);
QString tagsToJson(const QMap<QString, QString> &tags);

// `instance`: this process's lease owner name when several replicas share the catalog; the
// row then has LiveLeaseOwnerColumn at 25.
ConversationInfo conversationFromRow(const QSqlQuery &q, const QString &instance);
ConversationInfo conversationFromRow(const Database::Statement &statement, const QString &instance);

// A WHERE clause with its bound values, built up condition by condition.
struct Where
{
    QStringList conditions;
    QVariantList values;

    void add(const QString &condition, QVariantList conditionValues = {})
    {
        conditions.append(condition);
        values.append(conditionValues);
    }
    QString sql() const
    {
        return conditions.isEmpty()
                   ? QString()
                   : QLatin1StringView(" WHERE ") + conditions.join(QLatin1StringView(" AND "));
    }
    void bindTo(QSqlQuery &query) const
    {
        for (const QVariant &value : values)
            query.addBindValue(value);
    }
    // From placeholder `first` on.
    void bindTo(Database::Statement &statement, int first = 0) const;
};

Where conversationWhere(const ConversationFilter &filter, bool postgres);
Where eventWhere(const QUuid &id, const EventFilter &filter, bool postgres);

// A page's cursor: the sort key and id of its last row.
QString encodeCursor(qint64 key, const QString &id);
std::pair<qint64, QString> decodeCursor(const QString &pageId);

} // namespace AgentDeck::CatalogRows
