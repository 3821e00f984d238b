#include "wirebytes.h"

#include "wiretypes.h"

#include <QJsonArray>
#include <QJsonObject>

#include <chrono>
#include <cstdio>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// A time as the wire writes it, "YYYY-MM-DDTHH:MM:SS.mmmZ" in UTC. Formatted by hand: it runs
// for every time field of every answer and every event, and QDateTime's formatting costs
// microseconds a call.
class WireTime
{
public:
    explicit WireTime(qint64 msecsSinceEpoch)
    {
        using namespace std::chrono;
        const sys_time<milliseconds> time{milliseconds(msecsSinceEpoch)};
        const sys_days day = floor<days>(time);
        const year_month_day date{day};
        const int year = int(date.year());
        if (year < 0 || year > 9999) { // as QDateTime has it
            const QDateTime far = QDateTime::fromMSecsSinceEpoch(msecsSinceEpoch, Qt::UTC);
            const QDate farDate = far.date();
            const QTime farClock = far.time();
            m_length =
                std::snprintf(m_text, sizeof m_text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                              farDate.year(), farDate.month(), farDate.day(), farClock.hour(),
                              farClock.minute(), farClock.second(), farClock.msec());
            return;
        }
        const hh_mm_ss clock{time - day};
        char *at = m_text;
        const auto put = [&at](int value, int digits, char after) {
            for (int i = digits - 1; i >= 0; --i, value /= 10)
                at[i] = char('0' + value % 10);
            at += digits;
            if (after)
                *at++ = after;
        };
        put(year, 4, '-');
        put(int(unsigned(date.month())), 2, '-');
        put(int(unsigned(date.day())), 2, 'T');
        put(int(clock.hours().count()), 2, ':');
        put(int(clock.minutes().count()), 2, ':');
        put(int(clock.seconds().count()), 2, '.');
        put(int(clock.subseconds().count()), 3, 'Z');
        m_length = int(at - m_text);
    }
    QLatin1StringView view() const { return QLatin1StringView(m_text, m_length); }

private:
    char m_text[40];
    int m_length = 0;
};

// The letter after the backslash of a character JSON escapes in short; 0 when it has none.
char shortEscape(char16_t unit)
{
    switch (unit) {
    case '"':
    case '\\':
        return char(unit);
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    case '\t':
        return 't';
    case '\b':
        return 'b';
    case '\f':
        return 'f';
    default:
        return 0;
    }
}

} // namespace

QString toWireTime(const QDateTime &time)
{
    return toWireTime(time.toMSecsSinceEpoch());
}

QString toWireTime(qint64 msecsSinceEpoch)
{
    WireTime text(msecsSinceEpoch);
    return QString::fromLatin1(text.view());
}

// Writes `text` as a JSON string, as QJsonDocument does: UTF-8, with quotes, backslashes and
// control characters escaped, and a surrogate without its pair written as a \u escape (UTF-8
// has no form for it; QString::toUtf8() would turn it into '?').
void appendJsonString(QByteArray &out, QStringView text)
{
    // Room for the text as UTF-8 (at most three bytes a unit) and the quotes; an escape needs
    // up to six, and more room is made when the rest might not fit.
    qsizetype used = out.size();
    out.resize(used + text.size() * 3 + 2);
    char *at = out.data() + used;
    const auto ensure = [&](qsizetype unitsLeft) {
        used = at - out.constData();
        if (out.size() - used >= unitsLeft * 3 + 8)
            return;
        out.resize(used + unitsLeft * 6 + 8);
        at = out.data() + used;
    };
    static constexpr char Hex[] = "0123456789abcdef";
    const auto escapeUnit = [&at](char16_t unit) {
        *at++ = '\\';
        *at++ = 'u';
        for (int shift = 12; shift >= 0; shift -= 4)
            *at++ = Hex[(unit >> shift) & 0xf];
    };
    *at++ = '"';
    const char16_t *units = text.utf16();
    for (qsizetype i = 0; i < text.size(); ++i) {
        const char16_t unit = units[i];
        if (unit >= 0x20 && unit < 0x80 && unit != '"' && unit != '\\') {
            *at++ = char(unit);
        } else if (unit < 0x80) {
            ensure(text.size() - i);
            if (const char letter = shortEscape(unit)) {
                *at++ = '\\';
                *at++ = letter;
            } else {
                escapeUnit(unit);
            }
        } else if (unit < 0x800) {
            *at++ = char(0xc0 | (unit >> 6));
            *at++ = char(0x80 | (unit & 0x3f));
        } else if (!QChar::isSurrogate(unit)) {
            *at++ = char(0xe0 | (unit >> 12));
            *at++ = char(0x80 | ((unit >> 6) & 0x3f));
            *at++ = char(0x80 | (unit & 0x3f));
        } else if (QChar::isHighSurrogate(unit) && i + 1 < text.size() &&
                   QChar::isLowSurrogate(units[i + 1])) {
            const char32_t point = QChar::surrogateToUcs4(unit, units[++i]);
            *at++ = char(0xf0 | (point >> 18));
            *at++ = char(0x80 | ((point >> 12) & 0x3f));
            *at++ = char(0x80 | ((point >> 6) & 0x3f));
            *at++ = char(0x80 | (point & 0x3f));
        } else {
            ensure(text.size() - i);
            escapeUnit(unit);
        }
    }
    *at++ = '"';
    out.resize(at - out.constData());
}

void appendWireTime(QByteArray &out, qint64 msecsSinceEpoch)
{
    const WireTime text(msecsSinceEpoch);
    out += '"';
    out += text.view();
    out += '"';
}

void appendWireTime(QByteArray &out, const QDateTime &time)
{
    appendWireTime(out, time.toMSecsSinceEpoch());
}

// The members of `object` in its (sorted) order, without the braces.
void appendJsonMembers(QByteArray &out, const QJsonObject &object)
{
    for (auto it = object.constBegin(); it != object.constEnd(); ++it) {
        if (it != object.constBegin())
            out += ',';
        appendJsonString(out, it.key());
        out += ':';
        appendJsonValue(out, it.value());
    }
}

// Compact JSON, as QJsonDocument::toJson(Compact) writes it but without building a document:
// an integer as an integer, other numbers in their shortest form, non-finite ones as null.
void appendJsonValue(QByteArray &out, const QJsonValue &value)
{
    switch (value.type()) {
    case QJsonValue::Null:
    case QJsonValue::Undefined:
        out += "null";
        break;
    case QJsonValue::Bool:
        out += value.toBool() ? "true" : "false";
        break;
    case QJsonValue::Double: {
        const double number = value.toDouble();
        if (const qint64 integer = value.toInteger(); double(integer) == number)
            out += QByteArray::number(integer); // exact, also past 2^53
        else if (std::isfinite(number))
            out += QByteArray::number(number, 'g', QLocale::FloatingPointShortest);
        else
            out += "null";
        break;
    }
    case QJsonValue::String:
        appendJsonString(out, value.toString());
        break;
    case QJsonValue::Array: {
        out += '[';
        const QJsonArray array = value.toArray();
        for (qsizetype i = 0; i < array.size(); ++i) {
            if (i > 0)
                out += ',';
            appendJsonValue(out, array.at(i));
        }
        out += ']';
        break;
    }
    case QJsonValue::Object:
        out += '{';
        appendJsonMembers(out, value.toObject());
        out += '}';
        break;
    }
}

void appendOptionalTime(QByteArray &out, const std::optional<QDateTime> &time)
{
    if (time)
        appendWireTime(out, *time);
    else
        out += "null";
}

} // namespace AgentDeck
