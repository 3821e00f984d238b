#include "consoletray.h"

#include "consolecontroller.h"
#include "lifecycle.h"

#include <QApplication>
#include <QIcon>
#include <QMenu>
#include <QSystemTrayIcon>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Conversations needing attention the menu names: a menu taller than the screen helps nobody,
// and the list has the rest.
constexpr int MaxMenuConversations = 12;
} // namespace

ConsoleTray::ConsoleTray(ConsoleController *controller, const QString &serverLabel, QWidget *window)
    : QObject(window)
    , m_controller(controller)
    , m_menu(new QMenu(window))
{
    connect(m_menu, &QMenu::aboutToShow, this, &ConsoleTray::fillMenu);
    fillMenu();
    connect(controller->conversations(), &ConversationListModel::attentionNeeded, this,
            &ConsoleTray::notifyAttention);
    if (!QSystemTrayIcon::isSystemTrayAvailable())
        return;
    m_icon = new QSystemTrayIcon(appIcon(), this);
    m_icon->setToolTip(tr("AgentDeck — %1").arg(serverLabel));
    m_icon->setContextMenu(m_menu);
    connect(m_icon, &QSystemTrayIcon::messageClicked, this, &ConsoleTray::openNotified);
    connect(m_icon, &QSystemTrayIcon::activated, this,
            [this](QSystemTrayIcon::ActivationReason reason) {
                if (reason == QSystemTrayIcon::Trigger)
                    Q_EMIT showRequested();
            });
    m_icon->show();
}

QIcon ConsoleTray::appIcon()
{
    QIcon icon;
    for (const int size : {48, 128, 256})
        icon.addFile(u":/agentdeck/icons/agentdeck-%1.png"_s.arg(size), QSize(size, size));
    return icon;
}

void ConsoleTray::fillMenu()
{
    m_menu->clear();
    m_menu->addAction(tr("Show AgentDeck"), this, &ConsoleTray::showRequested);
    m_menu->addSeparator();
    const ConversationListModel *rows = m_controller->conversations();
    int needing = 0;
    for (int row = 0; row < rows->rowCount(); ++row) {
        const ConversationInfo &info = rows->at(row);
        if (!Lifecycle::needsAttention(info) || ++needing > MaxMenuConversations)
            continue;
        const QString title = info.title.isEmpty() ? toWireId(info.id) : info.title;
        m_menu->addAction(tr("Needs attention: %1").arg(withControlsShown(title)), this,
                          [this, id = info.id] { Q_EMIT conversationRequested(id); });
    }
    if (needing == 0)
        m_menu->addAction(tr("Nothing needs attention"))->setEnabled(false);
    else if (needing > MaxMenuConversations)
        m_menu->addAction(tr("%1 more in the list").arg(needing - MaxMenuConversations), this,
                          &ConsoleTray::showRequested);
    m_menu->addSeparator();
    m_menu->addAction(tr("Quit"), qApp, &QCoreApplication::quit);
}

void ConsoleTray::notifyAttention(const ConversationInfo &info)
{
    m_notified = info.id;
    if (!m_icon)
        return;
    QString why = Lifecycle::executionText(info);
    if (info.runtime.error)
        why = info.runtime.error->message;
    else if (info.outcome && info.outcome->needsAttention())
        why = info.outcome->detail;
    m_icon->showMessage(tr("Needs attention: %1").arg(withControlsShown(info.title)), why,
                        QSystemTrayIcon::Warning, 8000);
}

void ConsoleTray::openNotified()
{
    if (m_notified.isNull())
        Q_EMIT showRequested();
    else
        Q_EMIT conversationRequested(m_notified);
}

} // namespace AgentDeck
