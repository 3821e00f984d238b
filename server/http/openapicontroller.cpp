#include "controllers.h"
#include "router.h"
#include "wiretypes.h"

#include <QFile>
#include <QHash>
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// An answer whose body is the schema `name` of the components.
QJsonObject answerOf(const QString &description, const QString &name)
{
    const QString reference = u"#/components/schemas/"_s + name;
    return {{u"description"_s, description},
            {u"content"_s,
             QJsonObject{{u"application/json"_s,
                          QJsonObject{{u"schema"_s, QJsonObject{{u"$ref"_s, reference}}}}}}}};
}

QJsonObject typed(const QString &type, const QString &description = {})
{
    QJsonObject schema{{u"type"_s, type}};
    if (!description.isEmpty())
        schema.insert(u"description"_s, description);
    return schema;
}

// The `agent` object of a conversation (create body and answers).
QJsonObject agentSchema()
{
    const QJsonObject llm{
        {u"type"_s, u"object"_s},
        {u"properties"_s,
         QJsonObject{
             {u"base_url"_s, typed(u"string"_s, u"OpenAI-compatible base URL, e.g. .../v1"_s)},
             {u"model"_s, typed(u"string"_s)},
             {u"api_key"_s, typed(u"string"_s, u"Write-only: kept in memory, answered as "
                                               "\"********\""_s)},
             {u"stream"_s, typed(u"boolean"_s)},
             {u"timeout"_s, typed(u"number"_s, u"Seconds per model request"_s)},
             {u"max_retries"_s, typed(u"integer"_s)},
             {u"retry_delay"_s, typed(u"number"_s, u"Seconds, doubled per retry"_s)},
             {u"max_retry_delay"_s, typed(u"number"_s)}}}};
    return {
        {u"type"_s, u"object"_s},
        {u"properties"_s,
         QJsonObject{
             {u"kind"_s,
              QJsonObject{{u"type"_s, u"string"_s},
                          {u"description"_s,
                           u"\"Agent\" (or no kind) is OpenHands' agent spec (its tools "
                           "given as [{\"name\": \"terminal\" | \"file_editor\"}]); it "
                           "runs on the llm agent and is answered as \"llm\""_s},
                          {u"enum"_s, QJsonArray{u"shell"_s, u"echo"_s, u"llm"_s, u"Agent"_s}}}},
             {u"llm"_s, llm},
             {u"tools"_s,
              QJsonObject{{u"type"_s, u"array"_s},
                          {u"description"_s, u"The llm agent's tools (bash, read_file, write_file, "
                                             "str_replace; finish always); absent: all of them"_s},
                          {u"items"_s, typed(u"string"_s)}}},
             {u"system_prompt"_s, typed(u"string"_s)},
             {u"max_iterations"_s, typed(u"integer"_s)},
             {u"max_context_tokens"_s, typed(u"integer"_s)}}}};
}

// The answer of POST .../recover: a conversation with what the recovery did beside its fields.
QJsonObject recoverySchema()
{
    return {{u"type"_s, u"object"_s},
            {u"description"_s,
             u"The conversation as it is after the recovery (every field of a conversation's "
             "answer), and `actions`"_s},
            {u"required"_s, QJsonArray{u"id"_s, u"actions"_s}},
            {u"properties"_s,
             QJsonObject{
                 {u"id"_s, typed(u"string"_s)},
                 {u"actions"_s,
                  QJsonObject{
                      {u"type"_s, u"array"_s},
                      {u"description"_s,
                       u"What the recovery did, in order; empty when there was nothing to recover. "
                       "Each is also in the history as a ConversationStateUpdateEvent with key "
                       "\"recovery\""_s},
                      {u"items"_s,
                       QJsonObject{{u"type"_s, u"string"_s},
                                   {u"enum"_s, QJsonArray{RecoveryAction::ResolvedStaleRun,
                                                          RecoveryAction::StartedRuntime,
                                                          RecoveryAction::ContinuedRun}}}}}}}}};
}

// A page of GET /api/audit.
QJsonObject auditPageSchema()
{
    const QJsonObject record{
        {u"type"_s, u"object"_s},
        {u"description"_s,
         u"One change to a conversation or a runtime, made by a client (a key's name and its "
         "client) or by the server (actor \"server\", client the policy: idle, retention, "
         "limit, lease, recovery, shutdown)"_s},
        {u"properties"_s,
         QJsonObject{
             {u"id"_s, typed(u"string"_s, u"The record's number, in the order written"_s)},
             {u"timestamp"_s, typed(u"string"_s, u"By the database's clock (ISO 8601, UTC)"_s)},
             {u"actor"_s, typed(u"string"_s, u"The name of the request's key (\"session-key\" "
                                             "for --session-api-key, empty without keys or with "
                                             "a wrong key), or \"server\""_s)},
             {u"client"_s,
              typed(u"string"_s, u"The client (its User-Agent's product), or the policy"_s)},
             {u"actor_display"_s, typed(u"string"_s, u"\"ops-alice via console\", "
                                                     "\"server (idle)\""_s)},
             {u"action"_s, typed(u"string"_s, u"create, update, delete, archive, unarchive, "
                                              "recover, dismiss, retry, fork, run, pause, "
                                              "interrupt, stop_runtime, resume_runtime, "
                                              "reprovision, start_fresh, ..., expire_runtime, "
                                              "take_over_run, resolve_stale_run"_s)},
             {u"conversation_id"_s, QJsonObject{{u"type"_s, QJsonArray{u"string"_s, u"null"_s}}}},
             {u"replica"_s, typed(u"string"_s, u"The replica that made the change"_s)},
             {u"reason"_s, typed(u"string"_s, u"The request's ?reason=, or the policy's"_s)},
             {u"result"_s, QJsonObject{{u"type"_s, u"string"_s},
                                       {u"enum"_s, QJsonArray{u"done"_s, u"refused"_s}}}},
             {u"status"_s, typed(u"integer"_s, u"The answer's HTTP status"_s)}}}};
    return {{u"type"_s, u"object"_s},
            {u"description"_s,
             u"Query: timestamp__gte, timestamp__lt, actor, client, action, conversation_id, "
             "sort_order (TIMESTAMP_DESC, the default, or TIMESTAMP), limit (1-100, default "
             "100), page_id (a next_page_id)"_s},
            {u"required"_s, QJsonArray{u"items"_s, u"next_page_id"_s}},
            {u"properties"_s,
             QJsonObject{{u"items"_s, QJsonObject{{u"type"_s, u"array"_s}, {u"items"_s, record}}},
                         {u"next_page_id"_s,
                          QJsonObject{{u"type"_s, QJsonArray{u"string"_s, u"null"_s}}}}}}};
}

// The success answers described beyond "Success", by "method pattern".
QHash<QString, QJsonObject> documentedAnswers()
{
    return {{u"post /api/conversations/{id}/recover"_s,
             answerOf(u"What the recovery did, and the conversation"_s, u"Recovery"_s)},
            {u"get /api/audit"_s,
             answerOf(u"A page of the audit log, newest first"_s, u"AuditPage"_s)}};
}

QString operationId(const Router::Route &route)
{
    QString id = QString::fromLatin1(Router::methodName(route.method)).toLower();
    for (const QString &segment : route.segments) {
        QString word = segment;
        word.remove(u'{').remove(u'}');
        const QStringList parts = word.split(QRegularExpression(u"[_\\-.]"_s), Qt::SkipEmptyParts);
        for (const QString &part : parts)
            id += part.left(1).toUpper() + part.mid(1);
    }
    return id;
}

// A file of the API page, shipped as a Qt resource, with headers that keep a browser to this
// server's own files: the page reads /openapi.json and nothing else, and no other site may frame
// it or learn its address from a link.
HttpResponse pageFile(const QString &name, const QByteArray &contentType)
{
    QFile file(u":/agentdeck/apidocs/"_s + name);
    const bool opened = file.open(QIODevice::ReadOnly);
    Q_ASSERT(opened); // compiled in (server/CMakeLists.txt)
    HttpResponse response;
    response.contentType = contentType;
    response.body = file.readAll();
    response.headers = {
        {"Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
         "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
        {"X-Content-Type-Options", "nosniff"},
        {"X-Frame-Options", "DENY"},
        {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"}};
    return response;
}

} // namespace

QJsonObject OpenApiController::document(const Router &router, const QString &version)
{
    QJsonObject paths;
    const QHash<QString, QJsonObject> answers = documentedAnswers();
    for (const Router::Route &route : router.routes()) {
        QJsonObject item = paths.value(route.pattern).toObject();
        QJsonArray parameters;
        for (const QString &segment : route.segments) {
            if (!segment.startsWith(u'{'))
                continue;
            const QString name = segment.mid(1, segment.size() - 2);
            parameters.append(QJsonObject{{u"name"_s, name},
                                          {u"in"_s, u"path"_s},
                                          {u"required"_s, true},
                                          {u"description"_s, u"UUID, dashed or 32 hex digits"_s},
                                          {u"schema"_s, QJsonObject{{u"type"_s, u"string"_s}}}});
        }
        const QString method = QString::fromLatin1(Router::methodName(route.method)).toLower();
        QJsonObject responses{
            {u"200"_s, answers.value(method + u' ' + route.pattern,
                                     QJsonObject{{u"description"_s, u"Success"_s}})},
            {u"default"_s, answerOf(u"An error: {detail, code}"_s, u"Error"_s)}};
        QJsonObject operation{{u"operationId"_s, operationId(route)}, {u"responses"_s, responses}};
        if (!parameters.isEmpty())
            operation.insert(u"parameters"_s, parameters);
        if (route.access == Router::Access::KeyRequired)
            operation.insert(u"security"_s,
                             QJsonArray{QJsonObject{{u"sessionApiKey"_s, QJsonArray{}}}});
        if (method == u"post"_s || method == u"patch"_s)
            operation.insert(
                u"requestBody"_s,
                QJsonObject{{u"required"_s, false},
                            {u"content"_s,
                             QJsonObject{{u"application/json"_s,
                                          QJsonObject{{u"schema"_s,
                                                       QJsonObject{{u"type"_s, u"object"_s}}}}}}}});
        item.insert(method, operation);
        paths.insert(route.pattern, item);
    }
    return {
        {u"openapi"_s, u"3.1.0"_s},
        {u"info"_s,
         QJsonObject{
             {u"title"_s, u"AgentDeck"_s},
             {u"version"_s, version},
             {u"description"_s,
              u"Agent server API; generated from the server's route table. The event "
              "streams are WebSockets, outside this document: "
              "/sockets/events/{id}, /sockets/bash-events and /sockets/lifecycle (docs/API.md)."_s}}},
        {u"paths"_s, paths},
        {u"components"_s,
         QJsonObject{
             {u"schemas"_s,
              QJsonObject{
                  {u"Error"_s,
                   QJsonObject{{u"type"_s, u"object"_s},
                               {u"required"_s, QJsonArray{u"detail"_s, u"code"_s}},
                               {u"properties"_s,
                                QJsonObject{{u"detail"_s, QJsonObject{{u"type"_s, u"string"_s}}},
                                            {u"code"_s, QJsonObject{{u"type"_s, u"string"_s}}}}}}},
                  {u"Agent"_s, agentSchema()},
                  {u"Recovery"_s, recoverySchema()},
                  {u"AuditPage"_s, auditPageSchema()},
                  {u"TransientFrame"_s,
                   QJsonObject{
                       {u"description"_s,
                        u"WebSocket only: a streamed text delta of an llm agent; never stored, "
                        "no seq"_s},
                       {u"type"_s, u"object"_s},
                       {u"properties"_s,
                        QJsonObject{{u"type"_s, typed(u"string"_s, u"\"transient\""_s)},
                                    {u"kind"_s, typed(u"string"_s, u"\"MessageDelta\""_s)},
                                    {u"conversation_id"_s, typed(u"string"_s)},
                                    {u"role"_s, typed(u"string"_s)},
                                    {u"delta"_s, typed(u"string"_s)}}}}}}},
             {u"securitySchemes"_s,
              QJsonObject{
                  {u"sessionApiKey"_s, QJsonObject{{u"type"_s, u"apiKey"_s},
                                                   {u"in"_s, u"header"_s},
                                                   {u"name"_s, u"X-Session-API-Key"_s}}}}}}},
    };
}

void OpenApiController::registerRoutes(Router &router, const QString &version)
{
    router.addOpen(Router::Method::Get, u"/openapi.json"_s,
                   [&router, version](const HttpRequest &) {
                       return HttpResponse::json(document(router, version));
                   });
    // The page that renders /openapi.json in a browser, open as /openapi.json is: it holds
    // nothing but the renderer.
    for (const auto &[path, name, contentType] :
         std::initializer_list<std::tuple<QString, QString, QByteArray>>{
             {u"/docs"_s, u"index.html"_s, "text/html; charset=utf-8"_ba},
             {u"/docs/apidocs.js"_s, u"apidocs.js"_s, "text/javascript; charset=utf-8"_ba},
             {u"/docs/apidocs.css"_s, u"apidocs.css"_s, "text/css; charset=utf-8"_ba}}) {
        router.addOpen(
            Router::Method::Get, path,
            [answer = pageFile(name, contentType)](const HttpRequest &) { return answer; });
    }
}

} // namespace AgentDeck
