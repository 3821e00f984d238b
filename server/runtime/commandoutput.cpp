#include "commandoutput.h"

#include <algorithm>

namespace AgentDeck {

QString commandOutput(QByteArray output, bool timedOut)
{
    if (output.size() > MaxCommandOutputBytes) {
        qsizetype end = MaxCommandOutputBytes;
        // The first byte left out may continue a character begun before it (10xxxxxx); that
        // character goes too, so that the output does not end in a replacement character.
        for (int back = 0; back < 3 && end > 0 && (uchar(output[end]) & 0xC0) == 0x80; ++back)
            --end;
        output.truncate(end);
        output += "\n[output truncated]\n";
    }
    if (timedOut)
        output += "\n[command timed out]\n";
    return QString::fromUtf8(output);
}

QByteArrayView OutputCollector::add(QByteArrayView chunk)
{
    const qsizetype room = std::max<qsizetype>(0, MaxCommandOutputBytes + 1 - m_kept.size());
    const QByteArrayView kept = chunk.first(std::min(room, chunk.size()));
    m_kept.append(kept);
    return kept;
}

} // namespace AgentDeck
