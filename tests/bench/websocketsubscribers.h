#pragma once

#include "httpconnection.h"

#include <QByteArray>
#include <QStringList>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace AgentDeck::Bench {

// Raw RFC 6455 clients that only read: the handshake, then unmasked server frames, answering
// pings. They are read by a few threads of their own through epoll, straight into their
// buffers, each subscriber always by the same thread. A hundred subscribers on a Qt event loop cost
// the bench more than half a core (a poll() over every socket on each wake-up, FIONREAD before each
// read, a signal per read) on a machine the server shares: the latency measured must be the
// server's, not the bench's.
class WebSocketSubscribers
{
public:
    // Called in a reading thread for every complete text message, with the time its bytes
    // were read.
    using MessageHandler =
        std::function<void(int subscriber, QByteArrayView payload, qint64 receivedNs)>;

    WebSocketSubscribers(Endpoint endpoint, QByteArray path, int count, int threads,
                         MessageHandler handler);
    ~WebSocketSubscribers();

    WebSocketSubscribers(const WebSocketSubscribers &) = delete;
    WebSocketSubscribers &operator=(const WebSocketSubscribers &) = delete;

    // Connects every subscriber and starts the reading threads; false (with error()) when a
    // connection cannot be made. Upgrades complete in the thread: see openCount().
    bool open();
    QString error() const { return m_error; }

    // Subscribers upgraded and not closed since; safe from any thread.
    int openCount() const { return m_openCount.load(std::memory_order_relaxed); }

    // Ends the threads; the handler is not called afterwards.
    void stop();
    // Why subscribers closed before stop(), one line each.
    QStringList closeReasons() const;

private:
    struct Subscriber;
    struct Reader
    {
        int epoll = -1;
        std::thread thread;
    };

    void run(int epoll);
    void readFrom(Subscriber &subscriber);
    bool readHandshake(Subscriber &subscriber);
    void readFrames(Subscriber &subscriber, qint64 receivedNs);
    void markClosed(Subscriber &subscriber, const QString &reason);

    Endpoint m_endpoint;
    QByteArray m_path;
    int m_count;
    MessageHandler m_handler;
    std::vector<std::unique_ptr<Subscriber>> m_subscribers;
    std::vector<Reader> m_readers;
    int m_wakeUp = -1; // eventfd that ends the threads
    std::atomic<int> m_openCount{0};
    mutable std::mutex m_reasonsMutex;
    QStringList m_closeReasons;
    QString m_error;
};

} // namespace AgentDeck::Bench
