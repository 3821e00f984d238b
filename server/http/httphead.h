#pragma once

#include <QByteArrayView>

// Reading the head of an HTTP/1.1 request (request line and header lines).
namespace AgentDeck {

// Whether a comma-separated header value holds `token`, compared case-insensitively.
bool headerHasToken(QByteArrayView value, QByteArrayView token);

// What is wrong with a request line (RFC 9112, 3): `method SP request-target SP HTTP-version`,
// the method a token, the target without spaces or control characters.
enum class RequestLineFault
{
    None,
    Malformed,
    Version // a well-formed version other than HTTP/1.x
};
RequestLineFault checkRequestLine(QByteArrayView line);

// Whether the header lines of `head` (after its request line, lines ending in CRLF) are each
// `name: value` with a token for a name and no folding, and `Host` comes once in HTTP/1.1, at
// most once in HTTP/1.0 (RFC 9112, 3.2 and 5).
bool headerLinesAreWellFormed(QByteArrayView head);

// Calls `visit` with the name and the value (both trimmed) of each header line of `head`; the
// request line and lines without a colon are skipped. (A template: every request's head is
// read through it, more than once.)
template<typename Visit> void forEachHeader(QByteArrayView head, Visit &&visit)
{
    qsizetype lineStart = head.indexOf('\n');
    while (lineStart >= 0 && lineStart + 1 < head.size()) {
        ++lineStart;
        qsizetype lineEnd = head.indexOf('\n', lineStart);
        if (lineEnd < 0)
            lineEnd = head.size();
        const QByteArrayView line = head.sliced(lineStart, lineEnd - lineStart);
        if (const qsizetype colon = line.indexOf(':'); colon > 0)
            visit(line.first(colon).trimmed(), line.sliced(colon + 1).trimmed());
        lineStart = lineEnd < head.size() ? lineEnd : -1;
    }
}

} // namespace AgentDeck
