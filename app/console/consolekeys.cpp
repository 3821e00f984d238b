#include "consolekeys.h"

#include <QCoroSignal>

#include <qt6keychain/keychain.h>

#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck::ConsoleKeys {

namespace {

const QString Service = u"agentdeck"_s;

// One key per server, however its URL was typed.
QString entryOf(const QUrl &server)
{
    return server
        .adjusted(QUrl::RemoveUserInfo | QUrl::RemovePath | QUrl::RemoveQuery |
                  QUrl::RemoveFragment)
        .toString();
}

// Runs `job` to its end. Never with QtKeychain's insecure fallback, which writes the secret
// into a plain settings file.
QCoro::Task<> finish(QKeychain::Job &job, const QUrl &server)
{
    job.setAutoDelete(false);
    job.setInsecureFallback(false);
    job.setKey(entryOf(server));
    job.start();
    co_await qCoro(&job, &QKeychain::Job::finished);
}

} // namespace

QCoro::Task<std::optional<QString>> read(QUrl server)
{
    auto job = std::make_unique<QKeychain::ReadPasswordJob>(Service);
    co_await finish(*job, server);
    if (job->error() != QKeychain::NoError)
        co_return std::nullopt;
    co_return job->textData();
}

QCoro::Task<QString> write(QUrl server, QString key)
{
    auto job = std::make_unique<QKeychain::WritePasswordJob>(Service);
    job->setTextData(key);
    co_await finish(*job, server);
    if (job->error() == QKeychain::NoError)
        co_return QString();
    // QtKeychain says "Unknown error" where no Secret Service or KWallet runs (no D-Bus).
    co_return job->errorString().isEmpty()
        ? u"no secret store answered"_s
        : u"no secret store answered: %1"_s.arg(job->errorString());
}

} // namespace AgentDeck::ConsoleKeys
