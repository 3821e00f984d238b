#pragma once

#include <QObject>

#include <deque>
#include <functional>

class QTcpSocket;

namespace AgentDeck {

// The answers an HTTP connection owes, written in the order of its requests. A client may send
// requests without waiting for answers (HTTP/1.1 pipelining), and Qt's server hands over every
// request of a read at once: an answer from an asynchronous handler then came after the answers
// to the requests behind it, and was taken for theirs. A line is a child of its socket, made
// when a request first waits for an asynchronous handler; whatever else writes an answer on that
// connection (ApiServer's immediate answers, the listener's refusals and `100 Continue`) goes
// through writeInTurn().
class AnswerLine : public QObject
{
public:
    // The socket's line, or null when none was made.
    static AnswerLine *of(QTcpSocket *socket);
    // The socket's line, made when needed.
    static AnswerLine &on(QTcpSocket *socket);
    // Runs `write` now when the connection owes nothing, else once what it owes is written.
    static void writeInTurn(QTcpSocket *socket, std::function<void()> write);

    // Whether the connection owes nothing: no answer waits, and none is being streamed.
    bool isEmpty() const { return m_places.empty() && !m_held; }
    // An answer whose body is sent as it is made (HttpResponse::nextPart) holds the line from
    // its head to its last byte: the answers behind it wait for release().
    void hold() { m_held = true; }
    void release();
    // A place at the end of the line for an answer still being made, and its number.
    quint64 join();
    // The answer of `place` is ready: `write` runs once the answers ahead of it are written.
    void fill(quint64 place, std::function<void()> write);

private:
    explicit AnswerLine(QTcpSocket *socket);
    void flush();

    std::deque<std::function<void()>> m_places; // empty: the answer is not ready yet
    quint64 m_front = 0;                        // the number of the place at the front
    bool m_held = false;
};

} // namespace AgentDeck
