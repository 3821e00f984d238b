#pragma once

#include "consolecontroller.h"

#include <QKeySequence>

#include <optional>

class QFontMetrics;
class QWidget;

namespace AgentDeck::ConsoleActions {

// What a server's window and All servers share of the one-click actions: their shortcuts,
// which of them apply to several rows at once, what is asked before one is done, and when
// each is offered. Each window keeps its own buttons and menus.

using Action = ConsoleController::Action;

// The key of `action` in the Conversation menu (none for most).
QKeySequence shortcutOf(Action action);

// The actions that apply to every selected row at once.
bool isBulk(Action action);

// What to ask before `action` is done to `chosen` (the rows it can be done to), Yes or No.
struct Question
{
    QString title;
    QString text;
};
// Nothing when it is done without asking. A single row's question names it whole: a long title
// is shortened in the middle (to `metrics`' 480 px), where two titles differ most often, and its
// id follows.
std::optional<Question> questionFor(Action action, const QList<ConversationInfo> &chosen,
                                    const QFontMetrics &metrics);

// Asks `question` (Yes or No, No by default, in plain text: a title with markup could make it
// name another conversation); true when it was answered Yes, or there is nothing to ask.
bool confirmed(QWidget *parent, const std::optional<Question> &question);

// Asks why an action is rejected (the agent is told, as `ctl reject --reason` tells it): the
// reason (empty: the server's default), or nothing when the operator cancelled.
std::optional<QString> askRejectReason(QWidget *parent);

// What `action` will do to `info`, for its button's tooltip where that is not plain from its
// name (Run on an interrupted command runs it again); empty otherwise. The words of the
// run_interrupted event the server writes.
QString whatItDoes(Action action, const ConversationInfo &info);

// Whether `action` can be done to the rows selected (`chosen`, each with whether its server
// answers), and if not, why; for several rows, how many of them it applies to.
struct Row
{
    ConversationInfo info;
    bool reachable = true;
};
Lifecycle::Availability availability(Action action, const QList<Row> &chosen);

} // namespace AgentDeck::ConsoleActions
