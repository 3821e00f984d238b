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
    // Only the last MaxPieceBytes are kept, from the start of a line where one starts in them:
    // a command printing 100 MB between two pieces costs that much memory, not 100 MB.
    if (const qsizetype over = m_held.size() + printed.size() - MaxPieceBytes; over > 0) {
        const qsizetype fromHeld = std::min(over, m_held.size());
        m_held.remove(0, fromHeld);
        printed = printed.sliced(over - fromHeld);
        m_held.append(printed);
        qsizetype lineStart = m_held.indexOf('\n') + 1;
        if (lineStart == 0 || lineStart == m_held.size())
            lineStart = 0;
        // Not inside a character (10xxxxxx continues one).
        while (lineStart < m_held.size() && (uchar(m_held[lineStart]) & 0xC0) == 0x80)
            ++lineStart;
        m_held.remove(0, lineStart);
        m_skipped += over + lineStart;
    } else {
        m_held.append(printed);
    }
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
    QString piece = QString::fromUtf8(m_held.first(end));
    m_held.remove(0, end);
    if (m_skipped > 0) {
        piece.prepend(QStringLiteral("[… %1 bytes more were printed meanwhile]\n").arg(m_skipped));
        m_skipped = 0;
    }
    m_sinceSent.start();
    // A piece due later went now (add() came late, on a busy loop): the next waits an interval.
    m_later.stop();
    m_send(piece);
}

CommandOutputSink::CommandOutputSink(const QMap<QString, QString> &secrets,
                                     std::function<void(const QString &piece)> live)
    : m_masker(secrets)
{
    if (live)
        m_live = std::make_unique<LiveOutput>(std::move(live));
}

QByteArrayView CommandOutputSink::add(QByteArrayView printed)
{
    m_masked = m_masker.add(printed);
    if (m_live)
        m_live->add(m_masked);
    return m_collector.add(m_masked);
}

QByteArrayView CommandOutputSink::finish()
{
    m_live.reset();
    m_masked = m_masker.finish();
    return m_collector.add(m_masked);
}

} // namespace AgentDeck
