#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <chrono>
#include <functional>

namespace AgentDeck {

// Room the catalog keeps on the data dir's file system, which workspaces and sandbox homes share
// with it and no quota divides: one sandbox filled it, and every other conversation's writes got
// 503 until it was cleaned. A file of `bytes`, allocated at start, is removed once less than half
// of it is available, so that the catalog's writes go on in its room while whoever filled the
// file system frees space; it is made again once twice as much is available.
class DiskReserve : public QObject
{
    Q_OBJECT
public:
    static constexpr qint64 DefaultBytes = qint64(64) << 20;
    static constexpr std::chrono::milliseconds Interval{500};

    // `available`: the bytes available on the file system of `path` (QStorageInfo's unless
    // given).
    DiskReserve(QString path, qint64 bytes, std::function<qint64()> available = {},
                QObject *parent = nullptr);
    // Looks now, then every Interval.
    void start();
    void check();
    bool isHeld() const { return m_held; }
    qint64 bytes() const { return m_bytes; }

private:
    bool allocate();

    QString m_path;
    qint64 m_bytes;
    std::function<qint64()> m_available;
    QTimer m_timer;
    bool m_held = false;
};

} // namespace AgentDeck
