// The route table: placeholders, literal precedence, and the methods a path allows.
#include "http/router.h"

#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using Method = Router::Method;

class RouterTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_router = Router();
        const auto ok = [](const HttpRequest &) { return HttpResponse(); };
        m_router.add(Method::Get, u"/api/conversations/{id}"_s, ok);
        m_router.add(Method::Delete, u"/api/conversations/{id}"_s, ok);
        m_router.add(Method::Get, u"/api/conversations/search"_s, ok);
        m_router.add(Method::Get, u"/api/conversations/{id}/events/{event_id}"_s, ok);
        m_router.add(Method::Get, u"/api/conversations/{id}/events/search"_s, ok);
        m_router.add(Method::Post, u"/api/conversations/{id}/run"_s, ok);
    }

    void matchesPatterns_data()
    {
        QTest::addColumn<Method>("method");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<QStringList>("args");
        QTest::addRow("item") << Method::Get << u"/api/conversations/abc"_s
                              << u"/api/conversations/{id}"_s << QStringList{u"abc"_s};
        QTest::addRow("literal wins") << Method::Get << u"/api/conversations/search"_s
                                      << u"/api/conversations/search"_s << QStringList{};
        QTest::addRow("nested literal wins")
            << Method::Get << u"/api/conversations/x/events/search"_s
            << u"/api/conversations/{id}/events/search"_s << QStringList{u"x"_s};
        QTest::addRow("two args") << Method::Get << u"/api/conversations/x/events/y"_s
                                  << u"/api/conversations/{id}/events/{event_id}"_s
                                  << QStringList{u"x"_s, u"y"_s};
        QTest::addRow("trailing slash") << Method::Post << u"/api/conversations/x/run/"_s
                                        << u"/api/conversations/{id}/run"_s << QStringList{u"x"_s};
    }
    void matchesPatterns()
    {
        QFETCH(Method, method);
        QFETCH(QString, path);
        QFETCH(QString, pattern);
        QFETCH(QStringList, args);
        const Router::Match match = m_router.match(method, path);
        QVERIFY(match.route);
        QCOMPARE(match.route->pattern, pattern);
        QCOMPARE(match.args, args);
    }

    void wrongMethodListsAllowedOnes()
    {
        const Router::Match match = m_router.match(Method::Post, u"/api/conversations/abc"_s);
        QVERIFY(!match.route);
        QCOMPARE(match.allowedMethods, (QList<QByteArray>{"GET"_ba, "DELETE"_ba, "HEAD"_ba}));
    }

    // A path belongs to its most literal pattern: /search is not a conversation id, whatever
    // the method.
    void wrongMethodOnALiteralPathListsItsOwnMethods()
    {
        for (const Method method : {Method::Put, Method::Delete}) {
            const Router::Match match = m_router.match(method, u"/api/conversations/search"_s);
            QVERIFY(!match.route);
            QCOMPARE(match.allowedMethods, (QList<QByteArray>{"GET"_ba, "HEAD"_ba}));
        }
    }

    void unknownPathMatchesNothing()
    {
        const Router::Match match = m_router.match(Method::Get, u"/api/other"_s);
        QVERIFY(!match.route);
        QVERIFY(match.allowedMethods.isEmpty());
    }

private:
    Router m_router;
};

QTEST_GUILESS_MAIN(RouterTest)
#include "tst_router.moc"
