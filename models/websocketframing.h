#pragma once

#include <QByteArray>

// RFC 6455 framing that both ends of the project share: the server's WebSocket connections
// and the benchmark's raw clients and reference.
namespace AgentDeck::WebSocketFraming {

enum Opcode : quint8
{
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
};

// A frame's header without a masking key: `firstByte` (FIN, RSV, opcode) and the payload length
// in the shortest of its three encodings.
QByteArray frameHeader(quint8 firstByte, quint64 length);

} // namespace AgentDeck::WebSocketFraming
