#include "llmagent.h"

#include "execution/tools.h"
#include "serverconfig.h"

#include <QJsonDocument>
#include <QUrl>

#include <algorithm>
#include <utility>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

constexpr qsizetype TruncatedHeadChars = 200;
constexpr qint64 CharsPerToken = 4;

bool isConversational(const Event &event)
{
    return event.kind == EventKind::Message || event.kind == EventKind::Action ||
           event.kind == EventKind::Observation || event.kind == EventKind::UserReject;
}

QString observationText(const Event &event)
{
    if (event.kind == EventKind::UserReject) {
        const QString reason = event.fields.value(u"rejection_reason"_s).toString();
        return u"The user rejected this action; it was not executed."_s +
               (reason.isEmpty() ? QString() : u" Reason: "_s + reason);
    }
    const QJsonObject observation = event.fields.value(u"observation"_s).toObject();
    QString text = observation.value(u"output"_s).toString();
    if (observation.value(u"interrupted"_s).toBool())
        return text + u"\n[interrupted before it finished]"_s;
    if (const int exitCode = observation.value(u"exit_code"_s).toInt(); exitCode != 0)
        text += u"\n[exit code %1]"_s.arg(exitCode);
    return text;
}

qint64 estimatedTokens(const QList<QJsonObject> &messages)
{
    qint64 chars = 0;
    for (const QJsonObject &message : messages) {
        chars += message.value(u"content"_s).toString().size();
        for (const QJsonValue &call : message.value(u"tool_calls"_s).toArray())
            chars += call.toObject()
                         .value(u"function"_s)
                         .toObject()
                         .value(u"arguments"_s)
                         .toString()
                         .size();
    }
    return chars / CharsPerToken;
}

std::optional<double> number(const QJsonObject &object, const QString &key)
{
    const QJsonValue value = object.value(key);
    if (value.isUndefined() || value.isNull())
        return std::nullopt;
    return value.isDouble() ? std::optional(value.toDouble()) : std::optional(-1.0);
}

std::chrono::milliseconds seconds(double value)
{
    // Kept within a timer's range: a conversation stored before the limits were checked may
    // hold any number.
    const double limit = std::chrono::duration<double>(MaxTimerDuration).count();
    return std::chrono::milliseconds(qint64(std::clamp(value, 0.0, limit) * 1000));
}

QUrl endpointFor(const QString &baseUrl)
{
    QString url = baseUrl;
    while (url.endsWith(u'/'))
        url.chop(1);
    if (!url.endsWith(u"/chat/completions"_s))
        url += u"/chat/completions"_s;
    return QUrl(url);
}

} // namespace

QString LlmSettings::defaultSystemPrompt()
{
    return u"You are a careful software agent working in a sandboxed workspace. Use the tools to "
           "inspect and change files and to run commands; paths are relative to the workspace. "
           "When the task is done, call finish with a short answer for the user."_s;
}

QString LlmSettings::validate(QJsonObject &config, const LlmDefaults &defaults, QString *apiKey)
{
    const QJsonValue llmValue = config.value(u"llm"_s);
    if (!llmValue.isUndefined() && !llmValue.isNull() && !llmValue.isObject())
        return u"agent.llm must be an object"_s;
    QJsonObject llm = llmValue.toObject();
    for (const QString &key : {u"model"_s, u"base_url"_s, u"api_key"_s}) {
        const QJsonValue value = llm.value(key);
        if (!value.isUndefined() && !value.isNull() && !value.isString())
            return u"agent.llm.%1 must be a string"_s.arg(key);
    }
    // The key leaves the object here: it is never stored, returned or logged.
    const QString key = llm.take(u"api_key"_s).toString();
    if (!key.isEmpty() && key != RedactedKey) {
        *apiKey = key;
        llm.insert(u"api_key"_s, RedactedKey);
    }
    // Without one the conversation is made all the same, as OpenHands makes it: its run says
    // what is missing (llm_endpoint_missing).
    if (const QString baseUrl = llm.value(u"base_url"_s).toString(defaults.baseUrl);
        !baseUrl.isEmpty()) {
        const QUrl url(baseUrl);
        if (!url.isValid() || (url.scheme() != u"http"_s && url.scheme() != u"https"_s) ||
            url.host().isEmpty())
            return u"agent.llm.base_url must be an http or https URL"_s;
    }
    if (llm.value(u"model"_s).toString(defaults.model).isEmpty())
        return u"agent.llm.model is required (the server has no --llm-model)"_s;
    if (const QJsonValue stream = llm.value(u"stream"_s);
        !stream.isUndefined() && !stream.isNull() && !stream.isBool())
        return u"agent.llm.stream must be a boolean"_s;
    // Below a millisecond it was no time at all; past a day, the timer's interval overflowed.
    if (const auto timeout = number(llm, u"timeout"_s);
        timeout &&
        !(*timeout >= 0.001 && *timeout <= std::chrono::duration<double>(MaxLlmTimeout).count()))
        return u"agent.llm.timeout must be a number of seconds from 0.001 to 86400"_s;
    if (const auto retries = number(llm, u"max_retries"_s);
        retries && (*retries < 0 || *retries > 20 || *retries != int(*retries)))
        return u"agent.llm.max_retries must be an integer from 0 to 20"_s;
    for (const QString &key : {u"retry_delay"_s, u"max_retry_delay"_s}) {
        if (const auto delay = number(llm, key); delay && (*delay < 0 || *delay > 3600))
            return u"agent.llm.%1 must be a number of seconds from 0 to 3600"_s.arg(key);
    }
    if (const QJsonValue prompt = config.value(u"system_prompt"_s);
        !prompt.isUndefined() && !prompt.isNull() && !prompt.isString())
        return u"agent.system_prompt must be a string"_s;
    if (const auto iterations = number(config, u"max_iterations"_s);
        iterations && (*iterations < 1 || *iterations != int(*iterations)))
        return u"agent.max_iterations must be a positive integer"_s;
    if (const auto tokens = number(config, u"max_context_tokens"_s); tokens && *tokens < 1)
        return u"agent.max_context_tokens must be a positive integer"_s;
    if (const QJsonValue tools = config.value(u"tools"_s);
        !tools.isUndefined() && !tools.isNull()) {
        const QStringList known = Tools::names();
        const auto isKnown = [&known](const QJsonValue &tool) {
            return tool.isString() && known.contains(tool.toString());
        };
        const QJsonArray list = tools.toArray();
        if (!tools.isArray() || !std::all_of(list.begin(), list.end(), isKnown))
            return u"agent.tools must be a list of tool names out of %1"_s.arg(known.join(u", "_s));
    }
    config.insert(u"llm"_s, llm);
    return {};
}

LlmSettings LlmSettings::resolve(const QJsonObject &config, const LlmDefaults &defaults,
                                 const QString &conversationKey)
{
    const QJsonObject llm = config.value(u"llm"_s).toObject();
    LlmSettings settings;
    settings.baseUrl = llm.value(u"base_url"_s).toString(defaults.baseUrl);
    settings.model = llm.value(u"model"_s).toString(defaults.model);
    // The server-wide key goes to the server-wide provider only: sent to any base URL a
    // conversation named, it went to whoever could create one.
    const auto sameProvider = [](const QString &a, const QString &b) {
        const auto normalized = [](const QString &url) {
            return QUrl(url).adjusted(QUrl::StripTrailingSlash | QUrl::NormalizePathSegments);
        };
        return !a.isEmpty() && normalized(a) == normalized(b);
    };
    const QString serverKey =
        sameProvider(settings.baseUrl, defaults.baseUrl) ? defaults.apiKey : QString();
    // A key sent with the conversation lives in memory only; after a restart the server-wide
    // key stands in for it, and without one the run asks for it again.
    settings.apiKey = conversationKey.isEmpty() ? serverKey : conversationKey;
    settings.apiKeyLost = llm.value(u"api_key"_s).toString() == RedactedKey &&
                          conversationKey.isEmpty() && serverKey.isEmpty();
    settings.stream = llm.value(u"stream"_s).toBool(false);
    settings.timeout = defaults.timeout;
    if (const auto timeout = number(llm, u"timeout"_s))
        settings.timeout = seconds(*timeout);
    if (const auto retries = number(llm, u"max_retries"_s))
        settings.maxRetries = int(*retries);
    if (const auto delay = number(llm, u"retry_delay"_s))
        settings.retryDelay = seconds(*delay);
    if (const auto delay = number(llm, u"max_retry_delay"_s))
        settings.maxRetryDelay = seconds(*delay);
    settings.systemPrompt = config.value(u"system_prompt"_s).toString(defaultSystemPrompt());
    if (const auto iterations = number(config, u"max_iterations"_s))
        settings.maxIterations = int(*iterations);
    if (const auto tokens = number(config, u"max_context_tokens"_s))
        settings.maxContextTokens = qint64(*tokens);
    if (const QJsonValue tools = config.value(u"tools"_s); tools.isArray()) {
        QStringList names;
        for (const QJsonValue &tool : tools.toArray())
            names.append(tool.toString());
        settings.tools = names;
    }
    return settings;
}

LlmAgent::LlmAgent(LlmSettings settings, AgentContext context)
    : m_settings(std::move(settings))
    , m_context(std::move(context))
    , m_client(std::make_unique<ChatClient>(ChatSettings{
          endpointFor(m_settings.baseUrl), m_settings.apiKey, m_settings.stream, m_settings.timeout,
          m_settings.maxRetries, m_settings.retryDelay, m_settings.maxRetryDelay}))
{
    if (m_context.publishTransient) {
        m_client->setDeltaHandler([this](const QString &delta) {
            m_context.publishTransient(
                QJsonObject{{u"type"_s, u"transient"_s},
                            {u"kind"_s, u"MessageDelta"_s},
                            {u"conversation_id"_s, toWireId(m_context.conversationId)},
                            {u"role"_s, u"assistant"_s},
                            {u"delta"_s, delta}});
        });
    }
}

LlmAgent::~LlmAgent() = default;

void LlmAgent::cancel()
{
    m_client->cancel();
}

bool LlmAgent::offers(const QString &toolName) const
{
    return !m_settings.tools || toolName == Tools::Finish || m_settings.tools->contains(toolName);
}

int LlmAgent::iterationsSinceInput(const QList<Event> &history)
{
    int count = 0;
    bool previousWasAction = false;
    for (const Event &event : history) {
        if ((event.kind == EventKind::Message && event.source == EventSource::User) ||
            (event.kind == EventKind::AgentError &&
             event.fields.value(u"code"_s).toString() == u"max_iterations_reached"_s)) {
            count = 0;
            previousWasAction = false;
        } else if (event.kind == EventKind::Action) {
            if (!previousWasAction)
                ++count;
            previousWasAction = true;
        } else if (isConversational(event)) {
            previousWasAction = false;
        }
    }
    return count;
}

QJsonArray LlmAgent::messagesFor(const QList<Event> &history, const QString &systemPrompt,
                                 qint64 maxContextTokens)
{
    QList<QJsonObject> messages{{{u"role"_s, u"system"_s}, {u"content"_s, systemPrompt}}};
    // The chat protocol wants an answer to every tool call before the next message. A message
    // sent while a step's calls ran comes after their results: it closed them, and the model
    // was told "(no result was recorded)" of commands whose output was stored.
    QStringList open;
    QList<QJsonObject> held;
    const auto closeOpen = [&] {
        for (const QString &id : std::as_const(open))
            messages.append({{u"role"_s, u"tool"_s},
                             {u"tool_call_id"_s, id},
                             {u"content"_s, u"(no result was recorded)"_s}});
        open.clear();
        messages.append(std::exchange(held, {}));
    };
    bool previousWasAction = false;
    for (const Event &event : history) {
        if (event.kind == EventKind::Message) {
            QString role = u"assistant"_s;
            if (event.source != EventSource::Agent)
                role = event.messageRole() == u"system"_s ? u"system"_s : u"user"_s;
            const QJsonObject message{{u"role"_s, role}, {u"content"_s, event.messageText()}};
            if (open.isEmpty())
                messages.append(message);
            else
                held.append(message);
            previousWasAction = false;
        } else if (event.kind == EventKind::Action) {
            const QString id = event.toolCallId();
            const QJsonObject call{
                {u"id"_s, id},
                {u"type"_s, u"function"_s},
                {u"function"_s,
                 QJsonObject{
                     {u"name"_s, event.fields.value(u"tool_name"_s).toString(u"bash"_s)},
                     {u"arguments"_s,
                      QString::fromUtf8(QJsonDocument(event.fields.value(u"action"_s).toObject())
                                            .toJson(QJsonDocument::Compact))}}}};
            if (previousWasAction) {
                QJsonArray calls = messages.last().value(u"tool_calls"_s).toArray();
                calls.append(call);
                messages.last().insert(u"tool_calls"_s, calls);
            } else {
                closeOpen();
                const QString thought = event.fields.value(u"thought"_s).toString();
                messages.append({{u"role"_s, u"assistant"_s},
                                 {u"content"_s, thought.isEmpty() ? QJsonValue(QJsonValue::Null)
                                                                  : QJsonValue(thought)},
                                 {u"tool_calls"_s, QJsonArray{call}}});
            }
            open.append(id);
            previousWasAction = true;
        } else if (event.kind == EventKind::Observation || event.kind == EventKind::UserReject) {
            const QString id = event.toolCallId();
            if (!open.removeOne(id))
                continue; // not an answer to a call the model made
            messages.append({{u"role"_s, u"tool"_s},
                             {u"tool_call_id"_s, id},
                             {u"content"_s, observationText(event)}});
            if (open.isEmpty())
                messages.append(std::exchange(held, {}));
            previousWasAction = false;
        }
    }
    closeOpen();

    // Over the budget: shorten the oldest tool results first, keeping the newest one whole.
    qint64 tokens = estimatedTokens(messages);
    qsizetype lastTool = -1;
    for (qsizetype i = 0; i < messages.size(); ++i) {
        if (messages[i].value(u"role"_s) == u"tool"_s)
            lastTool = i;
    }
    for (qsizetype i = 0; i < lastTool && tokens > maxContextTokens; ++i) {
        QJsonObject &message = messages[i];
        if (message.value(u"role"_s) != u"tool"_s)
            continue;
        const QString content = message.value(u"content"_s).toString();
        if (content.size() <= TruncatedHeadChars * 2)
            continue;
        const qsizetype removed = content.size() - TruncatedHeadChars;
        message.insert(u"content"_s,
                       QString(leftWhole(content, TruncatedHeadChars) +
                               u"\n[... %1 characters of this older output were removed to fit "
                               "the context budget ...]"_s.arg(removed)));
        tokens = estimatedTokens(messages);
    }

    QJsonArray array;
    for (const QJsonObject &message : std::as_const(messages))
        array.append(message);
    return array;
}

QCoro::Task<AgentStep> LlmAgent::next(const QList<Event> &history)
{
    const Event *last = nullptr;
    for (auto it = history.crbegin(); it != history.crend(); ++it) {
        if (isConversational(*it)) {
            last = &*it;
            break;
        }
    }
    // Nothing to answer: no input yet, or the model's last answer is the final one.
    if (!last || (last->kind == EventKind::Message && last->source == EventSource::Agent))
        co_return AgentStep{AgentStep::Kind::Finish};
    if (m_settings.baseUrl.isEmpty())
        co_return AgentStep{
            AgentStep::Kind::Fail,
            u"The conversation names no model endpoint: its agent.llm has no base_url and the "
            "server has no --llm-base-url. AgentDeck's llm agent speaks to OpenAI-compatible "
            "chat completions endpoints (e.g. https://api.openai.com/v1); create a conversation "
            "that gives agent.llm.base_url, or start the server with --llm-base-url."_s,
            u"llm_endpoint_missing"_s};
    if (m_settings.apiKeyLost)
        co_return AgentStep{
            AgentStep::Kind::Fail,
            u"The API key of this conversation is kept in the memory of the server it was sent "
            "to, and this server does not have it (it restarted since, or it is another "
            "replica). Send it again to the server that will run the conversation (POST "
            "/api/conversations with this conversation_id and agent.llm.api_key), or start the "
            "servers with AGENTDECK_LLM_API_KEY, then run the conversation again."_s,
            u"llm_api_key_missing"_s};
    if (iterationsSinceInput(history) >= m_settings.maxIterations)
        co_return AgentStep{
            AgentStep::Kind::Fail,
            u"The agent reached max_iterations (%1 model turns) without finishing. Run the "
            "conversation again to allow %1 more, or send a message."_s.arg(
                m_settings.maxIterations),
            u"max_iterations_reached"_s};

    QJsonObject body{
        {u"model"_s, m_settings.model},
        {u"messages"_s, messagesFor(history, m_settings.systemPrompt, m_settings.maxContextTokens)},
        {u"tools"_s, Tools::schemas(m_settings.tools)},
        {u"tool_choice"_s, u"auto"_s},
    };
    auto completing = m_client->complete(std::move(body));
    const ChatResult result = co_await std::move(completing);

    AgentStep step;
    step.usage = result.usage;
    switch (result.outcome) {
    case ChatResult::Outcome::Cancelled:
        step.kind = AgentStep::Kind::Cancelled;
        co_return step;
    case ChatResult::Outcome::Failed:
        step.kind = AgentStep::Kind::Fail;
        step.errorCode = result.errorCode;
        step.text = u"The language model request failed: %1. Run the conversation again to "
                    "retry."_s.arg(result.error);
        co_return step;
    case ChatResult::Outcome::Answered:
        break;
    }

    QString finishMessage;
    bool finishCalled = false;
    for (const ToolCall &call : result.toolCalls) {
        if (call.name == Tools::Finish) {
            finishCalled = true;
            finishMessage = call.arguments.value(u"message"_s).toString();
        } else {
            step.toolCalls.append(call);
        }
    }
    if (!step.toolCalls.isEmpty()) {
        // A finish next to other calls waits: the model sees their results first.
        step.kind = AgentStep::Kind::CallTools;
        step.toolCalls.first().thought = result.content;
        co_return step;
    }
    // Nothing said and nothing to call (a reply cut at its token limit, a provider's hiccup):
    // the run finished with the message unanswered and nothing to tell why.
    if (!finishCalled && result.content.trimmed().isEmpty()) {
        step.kind = AgentStep::Kind::Fail;
        step.errorCode = u"llm_bad_response"_s;
        step.text = u"The language model gave an empty answer: no text and no tool to call. Run "
                    "the conversation again to retry."_s;
        co_return step;
    }
    step.kind = AgentStep::Kind::Finish;
    step.text = finishCalled && !finishMessage.isEmpty() ? finishMessage : result.content;
    co_return step;
}

} // namespace AgentDeck
