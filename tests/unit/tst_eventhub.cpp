// The hub's delivery: events in commit order, only to their conversation's subscribers, each
// burst between one beginBurst() and one endBurst() per subscriber.
#include "streams/eventhub.h"

#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
// Records what the hub calls, as "begin", "end", "<seq>" and "transient".
class RecordingSubscriber : public EventSubscriber
{
public:
    explicit RecordingSubscriber(std::function<void(RecordingSubscriber &)> onDeliver = {})
        : m_onDeliver(std::move(onDeliver))
    {}

    void deliver(qint64 seq, const QByteArray &) override
    {
        calls.append(QString::number(seq));
        if (m_onDeliver)
            m_onDeliver(*this);
    }
    void deliverTransient(const QByteArray &) override { calls.append(u"transient"_s); }
    void beginBurst() override { calls.append(u"begin"_s); }
    void endBurst() override { calls.append(u"end"_s); }

    QStringList calls;

private:
    std::function<void(RecordingSubscriber &)> m_onDeliver;
};
} // namespace

class EventHubTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aBurstIsDeliveredBetweenBeginAndEnd()
    {
        EventHub hub;
        const QUuid followed = QUuid::createUuid();
        const QUuid other = QUuid::createUuid();
        RecordingSubscriber first;
        RecordingSubscriber second;
        RecordingSubscriber elsewhere;
        hub.subscribe(followed, &first);
        hub.subscribe(followed, &second);
        hub.subscribe(other, &elsewhere);

        // Published before the hub's thread (this one) runs again: one burst.
        hub.publish(followed, 1, "{}");
        hub.publishTransient(followed, "{}");
        hub.publish(other, 7, "{}");
        hub.publish(followed, 2, "{}");
        QVERIFY(QTest::qWaitFor([&] { return second.calls.contains(u"end"_s); }, 5000));

        const QStringList expected{u"begin"_s, u"1"_s, u"transient"_s, u"2"_s, u"end"_s};
        QCOMPARE(first.calls, expected);
        QCOMPARE(second.calls, expected);
        QCOMPARE(elsewhere.calls, (QStringList{u"begin"_s, u"7"_s, u"end"_s}));

        // The next publication is a burst of its own.
        hub.publish(followed, 3, "{}");
        QVERIFY(QTest::qWaitFor([&] { return first.calls.size() == expected.size() + 3; }, 5000));
        QCOMPARE(first.calls.mid(expected.size()), (QStringList{u"begin"_s, u"3"_s, u"end"_s}));
    }

    // A subscriber that leaves during a burst (a slow consumer closing) gets no more events of
    // it, and still its end, so that what it holds is written.
    void aSubscriberLeavingMidBurstStillEndsIt()
    {
        EventHub hub;
        const QUuid id = QUuid::createUuid();
        RecordingSubscriber leaving(
            [&hub, id](RecordingSubscriber &self) { hub.unsubscribe(id, &self); });
        RecordingSubscriber staying;
        hub.subscribe(id, &leaving);
        hub.subscribe(id, &staying);

        hub.publish(id, 1, "{}");
        hub.publish(id, 2, "{}");
        QVERIFY(QTest::qWaitFor([&] { return staying.calls.contains(u"end"_s); }, 5000));

        QCOMPARE(leaving.calls, (QStringList{u"begin"_s, u"1"_s, u"end"_s}));
        QCOMPARE(staying.calls, (QStringList{u"begin"_s, u"1"_s, u"2"_s, u"end"_s}));
        QCOMPARE(hub.subscriberCount(id), 1);
    }

    void nothingIsQueuedForAConversationNobodyFollows()
    {
        EventHub hub;
        RecordingSubscriber late;
        const QUuid id = QUuid::createUuid();
        hub.publish(id, 1, "{}"); // dropped: whoever subscribes later reads the store
        hub.subscribe(id, &late);
        hub.publish(id, 2, "{}");
        QVERIFY(QTest::qWaitFor([&] { return late.calls.contains(u"end"_s); }, 5000));
        QCOMPARE(late.calls, (QStringList{u"begin"_s, u"2"_s, u"end"_s}));
    }
};

QTEST_GUILESS_MAIN(EventHubTest)
#include "tst_eventhub.moc"
