#pragma once

#include <QStringList>

namespace AgentDeck {

// The other names a directory has through the mount table: where it, or a directory above it,
// is bind-mounted elsewhere (`mount --bind /var/lib/agentdeck /opt/alias`). They are found by
// device and inode, as the kernel sees the directory, not by its name: hiding the name alone
// left the alias in view. Read from `mountinfo` (default: this process's).
QStringList mountAliasesOf(const QString &dir,
                           const QString &mountInfo = QStringLiteral("/proc/self/mountinfo"));

} // namespace AgentDeck
