#pragma once

#include <QByteArray>
#include <QByteArrayView>
#include <QElapsedTimer>
#include <QString>
#include <QTimer>

#include <chrono>
#include <functional>

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

// Passes a command's output on while it runs (CommandRequest::onOutput), in pieces of whole
// lines: at once when the last piece went Interval ago or longer, else once that much has
// passed, so that a command printing without pause costs a piece per interval, not one per
// write. A line is held back until it ends (secrets are masked within a piece: a value cut in
// two would show its halves) unless it grows past MaxHeldBytes. A piece carries at most the
// last MaxPieceBytes printed since the one before, after a line saying how much was skipped:
// what is live is the command's latest output, whatever it printed in all (the result keeps
// the first MaxCommandOutputBytes). What is held when the command ends is the result's to
// carry, not a piece's.
class LiveOutput
{
public:
    static constexpr std::chrono::milliseconds Interval{250};
    static constexpr qsizetype MaxHeldBytes = 4096;
    static constexpr qsizetype MaxPieceBytes = 64 * 1024;

    explicit LiveOutput(std::function<void(const QString &piece)> send);
    LiveOutput(const LiveOutput &) = delete;
    LiveOutput &operator=(const LiveOutput &) = delete;
    // What the command printed next: all of it, not only what OutputCollector keeps.
    void add(QByteArrayView printed);

private:
    void sendWholeLines();

    std::function<void(const QString &)> m_send;
    QByteArray m_held;
    qint64 m_skipped = 0; // bytes dropped from the front of m_held since the last piece
    QElapsedTimer m_sinceSent;
    QTimer m_later;
};

} // namespace AgentDeck
