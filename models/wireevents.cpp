#include "wiretypes.h"

#include "wirebytes.h"

#include <QJsonArray>

#include <algorithm>
#include <array>

using namespace Qt::StringLiterals;

// The events of a history, and the message a client sends to add one.

namespace AgentDeck {

namespace {

QJsonObject textContent(const QString &text)
{
    return {{u"type"_s, u"text"_s}, {u"text"_s, text}};
}

} // namespace

bool EventKind::isKnown(QStringView kind)
{
    for (QLatin1StringView known :
         {Message, Action, Observation, AgentError, StateUpdate, Pause, UserReject}) {
        if (kind == known)
            return true;
    }
    return false;
}

bool EventSource::isKnown(QStringView source)
{
    return source == User || source == Agent || source == Environment;
}

QJsonObject Event::toJson() const
{
    QJsonObject object = fields;
    object.insert(u"id"_s, toWireId(id));
    object.insert(u"kind"_s, kind);
    object.insert(u"source"_s, source);
    object.insert(u"timestamp"_s, toWireTime(timestamp));
    object.insert(u"seq"_s, seq);
    return object;
}

QByteArray Event::toJsonBytes() const
{
    static const std::array common{u"id"_s, u"kind"_s, u"seq"_s, u"source"_s, u"timestamp"_s};
    if (std::any_of(common.cbegin(), common.cend(),
                    [this](const QString &key) { return fields.contains(key); })) {
        QByteArray out; // toJson() overrides them
        appendJsonValue(out, toJson());
        return out;
    }
    QByteArray out;
    out.reserve(160);
    out += "{\"id\":";
    appendJsonString(out, toWireId(id));
    out += ",\"kind\":";
    appendJsonString(out, kind);
    out += ",\"seq\":" + QByteArray::number(seq) + ",\"source\":";
    appendJsonString(out, source);
    out += ",\"timestamp\":";
    appendWireTime(out, timestamp);
    if (!fields.isEmpty()) {
        out += ',';
        appendJsonMembers(out, fields);
    }
    out += '}';
    return out;
}

std::optional<Event> Event::fromJson(const QJsonObject &object)
{
    const auto id = parseWireId(object.value(u"id"_s).toString());
    const auto timestamp = parseWireTime(object.value(u"timestamp"_s).toString());
    if (!id || !timestamp)
        return std::nullopt;
    Event event;
    event.id = *id;
    event.kind = object.value(u"kind"_s).toString();
    event.source = object.value(u"source"_s).toString();
    event.timestamp = *timestamp;
    event.seq = object.value(u"seq"_s).toInteger();
    event.fields = object;
    for (const auto &key : {u"id"_s, u"kind"_s, u"source"_s, u"timestamp"_s, u"seq"_s})
        event.fields.remove(key);
    return event;
}

namespace {
Event makeEvent(const QString &kind, const QString &source, QJsonObject fields)
{
    Event event;
    event.id = QUuid::createUuid();
    event.kind = kind;
    event.source = source;
    event.fields = std::move(fields);
    return event;
}
} // namespace

Event Event::message(const QString &source, const QString &role, const QString &text)
{
    const QJsonObject llmMessage{{u"role"_s, role}, {u"content"_s, QJsonArray{textContent(text)}}};
    return makeEvent(EventKind::Message, source, {{u"llm_message"_s, llmMessage}});
}

Event Event::action(const QString &toolName, const QString &command, const QString &thought)
{
    QJsonObject fields{{u"tool_name"_s, toolName},
                       {u"tool_call_id"_s, toWireId(QUuid::createUuid())},
                       {u"action"_s, QJsonObject{{u"command"_s, command}}}};
    if (!thought.isEmpty())
        fields.insert(u"thought"_s, thought);
    return makeEvent(EventKind::Action, EventSource::Agent, std::move(fields));
}

Event Event::toolCall(const QString &toolName, const QString &toolCallId,
                      const QJsonObject &arguments, const QString &thought)
{
    QJsonObject fields{
        {u"tool_name"_s, toolName}, {u"tool_call_id"_s, toolCallId}, {u"action"_s, arguments}};
    if (!thought.isEmpty())
        fields.insert(u"thought"_s, thought);
    return makeEvent(EventKind::Action, EventSource::Agent, std::move(fields));
}

Event Event::observation(const Event &action, const QString &output, int exitCode, bool interrupted)
{
    return makeEvent(EventKind::Observation, EventSource::Environment,
                     {{u"tool_name"_s, action.fields.value(u"tool_name"_s)},
                      {u"tool_call_id"_s, action.toolCallId()},
                      {u"action_id"_s, toWireId(action.id)},
                      {u"observation"_s, QJsonObject{{u"output"_s, output},
                                                     {u"exit_code"_s, exitCode},
                                                     {u"interrupted"_s, interrupted}}}});
}

Event Event::userReject(const Event &action, const QString &reason)
{
    return makeEvent(EventKind::UserReject, EventSource::User,
                     {{u"tool_name"_s, action.fields.value(u"tool_name"_s)},
                      {u"tool_call_id"_s, action.toolCallId()},
                      {u"action_id"_s, toWireId(action.id)},
                      {u"rejection_reason"_s, reason}});
}

Event Event::agentError(const QString &code, const QString &error)
{
    return makeEvent(EventKind::AgentError, EventSource::Agent,
                     {{u"code"_s, code}, {u"error"_s, error}});
}

Event Event::stateUpdate(const QString &key, const QJsonValue &value, const QJsonObject &cause)
{
    QJsonObject fields = cause;
    fields.insert(u"key"_s, key);
    fields.insert(u"value"_s, value);
    return makeEvent(EventKind::StateUpdate, EventSource::Environment, std::move(fields));
}

Event Event::pause()
{
    return makeEvent(EventKind::Pause, EventSource::User, {});
}

QString Event::messageText() const
{
    if (kind != EventKind::Message)
        return {};
    QString text;
    const QJsonArray content =
        fields.value(u"llm_message"_s).toObject().value(u"content"_s).toArray();
    for (const QJsonValue &part : content) {
        if (part.toObject().value(u"type"_s) == u"text"_s)
            text += part.toObject().value(u"text"_s).toString();
    }
    return text;
}

QString Event::messageRole() const
{
    return fields.value(u"llm_message"_s).toObject().value(u"role"_s).toString();
}

QJsonObject MessageRequest::toJson() const
{
    return {{u"role"_s, role}, {u"content"_s, QJsonArray{textContent(text)}}, {u"run"_s, run}};
}

} // namespace AgentDeck
