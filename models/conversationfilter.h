#pragma once

#include "wiretypes.h"

#include <QList>
#include <QSet>
#include <QUrlQuery>
#include <QUuid>

namespace AgentDeck {

enum class ArchiveFilter
{
    Active,
    Archived,
    All
};
enum class ConversationSort
{
    CreatedAt,
    CreatedAtDesc,
    UpdatedAt,
    UpdatedAtDesc
};

struct TagFilter
{
    QString key;
    std::optional<QString> value; // no value: the tag only has to be present
};

// The one definition of which conversations a search shows. The server translates it into SQL;
// the console's proxies call matches(). Both parse and write the same query parameters.
struct ConversationFilter
{
    ArchiveFilter archive = ArchiveFilter::Active;
    std::optional<ExecutionStatus> status;
    QString text;     // case-insensitive "title contains"
    QString idPrefix; // the dashed id starts with it: lowercase hex digits and dashes
    QList<TagFilter> tags;
    // One of its events has it in its text, as the events' `body` filter finds it.
    QString bodyContains;

    // The part of the filter a row holds: `bodyContains` needs the events, and is not looked at.
    bool matches(const ConversationInfo &info) const;

    // Reads `archived`, `archive_filter`, `status`, `q`, `id_prefix`, `body` and `tag`
    // (repeatable, "key" or "key:value"). On bad input returns nullopt and names the parameter
    // in *error.
    static std::optional<ConversationFilter> fromQuery(const QUrlQuery &query, QString *error);
    void writeTo(QUrlQuery &query) const;
};

// What the console's filter box finds, as alternatives the server can search one by one: a row
// matches when it matches one of them. The text is read as words; `name:value` or `name=value`
// is a tag (every one given must be there), and the other words, together, are found in a
// title, as the start of an id (4 characters or more: hex digits and dashes) or, one word, as a
// tag's name. The whole text is also found in titles as typed, so "fix: login" finds that title.
// `status` (the drop-down) holds for every alternative. Words of MinEventTextLength characters
// or more are also looked for in what was said in a conversation (its events' text), which
// only the server can tell: its answer fills `foundInEvents`.
struct ConversationSearch
{
    QList<ConversationFilter> alternatives; // none: everything
    // The rows the server found for the alternatives that look in events (`bodyContains`).
    QSet<QUuid> foundInEvents;
    // What an operator looks for first, beside the alternatives: the rows that need attention
    // (Lifecycle::needsAttention), or those whose last run failed (a non-zero exit, a timeout,
    // a limit, an error; acknowledged or not). Asked of the rows the console holds: the server
    // is asked the alternatives.
    enum class Concern
    {
        Any,
        NeedsAttention,
        Failed
    };
    Concern concern = Concern::Any;
    static constexpr qsizetype MinEventTextLength = 3;

    static ConversationSearch parse(const QString &text,
                                    std::optional<ExecutionStatus> status = std::nullopt);
    bool isEmpty() const { return alternatives.isEmpty(); }
    // In `partition` (the tab's), whatever the alternatives say of archives.
    bool matches(const ConversationInfo &info, ArchiveFilter partition) const;
    static bool hasFailed(const ConversationInfo &info);
};

// A "contains" search text (`q`, and the events' `body`): at most this many characters (code
// points, as a title's limit counts them), so that the pattern stays within what SQLite's LIKE
// takes (50,000 bytes, escapes included: at most 4 a character), and no NUL, where LIKE would
// stop reading. Returns why `text` is refused, or nothing.
inline constexpr qsizetype MaxSearchTextLength = 10'000;
QString searchTextProblem(const QString &name, const QString &text);

// Whether `text` could begin a dashed id (hex digits, either case, and dashes; at most 36).
bool isIdPrefix(QStringView text);

QString toString(ConversationSort sort);
std::optional<ConversationSort> conversationSortFromString(QStringView text);

} // namespace AgentDeck
