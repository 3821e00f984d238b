#include "consolesettings.h"

#include <QSettings>

using namespace Qt::StringLiterals;

namespace AgentDeck {

std::unique_ptr<QSettings> consoleSettings()
{
    return std::make_unique<QSettings>(u"agentdeck"_s, u"console"_s);
}

} // namespace AgentDeck
