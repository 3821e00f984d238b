#pragma once

#include <QCoroTask>
#include <QDialog>

class QLabel;
class QPushButton;
class QTableWidget;

namespace AgentDeck {

class ServerConnection;

// The servers sharing the watched server's catalog, as `ctl replicas` lists them: each one's
// state (alive, silent, stopped), how many conversations it holds, its last heartbeat, where it
// answers, and which of them the console is connected to. Read when opened and on Refresh.
class ReplicasDialog : public QDialog
{
    Q_OBJECT
public:
    explicit ReplicasDialog(ServerConnection *connection, QWidget *parent = nullptr);

    QCoro::Task<bool> refresh();

    // For tests.
    QTableWidget *table() const { return m_table; }
    QLabel *state() const { return m_state; }

private:
    ServerConnection *m_connection;
    QTableWidget *m_table;
    QLabel *m_state;
    QPushButton *m_refresh;
};

} // namespace AgentDeck
