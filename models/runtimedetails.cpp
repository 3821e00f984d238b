#include "runtimedetails.h"

#include "wiretypes.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
QJsonValue orNull(const std::optional<QDateTime> &time)
{
    return time ? QJsonValue(toWireTime(*time)) : QJsonValue(QJsonValue::Null);
}

QJsonValue orNull(const std::optional<qint64> &number)
{
    return number ? QJsonValue(*number) : QJsonValue(QJsonValue::Null);
}

std::optional<qint64> numberOf(const QJsonValue &value)
{
    return value.isDouble() ? std::optional<qint64>(value.toInteger()) : std::nullopt;
}
} // namespace

QJsonObject RuntimeDetails::toJson() const
{
    QJsonObject lease;
    if (!leaseOwner.isEmpty()) {
        lease = {{u"owner"_s, leaseOwner},
                 {u"replica_id"_s, ownerReplica},
                 {u"advertise_url"_s, ownerUrl},
                 {u"epoch"_s, leaseEpoch},
                 {u"expires_in_ms"_s, orNull(leaseMsLeft)},
                 {u"this_server"_s, ownedHere}};
    }
    return {{u"sandbox_pid"_s, orNull(sandboxPid)},
            {u"started_at"_s, orNull(startedAt)},
            {u"idle_since"_s, orNull(idleSince)},
            {u"runtime_dir"_s, runtimeDir},
            {u"lease"_s, lease.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(lease)}};
}

RuntimeDetails RuntimeDetails::fromJson(const QJsonValue &value)
{
    const QJsonObject object = value.toObject();
    RuntimeDetails details;
    details.sandboxPid = numberOf(object.value(u"sandbox_pid"_s));
    details.startedAt = parseWireTime(object.value(u"started_at"_s).toString());
    details.idleSince = parseWireTime(object.value(u"idle_since"_s).toString());
    details.runtimeDir = object.value(u"runtime_dir"_s).toString();
    const QJsonObject lease = object.value(u"lease"_s).toObject();
    details.leaseOwner = lease.value(u"owner"_s).toString();
    details.ownerReplica = lease.value(u"replica_id"_s).toString();
    details.ownerUrl = lease.value(u"advertise_url"_s).toString();
    details.leaseEpoch = lease.value(u"epoch"_s).toInteger();
    details.leaseMsLeft = numberOf(lease.value(u"expires_in_ms"_s));
    details.ownedHere = lease.value(u"this_server"_s).toBool();
    return details;
}

} // namespace AgentDeck
