#pragma once

#include <QByteArray>
#include <QByteArrayView>
#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>

#include <optional>

namespace AgentDeck {

// A conversation's secrets (POST /api/conversations/{id}/secrets): environment variables its
// commands get, by name. Kept in the memory of the server that was given them, never stored,
// never answered, and masked out of what commands print (maskSecrets()).
struct ConversationSecrets
{
    QMap<QString, QString> values;

    // At most this much of names and values together, per conversation: they go into the
    // environment of every command, which Linux bounds with the command line (128 KiB a string).
    static constexpr qsizetype MaxBytes = 64 * 1024;

    // OpenHands' UpdateSecretsRequest: {"secrets": {NAME: "value" | {"kind": "StaticSecret",
    // "value": "value"}}}. A name is an environment variable's ([A-Za-z_][A-Za-z0-9_]*), not one
    // the sandbox sets itself (PATH, HOME); a value has no NUL. A LookupSecret (a URL the server
    // would fetch) is refused. The first problem goes into *error.
    static std::optional<ConversationSecrets> fromRequest(const QJsonObject &body, QString *error);

    // These, then `later` over them; nullopt (and *error) when the whole is past MaxBytes.
    std::optional<ConversationSecrets> merged(const ConversationSecrets &later,
                                              QString *error) const;
};

// What a masked value becomes, as OpenHands writes it.
inline constexpr QLatin1StringView HiddenSecret("<secret-hidden>");

// `text` with every value of `secrets` three characters or longer replaced by HiddenSecret,
// the longest first (a value inside another is not left half shown). Shorter values are as
// common as the characters around them: hiding each "1" would hide every number.
QString maskSecrets(QString text, const QMap<QString, QString> &secrets);
QByteArray maskSecrets(QByteArray bytes, const QMap<QString, QString> &secrets);

// maskSecrets() over output that comes in pieces, as a command prints it: a value split between
// two pieces is masked all the same. The end of a piece that could still begin a value is held
// back until the next piece says whether it does, or finish() says that none comes. Whatever
// cuts the output afterwards (a limit, a window) cuts masked text and shows no part of a value.
class SecretMasker
{
public:
    explicit SecretMasker(const QMap<QString, QString> &secrets = {});
    // `piece` masked, without what it ends with that could begin a value.
    QByteArray add(QByteArrayView piece);
    // What was held back: the output ended, so it is no value.
    QByteArray finish();
    qsizetype heldBytes() const { return m_held.size(); }

private:
    struct Value
    {
        QByteArray bytes;
        // border[i]: the longest proper prefix of bytes[0..i] that is also its suffix (KMP).
        QList<qsizetype> border;
    };
    QList<Value> m_values; // the longest first
    QByteArray m_held;
};

} // namespace AgentDeck
