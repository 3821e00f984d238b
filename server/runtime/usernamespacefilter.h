#pragma once

#include <QByteArray>

namespace AgentDeck {

// A seccomp program that keeps a command from making or joining a user namespace: unshare() and
// clone() with CLONE_NEWUSER and setns() fail with EPERM, clone3() with ENOSYS (its flags are
// behind a pointer a filter cannot read; libc then falls back to clone()), and so does every
// system call of another ABI (i386's int 0x80, x32), which would bypass the checks by their
// other numbers. Everything else is allowed.
//
// Inside a user namespace of its own a command holds every capability over it: it can mount,
// and reaches a kernel surface that no sandboxed command needs. bubblewrap's --disable-userns
// closes that for a server that is not root; a root server's commands change uid inside a
// sandbox without a user namespace, and this closes it for them.
namespace UserNamespaceFilter {

// The program, as bubblewrap's --seccomp reads it (an array of struct sock_filter).
QByteArray program();
// A descriptor (close-on-exec) of a file holding program(), read from its start; -1 (errno set)
// when none could be made.
int programFile();
// Installs it in this process, which must have no_new_privs set; false (errno set) if the
// kernel refused it.
bool install();

} // namespace UserNamespaceFilter

} // namespace AgentDeck
