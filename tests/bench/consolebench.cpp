// agentdeck_console_bench: the console at a large catalogue against a small one, in the same
// run. Two headless servers (their catalogues written straight into SQLite beforehand), then,
// alternating between them, a fresh console process each time (this executable with --probe)
// that opens the window and reports: the time to its first rows, to its first whole refresh,
// to the next rows after a scroll to the end, to a search's one row (the oldest conversation),
// and its memory once the first refresh is through. See docs/PERFORMANCE.md.
#include "consolecontroller.h"
#include "consolesettings.h"
#include "mainwindow.h"
#include "storage/conversationstore.h"
#include "storage/database.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QProcess>
#include <QQuickWindow>
#include <QRegularExpression>
#include <QSettings>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdio>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {

const QString OldestTitle = u"the oldest conversation"_s;

// A line of /proc/self/status or smaps_rollup, in KiB.
qint64 procKib(const QString &file, QByteArrayView name)
{
    QFile proc(file);
    if (!proc.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : proc.readAll().split('\n')) {
        if (line.startsWith(name))
            return line.mid(name.size()).trimmed().split(' ').value(0).toLongLong();
    }
    return -1;
}

// The console, timed: one JSON object on stdout.
int probe(const QUrl &url)
{
    QStandardPaths::setTestModeEnabled(true);
    consoleSettings()->clear();
    QElapsedTimer clock;
    clock.start();
    ServerConnection connection(url);
    ConsoleController controller(&connection);
    MainWindow window(&controller, url);
    window.resize(1280, 800);
    window.show();
    QTableView *view = window.activeView();
    qint64 firstRows = -1;
    qint64 refreshed = -1;
    QObject::connect(view->model(), &QAbstractItemModel::rowsInserted, &window, [&] {
        if (firstRows < 0)
            firstRows = clock.elapsed();
    });
    QObject::connect(&controller, &ConsoleController::refreshed, &window, [&] {
        if (refreshed < 0)
            refreshed = clock.elapsed();
    });
    controller.startRefreshing(std::chrono::seconds(3));
    if (!QTest::qWaitFor([&] { return refreshed >= 0; }, 120'000)) {
        std::fputs("the first refresh did not end in 120 s\n", stderr);
        return 1;
    }
    const qint64 rssKib = procKib(u"/proc/self/status"_s, "VmRSS:");
    const qint64 pssKib = procKib(u"/proc/self/smaps_rollup"_s, "Pss:");
    const int rowsShown = view->model()->rowCount();

    // Scrolled to the end: the next rows (none at a catalogue the first refresh read whole).
    QElapsedTimer step;
    step.start();
    view->scrollToBottom();
    const bool more = QTest::qWaitFor([&] { return view->model()->rowCount() > rowsShown; },
                                      controller.isListComplete() ? 0 : 60'000);
    const qint64 loadMore = more ? step.elapsed() : -1;

    step.restart();
    window.filterBox()->setText(OldestTitle);
    const bool found = QTest::qWaitFor([&] { return view->model()->rowCount() == 1; }, 60'000);
    const qint64 search = found ? step.elapsed() : -1;

    const QJsonObject figures{{u"first_rows_ms"_s, firstRows}, {u"refreshed_ms"_s, refreshed},
                              {u"rows"_s, rowsShown},          {u"load_more_ms"_s, loadMore},
                              {u"search_ms"_s, search},        {u"rss_kib"_s, rssKib},
                              {u"pss_kib"_s, pssKib}};
    std::fputs(QJsonDocument(figures).toJson(QJsonDocument::Compact).append('\n').constData(),
               stdout);
    return 0;
}

// `count` idle conversations, the oldest titled OldestTitle, written in one transaction.
bool seed(const QString &dataDir, int count)
{
    QString error;
    auto db = Database::openSqlite(QDir(dataDir).filePath(u"agentdeck.db"_s), &error);
    if (!db) {
        std::fprintf(stderr, "cannot open the catalogue: %s\n", qPrintable(error));
        return false;
    }
    ConversationStore store(*db);
    Transaction transaction(*db);
    const QDateTime start = QDateTime::currentDateTimeUtc().addSecs(-count);
    for (int i = 0; i < count; ++i) {
        ConversationInfo info{QUuid::createUuid(), i == 0 ? OldestTitle : u"load %1"_s.arg(i)};
        info.createdAt = info.updatedAt = start.addSecs(i);
        info.agentKind = u"echo"_s;
        info.tags = {{u"batch"_s, QString::number(i % 10)}};
        info.workingDir = QDir(dataDir).filePath(u"workspaces/"_s + toWireId(info.id));
        store.insert(info);
    }
    transaction.commit();
    return true;
}

struct Server
{
    int conversations = 0;
    std::unique_ptr<QTemporaryDir> dir;
    std::unique_ptr<QProcess> process;
    QUrl url;
    QList<QJsonObject> runs;
};

bool start(Server &server, const QString &binary, const QString &workDir)
{
    server.dir = std::make_unique<QTemporaryDir>(QDir(workDir).filePath(u"console-bench-XXXXXX"_s));
    QElapsedTimer seeding;
    seeding.start();
    if (!server.dir->isValid() || !seed(server.dir->path(), server.conversations))
        return false;
    std::fprintf(stderr, "seeded %d conversations in %lld ms\n", server.conversations,
                 seeding.elapsed());
    server.process = std::make_unique<QProcess>();
    server.process->setProcessChannelMode(QProcess::SeparateChannels);
    server.process->start(binary, {u"--headless"_s, u"--listen"_s, u"127.0.0.1:0"_s,
                                   u"--data-dir"_s, server.dir->path()});
    static const QRegularExpression listening(u"listening on (http://\\S+)"_s);
    QByteArray printed;
    const bool up = QTest::qWaitFor(
        [&] {
            printed += server.process->readAllStandardError();
            const auto match = listening.match(QString::fromUtf8(printed));
            if (match.hasMatch())
                server.url = QUrl(match.captured(1));
            return match.hasMatch() || server.process->state() == QProcess::NotRunning;
        },
        120'000);
    if (!up || server.url.isEmpty()) {
        std::fprintf(stderr, "the server did not start:\n%s\n", printed.right(2000).constData());
        return false;
    }
    return true;
}

std::optional<QJsonObject> runProbe(const QString &self, const QUrl &url)
{
    QProcess probe;
    probe.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(u"QT_QUICK_BACKEND"_s, u"software"_s);
    probe.setProcessEnvironment(environment);
    probe.start(self, {u"--probe"_s, url.toString()});
    if (!probe.waitForFinished(300'000) || probe.exitCode() != 0)
        return std::nullopt;
    const QJsonObject figures = QJsonDocument::fromJson(probe.readAllStandardOutput()).object();
    if (figures.isEmpty())
        return std::nullopt;
    return figures;
}

double median(const QList<QJsonObject> &runs, const QString &key)
{
    QList<double> values;
    for (const QJsonObject &run : runs)
        values.append(run.value(key).toDouble());
    std::sort(values.begin(), values.end());
    return values.isEmpty() ? -1 : values[values.size() / 2];
}

} // namespace

int main(int argc, char *argv[])
{
    // Measured off screen unless a platform is asked for: no display is needed.
    if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);
    QApplication app(argc, argv);
    app.setApplicationName(u"agentdeck_console_bench"_s);

    QCommandLineParser parser;
    parser.setApplicationDescription(
        u"Measures the console at a large catalogue against a small one, in the same run: time "
        "to the first rows and memory (goal: ratio at most 1.5 for both)."_s);
    parser.addHelpOption();
    const QCommandLineOption binary(u"binary"_s, u"The agentdeck binary to run."_s, u"PATH"_s,
                                    QStringLiteral(AGENTDECK_BENCH_DEFAULT_BINARY));
    const QCommandLineOption conversations(u"conversations"_s,
                                           u"Size of the large catalogue (default 100000)."_s,
                                           u"N"_s, u"100000"_s);
    const QCommandLineOption reference(u"reference-conversations"_s,
                                       u"Size of the reference catalogue (default 1000)."_s, u"N"_s,
                                       u"1000"_s);
    const QCommandLineOption runs(u"runs"_s, u"Console starts per catalogue (default 5)."_s, u"N"_s,
                                  u"5"_s);
    const QCommandLineOption workDir(u"work-dir"_s,
                                     u"Where the servers' data dirs are created (default: the "
                                     "system temporary dir)."_s,
                                     u"DIR"_s, QDir::tempPath());
    const QCommandLineOption requireGoals(u"require-goals"_s,
                                          u"Exit with status 2 when a goal is not met."_s);
    const QCommandLineOption probeOption(u"probe"_s, u"(internal) Time one console on URL."_s,
                                         u"URL"_s);
    parser.addOptions({binary, conversations, reference, runs, workDir, requireGoals, probeOption});
    parser.process(app);
    if (parser.isSet(probeOption))
        return probe(QUrl(parser.value(probeOption)));

    Server small{std::max(1, parser.value(reference).toInt())};
    Server large{std::max(1, parser.value(conversations).toInt())};
    for (Server *server : {&small, &large}) {
        if (!start(*server, parser.value(binary), parser.value(workDir)))
            return 1;
    }
    const int count = std::max(1, parser.value(runs).toInt());
    for (int run = 0; run < count; ++run) {
        // Alternating, so that a slower moment of the machine falls on both.
        for (Server *server : {&small, &large}) {
            const auto figures = runProbe(QCoreApplication::applicationFilePath(), server->url);
            if (!figures) {
                std::fprintf(stderr, "the console probe failed at %d conversations\n",
                             server->conversations);
                return 1;
            }
            std::fprintf(stderr, "%7d conversations: %s\n", server->conversations,
                         QJsonDocument(*figures).toJson(QJsonDocument::Compact).constData());
            server->runs.append(*figures);
        }
    }
    for (Server *server : {&small, &large}) {
        server->process->terminate();
        server->process->waitForFinished(20'000);
    }

    std::printf("console at %d conversations against %d (median of %d console starts each)\n",
                large.conversations, small.conversations, count);
    std::printf("%-24s %13s %13s %8s %6s\n", "figure", "large", "reference", "ratio", "goal");
    bool met = true;
    const auto row = [&](const char *name, const QString &key, const char *unit, double goal) {
        const double a = median(large.runs, key);
        const double b = median(small.runs, key);
        const double ratio = b > 0 ? a / b : -1;
        const bool ok = goal <= 0 || (ratio >= 0 && ratio <= goal);
        met = met && ok;
        const QString shownRatio = ratio >= 0 ? QString::number(ratio, 'f', 2) : u"-"_s;
        const QString shownGoal = goal > 0 ? u"<= %1"_s.arg(goal) : QString();
        std::printf("%-24s %9.0f %-3s %9.0f %-3s %8s %6s%s\n", name, a, unit, b, unit,
                    qPrintable(shownRatio), qPrintable(shownGoal), ok ? "" : "  not met");
    };
    row("time to first rows", u"first_rows_ms"_s, "ms", 1.5);
    row("first refresh", u"refreshed_ms"_s, "ms", 0);
    row("console RSS", u"rss_kib"_s, "KiB", 1.5);
    row("console PSS", u"pss_kib"_s, "KiB", 0);
    row("rows read", u"rows"_s, "", 0);
    row("search: oldest row", u"search_ms"_s, "ms", 0);
    std::printf("%-24s %9.0f ms (the reference reads its catalogue whole)\n",
                "next rows after scroll", median(large.runs, u"load_more_ms"_s));
    return parser.isSet(requireGoals) && !met ? 2 : 0;
}
