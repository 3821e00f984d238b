#pragma once

#include <QString>

#include <cstdio>

class QJsonValue;

namespace AgentDeck {

struct ApiReply;

// How `agentdeck ctl` writes: text made safe for a terminal (CtlFormat::terminalSafe), a write
// that fails ends the process (EPIPE quietly), and an answer's exit code.
namespace CtlOutput {

void writeTo(FILE *stream, const QString &text);
void writeOut(const QString &text);
// "agentdeck ctl: TEXT" and a newline, on stderr.
void writeErr(const QString &text);
void printJson(const QJsonValue &value);
// CtlExit's code for a failed answer: 401, 404, 409, 410 and no answer have their own.
int exitCodeFor(const ApiReply &reply);
// Says why the request failed, in the server's words; its exit code.
int fail(const ApiReply &reply);

} // namespace CtlOutput
} // namespace AgentDeck
