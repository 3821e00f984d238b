#include "statusbadgedelegate.h"

#include "conversationlistmodel.h"

#include <QApplication>
#include <QPainter>
#include <QPainterPath>

using namespace Qt::StringLiterals;

namespace AgentDeck {

StatusBadgeDelegate::StatusBadgeDelegate(Kind kind, QObject *parent)
    : QStyledItemDelegate(parent)
    , m_kind(kind)
{}

StatusBadgeDelegate::Badge StatusBadgeDelegate::runtimeBadge(const QString &status,
                                                             const QString &label, bool attention)
{
    if (label == u"expired"_s)
        return {QColor(0x75, 0x75, 0x75), u"⊘"_s};
    if (status == u"available"_s)
        return {QColor(0x2e, 0x7d, 0x32), u"●"_s};
    if (status == u"starting"_s)
        return {QColor(0x15, 0x65, 0xc0), u"◔"_s};
    if (status == u"missing"_s)
        return {attention ? QColor(0xef, 0x6c, 0x00) : QColor(0x75, 0x75, 0x75), u"○"_s};
    if (status == u"ownership_lost"_s)
        return {QColor(0x6a, 0x1b, 0x9a), u"⇄"_s};
    // Idle and costing nothing; the next command brings it back.
    if (status == u"paused"_s)
        return {QColor(0x45, 0x5a, 0x64), u"⏸"_s};
    if (status == u"stopped"_s)
        return {QColor(0x75, 0x75, 0x75), u"■"_s};
    return {QColor(0xc6, 0x28, 0x28), u"✖"_s};
}

StatusBadgeDelegate::Badge StatusBadgeDelegate::executionBadge(const QString &status, bool stale,
                                                               const QString &outcomeKind,
                                                               bool outcomeAttention)
{
    if (stale)
        return {QColor(0xc6, 0x28, 0x28), u"⚠"_s};
    if (status == u"running"_s)
        return {QColor(0x15, 0x65, 0xc0), u"▶"_s};
    // The run's last action, where it was no success: a check on "finished · exit 2" read as
    // one.
    if (!outcomeKind.isEmpty() && outcomeKind != u"succeeded"_s &&
        status != u"waiting_for_confirmation"_s) {
        const QColor grey(0x75, 0x75, 0x75);
        if (outcomeKind == u"interrupted"_s)
            return {outcomeAttention ? QColor(0xef, 0x6c, 0x00) : grey, u"⚠"_s};
        return {outcomeAttention ? QColor(0xc6, 0x28, 0x28) : grey, u"✖"_s};
    }
    if (status == u"paused"_s)
        return {QColor(0xef, 0x6c, 0x00), u"‖"_s};
    if (status == u"waiting_for_confirmation"_s)
        return {QColor(0x6a, 0x1b, 0x9a), u"?"_s};
    if (status == u"finished"_s)
        return {QColor(0x2e, 0x7d, 0x32), u"✔"_s};
    if (status == u"error"_s || status == u"stuck"_s)
        return {QColor(0xc6, 0x28, 0x28), u"✖"_s};
    return {QColor(0x75, 0x75, 0x75), u"•"_s};
}

void StatusBadgeDelegate::paint(QPainter *painter, const QStyleOptionViewItem &option,
                                const QModelIndex &index) const
{
    // The cell's panel (selection, hover) only: the item painted with its text cleared still
    // left a fragment of the words at the left end of the pill.
    QStyleOptionViewItem background = option;
    initStyleOption(&background, index);
    const QStyle *style = option.widget ? option.widget->style() : QApplication::style();
    style->drawPrimitive(QStyle::PE_PanelItemViewItem, &background, painter, option.widget);

    const QString text = index.data(Qt::DisplayRole).toString();
    Badge badge =
        m_kind == Kind::Runtime
            ? runtimeBadge(index.data(ConversationListModel::RuntimeStatusRole).toString(),
                           index.data(ConversationListModel::RuntimeLabelRole).toString(),
                           index.data(ConversationListModel::NeedsAttentionRole).toBool())
            : executionBadge(index.data(ConversationListModel::ExecutionStatusRole).toString(),
                             index.data(ConversationListModel::StaleRole).toBool(),
                             index.data(ConversationListModel::OutcomeKindRole).toString(),
                             index.data(ConversationListModel::OutcomeAttentionRole).toBool());
    // What a server that does not answer last said: no colour claims it holds now.
    if (index.data(ConversationListModel::ServerDownRole).toBool())
        badge.colour = QColor(0x9e, 0x9e, 0x9e);
    // The glyph gets a square of its own: it may come from a fallback font whose width the
    // primary font's metrics do not know.
    const QFontMetrics metrics(option.font);
    const int height = metrics.height() + 4;
    const int textWidth = metrics.horizontalAdvance(text);
    const QRect pill(option.rect.left() + 4, option.rect.center().y() - height / 2,
                     std::min(textWidth + height + 16, option.rect.width() - 8), height);
    painter->save();
    painter->setFont(option.font);
    painter->setRenderHint(QPainter::Antialiasing);
    QPainterPath path;
    path.addRoundedRect(pill, height / 2.0, height / 2.0);
    painter->fillPath(path, badge.colour);
    painter->setPen(Qt::white);
    const QRect glyphRect(pill.left() + 6, pill.top(), height - 4, height);
    painter->drawText(glyphRect, Qt::AlignCenter, badge.glyph);
    const QRect textRect = pill.adjusted(height + 4, 0, -6, 0);
    painter->drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                      metrics.elidedText(text, Qt::ElideRight, textRect.width()));
    painter->restore();
}

int StatusBadgeDelegate::widthFor(const QFontMetrics &metrics, const QString &text)
{
    return metrics.horizontalAdvance(text) + metrics.height() + 32;
}

int StatusBadgeDelegate::columnWidth(const QFontMetrics &metrics) const
{
    const QStringList longest = m_kind == Kind::Runtime
                                    ? QStringList{u"missing (resumable)"_s, u"on another replica"_s}
                                    : QStringList{u"waiting for confirmation"_s,
                                                  u"finished · interrupted by the operator"_s};
    int width = 0;
    for (const QString &text : longest)
        width = std::max(width, widthFor(metrics, text));
    return width;
}

QSize StatusBadgeDelegate::sizeHint(const QStyleOptionViewItem &option,
                                    const QModelIndex &index) const
{
    const QFontMetrics metrics(option.font);
    return {widthFor(metrics, index.data().toString()), metrics.height() + 10};
}

} // namespace AgentDeck
