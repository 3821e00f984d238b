#pragma once

#include "benchmark.h"

#include <QCoroTask>
#include <QString>

namespace AgentDeck::Bench {

// Figures 6 and 7, the server-wide bounds (issue 32), each on a server of its own.

// 6. `subscribers` WebSocket subscribers that never read and one that reads, on one
// conversation, while 40 messages of 1 MiB are posted over 8 connections at once: how much the
// server grows (its peak VmHWM against its VmRSS before), and whether the reader got every
// event.
QCoro::Task<GoalResult> measureSlowSubscribers(QString binary, QString dataDir, int subscribers);

// 7. 250 connections that send one byte of a request head every 3 s (and open again when
// closed), the server at 256 open files: the time to connect and have GET /alive answered, on a
// new connection each time, for 10 s.
QCoro::Task<GoalResult> measureSlowHeads(QString binary, QString dataDir);

} // namespace AgentDeck::Bench
