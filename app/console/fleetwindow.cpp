#include "fleetwindow.h"

#include "activityview.h"
#include "addserverdialog.h"
#include "consoleactions.h"
#include "consolecontroller.h"
#include "consolekeys.h"
#include "consolesettings.h"
#include "conversationlistmodel.h"
#include "conversationview.h"
#include "lifecycle.h"
#include "mainwindow.h"
#include "serverconnection.h"
#include "statusbadgedelegate.h"

#include <QCloseEvent>
#include <QColor>
#include <QComboBox>
#include <QConcatenateTablesProxyModel>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QPointer>
#include <QScrollBar>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using Action = ConsoleController::Action;

namespace {

const QString ServersKey = u"servers"_s;

// One partition (active or archived) of every server's rows.
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

    // A down server's rows are greyed.
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
        return m_search.matches(
            row.data(ConversationListModel::ConversationRole).value<ConversationInfo>(),
            partition());
    }

private:
    bool m_archived;
    ConversationSearch m_search;
};

const QString NamesKey = u"serverNames"_s;
const QString GeometryKey = u"fleet/window"_s;

} // namespace

QString FleetWindow::hostAndPort(const QUrl &server)
{
    // The port even where the scheme implies it: two servers on one host differ by it alone.
    QUrl named = server;
    named.setUserInfo({});
    named.setPort(server.port(server.scheme() == u"https"_s ? 443 : 80));
    const QString path = server.path();
    return named.authority() + (path == u"/"_s ? QString() : path);
}

struct FleetWindow::Watched
{
    QString label() const { return name.isEmpty() ? hostAndPort(url) : name; }

    QUrl url;
    QString name; // the operator's, if any
    std::unique_ptr<ServerConnection> connection;
    std::unique_ptr<ConsoleController> controller;
    std::unique_ptr<MainWindow> window;
    QListWidgetItem *line = nullptr;
    QDateTime downSince;
    int activitySource = -1; // its records' source in the Activity list
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
    , m_statusFilter(ConversationView::makeStatusFilter(this))
    , m_activity(new ActivityView(ActivityView::Scope::Servers, this))
    , m_activityDock(new QDockWidget(tr("Activity"), this))
{
    setWindowTitle(tr("All servers"));
    m_summaryDue.setSingleShot(true);
    m_summaryDue.setInterval(100);
    connect(&m_summaryDue, &QTimer::timeout, this, &FleetWindow::updateSummary);
    // A row's change may change what can be done to it.
    connect(&m_summaryDue, &QTimer::timeout, this, &FleetWindow::updateActions);
    for (auto [view, rows] : {std::pair{m_view, m_active}, std::pair{m_archivedView, m_archived}}) {
        rows->setSourceModel(m_all);
        view->setModel(rows);
        view->setSelectionBehavior(QAbstractItemView::SelectRows);
        view->setSelectionMode(QAbstractItemView::ExtendedSelection);
        view->setEditTriggers(QAbstractItemView::NoEditTriggers);
        view->verticalHeader()->hide();
        view->setContextMenuPolicy(Qt::CustomContextMenu);
        connect(view, &QWidget::customContextMenuRequested, this, &FleetWindow::showContextMenu);
        connect(view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
                &FleetWindow::updateActions);
        connect(view->selectionModel(), &QItemSelectionModel::currentChanged, this,
                &FleetWindow::updateActions);
        // A double click (or Enter) opens the conversation in its server's window.
        connect(view, &QAbstractItemView::activated, this, [this](const QModelIndex &index) {
            if (const Watched *server = serverOfRow(index))
                open(server->url, QUuid(index.data(ConversationListModel::IdRole).toString()));
        });
        connect(rows, &QAbstractItemModel::rowsInserted, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::rowsRemoved, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::modelReset, this, &FleetWindow::updateSummary);
        connect(rows, &QAbstractItemModel::layoutChanged, this, &FleetWindow::updateSummary);
        // Counted once per 100 ms at most: a followed run changes its row with every event,
        // and the count reads every row. The durations' tick changes no count and no action.
        connect(rows, &QAbstractItemModel::dataChanged, this,
                [this](const QModelIndex &topLeft, const QModelIndex &bottomRight) {
                    if (topLeft.column() == ConversationListModel::DurationColumn &&
                        bottomRight.column() == ConversationListModel::DurationColumn)
                        return;
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
    const auto searchAgain = [this, serverSearch] {
        applySearch(ConversationView::searchOf(m_filter->text(), m_statusFilter));
        serverSearch->start();
    };
    connect(m_filter, &QLineEdit::textChanged, this, searchAgain);
    connect(m_statusFilter, &QComboBox::currentIndexChanged, this, searchAgain);
    connect(serverSearch, &QTimer::timeout, this, &FleetWindow::searchServers);
    m_tabs->addTab(m_view, {});
    m_tabs->addTab(m_archivedView, {});
    connect(m_servers, &QListWidget::itemActivated, this,
            [this](QListWidgetItem *item) { open(item->data(Qt::UserRole).toUrl(), {}); });

    m_activityDock->setObjectName(u"activity"_s);
    m_activityDock->setWidget(m_activity);
    addDockWidget(Qt::BottomDockWidgetArea, m_activityDock);
    m_activityDock->hide();
    QAction *showActivity = activityAction();
    showActivity->setText(tr("&Activity"));
    showActivity->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_A));
    showActivity->setToolTip(tr("Who changed what, when and why, on every server (Ctrl+Shift+A)"));
    connect(showActivity, &QAction::toggled, this, [this](bool shown) {
        if (shown)
            m_activity->table()->setFocus(Qt::ShortcutFocusReason);
    });
    connect(m_activity, &ActivityView::conversationActivated, this,
            [this](int source, const QUuid &id) {
                for (const auto &watched : m_watched) {
                    if (watched->activitySource == source)
                        open(watched->url, id);
                }
            });

    QToolBar *tools = addToolBar(tr("Servers"));
    tools->setMovable(false);
    tools->addAction(tr("Add server…"), this, &FleetWindow::askForServer);
    tools->addAction(tr("Open server"), this, [this] {
        if (QListWidgetItem *item = m_servers->currentItem())
            open(item->data(Qt::UserRole).toUrl(), {});
    });
    tools->addAction(tr("Name server…"), this, &FleetWindow::askForName);
    tools->addAction(tr("Remove server"), this, [this] {
        if (QListWidgetItem *item = m_servers->currentItem())
            removeServer(item->data(Qt::UserRole).toUrl());
    });
    tools->addSeparator();
    tools->addAction(showActivity);

    auto *splitter = new QSplitter(Qt::Vertical, this);
    m_servers->setParent(splitter);
    auto *rows = new QWidget(splitter);
    auto *layout = new QVBoxLayout(rows);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_summary);
    auto *findRow = new QHBoxLayout;
    findRow->addWidget(m_filter, 1);
    findRow->addWidget(m_statusFilter);
    layout->addLayout(findRow);
    layout->addWidget(m_tabs, 1);
    splitter->addWidget(m_servers);
    splitter->addWidget(rows);
    splitter->setStretchFactor(1, 4);
    splitter->setSizes({120, 580});
    setCentralWidget(splitter);
    resize(1100, 700);
    restoreGeometry(consoleSettings()->value(GeometryKey).toByteArray());
    connect(m_tabs, &QTabWidget::currentChanged, this, &FleetWindow::updateActions);
    buildMenus();
    updateSummary();
    updateActions();
}

FleetWindow::~FleetWindow()
{
    consoleSettings()->setValue(GeometryKey, saveGeometry());
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

void FleetWindow::addServer(const QUrl &server, const QString &apiKey, const QString &name)
{
    if (find(server))
        return;
    auto watched = std::make_unique<Watched>();
    watched->url = server;
    watched->name =
        name.isEmpty()
            ? consoleSettings()->value(NamesKey).toMap().value(server.toString()).toString()
            : name;
    watched->connection = std::make_unique<ServerConnection>(server);
    watched->connection->setApiKey(apiKey);
    watched->controller = std::make_unique<ConsoleController>(watched->connection.get());
    ConversationListModel *rows = watched->controller->conversations();
    rows->setServerLabel(watched->label());
    watched->line = new QListWidgetItem(m_servers);
    watched->line->setData(Qt::UserRole, server);
    Watched *raw = watched.get();
    connect(watched->controller.get(), &ConsoleController::reachabilityChanged, this,
            [this, raw](bool reachable) {
                // Since it stopped answering, whatever it is taken for as it goes on failing.
                if (reachable)
                    raw->downSince = QDateTime();
                else if (!raw->downSince.isValid())
                    raw->downSince = QDateTime::currentDateTime();
                updateServerLine(*raw);
                arrangeServers();
                updateSummary();
                updateActions();
            });
    connect(watched->controller.get(), &ConsoleController::refreshed, this,
            [this, raw] { updateServerLine(*raw); });
    // What the actions done from here came to, as a server's window says it.
    connect(watched->controller.get(), &ConsoleController::actionFinished, this,
            [this, raw](Action action, bool ok, const QUuid &id) {
                updateActions();
                if (!ok)
                    return;
                const auto info = raw->controller->conversations()->conversation(id);
                const bool requested = (action == Action::Pause || action == Action::Interrupt) &&
                                       (!info || info->executionStatus == ExecutionStatus::Running);
                statusBar()->showMessage(
                    (requested ? tr("%1 requested on %2") : tr("%1 done on %2"))
                        .arg(ConsoleController::actionName(action), raw->label()),
                    6000);
            });
    connect(watched->controller.get(), &ConsoleController::failed, this,
            [this, raw](const QString &sentence) {
                statusBar()->showMessage(tr("%1: %2").arg(raw->label(), sentence), 15000);
            });
    connect(watched->controller.get(), &ConsoleController::actingChanged, this,
            &FleetWindow::updateActions);
    m_all->addSourceModel(rows);
    watched->activitySource = m_activity->addServer(watched->label(), watched->connection.get(),
                                                    watched->controller.get());
    // The columns are there with the first server's rows.
    if (m_watched.empty()) {
        for (QTableView *view : {m_view, m_archivedView}) {
            view->setSortingEnabled(true);
            view->sortByColumn(ConversationListModel::UpdatedColumn, Qt::DescendingOrder);
            ConversationView::layOutColumns(view);
            const QFontMetrics metrics = view->fontMetrics();
            QHeaderView *header = view->horizontalHeader();
            header->resizeSection(ConversationListModel::ServerColumn,
                                  metrics.horizontalAdvance(u"255.255.255.255:65535"_s) + 16);
            // No details pane beside it: room for the longest outcome, and for a down server's
            // runtime badge with its time, whole.
            header->resizeSection(
                ConversationListModel::RuntimeColumn,
                StatusBadgeDelegate::widthFor(metrics, u"available · as of 00:00:00"_s));
            header->resizeSection(ConversationListModel::ExecutionColumn,
                                  StatusBadgeDelegate::widthFor(
                                      metrics, u"finished · interrupted by the operator"_s));
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
    m_activity->removeServer((*it)->activitySource);
    delete (*it)->line;
    m_watched.erase(it);
    remember();
    updateSummary();
}

void FleetWindow::remember() const
{
    QStringList urls;
    QVariantMap names;
    for (const auto &watched : m_watched) {
        urls.append(watched->url.toString());
        if (!watched->name.isEmpty())
            names.insert(watched->url.toString(), watched->name);
    }
    consoleSettings()->setValue(ServersKey, urls);
    consoleSettings()->setValue(NamesKey, names);
}

void FleetWindow::setServerName(const QUrl &server, const QString &name)
{
    Watched *watched = find(server);
    if (!watched)
        return;
    watched->name = name.simplified();
    watched->controller->conversations()->setServerLabel(watched->label());
    m_activity->setServerLabel(watched->activitySource, watched->label());
    updateServerLine(*watched);
    remember();
}

QString FleetWindow::serverName(const QUrl &server) const
{
    const Watched *watched = find(server);
    return watched ? watched->label() : QString();
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
    const QString label = watched.label();
    const ConsoleController *controller = watched.controller.get();
    const ConversationListModel *rows = watched.controller->conversations();
    int needing = 0;
    for (int row = 0; row < rows->rowCount(); ++row)
        needing += Lifecycle::needsAttention(rows->at(row)) ? 1 : 0;
    const QString since = watched.downSince.toString(u"HH:mm:ss"_s);
    const QString asOf = controller->lastRefreshed().isValid()
                             ? controller->lastRefreshed().toString(u"HH:mm:ss"_s)
                             : tr("never");
    QString line;
    switch (controller->needsKey() ? ConsoleController::Outage::Failing : controller->outage()) {
    case ConsoleController::Outage::None:
        line = (rows->rowCount() == 1
                    ? tr("● %1 · 1 conversation").arg(label)
                    : tr("● %1 · %2 conversations").arg(label).arg(rows->rowCount())) +
               (needing == 0   ? QString()
                : needing == 1 ? tr(", 1 needs attention")
                               : tr(", %1 need attention").arg(needing));
        break;
    case ConsoleController::Outage::Down:
        line = tr("✕ %1 is down since %2 (it refuses connections); its rows are as of %3")
                   .arg(label, since, asOf);
        break;
    case ConsoleController::Outage::NotAnswering:
        line = tr("⏸ %1 is not answering since %2 (it takes connections and says nothing: "
                  "frozen or overloaded); its rows are as of %3")
                   .arg(label, since, asOf);
        break;
    case ConsoleController::Outage::Failing:
        line = controller->needsKey()
                   ? tr("⚠ %1 asks for its session API key: open it to enter the key").arg(label)
                   : tr("✕ %1 answers with errors since %2; its rows are as of %3")
                         .arg(label, since, asOf);
        break;
    }
    watched.line->setText(line);
    watched.line->setToolTip(controller->isReachable() ? watched.url.toString(QUrl::RemoveUserInfo)
                                                       : controller->unreachableReason());
    // Out of reach, it stands out: tinted, in bold.
    const bool out = !controller->isReachable();
    watched.line->setBackground(
        out ? QColor(controller->outage() == ConsoleController::Outage::NotAnswering ? 0xfff3e0
                                                                                     : 0xffebee)
            : QBrush());
    watched.line->setForeground(out ? QColor(0xb7, 0x1c, 0x1c) : QBrush());
    QFont font = m_servers->font();
    font.setBold(out);
    watched.line->setFont(font);
}

void FleetWindow::arrangeServers()
{
    // Those out of reach first, each kind in the order the servers were added.
    QListWidgetItem *current = m_servers->currentItem();
    std::vector<QListWidgetItem *> order;
    for (const bool out : {true, false}) {
        for (const auto &watched : m_watched) {
            if (watched->controller->isReachable() != out)
                order.push_back(watched->line);
        }
    }
    bool arranged = true;
    for (int row = 0; row < int(order.size()); ++row)
        arranged = arranged && m_servers->item(row) == order[row];
    if (arranged)
        return;
    while (m_servers->count() > 0)
        m_servers->takeItem(0);
    for (QListWidgetItem *item : order)
        m_servers->addItem(item);
    if (current)
        m_servers->setCurrentItem(current);
}

void FleetWindow::updateSummary()
{
    int needing = 0;
    for (int row = 0; row < m_active->rowCount(); ++row)
        needing += m_active->index(row, 0).data(ConversationListModel::NeedsAttentionRole).toBool();
    int down = 0;
    int silent = 0; // not answering: frozen, or overloaded
    int keyed = 0;  // answering, but not without a key
    for (const auto &watched : m_watched) {
        const ConsoleController *controller = watched->controller.get();
        keyed += controller->needsKey() ? 1 : 0;
        silent += !controller->needsKey() &&
                  controller->outage() == ConsoleController::Outage::NotAnswering;
        down += !controller->needsKey() && !controller->isReachable() &&
                controller->outage() != ConsoleController::Outage::NotAnswering;
    }
    QString text = tr("Active (%1)").arg(m_active->rowCount());
    if (needing > 0)
        text += needing == 1 ? tr(", 1 needs attention") : tr(", %1 need attention").arg(needing);
    m_tabs->setTabText(0, text);
    m_tabs->setTabText(1, tr("Archived (%1)").arg(m_archived->rowCount()));
    text += m_watched.size() == 1 ? tr(" · 1 server") : tr(" · %1 servers").arg(m_watched.size());
    if (down > 0)
        text += tr(", %1 down").arg(down);
    if (silent > 0)
        text += tr(", %1 not answering").arg(silent);
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

QAction *FleetWindow::activityAction() const
{
    return m_activityDock->toggleViewAction();
}

QTableView *FleetWindow::currentView() const
{
    return m_tabs->currentIndex() == 0 ? m_view : m_archivedView;
}

FleetWindow::Watched *FleetWindow::serverOfRow(const QModelIndex &index) const
{
    const auto *rows = static_cast<const QSortFilterProxyModel *>(index.model());
    const QModelIndex source = m_all->mapToSource(rows->mapToSource(index));
    for (const auto &watched : m_watched) {
        if (source.model() == watched->controller->conversations())
            return watched.get();
    }
    return nullptr;
}

QList<FleetWindow::Chosen> FleetWindow::selectedRows() const
{
    QModelIndexList rows = currentView()->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(),
              [](const QModelIndex &a, const QModelIndex &b) { return a.row() < b.row(); });
    QList<Chosen> chosen;
    for (const QModelIndex &row : std::as_const(rows)) {
        if (Watched *server = serverOfRow(row))
            chosen.append(
                {server,
                 row.data(ConversationListModel::ConversationRole).value<ConversationInfo>()});
    }
    return chosen;
}

void FleetWindow::updateActions()
{
    const QList<Chosen> chosen = selectedRows();
    QList<ConsoleActions::Row> rows;
    bool acting = false;
    for (const Chosen &row : chosen) {
        rows.append({row.info, row.server->controller->isReachable()});
        acting = acting || row.server->controller->isActingOn(row.info.id);
    }
    for (auto it = m_actions.cbegin(); it != m_actions.cend(); ++it) {
        const Lifecycle::Availability state =
            acting && chosen.size() == 1
                ? Lifecycle::Availability{false, tr("Waiting for the server to answer")}
                : ConsoleActions::availability(it.key(), rows);
        it.value()->setEnabled(state.enabled);
        const QString does = state.enabled && chosen.size() == 1
                                 ? ConsoleActions::whatItDoes(it.key(), chosen.first().info)
                                 : QString();
        it.value()->setToolTip(
            state.enabled && chosen.size() <= 1
                ? (does.isEmpty() ? ConsoleController::actionName(it.key()) : does)
                : state.reason);
    }
    // One place for the two ways to a fresh sandbox, as in a server's window.
    const bool expired = chosen.size() == 1 && Lifecycle::isExpired(chosen.first().info);
    m_actions.value(Action::StartFresh)->setVisible(expired);
    m_actions.value(Action::Reprovision)->setVisible(!expired);
}

void FleetWindow::trigger(Action action)
{
    const QList<Chosen> chosen = selectedRows();
    if (chosen.size() > 1 && !ConsoleActions::isBulk(action))
        return;
    QList<Chosen> can;
    QList<ConversationInfo> infos;
    for (const Chosen &row : chosen) {
        if (!row.server->controller->isReachable() ||
            !ConsoleController::availability(action, row.info).enabled)
            continue;
        can.append(row);
        infos.append(row.info);
    }
    if (can.isEmpty())
        return;
    if (!ConsoleActions::confirmed(this, ConsoleActions::questionFor(action, infos, fontMetrics())))
        return;
    if (chosen.size() == 1) {
        const Chosen &row = can.first();
        // A finished run needs its next message: typed in its server's window.
        if (action == Action::Run && row.info.executionStatus == ExecutionStatus::Finished) {
            open(row.server->url, row.info.id);
            windowOf(row.server->url)->askForNextMessage();
            return;
        }
        QString reason;
        if (action == Action::Reject) {
            const auto why = ConsoleActions::askRejectReason(this);
            if (!why)
                return;
            reason = *why;
        }
        row.server->controller->perform(action, row.info.id, reason);
        return;
    }
    // Several rows: each server is asked for its own, and one summary says what came of all.
    struct Tally
    {
        int servers = 0;
        int asked = 0;
        int done = 0;
        QStringList why;
    };
    auto tally = std::make_shared<Tally>();
    QHash<Watched *, QList<QUuid>> byServer;
    for (const Chosen &row : std::as_const(can))
        byServer[row.server].append(row.info.id);
    tally->servers = int(byServer.size());
    const QString name = ConsoleController::actionName(action);
    const int skipped = int(chosen.size() - can.size());
    for (auto it = byServer.cbegin(); it != byServer.cend(); ++it) {
        const QString label = it.key()->label();
        it.key()
            ->controller->performAll(action, it.value())
            .then([self = QPointer(this), tally, name, label,
                   skipped](ConsoleController::BulkResult result) {
                tally->asked += result.asked;
                tally->done += result.done;
                for (const auto &failure : std::as_const(result.failures))
                    tally->why.append(
                        tr("“%1” on %2: %3")
                            .arg(withControlsShown(failure.title).left(60), label, failure.why));
                if (--tally->servers > 0 || !self)
                    return;
                QString summary =
                    tr("%1: %2 of %3 done").arg(name).arg(tally->done).arg(tally->asked);
                if (skipped > 0)
                    summary += tr("; %n selected could not be changed so", nullptr, skipped);
                if (!tally->why.isEmpty())
                    summary += u"; "_s + tally->why.mid(0, 3).join(u"; "_s);
                self->statusBar()->showMessage(summary, 15000);
                self->updateActions();
            });
    }
}

void FleetWindow::showContextMenu(const QPoint &position)
{
    QTableView *view = currentView();
    const QModelIndex index = view->indexAt(position);
    if (!index.isValid())
        return;
    QMenu menu(this);
    const Watched *server = serverOfRow(index);
    const QUuid id(index.data(ConversationListModel::IdRole).toString());
    if (server) {
        menu.addAction(tr("Open in %1's window").arg(server->label()), this,
                       [this, url = server->url, id] { open(url, id); });
        menu.addSeparator();
    }
    for (Action action : ConsoleController::AllActions) {
        if (m_actions.value(action)->isVisible())
            menu.addAction(m_actions.value(action));
    }
    menu.setToolTipsVisible(true);
    menu.exec(view->viewport()->mapToGlobal(position));
}

void FleetWindow::buildMenus()
{
    // The actions of a server's window, with its shortcuts, on the rows of every server.
    QMenu *conversation = menuBar()->addMenu(tr("&Conversation"));
    conversation->setToolTipsVisible(true);
    addToolBarBreak();
    QToolBar *tools = addToolBar(tr("Actions"));
    tools->setObjectName(u"actions"_s);
    tools->setMovable(false);
    for (Action action : ConsoleController::AllActions) {
        QAction *item = conversation->addAction(ConsoleController::actionName(action), this,
                                                [this, action] { trigger(action); });
        item->setShortcut(ConsoleActions::shortcutOf(action));
        item->setShortcutContext(Qt::WindowShortcut);
        tools->addAction(item);
        m_actions.insert(action, item);
    }
    QMenu *view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("&Find…"), this,
                    [this] {
                        m_filter->setFocus(Qt::ShortcutFocusReason);
                        m_filter->selectAll();
                    })
        ->setShortcut(QKeySequence::Find);
    view->addAction(tr("&Refresh"), this,
                    [this] {
                        for (const auto &watched : m_watched)
                            watched->controller->refresh();
                        if (m_activityDock->isVisible())
                            m_activity->refresh();
                    })
        ->setShortcut(QKeySequence(Qt::Key_F5));
    view->addSeparator();
    view->addAction(activityAction());
}

void FleetWindow::askForServer()
{
    AddServerDialog dialog(this);
    if (dialog.exec() != QDialog::Accepted || dialog.url().isEmpty())
        return;
    const QUrl server = dialog.url();
    const QString key = dialog.apiKey();
    addServer(server, key, dialog.name());
    if (key.isEmpty())
        return;
    ConsoleKeys::write(server, key).then([self = QPointer(this)](const QString &problem) {
        if (self)
            self->statusBar()->showMessage(
                problem.isEmpty() ? tr("The key is kept in the desktop's secret store")
                                  : tr("The key serves this session only (%1)").arg(problem),
                15000);
    });
}

void FleetWindow::askForName()
{
    QListWidgetItem *item = m_servers->currentItem();
    if (!item)
        return;
    const QUrl server = item->data(Qt::UserRole).toUrl();
    bool given = false;
    const QString name = QInputDialog::getText(
        this, tr("Name server"),
        tr("A name for %1 (empty: host:port):").arg(server.toString(QUrl::RemoveUserInfo)),
        QLineEdit::Normal, find(server) ? find(server)->name : QString(), &given);
    if (given)
        setServerName(server, name);
}

void FleetWindow::closeEvent(QCloseEvent *event)
{
    consoleSettings()->setValue(GeometryKey, saveGeometry());
    QMainWindow::closeEvent(event);
}

} // namespace AgentDeck
