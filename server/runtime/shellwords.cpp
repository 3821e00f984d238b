#include "shellwords.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

QString shellQuoted(const QString &text)
{
    QString escaped = text;
    escaped.replace(u'\'', u"'\\''"_s);
    return u'\'' + escaped + u'\'';
}

QString shellPathCheck(const QString &path, const QString &root, const QString &refusal,
                       int refusedExit)
{
    // Without `realpath -m`: the longest part that exists resolved by `readlink -f`, the rest
    // appended as written. A link that leads nowhere, or `.` and `..` in the rest, are refused
    // rather than guessed at.
    static const QString resolve =
        u"r() { d=$(realpath -m -- \"$1\" 2>/dev/null) && { printf '%s\\n' \"$d\"; return; }; "
        "d=$1 t=; while [ -n \"$d\" ] && [ ! -e \"$d\" ]; do [ -L \"$d\" ] && return 1; "
        "t=/${d##*/}$t; d=${d%/*}; done; case $t in */.|*/..|*/./*|*/../*) return 1;; esac; "
        "d=$(readlink -f -- \"${d:-/}\") || return 1; d=${d%/}$t; printf '%s\\n' \"${d:-/}\"; }\n"_s;
    return resolve + u"w=$(r %1) && p=$(r %2) || exit 1\n"
                     "case \"$p\" in \"$w\"|\"$w\"/*) ;; *) printf %3 %2; exit %4;; esac\n"_s.arg(
                         shellQuoted(root), shellQuoted(path), shellQuoted(refusal),
                         QString::number(refusedExit));
}

} // namespace AgentDeck
