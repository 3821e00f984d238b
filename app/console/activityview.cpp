#include "activityview.h"

#include "activityloader.h"
#include "consolecontroller.h"

#include <QColor>
#include <QComboBox>
#include <QCompleter>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// A refused attempt's result stands out; the colour is the view's, the model says only that.
class ActivityRows : public ActivityFilter
{
public:
    using ActivityFilter::ActivityFilter;
    QVariant data(const QModelIndex &index, int role) const override
    {
        if (role == Qt::ForegroundRole && index.column() == ActivityModel::ResultColumn &&
            !index.data(ActivityModel::DoneRole).toBool())
            return QColor(0xb7, 0x1c, 0x1c);
        return ActivityFilter::data(index, role);
    }
};
} // namespace

ActivityView::ActivityView(Scope scope, QWidget *parent)
    : QWidget(parent)
    , m_scope(scope)
    , m_model(new ActivityModel(this))
    , m_filter(new ActivityRows(this))
    , m_loader(new ActivityLoader(m_model, this))
    , m_table(new QTableView(this))
    , m_summary(new QLabel(this))
    , m_more(new QPushButton(tr("Load older"), this))
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    if (scope == Scope::Servers) {
        // Who and what are asked of the servers (their logs are long); the text and the
        // result are found in what was read.
        m_actor = new QComboBox(this);
        m_actor->setObjectName(u"activityActor"_s);
        m_actor->setEditable(true);
        m_actor->setInsertPolicy(QComboBox::NoInsert);
        m_actor->addItem(QString());
        m_actor->addItem(u"server"_s);
        m_actor->lineEdit()->setPlaceholderText(tr("Anyone"));
        m_actor->lineEdit()->setClearButtonEnabled(true);
        m_actor->completer()->setCaseSensitivity(Qt::CaseInsensitive);
        m_actor->setToolTip(tr("A key's name (ops-alice), or server for what its policies did"));
        m_actor->setMinimumContentsLength(14);
        m_action = new QComboBox(this);
        m_action->setObjectName(u"activityAction"_s);
        m_action->addItem(tr("Any action"), QString());
        for (const QString &action : knownAuditActions())
            m_action->addItem(action, action);
        m_text = new QLineEdit(this);
        m_text->setObjectName(u"activityText"_s);
        m_text->setPlaceholderText(tr("Find: conversation title or id, reason, replica"));
        m_text->setClearButtonEnabled(true);
        m_result = new QComboBox(this);
        m_result->setObjectName(u"activityResult"_s);
        m_result->addItem(tr("Done and refused"), QVariant::fromValue(ActivityFilter::Result::Any));
        m_result->addItem(tr("Done"), QVariant::fromValue(ActivityFilter::Result::Done));
        m_result->addItem(tr("Refused"), QVariant::fromValue(ActivityFilter::Result::Refused));
        m_refresh = new QPushButton(tr("Refresh"), this);
        m_refresh->setObjectName(u"activityRefresh"_s);
        auto *row = new QHBoxLayout;
        row->addWidget(m_actor);
        row->addWidget(m_action);
        row->addWidget(m_text, 1);
        row->addWidget(m_result);
        row->addWidget(m_refresh);
        layout->addLayout(row);

        m_queryDue.setSingleShot(true);
        m_queryDue.setInterval(300);
        connect(&m_queryDue, &QTimer::timeout, this, &ActivityView::applyQuery);
        connect(m_actor, &QComboBox::currentTextChanged, this, [this] { m_queryDue.start(); });
        connect(m_action, &QComboBox::currentIndexChanged, this, &ActivityView::applyQuery);
        connect(m_text, &QLineEdit::textChanged, this, [this](const QString &text) {
            m_filter->setText(text);
            // A whole id is asked of the servers: its records may be far down their logs.
            if (parseWireId(text.trimmed()) || m_model->query().conversationId != QUuid())
                applyQuery();
            updateSummary();
        });
        connect(m_result, &QComboBox::currentIndexChanged, this, [this] {
            m_filter->setResult(m_result->currentData().value<ActivityFilter::Result>());
            updateSummary();
        });
        connect(m_refresh, &QPushButton::clicked, this, &ActivityView::refresh);
    }

    m_filter->setSourceModel(m_model);
    m_table->setModel(m_filter);
    m_table->setObjectName(u"activityTable"_s);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    QHeaderView *header = m_table->horizontalHeader();
    header->setStretchLastSection(false);
    header->setSectionResizeMode(ActivityModel::ReasonColumn, QHeaderView::Stretch);
    const QFontMetrics metrics = m_table->fontMetrics();
    const auto widthOf = [&metrics](const QString &text) {
        return metrics.horizontalAdvance(text) + 16;
    };
    header->resizeSection(ActivityModel::TimeColumn, widthOf(u"2026-12-06 00:00:00 UTC"_s));
    header->resizeSection(ActivityModel::ServerColumn, widthOf(u"255.255.255.255:65535"_s));
    header->resizeSection(ActivityModel::ActorColumn, widthOf(u"anonymous via console"_s));
    header->resizeSection(ActivityModel::ActionColumn, widthOf(u"respond_to_confirmation"_s));
    header->resizeSection(ActivityModel::ConversationColumn, widthOf(u"a conversation's title"_s));
    header->resizeSection(ActivityModel::ResultColumn, widthOf(u"refused (409)"_s));
    // One server's: no Server column (shown once a second server is added).
    m_table->hideColumn(ActivityModel::ServerColumn);
    if (scope == Scope::Conversation) {
        // The narrow pane: each column as wide as what it holds (a conversation's records are
        // few), the reason taking the rest.
        m_table->hideColumn(ActivityModel::ConversationColumn);
        for (const int column : {ActivityModel::TimeColumn, ActivityModel::ActorColumn,
                                 ActivityModel::ActionColumn, ActivityModel::ResultColumn})
            header->setSectionResizeMode(column, QHeaderView::ResizeToContents);
    }
    layout->addWidget(m_table, 1);
    connect(m_table, &QAbstractItemView::activated, this, [this](const QModelIndex &index) {
        const auto id = parseWireId(index.data(ActivityModel::ConversationIdRole).toString());
        if (id)
            Q_EMIT conversationActivated(index.data(ActivityModel::SourceRole).toInt(), *id);
    });
    // Scrolled to the end, older records are read.
    connect(m_table->verticalScrollBar(), &QScrollBar::valueChanged, this, [this](int value) {
        if (value > 0 && value == m_table->verticalScrollBar()->maximum())
            readMore();
    });

    auto *footer = new QHBoxLayout;
    m_summary->setObjectName(u"activitySummary"_s);
    m_summary->setTextFormat(Qt::PlainText);
    m_summary->setWordWrap(true);
    m_more->setObjectName(u"activityMore"_s);
    m_more->setToolTip(tr("Read the records before the oldest shown (scrolling to the end does "
                          "too)"));
    connect(m_more, &QPushButton::clicked, this, &ActivityView::readMore);
    footer->addWidget(m_summary, 1);
    footer->addWidget(m_more);
    layout->addLayout(footer);

    connect(m_loader, &ActivityLoader::read, this, [this] {
        learnActors();
        updateSummary();
    });
    connect(m_filter, &QAbstractItemModel::rowsInserted, this, &ActivityView::updateSummary);
    connect(m_filter, &QAbstractItemModel::rowsRemoved, this, &ActivityView::updateSummary);
    connect(m_filter, &QAbstractItemModel::modelReset, this, &ActivityView::updateSummary);
    m_timer.setInterval(RefreshInterval);
    connect(&m_timer, &QTimer::timeout, this, &ActivityView::refresh);
    updateSummary();
}

ActivityView::~ActivityView() = default;

int ActivityView::addServer(const QString &label, ServerConnection *connection,
                            ConsoleController *controller)
{
    ActivityModel::TitleLookup titles;
    if (controller) {
        titles = [controller = QPointer(controller)](const QUuid &id) {
            const auto info =
                controller ? controller->conversations()->conversation(id) : std::nullopt;
            return info ? info->title : QString();
        };
    }
    const int source = m_model->addSource(label, std::move(titles));
    m_loader->setConnection(source, connection);
    // A change made shows at once; the refresh still reads the refused attempts, which the feed
    // does not carry.
    if (controller) {
        m_feeds.insert(source, connect(controller, &ConsoleController::lifecycleRecord, this,
                                       [this, source](const QJsonObject &record) {
                                           if (m_model->prependRecord(record, source))
                                               updateSummary();
                                       }));
    }
    m_table->setColumnHidden(ActivityModel::ServerColumn, m_model->liveSources().size() < 2);
    if (isVisible())
        refresh();
    return source;
}

void ActivityView::removeServer(int source)
{
    disconnect(m_feeds.take(source));
    m_model->removeSource(source);
    m_loader->setConnection(source, nullptr);
    m_table->setColumnHidden(ActivityModel::ServerColumn, m_model->liveSources().size() < 2);
    updateSummary();
}

void ActivityView::setServerLabel(int source, const QString &label)
{
    m_model->setSourceLabel(source, label);
}

void ActivityView::showConversation(const QUuid &id)
{
    if (id == m_conversation)
        return;
    m_conversation = id;
    AuditQuery query;
    query.conversationId = id;
    // No conversation: no records, rather than every conversation's.
    if (id.isNull()) {
        m_loader->setQuery(query);
        m_model->clear();
        updateSummary();
        return;
    }
    m_loader->setQuery(query);
    // Folded away, it is read once it is shown.
    if (isVisible())
        refresh();
}

void ActivityView::refresh()
{
    if (m_scope == Scope::Conversation && m_conversation.isNull())
        return;
    m_loader->refresh();
}

void ActivityView::applyQuery()
{
    AuditQuery query;
    query.actor = m_actor->currentText().trimmed();
    query.action = m_action->currentData().toString();
    query.conversationId = parseWireId(m_text->text().trimmed()).value_or(QUuid());
    m_loader->setQuery(query);
    refresh();
    updateSummary();
}

void ActivityView::readMore()
{
    if (m_model->hasMore())
        m_loader->readMore();
}

void ActivityView::learnActors()
{
    if (!m_actor)
        return;
    QStringList known;
    for (int i = 0; i < m_actor->count(); ++i)
        known.append(m_actor->itemText(i));
    for (int row = 0; row < m_model->rowCount(); ++row) {
        const QString actor = m_model->entry(row).actor;
        if (actor.isEmpty() || known.contains(actor))
            continue;
        known.append(actor);
        m_actor->addItem(actor);
    }
}

void ActivityView::updateSummary()
{
    const int shown = m_filter->rowCount();
    const int read = m_model->rowCount();
    QStringList parts;
    if (m_scope == Scope::Conversation && m_conversation.isNull())
        parts.append(QString());
    else if (read == 0 && !m_loader->isReading())
        parts.append(tr("No records"));
    else if (shown == read)
        parts.append(shown == 1 ? tr("1 record") : tr("%1 records").arg(shown));
    else
        parts.append(tr("%1 of the %2 records read match").arg(shown).arg(read));
    if (m_model->hasMore())
        parts.append(tr("older ones are read as the list is scrolled to its end"));
    for (const int source : m_model->liveSources()) {
        const QString problem = m_loader->problem(source);
        if (!problem.isEmpty())
            parts.append(m_model->liveSources().size() > 1
                             ? tr("%1: %2").arg(m_model->sourceLabel(source), problem)
                             : problem);
    }
    parts.removeAll(QString());
    m_summary->setText(parts.join(u" · "_s));
    m_more->setVisible(m_model->hasMore());
}

void ActivityView::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    refresh();
    m_timer.start();
}

void ActivityView::hideEvent(QHideEvent *event)
{
    QWidget::hideEvent(event);
    m_timer.stop();
}

} // namespace AgentDeck
