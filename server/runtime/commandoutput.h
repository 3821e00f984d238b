#pragma once

#include "conversationsecrets.h"

#include <QByteArray>
#include <QByteArrayView>
#include <QElapsedTimer>
#include <QMap>
#include <QString>
#include <QTimer>

#include <chrono>
#include <functional>
#include <memory>

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
// write. A line is held back until it ends unless it grows past MaxHeldBytes. It is fed
// output whose secrets are masked already (CommandOutputSink): a piece may cut anywhere. A piece
// carries at most the last MaxPieceBytes printed since the one before, after a line saying how much
// was skipped: what is live is the command's latest output, whatever it printed in all (the result
// keeps the first MaxCommandOutputBytes). What is held when the command ends is the result's to
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

// A command's output as it comes, its secrets masked before anything else sees it: then kept
// for the result (OutputCollector) and passed on live (LiveOutput, when `live` is set). Masked
// after them, a value cut by the result's limit, by the live window or between two pieces
// showed all of it but a character. The in-server runtime and the sandbox host both use it.
class CommandOutputSink
{
public:
    CommandOutputSink(const QMap<QString, QString> &secrets,
                      std::function<void(const QString &piece)> live);
    // What the command printed next; returns what the result keeps of it, masked (a view that
    // holds until the next call).
    QByteArrayView add(QByteArrayView printed);
    // The command ended: what was held back as the possible start of a value is none, and goes
    // to the result (the live output ends; what it holds is the result's to carry). Returns
    // what the result keeps of it, as add() does.
    QByteArrayView finish();
    const QByteArray &kept() const { return m_collector.kept(); }
    QString result(bool timedOut) const { return m_collector.result(timedOut); }

private:
    SecretMasker m_masker;
    OutputCollector m_collector;
    std::unique_ptr<LiveOutput> m_live;
    QByteArray m_masked; // what add() returns a view into
};

} // namespace AgentDeck
