#pragma once

#include <QLoggingCategory>

namespace AgentDeck {
Q_DECLARE_LOGGING_CATEGORY(lcServer)
Q_DECLARE_LOGGING_CATEGORY(lcHttp)
Q_DECLARE_LOGGING_CATEGORY(lcStreams)
Q_DECLARE_LOGGING_CATEGORY(lcStorage)
Q_DECLARE_LOGGING_CATEGORY(lcExecution)
Q_DECLARE_LOGGING_CATEGORY(lcRuntime)
} // namespace AgentDeck
