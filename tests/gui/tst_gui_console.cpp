// The console against a real embedded server (its own thread, real sandboxes), driven by
// clicking the real buttons under the offscreen platform.
#include "banner.h"
#include "commandline.h"
#include "consolecontroller.h"
#include "consolesettings.h"
#include "consoletray.h"
#include "conversationview.h"
#include "detailspane.h"
#include "embeddedserver.h"
#include "fakes.h"
#include "guitestmain.h"
#include "lifecycle.h"
#include "mainwindow.h"
#include "newconversationdialog.h"
#include "replicasdialog.h"
#include "serverprocess.h"
#include "statusbadgedelegate.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "testevents.h"

#include <QAbstractButton>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFontMetricsF>
#include <QHeaderView>
#include <QIcon>
#include <QInputDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMetaEnum>
#include <QProgressBar>
#include <QPushButton>
#include <QQuickItem>
#include <QQuickWidget>
#include <QQuickWindow>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include <csignal>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using Action = ConsoleController::Action;

class GuiConsoleTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { AGENTDECK_GUI_TEST_INIT(); }
    void init()
    {
        consoleSettings()->clear();
        m_dir = std::make_unique<QTemporaryDir>();
    }
    void cleanup()
    {
        m_window.reset();
        m_controller.reset();
        m_client.reset();
        if (m_server)
            m_server->stop();
        m_server.reset();
        killSandboxes();
        m_dir.reset();
    }

    // A run cut short by a crash read as an ordinary pause, and Recover ended it `finished`,
    // as a success ends: the row says what happened, counts as needing attention, and Recover
    // offers the command again, one click away.
    void recoverOffersAnInterruptedCommandAgain()
    {
        // A row left running with a command in flight, as a killed server leaves it.
        const QUuid id = seedInterruptedConversation(u"echo again"_s);
        startConsole();
        QCOMPARE(status(id), u"paused"_s);
        QCOMPARE(executionText(id), u"paused · interrupted by a restart"_s);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (1, 1 needs attention)"_s);
        QVERIFY(m_window->selectConversation(id));
        QPushButton *runAgain = m_window->actionButton(Action::RunAgain);
        QVERIFY(runAgain->isEnabled());
        // Run says what it will do, as the error card does.
        QCOMPARE(m_window->actionButton(Action::Run)->toolTip(),
                 u"Runs the interrupted command again: $ echo again"_s);
        QPushButton *recover = m_window->actionButton(Action::Recover);
        QVERIFY2(recover->isEnabled(), qPrintable(recover->toolTip()));
        QTest::mouseClick(recover, Qt::LeftButton);
        // It says what it did, and the history too.
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(),
                                  u"Recovered: started the runtime"_s, 15000);
        QCOMPARE(Testing::recoveryActionsIn(eventsOf(id)),
                 QStringList{RecoveryAction::StartedRuntime});
        QTRY_COMPARE_WITH_TIMEOUT(runtimeOf(id), u"available"_s, 15000);
        QTRY_COMPARE_WITH_TIMEOUT(badgeText(m_window->activeView(), id), u"available"_s, 10000);
        QCOMPARE(status(id), u"paused"_s);
        QCOMPARE(executionText(id), u"paused · interrupted by a restart"_s);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (1, 1 needs attention)"_s);
        // The row still needs attention, but not Recover: Run again is what is left.
        QVERIFY(!recover->isEnabled());
        QVERIFY2(recover->toolTip().startsWith(u"Nothing to recover"_s) &&
                     recover->toolTip().contains(u"Run again"_s),
                 qPrintable(recover->toolTip()));

        QTRY_VERIFY_WITH_TIMEOUT(runAgain->isEnabled(), 10000);
        QTest::mouseClick(runAgain, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QTRY_COMPARE_WITH_TIMEOUT(executionText(id), u"finished"_s, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(0), u"Active (1)"_s, 10000);
        QVERIFY(!runAgain->isEnabled());
        const QList<QJsonObject> observations =
            Testing::ofKind(eventsOf(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 2);
        QCOMPARE(observations.last().value(u"observation"_s).toObject().value(u"output"_s),
                 u"again\n"_s);
    }

    // The list may be behind the server: Recover, offered for a runtime the server has brought
    // up since, says there was nothing to recover, and the row and the button follow the
    // answer (no refresh in between).
    void recoverWithNothingToRecoverSaysSo()
    {
        startConsole();
        const QUuid id = create(u"behind"_s, u"true"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(call("DELETE"_ba, ServerConnection::conversationPath(id, u"runtime")).ok());
        QVERIFY(showAndSelect(id));
        QPushButton *recover = m_window->actionButton(Action::Recover);
        QVERIFY2(recover->isEnabled(), qPrintable(recover->toolTip()));
        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(id, u"runtime/resume")).ok());
        QVERIFY(m_controller->conversations()->conversation(id)->runtime.status ==
                RuntimeStatus::Missing);

        QTest::mouseClick(recover, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(), u"Nothing to recover"_s,
                                  15000);
        QVERIFY(m_controller->conversations()->conversation(id)->runtime.status ==
                RuntimeStatus::Available);
        QTRY_VERIFY_WITH_TIMEOUT(!recover->isEnabled(), 5000);
        QVERIFY2(recover->toolTip().startsWith(u"Nothing to recover"_s),
                 qPrintable(recover->toolTip()));
        QCOMPARE(Testing::recoveryActionsIn(eventsOf(id)), QStringList{});
    }

    // A conversation an OpenHands client made (its agent spec, its title) is listed like any
    // other, and can be acted on.
    void aConversationOfAnOpenHandsClientIsListed()
    {
        startConsole();
        const QJsonObject agent{
            {u"kind"_s, u"Agent"_s},
            {u"llm"_s, QJsonObject{{u"model"_s, u"openai/gpt-4o"_s}, {u"api_key"_s, u"k"_s}}},
            {u"tools"_s, QJsonArray{QJsonObject{{u"name"_s, u"terminal"_s}}}}};
        const ApiReply created = QCoro::waitFor(
            m_client->post(u"/api/conversations"_s,
                           QJsonObject{{u"agent"_s, agent}, {u"title"_s, u"made by a client"_s}}));
        QVERIFY2(created.ok(), qPrintable(created.errorSentence()));
        const QUuid id =
            parseWireId(created.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
        QCOMPARE(executionText(id), u"idle"_s);
        ConversationListModel *list = m_controller->conversations();
        QCOMPARE(list->index(list->rowOf(id), ConversationListModel::TitleColumn).data().toString(),
                 u"made by a client"_s);
        QVERIFY(showAndSelect(id));
        QPushButton *archive = m_window->actionButton(Action::Archive);
        QVERIFY2(archive->isEnabled(), qPrintable(archive->toolTip()));
    }

    // `make` exiting 2 had a green check: it is marked, counted, and dismissed with a click.
    void aFailedRunNeedsAttentionUntilDismissed()
    {
        startConsole();
        const QUuid id = create(u"fails"_s, u"exit 2"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QTRY_COMPARE_WITH_TIMEOUT(executionText(id), u"finished · exit 2"_s, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(0), u"Active (1, 1 needs attention)"_s,
                                  10000);
        const StatusBadgeDelegate::Badge failedBadge = executionBadge(id);
        QCOMPARE(failedBadge.glyph, u"✖"_s);
        QCOMPARE(failedBadge.colour, QColor(0xc6, 0x28, 0x28));
        QVERIFY(showAndSelect(id));
        QVERIFY(!m_window->actionButton(Action::RunAgain)->isEnabled());
        QPushButton *dismiss = m_window->actionButton(Action::Dismiss);
        QVERIFY2(dismiss->isEnabled(), qPrintable(dismiss->toolTip()));
        QTest::mouseClick(dismiss, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(0), u"Active (1)"_s, 10000);
        // The fact stays; only the call for attention goes.
        QCOMPARE(executionText(id), u"finished · exit 2"_s);
        QCOMPARE(executionBadge(id).colour, QColor(0x75, 0x75, 0x75));
        QVERIFY(!dismiss->isEnabled());
    }

    // The details pane says where the selected conversation's commands run (the sandbox's
    // process, since when, idle or not), its workspace and policy, its agent without a key, its
    // stats and who holds its lease; a fold hides it.
    void theDetailsPaneSaysWhatRunsWhereAndWhoHoldsIt()
    {
        startConsole();
        const QUuid id = create(u"details"_s, u"while [ ! -e go ]; do sleep 0.05; done"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QTRY_VERIFY_WITH_TIMEOUT(sandboxPid(id) > 0, 10000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_window->selectConversation(id));
        DetailsPane *pane = m_window->details();
        QVERIFY(pane->value(DetailsPane::Row::Runtime)->isVisible());
        QTRY_VERIFY_WITH_TIMEOUT(pane->hasRuntimeDetails(), 10000);
        const auto text = [pane](DetailsPane::Row row) { return pane->text(row); };
        QCOMPARE(text(DetailsPane::Row::Runtime), u"available"_s);
        QVERIFY2(
            text(DetailsPane::Row::Process).startsWith(u"pid %1 · started "_s.arg(sandboxPid(id))),
            qPrintable(text(DetailsPane::Row::Process)));
        QVERIFY(text(DetailsPane::Row::Process).endsWith(u" · running a command"_s));
        QVERIFY2(text(DetailsPane::Row::Owner).startsWith(u"This server"_s),
                 qPrintable(text(DetailsPane::Row::Owner)));
        QVERIFY(text(DetailsPane::Row::Owner).contains(u"left"_s));
        const auto info = m_controller->conversations()->conversation(id);
        QVERIFY(info);
        QVERIFY(text(DetailsPane::Row::Workspace).startsWith(info->workingDir));
        QVERIFY2(text(DetailsPane::Row::Sandbox).contains(u"network"_s),
                 qPrintable(text(DetailsPane::Row::Sandbox)));
        QCOMPARE(text(DetailsPane::Row::Agent), u"shell"_s);

        // Once the command ended, the next refresh says since when the sandbox idles.
        QVERIFY(letItGo(id));
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTRY_VERIFY2_WITH_TIMEOUT(text(DetailsPane::Row::Process).contains(u" · idle since "_s),
                                  qPrintable(text(DetailsPane::Row::Process)), 10000);

        // A model's agent says its model and endpoint, never its key.
        CreateConversationRequest request;
        request.title = u"model"_s;
        request.agentKind = u"llm"_s;
        request.agentConfig =
            QJsonObject{{u"llm"_s, QJsonObject{{u"model"_s, u"scripted-model"_s},
                                               {u"base_url"_s, u"http://127.0.0.1:9/v1"_s},
                                               {u"api_key"_s, u"sk-not-for-screens"_s}}}};
        const ApiReply made = QCoro::waitFor(m_client->createConversation(request));
        QVERIFY2(made.ok(), qPrintable(made.errorSentence()));
        const QUuid llm = parseWireId(made.json.toObject().value(u"id"_s).toString()).value();
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_window->selectConversation(llm));
        QCOMPARE(text(DetailsPane::Row::Agent),
                 u"llm · model scripted-model · http://127.0.0.1:9/v1"_s);
        for (const QLabel *label : pane->findChildren<QLabel *>())
            QVERIFY(!label->text().contains(u"sk-not-for-screens"_s) &&
                    !label->toolTip().contains(u"sk-not-for-screens"_s));

        QTest::mouseClick(pane->foldButton(), Qt::LeftButton);
        QVERIFY(!pane->value(DetailsPane::Row::Runtime)->isVisible());
        QVERIFY(m_window->heading()->isVisible());
    }

    // A create whose first message could not start (every sandbox taken) keeps the text in
    // the message box, selects the conversation it made, and Retry runs it once a sandbox is
    // free. The text was lost, the conversation not selected, and nothing retried.
    void aCreateWhoseMessageCouldNotStartOffersRetry()
    {
        ServerConfig config = serverConfig();
        config.maxSandboxes = 1;
        startConsole(config);
        const QUuid busy = create(u"busy"_s, u"while [ ! -e go ]; do sleep 0.05; done"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(busy), u"running"_s, 15000);
        QTRY_VERIFY_WITH_TIMEOUT(sandboxPid(busy) > 0, 10000);

        QTimer::singleShot(0, this, [] {
            auto *dialog = qobject_cast<NewConversationDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            QTest::keyClicks(dialog->titleField(), u"waiting"_s);
            QTest::keyClicks(dialog->messageField(), u"echo made it"_s);
            QTest::mouseClick(dialog->buttons()->button(QDialogButtonBox::Ok), Qt::LeftButton);
        });
        QTest::mouseClick(m_window->newButton(), Qt::LeftButton);
        QPushButton *retry = m_window->bannerBar()->actionButton();
        QTRY_VERIFY_WITH_TIMEOUT(retry->isVisible(), 10000);
        QCOMPARE(retry->text(), u"Retry"_s);
        QVERIFY2(m_window->banner()->text().contains(u"was created"_s),
                 qPrintable(m_window->banner()->text()));
        QCOMPARE(m_window->heading()->text(), u"waiting"_s);
        QCOMPARE(m_window->messageBox()->text(), u"echo made it"_s);
        const QUuid waiting = m_controller->selected();
        QVERIFY(!waiting.isNull() && waiting != busy);

        QVERIFY(letItGo(busy));
        QTRY_COMPARE_WITH_TIMEOUT(status(busy), u"finished"_s, 15000);
        // The busy one's sandbox idles now, and makes room at the next start.
        QTest::mouseClick(retry, Qt::LeftButton);
        QVERIFY(!m_window->banner()->isVisible());
        QTRY_COMPARE_WITH_TIMEOUT(status(waiting), u"finished"_s, 15000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->messageBox()->text().isEmpty(), 5000);
        // Sent once: the first attempt stored nothing.
        int sent = 0;
        for (const QJsonObject &event : eventsOf(waiting)) {
            sent += event.value(u"kind"_s) == u"MessageEvent"_s &&
                    QJsonDocument(event).toJson().contains("echo made it");
        }
        QCOMPARE(sent, 1);
    }

    // An expired runtime is not a dead end: in Reprovision's place, Start fresh asks first,
    // then starts it again with an empty workspace, and the history says so.
    void anExpiredRuntimeStartsFreshWithOneClick()
    {
        const QUuid id = seedExpiredConversation();
        QVERIFY(!id.isNull());
        startConsole();
        QCOMPARE(conversation(id)
                     .value(u"runtime_info"_s)
                     .toObject()
                     .value(u"runtime_error"_s)
                     .toObject()
                     .value(u"code"_s)
                     .toString(),
                 u"runtime_expired"_s);
        QVERIFY(showAndSelect(id));
        QPushButton *fresh = m_window->actionButton(ConsoleController::Action::StartFresh);
        QPushButton *reprovision = m_window->actionButton(ConsoleController::Action::Reprovision);
        // The tool bar lays the buttons out again once its actions changed.
        QTRY_VERIFY(fresh->isVisible() && fresh->isEnabled());
        QVERIFY(!reprovision->isVisible());
        QVERIFY(!m_window->messageBox()->isEnabled()); // expired: nothing can be sent

        QString asked;
        answerTheNextQuestion(QMessageBox::Yes, &asked);
        QTest::mouseClick(fresh, Qt::LeftButton);
        QVERIFY2(asked.contains(u"empty workspace"_s), qPrintable(asked));
        const auto startedFresh = [this, id] {
            const QList<QJsonObject> events = eventsOf(id);
            return std::any_of(events.cbegin(), events.cend(), [](const QJsonObject &event) {
                return event.value(u"value"_s).toString() == u"started_fresh"_s;
            });
        };
        QTRY_VERIFY_WITH_TIMEOUT(startedFresh(), 10000);
        QVERIFY(conversation(id)
                    .value(u"runtime_info"_s)
                    .toObject()
                    .value(u"runtime_error"_s)
                    .isNull());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTRY_VERIFY_WITH_TIMEOUT(reprovision->isVisible() && !fresh->isVisible(), 5000);
        QVERIFY(m_window->messageBox()->isEnabled());
    }

    // The replicas view lists the servers sharing the catalog, as ctl replicas does, and
    // marks the one the console watches.
    void theReplicasViewListsTheServers()
    {
        startConsole();
        const QUuid id = create(u"held"_s, u"true"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QTest::mouseClick(m_window->replicasButton(), Qt::LeftButton);
        ReplicasDialog *dialog = m_window->replicas();
        QVERIFY(dialog && dialog->isVisible());
        QTRY_VERIFY2_WITH_TIMEOUT(dialog->state()->text().contains(u"alive, as of"_s),
                                  qPrintable(dialog->state()->text()), 5000);
        QCOMPARE(dialog->table()->rowCount(), 1);
        const QString replicaId =
            call("GET"_ba, u"/server_info"_s).json.toObject().value(u"replica_id"_s).toString();
        QVERIFY(!replicaId.isEmpty());
        QCOMPARE(dialog->table()->item(0, 0)->text(), u"%1 (this server)"_s.arg(replicaId));
        QCOMPARE(dialog->table()->item(0, 1)->text(), u"alive"_s);
        QVERIFY(dialog->state()->text().startsWith(u"1 of 1 alive"_s));
    }

    // The tray has the application's own icon (it asked the theme for one, and showed nothing
    // where the theme had none), a menu naming what needs attention, and its message opens
    // the conversation it names.
    void theTrayShowsItsIconAndWhatNeedsAttention()
    {
        const QIcon icon = ConsoleTray::appIcon();
        QVERIFY(!icon.isNull());
        QVERIFY(icon.availableSizes().contains(QSize(48, 48)));
        startConsole();
        QVERIFY(!m_window->windowIcon().isNull());
        const QUuid calm = create(u"calm"_s);
        const QUuid failing = create(u"failing"_s, u"exit 2"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(failing), u"finished"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_window->selectConversation(calm));

        QMenu *menu = m_window->tray()->menu();
        Q_EMIT menu->aboutToShow();
        QStringList texts;
        QAction *open = nullptr;
        for (QAction *action : menu->actions()) {
            texts.append(action->text());
            if (action->text() == u"Needs attention: failing"_s)
                open = action;
        }
        QVERIFY2(open, qPrintable(texts.join(u" | "_s)));
        QVERIFY(texts.contains(u"Show AgentDeck"_s) && texts.contains(u"Quit"_s));
        QVERIFY(!texts.contains(u"Needs attention: calm"_s));
        open->trigger();
        QCOMPARE(m_controller->selected(), failing);

        QVERIFY(m_window->selectConversation(calm));
        const auto info = m_controller->conversations()->conversation(failing);
        QVERIFY(info);
        m_window->tray()->notifyAttention(*info);
        m_window->tray()->openNotified();
        QCOMPARE(m_controller->selected(), failing);
    }

    // Closing the window of an embedded server stops its runs: it asks first, and may keep the
    // server going in the background instead.
    void closingWithRunsGoingAsks_data()
    {
        QTest::addColumn<QString>("answer");
        QTest::addColumn<bool>("closed");
        QTest::addColumn<bool>("keptInBackground");
        QTest::newRow("cancel") << u"Cancel"_s << false << false;
        QTest::newRow("keep") << u"Keep the server running until they end"_s << false << true;
        QTest::newRow("stop") << u"Stop them and quit"_s << true << false;
    }

    void closingWithRunsGoingAsks()
    {
        QFETCH(QString, answer);
        QFETCH(bool, closed);
        QFETCH(bool, keptInBackground);
        startConsole();
        m_window->setEmbedded(true);
        const QUuid id = create(u"long"_s, u"sleep 30"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QString question;
        QTimer::singleShot(0, this, [&] {
            auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
            if (!box)
                return;
            question = box->text();
            for (QAbstractButton *button : box->buttons()) {
                if (button->text() == answer)
                    QTest::mouseClick(button, Qt::LeftButton);
            }
        });
        QCOMPARE(m_window->close(), closed);
        QVERIFY2(question.contains(u"1 conversation"_s), qPrintable(question));
        QCOMPARE(m_window->isKeptInBackground(), keptInBackground);
        QCOMPARE(m_window->isVisible(), !closed && !keptInBackground);
        QCOMPARE(status(id), u"running"_s); // the server stops with the application, not here
    }

    // Kept in the background, the window says when its runs have ended, and the application
    // then quits (console.cpp).
    void aWindowKeptForItsRunsSaysWhenTheyEnd()
    {
        startConsole();
        m_window->setEmbedded(true);
        const QUuid id = create(u"long"_s, u"while [ ! -e go ]; do sleep 0.05; done"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTimer::singleShot(0, this, [] {
            auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
            if (!box)
                return;
            for (QAbstractButton *button : box->buttons()) {
                if (button->text() == u"Keep the server running until they end"_s)
                    QTest::mouseClick(button, Qt::LeftButton);
            }
        });
        QSignalSpy ended(m_window.get(), &MainWindow::keptRunsEnded);
        QVERIFY(!m_window->close());
        QVERIFY(m_window->isKeptInBackground());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(ended.count(), 0); // it still runs

        QVERIFY(letItGo(id));
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(ended.count(), 1);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(ended.count(), 1); // once
    }

    void closingWithNothingRunningAsksNothing()
    {
        startConsole();
        m_window->setEmbedded(true);
        create(u"idle"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_window->close());
    }

    void unarchiveMovesTheRowBackToActive()
    {
        startConsole();
        const QUuid id = create(u"archived one"_s);
        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(id, u"archive")).ok());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (1)"_s);
        QVERIFY(m_window->selectConversation(id));
        QCOMPARE(m_window->tabs()->currentIndex(), 1);
        QVERIFY(!m_window->actionButton(Action::Recover)->isEnabled());
        QCOMPARE(m_window->actionButton(Action::Recover)->toolTip(),
                 u"Archived: unarchive it first"_s);
        QTest::mouseClick(m_window->actionButton(Action::Unarchive), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(conversation(id).value(u"archived_at"_s).isNull(), 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(0), u"Active (1)"_s, 10000);
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (0)"_s);
        QCOMPARE(runtimeOf(id), u"missing"_s); // unarchive provisions nothing
    }

    void reprovisionReplacesTheSandbox()
    {
        startConsole();
        const QUuid id = create(u"with sandbox"_s, u"echo hi"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        const qint64 before = sandboxPid(id);
        QVERIFY(before > 0);
        QVERIFY(showAndSelect(id));
        // It asks first: No leaves the sandbox, Yes replaces it and the history says so.
        for (const auto answer : {QMessageBox::No, QMessageBox::Yes}) {
            bool asked = false;
            QTimer::singleShot(0, this, [&asked, answer] {
                if (auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget())) {
                    asked = true;
                    QTest::mouseClick(box->button(answer), Qt::LeftButton);
                }
            });
            QTest::mouseClick(m_window->actionButton(Action::Reprovision), Qt::LeftButton);
            QVERIFY(asked);
            if (answer == QMessageBox::No)
                QVERIFY(!QTest::qWaitFor([&] { return sandboxPid(id) != before; }, 500));
        }
        QTRY_VERIFY_WITH_TIMEOUT(sandboxPid(id) > 0 && sandboxPid(id) != before, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(badgeText(m_window->activeView(), id), u"available"_s, 10000);
        const QList<QJsonObject> updates =
            Testing::ofKind(eventsOf(id), u"ConversationStateUpdateEvent"_s);
        QVERIFY(std::any_of(updates.cbegin(), updates.cend(), [](const QJsonObject &update) {
            return update[u"key"_s] == u"runtime"_s && update[u"value"_s] == u"reprovisioned"_s;
        }));
    }

    void archiveMovesTheRowToArchived()
    {
        startConsole();
        const QUuid id = create(u"to archive"_s, u"echo hi"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        QTest::mouseClick(m_window->actionButton(Action::Archive), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(conversation(id).value(u"archived_at"_s).isString(), 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(1), u"Archived (1)"_s, 10000);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (0)"_s);
        QCOMPARE(runtimeOf(id), u"missing"_s); // archive stopped the runtime
    }

    // A double-click on Archive archived the selected conversation, and then its neighbour,
    // which Qt made current once the first had left the list; the neighbour's run was
    // interrupted with it.
    void aDoubleClickActsOnTheSelectedConversationOnly()
    {
        startConsole();
        const QUuid neighbour = create(u"neighbour"_s, u"sleep 30"_s);
        const QUuid target = create(u"target"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(neighbour), u"running"_s, 15000);
        QVERIFY(showAndSelect(target));
        // The pane names what the buttons act on.
        QCOMPARE(m_window->heading()->text(), u"target"_s);
        QCOMPARE(m_window->headingId()->text(), toWireId(target));
        QPushButton *archive = m_window->actionButton(Action::Archive);
        QTest::mouseClick(archive, Qt::LeftButton);
        QVERIFY(!archive->isEnabled()); // until the server answers the first click
        QTest::mouseClick(archive, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(1), u"Archived (1)"_s, 10000);
        // The neighbour is not selected in its place: a click meant for the first does nothing.
        QVERIFY(!m_window->activeView()->selectionModel()->currentIndex().isValid());
        QVERIFY(m_controller->selected().isNull());
        QCOMPARE(m_window->heading()->text(), u"No conversation selected"_s);
        QVERIFY(!m_window->headingId()->isVisible());
        QVERIFY(!archive->isEnabled());
        QTest::mouseClick(archive, Qt::LeftButton);
        QVERIFY(conversation(target).value(u"archived_at"_s).isString());
        QVERIFY(conversation(neighbour).value(u"archived_at"_s).isNull());
        QCOMPARE(status(neighbour), u"running"_s);
        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(neighbour, u"interrupt")).ok());
    }

    // Archive stops the command in flight: for a running conversation it asks first. The
    // question names the conversation by a long title's both ends and its id.
    void archivingARunningConversationAsksFirst()
    {
        startConsole();
        const QString title = u"start "_s + QString(200, u'm') + u" end"_s;
        const QUuid id = create(title, u"sleep 600"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QVERIFY(showAndSelect(id));
        // The heading keeps both ends too, and fits the pane; the whole title is its tooltip.
        QVERIFY2(m_window->heading()->text().startsWith(u"start mmm"_s) &&
                     m_window->heading()->text().endsWith(u"mmm end"_s) &&
                     m_window->heading()->text().size() < title.size(),
                 qPrintable(m_window->heading()->text()));
        QVERIFY(m_window->heading()->sizeHint().width() <= 380);
        QCOMPARE(m_window->heading()->toolTip(), title);
        for (const auto answer : {QMessageBox::No, QMessageBox::Yes}) {
            QString question;
            QTimer::singleShot(0, this, [&question, answer] {
                if (auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget())) {
                    question = box->text();
                    QTest::mouseClick(box->button(answer), Qt::LeftButton);
                }
            });
            QTest::mouseClick(m_window->actionButton(Action::Archive), Qt::LeftButton);
            QVERIFY2(question.startsWith(u"Archive “start "_s), qPrintable(question));
            QVERIFY2(question.contains(u" end” ("_s + toWireId(id) + u')'), qPrintable(question));
            QVERIFY2(question.contains(u"the command in flight is stopped"_s),
                     qPrintable(question));
            if (answer == QMessageBox::No) {
                QVERIFY(!m_controller->isActingOn(id));
                QCOMPARE(status(id), u"running"_s);
            }
        }
        QTRY_VERIFY_WITH_TIMEOUT(conversation(id).value(u"archived_at"_s).isString(), 10000);
    }

    // Watching another server, the console reads the client's key variable, as ctl does.
    void connectReadsTheClientsKeyVariable()
    {
        qputenv("AGENTDECK_SESSION_API_KEY", "client-key");
        QString error, message;
        const auto watching = parseOptions({u"--connect"_s, u"127.0.0.1:8000"_s}, &error, &message);
        const auto given =
            parseOptions({u"--connect"_s, u"127.0.0.1:8000"_s, u"--session-api-key"_s, u"given"_s},
                         &error, &message);
        const auto serving = parseOptions({u"--headless"_s}, &error, &message);
        qunsetenv("AGENTDECK_SESSION_API_KEY");
        QVERIFY2(watching && given && serving, qPrintable(error));
        QCOMPARE(watching->connectUrl, QUrl(u"http://127.0.0.1:8000"_s));
        QCOMPARE(watching->server.apiKeys.value(0), u"client-key"_s);
        QCOMPARE(given->server.apiKeys.value(0), u"given"_s);
        // A server's own keys come from its own variable only.
        QVERIFY(!serving->server.apiKeys.contains(u"client-key"_s));
    }

    // An empty console was a dead end: it could not make a conversation. New… asks for one,
    // creates it, selects it, and runs its first message.
    void aConversationIsCreatedFromTheConsole()
    {
        startConsole();
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (0)"_s);
        bool filled = false;
        QTimer::singleShot(0, this, [&filled] {
            auto *dialog = qobject_cast<NewConversationDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            QTest::keyClicks(dialog->titleField(), u"made here"_s);
            // Tags as the list's column writes them; a wrong one holds Create back and says why.
            QPushButton *create = dialog->buttons()->button(QDialogButtonBox::Ok);
            QTest::keyClicks(dialog->tagsField(), u"team=ops, =x"_s);
            const bool refused = !create->isEnabled() && dialog->tagsProblem()->isVisible() &&
                                 dialog->tagsProblem()->text().contains(u"needs a name"_s);
            dialog->tagsField()->setText(u"team=ops, urgent"_s);
            dialog->agentField()->setCurrentIndex(dialog->agentField()->findData(u"shell"_s));
            QTest::keyClicks(dialog->messageField(), u"echo from the console"_s);
            filled = refused && create->isEnabled() && !dialog->tagsProblem()->isVisible();
            QTest::mouseClick(dialog->buttons()->button(QDialogButtonBox::Ok), Qt::LeftButton);
        });
        QTest::mouseClick(m_window->newButton(), Qt::LeftButton);
        QVERIFY(filled);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->heading()->text(), u"made here"_s, 10000);
        const QUuid id = m_controller->selected();
        QVERIFY(!id.isNull());
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (1)"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QCOMPARE(conversation(id).value(u"agent"_s).toObject().value(u"kind"_s).toString(),
                 u"shell"_s);
        QCOMPARE(conversation(id).value(u"tags"_s).toObject(),
                 (QJsonObject{{u"team"_s, u"ops"_s}, {u"urgent"_s, u""_s}}));
        QTRY_VERIFY_WITH_TIMEOUT(
            textItem(m_window->timeline()->rootObject(), u"from the console\n"_s) != nullptr,
            10000);
        QCOMPARE(m_window->statusBar()->currentMessage(), u"Created made here"_s);

        // With a filter that hides it, the filter goes: it was neither shown nor selected, and
        // the buttons acted on the conversation selected before.
        m_window->filterBox()->setText(u"made"_s);
        QTimer::singleShot(0, this, [] {
            auto *dialog = qobject_cast<NewConversationDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            QTest::keyClicks(dialog->titleField(), u"other one"_s);
            QTest::mouseClick(dialog->buttons()->button(QDialogButtonBox::Ok), Qt::LeftButton);
        });
        QTest::mouseClick(m_window->newButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->heading()->text(), u"other one"_s, 10000);
        QVERIFY(m_window->filterBox()->text().isEmpty());
        QVERIFY(m_controller->selected() != id);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (2)"_s);

        // A refusal is the server's sentence, and nothing is added.
        QTimer::singleShot(0, this, [] {
            auto *dialog = qobject_cast<NewConversationDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            QTest::keyClicks(dialog->titleField(), QString(300, u't'));
            QTest::mouseClick(dialog->buttons()->button(QDialogButtonBox::Ok), Qt::LeftButton);
        });
        QTest::mouseClick(m_window->newButton(), Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(
            m_window->banner()->text().startsWith(u"Creating the conversation failed: "_s),
            qPrintable(m_window->banner()->text()), 10000);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (2)"_s);
    }

    // The selected conversation goes, and with it the selection: its neighbour stayed
    // highlighted with its actions enabled but no timeline, under a banner saying that the
    // deleted one no longer existed.
    void deleteAsksThenRemoves_data()
    {
        QTest::addColumn<bool>("remote");
        QTest::addRow("embedded server") << false;
        // A server of its own: there the stream's 4004 came before the DELETE's answer.
        QTest::addRow("remote server") << true;
    }
    void deleteAsksThenRemoves()
    {
        QFETCH(bool, remote);
        Testing::ServerFleet fleet;
        if (remote) {
            QString problem;
            QVERIFY2(fleet.findBinary(&problem), qPrintable(problem));
            Testing::ServerProcess &server = fleet.add();
            QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
            openConsole(server.url());
        } else {
            startConsole();
        }
        const QUuid id = create(u"to delete"_s);
        create(u"its neighbour"_s);
        QVERIFY(showAndSelect(id));
        bool asked = false;
        QTimer::singleShot(0, this, [&asked] {
            auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
            if (!box)
                return;
            asked = true;
            QTest::mouseClick(box->button(QMessageBox::Yes), Qt::LeftButton);
        });
        QTest::mouseClick(m_window->actionButton(Action::Delete), Qt::LeftButton);
        QVERIFY(asked);
        QTRY_COMPARE_WITH_TIMEOUT(call("GET"_ba, ServerConnection::conversationPath(id)).status,
                                  404, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_controller->conversations()->rowOf(id), -1, 10000);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (1)"_s);
        QTRY_VERIFY(!m_window->activeView()->selectionModel()->currentIndex().isValid());
        QVERIFY(m_controller->selected().isNull());
        QCOMPARE(m_window->heading()->text(), u"No conversation selected"_s);
        // Its stream's close is no failure, whether it comes before the answer or after.
        QVERIFY2(!QTest::qWaitFor([&] { return m_window->banner()->isVisible(); }, 500),
                 qPrintable(m_window->banner()->text()));
        fleet.cleanUp();
    }

    // A command that hangs is stopped with one click: Pause waits for it to end.
    // Commands that run unisolated (here: inside the server) are said in the status bar, with
    // the server's reason; isolated ones say nothing.
    void unisolatedCommandsAreShown_data()
    {
        QTest::addColumn<bool>("inServer");
        QTest::addRow("in the server") << true;
        QTest::addRow("in sandboxes") << false;
    }
    void unisolatedCommandsAreShown()
    {
        QFETCH(bool, inServer);
        ServerConfig config = serverConfig();
        if (inServer)
            config.runtime = ServerConfig::RuntimeKind::Process;
        startConsole(config);
        if (!inServer) {
            const QJsonObject sandbox = QCoro::waitFor(m_client->get(u"/server_info"_s))
                                            .json.toObject()
                                            .value(u"sandbox"_s)
                                            .toObject();
            if (sandbox.value(u"isolation"_s).toString() != u"bubblewrap"_s)
                QSKIP("bubblewrap cannot create namespaces here");
        }
        QLabel *state = m_window->isolationState();
        if (inServer) {
            QTRY_VERIFY_WITH_TIMEOUT(state->isVisible(), 10000);
            QCOMPARE(state->text(), u"⚠ Commands not isolated"_s);
            QVERIFY2(state->toolTip().contains(u"--runtime process"_s),
                     qPrintable(state->toolTip()));
        } else {
            QVERIFY(QCoro::waitFor(m_controller->refresh()));
            QVERIFY(!state->isVisible());
            QVERIFY(m_controller->isolationWarning().isEmpty());
        }
    }

    // A webhook that keeps failing is said in the status bar, with its URL and error as tooltip.
    void failingWebhookIsShown()
    {
        QTcpServer closed;
        QVERIFY(closed.listen(QHostAddress::LocalHost, 0));
        const QString url = u"http://127.0.0.1:%1/hook"_s.arg(closed.serverPort());
        closed.close();
        qputenv("AGENTDECK_TEST_WEBHOOK_TIMING", "retry_ms=20,max_retry_ms=50,poll_ms=100");
        ServerConfig config = serverConfig();
        config.webhooks = {WebhookTarget{url, QUrl(url), {}}};
        config.webhookSecret = "secret";
        startConsole(config);
        qunsetenv("AGENTDECK_TEST_WEBHOOK_TIMING");
        m_controller->setServerInfoInterval(std::chrono::milliseconds(0));
        auto *state = m_window->findChild<QLabel *>(u"webhookState"_s);
        QVERIFY(state);
        QVERIFY(!state->isVisible());
        QVERIFY(!create(u"hooked"_s, u"true"_s).isNull());
        // Each refresh reads /server_info again (the window's timer does it every few seconds).
        QTRY_VERIFY_WITH_TIMEOUT((QCoro::waitFor(m_controller->refresh()), state->isVisible()),
                                 15000);
        QCOMPARE(state->text(), u"⚠ Webhook failing"_s);
        QVERIFY2(state->toolTip().contains(url), qPrintable(state->toolTip()));
        QCOMPARE(m_controller->webhookWarning(), state->toolTip());
    }

    void interruptStopsAHangingCommand()
    {
        startConsole();
        const QUuid id = create(u"hangs"_s, u"sleep 600"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QVERIFY(showAndSelect(id));
        QPushButton *interrupt = m_window->actionButton(Action::Interrupt);
        QVERIFY2(interrupt->isEnabled(), qPrintable(interrupt->toolTip()));
        QTest::mouseClick(interrupt, Qt::LeftButton);
        // Carried out after the answer: requested, not done.
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(), u"Interrupt requested"_s,
                                  10000);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"paused"_s, 15000);
        // Once the message has passed, the bar says again where it is connected (it was empty).
        QTRY_VERIFY_WITH_TIMEOUT(m_window->statusBar()->currentMessage().isEmpty(), 10000);
        QVERIFY(m_window->connectionState()->isVisible());
        QVERIFY(m_window->connectionState()->text().startsWith(u"Connected to"_s));
        const QList<QJsonObject> events = eventsOf(id);
        const QList<QJsonObject> observations = Testing::ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QVERIFY(observations.first()
                    .value(u"observation"_s)
                    .toObject()
                    .value(u"interrupted"_s)
                    .toBool());
    }

    // A conversation waiting for confirmation is answered from the console: Accept runs the
    // action, Reject records the rejection. Run is not offered there: it flipped the status to
    // running and straight back.
    void aConfirmationIsAnsweredFromTheConsole_data()
    {
        QTest::addColumn<bool>("accept");
        QTest::addRow("accept") << true;
        QTest::addRow("reject") << false;
    }
    void aConfirmationIsAnsweredFromTheConsole()
    {
        QFETCH(bool, accept);
        startConsole();
        const QUuid id = create(u"needs a yes"_s, u"echo confirmed"_s, /*confirm=*/true);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"waiting_for_confirmation"_s, 15000);
        QVERIFY(showAndSelect(id));
        // Said where the operator looks: without a system tray, nothing did.
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (1, 1 needs attention)"_s);
        QVERIFY(!m_window->actionButton(Action::Run)->isEnabled());
        QCOMPARE(m_window->actionButton(Action::Run)->toolTip(),
                 u"Waiting for confirmation: accept or reject its action"_s);
        QPushButton *button = m_window->actionButton(accept ? Action::Accept : Action::Reject);
        QVERIFY2(button->isEnabled(), qPrintable(button->toolTip()));
        // A rejection asks why, as ctl's --reason does, and the history keeps the answer.
        bool asked = false;
        if (!accept) {
            QTimer::singleShot(0, this, [&asked] {
                auto *dialog = qobject_cast<QInputDialog *>(QApplication::activeModalWidget());
                if (!dialog)
                    return;
                asked = true;
                dialog->setTextValue(u"not on a Friday"_s);
                dialog->accept();
            });
        }
        QTest::mouseClick(button, Qt::LeftButton);
        QCOMPARE(asked, !accept);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->tabs()->tabText(0), u"Active (1)"_s, 10000);
        const QList<QJsonObject> events = eventsOf(id);
        QCOMPARE(Testing::ofKind(events, u"ObservationEvent"_s).size(), accept ? 1 : 0);
        const QList<QJsonObject> rejections = Testing::ofKind(events, u"UserRejectObservation"_s);
        QCOMPARE(rejections.size(), accept ? 0 : 1);
        if (!accept)
            QCOMPARE(rejections.first().value(u"rejection_reason"_s).toString(),
                     u"not on a Friday"_s);
    }

    // Run on a finished conversation asks for the next message: it ran the agent with nothing
    // new, which only added a running and a finished state.
    void runOnAFinishedConversationAsksForTheNextMessage()
    {
        startConsole();
        const QUuid id = create(u"done"_s, u"echo done"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        const qsizetype events = eventsOf(id).size();
        QPushButton *run = m_window->actionButton(Action::Run);
        QVERIFY(run->isEnabled());
        QTest::mouseClick(run, Qt::LeftButton);
        QVERIFY2(m_window->statusBar()->currentMessage().contains(u"type the next message"_s),
                 qPrintable(m_window->statusBar()->currentMessage()));
        QTRY_VERIFY(m_window->messageBox()->hasFocus());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(eventsOf(id).size(), events);
        QCOMPARE(status(id), u"finished"_s);

        QTest::keyClicks(m_window->messageBox(), u"echo next"_s);
        QTest::keyClick(m_window->messageBox(), Qt::Key_Return);
        QTRY_VERIFY_WITH_TIMEOUT(eventsOf(id).size() > events, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
    }

    // A command that failed had the grey of one that succeeded; now it is marked in colour.
    void aFailedCommandStandsOut()
    {
        startConsole();
        const QUuid id = create(u"fails"_s, u"echo fine; true"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(
            QCoro::waitFor(m_client->sendMessage(id, MessageRequest{u"user"_s, u"exit 3"_s, true}))
                .ok());
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        const auto headerColour = [this](const QString &ending) -> QColor {
            const std::function<QQuickItem *(QQuickItem *)> find =
                [&](QQuickItem *item) -> QQuickItem * {
                if (item->inherits("QQuickText") &&
                    item->property("text").toString().startsWith(u"Output"_s) &&
                    item->property("text").toString().endsWith(ending))
                    return item;
                for (QQuickItem *child : item->childItems()) {
                    if (QQuickItem *found = find(child))
                        return found;
                }
                return nullptr;
            };
            QQuickItem *header = find(m_window->timeline()->rootObject());
            return header ? header->property("color").value<QColor>() : QColor();
        };
        QTRY_VERIFY_WITH_TIMEOUT(headerColour(u"exit 3"_s).isValid(), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(headerColour(u"exit 0"_s).isValid(), 10000);
        QCOMPARE(headerColour(u"exit 0"_s), QColor(u"#424242"_s));
        QCOMPARE(headerColour(u"exit 3"_s), QColor(u"#d84315"_s));

        // In words, each with its time and place in the history.
        QStringList labels;
        QStringList stamps;
        const std::function<void(QQuickItem *)> collect = [&](QQuickItem *item) {
            if (item->objectName() == u"label"_s)
                labels.append(item->property("text").toString());
            if (item->objectName() == u"stamp"_s)
                stamps.append(item->property("text").toString());
            for (QQuickItem *child : item->childItems())
                collect(child);
        };
        collect(m_window->timeline()->rootObject());
        for (const QString &label : {u"Message from the user"_s, u"Command"_s, u"State"_s})
            QVERIFY2(labels.contains(label), qPrintable(labels.join(u" | "_s)));
        QVERIFY(!labels.join(u' ').contains(u"Event"_s));
        static const QRegularExpression stamp(u"^\\d\\d:\\d\\d:\\d\\d UTC  #\\d+$"_s);
        QVERIFY(!stamps.isEmpty());
        for (const QString &text : stamps)
            QVERIFY2(stamp.match(text).hasMatch(), qPrintable(text));
    }

    // What a command prints shows under it while it runs, with how long it has run; a command
    // printing a line a second showed nothing until it ended. The text can be selected.
    void aRunningCommandShowsItsOutputAsItComes()
    {
        startConsole();
        const QUuid id = create(u"live"_s, u"echo started; sleep 600"_s);
        QVERIFY(showAndSelect(id));
        const auto shown = [this](const QString &name) -> QQuickItem * {
            const std::function<QQuickItem *(QQuickItem *)> find =
                [&](QQuickItem *item) -> QQuickItem * {
                if (item->objectName() == name && item->isVisible())
                    return item;
                for (QQuickItem *child : item->childItems()) {
                    if (QQuickItem *found = find(child))
                        return found;
                }
                return nullptr;
            };
            return find(m_window->timeline()->rootObject());
        };
        const auto textOf = [&](const QString &name) {
            QQuickItem *item = shown(name);
            return item ? item->property("text").toString() : QString();
        };
        QTRY_COMPARE_WITH_TIMEOUT(textOf(u"liveOutput"_s), u"started"_s, 15000);
        QVERIFY2(textOf(u"elapsed"_s).startsWith(u"running · "_s),
                 qPrintable(textOf(u"elapsed"_s)));
        QCOMPARE(shown(u"liveOutput"_s)->property("selectByMouse").toBool(), true);
        // An event's whole text is a click away from the clipboard.
        QQuickItem *copy = shown(u"copy"_s);
        QVERIFY(copy);
        QGuiApplication::clipboard()->clear();
        QTest::mouseClick(
            m_window->timeline(), Qt::LeftButton, {},
            copy->mapToScene(QPointF(copy->width() / 2, copy->height() / 2)).toPoint());
        QTRY_COMPARE_WITH_TIMEOUT(QGuiApplication::clipboard()->text(),
                                  u"echo started; sleep 600"_s, 5000);

        QVERIFY(QCoro::waitFor(m_client->conversationAction(id, u"interrupt"_s)).ok());
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"paused"_s, 15000);
        QTRY_VERIFY_WITH_TIMEOUT(!shown(u"liveOutput"_s) && !shown(u"elapsed"_s), 10000);
    }

    // A line or two of an output, for a ticket or a search: dragged over, it is selected, and
    // Ctrl+C copies it. A label could not be selected.
    void aPartOfAnEventsTextIsSelectedAndCopied()
    {
        startConsole();
        const QUuid id = create(u"select"_s, u"echo alpha beta gamma"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        QQuickItem *body = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT(
            (body = textItem(m_window->timeline()->rootObject(), u"alpha beta gamma\n"_s)), 10000);
        QCOMPARE(body->objectName(), u"body"_s);
        QTRY_VERIFY(body->width() > 0 && body->height() > 0);
        // From the start of the line to the end of "alpha beta".
        QRectF end;
        QVERIFY(QMetaObject::invokeMethod(body, "positionToRectangle", Q_RETURN_ARG(QRectF, end),
                                          Q_ARG(int, 10)));
        // Through the window, as the pointer's events come (QTest's events for a widget carry
        // a time of their own, and hid that the timeline's scene got none: its first press
        // selected the whole block).
        QQuickWidget *timeline = m_window->timeline();
        QWindow *window = m_window->windowHandle();
        const auto inWindow = [&](QPointF inBody) {
            return timeline->mapTo(m_window.get(), body->mapToScene(inBody).toPoint());
        };
        const QPoint from = inWindow(QPointF(1, end.center().y()));
        const QPoint to = inWindow(end.center());
        QTest::mousePress(window, Qt::LeftButton, {}, from);
        for (int step = 1; step <= 10; ++step)
            QTest::mouseMove(window, from + (to - from) * step / 10);
        QTest::mouseRelease(window, Qt::LeftButton, {}, to);
        QCOMPARE(body->property("selectedText").toString(), u"alpha beta"_s);
        QGuiApplication::clipboard()->clear();
        QTest::keyClick(timeline, Qt::Key_C, Qt::ControlModifier);
        QTRY_COMPARE_WITH_TIMEOUT(QGuiApplication::clipboard()->text(), u"alpha beta"_s, 5000);
    }

    // Sorted by title, a column widened, the splitter moved and the window made smaller: the
    // console opened again as it was left, not as it first opens.
    void theLayoutIsRememberedWhenTheConsoleOpensAgain()
    {
        startConsole();
        for (const QString &title : {u"beta"_s, u"alpha"_s, u"gamma"_s})
            create(title);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTableView *view = m_window->activeView();
        QTRY_COMPARE(view->model()->rowCount(), 3);
        QHeaderView *header = view->horizontalHeader();
        const auto clickHeader = [&] {
            const int x = header->sectionViewportPosition(ConversationListModel::TitleColumn) + 10;
            QTest::mouseClick(header->viewport(), Qt::LeftButton, {},
                              QPoint(x, header->height() / 2));
        };
        clickHeader();
        QCOMPARE(header->sortIndicatorSection(), int(ConversationListModel::TitleColumn));
        if (header->sortIndicatorOrder() != Qt::DescendingOrder)
            clickHeader();
        QCOMPARE(header->sortIndicatorOrder(), Qt::DescendingOrder);
        header->resizeSection(ConversationListModel::TagsColumn, 173);
        auto *splitter = m_window->findChild<QSplitter *>();
        QVERIFY(splitter);
        m_window->resize(1100, 700);
        splitter->setSizes({500, 600});
        const QList<int> sizes = splitter->sizes();
        const auto titles = [this] {
            QStringList shown;
            const QAbstractItemModel *rows = m_window->activeView()->model();
            for (int row = 0; row < rows->rowCount(); ++row)
                shown.append(
                    rows->index(row, ConversationListModel::TitleColumn).data().toString());
            return shown;
        };
        QCOMPARE(titles(), (QStringList{u"gamma"_s, u"beta"_s, u"alpha"_s}));

        m_window.reset();
        m_controller.reset();
        openConsole(m_url);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(m_window->size(), QSize(1100, 700));
        QCOMPARE(m_window->findChild<QSplitter *>()->sizes(), sizes);
        header = m_window->activeView()->horizontalHeader();
        QCOMPARE(header->sectionSize(ConversationListModel::TagsColumn), 173);
        QCOMPARE(header->sortIndicatorSection(), int(ConversationListModel::TitleColumn));
        QCOMPARE(header->sortIndicatorOrder(), Qt::DescendingOrder);
        QTRY_COMPARE(titles(), (QStringList{u"gamma"_s, u"beta"_s, u"alpha"_s}));
    }

    // The button clicked is disabled while the server answers, and it handed the focus down the
    // tab chain to the filter, which selected its text: the next key replaced the filter.
    void anActionLeavesTheFocusOnTheList()
    {
        startConsole();
        const QUuid id = create(u"focus here"_s); // idle: Run runs it
        QVERIFY(showAndSelect(id));
        m_window->filterBox()->setText(u"focus"_s);
        m_window->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(m_window.get()));
        QPushButton *run = m_window->actionButton(Action::Run);
        run->setFocus();
        QVERIFY(run->hasFocus());
        QTest::mouseClick(run, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(), u"Run done"_s, 10000);
        QVERIFY(!m_window->filterBox()->hasFocus());
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_X);
        QCOMPARE(m_window->filterBox()->text(), u"focus"_s);
    }

    // The window works at 1,024 px: the actions that do not fit go into the tool bar's
    // extension, the filter stays beside the tabs. It could not be made narrower than ~1,220.
    void theWindowWorksAt1024PixelsWide()
    {
        startConsole();
        QVERIFY2(m_window->minimumSizeHint().width() <= 1024,
                 qPrintable(QString::number(m_window->minimumSizeHint().width())));
        m_window->resize(1024, 700);
        QTRY_COMPARE(m_window->width(), 1024);
        QVERIFY(m_window->filterBox()->isVisible());
        QVERIFY(m_window->newButton()->isVisible());
        QVERIFY(m_window->activeView()->isVisible());
        QVERIFY(m_window->timeline()->isVisible());
        // What went into the extension is still in the menu bar.
        for (Action action : ConsoleController::AllActions)
            QVERIFY(m_window->menuAction(action));
    }

    // Every action is in the menu bar with its shortcut, and the keys an operator of KDE or
    // GNOME tries work: Ctrl+F to the filter, F5 refreshes, Enter opens the conversation (the
    // message box takes the next keys), Delete deletes (asking first).
    void theKeyboardReachesEveryAction()
    {
        startConsole();
        const QUuid id = create(u"keys"_s);
        QVERIFY(showAndSelect(id));
        m_window->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(m_window.get()));
        QStringList listed;
        for (QAction *menu : m_window->menuBar()->actions()) {
            for (QAction *item : menu->menu()->actions())
                listed.append(item->text());
        }
        for (int i = 0; i < QMetaEnum::fromType<Action>().keyCount(); ++i) {
            const auto action = Action(QMetaEnum::fromType<Action>().value(i));
            QVERIFY2(listed.contains(ConsoleController::actionName(action)),
                     qPrintable(listed.join(u", "_s)));
        }
        QCOMPARE(m_window->menuAction(Action::Recover)->shortcut(),
                 QKeySequence(Qt::CTRL | Qt::Key_R));
        QCOMPARE(m_window->menuAction(Action::Delete)->shortcut(),
                 QKeySequence(QKeySequence::Delete));

        QTableView *view = m_window->activeView();
        view->setFocus();
        QTest::keyClick(view, Qt::Key_F, Qt::ControlModifier);
        QVERIFY(m_window->filterBox()->hasFocus());

        QSignalSpy refreshed(m_controller.get(), &ConsoleController::refreshed);
        QTest::keyClick(view, Qt::Key_F5);
        QVERIFY(refreshed.wait(5000));

        view->setFocus();
        QTest::keyClick(view, Qt::Key_Return);
        QVERIFY(m_window->messageBox()->hasFocus());

        view->setFocus();
        QString asked;
        answerTheNextQuestion(QMessageBox::No, &asked);
        QTest::keyClick(view, Qt::Key_Delete);
        QVERIFY2(asked.startsWith(u"Delete “keys”"_s), qPrintable(asked));
        QCOMPARE(call("GET"_ba, ServerConnection::conversationPath(id)).status, 200);
        // In the filter, Delete is the filter's.
        m_window->filterBox()->setText(u"kx"_s);
        m_window->filterBox()->setFocus();
        m_window->filterBox()->setCursorPosition(1);
        asked.clear();
        QTest::keyClick(m_window->filterBox(), Qt::Key_Delete);
        QCOMPARE(m_window->filterBox()->text(), u"k"_s);
        QVERIFY(asked.isEmpty());
    }

    // F2 edits the title where it is shown, Shift+F2 the tags; Enter sends the edit to the
    // server, and the row shows what the server then has. Titles and tags could not be edited.
    void aTitleAndTagsEditedInPlaceReachTheServer()
    {
        startConsole();
        const QUuid id = create(u"old title"_s);
        QVERIFY(showAndSelect(id));
        m_window->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(m_window.get()));
        QTableView *view = m_window->activeView();
        view->setFocus();
        const auto editor = [view]() -> QLineEdit * {
            return view->viewport()->findChild<QLineEdit *>();
        };
        const auto typeAndEnter = [&](const QString &text) {
            QTRY_VERIFY(editor() && editor()->isVisible());
            QLineEdit *line = editor();
            line->selectAll();
            QTest::keyClicks(line, text);
            QTest::keyClick(line, Qt::Key_Return);
        };

        QTest::keyClick(view, Qt::Key_F2);
        QVERIFY(editor());
        QCOMPARE(editor()->text(), u"old title"_s);
        typeAndEnter(u"deploy the fix"_s);
        QTRY_COMPARE_WITH_TIMEOUT(conversation(id).value(u"title"_s).toString(),
                                  u"deploy the fix"_s, 5000);
        const int row = m_controller->conversations()->rowOf(id);
        const QAbstractItemModel *rows = m_controller->conversations();
        QTRY_COMPARE(rows->index(row, ConversationListModel::TitleColumn).data().toString(),
                     u"deploy the fix"_s);

        view->setFocus();
        QTest::keyClick(view, Qt::Key_F2, Qt::ShiftModifier);
        typeAndEnter(u"team=ops, urgent"_s);
        QTRY_COMPARE_WITH_TIMEOUT(conversation(id).value(u"tags"_s).toObject(),
                                  (QJsonObject{{u"team"_s, u"ops"_s}, {u"urgent"_s, u""_s}}), 5000);
        QTRY_COMPARE(rows->index(row, ConversationListModel::TagsColumn).data().toString(),
                     u"team=ops, urgent"_s);

        // What the server refuses stays as the server has it, and the banner says why.
        view->setFocus();
        QTest::keyClick(view, Qt::Key_F2);
        typeAndEnter(QString(ConversationLabels::MaxTitleLength + 1, u'x'));
        QTRY_VERIFY_WITH_TIMEOUT(m_window->bannerBar()->isVisible(), 5000);
        QVERIFY2(m_window->bannerBar()->text().startsWith(u"Renaming failed: "_s),
                 qPrintable(m_window->bannerBar()->text()));
        QCOMPARE(conversation(id).value(u"title"_s).toString(), u"deploy the fix"_s);
        QCOMPARE(rows->index(row, ConversationListModel::TitleColumn).data().toString(),
                 u"deploy the fix"_s);
        // Tags that cannot be read are not sent.
        view->setFocus();
        QTest::keyClick(view, Qt::Key_F2, Qt::ShiftModifier);
        typeAndEnter(u"=nameless"_s);
        QTRY_VERIFY(m_window->bannerBar()->text().startsWith(u"The tags were not changed: "_s));
        QCOMPARE(conversation(id).value(u"tags"_s).toObject().size(), 2);
    }

    // Sixty load-test conversations were sixty select-and-click actions. Selected together
    // (Ctrl+A selects what the filter shows), one click archives them all with one progress
    // bar, Delete asks once naming how many, and what failed is said once, with why.
    void fiftyConversationsAreArchivedAndDeletedAtOnce()
    {
        startConsole();
        QList<QUuid> load;
        for (int i = 0; i < 50; ++i)
            load.append(create(u"load test %1"_s.arg(i)));
        const QUuid kept = create(u"keep me"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        m_window->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(m_window.get()));
        m_window->filterBox()->setText(u"load test"_s);
        QTableView *view = m_window->activeView();
        QTRY_COMPARE(view->model()->rowCount(), 50);
        view->setFocus();
        QTest::keyClick(view, Qt::Key_A, Qt::ControlModifier);
        QCOMPARE(view->selectionModel()->selectedRows().size(), 50);
        QPushButton *archive = m_window->actionButton(Action::Archive);
        QTRY_VERIFY(archive->isEnabled());
        QCOMPARE(archive->toolTip(), u"50 of the 50 selected"_s);
        // One of them is deleted behind the console's back: its archive fails, and is said.
        const QUuid gone = load.takeLast();
        QCOMPARE(call("DELETE"_ba, ServerConnection::conversationPath(gone)).status, 200);
        QSignalSpy progress(m_controller.get(), &ConsoleController::bulkProgress);
        archive->click();
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(),
                                  u"Archive: 49 of 50 done"_s, 20000);
        QCOMPARE(progress.size(), 51);
        QCOMPARE(progress.last(), (QList<QVariant>{50, 50}));
        QVERIFY2(m_window->bannerBar()->text().startsWith(u"Archive failed for 1 of 50: “load "
                                                          u"test 49”: "_s),
                 qPrintable(m_window->bannerBar()->text()));
        for (const QUuid &id : std::as_const(load))
            QVERIFY(!conversation(id).value(u"archived_at"_s).isNull());
        QVERIFY(conversation(kept).value(u"archived_at"_s).isNull());
        // The one deleted elsewhere leaves with the others, not at the next refresh.
        QCOMPARE(view->model()->rowCount(), 0);

        QTableView *archived = m_window->archivedView();
        m_window->tabs()->setCurrentWidget(archived);
        QTRY_COMPARE(archived->model()->rowCount(), 49);
        archived->setFocus();
        archived->selectAll();
        QString asked;
        answerTheNextQuestion(QMessageBox::Yes, &asked);
        QTest::keyClick(archived, Qt::Key_Delete);
        QVERIFY2(asked.startsWith(u"Delete 49 conversations permanently?"_s), qPrintable(asked));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(),
                                  u"Delete: 49 of 49 done"_s, 20000);
        for (const QUuid &id : std::as_const(load))
            QCOMPARE(call("GET"_ba, ServerConnection::conversationPath(id)).status, 404);
        QCOMPARE(call("GET"_ba, ServerConnection::conversationPath(kept)).status, 200);
        QVERIFY(!m_window->progress()->isVisible());
    }

    // A pause lets the step finish: until it has, the badge says "pausing…" and Pause is not
    // offered again. The badge and the button stayed as they were, under "Pause requested".
    void aPauseNotTakenEffectYetShowsAsPausing()
    {
        startConsole();
        const QUuid id = create(u"long step"_s, u"while [ ! -e go ]; do sleep 0.05; done"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"running"_s, 15000);
        QVERIFY(showAndSelect(id));
        QPushButton *pause = m_window->actionButton(Action::Pause);
        QVERIFY(pause->isEnabled());
        QTest::mouseClick(pause, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(), u"Pause requested"_s,
                                  10000);
        QCOMPARE(executionCell(id).data().toString(), u"pausing…"_s);
        QVERIFY(!pause->isEnabled());
        QCOMPARE(pause->toolTip(), u"Pausing: the run stops after its step"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(executionCell(id).data().toString(), u"pausing…"_s); // still running

        QVERIFY(letItGo(id));
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"paused"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTRY_VERIFY2_WITH_TIMEOUT(executionCell(id).data().toString().startsWith(u"paused"_s),
                                  qPrintable(executionCell(id).data().toString()), 5000);
        QVERIFY(!m_controller->conversations()->isPausing(id));
    }

    // A pause of a conversation waiting for confirmation is done at once; it was said to be
    // "requested", as of a run that finishes its step first.
    void aPauseDoneAtOnceIsSaidToBeDone()
    {
        startConsole();
        const QUuid id = create(u"needs a yes"_s, u"echo later"_s, /*confirm=*/true);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"waiting_for_confirmation"_s, 15000);
        QVERIFY(showAndSelect(id));
        QPushButton *pause = m_window->actionButton(Action::Pause);
        QVERIFY2(pause->isEnabled(), qPrintable(pause->toolTip()));
        QTest::mouseClick(pause, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->statusBar()->currentMessage(), u"Pause done"_s, 10000);
        QCOMPARE(status(id), u"paused"_s);
    }

    // Past the rows a refresh reads, the tabs say there are more, and a conversation
    // deleted elsewhere still leaves the list: it stayed for good, every action enabled.
    void aListPastItsCapStillLosesDeletedRows()
    {
        constexpr int Read = ConsoleController::RefreshedRows;
        seedConversations(Read + 50);
        startConsole();
        QVERIFY(!m_controller->isListComplete());
        // The server's counts: "+" was all the tabs said, on both, of an empty one too.
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (%1 of %2)"_s.arg(Read).arg(Read + 50));
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (0)"_s);
        const QUuid newest = m_controller->conversations()->at(0).id;
        QVERIFY(call("DELETE"_ba, ServerConnection::conversationPath(newest)).ok());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(m_controller->conversations()->rowOf(newest), -1);
        // The rest stays, though the newest read now reach one row further back.
        QCOMPARE(m_controller->conversations()->rowCount(), Read);
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (%1 of %2)"_s.arg(Read).arg(Read + 49));
        // With a filter typed, only the rows shown are counted.
        m_window->filterBox()->setText(u"seeded 1"_s);
        QVERIFY(m_window->tabs()->tabText(0).endsWith(u"+)"_s));
    }

    // The list is not read whole: a refresh reads the newest rows, and the rest come as the
    // operator scrolls to the end, a page at a time, per tab. A short tab (the archived ones,
    // all older than what a refresh reads) reads its rows as it is opened, with nothing to
    // scroll.
    void theListReadsMoreAsItIsScrolled()
    {
        constexpr int Read = ConsoleController::RefreshedRows;
        constexpr int More = ConsoleController::LoadMoreRows;
        constexpr int Archived = 7;
        seedConversations(Read + More + 30 + Archived, {}, nullptr, Archived);
        startConsole();
        ConversationListModel *rows = m_controller->conversations();
        QCOMPARE(rows->rowCount(), Read);
        QTableView *active = m_window->activeView();
        QCOMPARE(active->model()->rowCount(), Read);
        QVERIFY(m_controller->hasMore(ArchiveFilter::Active));
        // Scrolled to the end: the next rows of the tab, no more.
        active->scrollToBottom();
        QTRY_COMPARE(active->model()->rowCount(), Read + More);
        QVERIFY(m_controller->hasMore(ArchiveFilter::Active));
        QCOMPARE(m_window->tabs()->tabText(0),
                 u"Active (%1 of %2)"_s.arg(Read + More).arg(Read + More + 30));
        active->scrollToBottom();
        QTRY_COMPARE(active->model()->rowCount(), Read + More + 30);
        QVERIFY(!m_controller->hasMore(ArchiveFilter::Active));
        QCOMPARE(m_window->tabs()->tabText(0), u"Active (%1)"_s.arg(Read + More + 30));
        // What scrolling read stays with the next refreshes.
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(active->model()->rowCount(), Read + More + 30);

        QTableView *archived = m_window->archivedView();
        QCOMPARE(archived->model()->rowCount(), 0);
        m_window->tabs()->setCurrentWidget(archived);
        QTRY_COMPARE(archived->model()->rowCount(), Archived);
        QVERIFY(!m_controller->hasMore(ArchiveFilter::Archived));
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (%1)"_s.arg(Archived));
    }

    // A refresh reads its pages one after the other (seconds over thousands of rows and a slow
    // link); what it read before an action's answer is older than the list. A row deleted
    // meanwhile came back until the next refresh, an archived one went back to Active.
    void aRefreshDoesNotPutBackWhatChangedWhileItRead()
    {
        seedConversations(3'000);
        startConsole();
        const QUuid deleted = m_controller->conversations()->at(0).id;
        const QUuid archived = m_controller->conversations()->at(1).id;
        const auto searches = [&] {
            const QString metrics = QString::fromUtf8(call("GET"_ba, u"/metrics"_s).body);
            qint64 total = 0;
            for (const QString &line : metrics.split(u'\n')) {
                if (line.startsWith(u"agentdeck_http_requests_total{"_s) &&
                    line.contains(u"route=\"/api/conversations/search\""_s))
                    total += line.section(u' ', -1).toLongLong();
            }
            return total;
        };
        const qint64 before = searches();
        auto refreshing = m_controller->refresh();
        QTRY_VERIFY_WITH_TIMEOUT(searches() >= before + 2, 10'000); // its first page was read
        QVERIFY(QCoro::waitFor(m_controller->perform(Action::Delete, deleted)));
        QVERIFY(QCoro::waitFor(m_controller->perform(Action::Archive, archived)));
        QVERIFY(QCoro::waitFor(std::move(refreshing)));
        QCOMPARE(m_controller->conversations()->rowOf(deleted), -1);
        QVERIFY(m_controller->conversations()->conversation(archived)->isArchived());
    }

    // A server replaced by another at the same address (a new data dir) left its rows in the
    // list, taken down 200 a refresh: 5,000 rows took 25 refreshes, over a minute.
    void aReplacedServersRowsLeaveAtTheNextRefresh()
    {
        seedConversations(1'000);
        startConsole();
        QCOMPARE(m_controller->conversations()->rowCount(), 1'000);
        const int port = m_url.port();
        m_server->stop();
        m_dir = std::make_unique<QTemporaryDir>();
        m_server = std::make_unique<EmbeddedServer>(serverConfig(port));
        QString error;
        QCOMPARE(m_server->start(&error).port(), port);
        const QUuid id = create(u"on the new server"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(m_controller->conversations()->rowCount(), 1);
        QCOMPARE(m_controller->conversations()->at(0).id, id);
    }

    // Past the cap, the filter box also searches the server: the oldest conversations could
    // not be found from the console at all. Each kind of search finds it there: a title's words,
    // a tag and its value, a tag's name, the start of its id, its status; the filter matched
    // titles only, and not even those past the cap.
    void theFilterFindsConversationsPastTheCap_data()
    {
        QTest::addColumn<QString>("text"); // "ID" stands for the start of the needle's id
        QTest::addColumn<QString>("status");
        QTest::addRow("title") << u"needle"_s << QString();
        QTest::addRow("tag=value") << u"team=ops"_s << QString();
        QTest::addRow("tag:value") << u"team:ops"_s << QString();
        QTest::addRow("a tag's name") << u"oncall"_s << QString();
        QTest::addRow("the start of the id") << u"ID"_s << QString();
        QTest::addRow("a tag and a word") << u"team=ops haystack"_s << QString();
        QTest::addRow("status") << QString() << u"finished"_s;
        QTest::addRow("a word and a status") << u"needle"_s << u"finished"_s;
    }
    void theFilterFindsConversationsPastTheCap()
    {
        QFETCH(QString, text);
        QFETCH(QString, status);
        QUuid needle;
        seedConversations(ConsoleController::RefreshedRows + 50, u"needle in the haystack"_s,
                          &needle);
        startConsole();
        QCOMPARE(m_controller->conversations()->rowCount(), ConsoleController::RefreshedRows);
        QVERIFY(m_controller->conversations()->rowOf(needle) < 0);
        const QAbstractItemModel *shown = m_window->activeView()->model();
        if (!status.isEmpty()) {
            QComboBox *statuses = m_window->statusFilter();
            statuses->setCurrentIndex(statuses->findData(status));
            QVERIFY(statuses->currentIndex() > 0);
        }
        m_window->filterBox()->setText(text == u"ID"_s ? toWireId(needle).left(8) : text);
        QTRY_COMPARE_WITH_TIMEOUT(shown->rowCount(), 1, 10000);
        QCOMPARE(shown->index(0, 0).data().toString(), u"needle in the haystack"_s);
        auto *view = static_cast<ConversationView *>(m_window->activeView());
        QVERIFY(!view->emptyNotice()->isVisible());
        // Nothing found says so, rather than showing a blank list.
        m_window->filterBox()->setText(u"no such words"_s);
        QTRY_COMPARE(shown->rowCount(), 0);
        QVERIFY(view->emptyNotice()->isVisible());
        QCOMPARE(view->emptyNotice()->text(), u"No conversations match"_s);
        m_window->filterBox()->clear();
        m_window->statusFilter()->setCurrentIndex(0);
        QTRY_VERIFY(shown->rowCount() > 0);
        QVERIFY(!view->emptyNotice()->isVisible());
    }

    // What a command printed finds its conversation: the words are looked for in events on
    // the server, also while the list holds every row (a row alone cannot tell).
    void theFilterFindsWhatACommandPrinted()
    {
        startConsole();
        const QUuid said = create(u"nightly job"_s, u"printf 'seg%s in worker 7\\n' fault"_s);
        const QUuid other = create(u"other job"_s, u"echo fine"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(said), u"finished"_s, 15000);
        QTRY_COMPARE_WITH_TIMEOUT(status(other), u"finished"_s, 15000);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_controller->isListComplete());
        const QAbstractItemModel *shown = m_window->activeView()->model();
        m_window->filterBox()->setText(u"segfault"_s);
        QTRY_COMPARE_WITH_TIMEOUT(shown->rowCount(), 1, 10000);
        QCOMPARE(shown->index(0, 0).data().toString(), u"nightly job"_s);
        m_window->filterBox()->setText(u"nothing printed this"_s);
        QTRY_COMPARE(shown->rowCount(), 0);
        auto *view = static_cast<ConversationView *>(m_window->activeView());
        QTRY_VERIFY(view->emptyNotice()->isVisible());
    }

    // A refresh that fails says so once, in the status bar and a banner, and the banner goes
    // when the server answers again (it used to come back every 3 s over whatever else it said,
    // and to stay after the server was back).
    void anUnreachableServerIsShownUntilItIsBack()
    {
        startConsole();
        const QUuid id = create(u"watched"_s);
        QVERIFY(showAndSelect(id));
        QTRY_VERIFY_WITH_TIMEOUT(m_controller->timeline()->isLive(), 10000);
        auto *stream = m_controller->findChild<EventStream *>();
        QVERIFY(stream);
        QSignalSpy drops(stream, &EventStream::disconnected);
        QSignalSpy reachability(m_controller.get(), &ConsoleController::reachabilityChanged);
        const int port = m_url.port();
        m_server->stop();
        QVERIFY(!QCoro::waitFor(m_controller->refresh()));
        QVERIFY(!QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(reachability.size(), 1);
        QVERIFY(m_window->banner()->isVisible());
        QVERIFY2(m_window->connectionState()->text().startsWith(u"Cannot refresh"_s) &&
                     m_window->connectionState()->text().contains(u"the list is as of"_s),
                 qPrintable(m_window->connectionState()->text()));
        QVERIFY(!m_window->actionButton(Action::Archive)->isEnabled());
        // The stream's backoff has grown to 4 s (0.25, 0.5, 1 and 2 s before).
        QTRY_VERIFY_WITH_TIMEOUT(drops.size() >= 5, 15000);
        m_server = std::make_unique<EmbeddedServer>(serverConfig(port));
        QString error;
        QCOMPARE(m_server->start(&error).port(), port);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(reachability.size(), 2);
        QVERIFY(!m_window->banner()->isVisible());
        QVERIFY(m_window->connectionState()->text().startsWith(u"Connected to"_s));
        QVERIFY(m_window->actionButton(Action::Archive)->isEnabled());
        // The timeline follows the list back at once, not after the backoff (it lagged ~10 s).
        QTRY_VERIFY_WITH_TIMEOUT(m_controller->timeline()->isLive(), 2000);
    }

    // An action sent to a frozen server gets no answer, but the server carries it out once it
    // wakes. The banner said "Archive failed" and stayed after the list showed it archived.
    void anActionWithoutAnswerIsSettledByALaterRefresh()
    {
        Testing::ServerFleet fleet;
        QString problem;
        QVERIFY2(fleet.findBinary(&problem), qPrintable(problem));
        Testing::ServerProcess &server = fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(QJsonObject{{u"title"_s, u"frozen"_s}});
        QVERIFY(!id.isNull());
        openConsole(server.url());
        m_connection->setSilenceTimeout(std::chrono::milliseconds(500));
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(showAndSelect(id));

        // Frozen after the list last read it, before anything saw it: the action is sent. (Once
        // a refresh or the probe found it not answering, the actions wait until it does.)
        server.sendSignal(SIGSTOP);
        QTest::mouseClick(m_window->actionButton(Action::Archive), Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(m_window->banner()->text().startsWith(u"Archive got no answer"_s),
                                  qPrintable(m_window->banner()->text()), 10000);
        QVERIFY2(m_window->banner()->text().contains(u"may still take effect"_s),
                 qPrintable(m_window->banner()->text()));
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (0)"_s);

        QSignalSpy settled(m_controller.get(), &ConsoleController::outcomeSettled);
        server.sendSignal(SIGCONT);
        QTRY_VERIFY_WITH_TIMEOUT(server.conversation(id).value(u"archived_at"_s).isString(), 10000);
        // The refresh the action asked for may still be waiting for its answer.
        QTRY_VERIFY_WITH_TIMEOUT(QCoro::waitFor(m_controller->refresh()), 10000);
        QTRY_COMPARE_WITH_TIMEOUT(settled.size(), 1, 10000);
        QCOMPARE(m_window->tabs()->tabText(1), u"Archived (1)"_s);
        QVERIFY2(!m_window->banner()->isVisible(), qPrintable(m_window->banner()->text()));
        fleet.cleanUp();
    }

    // Pointed at a web server that is not AgentDeck (a login page), the console showed an
    // empty list and "Connected".
    void somethingThatIsNotAgentDeckIsNamed()
    {
        Testing::NotAgentDeckServer web;
        QVERIFY(web.isListening());
        ServerConnection connection(web.url());
        ConsoleController controller(&connection);
        QSignalSpy reachability(&controller, &ConsoleController::reachabilityChanged);
        QVERIFY(!QCoro::waitFor(controller.refresh()));
        QCOMPARE(reachability.size(), 1);
        QCOMPARE(reachability.first().at(0).toBool(), false);
        QVERIFY2(reachability.first().at(1).toString().contains(u"AgentDeck server"_s),
                 qPrintable(reachability.first().at(1).toString()));
    }

    // A runtime that is not there is grey for a conversation that does not need it, and
    // orange for one that lost it.
    void aMissingRuntimeIsAProblemOnlyWhenItIsOne()
    {
        const auto missing = [](bool attention) {
            return StatusBadgeDelegate::runtimeBadge(u"missing"_s, u"missing (resumable)"_s,
                                                     attention)
                .colour;
        };
        QCOMPARE(missing(false), QColor(0x75, 0x75, 0x75));
        QCOMPARE(missing(true), QColor(0xef, 0x6c, 0x00));
        ConversationInfo idle{QUuid::createUuid(), u"idle"_s};
        idle.runtime = {RuntimeStatus::Missing, true, std::nullopt};
        QVERIFY(!Lifecycle::needsAttention(idle));
        ConversationInfo lost = idle;
        lost.runtime.error = RuntimeError{u"sandbox_lost"_s, u"the sandbox host exited"_s};
        QVERIFY(Lifecycle::needsAttention(lost));
    }

    // What a container uses, as its engine last measured it, is in the runtime's row: CPU,
    // memory now and at most, processes and disk.
    void theDetailsPaneSaysWhatASandboxUses()
    {
        ServerConnection connection(QUrl(u"http://127.0.0.1:9"_s));
        ConsoleController controller(&connection);
        DetailsPane pane(&controller);
        ConversationInfo info{QUuid::createUuid(), u"measured"_s};
        info.runtime = {RuntimeStatus::Available, true, std::nullopt};
        SandboxUsage usage;
        usage.cpuSeconds = 1.5;
        usage.memoryBytes = qint64(64) << 20;
        usage.memoryPeakBytes = qint64(96) << 20;
        usage.processes = 3;
        usage.diskBytes = qint64(5) << 20;
        usage.at = QDateTime::currentDateTimeUtc();
        info.runtime.usage = usage;
        pane.showConversation(info);
        const QLocale locale;
        const QString text = pane.text(DetailsPane::Row::Runtime);
        const QStringList parts{
            u"1.5 s CPU"_s, locale.formattedDataSize(usage.memoryBytes) + u" memory"_s,
            u"at most "_s + locale.formattedDataSize(usage.memoryPeakBytes), u"3 processes"_s,
            locale.formattedDataSize(usage.diskBytes) + u" disk"_s};
        for (const QString &part : parts)
            QVERIFY2(text.contains(part), qPrintable(part + u" expected in: "_s + text));
    }

    // Every badge's glyph is in a font Debian installs with the desktop (DejaVu): "⏸" and "⌛"
    // are in none of them, and paused and expired badges showed an empty box.
    void badgeGlyphsAreInTheInstalledFonts()
    {
        using Delegate = StatusBadgeDelegate;
        QList<Delegate::Badge> badges{Delegate::executionBadge({}, true)};
        for (const QString &status : {u"idle"_s, u"running"_s, u"paused"_s,
                                      u"waiting_for_confirmation"_s, u"finished"_s, u"error"_s})
            badges.append(Delegate::executionBadge(status, false));
        for (const QString &status :
             {u"available"_s, u"starting"_s, u"missing"_s, u"ownership_lost"_s, u"error"_s})
            badges.append(Delegate::runtimeBadge(status, status, true));
        badges.append(Delegate::runtimeBadge(u"missing"_s, u"expired"_s, false));
        const QFontMetrics metrics(QApplication::font());
        for (const Delegate::Badge &badge : std::as_const(badges)) {
            for (const char32_t glyph : badge.glyph.toUcs4())
                QVERIFY2(metrics.inFontUcs4(glyph), qPrintable(badge.glyph));
        }
    }

    // At the default size the badges show their words whole and the titles keep room: sized to
    // their rows, the badge columns did not grow for a row added later ("wa…"), and once wide
    // they left the title some 30 px.
    void badgesAndTitlesFitAtTheDefaultSize()
    {
        startConsole();
        const QUuid id = create(u"a title that needs some room"_s);
        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(id, u"runtime/reprovision"))
                    .ok()); // "missing (resumable)" -> "available"
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTableView *view = m_window->activeView();
        const QFontMetrics metrics = view->fontMetrics();
        QVERIFY(view->columnWidth(ConversationListModel::ExecutionColumn) >=
                StatusBadgeDelegate::widthFor(metrics, u"waiting for confirmation"_s));
        QVERIFY(view->columnWidth(ConversationListModel::RuntimeColumn) >=
                StatusBadgeDelegate::widthFor(metrics, u"missing (resumable)"_s));
        // The update time whole, at a width that does not follow the rows.
        const QString updated =
            view->model()->index(0, ConversationListModel::UpdatedColumn).data().toString();
        QVERIFY(view->columnWidth(ConversationListModel::UpdatedColumn) >=
                metrics.horizontalAdvance(updated));
        QCOMPARE(view->horizontalHeader()->sectionResizeMode(ConversationListModel::UpdatedColumn),
                 QHeaderView::Interactive);
        QVERIFY2(
            view->columnWidth(ConversationListModel::TitleColumn) >= 160,
            qPrintable(QString::number(view->columnWidth(ConversationListModel::TitleColumn))));
    }

    // A refresh the server refuses says why in the server's words (it said "the server did not
    // answer" whatever happened, a wrong key included).
    // The banner comes when the server is lost, when an operator is clicking: at the top it
    // pushed the buttons and rows down by its height, and a click meant for the third row
    // selected the first.
    void theBannerMovesNothingUnderThePointer()
    {
        startConsole();
        const QUuid id = create(u"stays put"_s);
        QVERIFY(showAndSelect(id));
        // The details come after the selection, and take the lines they take once laid out
        // (a two-line value was measured one line high before the layout pass).
        QTRY_VERIFY(m_window->details()->hasRuntimeDetails());
        const auto laidOut = [this] {
            const QList<QLabel *> labels = m_window->details()->findChildren<QLabel *>();
            return std::all_of(labels.cbegin(), labels.cend(), [](const QLabel *label) {
                return !label->isVisible() || label->height() >= label->sizeHint().height();
            });
        };
        QTRY_VERIFY(laidOut());
        const auto where = [this] {
            return QList<QPoint>{
                m_window->actionButton(Action::Archive)->mapTo(m_window.get(), QPoint()),
                m_window->activeView()->viewport()->mapTo(m_window.get(), QPoint()),
                m_window->timeline()->mapTo(m_window.get(), QPoint())};
        };
        const QList<QPoint> before = where();
        m_server->stop();
        QVERIFY(!QCoro::waitFor(m_controller->refresh()));
        QTRY_VERIFY(m_window->banner()->isVisible());
        QCOMPARE(where(), before);
    }

    // The list is sorted by update time and refreshed every 3 s: a conversation that changed
    // jumped to the top under the pointer, and the click meant for the row there selected it.
    // While the pointer is over the rows they stay put; they sort again once it leaves.
    // A console started without the server's key said "Missing or wrong X-Session-API-Key
    // header" with no way to give one. It asks for the key: a wrong one is said to be refused,
    // the right one brings the list, and it is kept in the desktop's secret store or, where
    // none runs, for the session only; never in the settings file.
    void aMissingKeyIsAskedFor()
    {
        const QString key = u"the-server-key-%1"_s.arg(QRandomGenerator::global()->generate());
        ServerConfig config = serverConfig();
        config.apiKeys = {key};
        m_server = std::make_unique<EmbeddedServer>(config);
        QString error;
        m_url = m_server->start(&error);
        QVERIFY2(!m_url.isEmpty(), qPrintable(error));
        openConsole(m_url);
        m_client->setApiKey(key);
        create(u"behind a key"_s);
        QVERIFY(!QCoro::waitFor(m_controller->refresh()));
        QVERIFY(m_controller->needsKey());
        QTRY_VERIFY(m_window->bannerBar()->isVisible());
        QPushButton *enter = m_window->bannerBar()->actionButton();
        QTRY_VERIFY(enter->isVisible());
        QCOMPARE(enter->text(), u"Enter key…"_s);
        QCOMPARE(m_window->connectionState()->text(),
                 m_url.toString() + u" asks for its session API key"_s);

        QString asked;
        answerTheNextPrompt(u"not-the-key"_s, &asked);
        enter->click();
        QVERIFY2(asked.contains(m_url.toString()), qPrintable(asked));
        QTRY_VERIFY2(m_window->bannerBar()->text().startsWith(u"The key was refused"_s),
                     qPrintable(m_window->bannerBar()->text()));
        QCOMPARE(m_controller->conversations()->rowCount(), 0);

        answerTheNextPrompt(key, &asked);
        m_window->bannerBar()->actionButton()->click();
        QTRY_COMPARE(m_controller->conversations()->rowCount(), 1);
        QVERIFY(!m_controller->needsKey());
        QTRY_VERIFY(!m_window->bannerBar()->isVisible());
        QTRY_VERIFY2(m_window->statusBar()->currentMessage().startsWith(u"The key "_s),
                     qPrintable(m_window->statusBar()->currentMessage()));
        // The probe and the streams use it too.
        QVERIFY(QCoro::waitFor(m_controller->probe()));
        QVERIFY(m_controller->isReachable());
        consoleSettings()->sync();
        QFile settings(consoleSettings()->fileName());
        QVERIFY(!settings.open(QIODevice::ReadOnly) || !settings.readAll().contains(key.toUtf8()));
    }

    // The pointer on the list as the console opens: its first rows are no news.
    void theFirstRowsUnderThePointerAreNotNew()
    {
        startConsole(serverConfig(), /*refreshed=*/false);
        create(u"first"_s);
        auto *view = static_cast<ConversationView *>(m_window->activeView());
        QEvent enter(QEvent::Enter);
        QCoreApplication::sendEvent(view->viewport(), &enter);
        QVERIFY(view->proxy()->isOrderHeld());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(view->model()->rowCount(), 1);
        QVERIFY2(!view->holdNotice()->isVisible(), qPrintable(view->holdNotice()->text()));
        // A second one is.
        create(u"second"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QTRY_VERIFY(view->holdNotice()->isVisible());
        QVERIFY2(view->holdNotice()->text().endsWith(u"1 new at the bottom"_s),
                 qPrintable(view->holdNotice()->text()));
    }

    void rowsStayPutUnderThePointer()
    {
        startConsole();
        const QUuid older = create(u"older"_s);
        // Two creates in the same millisecond tie on updated_at, and either may be first.
        const auto updatedAt = [this](const QUuid &id) {
            return parseWireTime(conversation(id).value(u"updated_at"_s).toString()).value();
        };
        QTRY_VERIFY(QDateTime::currentDateTimeUtc() > updatedAt(older));
        const QUuid newer = create(u"newer"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        auto *view = static_cast<ConversationView *>(m_window->activeView());
        const auto topRow = [view] {
            return view->model()->index(0, ConversationListModel::TitleColumn).data().toString();
        };
        QCOMPARE(topRow(), u"newer"_s);

        QEvent enter(QEvent::Enter);
        QCoreApplication::sendEvent(view->viewport(), &enter);
        QVERIFY(!view->holdNotice()->isVisible()); // nothing moved yet
        QTRY_VERIFY(QDateTime::currentDateTimeUtc() > updatedAt(newer));
        QVERIFY(
            QCoro::waitFor(m_client->sendMessage(older, MessageRequest{u"user"_s, u"hi"_s, false}))
                .ok());
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY(updatedAt(older) > updatedAt(newer));
        QCOMPARE(topRow(), u"newer"_s);
        // The order held says so, and a conversation new meanwhile is counted where it went.
        QVERIFY(view->holdNotice()->isVisible());
        QVERIFY2(view->holdNotice()->text().startsWith(u"Order held"_s),
                 qPrintable(view->holdNotice()->text()));
        const QUuid newest = create(u"newest"_s);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QVERIFY2(view->holdNotice()->text().contains(u"1 new at the bottom"_s),
                 qPrintable(view->holdNotice()->text()));
        QCOMPARE(view->model()
                     ->index(view->model()->rowCount() - 1, ConversationListModel::TitleColumn)
                     .data()
                     .toString(),
                 u"newest"_s);

        QVERIFY(m_window->selectConversation(newest));
        QEvent leave(QEvent::Leave);
        QCoreApplication::sendEvent(view->viewport(), &leave);
        QVERIFY(!view->holdNotice()->isVisible());
        QCOMPARE(topRow(), u"newest"_s);
        QCOMPARE(view->model()->index(1, ConversationListModel::TitleColumn).data().toString(),
                 u"older"_s);
        QCOMPARE(m_controller->selected(), newest);
    }

    void aRefusedRefreshSaysWhy()
    {
        ServerConfig config = serverConfig();
        config.apiKeys = {u"right-key"_s};
        startConsole(config, /*refreshed=*/false);
        m_connection->setApiKey(u"wrong-key"_s);
        QVERIFY(!QCoro::waitFor(m_controller->refresh()));
        QVERIFY2(m_window->banner()->text().contains(u"X-Session-API-Key"_s),
                 qPrintable(m_window->banner()->text()));
    }

    // What users and agents wrote is shown as written, never as markup: a command waiting for
    // confirmation whose "; rm -rf" sat in an HTML comment read as a harmless `ls`, and a title
    // with tags made the delete question name something else.
    // A live timeline shows what happened last: new events stayed below the view, and a long
    // history opened in its middle (ListView placed the end by estimated heights, before the
    // new rows were laid out).
    void theTimelineFollowsTheNewestEvent()
    {
        startConsole();
        const QUuid id = create(u"long history"_s);
        const auto send = [this, id](const QString &text) {
            return QCoro::waitFor(m_client->sendMessage(id, MessageRequest{u"user"_s, text, false}))
                .ok();
        };
        // Items of many heights: the view's guesses are wrong for those it has not laid out.
        const auto lines = [](int count) {
            QStringList text;
            for (int line = 0; line < count; ++line)
                text.append(u"line %1"_s.arg(line));
            return text.join(u'\n');
        };
        for (int i = 0; i < 60; ++i)
            QVERIFY(send(lines(1 + (i * 7) % 12)));
        QVERIFY(showAndSelect(id));
        auto *events = m_window->timeline()->rootObject()->findChild<QQuickItem *>(u"events"_s);
        QVERIFY(events);
        QTRY_COMPARE_WITH_TIMEOUT(events->property("count").toInt(), 60, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(events->property("atYEnd").toBool(), 5000);
        QVERIFY(send(lines(12)));
        QTRY_COMPARE_WITH_TIMEOUT(events->property("count").toInt(), 61, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(events->property("atYEnd").toBool(), 5000);
    }

    // A long history was reachable only with the mouse wheel. A press on the scroll bar's track
    // near its top moves there, and the view stays there as events come.
    void aLongTimelineHasAScrollBar()
    {
        startConsole();
        const QUuid id = create(u"long history"_s);
        for (int i = 0; i < 60; ++i) {
            QVERIFY(QCoro::waitFor(m_client->sendMessage(
                                       id, MessageRequest{u"user"_s, u"event %1"_s.arg(i), false}))
                        .ok());
        }
        QVERIFY(showAndSelect(id));
        QQuickItem *root = m_window->timeline()->rootObject();
        auto *events = root->findChild<QQuickItem *>(u"events"_s);
        QVERIFY(events);
        QTRY_COMPARE_WITH_TIMEOUT(events->property("count").toInt(), 60, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(events->property("atYEnd").toBool(), 5000);
        auto *bar = root->findChild<QQuickItem *>(u"scrollbar"_s);
        QVERIFY(bar);
        QTRY_VERIFY(bar->isVisible() && bar->property("size").toDouble() < 0.5);
        const QPoint nearTop =
            bar->mapToScene(QPointF(bar->width() / 2, bar->height() * 0.02)).toPoint();
        QTest::mouseClick(m_window->timeline(), Qt::LeftButton, {}, nearTop);
        QTRY_VERIFY_WITH_TIMEOUT(events->property("contentY").toDouble() <
                                     events->property("originY").toDouble() + 200,
                                 5000);
        QVERIFY(!events->property("following").toBool());
        QVERIFY(QCoro::waitFor(
                    m_client->sendMessage(id, MessageRequest{u"user"_s, u"one more"_s, false}))
                    .ok());
        QTRY_COMPARE_WITH_TIMEOUT(events->property("count").toInt(), 61, 10000);
        QVERIFY(!QTest::qWaitFor([&] { return events->property("atYEnd").toBool(); }, 300));
    }

    // A followed conversation's history grew in memory for as long as the console ran, and a
    // long one was replayed whole on selection. The timeline opens with the newest events,
    // shows the earlier ones on request, and lets go of the oldest while it shows the end.
    void aLongHistoryOpensWithItsNewestEvents()
    {
        startConsole();
        const QUuid id = create(u"very long history"_s);
        const auto send = [this, id](int count) {
            for (int i = 0; i < count; ++i) {
                const MessageRequest message{u"user"_s, u"event %1"_s.arg(i), false};
                if (!QCoro::waitFor(m_client->sendMessage(id, message)).ok())
                    return false;
            }
            return true;
        };
        const int kept = EventListModel::KeptEvents;
        QVERIFY(send(kept + 150));
        QVERIFY(showAndSelect(id));
        QQuickItem *root = m_window->timeline()->rootObject();
        auto *events = root->findChild<QQuickItem *>(u"events"_s);
        QVERIFY(events);
        EventListModel *timeline = m_controller->timeline();
        QTRY_COMPARE_WITH_TIMEOUT(timeline->lastSeq(), kept + 150, 10000);
        QCOMPARE(timeline->count(), kept);
        QCOMPARE(timeline->earlierCount(), 150);

        // The header asks for a page of earlier events; the rows in view stay in place.
        QTRY_VERIFY_WITH_TIMEOUT(events->property("atYEnd").toBool(), 5000);
        QMetaObject::invokeMethod(events, "positionViewAtBeginning");
        auto *earlier = root->findChild<QQuickItem *>(u"earlier"_s);
        QVERIFY(earlier);
        QTRY_VERIFY(earlier->isVisible());
        QCOMPARE(earlier->property("text").toString(), u"150 earlier events · Show 100 more"_s);
        const auto clickEarlier = [&] {
            const QPointF centre =
                earlier->mapToScene(QPointF(earlier->width() / 4, earlier->height() / 2));
            QTest::mouseClick(m_window->timeline(), Qt::LeftButton, {}, centre.toPoint());
        };
        const auto seqAtTop = [&] {
            int row = -1;
            QMetaObject::invokeMethod(events, "indexAt", Q_RETURN_ARG(int, row), Q_ARG(qreal, 20.0),
                                      Q_ARG(qreal, events->property("contentY").toReal() + 40));
            return timeline->data(timeline->index(row), EventListModel::SeqRole).toLongLong();
        };
        QTRY_COMPARE(seqAtTop(), 151);
        clickEarlier();
        QTRY_COMPARE_WITH_TIMEOUT(timeline->count(), kept + 100, 10000);
        QCOMPARE(timeline->earlierCount(), 50);
        QCOMPARE(timeline->data(timeline->index(0), EventListModel::SeqRole).toLongLong(), 51);
        QTRY_COMPARE(seqAtTop(), 151);
        QVERIFY(!events->property("following").toBool());

        // Scrolled up, nothing is let go as events come.
        QVERIFY(send(5));
        QTRY_COMPARE_WITH_TIMEOUT(timeline->count(), kept + 105, 10000);
        QMetaObject::invokeMethod(events, "positionViewAtBeginning");
        QTRY_COMPARE(seqAtTop(), 51);
        clickEarlier();
        QTRY_COMPARE_WITH_TIMEOUT(timeline->earlierCount(), 0, 10000);
        QCOMPARE(timeline->count(), kept + 155);
        QTRY_VERIFY(!earlier->isVisible());

        // Back at the end, the timeline keeps the newest again.
        auto *bar = root->findChild<QQuickItem *>(u"scrollbar"_s);
        QVERIFY(bar);
        const QPoint nearBottom =
            bar->mapToScene(QPointF(bar->width() / 2, bar->height() * 0.99)).toPoint();
        QTest::mouseClick(m_window->timeline(), Qt::LeftButton, {}, nearBottom);
        QTRY_VERIFY_WITH_TIMEOUT(events->property("following").toBool(), 5000);
        QCOMPARE(timeline->count(), kept);
        QVERIFY(send(1));
        QTRY_COMPARE_WITH_TIMEOUT(timeline->lastSeq(), kept + 156, 10000);
        QCOMPARE(timeline->count(), kept);
        QCOMPARE(timeline->earlierCount(), 156);
    }

    // The message box was cleared as the message left: when sending failed, what the operator
    // typed was gone.
    void aMessageStaysUntilTheServerTookIt()
    {
        startConsole();
        const QUuid id = create(u"talks"_s);
        QVERIFY(showAndSelect(id));
        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(id, u"archive")).ok());
        QLineEdit *box = m_window->messageBox();
        QTest::keyClicks(box, u"echo kept"_s);
        QTest::keyClick(box, Qt::Key_Return);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->banner()->isVisible(), 10000);
        QCOMPARE(box->text(), u"echo kept"_s);

        QVERIFY(call("POST"_ba, ServerConnection::conversationPath(id, u"unarchive")).ok());
        QTest::keyClick(box, Qt::Key_Return);
        QTRY_VERIFY_WITH_TIMEOUT(box->text().isEmpty(), 10000);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
    }

    // The timeline said "Select a conversation" with one selected that had no events yet, or
    // whose stream was down (a frozen server): it read as if nothing were selected.
    void theTimelineSaysWhatItWaitsFor()
    {
        startConsole();
        QQuickItem *root = m_window->timeline()->rootObject();
        QVERIFY(textItem(root, u"Select a conversation to follow its events"_s));
        QVERIFY(showAndSelect(create(u"quiet"_s)));
        QTRY_VERIFY_WITH_TIMEOUT(textItem(root, u"No events yet"_s), 10000);

        const QUuid talky = create(u"talky"_s, u"echo hi"_s);
        QTRY_COMPARE_WITH_TIMEOUT(status(talky), u"finished"_s, 15000);
        QVERIFY(showAndSelect(talky));
        auto *reconnecting = root->findChild<QQuickItem *>(u"reconnecting"_s);
        QVERIFY(reconnecting);
        QTRY_VERIFY_WITH_TIMEOUT(m_controller->timeline()->isLive(), 10000);
        QVERIFY(!reconnecting->isVisible());
        m_server->stop();
        QTRY_VERIFY_WITH_TIMEOUT(reconnecting->isVisible(), 10000);
    }

    // A title or message with a right-to-left override read otherwise than written: "deploy
    // <RLO>live<PDF> today" showed as "deploy evil today".
    void bidirectionalOverridesAreShownNotObeyed()
    {
        startConsole();
        const QString title = u"deploy \u202elive\u202c today"_s;
        const QUuid id = create(title);
        QVERIFY(QCoro::waitFor(m_client->sendMessage(id, MessageRequest{u"user"_s, title, false}))
                    .ok());
        QVERIFY(showAndSelect(id));
        ConversationListModel *list = m_controller->conversations();
        const QString shown =
            list->index(list->rowOf(id), ConversationListModel::TitleColumn).data().toString();
        QCOMPARE(shown, u"deploy \\u202elive\\u202c today"_s);
        QTRY_VERIFY_WITH_TIMEOUT(textItem(m_window->timeline()->rootObject(), shown), 10000);
    }

    // Each event shows its first 12 lines: the rest of a long output, where the errors are,
    // could not be seen at all. "Show all" opens it, "Show less" closes it again.
    void aLongOutputIsShownWholeOnAClick_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<int>("lines");
        QTest::addRow("30 lines") << u"seq 1 30"_s << 30;
        // Cut at 1 MiB by the server: 165,000 lines and its "[output truncated]" marker, of
        // which "Show all" showed the first 100,000.
        QTest::addRow("past 100,000 lines") << u"seq 1 200000"_s << 165'000;
        // Minified JSON, base64: laid out whole, one line of 1 MB held the console for 26 s.
        QTest::addRow("one line of 1 MB")
            << u"head -c 1000000 /dev/zero | tr '\\0' a"_s << 1'000'000 / 5'000;
    }
    void aLongOutputIsShownWholeOnAClick()
    {
        QFETCH(QString, command);
        QFETCH(int, lines);
        startConsole();
        const QUuid id = create(u"long output"_s, command);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        const QList<QJsonObject> observations =
            Testing::ofKind(eventsOf(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        const auto observation = Event::fromJson(observations.first());
        QVERIFY(observation);
        const QString shown = EventListModel::textOf(*observation);
        // The end first: where the errors and the truncation marker are.
        const QString preview = EventListModel::tailOf(shown);
        QVERIFY(preview.startsWith(u"… "_s) && preview.contains(u" earlier lines\n"_s));
        QVERIFY(shown.endsWith(preview.section(u'\n', -2)));
        QQuickItem *body = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((body = textItem(m_window->timeline()->rootObject(), preview)),
                                 10000);
        QCOMPARE(body->property("shownLines").toInt(), 12);
        // The rest is clipped off, not laid over what follows.
        QVERIFY(body->property("clip").toBool());
        QVERIFY(body->height() < body->property("contentHeight").toReal());
        QQuickItem *expander = nullptr;
        for (QQuickItem *sibling : body->parentItem()->childItems()) {
            if (sibling->objectName() == u"expander"_s)
                expander = sibling;
        }
        QVERIFY(expander && expander->isVisible());
        QCOMPARE(expander->property("text").toString(), u"Show all"_s);
        const auto click = [this](QQuickItem *target) {
            const QPointF centre =
                target->mapToScene(QPointF(target->width() / 2, target->height() / 2));
            QTest::mouseClick(m_window->timeline(), Qt::LeftButton, {}, centre.toPoint());
        };
        QElapsedTimer shownIn;
        shownIn.start();
        click(expander);
        QTRY_VERIFY_WITH_TIMEOUT(!body->property("truncated").toBool() &&
                                     body->property("text").toString() == shown,
                                 10000);
        QVERIFY2(body->property("shownLines").toInt() >= lines,
                 qPrintable(QString::number(body->property("shownLines").toInt())));
        // The model keeps it whole: a delegate made again when the row scrolls back shows it so.
        EventListModel *timeline = m_controller->timeline();
        int expanded = 0;
        for (int row = 0; row < timeline->rowCount(); ++row)
            expanded += timeline->data(timeline->index(row), EventListModel::ExpandedRole).toBool();
        QCOMPARE(expanded, 1);
        // The window waits for the layout: seconds of it are seconds without a repaint.
        QVERIFY2(shownIn.elapsed() < 5000, qPrintable(u"%1 ms"_s.arg(shownIn.elapsed())));
        QCOMPARE(expander->property("text").toString(), u"Show less"_s);
        click(expander);
        QTRY_COMPARE(body->property("text").toString(), preview);
        QCOMPARE(body->property("shownLines").toInt(), 12);
    }

    void markupIsShownAsWritten()
    {
        startConsole();
        const QString command = u"echo <b></b><!-- ; rm -rf ~/important --> done"_s;
        const QUuid id = create(u"<b>bold</b> title"_s, command);
        QTRY_COMPARE_WITH_TIMEOUT(status(id), u"finished"_s, 15000);
        QVERIFY(showAndSelect(id));
        // The message's text item is as wide as the whole command: the comment is shown.
        QQuickItem *message = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((message = textItem(m_window->timeline()->rootObject(), command)),
                                 10000);
        const QFontMetricsF metrics(message->property("font").value<QFont>());
        QVERIFY2(message->implicitWidth() >= 0.9 * metrics.horizontalAdvance(command),
                 qPrintable(u"%1 px for a command of %2 px"_s.arg(message->implicitWidth())
                                .arg(metrics.horizontalAdvance(command))));

        Qt::TextFormat questionFormat = Qt::RichText;
        QTimer::singleShot(0, this, [&questionFormat] {
            if (auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget())) {
                questionFormat = box->textFormat();
                QTest::mouseClick(box->button(QMessageBox::No), Qt::LeftButton);
            }
        });
        QTest::mouseClick(m_window->actionButton(Action::Delete), Qt::LeftButton);
        QCOMPARE(questionFormat, Qt::PlainText);
        QCOMPARE(m_window->banner()->textFormat(), Qt::PlainText);
    }

    void failuresShowTheServersSentence()
    {
        // A sandbox that cannot start: the run fails with the server's words.
        ServerConfig config = serverConfig();
        config.sandboxProgram = m_dir->filePath(u"no-such-agentdeck"_s);
        startConsole(config);
        const QUuid id = create(u"cannot run"_s);
        QVERIFY(showAndSelect(id));
        QTest::mouseClick(m_window->actionButton(Action::Run), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->banner()->isVisible(), 10000);
        QTRY_VERIFY2_WITH_TIMEOUT(m_window->banner()->text().startsWith(u"Run failed"_s),
                                  qPrintable(m_window->banner()->text()), 10000);
        QVERIFY2(m_window->banner()->text().contains(u"sandbox host"_s),
                 qPrintable(m_window->banner()->text()));
    }

    // A password in --connect's URL was on screen: in the status bar, the window title and the
    // tray's tooltip. The title said "AgentDeck" twice, too (the window system adds it).
    void aPasswordInTheServersUrlIsNotShown()
    {
        m_server = std::make_unique<EmbeddedServer>(serverConfig());
        QString error;
        const QUrl url = m_server->start(&error);
        QVERIFY2(!url.isEmpty(), qPrintable(error));
        QUrl withPassword = url;
        withPassword.setUserInfo(u"admin:hunter2"_s);
        openConsole(withPassword);
        QVERIFY(QCoro::waitFor(m_controller->refresh()));
        QCOMPARE(m_window->windowTitle(), url.toString());
        QCOMPARE(m_window->connectionState()->text(), u"Connected to "_s + url.toString());
    }

    // A stream let go of (the console deleted its conversation, or selected another) says
    // nothing more: a 4004 close that came in the same turn as the DELETE's answer put up a
    // banner saying that the deleted conversation no longer existed.
    void aStreamLetGoOfSaysNothing()
    {
        startConsole();
        const QUuid id = create(u"let go"_s);
        QVERIFY(showAndSelect(id));
        QTRY_VERIFY_WITH_TIMEOUT(m_controller->timeline()->isLive(), 10000);
        // Deleted while the console's thread does nothing: its stream's close waits unread.
        QTcpSocket raw;
        raw.connectToHost(m_url.host(), quint16(m_url.port()));
        QVERIFY(raw.waitForConnected(5000));
        raw.write("DELETE " + ServerConnection::conversationPath(id).toUtf8() +
                  " HTTP/1.1\r\nHost: " + m_url.authority().toUtf8() + "\r\n\r\n");
        QByteArray answer;
        while (!answer.contains("\r\n\r\n") && raw.waitForReadyRead(5000))
            answer += raw.readAll();
        QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
        m_controller->select({});
        QVERIFY2(!QTest::qWaitFor([&] { return m_window->banner()->isVisible(); }, 500),
                 qPrintable(m_window->banner()->text()));
    }

    // A conversation deleted behind the console's back leaves the list when its stream says so.
    void aConversationDeletedElsewhereLeavesTheList()
    {
        startConsole();
        const QUuid id = create(u"soon gone"_s);
        QVERIFY(showAndSelect(id));
        QVERIFY(call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QTRY_VERIFY2_WITH_TIMEOUT(m_window->banner()->text().contains(u"no longer exists"_s),
                                  qPrintable(m_window->banner()->text()), 10000);
        QCOMPARE(m_controller->conversations()->rowOf(id), -1);
    }

private:
    // The text item under `root` showing `text`, if any.
    static QQuickItem *textItem(QQuickItem *root, const QString &text)
    {
        if (!root)
            return nullptr;
        // A label, or an event's selectable body.
        if ((root->inherits("QQuickText") || root->inherits("QQuickTextEdit")) &&
            root->property("text").toString() == text)
            return root;
        for (QQuickItem *child : root->childItems()) {
            if (QQuickItem *found = textItem(child, text))
                return found;
        }
        return nullptr;
    }

    ServerConfig serverConfig(int port = 0) const
    {
        ServerConfig config;
        config.port = quint16(port);
        config.dataDir = m_dir->path();
        config.sandboxProgram = qEnvironmentVariable("AGENTDECK_BINARY");
        config.shutdownGrace = std::chrono::seconds(2);
        return config;
    }

    void startConsole() { startConsole(serverConfig()); }
    void startConsole(const ServerConfig &config, bool refreshed = true)
    {
        m_server = std::make_unique<EmbeddedServer>(config);
        QString error;
        const QUrl url = m_server->start(&error);
        m_url = url;
        QVERIFY2(!url.isEmpty(), qPrintable(error));
        openConsole(url);
        if (refreshed)
            QVERIFY(QCoro::waitFor(m_controller->refresh()));
    }

    // The window, watching the server at `url`; not refreshed yet.
    void openConsole(const QUrl &url)
    {
        m_client = std::make_unique<ServerConnection>(url);
        m_connection = std::make_unique<ServerConnection>(url);
        m_controller = std::make_unique<ConsoleController>(m_connection.get());
        m_window = std::make_unique<MainWindow>(m_controller.get(), url);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    }

    // Idle conversations written straight into the catalog, before the server starts; the
    // oldest is titled `oldestTitle` when one is given.
    // The oldest, when titled, is also tagged team=ops and oncall, and finished; *oldest gets
    // its id.
    // The oldest `archived` of them archived.
    void seedConversations(int count, const QString &oldestTitle = {}, QUuid *oldest = nullptr,
                           int archived = 0)
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        QVERIFY2(db, qPrintable(error));
        ConversationStore store(*db);
        Transaction transaction(*db);
        const QDateTime start = QDateTime::currentDateTimeUtc().addSecs(-count);
        for (int i = 0; i < count; ++i) {
            ConversationInfo info{QUuid::createUuid(), i == 0 && !oldestTitle.isEmpty()
                                                           ? oldestTitle
                                                           : u"seeded %1"_s.arg(i)};
            info.createdAt = info.updatedAt = start.addSecs(i);
            info.agentKind = u"echo"_s;
            if (i < archived)
                info.archivedAt = info.updatedAt;
            if (i == 0 && !oldestTitle.isEmpty()) {
                info.tags = {{u"team"_s, u"ops"_s}, {u"oncall"_s, QString()}};
                info.executionStatus = ExecutionStatus::Finished;
                if (oldest)
                    *oldest = info.id;
            }
            info.workingDir = m_dir->filePath(u"workspaces/"_s + toWireId(info.id));
            store.insert(info);
        }
        transaction.commit();
    }

    // Ends a command `while [ ! -e go ]; ...` of conversation `id`: the file goes in its workspace.
    bool letItGo(const QUuid &id)
    {
        const QString workspace =
            conversation(id).value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
        return !workspace.isEmpty() &&
               QFile(QDir(workspace).filePath(u"go"_s)).open(QIODevice::WriteOnly);
    }

    // Answers the question box about to come with `button`; *asked gets what it asked.
    void answerTheNextQuestion(QMessageBox::StandardButton button, QString *asked)
    {
        QTimer::singleShot(0, this, [button, asked] {
            auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
            if (!box)
                return;
            *asked = box->text();
            box->button(button)->click();
        });
    }

    // Types `text` into the text dialog about to come (QInputDialog) and accepts it.
    void answerTheNextPrompt(const QString &text, QString *asked)
    {
        QTimer::singleShot(0, this, [text, asked] {
            auto *dialog = qobject_cast<QInputDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            *asked = dialog->labelText();
            dialog->setTextValue(text);
            dialog->accept();
        });
    }

    // A shell conversation whose runtime expired and whose files are gone.
    QUuid seedExpiredConversation()
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        if (!db)
            return {};
        ConversationStore store(*db);
        ConversationInfo info{QUuid::createUuid(), u"expired"_s};
        info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc().addSecs(-3600);
        info.agentKind = u"shell"_s;
        info.workingDir = m_dir->filePath(u"workspaces/"_s + toWireId(info.id));
        store.insert(info);
        const qint64 now = QDateTime::currentMSecsSinceEpoch();
        if (!store.markExpired(info.id, now, now))
            return {};
        store.markCleaned(info.id);
        return info.id;
    }

    QUuid seedInterruptedConversation(const QString &command = u"sleep 30"_s)
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        if (!db)
            return {};
        ConversationStore store(*db);
        ConversationInfo info{QUuid::createUuid(), u"interrupted"_s};
        info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
        info.agentKind = u"shell"_s;
        info.workingDir = m_dir->filePath(u"workspaces/interrupted"_s);
        QDir().mkpath(info.workingDir);
        info.executionStatus = ExecutionStatus::Running;
        store.insert(info);
        store.append(
            info.id,
            {Event::message(u"user"_s, u"user"_s, command), Event::action(u"bash"_s, command)},
            ExecutionStatus::Running, QDateTime::currentMSecsSinceEpoch());
        return info.id;
    }

    ApiReply call(const QByteArray &method, const QString &path)
    {
        return QCoro::waitFor(m_client->request(method, path));
    }
    // Refreshes the list as the console's timer would, then selects the conversation.
    bool showAndSelect(const QUuid &id)
    {
        return QCoro::waitFor(m_controller->refresh()) && m_window->selectConversation(id);
    }

    QList<QJsonObject> eventsOf(const QUuid &id)
    {
        QList<QJsonObject> events;
        for (const QJsonValue &item :
             call("GET"_ba, ServerConnection::conversationPath(id, u"events/search"))
                 .json.toObject()
                 .value(u"items"_s)
                 .toArray())
            events.append(item.toObject());
        return events;
    }
    QJsonObject conversation(const QUuid &id)
    {
        return call("GET"_ba, ServerConnection::conversationPath(id)).json.toObject();
    }
    QString status(const QUuid &id)
    {
        return conversation(id).value(u"execution_status"_s).toString();
    }
    QString runtimeOf(const QUuid &id)
    {
        return conversation(id)
            .value(u"runtime_info"_s)
            .toObject()
            .value(u"runtime_status"_s)
            .toString();
    }
    QUuid create(const QString &title, const QString &command = {}, bool confirm = false)
    {
        CreateConversationRequest request;
        request.title = title;
        request.alwaysConfirm = confirm;
        if (!command.isEmpty())
            request.initialMessage = MessageRequest{u"user"_s, command, true};
        const ApiReply reply = QCoro::waitFor(m_client->createConversation(request));
        return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
    }
    QString badgeText(QTableView *view, const QUuid &id)
    {
        // Refresh as the console's timer would, then read the runtime column's words.
        QCoro::waitFor(m_controller->refresh());
        const int row = m_controller->conversations()->rowOf(id);
        if (row < 0)
            return {};
        const QModelIndex source =
            m_controller->conversations()->index(row, ConversationListModel::RuntimeColumn);
        auto *proxy = static_cast<QSortFilterProxyModel *>(view->model());
        return proxy->mapFromSource(source).data().toString();
    }
    // The execution column's words and badge, as the list shows them now.
    QModelIndex executionCell(const QUuid &id)
    {
        const int row = m_controller->conversations()->rowOf(id);
        if (row < 0)
            return {};
        return m_controller->conversations()->index(row, ConversationListModel::ExecutionColumn);
    }
    // Refreshed first, as the console's timer would.
    QString executionText(const QUuid &id)
    {
        QCoro::waitFor(m_controller->refresh());
        return executionCell(id).data().toString();
    }
    StatusBadgeDelegate::Badge executionBadge(const QUuid &id)
    {
        const QModelIndex cell = executionCell(id);
        return StatusBadgeDelegate::executionBadge(
            cell.data(ConversationListModel::ExecutionStatusRole).toString(),
            cell.data(ConversationListModel::StaleRole).toBool(),
            cell.data(ConversationListModel::OutcomeKindRole).toString(),
            cell.data(ConversationListModel::OutcomeAttentionRole).toBool());
    }
    qint64 sandboxPid(const QUuid &id)
    {
        QFile file(m_dir->filePath(u"runtimes/"_s + toWireId(id) + u"/sandbox.pid"_s));
        return file.open(QIODevice::ReadOnly) ? file.readAll().trimmed().toLongLong() : 0;
    }
    void killSandboxes()
    {
        const QDir runtimes(m_dir->filePath(u"runtimes"_s));
        for (const QString &name : runtimes.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
            QFile file(runtimes.filePath(name + u"/sandbox.pid"_s));
            if (file.open(QIODevice::ReadOnly))
                ::kill(static_cast<pid_t>(file.readAll().trimmed().toLongLong()), SIGKILL);
        }
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<EmbeddedServer> m_server;
    QUrl m_url; // where the console's server listens
    std::unique_ptr<ServerConnection> m_client;
    std::unique_ptr<ServerConnection> m_connection;
    std::unique_ptr<ConsoleController> m_controller;
    std::unique_ptr<MainWindow> m_window;
};

AGENTDECK_GUI_TEST_MAIN(GuiConsoleTest)

#include "tst_gui_console.moc"
