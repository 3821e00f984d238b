#include "openhandsagent.h"

#include <QJsonArray>
#include <QStringList>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck::OpenHandsAgent {

namespace {

// OpenHands' tool names (and the class names older clients send) and the llm agent's tools they
// stand for (server/execution/tools.h). An empty list: a tool the llm agent always has.
std::optional<QStringList> toolsFor(const QString &name)
{
    if (name == u"terminal"_s || name == u"TerminalTool"_s || name == u"BashTool"_s ||
        name == u"execute_bash"_s || name == u"bash"_s)
        return QStringList{u"bash"_s};
    if (name == u"file_editor"_s || name == u"FileEditorTool"_s || name == u"str_replace_editor"_s)
        return QStringList{u"read_file"_s, u"write_file"_s, u"str_replace"_s};
    if (name == u"finish"_s || name == u"FinishTool"_s)
        return QStringList{};
    return std::nullopt;
}

// LiteLLM's way of naming an OpenAI-compatible endpoint's model ("openai/gpt-4o" for the model
// "gpt-4o"): the endpoint knows the model by the rest.
QString modelName(const QString &model)
{
    for (const QString &prefix : {u"openai/"_s, u"litellm_proxy/"_s}) {
        if (model.startsWith(prefix) && model.size() > prefix.size())
            return model.mid(prefix.size());
    }
    return model;
}

bool isSet(const QJsonValue &value)
{
    return !value.isUndefined() && !value.isNull();
}

} // namespace

std::optional<QJsonObject> toLlmConfig(const QJsonObject &agent, const QJsonObject &request,
                                       QString *error)
{
    const auto fail = [error](const QString &sentence) {
        *error = sentence;
        return std::nullopt;
    };
    const QJsonValue llmValue = agent.value(u"llm"_s);
    if (!llmValue.isObject())
        return fail(u"agent.llm must be an object with the model, for an agent of kind Agent"_s);
    const QJsonObject given = llmValue.toObject();
    QJsonObject llm;
    // Their types are checked as the llm agent's own settings are.
    for (const QString &key : {u"model"_s, u"api_key"_s, u"base_url"_s}) {
        if (isSet(given.value(key)))
            llm.insert(key, given.value(key));
    }
    if (llm.value(u"model"_s).isString())
        llm.insert(u"model"_s, modelName(llm.value(u"model"_s).toString()));
    if (given.value(u"timeout"_s).isDouble())
        llm.insert(u"timeout"_s, given.value(u"timeout"_s));
    if (given.value(u"num_retries"_s).isDouble())
        llm.insert(u"max_retries"_s, std::clamp(given.value(u"num_retries"_s).toInt(), 0, 20));
    if (given.value(u"stream"_s).isBool())
        llm.insert(u"stream"_s, given.value(u"stream"_s));

    const QJsonValue toolsValue = agent.value(u"tools"_s);
    if (isSet(toolsValue) && !toolsValue.isArray())
        return fail(u"agent.tools must be a list of {\"name\": string}"_s);
    QStringList tools;
    QStringList lacking;
    for (const QJsonValue &tool : toolsValue.toArray()) {
        const QString name =
            tool.isObject() ? tool.toObject().value(u"name"_s).toString() : tool.toString();
        if (name.isEmpty())
            return fail(u"agent.tools must be a list of {\"name\": string}"_s);
        const auto ours = toolsFor(name);
        if (!ours) {
            if (!lacking.contains(name))
                lacking.append(name);
            continue;
        }
        for (const QString &own : *ours) {
            if (!tools.contains(own))
                tools.append(own);
        }
    }
    if (!lacking.isEmpty())
        return fail(u"AgentDeck has no tool %1: of OpenHands' tools it runs terminal (as bash) "
                    "and file_editor (as read_file, write_file and str_replace); leave the others "
                    "out of agent.tools"_s.arg(lacking.join(u", "_s)));

    QJsonObject config{{u"llm"_s, llm}, {u"tools"_s, QJsonArray::fromStringList(tools)}};
    if (const QJsonValue iterations = request.value(u"max_iterations"_s); isSet(iterations))
        config.insert(u"max_iterations"_s, iterations);
    return config;
}

} // namespace AgentDeck::OpenHandsAgent
