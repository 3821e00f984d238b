#include "ctloutput.h"

#include "ctl.h"
#include "ctlformat.h"
#include "serverconnection.h"

#include <QJsonDocument>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace Qt::StringLiterals;

namespace AgentDeck::CtlOutput {

void writeTo(FILE *stream, const QString &text)
{
    const bool written =
        std::fputs(CtlFormat::terminalSafe(text).toUtf8().constData(), stream) >= 0;
    if ((std::fflush(stream) == 0 && written) || stream != stdout)
        return;
    // Output that goes nowhere (a full disk, a closed stdout) was lost with exit 0, and a
    // followed stream piped to `head -1` went on for as long as events came: SIGPIPE is
    // ignored, so the write fails with EPIPE instead. A reader that left is no error to tell.
    const int why = errno;
    if (why != EPIPE)
        std::fprintf(stderr, "agentdeck ctl: cannot write the output: %s\n", std::strerror(why));
    std::_Exit(CtlExit::Failed);
}

void writeOut(const QString &text)
{
    writeTo(stdout, text);
}

void writeErr(const QString &text)
{
    writeTo(stderr, u"agentdeck ctl: "_s + text + u'\n');
}

void printJson(const QJsonValue &value)
{
    writeOut(CtlFormat::jsonText(value, QJsonDocument::Indented));
}

int exitCodeFor(const ApiReply &reply)
{
    if (reply.unreachable())
        return CtlExit::Unreachable;
    switch (reply.status) {
    case 401:
        return CtlExit::Unauthorized;
    case 404:
        return CtlExit::NotFound;
    case 409:
        return CtlExit::Conflict;
    case 410:
        return CtlExit::Expired;
    default:
        return CtlExit::Failed;
    }
}

int fail(const ApiReply &reply)
{
    writeErr(reply.errorSentence());
    return exitCodeFor(reply);
}

} // namespace AgentDeck::CtlOutput
