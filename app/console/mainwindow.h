#pragma once

#include "consolecontroller.h"

#include <QHash>
#include <QMainWindow>
#include <QTimer>

class QCloseEvent;
class QIcon;
class QLabel;
class QMenu;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QQuickWidget;
class QSystemTrayIcon;
class QTabWidget;
class QTableView;

namespace AgentDeck {

class ConversationFilterProxy;

// The operator console: Active and Archived tabs over one list model, badges, a live timeline
// pane in QML, and the one-click actions on buttons and a context menu.
class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    // `server` is named in the title and the status bar, without a password it may hold.
    explicit MainWindow(ConsoleController *controller, const QUrl &server,
                        QWidget *parent = nullptr);

    // For tests and the screenshot: the widgets a user clicks.
    QPushButton *actionButton(ConsoleController::Action action) const
    {
        return m_buttons.value(action);
    }
    QPushButton *newButton() const { return m_newButton; }
    QTabWidget *tabs() const { return m_tabs; }
    QTableView *activeView() const { return m_activeView; }
    QTableView *archivedView() const { return m_archivedView; }
    QLabel *banner() const { return m_banner; }
    // Whether the list is current, in the status bar under any passing message.
    QLabel *connectionState() const { return m_connectionState; }
    QLabel *isolationState() const { return m_isolationState; }
    QLineEdit *filterBox() const { return m_filter; }
    QLineEdit *messageBox() const { return m_message; }
    // The title and id of the selected conversation, above the timeline.
    QLabel *heading() const { return m_heading; }
    QLabel *headingId() const { return m_headingId; }
    QQuickWidget *timeline() const { return m_timeline; }
    // Selects a conversation in whichever tab shows it.
    bool selectConversation(const QUuid &id);
    // The application's own icon (48, 128 and 256 px), shipped with it.
    static QIcon appIcon();
    // The tray icon's menu (built whether or not a tray is there): show the window, the
    // conversations needing attention (each selects its own), quit.
    QMenu *trayMenu() const { return m_trayMenu; }
    // Says in the tray that `info` needs attention; a click on the message selects it.
    void notifyAttention(const ConversationInfo &info);
    // What a click on the last message does: the window comes up with that conversation.
    void openNotified();
    // The server is this process's own (embedded): closing the window stops it, and with runs
    // going the window asks first (stop them, keep the server running in the background until
    // they end, or cancel).
    void setEmbedded(bool embedded) { m_embedded = embedded; }
    // Closed while runs went on, the server is kept until they end; then the application quits.
    bool isKeptInBackground() const { return m_keptInBackground; }

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    QTableView *makeView(ConversationFilterProxy *proxy);
    QTableView *currentView() const;
    // Whether `view` has a row for conversation `id` (its filter and tab let it through).
    bool shows(QTableView *view, const QUuid &id) const;
    std::optional<ConversationInfo> currentConversation() const;
    void updateActions();
    void updateTabTitles();
    void trigger(ConsoleController::Action action);
    // Asks for a new conversation's settings, creates it and selects it.
    void createConversation();
    // Shows and selects the conversation just created, and says so.
    void showCreated(const QUuid &id);
    // Asks `question` (Yes or No, No by default); whether the answer was Yes.
    bool confirmed(const QString &title, const QString &question);
    void showContextMenu(const QPoint &position);
    void showBanner(const QString &text);
    // Brings the window up (from the tray, or minimized).
    void bringUp();
    void fillTrayMenu();

    ConsoleController *m_controller;
    ConversationFilterProxy *m_activeProxy;
    ConversationFilterProxy *m_archivedProxy;
    QPushButton *m_newButton;
    QTabWidget *m_tabs;
    QTableView *m_activeView;
    QTableView *m_archivedView;
    QLineEdit *m_filter;
    QLabel *m_banner;
    QLabel *m_connectionState;
    QLabel *m_isolationState;
    QWidget *m_bannerFrame;
    QString m_unreachableText; // the banner of the last failed refresh
    QString m_unsettledText;   // the banner of an action that got no answer
    QProgressBar *m_progress;
    QQuickWidget *m_timeline;
    QLabel *m_heading;
    QLabel *m_headingId;
    QLineEdit *m_message;
    QSystemTrayIcon *m_tray = nullptr;
    QMenu *m_trayMenu;
    QUuid m_notified; // the conversation of the tray's last message
    bool m_embedded = false;
    bool m_keptInBackground = false;
    QTimer m_tabTitlesDue; // the tabs' counts, after rows changed
    QHash<ConsoleController::Action, QPushButton *> m_buttons;
    bool m_rowsLeaving = false; // a view's rows are being removed
};

} // namespace AgentDeck
