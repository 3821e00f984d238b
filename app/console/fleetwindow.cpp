#include "fleetwindow.h"

#include "consolecontroller.h"
#include "consolekeys.h"
#include "consolesettings.h"
#include "conversationlistmodel.h"
#include "lifecycle.h"
#include "mainwindow.h"
#include "serverconnection.h"
#include "statusbadgedelegate.h"

#include <QColor>
#include <QConcatenateTablesProxyModel>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPointer>
#include <QScrollBar>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

const QString ServersKey = u"servers"_s;

// One partition (active or archived) of every server's rows; a down server's greyed.
class PartitionRows : public QSortFilterProxyModel
{
public:
    PartitionRows(bool archived, QObject *parent)
        : QSortFilterProxyModel(parent)
        , m_archived(archived)
    {}

    // The filter box's, as a server's own window applies it.
    void setSearch(const ConversationSearch &search)
    {
        m_search = search;
        invalidateFilter();
    }
    ArchiveFilter partition() const
    {
        return m_archived ? ArchiveFilter::Archived : ArchiveFilter::Active;
    }

    QVariant data(const QModelIndex &index, int role) const override
    {
        if (role == Qt::ForegroundRole &&
            index.data(ConversationListModel::ServerDownRole).toBool())
            return QColor(Qt::gray);
        return QSortFilterProxyModel::data(index, role);
    }

protected:
    bool lessThan(const QModelIndex &left, const QModelIndex &right) const override
    {
        return conversationSortKeyLess(conversationSortKey(left), conversationSortKey(right),
                                       left.column());
    }

    bool filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const override
    {
        const QModelIndex row = sourceModel()->index(sourceRow, 0, sourceParent);
        if (row.data(ConversationListModel::ArchivedRole).toBool() != m_archived)
            return false;
        return m_search.isEmpty() ||
               m_search.matches(
                   row.data(ConversationListModel::ConversationRole).value<ConversationInfo>(),
                   partition());
    }

private:
    bool m_archived;
    ConversationSearch m_search;
};

QString labelOf(const QUrl &server)
{
    return server.toString(QUrl::RemoveUserInfo);
}

} // namespace

struct FleetWindow::Watched
{
    QUrl url;
    std::unique_ptr<ServerConnection> connection;
    std::unique_ptr<ConsoleController> controller;
    std::unique_ptr<MainWindow> window;
    QListWidgetItem *line = nullptr;
    QDateTime downSince;
};

FleetWindow::FleetWindow(QWidget *parent)
    : QMainWindow(parent)
    , m_all(new QConcatenateTablesProxyModel(this))
    , m_active(new PartitionRows(false, this))
    , m_archived(new PartitionRows(true, this))
    , m_view(new QTableView(this))
    , m_archivedView(new QTableView(this))
    , m_tabs(new QTabWidget(this))
    , m_servers(new QListWidget(this))
    , m_summary(new QLabel(this))
    , m_filter(new QLineEdit(this))
{
    setWindowTitle(tr("All servers"));
    m_summaryDue.setSingleShot(true);
    m_summaryDue.setInterval(100);
    connect(&m_summaryDue, &QTimer::timeout, this, &FleetWindow::updateSummary);
    for (auto [view, rows] : {std::pair{m_view, m_active}, std::pair{m_archivedView, m_archived}}) {
        rows->setSourceModel(m_all);
        view->setModel(rows);
        view->setSelectionBehavior(QAbstractItemView::SelectRows);
        view->setEditTriggers(QAbstractItemView::NoEditTriggers);
        view->verticalHeader()->hide();
        // A double click (or Enter) opens the conversation in its server's window.
        connect(view, &QAbstractItemView::activated, this, [this, rows](const QModelIndex &index) {
            const QModelIndex source = m_all->mapToSource(rows->mapToSource(index));
            for (const auto &watched : m_watched) {
                if (source.model() == watched->controller->conversations()) {
                    open(watched->url,
                         QUuid(source.data(ConversationListModel::IdRole).toString()));
                    return;
                }
            }
        });
        connect(rows, &QAbstractItemModel::rowsInserted, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::rowsRemoved, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::modelReset, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::layoutChanged, this, &FleetWindow::updateSummary);
        // Counted once per 100 ms at most: a followed run changes its row with every event,
        // and the count reads every row.
        connect(rows, &QAbstractItemModel::dataChanged, this, [this] {
            if (!m_summaryDue.isActive())
                m_summaryDue.start();
        });
        // Scrolled to its end, every server reads the next rows of the tab's partition.
        connect(view->verticalScrollBar(), &QScrollBar::valueChanged, this,
                [this, view, rows](int value) {
                    if (value == 0 || value != view->verticalScrollBar()->maximum() ||
                        !m_filter->text().isEmpty())
                        return;
                    const ArchiveFilter partition = static_cast<PartitionRows *>(rows)->partition();
                    for (const auto &watched : m_watched) {
                        if (watched->controller->hasMore(partition))
                            watched->controller->loadMore(partition);
                    }
                });
    }
    // The filter box finds as a server's window's does: the rows here at once, and every
    // server asked once typing pauses.
    m_filter->setPlaceholderText(
        tr("Find in all servers: title, id, tag (team=ops), or what was said"));
    m_filter->setClearButtonEnabled(true);
    auto *serverSearch = new QTimer(this);
    serverSearch->setSingleShot(true);
    serverSearch->setInterval(300);
    connect(m_filter, &QLineEdit::textChanged, this, [this, serverSearch] {
        applySearch(ConversationSearch::parse(m_filter->text()));
        serverSearch->start();
    });
    connect(serverSearch, &QTimer::timeout, this, &FleetWindow::searchServers);
    m_tabs->addTab(m_view, {});
    m_tabs->addTab(m_archivedView, {});
    connect(m_servers, &QListWidget::itemActivated, this,
            [this](QListWidgetItem *item) { open(item->data(Qt::UserRole).toUrl(), {}); });

    QToolBar *tools = addToolBar(tr("Servers"));
    tools->setMovable(false);
    tools->addAction(tr("Add server…"), this, &FleetWindow::askForServer);
    tools->addAction(tr("Open server"), this, [this] {
        if (QListWidgetItem *item = m_servers->currentItem())
            open(item->data(Qt::UserRole).toUrl(), {});
    });
    tools->addAction(tr("Remove server"), this, [this] {
        if (QListWidgetItem *item = m_servers->currentItem())
            removeServer(item->data(Qt::UserRole).toUrl());
    });

    auto *splitter = new QSplitter(Qt::Vertical, this);
    m_servers->setParent(splitter);
    auto *rows = new QWidget(splitter);
    auto *layout = new QVBoxLayout(rows);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_summary);
    layout->addWidget(m_filter);
    layout->addWidget(m_tabs, 1);
    splitter->addWidget(m_servers);
    splitter->addWidget(rows);
    splitter->setStretchFactor(1, 4);
    splitter->setSizes({120, 580});
    setCentralWidget(splitter);
    resize(1100, 700);
    updateSummary();
}

FleetWindow::~FleetWindow()
{
    // The windows and controllers go before the models they show are let go of.
    for (const auto &watched : m_watched)
        m_all->removeSourceModel(watched->controller->conversations());
}

QList<QUrl> FleetWindow::rememberedServers()
{
    QList<QUrl> servers;
    for (const QString &text : consoleSettings()->value(ServersKey).toStringList()) {
        if (const auto url = ServerConnection::baseUrlFrom(text))
            servers.append(*url);
    }
    return servers;
}

QList<QUrl> FleetWindow::servers() const
{
    QList<QUrl> urls;
    for (const auto &watched : m_watched)
        urls.append(watched->url);
    return urls;
}

FleetWindow::Watched *FleetWindow::find(const QUrl &server) const
{
    for (const auto &watched : m_watched) {
        if (watched->url == server)
            return watched.get();
    }
    return nullptr;
}

void FleetWindow::addServer(const QUrl &server, const QString &apiKey)
{
    if (find(server))
        return;
    auto watched = std::make_unique<Watched>();
    watched->url = server;
    watched->connection = std::make_unique<ServerConnection>(server);
    watched->connection->setApiKey(apiKey);
    watched->controller = std::make_unique<ConsoleController>(watched->connection.get());
    ConversationListModel *rows = watched->controller->conversations();
    rows->setServerLabel(labelOf(server));
    watched->line = new QListWidgetItem(m_servers);
    watched->line->setData(Qt::UserRole, server);
    Watched *raw = watched.get();
    connect(watched->controller.get(), &ConsoleController::reachabilityChanged, this,
            [this, raw](bool reachable) {
                raw->controller->conversations()->setStale(!reachable);
                raw->downSince = reachable ? QDateTime() : QDateTime::currentDateTime();
                updateServerLine(*raw);
                updateSummary();
            });
    connect(watched->controller.get(), &ConsoleController::refreshed, this,
            [this, raw] { updateServerLine(*raw); });
    m_all->addSourceModel(rows);
    // The columns are there with the first server's rows.
    if (m_watched.empty()) {
        for (QTableView *view : {m_view, m_archivedView}) {
            view->setSortingEnabled(true);
            view->sortByColumn(ConversationListModel::UpdatedColumn, Qt::DescendingOrder);
            QHeaderView *header = view->horizontalHeader();
            header->setSectionResizeMode(ConversationListModel::TitleColumn, QHeaderView::Stretch);
            for (const int column : {int(ConversationListModel::UpdatedColumn),
                                     int(ConversationListModel::ServerColumn)})
                header->setSectionResizeMode(column, QHeaderView::ResizeToContents);
            // The badges of a server's own window.
            for (const auto &[column, kind] :
                 {std::pair{int(ConversationListModel::ExecutionColumn),
                            StatusBadgeDelegate::Kind::Execution},
                  std::pair{int(ConversationListModel::RuntimeColumn),
                            StatusBadgeDelegate::Kind::Runtime}}) {
                auto *delegate = new StatusBadgeDelegate(kind, view);
                view->setItemDelegateForColumn(column, delegate);
                header->resizeSection(column, delegate->columnWidth(view->fontMetrics()));
            }
        }
    }
    m_watched.push_back(std::move(watched));
    updateServerLine(*raw);
    remember();
    raw->controller->startRefreshing(std::chrono::seconds(3));
    if (apiKey.isEmpty()) {
        ConsoleKeys::read(server).then(
            [self = QPointer(this), server](std::optional<QString> kept) {
                Watched *watched = self ? self->find(server) : nullptr;
                if (watched && kept && !kept->isEmpty())
                    watched->controller->useApiKey(*kept);
            });
    }
}

void FleetWindow::removeServer(const QUrl &server)
{
    const auto it = std::find_if(m_watched.begin(), m_watched.end(),
                                 [&server](const auto &watched) { return watched->url == server; });
    if (it == m_watched.end())
        return;
    m_all->removeSourceModel((*it)->controller->conversations());
    delete (*it)->line;
    m_watched.erase(it);
    remember();
    updateSummary();
}

void FleetWindow::remember() const
{
    QStringList urls;
    for (const auto &watched : m_watched)
        urls.append(watched->url.toString());
    consoleSettings()->setValue(ServersKey, urls);
}

MainWindow *FleetWindow::windowOf(const QUrl &server)
{
    Watched *watched = find(server);
    if (!watched)
        return nullptr;
    if (!watched->window)
        watched->window = std::make_unique<MainWindow>(watched->controller.get(), server);
    return watched->window.get();
}

ConsoleController *FleetWindow::controllerOf(const QUrl &server) const
{
    const Watched *watched = find(server);
    return watched ? watched->controller.get() : nullptr;
}

void FleetWindow::open(const QUrl &server, const QUuid &id)
{
    MainWindow *window = windowOf(server);
    if (!window)
        return;
    window->show();
    window->raise();
    window->activateWindow();
    if (!id.isNull())
        window->selectConversation(id);
}

void FleetWindow::updateServerLine(Watched &watched)
{
    const QString label = labelOf(watched.url);
    const ConversationListModel *rows = watched.controller->conversations();
    int needing = 0;
    for (int row = 0; row < rows->rowCount(); ++row)
        needing += Lifecycle::needsAttention(rows->at(row)) ? 1 : 0;
    QString line;
    if (watched.controller->needsKey())
        line = tr("⚠ %1 asks for its session API key: open it to enter the key").arg(label);
    else if (!watched.controller->isReachable())
        line = tr("✕ %1 is down since %2; its rows are as of %3")
                   .arg(label, watched.downSince.toString(u"HH:mm:ss"_s),
                        watched.controller->lastRefreshed().isValid()
                            ? watched.controller->lastRefreshed().toString(u"HH:mm:ss"_s)
                            : tr("never"));
    else
        line = (rows->rowCount() == 1
                    ? tr("● %1 · 1 conversation").arg(label)
                    : tr("● %1 · %2 conversations").arg(label).arg(rows->rowCount())) +
               (needing == 0   ? QString()
                : needing == 1 ? tr(", 1 needs attention")
                               : tr(", %1 need attention").arg(needing));
    watched.line->setText(line);
}

void FleetWindow::updateSummary()
{
    int needing = 0;
    for (int row = 0; row < m_active->rowCount(); ++row)
        needing += m_active->index(row, 0).data(ConversationListModel::NeedsAttentionRole).toBool();
    int down = 0;
    int keyed = 0; // answering, but not without a key
    for (const auto &watched : m_watched) {
        keyed += watched->controller->needsKey() ? 1 : 0;
        down += watched->controller->isReachable() || watched->controller->needsKey() ? 0 : 1;
    }
    QString text = tr("Active (%1)").arg(m_active->rowCount());
    if (needing > 0)
        text += needing == 1 ? tr(", 1 needs attention") : tr(", %1 need attention").arg(needing);
    m_tabs->setTabText(0, text);
    m_tabs->setTabText(1, tr("Archived (%1)").arg(m_archived->rowCount()));
    text += m_watched.size() == 1 ? tr(" · 1 server") : tr(" · %1 servers").arg(m_watched.size());
    if (down > 0)
        text += tr(", %1 down").arg(down);
    if (keyed > 0)
        text += keyed == 1 ? tr(", 1 asks for its key") : tr(", %1 ask for their keys").arg(keyed);
    m_summary->setText(text);
}

void FleetWindow::applySearch(const ConversationSearch &search)
{
    for (QSortFilterProxyModel *rows : {m_active, m_archived})
        static_cast<PartitionRows *>(rows)->setSearch(search);
    updateSummary();
}

void FleetWindow::searchServers()
{
    const QString text = m_filter->text();
    const ConversationSearch search = ConversationSearch::parse(text);
    if (search.isEmpty())
        return;
    auto found = std::make_shared<QSet<QUuid>>();
    for (const auto &watched : m_watched) {
        watched->controller->findOnServer(search).then(
            [self = QPointer(this), text, search, found](const QSet<QUuid> &inEvents) {
                // Typed on meanwhile: that search is asked for already.
                if (!self || self->m_filter->text() != text || inEvents.isEmpty())
                    return;
                found->unite(inEvents);
                ConversationSearch shown = search;
                shown.foundInEvents = *found;
                self->applySearch(shown);
            });
    }
}

void FleetWindow::askForServer()
{
    bool given = false;
    const QString text =
        QInputDialog::getText(this, tr("Add server"), tr("The server's URL (or HOST:PORT):"),
                              QLineEdit::Normal, {}, &given);
    if (!given || text.trimmed().isEmpty())
        return;
    const auto url = ServerConnection::baseUrlFrom(text.trimmed());
    if (!url) {
        m_summary->setText(tr("“%1” is no server URL: HOST:PORT or http(s)://…").arg(text));
        return;
    }
    addServer(*url);
}

} // namespace AgentDeck
