#pragma once

#include <QByteArray>
#include <QByteArrayView>
#include <QString>

namespace AgentDeck {

// What an observation carries of a command's output: at most this many bytes of it, cut before
// a character rather than inside one, with a line that says so; and a line for a command that
// ran out of time. The in-server runtime and the sandbox host both use it.
inline constexpr qsizetype MaxCommandOutputBytes = 1024 * 1024;
QString commandOutput(QByteArray output, bool timedOut);

// Collects a command's output while it runs. It keeps what commandOutput() uses: the first
// MaxCommandOutputBytes, and one byte more, which says that there was more. The rest is read
// only to be dropped, so a command that prints without end costs no memory.
class OutputCollector
{
public:
    // Keeps what still fits of `chunk`; returns that part (a view into `chunk`).
    QByteArrayView add(QByteArrayView chunk);
    const QByteArray &kept() const { return m_kept; }
    QString result(bool timedOut) const { return commandOutput(m_kept, timedOut); }

private:
    QByteArray m_kept;
};

} // namespace AgentDeck
