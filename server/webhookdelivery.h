#pragma once

#include "serverconfig.h"
#include "storage/auditlog.h"

#include <QByteArray>
#include <QJsonArray>
#include <QNetworkAccessManager>
#include <QObject>
#include <QTimer>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

class QNetworkReply;

namespace AgentDeck {

class Database;

// Posts the feed's records (the audit log's changes made, in number order) to each --webhook,
// signed with HMAC-SHA256. Each webhook's cursor, the record it was given last, is in the
// catalog (table webhooks) and moves only after a 2xx, or when a record is given up: a record
// acknowledged is never posted again, and one not acknowledged is posted again after a restart.
// A failed post is tried again with exponential backoff until the record has failed for
// giveUpAfter. One replica at a time delivers a webhook: the one holding its lease row.
//
// Everything runs on the event loop, off the requests' path: the posts are asynchronous, and a
// receiver that does not answer is let go after requestTimeout.
class WebhookDelivery : public QObject
{
    Q_OBJECT
public:
    struct Timing
    {
        std::chrono::milliseconds requestTimeout{10'000};
        std::chrono::milliseconds firstRetry{1'000};
        std::chrono::milliseconds maxRetry{std::chrono::minutes(5)};
        std::chrono::milliseconds giveUpAfter{std::chrono::hours(1)};
        // How often records written through other replicas are looked for (those written here
        // wake the delivery at once), and a lapsed lease is taken.
        std::chrono::milliseconds poll{5'000};
        std::chrono::milliseconds lease{30'000};
    };
    // Tests only: AGENTDECK_TEST_WEBHOOK_TIMING=timeout_ms=N,retry_ms=N,max_retry_ms=N,
    // give_up_ms=N,poll_ms=N,lease_ms=N shortens the timing; unset, the defaults above.
    static Timing timingFromEnvironment();

    // A webhook is reported failing once its record has failed this often or this long.
    static constexpr int FailingAttempts = 3;
    static constexpr std::chrono::milliseconds FailingAfter{60'000};
    static constexpr int BatchSize = 50;

    // `soleServer`: no other server uses the catalog (SQLite), so a lease left by a process that
    // was killed is taken at once.
    WebhookDelivery(Database &db, AuditLog &audit, QList<WebhookTarget> targets, QByteArray secret,
                    QString replica, bool soleServer, Timing timing);
    ~WebhookDelivery() override;

    // Makes each webhook's row (a new webhook starts after the records written so far) and
    // starts delivering; throws StorageError when the rows cannot be made.
    void start();
    // Lets go of the posts in flight (their records are posted again later) and of the leases.
    void stop();

    // For /server_info: each webhook's URL without credentials, query or filter, its state
    // (ok, failing, or standby when another replica delivers it), failure and pending records.
    QJsonArray status() const;
    // Prometheus text: delivered, failed and pending per webhook.
    QByteArray metrics() const;

    // "sha256=HEX": the HMAC-SHA256 of `body` with `secret`, as the signature header carries it.
    static QByteArray signature(const QByteArray &secret, const QByteArray &body);
    // The URL as reports show it: scheme, host, port and path only.
    static QString displayUrl(const QUrl &url);
    static constexpr QByteArrayView SignatureHeader = "X-AgentDeck-Signature";
    static constexpr QByteArrayView DeliveryHeader = "X-AgentDeck-Delivery";

private:
    struct Hook;
    void wake();
    void pump(Hook &hook);
    bool holdLease(Hook &hook);
    void post(Hook &hook);
    void finished(Hook &hook, QNetworkReply *reply, bool timedOut);
    // Moves the cursor past `number` and clears the failure; false when the lease was lost.
    bool advance(Hook &hook, qint64 number, bool gaveUp);
    void countPending(Hook &hook);
    bool isFailing(const Hook &hook) const;

    Database &m_db;
    AuditLog &m_audit;
    const QByteArray m_secret;
    const QString m_replica;
    const bool m_soleServer;
    const Timing m_timing;
    QNetworkAccessManager m_network;
    std::vector<std::unique_ptr<Hook>> m_hooks;
    QTimer m_poll;
    QTimer m_wake;
    bool m_stopped = true;
};

} // namespace AgentDeck
