#include "conversationview.h"

#include "conversationlistmodel.h"
#include "lifecycle.h"
#include "statusbadgedelegate.h"

#include <QComboBox>
#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ConversationView::ConversationView(ConversationFilterProxy *proxy, QWidget *parent)
    : QTableView(parent)
    , m_proxy(proxy)
    , m_holdNotice(new QLabel(viewport()))
    , m_emptyNotice(new QLabel(tr("No conversations match"), viewport()))
{
    setModel(proxy);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    // Shift and Ctrl select several, Ctrl+A all that match the filter: for the bulk actions.
    setSelectionMode(QAbstractItemView::ExtendedSelection);
    // The title and the tags are edited through Rename (F2) and Edit tags: a double click
    // opens the conversation, and typing in the list is no edit.
    setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Not QAbstractItemModel::fetchMore(): a view asks for it whenever its last row is in
    // sight, so a short tab (Archived, or a filter finding three) read the whole catalog.
    connect(verticalScrollBar(), &QScrollBar::valueChanged, this, [this](int value) {
        if (value > 0 && value == verticalScrollBar()->maximum())
            Q_EMIT scrolledToEnd();
    });
    setSortingEnabled(true);
    sortByColumn(ConversationListModel::UpdatedColumn, Qt::DescendingOrder);
    // One server's rows: the column is for the All servers view. Beside the details pane the
    // list has no room for the durations: the details say them (Stats).
    hideColumn(ConversationListModel::ServerColumn);
    hideColumn(ConversationListModel::DurationColumn);
    // Badge columns as wide as their longest words, the rest to the title: sized to the rows,
    // they did not grow for rows added later, and left the title some 30 px.
    layOutColumns(this);
    setWordWrap(false);
    verticalHeader()->hide();
    setContextMenuPolicy(Qt::CustomContextMenu);

    m_holdNotice->setObjectName(u"holdNotice"_s);
    m_holdNotice->setTextFormat(Qt::PlainText);
    m_holdNotice->setStyleSheet(u"background: #fff8e1; color: #5d4037; padding: 2px 6px; "
                                "border-top: 1px solid #ffca28;"_s);
    m_holdNotice->hide();
    // An empty result was a blank list, as if nothing had been looked for.
    m_emptyNotice->setObjectName(u"emptyNotice"_s);
    m_emptyNotice->setAlignment(Qt::AlignCenter);
    m_emptyNotice->setStyleSheet(u"color: #757575;"_s);
    m_emptyNotice->hide();
    connect(proxy, &ConversationFilterProxy::searchChanged, this,
            &ConversationView::updateEmptyNotice);
    connect(proxy, &QAbstractItemModel::rowsInserted, this, &ConversationView::updateEmptyNotice);
    connect(proxy, &QAbstractItemModel::rowsRemoved, this, &ConversationView::updateEmptyNotice);
    connect(proxy, &QAbstractItemModel::modelReset, this, &ConversationView::updateEmptyNotice);
    connect(proxy, &QAbstractItemModel::layoutChanged, this, &ConversationView::updateEmptyNotice);
    viewport()->installEventFilter(this);
    connect(proxy, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex &, int first, int last) {
                // The first rows of an empty list sit below nothing: the pointer resting on
                // the console as it opened said "1 new at the bottom" of a list of one.
                if (!m_proxy->isOrderHeld() || m_proxy->rowCount() == last - first + 1)
                    return;
                m_newWhileHeld += last - first + 1;
                updateHoldNotice();
            });
    connect(proxy, &QAbstractItemModel::dataChanged, this, [this] {
        if (!m_proxy->isOrderHeld() || m_changedWhileHeld)
            return;
        m_changedWhileHeld = true;
        updateHoldNotice();
    });
}

bool ConversationView::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == viewport()) {
        if (event->type() == QEvent::Enter)
            hold(true);
        else if (event->type() == QEvent::Leave || event->type() == QEvent::Hide)
            hold(false);
    }
    return QTableView::eventFilter(watched, event);
}

void ConversationView::layOutColumns(QTableView *view)
{
    QHeaderView *header = view->horizontalHeader();
    const QFontMetrics metrics = view->fontMetrics();
    for (const auto &[column, kind] : {std::pair{int(ConversationListModel::ExecutionColumn),
                                                 StatusBadgeDelegate::Kind::Execution},
                                       std::pair{int(ConversationListModel::RuntimeColumn),
                                                 StatusBadgeDelegate::Kind::Runtime}}) {
        auto *delegate = new StatusBadgeDelegate(kind, view);
        view->setItemDelegateForColumn(column, delegate);
        header->setSectionResizeMode(column, QHeaderView::Interactive);
        header->resizeSection(column, delegate->columnWidth(metrics));
    }
    header->setSectionResizeMode(ConversationListModel::TitleColumn, QHeaderView::Stretch);
    header->setSectionResizeMode(ConversationListModel::UpdatedColumn, QHeaderView::Interactive);
    // Its widest text (toDisplayTime()), whatever the digits.
    int digit = 0;
    for (char16_t c = u'0'; c <= u'9'; ++c)
        digit = std::max(digit, metrics.horizontalAdvance(QChar(c)));
    header->resizeSection(ConversationListModel::UpdatedColumn,
                          metrics.horizontalAdvance(u"-- :: UTC"_s) + 14 * digit + 8);
    header->setSectionResizeMode(ConversationListModel::DurationColumn, QHeaderView::Interactive);
    header->resizeSection(ConversationListModel::DurationColumn,
                          metrics.horizontalAdvance(u"running for 59 min 59 s"_s) + 16);
    header->setSectionResizeMode(ConversationListModel::TagsColumn, QHeaderView::Interactive);
    header->resizeSection(ConversationListModel::TagsColumn, 100);
}

QComboBox *ConversationView::makeStatusFilter(QWidget *parent)
{
    auto *filter = new QComboBox(parent);
    filter->setObjectName(u"statusFilter"_s);
    filter->addItem(tr("Any status"));
    filter->addItem(tr("Needs attention"), u"needs_attention"_s);
    filter->addItem(tr("Failed"), u"failed"_s);
    filter->insertSeparator(filter->count());
    for (ExecutionStatus status :
         {ExecutionStatus::Idle, ExecutionStatus::Running, ExecutionStatus::Paused,
          ExecutionStatus::WaitingForConfirmation, ExecutionStatus::Finished,
          ExecutionStatus::Error, ExecutionStatus::Stuck})
        filter->addItem(Lifecycle::executionLabel(status), toString(status));
    return filter;
}

ConversationSearch ConversationView::searchOf(const QString &text, const QComboBox *statusFilter)
{
    const QString chosen = statusFilter->currentData().toString();
    ConversationSearch search = ConversationSearch::parse(text, executionStatusFromString(chosen));
    if (chosen == u"needs_attention"_s)
        search.concern = ConversationSearch::Concern::NeedsAttention;
    else if (chosen == u"failed"_s)
        search.concern = ConversationSearch::Concern::Failed;
    return search;
}

void ConversationView::resizeEvent(QResizeEvent *event)
{
    QTableView::resizeEvent(event);
    updateHoldNotice();
    updateEmptyNotice();
}

void ConversationView::updateEmptyNotice()
{
    const bool show = m_proxy->rowCount() == 0 && !m_proxy->search().isEmpty();
    m_emptyNotice->setVisible(show);
    if (show)
        m_emptyNotice->setGeometry(viewport()->rect());
}

void ConversationView::hold(bool held)
{
    if (held == m_proxy->isOrderHeld())
        return;
    m_changedWhileHeld = false;
    m_newWhileHeld = 0;
    m_proxy->holdOrder(held);
    updateHoldNotice();
    // Sorted again, the selected conversation may have moved out of sight.
    if (!held && currentIndex().isValid())
        scrollTo(currentIndex());
}

void ConversationView::updateHoldNotice()
{
    const bool show = m_proxy->isOrderHeld() && (m_changedWhileHeld || m_newWhileHeld > 0);
    m_holdNotice->setVisible(show);
    if (!show)
        return;
    QString text = tr("Order held while the pointer is on the list; it sorts again when the "
                      "pointer leaves");
    if (m_newWhileHeld > 0)
        text += tr(" · %n new at the bottom", nullptr, m_newWhileHeld);
    m_holdNotice->setText(text);
    m_holdNotice->setToolTip(text);
    const int height = m_holdNotice->sizeHint().height();
    m_holdNotice->setGeometry(0, viewport()->height() - height, viewport()->width(), height);
    m_holdNotice->raise();
}

} // namespace AgentDeck
