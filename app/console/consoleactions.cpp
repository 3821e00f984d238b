#include "consoleactions.h"

#include <QCoreApplication>
#include <QFontMetrics>
#include <QInputDialog>
#include <QMessageBox>

using namespace Qt::StringLiterals;

namespace AgentDeck::ConsoleActions {

namespace {
QString tr(const char *text)
{
    return QCoreApplication::translate("ConsoleActions", text);
}
} // namespace

QKeySequence shortcutOf(Action action)
{
    switch (action) {
    case Action::Recover:
        return QKeySequence(Qt::CTRL | Qt::Key_R);
    case Action::Run:
        return QKeySequence(Qt::CTRL | Qt::Key_Return);
    case Action::Pause:
        return QKeySequence(Qt::CTRL | Qt::Key_P);
    case Action::Interrupt:
        return QKeySequence(Qt::CTRL | Qt::Key_I);
    case Action::Archive:
        return QKeySequence(Qt::CTRL | Qt::Key_E);
    case Action::Delete:
        return QKeySequence(QKeySequence::Delete);
    default:
        return {};
    }
}

bool isBulk(Action action)
{
    switch (action) {
    case Action::Archive:
    case Action::Unarchive:
    case Action::Delete:
    case Action::Recover:
    case Action::Pause:
    case Action::Interrupt:
        return true;
    default:
        return false;
    }
}

std::optional<Question> questionFor(Action action, const QList<ConversationInfo> &chosen,
                                    const QFontMetrics &metrics)
{
    if (chosen.isEmpty())
        return std::nullopt;
    const auto runningNow = [](const ConversationInfo &info) {
        return info.executionStatus == ExecutionStatus::Running && !Lifecycle::isStale(info);
    };
    if (chosen.size() > 1) {
        const auto running = std::count_if(chosen.cbegin(), chosen.cend(), runningNow);
        if (action == Action::Delete)
            return Question{tr("Delete conversations"),
                            tr("Delete %1 conversations permanently? Their histories and "
                               "server-owned workspaces are removed.")
                                .arg(chosen.size())};
        if (action == Action::Archive && running > 0)
            return Question{tr("Archive conversations"),
                            tr("Archive %1 conversations? %2 of them running: the commands in "
                               "flight are stopped.")
                                .arg(chosen.size())
                                .arg(running)};
        return std::nullopt;
    }
    const ConversationInfo &info = chosen.first();
    const QString named =
        tr("“%1” (%2)")
            .arg(metrics.elidedText(withControlsShown(info.title), Qt::ElideMiddle, 480),
                 toWireId(info.id));
    switch (action) {
    case Action::Delete:
        return Question{
            tr("Delete conversation"),
            tr("Delete %1 permanently? Its history and server-owned workspace are removed.")
                .arg(named)};
    case Action::Archive:
        if (!runningNow(info))
            return std::nullopt;
        return Question{
            tr("Archive conversation"),
            tr("Archive %1? It is running: the command in flight is stopped.").arg(named)};
    case Action::Reprovision:
        return Question{tr("Reprovision runtime"),
                        tr("Replace the sandbox of %1 with a fresh one? Its workspace stays; "
                           "what its commands left elsewhere in the sandbox (/tmp, processes) is "
                           "gone.")
                            .arg(named)};
    case Action::StartFresh:
        return Question{tr("Start with an empty workspace"),
                        info.workspaceOwnedByServer
                            ? tr("Start the expired runtime of %1 again with an empty workspace? "
                                 "Its history stays, and says so; the files its commands made "
                                 "are gone.")
                                  .arg(named)
                            : tr("Start the expired runtime of %1 again? It uses the workspace "
                                 "it was given, %2, as it is now; its history stays, and says so.")
                                  .arg(named, info.workingDir)};
    default:
        return std::nullopt;
    }
}

bool confirmed(QWidget *parent, const std::optional<Question> &question)
{
    if (!question)
        return true;
    QMessageBox box(QMessageBox::Question, question->title, question->text,
                    QMessageBox::Yes | QMessageBox::No, parent);
    box.setTextFormat(Qt::PlainText);
    box.setDefaultButton(QMessageBox::No);
    return box.exec() == QMessageBox::Yes;
}

std::optional<QString> askRejectReason(QWidget *parent)
{
    QInputDialog dialog(parent);
    dialog.setWindowTitle(tr("Reject the action"));
    dialog.setLabelText(tr("Why? The agent is told (optional):"));
    dialog.setOkButtonText(tr("Reject"));
    if (dialog.exec() != QDialog::Accepted)
        return std::nullopt;
    return dialog.textValue().trimmed();
}

QString whatItDoes(Action action, const ConversationInfo &info)
{
    const bool interrupted = Lifecycle::hasInterruptedCommand(info);
    switch (action) {
    case Action::Run:
        if (interrupted)
            return tr("Runs the interrupted command again: $ %1").arg(info.outcome->retryCommand);
        if (info.outcome && info.outcome->needsAttention() &&
            info.outcome->kind == RunOutcome::Kind::Interrupted)
            return tr("Continues the conversation from where it stopped");
        return {};
    case Action::RunAgain:
        return interrupted ? tr("Runs $ %1 again").arg(info.outcome->retryCommand) : QString();
    case Action::Dismiss:
        return interrupted ? tr("Leaves the interrupted command as it is and takes the "
                                "conversation off the list of what needs attention")
                           : tr("Takes the conversation off the list of what needs attention");
    default:
        return {};
    }
}

Lifecycle::Availability availability(Action action, const QList<Row> &chosen)
{
    if (chosen.isEmpty())
        return {false, tr("Select a conversation first")};
    if (chosen.size() == 1) {
        if (!chosen.first().reachable)
            return {false, tr("The server does not answer; the row is what it last said")};
        return ConsoleController::availability(action, chosen.first().info);
    }
    if (!isBulk(action))
        return {false, tr("%1 is done to one conversation at a time: select one")
                           .arg(ConsoleController::actionName(action))};
    const auto can = std::count_if(chosen.cbegin(), chosen.cend(), [action](const Row &row) {
        return row.reachable && ConsoleController::availability(action, row.info).enabled;
    });
    if (can == 0)
        return {false, tr("None of the %1 selected can be changed so").arg(chosen.size())};
    return {true, tr("%1 of the %2 selected").arg(can).arg(chosen.size())};
}

} // namespace AgentDeck::ConsoleActions
