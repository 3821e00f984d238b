#include "requestpath.h"

#include <QByteArray>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
RequestPath refused(const QString &why)
{
    return {QString(), why};
}

bool isHexDigit(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool isDotSegment(QByteArrayView segment)
{
    return segment == "." || segment == "..";
}

// A segment with escapes, decoded; empty (with `fault` set) when it may not be.
QByteArray decodeSegment(QByteArrayView segment, QString *fault)
{
    for (qsizetype at = segment.indexOf('%'); at >= 0; at = segment.indexOf('%', at + 1)) {
        if (at + 2 >= segment.size() || !isHexDigit(segment[at + 1]) ||
            !isHexDigit(segment[at + 2])) {
            *fault = u"a malformed percent-escape"_s;
            return {};
        }
    }
    const QByteArray decoded = QByteArray::fromPercentEncoding(segment.toByteArray());
    if (decoded.contains('/')) {
        *fault = u"an encoded / inside a segment"_s;
    } else if (isDotSegment(decoded)) {
        *fault = u"an encoded dot segment"_s;
    } else if (std::any_of(decoded.begin(), decoded.end(), [](char c) {
                   return static_cast<unsigned char>(c) < ' ' || c == 0x7f;
               })) {
        *fault = u"an encoded control character"_s;
    } else if (QString::fromUtf8(decoded).toUtf8() != decoded) {
        *fault = u"an escape that is not UTF-8"_s;
    }
    return fault->isEmpty() ? decoded : QByteArray();
}
} // namespace

ApiError pathRefusal(const QString &fault)
{
    return {400, u"non_canonical_path"_s,
            u"The request path has %1; send it in its plain form (without //, /./, /../, an "
            "encoded / or an encoded dot segment)"_s.arg(fault)};
}

RequestPath decodeRequestPath(QByteArrayView target)
{
    if (!target.startsWith('/'))
        return refused(u"the path does not begin with /"_s);
    if (target.size() > 1 && target.endsWith('/'))
        target.chop(1);
    if (target.size() == 1)
        return {u"/"_s, {}};
    // One look at each segment. Nearly every path has no escape and is taken as it came; from
    // the first segment with one on, the path is decoded segment by segment.
    QByteArray decoded;
    bool escaped = false;
    for (qsizetype start = 1; start <= target.size();) {
        qsizetype end = target.indexOf('/', start);
        if (end < 0)
            end = target.size();
        const QByteArrayView segment = target.sliced(start, end - start);
        if (segment.isEmpty())
            return refused(u"an empty segment (//)"_s);
        if (isDotSegment(segment))
            return refused(u"a dot segment (/./ or /../)"_s);
        if (!escaped && segment.contains('%')) {
            escaped = true;
            decoded = target.first(start).toByteArray();
        }
        if (escaped) {
            QString fault;
            decoded += decodeSegment(segment, &fault);
            if (!fault.isEmpty())
                return refused(fault);
            if (end < target.size())
                decoded += '/';
        }
        start = end + 1;
    }
    return {QString::fromUtf8(escaped ? QByteArrayView(decoded) : target), {}};
}

} // namespace AgentDeck
