#include "mainwindow.h"

#include "consolecontroller.h"
#include "conversationview.h"
#include "lifecycle.h"

#include <QComboBox>
#include <QLineEdit>
#include <QPointer>
#include <QScrollBar>
#include <QTabWidget>
#include <QTableView>

using namespace Qt::StringLiterals;

// MainWindow: the list's tabs: their views, their counts, reading more rows as they are
// scrolled, and the filter box's search on the server.

namespace AgentDeck {

QTableView *MainWindow::makeView(ConversationFilterProxy *proxy)
{
    proxy->setSourceModel(m_controller->conversations());
    // Connected before the view's selection model, which moves the current row as rows go:
    // the handler below must know that this is why it moved.
    connect(proxy, &QAbstractItemModel::rowsAboutToBeRemoved, this,
            [this] { m_rowsLeaving = true; });
    connect(proxy, &QAbstractItemModel::rowsRemoved, this, [this] { m_rowsLeaving = false; });
    auto *view = new ConversationView(proxy, this);
    connect(view, &QWidget::customContextMenuRequested, this, &MainWindow::showContextMenu);
    connect(view, &ConversationView::scrolledToEnd, this, [this, proxy] { readMore(proxy); });
    // Enter (or a double click) opens the conversation: what to type next goes to it.
    connect(view, &QAbstractItemView::activated, this,
            [this] { m_message->setFocus(Qt::OtherFocusReason); });
    connect(view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this, view] {
        if (view == currentView())
            updateActions();
    });
    connect(view->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this, view] {
        if (view != currentView())
            return;
        const auto info = currentConversation();
        const QUuid selected = m_controller->selected();
        // When the selected conversation leaves the list (archived, deleted, filtered out), Qt
        // makes its neighbour current while the row is still there: a double-click on Archive
        // archived the neighbour too, and interrupted its run. Once the removal is over,
        // nothing is selected instead.
        if (m_rowsLeaving && info && !selected.isNull() && info->id != selected) {
            QMetaObject::invokeMethod(
                this,
                [this, view, selected] {
                    // Unless another was selected meanwhile; the controller lets go of a
                    // conversation deleted from here itself.
                    const QUuid now = m_controller->selected();
                    if (view == currentView() && (now == selected || now.isNull()) &&
                        !shows(view, selected))
                        view->selectionModel()->clear(); // and back here, with no current row
                },
                Qt::QueuedConnection);
            return;
        }
        m_controller->select(info ? info->id : QUuid());
        updateActions();
    });
    return view;
}

void MainWindow::searchOnServer()
{
    const QString text = m_filter->text();
    const QVariant status = m_statusFilter->currentData();
    ConversationSearch search = m_activeProxy->search();
    m_controller->findOnServer(search).then(
        [self = QPointer(this), text, status, search](QSet<QUuid> inEvents) mutable {
            // Typed on meanwhile: that search is asked for already.
            if (!self || self->m_filter->text() != text ||
                self->m_statusFilter->currentData() != status || inEvents.isEmpty())
                return;
            search.foundInEvents = std::move(inEvents);
            self->m_activeProxy->setSearch(search);
            self->m_archivedProxy->setSearch(search);
            self->updateTabTitles();
        });
}

void MainWindow::readMore(ConversationFilterProxy *proxy)
{
    // A search finds its rows on the server (findOnServer); without one, the end of the rows
    // read so far is where the next ones are read.
    if (proxy->search().isEmpty() && m_controller->hasMore(proxy->partition()))
        m_controller->loadMore(proxy->partition());
}

void MainWindow::readMoreIfShort()
{
    // A tab whose rows do not fill it cannot be scrolled to its end: "Archived (0 of 40)",
    // its forty past the rows a refresh reads, stayed empty.
    // (Hidden, in the tray, a view has no size to fill.)
    auto *view = static_cast<ConversationView *>(currentView());
    if (view->isVisible() && view->verticalScrollBar()->maximum() == 0)
        readMore(view->proxy());
}

bool MainWindow::shows(QTableView *view, const QUuid &id) const
{
    const int sourceRow = m_controller->conversations()->rowOf(id);
    if (sourceRow < 0)
        return false;
    const auto *proxy = static_cast<ConversationFilterProxy *>(view->model());
    return proxy->mapFromSource(m_controller->conversations()->index(sourceRow, 0)).isValid();
}

void MainWindow::updateTabTitles()
{
    // A refresh reads the most recently updated conversations (ConsoleController::RefreshedRows)
    // and scrolling reads more: short of them all, a tab says how many the server has ("1000
    // of 5301"), or with a filter typed, that there may be more.
    const auto count = [this](ConversationFilterProxy *proxy, ArchiveFilter partition) {
        const qint64 shown = proxy->rowCount();
        if (m_controller->isListComplete())
            return QString::number(shown);
        const std::optional<qint64> total = m_controller->serverCount(partition);
        if (!m_filter->text().isEmpty() || !total)
            return tr("%1+").arg(shown);
        return shown >= *total ? QString::number(shown) : tr("%1 of %2").arg(shown).arg(*total);
    };
    // What needs attention is said where the operator looks first: without a system tray
    // (many desktops, a server's X forwarding) two rows waiting among fifty said nothing.
    const auto attention = [](ConversationFilterProxy *proxy) {
        const auto *source = static_cast<const ConversationListModel *>(proxy->sourceModel());
        int needing = 0;
        for (int row = 0; row < proxy->rowCount(); ++row) {
            const int sourceRow = proxy->mapToSource(proxy->index(row, 0)).row();
            needing += Lifecycle::needsAttention(source->at(sourceRow)) ? 1 : 0;
        }
        return needing == 0   ? QString()
               : needing == 1 ? tr(", 1 needs attention")
                              : tr(", %1 need attention").arg(needing);
    };
    m_tabs->setTabText(
        0, tr("Active (%1%2)")
               .arg(count(m_activeProxy, ArchiveFilter::Active), attention(m_activeProxy)));
    m_tabs->setTabText(
        1, tr("Archived (%1%2)")
               .arg(count(m_archivedProxy, ArchiveFilter::Archived), attention(m_archivedProxy)));
}

} // namespace AgentDeck
