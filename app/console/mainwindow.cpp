#include "mainwindow.h"

#include "activityview.h"
#include "banner.h"
#include "consolesettings.h"
#include "consoletray.h"
#include "conversationview.h"
#include "detailspane.h"
#include "lifecycle.h"
#include "replicasdialog.h"
#include "timelineview.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using Action = ConsoleController::Action;
static constexpr const auto &AllActions = ConsoleController::AllActions;

MainWindow::MainWindow(ConsoleController *controller, const QUrl &server, QWidget *parent)
    : QMainWindow(parent)
    , m_controller(controller)
    , m_activeProxy(new ConversationFilterProxy(ArchiveFilter::Active, this))
    , m_archivedProxy(new ConversationFilterProxy(ArchiveFilter::Archived, this))
{
    // "http://admin:secret@host" put the password on screen, and in the tray's tooltip.
    const QString serverLabel = server.toString(QUrl::RemoveUserInfo);
    // The window system adds " — AgentDeck" (the application's display name).
    setWindowTitle(serverLabel);
    resize(1280, 760);

    auto *central = new QWidget(this);
    auto *layout = new QVBoxLayout(central);

    m_banner = new Banner(central);

    // Actions, in a tool bar: where the window is too narrow for all of them (1,024 px), the
    // last go into its extension menu instead of holding the window wide.
    QToolBar *actions = addToolBar(tr("Actions"));
    actions->setObjectName(u"actions"_s);
    actions->setMovable(false);
    actions->setFloatable(false);
    m_newButton = new QPushButton(tr("New…"), actions);
    m_newButton->setObjectName(u"newButton"_s);
    m_newButton->setToolTip(tr("Create a conversation"));
    connect(m_newButton, &QPushButton::clicked, this, &MainWindow::createConversation);
    actions->addWidget(m_newButton);
    actions->addSeparator();
    for (Action action : AllActions) {
        auto *button = new QPushButton(ConsoleController::actionName(action), actions);
        button->setObjectName(ConsoleController::actionName(action).toLower().remove(u' ') +
                              u"Button"_s);
        connect(button, &QPushButton::clicked, this, [this, action] { trigger(action); });
        m_buttons.insert(action, button);
        // Shown and hidden through its action: the tool bar lays out what its actions say.
        m_buttonSlots.insert(action, actions->addWidget(button));
    }
    // Above the tabs it filters, always in sight.
    m_filter = new QLineEdit(central);
    m_filter->setPlaceholderText(tr("Find: title, id, tag (team=ops), or a tag's name"));
    m_filter->setToolTip(
        tr("Words are found in titles, as the start of an id, or as a tag's name; name=value "
           "(or name:value) asks for that tag. The server is searched too."));
    m_filter->setClearButtonEnabled(true);
    m_filter->setMinimumWidth(200);
    m_statusFilter = ConversationView::makeStatusFilter(central);

    // The list and the detail pane.
    auto *splitter = m_splitter = new QSplitter(Qt::Horizontal, central);
    auto *listSide = new QWidget(splitter);
    auto *listLayout = new QVBoxLayout(listSide);
    listLayout->setContentsMargins(0, 0, 0, 0);
    m_filter->setParent(listSide);
    m_statusFilter->setParent(listSide);
    auto *findRow = new QHBoxLayout;
    findRow->addWidget(m_filter, 1);
    findRow->addWidget(m_statusFilter);
    listLayout->addLayout(findRow);
    m_tabs = new QTabWidget(listSide);
    m_activeView = makeView(m_activeProxy);
    m_archivedView = makeView(m_archivedProxy);
    m_tabs->addTab(m_activeView, {});
    m_tabs->addTab(m_archivedView, {});
    listLayout->addWidget(m_tabs, 1);
    splitter->addWidget(listSide);

    auto *detail = new QWidget(splitter);
    auto *detailLayout = new QVBoxLayout(detail);
    detailLayout->setContentsMargins(0, 0, 0, 0);
    m_details = new DetailsPane(controller, detail);
    detailLayout->addWidget(m_details);
    m_timeline = new TimelineView(controller->timeline(), detail);
    detailLayout->addWidget(m_timeline, 1);
    m_message = new QLineEdit(detail);
    m_message->setPlaceholderText(
        tr("Send a message to the selected conversation (Enter runs it)"));
    connect(m_message, &QLineEdit::returnPressed, this, &MainWindow::sendTypedMessage);
    detailLayout->addWidget(m_message);
    splitter->addWidget(detail);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    // The list first: its badge columns are wide, and its titles are what an operator scans.
    splitter->setSizes({900, 380});
    layout->addWidget(splitter, 1);
    // Below the list, so that its coming and going moves no button or row: it comes when the
    // server is lost, which is when an operator is clicking, and at the top it pushed
    // everything down under the pointer.
    layout->addWidget(m_banner);
    setCentralWidget(central);

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 0);
    m_progress->setMaximumWidth(160);
    m_progress->hide();
    statusBar()->addPermanentWidget(m_progress);
    // A widget rather than the bar's message: "Delete done" for 4 s left the bar empty after.
    m_connectionState = new QLabel(tr("Connected to %1").arg(serverLabel), this);
    statusBar()->addWidget(m_connectionState, 1);
    // Always in sight while it holds: an operator about to run an agent's commands on this
    // server must know they run with the server's view of the machine.
    m_isolationState = new QLabel(this);
    m_isolationState->setObjectName(u"isolationState"_s);
    m_isolationState->setStyleSheet(u"color: #b71c1c; font-weight: bold;"_s);
    m_isolationState->hide();
    statusBar()->addPermanentWidget(m_isolationState);
    // A webhook that keeps failing: the tools it tells hear nothing meanwhile.
    auto *webhookState = new QLabel(this);
    webhookState->setObjectName(u"webhookState"_s);
    webhookState->setStyleSheet(u"color: #b71c1c; font-weight: bold;"_s);
    webhookState->hide();
    statusBar()->addPermanentWidget(webhookState);
    connect(controller, &ConsoleController::webhookWarningChanged, webhookState,
            [webhookState](const QString &warning) {
                webhookState->setText(tr("⚠ Webhook failing"));
                webhookState->setToolTip(warning);
                webhookState->setVisible(!warning.isEmpty());
            });
    // The servers sharing this one's catalog: what `ctl replicas` lists.
    m_replicasButton = new QToolButton(this);
    m_replicasButton->setObjectName(u"replicasButton"_s);
    m_replicasButton->setText(tr("Replicas…"));
    m_replicasButton->setAutoRaise(true);
    connect(m_replicasButton, &QToolButton::clicked, this, &MainWindow::showReplicas);
    statusBar()->addPermanentWidget(m_replicasButton);
    // Who changed what, and why: the server's audit log, below the list and the details.
    m_activity = new ActivityView(ActivityView::Scope::Servers, this);
    m_activity->addServer(serverLabel, controller->connection(), controller);
    connect(m_activity, &ActivityView::conversationActivated, this,
            [this](int, const QUuid &id) { selectConversation(id); });
    m_activityDock = new QDockWidget(tr("Activity"), this);
    m_activityDock->setObjectName(u"activity"_s);
    m_activityDock->setWidget(m_activity);
    addDockWidget(Qt::BottomDockWidgetArea, m_activityDock);
    m_activityDock->hide();
    QAction *showActivity = m_activityDock->toggleViewAction();
    showActivity->setText(tr("&Activity"));
    showActivity->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_A));
    showActivity->setToolTip(tr("Who changed what, when and why (Ctrl+Shift+A)"));
    connect(showActivity, &QAction::toggled, this, [this](bool shown) {
        if (shown)
            m_activity->table()->setFocus(Qt::ShortcutFocusReason);
    });
    m_activityButton = new QToolButton(this);
    m_activityButton->setObjectName(u"activityButton"_s);
    m_activityButton->setDefaultAction(showActivity);
    m_activityButton->setAutoRaise(true);
    statusBar()->addPermanentWidget(m_activityButton);
    connect(controller, &ConsoleController::isolationWarningChanged, this,
            [this](const QString &warning) {
                m_isolationState->setText(warning.isEmpty() ? QString()
                                                            : tr("⚠ Commands not isolated"));
                m_isolationState->setToolTip(warning);
                m_isolationState->setVisible(!warning.isEmpty());
            });

    // The loaded rows are filtered at once; the server is asked once typing pauses.
    auto *serverSearch = new QTimer(this);
    serverSearch->setSingleShot(true);
    serverSearch->setInterval(300);
    connect(serverSearch, &QTimer::timeout, this, &MainWindow::searchOnServer);
    const auto applySearch = [this, serverSearch] {
        const ConversationSearch search =
            ConversationView::searchOf(m_filter->text(), m_statusFilter);
        m_activeProxy->setSearch(search);
        m_archivedProxy->setSearch(search);
        serverSearch->start();
        updateTabTitles();
    };
    connect(m_filter, &QLineEdit::textChanged, this, applySearch);
    connect(m_statusFilter, &QComboBox::currentIndexChanged, this, applySearch);
    connect(m_tabs, &QTabWidget::currentChanged, this, [this] {
        const auto info = currentConversation();
        m_controller->select(info ? info->id : QUuid());
        updateActions();
        readMoreIfShort();
    });
    connect(controller, &ConsoleController::busyChanged, m_progress,
            [this](bool busy) { m_progress->setVisible(busy || m_bulkRunning); });
    connect(controller, &ConsoleController::bulkProgress, this, [this](int finished, int total) {
        m_progress->setRange(0, total);
        m_progress->setValue(finished);
        m_progress->setFormat(tr("%v of %m"));
        m_progress->setTextVisible(true);
        m_progress->show();
    });
    connect(controller, &ConsoleController::actingChanged, this, &MainWindow::updateActions);
    connect(controller, &ConsoleController::failed, m_banner, &Banner::say);
    // "Archive got no answer" stays until a later refresh shows what the server has, and goes
    // then: the row says whether the action took effect.
    connect(controller, &ConsoleController::outcomeUnknown, this, [this](const QString &sentence) {
        m_unsettledText = sentence;
        m_banner->say(sentence);
    });
    connect(controller, &ConsoleController::outcomeSettled, this,
            [this] { m_banner->withdraw(m_unsettledText); });
    // The status bar says whether the list is current; a banner tells when it stops being, and
    // goes once it is again, unless it says something else by then.
    connect(controller, &ConsoleController::reachabilityChanged, this,
            [this, serverLabel](bool reachable, const QString &why) {
                showReachability(serverLabel, reachable, why);
            });
    connect(controller, &ConsoleController::actionFinished, this,
            [this](Action action, bool ok, const QUuid &id) {
                // recovered() said what Recover did.
                if (!ok || action == Action::Recover)
                    return;
                // A pause lets the step finish, and an interrupt is carried out after the answer; a
                // pause of a conversation waiting for confirmation is done at once.
                const auto info = m_controller->conversations()->conversation(id);
                const bool requested = (action == Action::Pause || action == Action::Interrupt) &&
                                       (!info || info->executionStatus == ExecutionStatus::Running);
                statusBar()->showMessage((requested ? tr("%1 requested") : tr("%1 done"))
                                             .arg(ConsoleController::actionName(action)),
                                         4000);
            });
    connect(controller, &ConsoleController::recovered, this,
            [this](const QUuid &, const QString &sentence) {
                statusBar()->showMessage(sentence, 8000);
            });
    m_tabTitlesDue.setSingleShot(true);
    m_tabTitlesDue.setInterval(100);
    connect(&m_tabTitlesDue, &QTimer::timeout, this, &MainWindow::updateTabTitles);
    for (ConversationFilterProxy *proxy : {m_activeProxy, m_archivedProxy}) {
        connect(proxy, &QAbstractItemModel::rowsInserted, this, &MainWindow::updateTabTitles);
        connect(proxy, &QAbstractItemModel::rowsRemoved, this, &MainWindow::updateTabTitles);
        connect(proxy, &QAbstractItemModel::modelReset, this, &MainWindow::updateTabTitles);
        connect(proxy, &QAbstractItemModel::layoutChanged, this, &MainWindow::updateTabTitles);
        // A row's change may change what needs attention; counted once per 100 ms at most (a
        // followed run changes its row with every event).
        connect(proxy, &QAbstractItemModel::dataChanged, this, [this] {
            if (!m_tabTitlesDue.isActive())
                m_tabTitlesDue.start();
        });
    }
    // The durations' tick changes nothing an action depends on.
    connect(controller->conversations(), &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex &topLeft, const QModelIndex &bottomRight) {
                if (topLeft.column() != ConversationListModel::DurationColumn ||
                    bottomRight.column() != ConversationListModel::DurationColumn)
                    updateActions();
            });
    connect(controller, &ConsoleController::refreshed, this, &MainWindow::updateTabTitles);
    connect(controller, &ConsoleController::refreshed, this, &MainWindow::readMoreIfShort);

    buildMenus();
    setWindowIcon(ConsoleTray::appIcon());
    m_tray = new ConsoleTray(controller, serverLabel, this);
    connect(m_tray, &ConsoleTray::showRequested, this, &MainWindow::bringUp);
    connect(m_tray, &ConsoleTray::conversationRequested, this, [this](const QUuid &id) {
        bringUp();
        selectConversation(id);
    });
    updateTabTitles();
    // Opened on a controller that watched the server before (the All servers window's): what
    // it found out meanwhile.
    if (!controller->isReachable())
        showReachability(serverLabel, false, controller->unreachableReason());
    updateActions();
    restoreLayout();
}

MainWindow::~MainWindow()
{
    saveLayout();
}

QLabel *MainWindow::banner() const
{
    return m_banner->label();
}

QLabel *MainWindow::heading() const
{
    return m_details->heading();
}

QLabel *MainWindow::headingId() const
{
    return m_details->headingId();
}

QTableView *MainWindow::currentView() const
{
    return m_tabs->currentIndex() == 0 ? m_activeView : m_archivedView;
}

std::optional<ConversationInfo> MainWindow::currentConversation() const
{
    const QModelIndex index = currentView()->selectionModel()->currentIndex();
    if (!index.isValid())
        return std::nullopt;
    return index.data(ConversationListModel::ConversationRole).value<ConversationInfo>();
}

QList<ConversationInfo> MainWindow::selectedConversations() const
{
    QModelIndexList rows = currentView()->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(),
              [](const QModelIndex &a, const QModelIndex &b) { return a.row() < b.row(); });
    QList<ConversationInfo> chosen;
    for (const QModelIndex &row : std::as_const(rows))
        chosen.append(row.data(ConversationListModel::ConversationRole).value<ConversationInfo>());
    return chosen;
}

bool MainWindow::selectConversation(const QUuid &id)
{
    for (QTableView *view : {m_activeView, m_archivedView}) {
        auto *proxy = static_cast<ConversationFilterProxy *>(view->model());
        const int sourceRow = m_controller->conversations()->rowOf(id);
        if (sourceRow < 0)
            return false;
        const QModelIndex index =
            proxy->mapFromSource(m_controller->conversations()->index(sourceRow, 0));
        if (!index.isValid())
            continue;
        m_tabs->setCurrentWidget(view);
        view->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect |
                                                           QItemSelectionModel::Rows);
        return true;
    }
    return false;
}

void MainWindow::updateActions()
{
    const auto info = currentConversation();
    // One action at a time on a conversation: a second click before the first's answer gave
    // "Accept done" and "Accept failed" together.
    const bool acting = info && m_controller->isActingOn(info->id);
    // Several rows selected: an action that applies to all of them is offered when it can be
    // done to one at least, and says to how many.
    const QList<ConversationInfo> chosen = selectedConversations();
    const auto bulkAvailability = [&](Action action) -> Lifecycle::Availability {
        if (ConsoleActions::isBulk(action) && !m_controller->isReachable())
            return {false, tr("The server does not answer")};
        if (ConsoleActions::isBulk(action) && m_bulkRunning)
            return {false, tr("Waiting for the actions on the selected conversations")};
        QList<ConsoleActions::Row> rows;
        for (const ConversationInfo &info : chosen)
            rows.append({info, true});
        return ConsoleActions::availability(action, rows);
    };
    for (auto it = m_buttons.cbegin(); it != m_buttons.cend(); ++it) {
        const Lifecycle::Availability state =
            chosen.size() > 1 ? bulkAvailability(it.key())
            : !info           ? Lifecycle::Availability{false, tr("Select a conversation first")}
            : !m_controller->isReachable()
                ? Lifecycle::Availability{false, tr("The server does not answer; the row is "
                                                    "what it last said")}
            : acting ? Lifecycle::Availability{false, tr("Waiting for the server to answer")}
            : it.key() == Action::Pause && m_controller->conversations()->isPausing(info->id)
                ? Lifecycle::Availability{false, tr("Pausing: the run stops after its step")}
                : ConsoleController::availability(it.key(), *info);
        // A button disabled while it has the focus hands it down the tab chain, to the filter,
        // which selected its text: the next key typed after any action replaced the filter.
        if (!state.enabled && it.value()->hasFocus())
            currentView()->setFocus(Qt::OtherFocusReason);
        it.value()->setEnabled(state.enabled);
        it.value()->setToolTip(state.enabled && chosen.size() <= 1
                                   ? ConsoleActions::whatItDoes(it.key(), *info)
                                   : state.reason);
        if (QAction *item = m_menuActions.value(it.key())) {
            item->setEnabled(state.enabled);
            item->setToolTip(state.reason);
        }
    }
    // One place for the two ways to a fresh sandbox: Start fresh where the runtime expired.
    const bool expired = info && Lifecycle::isExpired(*info);
    m_buttonSlots.value(Action::StartFresh)->setVisible(expired);
    m_buttonSlots.value(Action::Reprovision)->setVisible(!expired);
    const Lifecycle::Availability sending =
        !info ? Lifecycle::Availability{false, tr("Select a conversation first")}
        : !m_controller->isReachable()
            ? Lifecycle::Availability{false, tr("The server does not answer")}
            : Lifecycle::canSendMessage(*info);
    const QString noEdit = !info                          ? tr("Select a conversation first")
                           : !m_controller->isReachable() ? tr("The server does not answer")
                                                          : QString();
    for (QAction *edit : {m_renameAction, m_editTagsAction}) {
        if (!edit)
            continue; // before the menus are built
        edit->setEnabled(noEdit.isEmpty());
        edit->setToolTip(noEdit);
    }
    m_details->showConversation(info);
    m_message->setEnabled(sending.enabled);
    m_message->setToolTip(sending.reason);
}

void MainWindow::showReachability(const QString &serverLabel, bool reachable, const QString &why)
{
    // Rows of a server that does not answer are what it last said: greyed, and dated.
    for (QTableView *view : {m_activeView, m_archivedView})
        view->setStyleSheet(reachable ? QString() : u"QTableView { color: gray; }"_s);
    updateActions();
    if (reachable) {
        m_connectionState->setText(tr("Connected to %1").arg(serverLabel));
        m_banner->withdraw(m_unreachableText);
        return;
    }
    const QDateTime asOf = m_controller->lastRefreshed();
    QString state =
        asOf.isValid()
            ? tr("Cannot refresh from %1; the list is as of %2")
                  .arg(serverLabel, asOf.toString(u"HH:mm:ss"_s))
            : tr("Cannot refresh from %1; the list shows what it last knew").arg(serverLabel);
    if (m_controller->needsKey())
        state = tr("%1 asks for its session API key").arg(serverLabel);
    m_connectionState->setText(state);
    m_unreachableText = why;
    if (m_controller->needsKey())
        keyNeeded(why);
    else
        m_banner->say(why);
}

void MainWindow::showReplicas()
{
    if (!m_replicas)
        m_replicas = new ReplicasDialog(m_controller->connection(), this);
    m_replicas->show();
    m_replicas->raise();
    m_replicas->refresh();
}

void MainWindow::bringUp()
{
    showNormal();
    raise();
    activateWindow();
}

void MainWindow::restoreLayout()
{
    const auto settings = consoleSettings();
    restoreGeometry(settings->value(u"layout/window"_s).toByteArray());
    m_splitter->restoreState(settings->value(u"layout/splitter"_s).toByteArray());
    for (auto [view, key] : {std::pair{m_activeView, u"layout/activeColumns"_s},
                             std::pair{m_archivedView, u"layout/archivedColumns"_s}}) {
        QHeaderView *header = view->horizontalHeader();
        // A state of other columns (an older console's) would leave a column out or hide one.
        const int columns = header->count();
        if (!header->restoreState(settings->value(key).toByteArray()) || header->count() != columns)
            continue;
        // The state brings the sort indicator; the rows follow it.
        view->sortByColumn(header->sortIndicatorSection(), header->sortIndicatorOrder());
        // A state of fewer columns shows the ones it did not know.
        view->hideColumn(ConversationListModel::ServerColumn);
        view->hideColumn(ConversationListModel::DurationColumn);
    }
}

void MainWindow::saveLayout() const
{
    const auto settings = consoleSettings();
    settings->setValue(u"layout/window"_s, saveGeometry());
    settings->setValue(u"layout/splitter"_s, m_splitter->saveState());
    settings->setValue(u"layout/activeColumns"_s, m_activeView->horizontalHeader()->saveState());
    settings->setValue(u"layout/archivedColumns"_s,
                       m_archivedView->horizontalHeader()->saveState());
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    const ConversationListModel *rows = m_controller->conversations();
    const auto running = [rows] {
        int count = 0;
        for (int row = 0; row < rows->rowCount(); ++row)
            count += rows->at(row).executionStatus == ExecutionStatus::Running ? 1 : 0;
        return count;
    };
    const int runs = m_embedded && !m_keptInBackground ? running() : 0;
    if (runs == 0) {
        event->accept();
        return;
    }
    // Closed, the embedded server stops with the window: its runs paused, a command in flight
    // interrupted after the grace. That was done without a word.
    QMessageBox box(QMessageBox::Question, tr("Runs are going on"),
                    tr("%n conversation(s) of this window's own server are running. Closing "
                       "stops the server, which pauses them (a command still running after a "
                       "few seconds is interrupted).",
                       nullptr, runs),
                    QMessageBox::NoButton, this);
    QPushButton *stop = box.addButton(tr("Stop them and quit"), QMessageBox::DestructiveRole);
    QPushButton *keep =
        box.addButton(tr("Keep the server running until they end"), QMessageBox::AcceptRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(keep);
    box.exec();
    if (box.clickedButton() == stop) {
        event->accept();
        return;
    }
    event->ignore();
    if (box.clickedButton() != keep)
        return;
    // Hidden, not closed: the application goes on, and quits once nothing runs.
    m_keptInBackground = true;
    hide();
    connect(m_controller, &ConsoleController::refreshed, this, [this, running] {
        if (m_keptInBackground && running() == 0) {
            m_keptInBackground = false;
            Q_EMIT keptRunsEnded();
        }
    });
}

} // namespace AgentDeck
