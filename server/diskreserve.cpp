#include "diskreserve.h"

#include "logging.h"

#include <QFile>
#include <QFileInfo>
#include <QStorageInfo>

#include <fcntl.h>
#include <unistd.h>

namespace AgentDeck {

DiskReserve::DiskReserve(QString path, qint64 bytes, std::function<qint64()> available,
                         QObject *parent)
    : QObject(parent)
    , m_path(std::move(path))
    , m_bytes(bytes)
    , m_available(std::move(available))
{
    if (!m_available) {
        m_available = [path = m_path] {
            QStorageInfo storage(path.section(u'/', 0, -2));
            storage.refresh();
            return storage.isValid() ? storage.bytesAvailable() : qint64(-1);
        };
    }
    connect(&m_timer, &QTimer::timeout, this, &DiskReserve::check);
}

void DiskReserve::start()
{
    // A reserve a previous server left is this one's: counted as available room, not as used.
    m_held = QFileInfo::exists(m_path) && QFileInfo(m_path).size() >= m_bytes;
    check();
    m_timer.start(Interval);
}

void DiskReserve::check()
{
    const qint64 available = m_available();
    if (available < 0)
        return;
    if (m_held && available < m_bytes / 2) {
        QFile::remove(m_path);
        m_held = false;
        qCWarning(lcServer).noquote()
            << QStringLiteral("the data dir's file system is nearly full (%1 bytes available): "
                              "its reserve of %2 bytes is freed for the catalog; free space "
                              "(a workspace's files) so that it is kept again")
                   .arg(available)
                   .arg(m_bytes);
    } else if (!m_held && available >= 2 * m_bytes) {
        m_held = allocate();
    }
}

bool DiskReserve::allocate()
{
    const QByteArray path = QFile::encodeName(m_path);
    const int fd = ::open(path.constData(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    // Blocks of its own, not a hole: freeing it gives them back.
    const bool allocated = ::posix_fallocate(fd, 0, m_bytes) == 0;
    ::close(fd);
    if (!allocated) {
        QFile::remove(m_path);
        qCWarning(lcServer) << "cannot allocate the data dir's reserve" << m_path;
    }
    return allocated;
}

} // namespace AgentDeck
