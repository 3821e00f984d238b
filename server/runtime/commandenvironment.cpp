#include "commandenvironment.h"

#include <QStringList>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QProcessEnvironment commandEnvironment()
{
    const QProcessEnvironment server = QProcessEnvironment::systemEnvironment();
    QProcessEnvironment environment;
    for (const QString &name : server.keys()) {
        if (name == u"PATH"_s || name == u"HOME"_s || name == u"LANG"_s || name == u"TERM"_s ||
            name == u"TZ"_s || name.startsWith(u"LC_"_s))
            environment.insert(name, server.value(name));
    }
    if (!environment.contains(u"PATH"_s))
        environment.insert(u"PATH"_s, u"/usr/local/bin:/usr/bin:/bin"_s);
    return environment;
}

} // namespace AgentDeck
