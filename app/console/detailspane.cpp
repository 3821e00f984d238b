#include "detailspane.h"

#include "activityview.h"
#include "consolecontroller.h"
#include "lifecycle.h"

#include <QFormLayout>
#include <QFrame>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QLocale>
#include <QPointer>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// The date only when it is not today's: a line that stays short keeps the lines below it
// where they are.
QString when(const QDateTime &time)
{
    return toDisplayTime(time, /*dateUnlessToday=*/true);
}

QString seconds(qint64 ms)
{
    return DetailsPane::tr("%1 s").arg((std::abs(ms) + 500) / 1000);
}

// The sandbox policy as runtime_info.sandbox describes it: the mechanism, the network, the
// limits set, and what this machine could not enforce.
QString sandboxText(const QJsonObject &sandbox)
{
    if (sandbox.isEmpty())
        return DetailsPane::tr("not described by this server");
    QStringList parts{sandbox.value(u"isolation"_s).toString(),
                      DetailsPane::tr("network %1").arg(sandbox.value(u"network"_s).toString())};
    for (auto it = sandbox.constBegin(); it != sandbox.constEnd(); ++it) {
        if (it.value().isDouble() && it.value().toInteger() > 0)
            parts.append(
                u"%1 %2"_s.arg(QString(it.key()).replace(u'_', u' ')).arg(it.value().toInteger()));
    }
    QStringList unenforced;
    for (const QJsonValue &name : sandbox.value(u"not_enforced"_s).toArray())
        unenforced.append(name.toString());
    parts.removeAll(QString());
    return parts.join(u" · "_s) + u"\n"_s +
           (unenforced.isEmpty()
                ? DetailsPane::tr("All of it is enforced")
                : DetailsPane::tr("Not enforced here: %1").arg(unenforced.join(u", "_s)));
}

// The agent's kind, and for a model's agent its model and endpoint; never its key.
QString agentText(const ConversationInfo &info)
{
    const QJsonObject llm = info.agentConfig.value(u"llm"_s).toObject();
    if (info.agentKind != u"llm"_s)
        return info.agentKind;
    const QString model = llm.value(u"model"_s).toString();
    const QString endpoint = llm.value(u"base_url"_s).toString();
    return DetailsPane::tr("llm · model %1 · %2")
        .arg(model.isEmpty() ? DetailsPane::tr("the server's default") : model,
             endpoint.isEmpty() ? DetailsPane::tr("the server's endpoint") : endpoint);
}

QString statsText(const ConversationInfo &info)
{
    QString text = info.eventCount == 1 ? DetailsPane::tr("1 event")
                                        : DetailsPane::tr("%1 events").arg(info.eventCount);
    if (info.lastEventAt)
        text += DetailsPane::tr(", the last at %1").arg(when(*info.lastEventAt));
    // What the list of All servers says in its Duration column.
    if (info.executionStatus == ExecutionStatus::Running && info.runningSince)
        text += DetailsPane::tr("\nrunning since %1").arg(when(*info.runningSince));
    else if (info.outcome && info.outcome->startedAt.isValid() && info.outcome->at.isValid())
        text += DetailsPane::tr("\nthe last command ran for %1")
                    .arg(ConversationListModel::durationText(
                        info.outcome->startedAt.msecsTo(info.outcome->at)));
    if (info.llmRequests > 0)
        text += DetailsPane::tr("\n%1 prompt + %2 completion tokens in %3 model requests")
                    .arg(info.promptTokens)
                    .arg(info.completionTokens)
                    .arg(info.llmRequests) +
                (info.llmRetries > 0 ? DetailsPane::tr(" (%1 retried)").arg(info.llmRetries)
                                     : QString());
    return text;
}

QString runtimeText(const ConversationInfo &info)
{
    QString text = Lifecycle::runtimeLabel(info);
    if (info.runtime.error)
        text += u" · "_s + info.runtime.error->message;
    if (const auto &usage = info.runtime.usage) {
        const QLocale locale;
        text += DetailsPane::tr("\n%1 s CPU · %2 memory%3 · %4 processes · %5 disk, as of %6")
                    .arg(usage->cpuSeconds, 0, 'f', 1)
                    .arg(locale.formattedDataSize(usage->memoryBytes))
                    .arg(usage->memoryPeakBytes > 0
                             ? DetailsPane::tr(" (at most %1)")
                                   .arg(locale.formattedDataSize(usage->memoryPeakBytes))
                             : QString())
                    .arg(usage->processes)
                    .arg(locale.formattedDataSize(usage->diskBytes))
                    .arg(usage->at.toLocalTime().toString(u"HH:mm:ss"_s));
    }
    return text;
}

QString processText(const RuntimeDetails &details)
{
    if (!details.sandboxPid)
        return DetailsPane::tr("None on this server");
    QString text = DetailsPane::tr("pid %1").arg(*details.sandboxPid);
    if (details.startedAt)
        text += DetailsPane::tr(" · started %1").arg(when(*details.startedAt));
    text += details.idleSince ? DetailsPane::tr(" · idle since %1").arg(when(*details.idleSince))
                              : DetailsPane::tr(" · running a command");
    return text;
}

// `live`: the server answers. When it does not, its lease is not counted down (nothing says
// how it went on): `asOf` says when the list was last read (invalid: never whole).
QString ownerText(const RuntimeDetails &details, bool live, const QDateTime &asOf)
{
    if (details.leaseOwner.isEmpty())
        return DetailsPane::tr("Nobody holds its lease");
    const QString who =
        details.ownedHere ? DetailsPane::tr("This server (replica %1)").arg(details.ownerReplica)
        : details.ownerReplica.isEmpty()
            ? DetailsPane::tr("%1, not a listed replica").arg(details.leaseOwner)
            : DetailsPane::tr("Replica %1%2")
                  .arg(details.ownerReplica, details.ownerUrl.isEmpty()
                                                 ? QString()
                                                 : DetailsPane::tr(" at %1").arg(details.ownerUrl));
    if (!live)
        return who + DetailsPane::tr(" · lease %1, as the server last said%2")
                         .arg(details.leaseEpoch)
                         .arg(asOf.isValid()
                                  ? DetailsPane::tr(" at %1").arg(asOf.toString(u"HH:mm:ss"_s))
                                  : QString());
    const qint64 left = details.leaseMsLeft.value_or(0);
    return who +
           (left > 0
                ? DetailsPane::tr(" · lease %1, %2 left").arg(details.leaseEpoch).arg(seconds(left))
                : DetailsPane::tr(" · lease %1 lapsed %2 ago")
                      .arg(details.leaseEpoch)
                      .arg(seconds(left)));
}
// A section's heading that folds it away.
void makeFold(QToolButton *fold, const QString &text, bool open)
{
    fold->setCheckable(true);
    fold->setChecked(open);
    fold->setAutoRaise(true);
    fold->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    fold->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
    fold->setText(text);
    QObject::connect(fold, &QToolButton::toggled, fold, [fold](bool open) {
        fold->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
    });
}

// A value on lines of their own, each shortened in the middle to the width it is given: wrapped,
// a long path took one more line once the pane was laid out at its width, and the timeline
// below moved under the pointer. Whole in the tooltip.
class ElidedLabel : public QLabel
{
public:
    explicit ElidedLabel(QWidget *parent)
        : QLabel(parent)
    {
        setTextFormat(Qt::PlainText); // the server's and the user's words: never markup
        setTextInteractionFlags(Qt::TextSelectableByMouse);
        setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        setMinimumWidth(120);
    }
    void setFullText(const QString &text)
    {
        if (text == m_full)
            return;
        m_full = text;
        elide();
    }
    QString fullText() const { return m_full; }

protected:
    void resizeEvent(QResizeEvent *event) override
    {
        QLabel::resizeEvent(event);
        elide();
    }

private:
    void elide()
    {
        QStringList lines = m_full.split(u'\n');
        bool shortened = false;
        for (QString &line : lines) {
            const QString elided = fontMetrics().elidedText(line, Qt::ElideMiddle, width());
            shortened = shortened || elided != line;
            line = elided;
        }
        setText(lines.join(u'\n'));
        setToolTip(shortened ? m_full : QString());
    }

    QString m_full;
};
} // namespace

DetailsPane::DetailsPane(ConsoleController *controller, QWidget *parent)
    : QWidget(parent)
    , m_controller(controller)
    , m_heading(new QLabel(this))
    , m_headingId(new QLabel(this))
    , m_fold(new QToolButton(this))
    , m_rows(new QFrame(this))
    , m_activityFold(new QToolButton(this))
    , m_activity(new ActivityView(ActivityView::Scope::Conversation, this))
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    // What the buttons act on: with thousands of rows the selected one scrolls out of view.
    m_heading->setTextFormat(Qt::PlainText);
    QFont headingFont = m_heading->font();
    headingFont.setBold(true);
    m_heading->setFont(headingFont);
    m_headingId->setTextFormat(Qt::PlainText);
    m_headingId->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_headingId->setStyleSheet(u"color: #616161"_s);
    auto *idLine = new QHBoxLayout;
    idLine->addWidget(m_headingId, 1);
    m_fold->setObjectName(u"detailsFold"_s);
    makeFold(m_fold, tr("Details"), true);
    connect(m_fold, &QToolButton::toggled, this,
            [this](bool open) { m_rows->setVisible(open && m_info); });
    // Beside Details, folded at first: the timeline below is what is read most, and a line of
    // its own took a row of it.
    m_activityFold->setObjectName(u"activityFold"_s);
    makeFold(m_activityFold, tr("Activity"), false);
    m_activityFold->setToolTip(tr("Who changed this conversation, when and why"));
    idLine->addWidget(m_activityFold);
    idLine->addWidget(m_fold);
    layout->addWidget(m_heading);
    layout->addLayout(idLine);

    m_rows->setObjectName(u"details"_s);
    m_rows->setFrameShape(QFrame::StyledPanel);
    auto *form = new QFormLayout(m_rows);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    const std::pair<Row, QString> rows[] = {
        {Row::Runtime, tr("Runtime")},     {Row::Process, tr("Process")},
        {Row::Workspace, tr("Workspace")}, {Row::Sandbox, tr("Sandbox")},
        {Row::Agent, tr("Agent")},         {Row::Stats, tr("Stats")},
        {Row::Owner, tr("Owner")}};
    for (const auto &[row, name] : rows) {
        auto *value = new ElidedLabel(m_rows);
        m_values.insert(row, value);
        form->addRow(name, value);
    }
    layout->addWidget(m_rows);
    m_rows->hide();

    // Its records in the audit log, a few rows high.
    connect(m_activityFold, &QToolButton::toggled, this,
            [this](bool open) { m_activity->setVisible(open && m_info); });
    m_activity->addServer({}, controller->connection(), controller);
    const int rowHeight = m_activity->table()->verticalHeader()->defaultSectionSize();
    m_activity->table()->setFixedHeight(
        rowHeight * 4 + m_activity->table()->horizontalHeader()->sizeHint().height() + 4);
    layout->addWidget(m_activity);
    m_activityFold->hide();
    m_activity->hide();

    // Out of reach, the server's lease is no longer counted down.
    connect(controller, &ConsoleController::reachabilityChanged, this, [this] { fill(); });
    // The sandbox's idle time and the lease's countdown move while the row stays the same.
    connect(controller, &ConsoleController::refreshed, this, [this] {
        if (m_info)
            readDetails(m_info->id);
    });
}

void DetailsPane::showConversation(const std::optional<ConversationInfo> &info)
{
    const bool another = !info || !m_info || m_info->id != info->id;
    m_info = info;
    if (another)
        m_details.reset();
    // Shortened in the middle to the pane's narrowest width: a long title without spaces
    // cannot wrap, and it widened the pane. Whole in the tooltip.
    const QString title = !info                   ? tr("No conversation selected")
                          : info->title.isEmpty() ? tr("Untitled")
                                                  : withControlsShown(info->title);
    m_heading->setText(m_heading->fontMetrics().elidedText(title, Qt::ElideMiddle, 360));
    m_heading->setToolTip(title);
    m_headingId->setText(info ? toWireId(info->id) : QString());
    m_headingId->setVisible(info.has_value());
    m_fold->setVisible(info.has_value());
    m_rows->setVisible(info && m_fold->isChecked());
    m_activity->showConversation(info ? info->id : QUuid());
    m_activityFold->setVisible(info.has_value());
    m_activity->setVisible(info && m_activityFold->isChecked());
    fill();
    if (info && another)
        readDetails(info->id);
}

void DetailsPane::fill()
{
    if (!m_info)
        return;
    const ConversationInfo &info = *m_info;
    const auto set = [this](Row row, const QString &text) {
        static_cast<ElidedLabel *>(m_values[row])->setFullText(text);
    };
    set(Row::Runtime, runtimeText(info));
    set(Row::Process, m_details ? processText(*m_details) : tr("…"));
    set(Row::Workspace, info.workspaceOwnedByServer
                            ? tr("%1 (the server's)").arg(info.workingDir)
                            : tr("%1 (given at create; kept on delete)").arg(info.workingDir));
    set(Row::Sandbox, sandboxText(info.runtime.sandbox));
    set(Row::Agent, agentText(info));
    set(Row::Stats, statsText(info));
    set(Row::Owner, m_details ? ownerText(*m_details, m_controller->isReachable(),
                                          m_controller->lastRefreshed())
                              : tr("…"));
}

QString DetailsPane::text(Row row) const
{
    return static_cast<const ElidedLabel *>(m_values.value(row))->fullText();
}

QCoro::Task<> DetailsPane::readDetails(QUuid id)
{
    // One read at a time of a conversation: a refresh while one waits does not pile up more.
    if (m_readingFor == id)
        co_return;
    m_readingFor = id;
    QPointer<DetailsPane> self(this);
    auto reading =
        m_controller->connection()->get(ServerConnection::conversationPath(id, u"runtime"));
    const ApiReply reply = co_await std::move(reading);
    if (!self)
        co_return;
    if (m_readingFor == id)
        m_readingFor = QUuid();
    // Another was selected meanwhile, or the server did not answer: what is shown stays.
    if (!m_info || m_info->id != id || !reply.ok())
        co_return;
    m_details = RuntimeDetails::fromJson(reply.json.toObject().value(u"details"_s));
    fill();
}

} // namespace AgentDeck
