#include "auditfeed.h"

#include "logging.h"
#include "storage/auditlog.h"
#include "storage/database.h"

#include <QSqlDriver>
#include <QSqlQuery>

using namespace Qt::StringLiterals;

namespace AgentDeck {

AuditFeed::AuditFeed(const AuditLog &writer, const Database &catalog, QObject *parent)
    : QObject(parent)
    , m_catalog(catalog)
{
    m_coalesce.setSingleShot(true);
    m_coalesce.setInterval(0);
    connect(&m_coalesce, &QTimer::timeout, this, &AuditFeed::woke);
    // Emitted in the main thread: queued to this one.
    connect(&writer, &AuditLog::written, this, &AuditFeed::wake);
    m_poll.callOnTimeout(this, &AuditFeed::wake);
    m_poll.start(PollInterval);
    if (!catalog.isPostgres())
        return;
    // A dropped listening connection (a database restart) is noticed here and opened again;
    // what was announced meanwhile is read on the wake-up that follows.
    m_watchdog.callOnTimeout(this, [this] {
        if (!m_listener || !QSqlQuery(m_listener->connection()).exec(u"SELECT 1"_s)) {
            qCWarning(lcStreams) << "the audit listener lost its connection; reconnecting";
            listen();
        }
    });
    m_watchdog.start(5000);
    listen();
}

AuditFeed::~AuditFeed() = default;

void AuditFeed::listen()
{
    m_listener.reset();
    QString error;
    auto listener = m_catalog.openAnother(&error);
    if (listener &&
        !listener->connection().driver()->subscribeToNotification(AuditLog::WrittenChannel))
        error = u"cannot listen on "_s + AuditLog::WrittenChannel;
    if (!error.isEmpty() || !listener) {
        qCWarning(lcStreams) << "the lifecycle feed cannot follow other replicas for now:" << error;
        return;
    }
    m_listener = std::move(listener);
    connect(m_listener->connection().driver(), &QSqlDriver::notification, this, &AuditFeed::wake);
    wake();
}

void AuditFeed::wake()
{
    if (!m_coalesce.isActive())
        m_coalesce.start();
}

} // namespace AgentDeck
