#include "commandenvironment.h"

#include <QStringList>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QProcessEnvironment commandEnvironment()
{
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    for (const QString &name : environment.keys()) {
        if (name.startsWith(u"AGENTDECK_"_s) || name == u"NOTIFY_SOCKET"_s ||
            name == u"PGPASSWORD"_s)
            environment.remove(name);
    }
    return environment;
}

} // namespace AgentDeck
