#include "conversationsecrets.h"

#include <QRegularExpression>

#include <algorithm>
#include <utility>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

qsizetype sizeOf(const QMap<QString, QString> &values)
{
    qsizetype bytes = 0;
    for (auto it = values.cbegin(); it != values.cend(); ++it)
        bytes += it.key().toUtf8().size() + it.value().toUtf8().size() + 2; // "=" and NUL
    return bytes;
}

// The values to hide, longest first.
QStringList hidden(const QMap<QString, QString> &secrets)
{
    QStringList values;
    for (const QString &value : secrets) {
        if (value.size() >= 3)
            values.append(value);
    }
    std::sort(values.begin(), values.end(),
              [](const QString &a, const QString &b) { return a.size() > b.size(); });
    return values;
}

} // namespace

std::optional<ConversationSecrets> ConversationSecrets::fromRequest(const QJsonObject &body,
                                                                    QString *error)
{
    const auto fail = [error](const QString &sentence) {
        *error = sentence;
        return std::nullopt;
    };
    const QJsonValue given = body.value(u"secrets"_s);
    if (!given.isObject())
        return fail(u"secrets must be an object of names and values"_s);
    static const QRegularExpression name(u"\\A[A-Za-z_][A-Za-z0-9_]{0,254}\\z"_s);
    ConversationSecrets secrets;
    const QJsonObject object = given.toObject();
    for (auto it = object.constBegin(); it != object.constEnd(); ++it) {
        const QString &key = it.key();
        if (!name.match(key).hasMatch())
            return fail(u"secrets: \"%1\" is not the name of an environment variable (letters, "
                        "digits and _, not starting with a digit)"_s.arg(key.left(64)));
        if (key == u"PATH"_s || key == u"HOME"_s)
            return fail(u"secrets: %1 is set by the sandbox"_s.arg(key));
        QJsonValue value = it.value();
        if (value.isObject()) {
            const QJsonObject secret = value.toObject();
            const QString kind = secret.value(u"kind"_s).toString();
            if (kind == u"LookupSecret"_s)
                return fail(u"secrets.%1: a LookupSecret is not offered: this server fetches no "
                            "secrets; send the value (a StaticSecret)"_s.arg(key));
            if (!kind.isEmpty() && kind != u"StaticSecret"_s)
                return fail(u"secrets.%1: kind must be StaticSecret"_s.arg(key));
            value = secret.value(u"value"_s);
        }
        if (!value.isString())
            return fail(
                u"secrets.%1 must be a string, or an object with a string value"_s.arg(key));
        if (value.toString().contains(QChar(0)))
            return fail(u"secrets.%1 cannot hold a NUL"_s.arg(key));
        secrets.values.insert(key, value.toString());
    }
    if (sizeOf(secrets.values) > MaxBytes)
        return fail(u"secrets come to more than %1 bytes"_s.arg(MaxBytes));
    return secrets;
}

std::optional<ConversationSecrets> ConversationSecrets::merged(const ConversationSecrets &later,
                                                               QString *error) const
{
    ConversationSecrets whole = *this;
    whole.values.insert(later.values);
    if (sizeOf(whole.values) > MaxBytes) {
        *error = u"the conversation's secrets would come to more than %1 bytes"_s.arg(MaxBytes);
        return std::nullopt;
    }
    return whole;
}

QString maskSecrets(QString text, const QMap<QString, QString> &secrets)
{
    for (const QString &value : hidden(secrets))
        text.replace(value, HiddenSecret);
    return text;
}

QByteArray maskSecrets(QByteArray bytes, const QMap<QString, QString> &secrets)
{
    for (const QString &value : hidden(secrets))
        bytes.replace(value.toUtf8(), QByteArrayView(HiddenSecret.data(), HiddenSecret.size()));
    return bytes;
}

SecretMasker::SecretMasker(const QMap<QString, QString> &secrets)
{
    for (const QString &text : hidden(secrets)) {
        Value value{text.toUtf8(), {}};
        const QByteArray &bytes = value.bytes;
        value.border.resize(bytes.size(), 0);
        for (qsizetype i = 1, k = 0; i < bytes.size(); ++i) {
            while (k > 0 && bytes[i] != bytes[k])
                k = value.border[k - 1];
            if (bytes[i] == bytes[k])
                ++k;
            value.border[i] = k;
        }
        m_values.append(std::move(value));
    }
}

QByteArray SecretMasker::add(QByteArrayView piece)
{
    if (m_values.isEmpty())
        return piece.toByteArray();
    QByteArray text = std::exchange(m_held, {}) + piece;
    // Held back: the longest end of `text` that begins a value (only its last length - 1 bytes
    // can), found before anything is masked: a shorter value inside a longer one, masked
    // first, hid what the longer one needed to be recognised, and the rest of it showed.
    qsizetype cut = text.size();
    for (const Value &value : std::as_const(m_values)) {
        const QByteArray &bytes = value.bytes;
        qsizetype k = 0;
        for (qsizetype i = std::max<qsizetype>(0, text.size() - bytes.size() + 1); i < text.size();
             ++i) {
            while (k > 0 && text[i] != bytes[k])
                k = value.border[k - 1];
            if (text[i] == bytes[k])
                ++k;
        }
        cut = std::min(cut, text.size() - k);
    }
    // Nor is a value that the cut would split: it goes whole, with what follows it.
    for (bool moved = true; moved;) {
        moved = false;
        for (const Value &value : std::as_const(m_values)) {
            const qsizetype length = value.bytes.size();
            for (qsizetype at = text.indexOf(value.bytes, std::max<qsizetype>(0, cut - length + 1));
                 at >= 0 && at < cut; at = text.indexOf(value.bytes, at + 1)) {
                if (at + length > cut) {
                    cut = at;
                    moved = true;
                    break;
                }
            }
        }
    }
    m_held = text.sliced(cut);
    text.truncate(cut);
    for (const Value &value : std::as_const(m_values))
        text.replace(value.bytes, QByteArrayView(HiddenSecret.data(), HiddenSecret.size()));
    return text;
}

QByteArray SecretMasker::finish()
{
    QByteArray text = std::exchange(m_held, {});
    for (const Value &value : std::as_const(m_values))
        text.replace(value.bytes, QByteArrayView(HiddenSecret.data(), HiddenSecret.size()));
    return text;
}
} // namespace AgentDeck
