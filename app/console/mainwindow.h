#pragma once

#include "consoleactions.h"
#include "consolecontroller.h"

#include <QHash>
#include <QMainWindow>
#include <QTimer>

class QAction;
class QCloseEvent;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QComboBox;
class QDockWidget;
class QQuickWidget;
class QSplitter;
class QTabWidget;
class QTableView;
class QToolButton;

namespace AgentDeck {

class ActivityView;
class Banner;
class ConsoleTray;
class ConversationFilterProxy;
class DetailsPane;
class ReplicasDialog;

// The operator console: Active and Archived tabs over one list model, badges, a live timeline
// pane in QML, and the one-click actions on buttons and a context menu.
class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    // `server` is named in the title and the status bar, without a password it may hold.
    // The window opens with the layout it had when it last went (restoreLayout()).
    explicit MainWindow(ConsoleController *controller, const QUrl &server,
                        QWidget *parent = nullptr);
    ~MainWindow() override;

    // For tests and the screenshot: the widgets a user clicks.
    QPushButton *actionButton(ConsoleController::Action action) const
    {
        return m_buttons.value(action);
    }
    QPushButton *newButton() const { return m_newButton; }
    // The menu bar's entry for `action`.
    QAction *menuAction(ConsoleController::Action action) const
    {
        return m_menuActions.value(action);
    }
    QAction *renameAction() const { return m_renameAction; }
    QAction *editTagsAction() const { return m_editTagsAction; }
    QTabWidget *tabs() const { return m_tabs; }
    QTableView *activeView() const { return m_activeView; }
    QTableView *archivedView() const { return m_archivedView; }
    // The banner's text, and the banner with what it offers to do.
    QLabel *banner() const;
    Banner *bannerBar() const { return m_banner; }
    // Whether the list is current, in the status bar under any passing message.
    QLabel *connectionState() const { return m_connectionState; }
    QLabel *isolationState() const { return m_isolationState; }
    QLineEdit *filterBox() const { return m_filter; }
    QComboBox *statusFilter() const { return m_statusFilter; }
    QProgressBar *progress() const { return m_progress; }
    QLineEdit *messageBox() const { return m_message; }
    // The selected conversation's title, id and details, above the timeline.
    DetailsPane *details() const { return m_details; }
    QLabel *heading() const;
    QLabel *headingId() const;
    QQuickWidget *timeline() const { return m_timeline; }
    // A finished conversation needs its next message: the message box takes the focus, and the
    // status bar says so.
    void askForNextMessage();
    // Selects a conversation in whichever tab shows it.
    bool selectConversation(const QUuid &id);
    ConsoleTray *tray() const { return m_tray; }
    // The status bar's button to the replicas view, and the view once opened.
    QToolButton *replicasButton() const { return m_replicasButton; }
    ReplicasDialog *replicas() const { return m_replicas; }
    // The status bar's button to the Activity view (the audit log), and the view, docked at
    // the bottom and hidden until asked for.
    QToolButton *activityButton() const { return m_activityButton; }
    ActivityView *activity() const { return m_activity; }
    QDockWidget *activityDock() const { return m_activityDock; }
    // The server is this process's own (embedded): closing the window stops it, and with runs
    // going the window asks first (stop them, keep the server running in the background until
    // they end, or cancel).
    void setEmbedded(bool embedded) { m_embedded = embedded; }
    // Closed while runs went on, the server is kept until they end (keptRunsEnded()).
    bool isKeptInBackground() const { return m_keptInBackground; }

Q_SIGNALS:
    // The runs the window was closed on have ended: the application may quit.
    void keptRunsEnded();

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    QTableView *makeView(ConversationFilterProxy *proxy);
    QTableView *currentView() const;
    // Whether `view` has a row for conversation `id` (its filter and tab let it through).
    bool shows(QTableView *view, const QUuid &id) const;
    std::optional<ConversationInfo> currentConversation() const;
    // The rows selected in the current tab (Shift and Ctrl clicks, Ctrl+A: all that match the
    // filter), in the list's order.
    QList<ConversationInfo> selectedConversations() const;
    // `action` on those of `chosen` it can be done to, asking first as one would for each,
    // once for all; one progress bar, and one summary of what failed and why.
    void triggerBulk(ConsoleController::Action action, const QList<ConversationInfo> &chosen);
    void updateActions();
    void updateTabTitles();
    // The next rows of `proxy`'s partition, when its list is at its end
    // (ConsoleController::loadMore).
    void readMore(ConversationFilterProxy *proxy);
    void readMoreIfShort();
    // The server refused the key (401): the desktop's secret store is asked for the one kept
    // for it, and the banner offers to enter one.
    void keyNeeded(const QString &why);
    // The status bar, the rows' colour, the actions and the banner as the server (un)reachable
    // leaves them.
    void showReachability(const QString &serverLabel, bool reachable, const QString &why);
    void askForKey();
    // The filter box's search made on the server; what it found in events joins the filter.
    void searchOnServer();
    void trigger(ConsoleController::Action action);
    // Sends what the message box holds to the selected conversation, and runs it.
    void sendTypedMessage();
    // Asks for a new conversation's settings, creates it and selects it.
    void createConversation();
    // Shows and selects the conversation just created, and says so; when its first message
    // (`text`) did not start, keeps the text and offers to retry.
    void showCreated(const ConsoleController::Creation &made, const QString &text);
    void showContextMenu(const QPoint &position);
    // Brings the window up (from the tray, or minimized).
    void bringUp();
    void showReplicas();
    void buildMenus();
    // Opens the editor of the current row's `column` (the title's or the tags').
    void editInPlace(int column);
    // The window's size and place, the splitter, and each list's columns and sort, as the
    // operator left them (QSettings "agentdeck/console", section "layout").
    void restoreLayout();
    void saveLayout() const;

    ConsoleController *m_controller;
    ConversationFilterProxy *m_activeProxy;
    ConversationFilterProxy *m_archivedProxy;
    QPushButton *m_newButton;
    QTabWidget *m_tabs;
    QTableView *m_activeView;
    QTableView *m_archivedView;
    QSplitter *m_splitter;
    QLineEdit *m_filter;
    QComboBox *m_statusFilter;
    Banner *m_banner;
    QLabel *m_connectionState;
    QLabel *m_isolationState;
    QString m_unreachableText; // the banner of the last failed refresh
    QString m_unsettledText;   // the banner of an action that got no answer
    QProgressBar *m_progress;
    QQuickWidget *m_timeline;
    DetailsPane *m_details;
    QLineEdit *m_message;
    ConsoleTray *m_tray;
    QToolButton *m_replicasButton;
    ReplicasDialog *m_replicas = nullptr;
    QToolButton *m_activityButton;
    ActivityView *m_activity;
    QDockWidget *m_activityDock;
    bool m_embedded = false;
    bool m_keptInBackground = false;
    QTimer m_tabTitlesDue; // the tabs' counts, after rows changed
    QHash<ConsoleController::Action, QPushButton *> m_buttons;
    QHash<ConsoleController::Action, QAction *> m_buttonSlots; // the buttons' in the tool bar
    QHash<ConsoleController::Action, QAction *> m_menuActions; // the menu bar's
    QAction *m_renameAction = nullptr;
    QAction *m_editTagsAction = nullptr;

    bool m_bulkRunning = false;   // performAll() under way
    bool m_keyStoreAsked = false; // the secret store is asked once a start
    bool m_rowsLeaving = false;   // a view's rows are being removed
};

} // namespace AgentDeck
