#include "mainwindow.h"

#include "activityview.h"
#include "banner.h"
#include "consoleactions.h"
#include "consolekeys.h"
#include "lifecycle.h"
#include "newconversationdialog.h"

#include <QApplication>
#include <QDockWidget>
#include <QInputDialog>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTableView>

using namespace Qt::StringLiterals;

// MainWindow: what its actions do, and where they are (buttons, menu bar, context menu); the
// window's layout and its views are in mainwindow.cpp.

namespace AgentDeck {

using Action = ConsoleController::Action;
static constexpr const auto &AllActions = ConsoleController::AllActions;

void MainWindow::sendTypedMessage()
{
    const auto info = currentConversation();
    if (!info || m_message->text().isEmpty())
        return;
    // The text stays until the server took it: cleared at once, it was lost when sending
    // failed. Text typed meanwhile stays too.
    const QString text = m_message->text();
    m_controller->sendMessage(info->id, text).then([field = QPointer(m_message), text](bool sent) {
        if (sent && field && field->text() == text)
            field->clear();
    });
}

void MainWindow::triggerBulk(Action action, const QList<ConversationInfo> &chosen)
{
    QList<QUuid> ids;
    QList<ConversationInfo> can;
    for (const ConversationInfo &info : chosen) {
        if (!ConsoleController::availability(action, info).enabled)
            continue;
        ids.append(info.id);
        can.append(info);
    }
    if (ids.isEmpty())
        return;
    const int count = int(ids.size());
    if (!ConsoleActions::confirmed(this, ConsoleActions::questionFor(action, can, fontMetrics())))
        return;
    m_banner->hide();
    m_bulkRunning = true;
    updateActions();
    const QString name = ConsoleController::actionName(action);
    const int skipped = int(chosen.size()) - count;
    m_controller->performAll(action, ids)
        .then([self = QPointer(this), name, skipped](ConsoleController::BulkResult result) {
            if (!self)
                return;
            self->m_bulkRunning = false;
            self->m_progress->setRange(0, 0); // busy again, with no count
            self->m_progress->setTextVisible(false);
            self->m_progress->setVisible(self->m_controller->isBusy());
            self->updateActions();
            QString summary = tr("%1: %2 of %3 done").arg(name).arg(result.done).arg(result.asked);
            if (skipped > 0)
                summary += tr("; %n selected could not be changed so", nullptr, skipped);
            self->statusBar()->showMessage(summary, 10000);
            if (result.failures.isEmpty())
                return;
            // Why, for the first few; the rest are counted.
            QStringList why;
            for (const auto &failure : std::as_const(result.failures)
                                           .first(std::min<qsizetype>(3, result.failures.size())))
                why.append(
                    tr("“%1”: %2").arg(withControlsShown(failure.title).left(60), failure.why));
            if (result.failures.size() > 3)
                why.append(tr("%n more", nullptr, int(result.failures.size()) - 3));
            self->m_banner->say(tr("%1 failed for %2 of %3: %4")
                                    .arg(name)
                                    .arg(result.failures.size())
                                    .arg(result.asked)
                                    .arg(why.join(u"; "_s)));
        });
}

void MainWindow::trigger(Action action)
{
    if (const QList<ConversationInfo> chosen = selectedConversations();
        chosen.size() > 1 && ConsoleActions::isBulk(action)) {
        triggerBulk(action, chosen);
        return;
    }
    const auto info = currentConversation();
    if (!info)
        return;
    if (!ConsoleActions::confirmed(this,
                                   ConsoleActions::questionFor(action, {*info}, fontMetrics())))
        return;
    // A finished run has nothing left to do: run again, it only added a running and a finished
    // state. What it needs is the next message.
    if (action == Action::Run && info->executionStatus == ExecutionStatus::Finished) {
        askForNextMessage();
        return;
    }
    QString reason;
    if (action == Action::Reject) {
        const auto why = ConsoleActions::askRejectReason(this);
        if (!why)
            return;
        reason = *why;
    }
    m_banner->hide();
    m_controller->perform(action, info->id, reason);
}

void MainWindow::askForNextMessage()
{
    m_message->setFocus(Qt::OtherFocusReason);
    statusBar()->showMessage(tr("It has finished: type the next message below, and Enter runs it"),
                             8000);
}

void MainWindow::createConversation()
{
    NewConversationDialog dialog(this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_banner->hide();
    const CreateConversationRequest request = dialog.request();
    const QString text = request.initialMessage ? request.initialMessage->text : QString();
    m_controller->create(request).then(
        [window = QPointer(this), text](std::optional<ConsoleController::Creation> made) {
            if (window && made)
                window->showCreated(*made, text);
        });
}

void MainWindow::showCreated(const ConsoleController::Creation &made, const QString &text)
{
    // Whatever the filter: one that hides the new conversation is cleared. It was created and
    // neither shown nor selected, and nothing said so; the buttons still acted on the one
    // selected before.
    if (!selectConversation(made.id) && !m_filter->text().isEmpty()) {
        m_filter->clear();
        selectConversation(made.id);
    }
    const auto info = m_controller->conversations()->conversation(made.id);
    if (made.messageFailure.isEmpty()) {
        statusBar()->showMessage(
            tr("Created %1").arg(info ? withControlsShown(info->title) : toWireId(made.id)), 4000);
        return;
    }
    // Its first message did not start (every sandbox taken, say). Not stored, the text waits in
    // the message box, where Enter or Retry sends it; stored, Retry runs it.
    const bool stored = info && info->eventCount > 0;
    if (!stored)
        m_message->setText(text);
    // The server's sentence names the conversation and says what failed.
    m_banner->offer(made.messageFailure, tr("Retry"), [this, id = made.id, stored] {
        if (stored)
            m_controller->perform(Action::Run, id);
        else if (currentConversation() && currentConversation()->id == id)
            sendTypedMessage();
    });
}

void MainWindow::showContextMenu(const QPoint &position)
{
    QTableView *view = currentView();
    if (!view->indexAt(position).isValid())
        return;
    QMenu menu(this);
    for (Action action : AllActions) {
        QPushButton *button = m_buttons.value(action);
        QAction *item = menu.addAction(button->text(), this, [this, action] { trigger(action); });
        item->setEnabled(button->isEnabled());
        item->setToolTip(button->toolTip());
    }
    menu.addSeparator();
    for (QAction *edit : {m_renameAction, m_editTagsAction})
        menu.addAction(edit);
    menu.setToolTipsVisible(true);
    menu.exec(view->viewport()->mapToGlobal(position));
}

void MainWindow::editInPlace(int column)
{
    QTableView *view = currentView();
    const QModelIndex current = view->currentIndex();
    if (!current.isValid())
        return;
    const QModelIndex cell = current.siblingAtColumn(column);
    view->scrollTo(cell);
    view->setCurrentIndex(cell);
    view->edit(cell);
}

void MainWindow::buildMenus()
{
    // Every action, with its shortcut, where KDE and GNOME users look for them.
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&New conversation…"), this, &MainWindow::createConversation)
        ->setShortcut(QKeySequence::New);
    file->addSeparator();
    file->addAction(tr("&Quit"), qApp, &QCoreApplication::quit)->setShortcut(QKeySequence::Quit);

    QMenu *conversation = menuBar()->addMenu(tr("&Conversation"));
    conversation->setToolTipsVisible(true);
    for (Action action : AllActions) {
        QAction *item = conversation->addAction(ConsoleController::actionName(action), this,
                                                [this, action] { trigger(action); });
        item->setShortcut(ConsoleActions::shortcutOf(action));
        // The list's Delete, not the filter's or the message box's: those take their own keys.
        item->setShortcutContext(Qt::WindowShortcut);
        m_menuActions.insert(action, item);
    }
    conversation->addSeparator();
    m_renameAction = conversation->addAction(
        tr("Re&name"), this, [this] { editInPlace(ConversationListModel::TitleColumn); });
    m_renameAction->setShortcut(QKeySequence(Qt::Key_F2));
    m_renameAction->setShortcutContext(Qt::WindowShortcut);
    m_editTagsAction = conversation->addAction(
        tr("Edit &tags"), this, [this] { editInPlace(ConversationListModel::TagsColumn); });
    m_editTagsAction->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F2));
    m_editTagsAction->setShortcutContext(Qt::WindowShortcut);

    QMenu *view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("&Find…"), this,
                    [this] {
                        m_filter->setFocus(Qt::ShortcutFocusReason);
                        m_filter->selectAll();
                    })
        ->setShortcut(QKeySequence::Find);
    view->addAction(tr("&Refresh"), this,
                    [this] {
                        m_controller->refresh();
                        if (m_activityDock->isVisible())
                            m_activity->refresh();
                    })
        ->setShortcut(QKeySequence(Qt::Key_F5));
    view->addSeparator();
    view->addAction(tr("Re&plicas…"), this, &MainWindow::showReplicas);
    view->addAction(m_activityDock->toggleViewAction());
}

void MainWindow::keyNeeded(const QString &why)
{
    m_banner->offer(why, tr("Enter key…"), [this] { askForKey(); });
    if (std::exchange(m_keyStoreAsked, true))
        return;
    ConsoleKeys::read(m_controller->connection()->baseUrl())
        .then([self = QPointer(this)](std::optional<QString> kept) {
            // Taken, the list comes back and the banner goes.
            if (self && kept && !kept->isEmpty() &&
                *kept != self->m_controller->connection()->apiKey())
                self->m_controller->useApiKey(*kept);
        });
}

void MainWindow::askForKey()
{
    const QUrl server = m_controller->connection()->baseUrl();
    bool given = false;
    const QString key = QInputDialog::getText(this, tr("Session API key"),
                                              tr("The server at %1 asks for its session API key:")
                                                  .arg(server.toString(QUrl::RemoveUserInfo)),
                                              QLineEdit::Password, {}, &given)
                            .trimmed();
    if (!given || key.isEmpty()) {
        m_banner->offer(m_unreachableText, tr("Enter key…"), [this] { askForKey(); });
        return;
    }
    if (!ServerConnection::isSendableApiKey(key)) {
        m_banner->offer(tr("A key is printable ASCII without spaces"), tr("Enter key…"),
                        [this] { askForKey(); });
        return;
    }
    m_controller->useApiKey(key).then([self = QPointer(this), server, key](bool taken) {
        if (!self)
            return;
        if (!taken) {
            if (self->m_controller->needsKey())
                self->m_banner->offer(tr("The key was refused: %1").arg(self->m_unreachableText),
                                      tr("Enter key…"), [self] { self->askForKey(); });
            return;
        }
        ConsoleKeys::write(server, key).then([self](const QString &problem) {
            if (!self)
                return;
            self->statusBar()->showMessage(
                problem.isEmpty() ? tr("The key is kept in the desktop's secret store")
                                  : tr("The key serves this session only (%1)").arg(problem),
                15000);
        });
    });
}

} // namespace AgentDeck
