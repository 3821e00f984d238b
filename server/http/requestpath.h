#pragma once

#include "apierror.h"

#include <QByteArrayView>
#include <QString>

namespace AgentDeck {

// The path of a request target in the one form that the router and every check on a request
// (the key, Origin, Host) see. Where they saw two spellings, `//api/...` skipped the key that
// `/api/...` asked for. So a path has a single spelling: a trailing `/` names the same
// resource as the path without it and is dropped; an empty segment (`//`), a dot segment
// (`/./`, `/../`, also encoded), an encoded `/`, a malformed escape or a decoded control
// character refuses the request (400) before anything else looks at it.
struct RequestPath
{
    QString path;  // decoded; empty when refused
    QString fault; // why this spelling is refused; empty when it is accepted

    bool accepted() const { return fault.isEmpty(); }
};

// The path of an origin-form request target (`/a/b`, without its query).
RequestPath decodeRequestPath(QByteArrayView target);

// The answer to a refused spelling: 400 non_canonical_path, saying what is wrong (a fault).
ApiError pathRefusal(const QString &fault);

} // namespace AgentDeck
