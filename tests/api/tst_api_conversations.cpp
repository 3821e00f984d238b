// Conversations over real HTTP: create, read, batch, search, count, update, delete.
#include "testserver.h"
#include "trash.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class ApiConversationsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }
    void cleanup() { m_server.reset(); }

    void healthRoutesAnswer()
    {
        for (const QString &path : {u"/alive"_s, u"/health"_s, u"/ready"_s, u"/server_info"_s}) {
            const ApiReply reply = m_server->get(path);
            QVERIFY2(reply.ok(), qPrintable(path));
        }
        const QJsonObject info = m_server->get(u"/server_info"_s).json.toObject();
        QCOMPARE(info.value(u"version"_s).toString(), QStringLiteral(AGENTDECK_VERSION));
        QVERIFY(!info.value(u"replica_id"_s).toString().isEmpty());
    }

    void createReturns201ThenExisting200()
    {
        const QString id = u"5c0a1f0e-6a4e-4a8a-9c7e-0b5b8f3a2d11"_s;
        const QJsonObject body{{u"conversation_id"_s, id},
                               {u"title"_s, u"first"_s},
                               {u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}}};
        const ApiReply created = m_server->post(u"/api/conversations"_s, body);
        QCOMPARE(created.status, 201);
        const QJsonObject info = created.json.toObject();
        QCOMPARE(info.value(u"id"_s).toString(), id);
        QCOMPARE(info.value(u"title"_s).toString(), u"first"_s);
        QCOMPARE(info.value(u"execution_status"_s).toString(), u"idle"_s);
        QVERIFY(info.value(u"archived_at"_s).isNull());
        QCOMPARE(info.value(u"agent"_s).toObject().value(u"kind"_s).toString(), u"shell"_s);
        QVERIFY(info.value(u"workspace"_s).toObject().value(u"owned_by_server"_s).toBool());
        QVERIFY(QDir(info.value(u"workspace"_s).toObject().value(u"working_dir"_s).toString())
                    .exists());
        // Nothing has run yet: a local sandbox does not exist (missing, resumable); the in-server
        // runtime is always there.
        const QJsonObject runtime = info.value(u"runtime_info"_s).toObject();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(),
                 m_server->usesSandboxes() ? u"missing"_s : u"available"_s);
        QVERIFY(runtime.value(u"can_resume"_s).toBool());

        const ApiReply again = m_server->post(
            u"/api/conversations"_s,
            TestServer::withAgent({{u"conversation_id"_s, id}, {u"title"_s, u"x"_s}}));
        QCOMPARE(again.status, 200);
        QCOMPARE(again.json.toObject().value(u"title"_s).toString(), u"first"_s);
    }

    void getAcceptsDashedAnd32HexIds()
    {
        const QUuid id = m_server->create();
        QVERIFY(!id.isNull());
        QVERIFY(m_server->get(u"/api/conversations/"_s + toWireId(id)).ok());
        QVERIFY(m_server->get(u"/api/conversations/"_s + id.toString(QUuid::Id128)).ok());
    }

    void batchGetKeepsOrderWithNullForUnknown()
    {
        const QUuid a = m_server->create();
        const QUuid b = m_server->create();
        const QString unknown = toWireId(QUuid::createUuid());
        QUrlQuery query;
        query.addQueryItem(u"ids"_s, toWireId(b));
        query.addQueryItem(u"ids"_s, unknown);
        query.addQueryItem(u"ids"_s, toWireId(a));
        const ApiReply reply = m_server->get(u"/api/conversations"_s, query);
        QVERIFY(reply.ok());
        const QJsonArray items = reply.json.toArray();
        QCOMPARE(items.size(), 3);
        QCOMPARE(items[0].toObject().value(u"id"_s).toString(), toWireId(b));
        QVERIFY(items[1].isNull());
        QCOMPARE(items[2].toObject().value(u"id"_s).toString(), toWireId(a));
    }

    void searchPagesThroughEverythingOnce_data()
    {
        QTest::addColumn<QString>("sortOrder");
        for (const char *sort : {"CREATED_AT", "CREATED_AT_DESC", "UPDATED_AT", "UPDATED_AT_DESC"})
            QTest::addRow("%s", sort) << QString::fromLatin1(sort);
    }
    void searchPagesThroughEverythingOnce()
    {
        QFETCH(QString, sortOrder);
        QSet<QString> created;
        for (int i = 0; i < 7; ++i)
            created.insert(toWireId(m_server->create(QJsonObject{{u"title"_s, u"c%1"_s.arg(i)}})));
        QSet<QString> seen;
        QString previousCreated;
        QUrlQuery query;
        query.addQueryItem(u"limit"_s, u"3"_s);
        query.addQueryItem(u"sort_order"_s, sortOrder);
        int pages = 0;
        for (;;) {
            const ApiReply reply = m_server->get(u"/api/conversations/search"_s, query);
            QVERIFY(reply.ok());
            ++pages;
            for (const QJsonValue &item : reply.json.toObject().value(u"items"_s).toArray()) {
                const QString id = item.toObject().value(u"id"_s).toString();
                QVERIFY2(!seen.contains(id), "an item appeared twice");
                seen.insert(id);
                const QString createdAt = item.toObject().value(u"created_at"_s).toString();
                if (!previousCreated.isEmpty() && sortOrder == u"CREATED_AT"_s)
                    QVERIFY(previousCreated <= createdAt);
                if (!previousCreated.isEmpty() && sortOrder == u"CREATED_AT_DESC"_s)
                    QVERIFY(previousCreated >= createdAt);
                previousCreated = createdAt;
            }
            const QJsonValue next = reply.json.toObject().value(u"next_page_id"_s);
            if (next.isNull())
                break;
            query.removeAllQueryItems(u"page_id"_s);
            query.addQueryItem(u"page_id"_s, next.toString());
        }
        QCOMPARE(seen, created);
        QCOMPARE(pages, 3);
    }

    void searchAndCountApplyTheSameFilters()
    {
        m_server->create(QJsonObject{{u"title"_s, u"Deploy web"_s},
                                     {u"tags"_s, QJsonObject{{u"team"_s, u"infra"_s}}}});
        m_server->create(QJsonObject{{u"title"_s, u"deploy db"_s},
                                     {u"tags"_s, QJsonObject{{u"team"_s, u"data"_s}}}});
        const QUuid other = m_server->create(QJsonObject{{u"title"_s, u"other"_s}});

        const auto countOf = [this](const QUrlQuery &query) {
            const ApiReply count = m_server->get(u"/api/conversations/count"_s, query);
            const ApiReply search = m_server->get(u"/api/conversations/search"_s, query);
            const qint64 items = search.json.toObject().value(u"items"_s).toArray().size();
            return count.json.toInteger() == items ? items : -1;
        };
        QUrlQuery title;
        title.addQueryItem(u"q"_s, u"DEPLOY"_s);
        QCOMPARE(countOf(title), 2);
        QUrlQuery tag;
        tag.addQueryItem(u"tag"_s, u"team:infra"_s);
        QCOMPARE(countOf(tag), 1);
        QUrlQuery tagKey;
        tagKey.addQueryItem(u"tag"_s, u"team"_s);
        QCOMPARE(countOf(tagKey), 2);
        QUrlQuery status;
        status.addQueryItem(u"status"_s, u"idle"_s);
        QCOMPARE(countOf(status), 3);
        status.removeAllQueryItems(u"status"_s);
        status.addQueryItem(u"status"_s, u"finished"_s);
        QCOMPARE(countOf(status), 0);
        QUrlQuery archived;
        archived.addQueryItem(u"archived"_s, u"true"_s);
        QCOMPARE(countOf(archived), 0);
        QUrlQuery all;
        all.addQueryItem(u"archive_filter"_s, u"ALL"_s);
        QCOMPARE(countOf(all), 3);
        // The start of an id, as an operator copies it from a list or a log, in either case.
        QUrlQuery prefix;
        prefix.addQueryItem(u"id_prefix"_s, toWireId(other).left(8).toUpper());
        QCOMPARE(countOf(prefix), 1);
        const ApiReply found = m_server->get(u"/api/conversations/search"_s, prefix);
        QCOMPARE(found.json[u"items"_s][0][u"id"_s].toString(), toWireId(other));
        prefix.removeAllQueryItems(u"id_prefix"_s);
        prefix.addQueryItem(u"id_prefix"_s, toWireId(other));
        QCOMPARE(countOf(prefix), 1);
        for (const QString &bad : {u"xyz"_s, u"%25"_s, QString(37, u'a')}) {
            QUrlQuery refused;
            refused.addQueryItem(u"id_prefix"_s, bad);
            const ApiReply reply = m_server->get(u"/api/conversations/search"_s, refused);
            QCOMPARE(reply.status, 422);
            QVERIFY2(reply.errorSentence().contains(u"id_prefix"_s),
                     qPrintable(reply.errorSentence()));
        }
    }

    // `body` finds the conversations one of whose events holds the text (as the events' `body`
    // finds the events): what was said in a conversation, not only its title, finds it.
    void searchFindsWhatWasSaidInAConversation()
    {
        const QUuid said = m_server->create(
            QJsonObject{{u"title"_s, u"first"_s}, {u"tags"_s, QJsonObject{{u"team"_s, u"ops"_s}}}});
        const QUuid quoted = m_server->create(QJsonObject{{u"title"_s, u"second"_s}});
        const QUuid silent = m_server->create(QJsonObject{{u"title"_s, u"Disk FULL on db-3"_s}});
        QVERIFY(m_server->send(said, u"the disk is full on db-3"_s).ok());
        QVERIFY(m_server->send(quoted, u"she said \"restart db-3\" and left"_s).ok());
        QVERIFY(m_server->send(silent, u"nothing to see"_s).ok());

        const auto found = [this](const QList<std::pair<QString, QString>> &items) {
            QUrlQuery query;
            for (const auto &[name, value] : items)
                query.addQueryItem(name, QString::fromUtf8(QUrl::toPercentEncoding(value)));
            const ApiReply count = m_server->get(u"/api/conversations/count"_s, query);
            const ApiReply search = m_server->get(u"/api/conversations/search"_s, query);
            QSet<QUuid> ids;
            for (const QJsonValue item : search.json.toObject().value(u"items"_s).toArray())
                ids.insert(parseWireId(item[u"id"_s].toString()).value_or(QUuid()));
            return count.json.toInteger() == ids.size() ? ids : QSet<QUuid>{QUuid()};
        };
        // Case-insensitive, as `q` is; a title is not a body.
        QCOMPARE(found({{u"body"_s, u"DISK IS FULL"_s}}), (QSet<QUuid>{said}));
        QCOMPARE(found({{u"body"_s, u"db-3"_s}}), (QSet<QUuid>{said, quoted}));
        QCOMPARE(found({{u"body"_s, u"\"restart db-3\""_s}}), (QSet<QUuid>{quoted}));
        QCOMPARE(found({{u"body"_s, u"db-3"_s}, {u"tag"_s, u"team:ops"_s}}), (QSet<QUuid>{said}));
        QCOMPARE(found({{u"body"_s, u"db-3"_s}, {u"q"_s, u"second"_s}}), (QSet<QUuid>{quoted}));
        // Not the envelope: every event has a kind and a source.
        QCOMPARE(found({{u"body"_s, u"MessageEvent"_s}}), QSet<QUuid>{});
        QCOMPARE(found({{u"body"_s, u"no one said this"_s}}), QSet<QUuid>{});

        QUrlQuery tooLong;
        tooLong.addQueryItem(u"body"_s, QString(MaxSearchTextLength + 1, u'x'));
        const ApiReply refused = m_server->get(u"/api/conversations/search"_s, tooLong);
        QCOMPARE(refused.status, 422);
        QVERIFY2(refused.errorSentence().contains(u"body"_s), qPrintable(refused.errorSentence()));
    }

    void patchUpdatesTitleAndTags()
    {
        const QUuid id = m_server->create(QJsonObject{{u"title"_s, u"before"_s}});
        const ApiReply reply = m_server->call(
            "PATCH"_ba, ServerConnection::conversationPath(id),
            QJsonObject{{u"title"_s, u"after"_s}, {u"tags"_s, QJsonObject{{u"k"_s, u"v"_s}}}});
        QVERIFY(reply.ok());
        const QJsonObject info =
            m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        QCOMPARE(info.value(u"title"_s).toString(), u"after"_s);
        QCOMPARE(info.value(u"tags"_s).toObject().value(u"k"_s).toString(), u"v"_s);
    }

    // A PATCH that changes nothing moved updated_at, which orders the lists and starts the
    // retention; an empty title was kept empty, where a create gives it the default.
    void aPatchChangingNothingMovesNothing()
    {
        const QUuid id = m_server->create(
            QJsonObject{{u"title"_s, u"same"_s}, {u"tags"_s, QJsonObject{{u"k"_s, u"v"_s}}}});
        const auto info = [&] {
            return m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        };
        const QString updatedAt = info().value(u"updated_at"_s).toString();
        const QDateTime written = *parseWireTime(updatedAt);
        QVERIFY(QTest::qWaitFor(
            [&] { return QDateTime::currentDateTimeUtc() > written.addMSecs(2); }, 1000));
        for (const QJsonObject &body :
             {QJsonObject{}, QJsonObject{{u"title"_s, u"same"_s}},
              QJsonObject{{u"tags"_s, QJsonObject{{u"k"_s, u"v"_s}}}},
              QJsonObject{{u"title"_s, u"same"_s}, {u"tags"_s, QJsonObject{{u"k"_s, u"v"_s}}}}}) {
            const ApiReply reply =
                m_server->call("PATCH"_ba, ServerConnection::conversationPath(id), body);
            QVERIFY2(reply.ok(), qPrintable(reply.detail));
            QCOMPARE(reply.json.toObject().value(u"updated_at"_s).toString(), updatedAt);
        }
        QCOMPARE(info().value(u"updated_at"_s).toString(), updatedAt);

        const ApiReply cleared = m_server->call("PATCH"_ba, ServerConnection::conversationPath(id),
                                                QJsonObject{{u"title"_s, u""_s}});
        QVERIFY(cleared.ok());
        QCOMPARE(info().value(u"title"_s).toString(), u"Conversation "_s + toWireId(id).left(8));
        QVERIFY(info().value(u"updated_at"_s).toString() != updatedAt);
    }

    void deleteRemovesHistoryAndOwnedWorkspace()
    {
        const QUuid id = m_server->create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                        {u"initial_message"_s, TestServer::message(u"hi"_s, true)}});
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QString workspace = m_server->workingDir(id);
        QVERIFY(QDir(workspace).exists());
        QCOMPARE(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).status, 200);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id, u"events/search")).status,
                 404);
        QVERIFY(!QDir(workspace).exists());
        // Through the trash: the request does not wait for the files to be deleted (a workspace
        // of 100,000 files held up every request for 1.7 s), and they go soon after.
        const QDir trash(QFileInfo(workspace).absoluteDir().filePath(Trash::DirName));
        QVERIFY(trash.exists());
        QTRY_VERIFY_WITH_TIMEOUT(
            trash.isEmpty(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot), 10'000);
    }

    // A caller's working dir lies under a workspace root once its links and `..` are resolved
    // as the kernel does; anything else is 422 and stays as it was. A root server gave each
    // one to the sandbox's uid (chown -R, 0700) on its first command: /etc, /usr, /root/.ssh,
    // someone's home.
    void aWorkingDirOutsideTheRootsIsRefused_data()
    {
        QTest::addColumn<QString>("workingDir"); // {root}, {outside}: the test's dirs
        QTest::addColumn<bool>("run");           // a command runs (never in the host's dirs)
        QTest::addRow("/etc") << u"/etc"_s << false;
        QTest::addRow("/usr") << u"/usr"_s << false;
        QTest::addRow("/proc") << u"/proc"_s << false;
        QTest::addRow("/dev/shm") << u"/dev/shm"_s << false;
        QTest::addRow("/root/.ssh") << u"/root/.ssh"_s << false;
        QTest::addRow("outside every root") << u"{outside}"_s << true;
        QTest::addRow("under it, not made yet") << u"{outside}/new"_s << true;
        QTest::addRow("a link in a root to outside") << u"{root}/link"_s << true;
        QTest::addRow("under that link, not made yet") << u"{root}/link/new"_s << true;
        QTest::addRow("`..` out of a root") << u"{root}/../{outsideName}"_s << true;
        QTest::addRow("`..` after a link") << u"{root}/link/../{outsideName}"_s << true;
        QTest::addRow("`..` after a dir not made") << u"{root}/new/../../{outsideName}"_s << true;
        QTest::addRow("`..` to the host") << u"{root}/../../../../../../../etc"_s << false;
    }
    void aWorkingDirOutsideTheRootsIsRefused()
    {
        QFETCH(QString, workingDir);
        QFETCH(bool, run);
        QTemporaryDir root;
        QTemporaryDir outside;
        QVERIFY(root.isValid() && outside.isValid());
        QVERIFY(QFile::link(outside.path(), root.filePath(u"link"_s)));
        m_server.reset();
        TestServerOptions options;
        options.workspaceRoots = {root.path()};
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        workingDir.replace(u"{root}"_s, root.path())
            .replace(u"{outsideName}"_s, QFileInfo(outside.path()).fileName())
            .replace(u"{outside}"_s, outside.path());
        const auto statusOf = [](const QString &path) {
            struct stat status
            {};
            ::stat(QFile::encodeName(path).constData(), &status);
            return std::pair{status.st_uid, status.st_mode};
        };
        const auto before = statusOf(outside.path());
        QJsonObject body =
            TestServer::withAgent({{u"workspace"_s, QJsonObject{{u"working_dir"_s, workingDir}}}});
        if (run)
            body.insert(u"initial_message"_s, TestServer::message(u"touch made-here"_s, true));
        const ApiReply reply = m_server->post(u"/api/conversations"_s, body);
        QVERIFY2(reply.status == 422, qPrintable(QString::number(reply.status)));
        QCOMPARE(reply.errorCode, u"workspace_outside_roots"_s);
        QVERIFY2(reply.detail.contains(QFileInfo(root.path()).canonicalFilePath()),
                 qPrintable(reply.detail));
        QCOMPARE(m_server->get(u"/api/conversations/count"_s).json.toInt(), 0);
        QCOMPARE(statusOf(outside.path()), before);
        QVERIFY(!QFile::exists(outside.filePath(u"made-here"_s)));
        QVERIFY(!QFile::exists(outside.filePath(u"new"_s)));
    }

    // A root the operator adds holds callers' workspaces; a directory there that is not the
    // server's keeps its owner and mode, and the commands run as its owner.
    void anOperatorsRootHoldsWorkspaces()
    {
        QTemporaryDir root;
        QVERIFY(root.isValid());
        const QString project = root.filePath(u"project"_s);
        QVERIFY(QDir().mkpath(project));
        const bool asRoot = ::geteuid() == 0;
        if (asRoot)
            QCOMPARE(::chown(QFile::encodeName(project).constData(), 65534, 65534), 0);
        QVERIFY(QFile::setPermissions(
            project, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup |
                         QFile::ExeGroup | QFile::ReadOther | QFile::ExeOther));
        QVERIFY(QFile::link(root.path(), root.filePath(u"alias"_s)));
        m_server.reset();
        TestServerOptions options;
        options.workspaceRoots = {root.filePath(u"alias"_s)}; // named through a link
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        struct stat before
        {};
        QCOMPARE(::stat(QFile::encodeName(project).constData(), &before), 0);

        // Seen by the name the root was given too, which the private /tmp would hide.
        QJsonObject body = TestServer::shellConversation(
            u"touch made-here '%1/by-alias'"_s.arg(root.filePath(u"alias/project"_s)));
        body.insert(u"workspace"_s,
                    QJsonObject{{u"working_dir"_s, root.filePath(u"alias/project"_s)}});
        const ApiReply created = m_server->post(u"/api/conversations"_s, body);
        QCOMPARE(created.status, 201);
        const QUuid id = QUuid::fromString(created.json[u"id"_s].toString());
        // Kept as the real path: a link on the way that changes later moves nothing.
        QCOMPARE(m_server->workingDir(id), QFileInfo(project).canonicalFilePath());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(QFile::exists(root.filePath(u"project/made-here"_s)));
        QVERIFY(QFile::exists(root.filePath(u"project/by-alias"_s)));
        struct stat after
        {};
        QCOMPARE(::stat(QFile::encodeName(project).constData(), &after), 0);
        QCOMPARE(after.st_uid, before.st_uid);
        QCOMPARE(after.st_mode, before.st_mode);
        if (asRoot && m_server->usesSandboxes()) {
            struct stat made
            {};
            QCOMPARE(
                ::stat(QFile::encodeName(root.filePath(u"project/made-here"_s)).constData(), &made),
                0);
            QCOMPARE(made.st_uid, uid_t(65534));
        }
    }

    // A root server gave a root-owned working dir to the sandbox's uid on its first command
    // (chown -R, 0700): the operator's shared dir, someone's home. It changes nothing it did
    // not make: the commands run as a uid of their own with what the dir's mode grants. One it
    // made at the create is the conversation's.
    void aDirTheServerDidNotMakeKeepsItsOwnerAndMode()
    {
        if (::geteuid() != 0 || !m_server->usesSandboxes())
            QSKIP("needs a root server with sandboxes");
        QTemporaryDir root;
        QVERIFY(root.isValid());
        const QString shared = root.filePath(u"shared"_s);
        QVERIFY(QDir().mkpath(shared));
        const auto readable = QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner |
                              QFile::ReadGroup | QFile::ExeGroup | QFile::ReadOther |
                              QFile::ExeOther;
        QVERIFY(QFile::setPermissions(shared, readable));
        QFile kept(shared + u"/kept.txt"_s);
        QVERIFY(kept.open(QIODevice::WriteOnly));
        kept.write("kept\n");
        kept.close();
        struct stat before
        {};
        QCOMPARE(::stat(QFile::encodeName(shared).constData(), &before), 0);
        m_server.reset();
        TestServerOptions options;
        options.workspaceRoots = {root.path()};
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));

        QJsonObject body = TestServer::shellConversation(
            u"cat kept.txt; echo more >> kept.txt; touch made-here"_s);
        body.insert(u"workspace"_s, QJsonObject{{u"working_dir"_s, shared}});
        const QUuid id = m_server->create(body);
        QVERIFY(!id.isNull());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        struct stat status
        {};
        for (const QString &path : {shared, QString(shared + u"/kept.txt"_s)}) {
            QCOMPARE(::stat(QFile::encodeName(path).constData(), &status), 0);
            QCOMPARE(status.st_uid, uid_t(0));
        }
        QCOMPARE(::stat(QFile::encodeName(shared).constData(), &status), 0);
        QCOMPARE(status.st_mode, before.st_mode);
        QVERIFY(kept.open(QIODevice::ReadOnly));
        QCOMPARE(kept.readAll(), QByteArray("kept\n"));
        QVERIFY(!QFile::exists(shared + u"/made-here"_s));

        const QString made = root.filePath(u"new/project"_s);
        body = TestServer::shellConversation(u"touch made-here"_s);
        body.insert(u"workspace"_s, QJsonObject{{u"working_dir"_s, made}});
        const QUuid other = m_server->create(body);
        QVERIFY(!other.isNull());
        QVERIFY(m_server->waitForStatus(other, u"finished"_s));
        QVERIFY(QFile::exists(made + u"/made-here"_s));
    }

    void deleteKeepsCallerSuppliedWorkspace()
    {
        QTemporaryDir own;
        const QUuid id = m_server->create(
            QJsonObject{{u"workspace"_s, QJsonObject{{u"working_dir"_s, own.path()}}}});
        QVERIFY(!id.isNull());
        QCOMPARE(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).status, 200);
        QVERIFY(QDir(own.path()).exists());
    }

private:
    std::unique_ptr<TestServer> m_server;
};

QTEST_GUILESS_MAIN(ApiConversationsTest)
#include "tst_api_conversations.moc"
