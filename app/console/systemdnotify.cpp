#include "systemdnotify.h"

#include <QByteArray>
#include <QString>

#include <systemd/sd-daemon.h>

namespace AgentDeck {

void notifySystemdReady(const QString &status)
{
    // Keep NOTIFY_SOCKET in the environment: STOPPING=1 follows later. Sandbox hosts inherit it
    // but never write to it, and the unit only accepts the main process's messages.
    const QByteArray message = "READY=1\nSTATUS=" + status.toUtf8();
    sd_notify(0, message.constData());
}

void notifySystemdStopping()
{
    sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

} // namespace AgentDeck
