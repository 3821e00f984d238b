#include "timelineview.h"

#include "eventlistmodel.h"

#include <QInputEvent>
#include <QQmlContext>
#include <QQuickWindow>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

bool isMouseEvent(const QEvent *event)
{
    switch (event->type()) {
    case QEvent::MouseButtonPress:
    case QEvent::MouseButtonRelease:
    case QEvent::MouseButtonDblClick:
    case QEvent::MouseMove:
        return true;
    default:
        return false;
    }
}

} // namespace

TimelineView::TimelineView(EventListModel *timeline, QWidget *parent)
    : QQuickWidget(parent)
{
    setResizeMode(QQuickWidget::SizeRootObjectToView);
    rootContext()->setContextProperty(u"timelineModel"_s, timeline);
    setSource(QUrl(u"qrc:/agentdeck/qml/Timeline.qml"_s));
    setMinimumWidth(380);
    quickWindow()->installEventFilter(this);
}

bool TimelineView::event(QEvent *event)
{
    if (isMouseEvent(event))
        m_lastInputTime = static_cast<QInputEvent *>(event)->timestamp();
    return QQuickWidget::event(event);
}

bool TimelineView::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == quickWindow() && isMouseEvent(event)) {
        auto *input = static_cast<QInputEvent *>(event);
        if (input->timestamp() == 0)
            input->setTimestamp(m_lastInputTime);
    }
    return QQuickWidget::eventFilter(watched, event);
}

} // namespace AgentDeck
