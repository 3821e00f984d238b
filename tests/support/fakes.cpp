#include "fakes.h"

#include "signalwait.h"

#include <QTcpSocket>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {
class FakeRuntime final : public Runtime
{
public:
    explicit FakeRuntime(FakeRuntimeControl &control)
        : m_control(control)
    {}

    QCoro::Task<CommandResult> execute(CommandRequest request) override
    {
        m_control.commands.append(request.command);
        Q_EMIT m_control.commandStarted(request.command);
        if (m_control.blocking.contains(request.command)) {
            m_interrupted = false;
            m_inFlight = true;
            const int releasedBefore = m_control.releasedTimes;
            while (m_control.releasedTimes == releasedBefore) {
                auto waiting = signalOrTimeout(&m_control, &FakeRuntimeControl::released,
                                               std::chrono::seconds(1));
                co_await std::move(waiting);
            }
            m_inFlight = false;
            if (m_interrupted)
                co_return CommandResult{u"partial output\n"_s, -1, true};
        }
        co_return m_control.results.value(request.command,
                                          CommandResult{u"ran: "_s + request.command, 0, false});
    }

    void interrupt() override
    {
        if (!m_inFlight)
            return;
        m_interrupted = true;
        Q_EMIT m_control.interrupted();
        m_control.release();
    }

private:
    FakeRuntimeControl &m_control;
    bool m_inFlight = false;
    bool m_interrupted = false;
};
} // namespace

QCoro::Task<RuntimeAcquisition> FakeRuntimeProvider::acquire(ConversationInfo conversation)
{
    ++m_control.acquisitions;
    if (m_control.holdProvisioning) {
        const int provisionedBefore = m_control.provisionedTimes;
        const qsizetype releasesBefore = m_control.releasedIds.size();
        while (m_control.provisionedTimes == provisionedBefore) {
            // A release of the conversation calls the start off, as a sandbox's does.
            if (m_control.releasedIds.indexOf(conversation.id, releasesBefore) >= 0)
                co_return RuntimeAcquisition{
                    nullptr, {u"start_cancelled"_s, u"fake start called off"_s}, true};
            auto provisioning = signalOrTimeout(&m_control, &FakeRuntimeControl::provisioned,
                                                std::chrono::seconds(1));
            co_await std::move(provisioning);
        }
    }
    if (m_control.failProvisioning)
        co_return RuntimeAcquisition{nullptr,
                                     {u"provision_failed"_s, u"fake provisioning failure"_s}};
    co_return RuntimeAcquisition{std::make_shared<FakeRuntime>(m_control), {}};
}

void FakeRuntimeProvider::release(const QUuid &conversationId)
{
    ++m_control.releases;
    m_control.releasedIds.append(conversationId);
    Q_EMIT m_control.provisioned(); // wakes a held start, which then finds itself called off
}

void FakeRuntimeProvider::describe(QList<ConversationInfo> &) const {}

NotAgentDeckServer::NotAgentDeckServer(int status)
    : m_status(status)
{
    listen(QHostAddress::LocalHost);
    connect(this, &QTcpServer::newConnection, this, [this] {
        while (QTcpSocket *socket = nextPendingConnection()) {
            connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
            connect(socket, &QTcpSocket::readyRead, socket, [this, socket] {
                if (!socket->peek(socket->bytesAvailable()).contains("\r\n\r\n"))
                    return; // the head is not all here yet
                const QByteArray head = socket->readAll();
                m_requestLines.append(head.left(head.indexOf("\r\n")));
                const QByteArray page = "<html><body>Please log in</body></html>";
                socket->write("HTTP/1.1 " + QByteArray::number(m_status) +
                              " Whatever\r\nContent-Type: text/html\r\nContent-Length: " +
                              QByteArray::number(page.size()) + "\r\nConnection: close\r\n\r\n" +
                              page);
                socket->disconnectFromHost();
            });
        }
    });
}

QUrl NotAgentDeckServer::url() const
{
    return QUrl(QStringLiteral("http://127.0.0.1:%1").arg(serverPort()));
}

} // namespace AgentDeck::Testing
