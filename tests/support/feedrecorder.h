#pragma once

// A plain QWebSocket on /sockets/lifecycle that keeps every record it gets, duplicates
// included, so a gap or a repeat stays visible (the console's LifecycleFeed would resume past
// them).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTest>
#include <QUrlQuery>
#include <QWebSocket>

namespace AgentDeck::Testing {

using namespace Qt::StringLiterals;

class FeedRecorder
{
public:
    // `base`: the server's http URL; `query`: after, action, conversation_id, session_api_key.
    explicit FeedRecorder(const QUrl &base, const QUrlQuery &query = {})
    {
        QObject::connect(&m_socket, &QWebSocket::textMessageReceived, &m_socket,
                         [this](const QString &text) {
                             records.append(QJsonDocument::fromJson(text.toUtf8()).object());
                         });
        QObject::connect(&m_socket, &QWebSocket::disconnected, &m_socket, [this] {
            closed = true;
            closeCode = m_socket.closeCode();
            closeReason = m_socket.closeReason();
        });
        QUrl url = base;
        url.setScheme(url.scheme() == u"https" ? u"wss"_s : u"ws"_s);
        url.setPath(u"/sockets/lifecycle"_s);
        url.setQuery(query);
        m_socket.open(url);
    }

    QWebSocket &socket() { return m_socket; }

    bool waitConnected(int timeoutMs = 10'000)
    {
        return QTest::qWaitFor(
                   [this] { return m_socket.state() == QAbstractSocket::ConnectedState || closed; },
                   timeoutMs) &&
               !closed;
    }
    bool waitForRecords(qsizetype count, int timeoutMs = 10'000)
    {
        return QTest::qWaitFor([&] { return records.size() >= count || closed; }, timeoutMs) &&
               records.size() >= count;
    }
    bool waitClosed(int timeoutMs = 10'000)
    {
        return QTest::qWaitFor([this] { return closed; }, timeoutMs);
    }
    void close()
    {
        m_socket.close();
        (void)waitClosed();
    }

    QStringList actions() const { return valuesOf(u"action"_s); }
    QStringList ids() const { return valuesOf(u"id"_s); }
    qint64 lastId() const
    {
        return records.isEmpty() ? 0 : records.last().value(u"id"_s).toString().toLongLong();
    }
    QString describe() const
    {
        return QStringLiteral("%1 records %2, closed %3 (%4 %5)")
            .arg(records.size())
            .arg(actions().join(u','))
            .arg(closed)
            .arg(closeCode)
            .arg(closeReason);
    }

    QList<QJsonObject> records;
    bool closed = false;
    int closeCode = 0;
    QString closeReason;

private:
    QStringList valuesOf(const QString &key) const
    {
        QStringList values;
        for (const QJsonObject &record : records)
            values.append(record.value(key).toString());
        return values;
    }

    QWebSocket m_socket;
};

// The changes made (GET /api/audit's records that are done), oldest first: what the feed sends.
template<typename Server> QList<QJsonObject> auditedChanges(Server &server)
{
    QList<QJsonObject> all;
    QString cursor;
    for (int page = 0; page < 1000; ++page) {
        QUrlQuery query{{u"sort_order"_s, u"TIMESTAMP"_s}};
        if (!cursor.isEmpty())
            query.addQueryItem(u"page_id"_s, cursor);
        const QJsonObject answer = server.get(u"/api/audit"_s, query).json.toObject();
        for (const QJsonValue &item : answer.value(u"items"_s).toArray()) {
            if (item.toObject().value(u"result"_s) == u"done"_s)
                all.append(item.toObject());
        }
        cursor = answer.value(u"next_page_id"_s).toString();
        if (cursor.isEmpty())
            break;
    }
    return all;
}

} // namespace AgentDeck::Testing
