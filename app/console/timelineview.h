#pragma once

#include <QQuickWidget>

namespace AgentDeck {

class EventListModel;

// The timeline of the selected conversation (qml/Timeline.qml) in the window. Qt Quick 6.4 in a
// widget sends the scene its mouse events stamped 0 (QQuickWidget maps each to a new event
// without the time); every press then came a moment after the one before, a triple click, and
// the first press on an event's text selected its whole block instead of starting a
// selection. The view gives each mapped event the time of the one it came from.
class TimelineView : public QQuickWidget
{
    Q_OBJECT
public:
    explicit TimelineView(EventListModel *timeline, QWidget *parent = nullptr);

protected:
    bool event(QEvent *event) override;
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    quint64 m_lastInputTime = 0;
};

} // namespace AgentDeck
