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

LiveOutput::LiveOutput(std::function<void(const QString &piece)> send)
    : m_send(std::move(send))
{
    m_later.setSingleShot(true);
    QObject::connect(&m_later, &QTimer::timeout, [this] { sendWholeLines(); });
}

void LiveOutput::add(QByteArrayView printed)
{
    if (printed.isEmpty())
        return;
    m_held.append(printed);
    const auto since =
        std::chrono::milliseconds(m_sinceSent.isValid() ? m_sinceSent.elapsed() : Interval.count());
    if (since >= Interval)
        sendWholeLines();
    else if (!m_later.isActive())
        m_later.start(Interval - since);
}

void LiveOutput::sendWholeLines()
{
    qsizetype end = m_held.lastIndexOf('\n') + 1;
    if (end == 0 && m_held.size() >= MaxHeldBytes) {
        // Before a character rather than inside one (10xxxxxx continues one).
        end = MaxHeldBytes;
        while (end > 0 && (uchar(m_held[end]) & 0xC0) == 0x80)
            --end;
    }
    if (end == 0)
        return;
    const QString piece = QString::fromUtf8(m_held.first(end));
    m_held.remove(0, end);
    m_sinceSent.start();
    m_send(piece);
}

} // namespace AgentDeck
