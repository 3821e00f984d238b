#pragma once

#include "wiretypes.h"

#include <QJsonDocument>
#include <QJsonValue>
#include <QList>
#include <QStringList>

namespace AgentDeck::CtlFormat {

// Human output of `agentdeck ctl`. The status words are the console's badge words
// (Lifecycle::executionLabel / runtimeLabel), so an operator reads the same thing in both.

// Columns padded to their widest cell, two spaces apart; the last column is not padded.
QString alignedTable(const QStringList &header, const QList<QStringList> &rows);

// ID, TITLE, EXECUTION, RUNTIME, ARCHIVED, EVENTS, UPDATED.
QString conversationTable(const QList<ConversationInfo> &conversations);
// One "field: value" line per fact, for `show`.
QString conversationDetails(const ConversationInfo &info);

// The execution badge words with the run's outcome ("finished · exit 2"), and "(stale)" when
// no live executor backs a `running`.
QString executionWord(const ConversationInfo &info);

// `events`: a header, then one line per event. Lines have fixed-width leading columns so that a
// followed stream stays aligned without knowing what comes next.
QString eventHeader();
QString eventLine(const Event &event);
// What the running command printed next (a transient CommandOutput frame), each line indented
// under the event columns after a bar: "   │ compiling foo.c".
QString liveOutputLines(const QString &piece);
// What an event says, on one line (newlines shown as \n).
QString eventSummary(const Event &event);

// 2025-01-02T03:04:05Z: the wire time without milliseconds.
QString shortTime(const QDateTime &time);

// `text` with the control characters a terminal would act on (escape sequences, bells, a
// carriage return that overwrites the line) shown as \xNN instead; newlines and tabs stay.
// Everything ctl prints goes through it: titles and outputs come from agents and users.
QString terminalSafe(const QString &text);

// `value` as JSON text that terminalSafe() leaves alone: the characters it would show as \xNN
// are \uNNNN escapes, as JSON allows in strings.
QString jsonText(const QJsonValue &value, QJsonDocument::JsonFormat format);

} // namespace AgentDeck::CtlFormat
