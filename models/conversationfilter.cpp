#include "conversationfilter.h"

#include "lifecycle.h"

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

bool isIdPrefix(QStringView text)
{
    if (text.isEmpty() || text.size() > 36)
        return false;
    return std::all_of(text.begin(), text.end(), [](QChar c) {
        return c == u'-' || (c >= u'0' && c <= u'9') || (c >= u'a' && c <= u'f') ||
               (c >= u'A' && c <= u'F');
    });
}

bool ConversationFilter::matches(const ConversationInfo &info) const
{
    if (archive == ArchiveFilter::Active && info.isArchived())
        return false;
    if (archive == ArchiveFilter::Archived && !info.isArchived())
        return false;
    if (status && info.executionStatus != *status)
        return false;
    if (!text.isEmpty() && !info.title.contains(text, Qt::CaseInsensitive))
        return false;
    if (!idPrefix.isEmpty() && !toWireId(info.id).startsWith(idPrefix))
        return false;
    for (const TagFilter &tag : tags) {
        const auto it = info.tags.constFind(tag.key);
        if (it == info.tags.cend() || (tag.value && *it != *tag.value))
            return false;
    }
    return true;
}

ConversationSearch ConversationSearch::parse(const QString &text,
                                             std::optional<ExecutionStatus> status)
{
    ConversationSearch search;
    const QString typed = text.simplified();
    ConversationFilter base;
    base.archive = ArchiveFilter::All;
    base.status = status;
    if (typed.isEmpty()) {
        if (status)
            search.alternatives.append(base);
        return search;
    }
    QStringList words;
    for (const QString &word : typed.split(u' ')) {
        const qsizetype colon = word.indexOf(u':');
        const qsizetype equals = word.indexOf(u'=');
        const qsizetype at = colon < 0 ? equals : equals < 0 ? colon : std::min(colon, equals);
        // "name:value"; "fix:" and ":x" are words of a title.
        if (at > 0 && at < word.size() - 1)
            base.tags.append(TagFilter{word.left(at), word.mid(at + 1)});
        else
            words.append(word);
    }
    const QString rest = words.join(u' ');
    if (rest.isEmpty()) {
        search.alternatives.append(base);
    } else {
        ConversationFilter inTitle = base;
        inTitle.text = rest;
        search.alternatives.append(inTitle);
        if (rest.size() >= ConversationSearch::MinEventTextLength) {
            ConversationFilter said = base;
            said.bodyContains = rest;
            search.alternatives.append(said);
        }
        if (words.size() == 1) {
            ConversationFilter tagged = base;
            tagged.tags.append(TagFilter{rest, std::nullopt});
            search.alternatives.append(tagged);
        }
        if (rest.size() >= 4 && isIdPrefix(rest)) {
            ConversationFilter byId = base;
            byId.idPrefix = rest.toLower();
            search.alternatives.append(byId);
        }
    }
    if (!base.tags.isEmpty()) {
        ConversationFilter asTyped = base;
        asTyped.tags.clear();
        asTyped.text = typed;
        search.alternatives.append(asTyped);
    }
    return search;
}

bool ConversationSearch::hasFailed(const ConversationInfo &info)
{
    if (info.executionStatus == ExecutionStatus::Error)
        return true;
    // A run going on has no outcome yet: the one there is of the run before.
    if (info.executionStatus == ExecutionStatus::Running || !info.outcome)
        return false;
    switch (info.outcome->kind) {
    case RunOutcome::Kind::Failed:
    case RunOutcome::Kind::TimedOut:
    case RunOutcome::Kind::Limit:
    case RunOutcome::Kind::Error:
        return true;
    case RunOutcome::Kind::Succeeded:
    case RunOutcome::Kind::Interrupted:
        return false;
    }
    return false;
}

bool ConversationSearch::matches(const ConversationInfo &info, ArchiveFilter partition) const
{
    ConversationFilter inPartition;
    inPartition.archive = partition;
    if (!inPartition.matches(info))
        return false;
    if ((concern == Concern::NeedsAttention && !Lifecycle::needsAttention(info)) ||
        (concern == Concern::Failed && !hasFailed(info)))
        return false;
    return alternatives.isEmpty() ||
           std::any_of(
               alternatives.cbegin(), alternatives.cend(), [&](const ConversationFilter &filter) {
                   return filter.matches(info) &&
                          (filter.bodyContains.isEmpty() || foundInEvents.contains(info.id));
               });
}

std::optional<ConversationFilter> ConversationFilter::fromQuery(const QUrlQuery &query,
                                                                QString *error)
{
    ConversationFilter filter;
    if (query.hasQueryItem(u"archived"_s)) {
        const auto archived = parseWireBool(query.queryItemValue(u"archived"_s));
        if (!archived) {
            *error = u"archived must be true or false"_s;
            return std::nullopt;
        }
        filter.archive = *archived ? ArchiveFilter::Archived : ArchiveFilter::Active;
    }
    // archive_filter is the more precise of the two and wins when both are given.
    if (query.hasQueryItem(u"archive_filter"_s)) {
        const QString value = query.queryItemValue(u"archive_filter"_s).toUpper();
        if (value == u"ACTIVE"_s)
            filter.archive = ArchiveFilter::Active;
        else if (value == u"ARCHIVED"_s)
            filter.archive = ArchiveFilter::Archived;
        else if (value == u"ALL"_s)
            filter.archive = ArchiveFilter::All;
        else {
            *error = u"archive_filter must be ACTIVE, ARCHIVED or ALL"_s;
            return std::nullopt;
        }
    }
    if (query.hasQueryItem(u"status"_s)) {
        filter.status = executionStatusFromString(query.queryItemValue(u"status"_s));
        if (!filter.status) {
            *error = u"status must be one of idle, running, paused, waiting_for_confirmation, "
                     "finished, error, stuck"_s;
            return std::nullopt;
        }
    }
    filter.text = query.queryItemValue(u"q"_s, QUrl::FullyDecoded);
    *error = searchTextProblem(u"q"_s, filter.text);
    if (!error->isEmpty())
        return std::nullopt;
    filter.bodyContains = query.queryItemValue(u"body"_s, QUrl::FullyDecoded);
    *error = searchTextProblem(u"body"_s, filter.bodyContains);
    if (!error->isEmpty())
        return std::nullopt;
    filter.idPrefix = query.queryItemValue(u"id_prefix"_s).toLower();
    if (!isIdPrefix(filter.idPrefix) && !filter.idPrefix.isEmpty()) {
        *error = u"id_prefix must be the start of an id: at most 36 hex digits and dashes"_s;
        return std::nullopt;
    }
    const QStringList tags = query.allQueryItemValues(u"tag"_s, QUrl::FullyDecoded);
    // No conversation has more tags, and a thousand made a statement SQLite refused (503).
    if (tags.size() > ConversationLabels::MaxTags) {
        *error = u"tag is given at most %1 times"_s.arg(ConversationLabels::MaxTags);
        return std::nullopt;
    }
    for (const QString &tag : tags) {
        // No tag holds one (see ConversationLabels), and PostgreSQL takes none in a parameter.
        if (tag.contains(QChar::Null)) {
            *error = u"tag cannot contain a NUL character"_s;
            return std::nullopt;
        }
        const qsizetype colon = tag.indexOf(u':');
        TagFilter tagFilter;
        tagFilter.key = colon < 0 ? tag : tag.left(colon);
        if (colon >= 0)
            tagFilter.value = tag.mid(colon + 1);
        if (tagFilter.key.isEmpty()) {
            *error = u"tag must be \"key\" or \"key:value\""_s;
            return std::nullopt;
        }
        filter.tags.append(tagFilter);
    }
    return filter;
}

void ConversationFilter::writeTo(QUrlQuery &query) const
{
    switch (archive) {
    case ArchiveFilter::Active:
        break;
    case ArchiveFilter::Archived:
        query.addQueryItem(u"archive_filter"_s, u"ARCHIVED"_s);
        break;
    case ArchiveFilter::All:
        query.addQueryItem(u"archive_filter"_s, u"ALL"_s);
        break;
    }
    if (status)
        query.addQueryItem(u"status"_s, toString(*status));
    if (!text.isEmpty())
        query.addQueryItem(u"q"_s, QString::fromUtf8(QUrl::toPercentEncoding(text)));
    if (!idPrefix.isEmpty())
        query.addQueryItem(u"id_prefix"_s, idPrefix);
    if (!bodyContains.isEmpty())
        query.addQueryItem(u"body"_s, QString::fromUtf8(QUrl::toPercentEncoding(bodyContains)));
    for (const TagFilter &tag : tags) {
        const QString item = tag.value ? tag.key + u':' + *tag.value : tag.key;
        query.addQueryItem(u"tag"_s, QString::fromUtf8(QUrl::toPercentEncoding(item)));
    }
}

QString searchTextProblem(const QString &name, const QString &text)
{
    if (codePoints(text) > MaxSearchTextLength)
        return u"%1 must be at most %2 characters"_s.arg(name).arg(MaxSearchTextLength);
    if (text.contains(QChar::Null))
        return u"%1 cannot contain a NUL character"_s.arg(name);
    return {};
}

QString toString(ConversationSort sort)
{
    switch (sort) {
    case ConversationSort::CreatedAt:
        return u"CREATED_AT"_s;
    case ConversationSort::CreatedAtDesc:
        return u"CREATED_AT_DESC"_s;
    case ConversationSort::UpdatedAt:
        return u"UPDATED_AT"_s;
    case ConversationSort::UpdatedAtDesc:
        return u"UPDATED_AT_DESC"_s;
    }
    return {};
}

std::optional<ConversationSort> conversationSortFromString(QStringView text)
{
    for (auto sort : {ConversationSort::CreatedAt, ConversationSort::CreatedAtDesc,
                      ConversationSort::UpdatedAt, ConversationSort::UpdatedAtDesc}) {
        if (text.compare(toString(sort), Qt::CaseInsensitive) == 0)
            return sort;
    }
    return std::nullopt;
}

} // namespace AgentDeck
