#pragma once

#include <QString>

namespace AgentDeck {

// `text` as one word of a shell line.
QString shellQuoted(const QString &text);

// Shell lines that set $p to the real path of `path` as the sandbox sees it (symbolic links
// followed; what does not exist yet taken as written) and, when it is not `root` or inside it,
// print `refusal` (a printf format whose %s is the path) and exit `refusedExit`. The host's own
// check may be raced by a command that moves a link: this one runs where the command does.
// It needs GNU's `realpath -m`, or `readlink -f` of busybox images.
QString shellPathCheck(const QString &path, const QString &root, const QString &refusal,
                       int refusedExit);

} // namespace AgentDeck
