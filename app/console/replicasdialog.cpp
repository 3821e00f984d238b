#include "replicasdialog.h"

#include "replicainfo.h"
#include "serverconnection.h"
#include "wiretypes.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ReplicasDialog::ReplicasDialog(ServerConnection *connection, QWidget *parent)
    : QDialog(parent)
    , m_connection(connection)
    , m_table(new QTableWidget(0, 6, this))
    , m_state(new QLabel(this))
    , m_refresh(new QPushButton(tr("Refresh"), this))
{
    setWindowTitle(tr("Replicas"));
    resize(820, 300);
    auto *layout = new QVBoxLayout(this);
    m_table->setHorizontalHeaderLabels({tr("Replica"), tr("State"), tr("Conversations"),
                                        tr("Last heartbeat"), tr("Started"), tr("Address")});
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_state->setTextFormat(Qt::PlainText);
    m_state->setWordWrap(true);
    layout->addWidget(m_table, 1);
    layout->addWidget(m_state);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    buttons->addButton(m_refresh, QDialogButtonBox::ActionRole);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_refresh, &QPushButton::clicked, this, [this] { refresh(); });
    layout->addWidget(buttons);
}

QCoro::Task<bool> ReplicasDialog::refresh()
{
    QPointer<ReplicasDialog> self(this);
    m_refresh->setEnabled(false);
    m_state->setText(tr("Reading…"));
    auto getting = m_connection->get(u"/api/replicas"_s);
    const ApiReply reply = co_await std::move(getting);
    if (!self)
        co_return false;
    m_refresh->setEnabled(true);
    if (!reply.ok() || !reply.json.isArray()) {
        // What was listed before stays: it is what the server last said.
        m_state->setText(reply.ok() ? tr("The server's answer is not a list of replicas")
                                    : reply.errorSentence());
        co_return false;
    }
    const QJsonArray items = reply.json.toArray();
    m_table->setRowCount(int(items.size()));
    int alive = 0;
    for (int row = 0; row < items.size(); ++row) {
        const ReplicaInfo replica = ReplicaInfo::fromJson(items.at(row));
        alive += replica.state() == u"alive"_s ? 1 : 0;
        const QStringList cells{
            replica.isSelf ? tr("%1 (this server)").arg(replica.id) : replica.id,
            replica.state(),
            QString::number(replica.ownedConversations),
            toDisplayTime(replica.lastHeartbeatAt),
            toDisplayTime(replica.startedAt),
            replica.advertiseUrl.isEmpty() ? tr("not advertised") : replica.advertiseUrl};
        for (int column = 0; column < cells.size(); ++column)
            m_table->setItem(row, column, new QTableWidgetItem(cells[column]));
        if (replica.state() != u"alive"_s) {
            for (int column = 0; column < cells.size(); ++column)
                m_table->item(row, column)->setForeground(Qt::darkGray);
        }
    }
    m_table->resizeColumnsToContents();
    m_state->setText(tr("%1 of %2 alive, as of %3")
                         .arg(alive)
                         .arg(items.size())
                         .arg(toDisplayTime(QDateTime::currentDateTimeUtc())));
    co_return true;
}

} // namespace AgentDeck
