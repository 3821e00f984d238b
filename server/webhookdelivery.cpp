#include "webhookdelivery.h"

#include "logging.h"
#include "storage/database.h"
#include "wiretypes.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDeadlineTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMessageAuthenticationCode>
#include <QNetworkReply>
#include <QNetworkRequest>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

struct WebhookDelivery::Hook
{
    WebhookTarget target;
    QString id;      // SHA-256 of the option's value
    QString display; // displayUrl()
    int index = 0;   // 1-based, in the order given
    bool holding = false;
    QDeadlineTimer renewal; // when the lease held is renewed next
    QString owner;          // the replica that delivers it, as its row says
    qint64 cursor = 0;
    std::optional<qint64> failingSinceMs;
    int attempts = 0;
    QString lastError;
    qint64 givenUp = 0; // ever, as the row counts them
    QList<AuditRecord> queue;
    QNetworkReply *inFlight = nullptr;
    QTimer deadline;
    QTimer retry;
    qint64 pending = 0;
    qint64 delivered = 0; // by this process
    qint64 failed = 0;    // attempts that failed, in this process
};

namespace {
qint64 nowMs()
{
    return QDateTime::currentMSecsSinceEpoch();
}

QByteArray labels(int index, const QString &display)
{
    QByteArray url = display.toUtf8();
    url.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    return "webhook=\"" + QByteArray::number(index) + "\",url=\"" + url + '"';
}
} // namespace

WebhookDelivery::Timing WebhookDelivery::timingFromEnvironment()
{
    Timing timing;
    const QString text = qEnvironmentVariable("AGENTDECK_TEST_WEBHOOK_TIMING");
    for (const QString &item : text.split(u',', Qt::SkipEmptyParts)) {
        const QString name = item.section(u'=', 0, 0).trimmed();
        bool ok = false;
        const std::chrono::milliseconds value(item.section(u'=', 1).trimmed().toLongLong(&ok));
        if (!ok || value.count() <= 0)
            continue;
        if (name == u"timeout_ms"_s)
            timing.requestTimeout = value;
        else if (name == u"retry_ms"_s)
            timing.firstRetry = value;
        else if (name == u"max_retry_ms"_s)
            timing.maxRetry = value;
        else if (name == u"give_up_ms"_s)
            timing.giveUpAfter = value;
        else if (name == u"poll_ms"_s)
            timing.poll = value;
        else if (name == u"lease_ms"_s)
            timing.lease = value;
    }
    return timing;
}

QByteArray WebhookDelivery::signature(const QByteArray &secret, const QByteArray &body)
{
    return "sha256=" +
           QMessageAuthenticationCode::hash(body, secret, QCryptographicHash::Sha256).toHex();
}

QString WebhookDelivery::displayUrl(const QUrl &url)
{
    return url.adjusted(QUrl::RemoveUserInfo | QUrl::RemoveQuery | QUrl::RemoveFragment).toString();
}

WebhookDelivery::WebhookDelivery(Database &db, AuditLog &audit, QList<WebhookTarget> targets,
                                 QByteArray secret, QString replica, bool soleServer, Timing timing)
    : m_db(db)
    , m_audit(audit)
    , m_secret(std::move(secret))
    , m_replica(std::move(replica))
    , m_soleServer(soleServer)
    , m_timing(timing)
{
    int index = 0;
    for (WebhookTarget &target : targets) {
        auto hook = std::make_unique<Hook>();
        hook->id = QString::fromLatin1(
            QCryptographicHash::hash(target.spec.toUtf8(), QCryptographicHash::Sha256).toHex());
        hook->display = displayUrl(target.url);
        hook->index = ++index;
        hook->target = std::move(target);
        hook->deadline.setSingleShot(true);
        hook->retry.setSingleShot(true);
        Hook *raw = hook.get();
        connect(&hook->retry, &QTimer::timeout, this, [this, raw] { pump(*raw); });
        m_hooks.push_back(std::move(hook));
    }
    // A receiver's redirect is its answer, not a second address to post the record to.
    m_network.setRedirectPolicy(QNetworkRequest::ManualRedirectPolicy);
    m_wake.setSingleShot(true);
    m_wake.setInterval(0);
    connect(&m_wake, &QTimer::timeout, this, [this] {
        for (const auto &hook : m_hooks)
            pump(*hook);
    });
    m_poll.setInterval(m_timing.poll);
    connect(&m_poll, &QTimer::timeout, this, [this] {
        for (const auto &hook : m_hooks) {
            // A post waiting for its answer or its retry keeps the lease too.
            if (hook->holding && (hook->inFlight || hook->retry.isActive())) {
                try {
                    holdLease(*hook);
                } catch (const StorageError &error) {
                    qCWarning(lcServer)
                        << "webhook" << hook->display << "cannot renew its lease:" << error.what();
                }
            }
            pump(*hook);
            if (!hook->inFlight)
                countPending(*hook);
        }
    });
    // Queued: written() is emitted from the audit log's flush, which a search may call.
    connect(&m_audit, &AuditLog::written, this, &WebhookDelivery::wake, Qt::QueuedConnection);
}

WebhookDelivery::~WebhookDelivery()
{
    for (const auto &hook : m_hooks) {
        if (hook->inFlight) {
            hook->inFlight->disconnect(this);
            hook->inFlight->abort();
            hook->inFlight->deleteLater();
        }
    }
}

void WebhookDelivery::start()
{
    // The records written before a webhook was configured are not its: it starts after them.
    QSqlQuery &insert = m_db.prepared(
        u"INSERT INTO webhooks (id, delivered_number) SELECT ?, COALESCE(MAX(number), 0) FROM "
        "audit_log WHERE 1 = 1 ON CONFLICT (id) DO NOTHING"_s);
    for (const auto &hook : m_hooks) {
        insert.addBindValue(hook->id);
        m_db.exec(insert);
    }
    m_stopped = false;
    m_poll.start();
    wake();
}

void WebhookDelivery::stop()
{
    m_stopped = true;
    m_poll.stop();
    m_wake.stop();
    for (const auto &hook : m_hooks) {
        hook->retry.stop();
        hook->deadline.stop();
        if (hook->inFlight) {
            hook->inFlight->disconnect(this);
            hook->inFlight->abort();
            hook->inFlight->deleteLater();
            hook->inFlight = nullptr;
        }
        if (!hook->holding)
            continue;
        // Another replica takes it over at once, not a lease later.
        try {
            QSqlQuery &release = m_db.prepared(
                u"UPDATE webhooks SET owner = NULL, lease_until_ms = 0 WHERE id = ? AND owner = ?"_s);
            release.addBindValue(hook->id);
            release.addBindValue(m_replica);
            m_db.exec(release);
        } catch (const StorageError &error) {
            qCWarning(lcServer) << "cannot let go of webhook" << hook->display << error.what();
        }
        hook->holding = false;
    }
}

void WebhookDelivery::wake()
{
    if (!m_stopped && !m_wake.isActive())
        m_wake.start();
}

bool WebhookDelivery::holdLease(Hook &hook)
{
    // Renewed every third of the lease, not at every post: each renewal is a write.
    if (hook.holding && !hook.renewal.hasExpired())
        return true;
    QSqlQuery &take = m_db.prepared(
        u"UPDATE webhooks SET owner = ?, lease_until_ms = agentdeck_now_ms() + ? WHERE id = ? AND "
        "(owner = ? OR owner IS NULL OR lease_until_ms < agentdeck_now_ms() OR 1 = ?)"_s);
    take.addBindValue(m_replica);
    take.addBindValue(qint64(m_timing.lease.count()));
    take.addBindValue(hook.id);
    take.addBindValue(m_replica);
    take.addBindValue(m_soleServer ? 1 : 0);
    m_db.exec(take);
    const bool held = take.numRowsAffected() == 1;
    if (held)
        hook.renewal.setRemainingTime(m_timing.lease / 3);
    // Read whenever the lease was not already ours: another replica may have moved the cursor.
    if (held && hook.holding)
        return true;
    QSqlQuery &read =
        m_db.prepared(u"SELECT delivered_number, failing_since_ms, attempts, last_error, given_up, "
                      "owner FROM webhooks WHERE id = ?"_s);
    read.addBindValue(hook.id);
    m_db.exec(read);
    if (m_db.next(read)) {
        hook.cursor = read.value(0).toLongLong();
        hook.failingSinceMs = read.value(1).isNull()
                                  ? std::nullopt
                                  : std::optional<qint64>(read.value(1).toLongLong());
        hook.attempts = read.value(2).toInt();
        hook.lastError = read.value(3).toString();
        hook.givenUp = read.value(4).toLongLong();
        hook.owner = read.value(5).toString();
    }
    read.finish();
    hook.queue.clear();
    if (held && !hook.holding)
        qCInfo(lcServer).noquote() << u"delivering webhook %1 from audit record %2"_s.arg(
            hook.display, QString::number(hook.cursor));
    hook.holding = held;
    return held;
}

void WebhookDelivery::pump(Hook &hook)
{
    if (m_stopped || hook.inFlight || hook.retry.isActive())
        return;
    try {
        if (!holdLease(hook))
            return;
        if (hook.queue.isEmpty()) {
            AuditLog::Query query;
            query.results = AuditLog::Query::Results::Done;
            query.descending = false;
            query.after = hook.cursor;
            query.limit = BatchSize;
            QList<AuditRecord> records = m_audit.search(query).first;
            if (records.isEmpty())
                return;
            const qint64 last = records.constLast().number;
            if (!hook.target.actions.isEmpty())
                records.removeIf([&](const AuditRecord &record) {
                    return !hook.target.actions.contains(record.action);
                });
            if (records.isEmpty()) {
                // None of them is this webhook's: the cursor passes them by.
                if (advance(hook, last, false))
                    wake();
                return;
            }
            hook.queue = records;
            countPending(hook);
        }
        post(hook);
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "webhook" << hook.display
                            << "cannot read its records, tried again later:" << error.what();
    }
}

void WebhookDelivery::post(Hook &hook)
{
    const AuditRecord &record = hook.queue.constFirst();
    const QByteArray body = QJsonDocument(record.toJson()).toJson(QJsonDocument::Compact);
    QNetworkRequest request(hook.target.url);
    request.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
    request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);
    request.setHeader(QNetworkRequest::UserAgentHeader,
                      QByteArray("agentdeck-webhook/" AGENTDECK_VERSION));
    request.setRawHeader(DeliveryHeader.toByteArray(), QByteArray::number(record.number));
    request.setRawHeader(SignatureHeader.toByteArray(), signature(m_secret, body));
    QNetworkReply *reply = m_network.post(request, body);
    hook.inFlight = reply;
    Hook *raw = &hook;
    // Its own deadline, not a transfer timeout: one that trickles a byte at a time is let go too.
    hook.deadline.disconnect(this);
    connect(&hook.deadline, &QTimer::timeout, this, [this, raw, reply] {
        if (raw->inFlight == reply)
            finished(*raw, reply, true);
    });
    hook.deadline.start(m_timing.requestTimeout);
    connect(reply, &QNetworkReply::finished, this, [this, raw, reply] {
        if (raw->inFlight == reply)
            finished(*raw, reply, false);
    });
}

void WebhookDelivery::finished(Hook &hook, QNetworkReply *reply, bool timedOut)
{
    hook.inFlight = nullptr;
    hook.deadline.stop();
    reply->disconnect(this);
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QString networkError = reply->errorString();
    if (timedOut)
        reply->abort();
    reply->deleteLater();
    if (m_stopped || hook.queue.isEmpty())
        return;
    const AuditRecord record = hook.queue.constFirst();
    try {
        if (!timedOut && status >= 200 && status < 300) {
            if (hook.failingSinceMs)
                qCInfo(lcServer).noquote()
                    << u"webhook %1 accepts records again after %2 failed attempts"_s.arg(
                           hook.display, QString::number(hook.attempts));
            ++hook.delivered;
            if (!advance(hook, record.number, false))
                return;
            hook.queue.removeFirst();
            hook.pending = std::max<qint64>(0, hook.pending - 1);
            pump(hook);
            return;
        }
        ++hook.failed;
        ++hook.attempts;
        hook.lastError = timedOut ? u"no answer within %1 ms"_s.arg(m_timing.requestTimeout.count())
                         : status > 0 ? u"HTTP %1"_s.arg(status)
                                      : networkError;
        const qint64 now = nowMs();
        if (!hook.failingSinceMs) {
            hook.failingSinceMs = now;
            qCWarning(lcServer).noquote()
                << u"webhook %1 failed on audit record %2: %3; trying again with backoff"_s.arg(
                       hook.display, QString::number(record.number), hook.lastError);
        }
        if (now - *hook.failingSinceMs >= m_timing.giveUpAfter.count()) {
            qCWarning(lcServer).noquote()
                << u"webhook %1 gave up audit record %2 after %3 attempts over %4 s: %5"_s.arg(
                       hook.display, QString::number(record.number), QString::number(hook.attempts),
                       QString::number((now - *hook.failingSinceMs) / 1000), hook.lastError);
            if (!advance(hook, record.number, true))
                return;
            hook.queue.removeFirst();
            hook.pending = std::max<qint64>(0, hook.pending - 1);
            pump(hook);
            return;
        }
        QSqlQuery &note = m_db.prepared(
            u"UPDATE webhooks SET failing_since_ms = ?, attempts = ?, last_error = ? WHERE id = ? "
            "AND owner = ?"_s);
        note.addBindValue(*hook.failingSinceMs);
        note.addBindValue(hook.attempts);
        note.addBindValue(hook.lastError);
        note.addBindValue(hook.id);
        note.addBindValue(m_replica);
        m_db.exec(note);
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "webhook" << hook.display
                            << "cannot note its delivery, tried again later:" << error.what();
    }
    // 1 s, 2 s, 4 s ... up to the cap; the exponent stops growing long before it overflows.
    const int doublings = std::min(hook.attempts - 1, 30);
    const auto backoff = std::min<std::chrono::milliseconds>(
        m_timing.maxRetry, m_timing.firstRetry * (qint64(1) << std::max(doublings, 0)));
    hook.retry.start(backoff);
}

bool WebhookDelivery::advance(Hook &hook, qint64 number, bool gaveUp)
{
    QSqlQuery &move = m_db.prepared(
        u"UPDATE webhooks SET delivered_number = ?, failing_since_ms = NULL, attempts = 0, "
        "last_error = '', given_up = given_up + ? WHERE id = ? AND owner = ?"_s);
    move.addBindValue(number);
    move.addBindValue(gaveUp ? 1 : 0);
    move.addBindValue(hook.id);
    move.addBindValue(m_replica);
    m_db.exec(move);
    if (move.numRowsAffected() != 1) {
        // Another replica took the webhook over: it goes on from the cursor the row holds.
        hook.holding = false;
        hook.queue.clear();
        return false;
    }
    hook.cursor = number;
    hook.failingSinceMs.reset();
    hook.attempts = 0;
    hook.lastError.clear();
    if (gaveUp)
        ++hook.givenUp;
    return true;
}

void WebhookDelivery::countPending(Hook &hook)
{
    QString sql =
        u"SELECT COUNT(*) FROM audit_log WHERE number > ? AND status BETWEEN 200 AND 299"_s;
    if (!hook.target.actions.isEmpty()) {
        QStringList marks(hook.target.actions.size(), u"?"_s);
        sql += u" AND action IN ("_s + marks.join(u", "_s) + u')';
    }
    try {
        QSqlQuery count = m_db.prepare(sql);
        count.addBindValue(hook.cursor);
        for (const QString &action : std::as_const(hook.target.actions))
            count.addBindValue(action);
        m_db.exec(count);
        if (m_db.next(count))
            hook.pending = count.value(0).toLongLong();
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "webhook" << hook.display
                            << "cannot count its pending records:" << error.what();
    }
}

bool WebhookDelivery::isFailing(const Hook &hook) const
{
    return hook.failingSinceMs && (hook.attempts >= FailingAttempts ||
                                   nowMs() - *hook.failingSinceMs >= FailingAfter.count());
}

QJsonArray WebhookDelivery::status() const
{
    QJsonArray list;
    for (const auto &hook : m_hooks) {
        const bool failing = isFailing(*hook);
        list.append(QJsonObject{
            {u"url"_s, hook->display},
            {u"actions"_s, QJsonArray::fromStringList(hook->target.actions)},
            {u"state"_s, failing         ? u"failing"_s
                         : hook->holding ? u"ok"_s
                                         : u"standby"_s},
            {u"delivering_replica"_s, hook->owner.isEmpty() ? QJsonValue() : hook->owner},
            {u"failing_since"_s,
             hook->failingSinceMs ? QJsonValue(toWireTime(*hook->failingSinceMs)) : QJsonValue()},
            {u"attempts"_s, hook->attempts},
            {u"last_error"_s, hook->lastError.isEmpty() ? QJsonValue() : hook->lastError},
            {u"delivered_id"_s, QString::number(hook->cursor)},
            {u"pending"_s, hook->pending},
            {u"given_up"_s, hook->givenUp},
        });
    }
    return list;
}

QByteArray WebhookDelivery::metrics() const
{
    if (m_hooks.empty())
        return {};
    struct Series
    {
        const char *name;
        const char *type;
        const char *help;
        qint64 (*value)(const Hook &, bool failing);
    };
    static const Series series[] = {
        {"agentdeck_webhook_delivered_total", "counter",
         "Records a webhook acknowledged (2xx), posted by this replica.",
         [](const Hook &hook, bool) { return hook.delivered; }},
        {"agentdeck_webhook_failed_attempts_total", "counter",
         "Posts to a webhook that failed (an error status, no answer in time, no connection), by "
         "this replica.",
         [](const Hook &hook, bool) { return hook.failed; }},
        {"agentdeck_webhook_given_up_total", "counter",
         "Records a webhook never acknowledged, given up after failing for the retry window.",
         [](const Hook &hook, bool) { return hook.givenUp; }},
        {"agentdeck_webhook_pending", "gauge", "Records waiting for a webhook.",
         [](const Hook &hook, bool) { return hook.pending; }},
        {"agentdeck_webhook_failing", "gauge",
         "1 while a webhook keeps failing on its next record.",
         [](const Hook &, bool failing) { return qint64(failing); }},
    };
    QByteArray out;
    for (const Series &one : series) {
        out += "# HELP "_ba + one.name + ' ' + one.help + "\n# TYPE " + one.name + ' ' + one.type +
               '\n';
        for (const auto &hook : m_hooks)
            out += one.name + "{"_ba + labels(hook->index, hook->display) + "} " +
                   QByteArray::number(one.value(*hook, isFailing(*hook))) + '\n';
    }
    return out;
}

} // namespace AgentDeck
