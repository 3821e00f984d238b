#include "logging.h"

namespace AgentDeck {
Q_LOGGING_CATEGORY(lcServer, "agentdeck.server", QtInfoMsg)
Q_LOGGING_CATEGORY(lcHttp, "agentdeck.http", QtInfoMsg)
Q_LOGGING_CATEGORY(lcStreams, "agentdeck.streams", QtInfoMsg)
Q_LOGGING_CATEGORY(lcStorage, "agentdeck.storage", QtInfoMsg)
Q_LOGGING_CATEGORY(lcExecution, "agentdeck.execution", QtInfoMsg)
Q_LOGGING_CATEGORY(lcRuntime, "agentdeck.runtime", QtInfoMsg)
} // namespace AgentDeck
