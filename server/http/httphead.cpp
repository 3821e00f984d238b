#include "httphead.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace AgentDeck {

namespace {

// RFC 9110's tchar, by byte: every header name of every request is checked against it.
constexpr std::array<bool, 256> TokenChars = [] {
    std::array<bool, 256> table{};
    for (int c = '0'; c <= '9'; ++c)
        table[c] = true;
    for (int c = 'a'; c <= 'z'; ++c)
        table[c] = table[c - 'a' + 'A'] = true;
    for (const char c : std::string_view("!#$%&'*+-.^_`|~"))
        table[static_cast<unsigned char>(c)] = true;
    return table;
}();

bool isTokenChar(char c)
{
    return TokenChars[static_cast<unsigned char>(c)];
}

bool isToken(QByteArrayView text)
{
    return !text.isEmpty() && std::all_of(text.begin(), text.end(), isTokenChar);
}

bool isDigit(char c)
{
    return c >= '0' && c <= '9';
}

} // namespace

RequestLineFault checkRequestLine(QByteArrayView line)
{
    const qsizetype firstSpace = line.indexOf(' ');
    const qsizetype lastSpace = line.lastIndexOf(' ');
    if (firstSpace <= 0 || lastSpace <= firstSpace + 1)
        return RequestLineFault::Malformed;
    const QByteArrayView target = line.sliced(firstSpace + 1, lastSpace - firstSpace - 1);
    const bool targetIsVisible = std::all_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) > ' ' && c != 0x7f;
    });
    const QByteArrayView version = line.sliced(lastSpace + 1);
    if (!isToken(line.first(firstSpace)) || !targetIsVisible || version.size() != 8 ||
        !version.startsWith("HTTP/") || !isDigit(version[5]) || version[6] != '.' ||
        !isDigit(version[7]))
        return RequestLineFault::Malformed;
    return version[5] == '1' ? RequestLineFault::None : RequestLineFault::Version;
}

bool headerLinesAreWellFormed(QByteArrayView head)
{
    // Split at each LF with the CR before it dropped: searching for a one-byte needle is a
    // memchr, for "\r\n" a far slower search.
    const auto withoutCr = [](QByteArrayView line) {
        return line.endsWith('\r') ? line.chopped(1) : line;
    };
    qsizetype lineStart = head.indexOf('\n');
    const QByteArrayView requestLine = withoutCr(lineStart < 0 ? head : head.first(lineStart));
    int hosts = 0;
    while (lineStart >= 0 && lineStart + 1 < head.size()) {
        ++lineStart;
        qsizetype lineEnd = head.indexOf('\n', lineStart);
        if (lineEnd < 0)
            lineEnd = head.size();
        const QByteArrayView line = withoutCr(head.sliced(lineStart, lineEnd - lineStart));
        const qsizetype colon = line.indexOf(':');
        if (colon < 0 || !isToken(line.first(colon)))
            return false; // a line without a name, or folded onto the one before
        if (line.first(colon).compare("host", Qt::CaseInsensitive) == 0 && ++hosts > 1)
            return false;
        lineStart = lineEnd < head.size() ? lineEnd : -1;
    }
    // An HTTP/1.1 request names its host (RFC 9112, 3.2); HTTP/1.0 may not.
    return hosts == 1 || !requestLine.endsWith("HTTP/1.1");
}

bool headerHasToken(QByteArrayView value, QByteArrayView token)
{
    qsizetype start = 0;
    while (start <= value.size()) {
        qsizetype end = value.indexOf(',', start);
        if (end < 0)
            end = value.size();
        if (value.sliced(start, end - start).trimmed().compare(token, Qt::CaseInsensitive) == 0)
            return true;
        start = end + 1;
    }
    return false;
}

} // namespace AgentDeck
