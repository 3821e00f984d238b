// The per-conversation state machine of ConversationService: each row is a sequence of requests
// and events as they interleave, what each transition answered, and where it ended.
#include "clock.h"
#include "conversationlifecycle.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "execution/conversationrunner.h"
#include "signalwait.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "streams/eventhub.h"

#include <QTemporaryDir>
#include <QTest>

using namespace AgentDeck;
using namespace Qt::StringLiterals;

namespace {

QString nameOf(ConversationLifecycle::Run run)
{
    switch (run) {
    case ConversationLifecycle::Run::None:
        return u"None"_s;
    case ConversationLifecycle::Run::Starting:
        return u"Starting"_s;
    case ConversationLifecycle::Run::Running:
        return u"Running"_s;
    case ConversationLifecycle::Run::EndUnwritten:
        return u"EndUnwritten"_s;
    }
    return {};
}

QString nameOf(ConversationLifecycle::StopAsked how)
{
    switch (how) {
    case ConversationLifecycle::StopAsked::None:
        return u"none"_s;
    case ConversationLifecycle::StopAsked::Pause:
        return u"pause"_s;
    case ConversationLifecycle::StopAsked::Interrupt:
        return u"interrupt"_s;
    }
    return {};
}

QString yes(bool value)
{
    return value ? u"yes"_s : u"no"_s;
}

// "Running", "Starting 2 pause again", "None settled": the state and what is held with it.
QString describe(const ConversationLifecycle &lifecycle)
{
    QStringList parts{nameOf(lifecycle.run())};
    if (lifecycle.startNumber())
        parts << QString::number(lifecycle.startNumber());
    if (lifecycle.stopAsked() != ConversationLifecycle::StopAsked::None)
        parts << nameOf(lifecycle.stopAsked());
    if (lifecycle.runsAgain())
        parts << u"again"_s;
    if (lifecycle.isHalting())
        parts << u"halting"_s;
    if (lifecycle.isInUse() && !lifecycle.isRunningHere())
        parts << u"in-use"_s;
    if (lifecycle.isSettled())
        parts << u"settled"_s;
    return parts.join(u' ');
}

// A runtime no command is sent to.
class IdleRuntime final : public Runtime
{
public:
    QCoro::Task<CommandResult> execute(CommandRequest) override { co_return CommandResult{}; }
    void interrupt() override {}
};

} // namespace

class ConversationLifecycleTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QString error;
        m_db = Database::openSqlite(m_dir.filePath(u"agentdeck.db"_s), &error);
        QVERIFY2(m_db, qPrintable(error));
        m_store = std::make_unique<ConversationStore>(*m_db);
        m_log = std::make_unique<EventLog>(*m_store, m_hub, m_clock);
    }

    void transitions_data()
    {
        QTest::addColumn<QStringList>("steps");
        QTest::addColumn<QStringList>("answers");
        QTest::addColumn<QString>("state");

        QTest::newRow("a run starts, runs and ends")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"stopped A"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s} << u"None settled"_s;
        QTest::newRow("a second start while one starts is refused")
            << QStringList{u"start 1"_s, u"start 2"_s} << QStringList{u"yes"_s, u"no"_s}
            << u"Starting 1"_s;
        QTest::newRow("a second start while one runs is refused")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"start 2"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s} << u"Running"_s;
        QTest::newRow("a pause while the runtime comes up is carried out once it runs")
            << QStringList{u"start 1"_s, u"pause"_s, u"succeed 1 A"_s}
            << QStringList{u"yes"_s, u"yes"_s, u"pause"_s} << u"Running"_s;
        QTest::newRow("an interrupt while it starts outweighs a pause, before or after")
            << QStringList{u"start 1"_s, u"pause"_s, u"interrupt"_s, u"pause"_s, u"succeed 1 A"_s}
            << QStringList{u"yes"_s, u"yes"_s, u"yes"_s, u"yes"_s, u"interrupt"_s} << u"Running"_s;
        QTest::newRow("a pause with nothing starting is not kept for a later start")
            << QStringList{u"pause"_s, u"start 1"_s} << QStringList{u"no"_s, u"yes"_s}
            << u"Starting 1"_s;
        QTest::newRow("a delete while the runtime came up calls the start off")
            << QStringList{u"start 1"_s, u"forget"_s, u"succeed 1 A"_s}
            << QStringList{u"yes"_s, u"null"_s, u"called off"_s} << u"None settled"_s;
        QTest::newRow("a start called off by a delete leaves the next conversation's start")
            << QStringList{u"start 1"_s,     u"forget"_s, u"start 2"_s,
                           u"succeed 1 A"_s, u"fail 1"_s, u"succeed 2 B"_s}
            << QStringList{u"yes"_s, u"null"_s, u"yes"_s, u"called off"_s, u"no"_s, u"none"_s}
            << u"Running"_s;
        QTest::newRow("a failed start lets the next one begin")
            << QStringList{u"start 1"_s, u"pause"_s, u"again"_s, u"fail 1"_s, u"start 2"_s}
            << QStringList{u"yes"_s, u"yes"_s, u"yes"_s, u"yes"_s, u"yes"_s} << u"Starting 2"_s;
        QTest::newRow("a message sent while a pause ends the run asks for a run after it")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"again stopping"_s, u"stopped A"_s}
            << QStringList{u"yes"_s, u"none"_s, u"yes"_s, u"yes"_s} << u"None settled"_s;
        QTest::newRow("a message to a run that goes on asks for nothing after it")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"again"_s, u"stopped A"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s, u"no"_s} << u"None settled"_s;
        QTest::newRow("a message while a stop waits for the start asks for a run after it")
            << QStringList{u"start 1"_s, u"interrupt"_s, u"again"_s, u"succeed 1 A"_s,
                           u"stopped A"_s}
            << QStringList{u"yes"_s, u"yes"_s, u"yes"_s, u"interrupt"_s, u"yes"_s}
            << u"None settled"_s;
        QTest::newRow("an archive's halt: a message asks for no run after the one it stops")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"halt"_s, u"again stopping"_s,
                           u"stopped A"_s}
            << QStringList{u"yes"_s, u"none"_s, u"-"_s, u"no"_s, u"no"_s} << u"None halting"_s;
        QTest::newRow("a halt calls off the run a message asked for before it")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"again stopping"_s,
                           u"halt"_s,    u"stopped A"_s,   u"halt ends"_s}
            << QStringList{u"yes"_s, u"none"_s, u"yes"_s, u"-"_s, u"no"_s, u"-"_s}
            << u"None settled"_s;
        QTest::newRow("two halts: the first to end leaves the other halting")
            << QStringList{u"halt"_s,    u"halt"_s,        u"halt ends"_s,
                           u"start 1"_s, u"succeed 1 A"_s, u"again stopping"_s}
            << QStringList{u"-"_s, u"-"_s, u"-"_s, u"yes"_s, u"none"_s, u"no"_s}
            << u"Running halting"_s;
        QTest::newRow("an end storage refused holds the conversation until it is written")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"stopped A unwritten"_s,
                           u"start 2"_s, u"written"_s,     u"written"_s,
                           u"start 2"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s, u"no"_s, u"yes"_s, u"no"_s, u"yes"_s}
            << u"Starting 2"_s;
        QTest::newRow("an end storage refused is kept, with its events")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"stopped A unwritten"_s, u"pause"_s,
                           u"again stopping"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s, u"no"_s, u"no"_s} << u"EndUnwritten"_s;
        QTest::newRow("a delete drops an end storage refused")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"stopped A unwritten"_s, u"forget"_s}
            << QStringList{u"yes"_s, u"none"_s, u"no"_s, u"null"_s} << u"None settled"_s;
        QTest::newRow("the stop of a runner a delete let go of leaves the next run alone")
            << QStringList{u"start 1"_s, u"succeed 1 A"_s, u"forget"_s,   u"start 2"_s,
                           u"pause"_s,   u"again"_s,       u"stopped A"_s}
            << QStringList{u"yes"_s, u"none"_s,          u"A"_s, u"yes"_s, u"yes"_s,
                           u"yes"_s, u"not its runner"_s}
            << u"Starting 2 pause again"_s;
        QTest::newRow("bring-ups keep it in use, and it settles when the last one ends")
            << QStringList{u"bring up"_s, u"bring up"_s, u"bring up ends"_s}
            << QStringList{u"-"_s, u"-"_s, u"-"_s} << u"None in-use"_s;
        QTest::newRow("a delete during a bring-up leaves the bring-up counted")
            << QStringList{u"bring up"_s, u"start 1"_s, u"forget"_s, u"bring up ends"_s}
            << QStringList{u"-"_s, u"yes"_s, u"null"_s, u"-"_s} << u"None settled"_s;
    }

    void transitions()
    {
        QFETCH(QStringList, steps);
        QFETCH(QStringList, answers);
        QFETCH(QString, state);
        QCOMPARE(answers.size(), steps.size());

        ConversationRunner a(QUuid::createUuid(), {}, *m_log, *m_store, nullptr, {}, {});
        ConversationRunner b(QUuid::createUuid(), {}, *m_log, *m_store, nullptr, {}, {});
        const auto runnerNamed = [&](const QString &name) { return name == u"A"_s ? &a : &b; };
        // The runtime each run was given, which the lifecycle alone holds.
        QHash<const ConversationRunner *, std::weak_ptr<Runtime>> runtimes;
        const Event ended = Event::agentError(u"x"_s, u"the run's end"_s);

        ConversationLifecycle lifecycle;
        for (qsizetype i = 0; i < steps.size(); ++i) {
            const QStringList words = steps[i].split(u' ');
            const QString &verb = words[0];
            QString answer = u"-"_s;
            if (verb == u"start"_s) {
                const quint64 number = words[1].toULongLong();
                answer = yes(lifecycle.beginStart(number, {u"owner"_s, qint64(number)}));
            } else if (verb == u"pause"_s) {
                answer = yes(lifecycle.askStop(ConversationLifecycle::StopAsked::Pause));
            } else if (verb == u"interrupt"_s) {
                answer = yes(lifecycle.askStop(ConversationLifecycle::StopAsked::Interrupt));
            } else if (verb == u"succeed"_s) {
                auto runtime = std::make_shared<IdleRuntime>();
                if (lifecycle.isStart(words[1].toULongLong()))
                    runtimes.insert(runnerNamed(words[2]), runtime);
                const auto asked = lifecycle.startSucceeded(words[1].toULongLong(),
                                                            runnerNamed(words[2]), runtime);
                runtime.reset();
                answer = asked ? nameOf(*asked) : u"called off"_s;
            } else if (verb == u"fail"_s) {
                answer = yes(lifecycle.startFailed(words[1].toULongLong()));
            } else if (verb == u"stopped"_s) {
                ConversationLifecycle::UnwrittenEnd end{{u"owner"_s, 1}, {}};
                if (words.size() > 2)
                    end.events = {ended};
                const auto again = lifecycle.runnerStopped(runnerNamed(words[1]), end);
                answer = again ? yes(*again) : u"not its runner"_s;
            } else if (verb == u"written"_s) {
                answer = yes(lifecycle.endWritten());
            } else if (verb == u"again"_s) {
                answer = yes(lifecycle.askRunAfterStop(words.size() > 1));
            } else if (verb == u"forget"_s) {
                ConversationRunner *runner = lifecycle.forget();
                answer = runner == &a ? u"A"_s : runner == &b ? u"B"_s : u"null"_s;
            } else if (steps[i] == u"bring up"_s) {
                lifecycle.bringUpBegan();
            } else if (steps[i] == u"bring up ends"_s) {
                lifecycle.bringUpEnded();
            } else if (steps[i] == u"halt"_s) {
                lifecycle.haltBegan();
            } else if (steps[i] == u"halt ends"_s) {
                lifecycle.haltEnded();
            } else {
                QFAIL(qPrintable(u"unknown step: "_s + steps[i]));
            }
            QVERIFY2(answer == answers[i],
                     qPrintable(u"step %1 (%2) answered %3, not %4"_s.arg(i + 1).arg(
                         steps[i], answer, answers[i])));
            // A runtime is held while its run runs, and let go of in the same transition that
            // ends the run here (nothing else holds it).
            for (auto it = runtimes.cbegin(); it != runtimes.cend(); ++it) {
                const bool runs = lifecycle.runner() == it.key();
                QVERIFY2(
                    it.value().expired() != runs,
                    qPrintable(u"step %1 (%2): the runtime of runner %3 is %4"_s.arg(i + 1).arg(
                        steps[i], it.key() == &a ? u"A"_s : u"B"_s,
                        runs ? u"gone while it runs"_s : u"held after its run"_s)));
                if (runs)
                    QCOMPARE(lifecycle.runtime(), it.value().lock().get());
            }
            if (!lifecycle.runner())
                QVERIFY(!lifecycle.runtime());
        }
        QCOMPARE(describe(lifecycle), state);
        if (lifecycle.run() == ConversationLifecycle::Run::EndUnwritten)
            QCOMPARE(lifecycle.unwrittenEnd().events.size(), 1);
    }

    // The registry drops a lifecycle that holds nothing, and only then.
    void settledLifecyclesGo()
    {
        ConversationLifecycles lifecycles;
        const QUuid id = QUuid::createUuid();
        lifecycles.at(id).bringUpBegan();
        lifecycles.settle(id);
        QVERIFY(lifecycles.isInUse(id));
        QVERIFY(!lifecycles.isRunningHere(id));
        lifecycles.at(id).beginStart(1, {});
        lifecycles.at(id).bringUpEnded();
        lifecycles.settle(id);
        QVERIFY(lifecycles.isRunningHere(id));
        QCOMPARE(lifecycles.in(ConversationLifecycle::Run::Starting), QList<QUuid>{id});
        lifecycles.at(id).startFailed(1);
        lifecycles.settle(id);
        QVERIFY(!lifecycles.find(id));
        QCOMPARE(lifecycles.runningCount(), 0);
    }

    // The turn of a conversation goes to one request at a time, first come first, and only to
    // those of that conversation; a delete meanwhile (forget()) does not drop those waiting.
    void turnsAreTakenOneAtATimeInTheOrderAsked()
    {
        ConversationLifecycles lifecycles;
        const QUuid id = QUuid::createUuid();
        const QUuid other = QUuid::createUuid();
        QStringList order;
        // Takes the turn, notes it, and holds it until `letGo` is emitted.
        QObject letGo;
        const auto request = [&](QString name, QUuid of) -> QCoro::Task<> {
            auto waiting = lifecycles.turn(of);
            const ConversationLifecycles::Turn turn = co_await std::move(waiting);
            order.append(name);
            auto released =
                signalOrTimeout(&letGo, &QObject::objectNameChanged, std::chrono::seconds(10));
            co_await std::move(released);
        };
        auto first = request(u"first"_s, id);
        auto second = request(u"second"_s, id);
        auto third = request(u"third"_s, id);
        auto elsewhere = request(u"other"_s, other);
        QCOMPARE(order, (QStringList{u"first"_s, u"other"_s}));
        QVERIFY(lifecycles.find(id)->isTurnTaken());
        lifecycles.at(id).forget();
        lifecycles.settle(id);
        QVERIFY(lifecycles.find(id)); // still held, and waited for

        letGo.setObjectName(u"1"_s);
        QCoro::waitFor(std::move(first));
        QCoro::waitFor(std::move(elsewhere));
        QVERIFY(QTest::qWaitFor([&] { return order.size() == 3; }, 5000));
        QCOMPARE(order.last(), u"second"_s);
        letGo.setObjectName(u"2"_s);
        QCoro::waitFor(std::move(second));
        QVERIFY(QTest::qWaitFor([&] { return order.size() == 4; }, 5000));
        QCOMPARE(order.last(), u"third"_s);
        letGo.setObjectName(u"3"_s);
        QCoro::waitFor(std::move(third));
        // Nothing is held once the last turn went.
        QVERIFY(!lifecycles.find(id));
        QVERIFY(!lifecycles.find(other));
    }

private:
    QTemporaryDir m_dir;
    std::unique_ptr<Database> m_db;
    std::unique_ptr<ConversationStore> m_store;
    EventHub m_hub;
    SystemClock m_clock;
    std::unique_ptr<EventLog> m_log;
};

QTEST_GUILESS_MAIN(ConversationLifecycleTest)
#include "tst_conversationlifecycle.moc"
