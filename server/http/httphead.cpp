#include "httphead.h"

namespace AgentDeck {

bool headerHasToken(QByteArrayView value, QByteArrayView token)
{
    qsizetype start = 0;
    while (start <= value.size()) {
        qsizetype end = value.indexOf(',', start);
        if (end < 0)
            end = value.size();
        if (value.sliced(start, end - start).trimmed().compare(token, Qt::CaseInsensitive) == 0)
            return true;
        start = end + 1;
    }
    return false;
}

void forEachHeader(QByteArrayView head,
                   const std::function<void(QByteArrayView name, QByteArrayView value)> &visit)
{
    qsizetype lineStart = head.indexOf('\n');
    while (lineStart >= 0 && lineStart + 1 < head.size()) {
        ++lineStart;
        qsizetype lineEnd = head.indexOf('\n', lineStart);
        if (lineEnd < 0)
            lineEnd = head.size();
        const QByteArrayView line = head.sliced(lineStart, lineEnd - lineStart);
        if (const qsizetype colon = line.indexOf(':'); colon > 0)
            visit(line.first(colon).trimmed(), line.sliced(colon + 1).trimmed());
        lineStart = lineEnd < head.size() ? lineEnd : -1;
    }
}

} // namespace AgentDeck
