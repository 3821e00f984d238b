#pragma once

#include <QStyledItemDelegate>

namespace AgentDeck {

// Paints the runtime and execution columns as badges: a coloured pill with a glyph and the
// status words, so the status never rests on colour alone. Reads only semantic roles.
class StatusBadgeDelegate : public QStyledItemDelegate
{
    Q_OBJECT
public:
    enum class Kind
    {
        Runtime,
        Execution
    };
    explicit StatusBadgeDelegate(Kind kind, QObject *parent = nullptr);

    void paint(QPainter *painter, const QStyleOptionViewItem &option,
               const QModelIndex &index) const override;
    QSize sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const override;

    struct Badge
    {
        QColor colour;
        QString glyph;
    };
    // `attention`: Lifecycle::needsAttention. A missing runtime is a problem only then: an idle
    // conversation has none until it runs, and 2,000 orange rows hid the ones that mattered.
    static Badge runtimeBadge(const QString &runtimeStatus, const QString &label, bool attention);
    // `outcomeKind`: the wire kind of the run's outcome (empty for none); a failed or
    // interrupted one is never painted as a success, and greys once acknowledged
    // (`outcomeAttention` false).
    static Badge executionBadge(const QString &executionStatus, bool stale,
                                const QString &outcomeKind = {}, bool outcomeAttention = false);
    // The width of a badge showing `text`.
    static int widthFor(const QFontMetrics &metrics, const QString &text);
    // Wide enough for the longest words of its kind, so that the column need not follow the
    // rows (it did not for rows added later, and cut "waiting for confirmation").
    int columnWidth(const QFontMetrics &metrics) const;

private:
    Kind m_kind;
};

} // namespace AgentDeck
