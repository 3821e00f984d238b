#pragma once

#include <QJsonObject>
#include <QString>

#include <optional>

namespace AgentDeck {

// What a conversation's commands may use: the network and a few kernel-enforced limits. The
// server has one (its --sandbox-* options: the defaults, and the most a conversation may have);
// a conversation's own `sandbox` object may only tighten it. 0 is "no limit" throughout.
struct SandboxPolicy
{
    // From the tightest to the loosest: no network at all, the internet without the host's
    // loopback (user-mode networking), the host's network as it is.
    enum class Network
    {
        None,
        Egress,
        Host
    };

    Network network = Network::None;
    qint64 memoryBytes = 0;   // address space of each process of a command
    qint64 processes = 0;     // processes and threads at once
    qint64 cpuSeconds = 0;    // CPU time of each process of a command
    qint64 fileSizeBytes = 0; // the largest file a command may write
    // The container image of `--runtime docker`. A server's: the default (--sandbox-image); a
    // conversation's: its own choice, one the server allows (empty: the server's).
    QString image;
    // A server's only: the images a conversation may name besides the default
    // (--sandbox-images: patterns with * and ?).
    QStringList imagePatterns;

    // {"network": ..., "memory_bytes": ..., "processes": ..., "cpu_seconds": ...,
    //  "file_size_bytes": ...}: every field, 0 where there is no limit; and "image" when one is
    // set.
    QJsonObject toJson() const;
    // A stored or shown policy; what is missing or unreadable is "no limit".
    static SandboxPolicy fromJson(const QJsonObject &object);

    // A create body's `sandbox` object, checked against `server`: a field looser than the
    // server's (a wider network, a higher limit, no limit where the server has one) is refused,
    // naming it in *error; a field not given is the server's.
    static std::optional<SandboxPolicy> fromRequest(const QJsonObject &object,
                                                    const SandboxPolicy &server, QString *error);

    // The tighter of the two, field by field: what a conversation gets of the server's policy
    // (its image, while the server still allows it).
    SandboxPolicy within(const SandboxPolicy &server) const;
    // A server's: whether a conversation may run in `image`.
    bool allowsImage(const QString &image) const;

    // The memory file systems of a command's sandbox, /tmp and /dev/shm (one each per
    // command), hold at most this much together: memory no rlimit counts, so the memory limit
    // bounds it, or UnlimitedTmpfsBytes where there is none. /dev/shm has a quarter of it,
    // /tmp the rest.
    static constexpr qint64 UnlimitedTmpfsBytes = qint64(1) << 30;
    qint64 tmpfsBytes() const { return memoryBytes > 0 ? memoryBytes : UnlimitedTmpfsBytes; }
    qint64 shmBytes() const { return tmpfsBytes() / 4; }
    qint64 tmpBytes() const { return tmpfsBytes() - shmBytes(); }

    bool isEmpty() const { return *this == SandboxPolicy{}; }
    friend bool operator==(const SandboxPolicy &, const SandboxPolicy &) = default;
};

// What a conversation gets: its own policy (none: the server's) within the server's.
inline SandboxPolicy policyInForce(const std::optional<SandboxPolicy> &own,
                                   const SandboxPolicy &server)
{
    return own.value_or(server).within(server);
}

QString toString(SandboxPolicy::Network network);
std::optional<SandboxPolicy::Network> sandboxNetworkFromString(QStringView text);

} // namespace AgentDeck
