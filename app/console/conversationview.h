#pragma once

#include "conversationfilter.h"

#include <QTableView>

class QComboBox;
class QLabel;

namespace AgentDeck {

class ConversationFilterProxy;

// A list of conversations over one partition: badges for execution and runtime as wide as their
// longest words, the title taking the rest, newest first. While the pointer rests on the rows
// their order holds (ConversationFilterProxy::holdOrder) and, once a row changed or came
// meanwhile, a line at the bottom says so: the order froze without a word, and a new
// conversation sat below older ones. When the pointer leaves, the rows sort again and the
// current one stays in sight.
class ConversationView : public QTableView
{
    Q_OBJECT
public:
    explicit ConversationView(ConversationFilterProxy *proxy, QWidget *parent = nullptr);

    ConversationFilterProxy *proxy() const { return m_proxy; }
    // The columns of a list of conversations, in a server's window and in All servers: badges
    // as wide as their longest words, the update time as wide as any, tags at a fixed width,
    // the title taking the rest. Fixed, they do not follow the rows: fitted to them, they
    // moved at every refresh and filter change. What a column cuts is whole in its tooltip.
    static void layOutColumns(QTableView *view);
    // The status filter beside the find box: any status, the rows that need attention, those
    // whose last run failed, or one execution status.
    static QComboBox *makeStatusFilter(QWidget *parent);
    // What the find box's `text` and the status filter ask for.
    static ConversationSearch searchOf(const QString &text, const QComboBox *statusFilter);
    // For tests: the line saying the order is held.
    QLabel *holdNotice() const { return m_holdNotice; }
    // For tests: "No conversations match", over an empty list while a search is set.
    QLabel *emptyNotice() const { return m_emptyNotice; }

Q_SIGNALS:
    // Scrolled to its last row (the scroll bar, the wheel, End): the list may read more.
    void scrolledToEnd();

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;

private:
    void hold(bool held);
    void updateHoldNotice();
    void updateEmptyNotice();

    ConversationFilterProxy *m_proxy;
    QLabel *m_holdNotice;
    QLabel *m_emptyNotice;
    bool m_changedWhileHeld = false;
    int m_newWhileHeld = 0;
};

} // namespace AgentDeck
