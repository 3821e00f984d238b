#include "sandboxpolicy.h"

#include <QJsonValue>
#include <QRegularExpression>

#include <algorithm>
#include <array>
#include <cmath>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

struct Limit
{
    QLatin1StringView name;
    qint64 SandboxPolicy::*field;
};

constexpr std::array Limits{
    Limit{QLatin1StringView("memory_bytes"), &SandboxPolicy::memoryBytes},
    Limit{QLatin1StringView("processes"), &SandboxPolicy::processes},
    Limit{QLatin1StringView("cpu_seconds"), &SandboxPolicy::cpuSeconds},
    Limit{QLatin1StringView("file_size_bytes"), &SandboxPolicy::fileSizeBytes},
};

// 0 is no limit: the tighter of two limits is the smaller one that is set.
qint64 tighter(qint64 a, qint64 b)
{
    if (a == 0 || b == 0)
        return std::max(a, b);
    return std::min(a, b);
}

} // namespace

QString toString(SandboxPolicy::Network network)
{
    switch (network) {
    case SandboxPolicy::Network::None:
        return u"none"_s;
    case SandboxPolicy::Network::Egress:
        return u"egress"_s;
    case SandboxPolicy::Network::Host:
        return u"host"_s;
    }
    return u"none"_s;
}

std::optional<SandboxPolicy::Network> sandboxNetworkFromString(QStringView text)
{
    for (auto network : {SandboxPolicy::Network::None, SandboxPolicy::Network::Egress,
                         SandboxPolicy::Network::Host}) {
        if (text == toString(network))
            return network;
    }
    return std::nullopt;
}

QJsonObject SandboxPolicy::toJson() const
{
    QJsonObject object{{u"network"_s, toString(network)}};
    for (const Limit &limit : Limits)
        object.insert(limit.name, this->*limit.field);
    if (!image.isEmpty())
        object.insert(u"image"_s, image);
    return object;
}

SandboxPolicy SandboxPolicy::fromJson(const QJsonObject &object)
{
    SandboxPolicy policy;
    policy.network =
        sandboxNetworkFromString(object.value(u"network"_s).toString()).value_or(Network::None);
    for (const Limit &limit : Limits)
        policy.*limit.field = std::max<qint64>(0, object.value(limit.name).toInteger());
    policy.image = object.value(u"image"_s).toString();
    return policy;
}

std::optional<SandboxPolicy> SandboxPolicy::fromRequest(const QJsonObject &object,
                                                        const SandboxPolicy &server, QString *error)
{
    SandboxPolicy policy = server;
    // The server's image stays its own to change: a conversation that names none follows it.
    policy.image.clear();
    policy.imagePatterns.clear();
    if (const QJsonValue given = object.value(u"network"_s);
        !given.isUndefined() && !given.isNull()) {
        const auto network = sandboxNetworkFromString(given.toString());
        if (!network) {
            *error = u"sandbox.network takes none, egress or host"_s;
            return std::nullopt;
        }
        if (*network > server.network) {
            *error = u"sandbox.network %1 is wider than the server allows (%2)"_s.arg(
                toString(*network), toString(server.network));
            return std::nullopt;
        }
        policy.network = *network;
    }
    for (const Limit &limit : Limits) {
        const QJsonValue given = object.value(limit.name);
        if (given.isUndefined() || given.isNull())
            continue;
        const double number = given.toDouble(-1);
        if (!given.isDouble() || number < 0 || number != std::floor(number) || number > 1e15) {
            *error = u"sandbox.%1 takes a whole number, 0 for the server's limit"_s.arg(limit.name);
            return std::nullopt;
        }
        const auto value = qint64(number);
        const qint64 most = server.*limit.field;
        if (value == 0)
            continue;
        if (most != 0 && value > most) {
            *error = u"sandbox.%1 %2 is more than the server allows (%3)"_s.arg(limit.name)
                         .arg(value)
                         .arg(most);
            return std::nullopt;
        }
        policy.*limit.field = value;
    }
    if (const QJsonValue given = object.value(u"image"_s);
        !given.isUndefined() && !given.isNull()) {
        const QString image = given.toString();
        if (!given.isString() || image.isEmpty() || image.size() > 255 ||
            image.contains(QRegularExpression(u"[\\s\\x00-\\x1f]"_s))) {
            *error = u"sandbox.image takes an image name such as debian:bookworm"_s;
            return std::nullopt;
        }
        if (server.image.isEmpty()) {
            *error = u"sandbox.image: this server runs no containers (--runtime docker)"_s;
            return std::nullopt;
        }
        if (!server.allowsImage(image)) {
            *error =
                u"sandbox.image %1 is not one the server allows (--sandbox-images)"_s.arg(image);
            return std::nullopt;
        }
        policy.image = image;
    }
    return policy;
}

bool SandboxPolicy::allowsImage(const QString &candidate) const
{
    if (!image.isEmpty() && candidate == image)
        return true;
    // * and ? match any characters, '/' included: a pattern names images, not paths.
    return std::any_of(imagePatterns.cbegin(), imagePatterns.cend(), [&](const QString &pattern) {
        QString expression = QRegularExpression::escape(pattern);
        expression.replace(u"\\*"_s, u".*"_s).replace(u"\\?"_s, u"."_s);
        return QRegularExpression(QRegularExpression::anchoredPattern(expression))
            .match(candidate)
            .hasMatch();
    });
}

SandboxPolicy SandboxPolicy::within(const SandboxPolicy &server) const
{
    SandboxPolicy policy;
    policy.network = std::min(network, server.network);
    for (const Limit &limit : Limits)
        policy.*limit.field = tighter(this->*limit.field, server.*limit.field);
    policy.image = !image.isEmpty() && server.allowsImage(image) ? image : server.image;
    return policy;
}

} // namespace AgentDeck
