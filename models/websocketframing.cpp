#include "websocketframing.h"

#include <QtEndian>

namespace AgentDeck::WebSocketFraming {

QByteArray frameHeader(quint8 firstByte, quint64 length)
{
    QByteArray header;
    if (length < 126) {
        header.resize(2);
        header[1] = char(length);
    } else if (length < 65536) {
        header.resize(4);
        header[1] = char(126);
        qToBigEndian(quint16(length), header.data() + 2);
    } else {
        header.resize(10);
        header[1] = char(127);
        qToBigEndian(quint64(length), header.data() + 2);
    }
    header[0] = char(firstByte);
    return header;
}

} // namespace AgentDeck::WebSocketFraming
