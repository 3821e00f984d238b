#pragma once

#include <QObject>
#include <QUuid>

class QIcon;
class QMenu;
class QSystemTrayIcon;
class QWidget;

namespace AgentDeck {

class ConsoleController;
struct ConversationInfo;

// The console's place in the system tray: the application's own icon, a menu of what needs
// attention, and a message when a conversation comes to need it. The window does what its
// entries ask (showRequested(), conversationRequested()).
class ConsoleTray : public QObject
{
    Q_OBJECT
public:
    // `serverLabel` names the server in the icon's tooltip; `window` parents the menu.
    ConsoleTray(ConsoleController *controller, const QString &serverLabel, QWidget *window);

    // The application's own icon (48, 128 and 256 px), shipped with it: a theme's
    // (utilities-system-monitor) is not on every desktop, and without an icon the tray shows
    // nothing at all.
    static QIcon appIcon();
    // The icon's menu, built whether or not a tray is there: show the window, the
    // conversations needing attention (each selects its own), quit.
    QMenu *menu() const { return m_menu; }
    // Says in the tray that `info` needs attention; a click on the message selects it.
    void notifyAttention(const ConversationInfo &info);
    // What a click on the last message does.
    void openNotified();

Q_SIGNALS:
    void showRequested();
    // The window comes up with conversation `id` selected.
    void conversationRequested(const QUuid &id);

private:
    void fillMenu();

    ConsoleController *m_controller;
    QSystemTrayIcon *m_icon = nullptr; // none without a system tray
    QMenu *m_menu;
    QUuid m_notified; // the conversation of the last message
};

} // namespace AgentDeck
