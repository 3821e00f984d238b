#pragma once

#include "consolecontroller.h"

#include <QHash>
#include <QMainWindow>
#include <QTimer>
#include <QUrl>

#include <memory>
#include <vector>

class QAction;
class QComboBox;
class QConcatenateTablesProxyModel;
class QDockWidget;
class QLabel;
class QLineEdit;
class QListWidget;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace AgentDeck {

class ActivityView;
class ConsoleController;
struct ConversationSearch;
class MainWindow;
class ServerConnection;

// The console watching several servers: "All servers" lists the conversations of every one
// (Active and Archived tabs) with a Server column, one count and one attention count across
// them, and the servers with their state: answering, down since when (its connections
// refused), not answering since when (frozen or overloaded), asking for its key; those out of
// reach first and tinted. Each server keeps its own window (MainWindow: its tabs, actions,
// timeline and replicas), opened from here; a server that is down leaves its rows greyed, their
// badges dated, and the others working. Servers are added (URL, an optional name, an optional
// key), named and removed here and remembered with their names (consoleSettings(); keys go to
// the secret store), and so is the window's geometry. Their activity (who changed what, when
// and why) is one list too.
class FleetWindow : public QMainWindow
{
    Q_OBJECT
public:
    explicit FleetWindow(QWidget *parent = nullptr);
    ~FleetWindow() override;

    // Watches `server` (again if it was removed); nothing when it is watched already. `apiKey`
    // is used when given, else the one kept for it in the secret store, if any.
    // `name` is shown instead of host:port (none: the one remembered for it, if any).
    void addServer(const QUrl &server, const QString &apiKey = {}, const QString &name = {});
    void removeServer(const QUrl &server);
    // The name `server` is shown by (empty: host:port), remembered with it.
    void setServerName(const QUrl &server, const QString &name);
    // What the list and the Server column call `server`.
    QString serverName(const QUrl &server) const;
    // "host:port" (and the path, behind a proxy), the port even where the scheme implies it.
    static QString hostAndPort(const QUrl &server);
    QList<QUrl> servers() const;
    // The servers remembered from the last time, as addServer() takes them.
    static QList<QUrl> rememberedServers();

    // The server's own window, made when first asked for.
    MainWindow *windowOf(const QUrl &server);
    ConsoleController *controllerOf(const QUrl &server) const;
    // Opens the server's window, and in it the conversation `id` (none: as it was).
    void open(const QUrl &server, const QUuid &id);

    // For tests.
    QTableView *conversationsView() const { return m_view; }
    QTableView *archivedView() const { return m_archivedView; }
    QTabWidget *tabs() const { return m_tabs; }
    QListWidget *serverList() const { return m_servers; }
    QLabel *summary() const { return m_summary; }
    QLineEdit *filterBox() const { return m_filter; }
    QComboBox *statusFilter() const { return m_statusFilter; }
    // The Conversation menu's entry for `action`, also in the tool bar and the context menu:
    // done to the rows selected in the current tab, on their servers.
    QAction *action(ConsoleController::Action action) const { return m_actions.value(action); }
    // The current tab's list.
    QTableView *currentView() const;
    // Every server's audit log in one list (with a Server column), docked at the bottom and
    // hidden until asked for (View ▸ Activity, the tool bar's Activity).
    ActivityView *activity() const { return m_activity; }
    QDockWidget *activityDock() const { return m_activityDock; }
    QAction *activityAction() const;

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    struct Watched;
    Watched *find(const QUrl &server) const;
    void remember() const;
    void updateSummary();
    void updateServerLine(Watched &watched);
    // The rows selected in the current tab, with their servers, in the list's order.
    struct Chosen
    {
        Watched *server;
        ConversationInfo info;
    };
    QList<Chosen> selectedRows() const;
    Watched *serverOfRow(const QModelIndex &index) const;
    void updateActions();
    void trigger(ConsoleController::Action action);
    void showContextMenu(const QPoint &position);
    void buildMenus();
    void askForServer();
    void askForName();
    // The servers out of reach first, then the others, each in the order they were added.
    void arrangeServers();
    void applySearch(const ConversationSearch &search);
    // The filter box's search on every server; what they found in events joins the filter.
    void searchServers();

    std::vector<std::unique_ptr<Watched>> m_watched;
    QConcatenateTablesProxyModel *m_all;
    QSortFilterProxyModel *m_active;
    QSortFilterProxyModel *m_archived;
    QTableView *m_view; // the active rows
    QTableView *m_archivedView;
    QTabWidget *m_tabs;
    QListWidget *m_servers;
    QLabel *m_summary;
    QLineEdit *m_filter;
    QComboBox *m_statusFilter;
    QHash<ConsoleController::Action, QAction *> m_actions;
    QTimer m_summaryDue; // a row's change is counted with the next ones
    ActivityView *m_activity;
    QDockWidget *m_activityDock;
};

} // namespace AgentDeck
