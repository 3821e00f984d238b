#include "embeddedserver.h"

#include "agentdeckserver.h"

#include <QCoroTask>
#include <QMetaObject>
#include <QSemaphore>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EmbeddedServer::EmbeddedServer(ServerConfig config, QObject *parent)
    : QObject(parent)
    , m_config(std::move(config))
{
    m_thread.setObjectName(u"agentdeck-server"_s);
}

EmbeddedServer::~EmbeddedServer()
{
    stop();
}

QUrl EmbeddedServer::start(QString *error)
{
    m_thread.start();
    // A context object living in the server thread, so the call below runs there.
    QObject context;
    context.moveToThread(&m_thread);
    QUrl url;
    QSemaphore done;
    QMetaObject::invokeMethod(
        &context,
        [&] {
            // Created in the server thread, so its sockets and timers live there.
            m_server = new AgentDeckServer(m_config);
            connect(m_server, &AgentDeckServer::cannotGoOn, this, &EmbeddedServer::cannotGoOn);
            if (!m_server->start(error)) {
                delete m_server;
                m_server = nullptr;
                done.release();
                return;
            }
            url = m_server->url();
            if (m_server->isReady()) {
                done.release();
                return;
            }
            QObject::connect(
                m_server, &AgentDeckServer::ready, m_server, [&done] { done.release(); },
                Qt::SingleShotConnection);
        },
        Qt::QueuedConnection);
    done.acquire();
    if (!m_server) {
        m_thread.quit();
        m_thread.wait();
        return {};
    }
    return url;
}

void EmbeddedServer::stop()
{
    if (!m_thread.isRunning())
        return;
    if (m_server) {
        QSemaphore done;
        QMetaObject::invokeMethod(
            m_server,
            [this, &done] {
                QCoro::connect(m_server->stop(), m_server, [this, &done] {
                    delete m_server;
                    m_server = nullptr;
                    done.release();
                });
            },
            Qt::QueuedConnection);
        done.acquire();
    }
    m_thread.quit();
    m_thread.wait();
}

} // namespace AgentDeck
