#pragma once

#include "activitymodel.h"

#include <QHash>
#include <QTimer>
#include <QUuid>
#include <QWidget>

#include <chrono>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace AgentDeck {

class ActivityLoader;
class ConsoleController;
class ServerConnection;

// Who did what, when, why, and how it ended: the audit log of one server or of several (All
// servers, with a Server column), newest first. A filter row asks the servers for one actor or
// one action, and finds text (a conversation's title or id, a reason) and a result in what was
// read; older records are read when the list is scrolled to its end (or with Load older). It
// is read when shown, with Refresh, and every RefreshInterval while it is in sight. In a
// conversation's details pane it shows that conversation's records only, without the filter row.
class ActivityView : public QWidget
{
    Q_OBJECT
public:
    enum class Scope
    {
        Servers,     // every conversation of its servers
        Conversation // one conversation's (showConversation())
    };
    static constexpr std::chrono::seconds RefreshInterval{5};

    explicit ActivityView(Scope scope, QWidget *parent = nullptr);
    ~ActivityView() override;

    // A server whose records the list shows; the index names it in the calls below and in
    // conversationActivated(). `controller`, when given, names its conversations by title.
    int addServer(const QString &label, ServerConnection *connection,
                  ConsoleController *controller = nullptr);
    void removeServer(int source);
    void setServerLabel(int source, const QString &label);
    // Scope::Conversation: whose records (none: nothing is shown, nothing read).
    void showConversation(const QUuid &id);
    // Reads the newest records of every server again.
    void refresh();

    // For tests and the screenshot.
    ActivityModel *model() const { return m_model; }
    ActivityLoader *loader() const { return m_loader; }
    QTableView *table() const { return m_table; }
    QComboBox *actorFilter() const { return m_actor; }
    QComboBox *actionFilter() const { return m_action; }
    QLineEdit *textFilter() const { return m_text; }
    QComboBox *resultFilter() const { return m_result; }
    QPushButton *refreshButton() const { return m_refresh; }
    QPushButton *moreButton() const { return m_more; }
    QLabel *summary() const { return m_summary; }

Q_SIGNALS:
    // A row was double-clicked (or Enter pressed on it): the conversation it changed.
    void conversationActivated(int source, const QUuid &id);

protected:
    void showEvent(QShowEvent *event) override;
    void hideEvent(QHideEvent *event) override;

private:
    // The server's part of the filter row, as a query.
    void applyQuery();
    void readMore();
    void updateSummary();
    // Adds the actors read to the actor filter's choices.
    void learnActors();

    const Scope m_scope;
    ActivityModel *m_model;
    ActivityFilter *m_filter;
    ActivityLoader *m_loader;
    QUuid m_conversation; // Scope::Conversation
    QComboBox *m_actor = nullptr;
    QComboBox *m_action = nullptr;
    QLineEdit *m_text = nullptr;
    QComboBox *m_result = nullptr;
    QPushButton *m_refresh = nullptr;
    QTableView *m_table;
    QLabel *m_summary;
    QPushButton *m_more;
    QTimer m_timer;    // the refresh while in sight
    QTimer m_queryDue; // typing in the actor box pauses before the servers are asked
    // Each server's lifecycle feed, followed into the list (ConsoleController::lifecycleRecord).
    QHash<int, QMetaObject::Connection> m_feeds;
};

} // namespace AgentDeck
