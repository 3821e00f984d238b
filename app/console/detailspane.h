#pragma once

#include "runtimedetails.h"
#include "wiretypes.h"

#include <QCoroTask>
#include <QHash>
#include <QWidget>

#include <optional>

class QFrame;
class QLabel;
class QToolButton;

namespace AgentDeck {

class ActivityView;
class ConsoleController;

// What an operator knows of the selected conversation beyond its row, above its timeline: its
// title and id, then (folded away with one click) its runtime (status, the sandbox's process,
// started, idle since, workspace), the sandbox policy in force and what of it this machine
// could not enforce, the agent (kind, model, endpoint; never a key), the stats, and who holds
// its lease until when, and its activity: who changed it, when and why. What only the server's
// runtime route tells is read again at each refresh of the list.
class DetailsPane : public QWidget
{
    Q_OBJECT
public:
    enum class Row
    {
        Runtime,
        Process, // the sandbox host's
        Workspace,
        Sandbox,
        Agent,
        Stats,
        Owner
    };
    Q_ENUM(Row)

    explicit DetailsPane(ConsoleController *controller, QWidget *parent = nullptr);

    // Shows `info`, or that nothing is selected; asks the server for its runtime's details
    // when the conversation is another than the one shown.
    void showConversation(const std::optional<ConversationInfo> &info);

    // For tests and the screenshot.
    QLabel *heading() const { return m_heading; }
    QLabel *headingId() const { return m_headingId; }
    QLabel *value(Row row) const { return m_values.value(row); }
    // What `row` says, whole (the label may show it shortened).
    QString text(Row row) const;
    QToolButton *foldButton() const { return m_fold; }
    // The conversation's own audit records (who changed it, when, why), folded with one click.
    ActivityView *activity() const { return m_activity; }
    QToolButton *activityFold() const { return m_activityFold; }
    // Whether the server's details of the shown conversation were read.
    bool hasRuntimeDetails() const { return m_details.has_value(); }

private:
    QCoro::Task<> readDetails(QUuid id);
    void fill();

    ConsoleController *m_controller;
    QLabel *m_heading;
    QLabel *m_headingId;
    QToolButton *m_fold;
    QFrame *m_rows;
    QToolButton *m_activityFold;
    ActivityView *m_activity;
    QHash<Row, QLabel *> m_values;
    std::optional<ConversationInfo> m_info;
    std::optional<RuntimeDetails> m_details; // of m_info, once read
    QUuid m_readingFor;                      // the conversation whose details a read waits for
};

} // namespace AgentDeck
