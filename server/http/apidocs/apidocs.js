// Renders the server's OpenAPI document (/openapi.json) as a page: an index of the paths, then
// each operation (its parameters, body and answers), then the schemas. Everything is built with
// DOM calls and textContent, so no text of the document is ever read as HTML.
'use strict';

function element(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {}))
        node.setAttribute(name, value);
    for (const child of children)
        node.append(child);
    return node;
}

function code(text) {
    return element('code', {}, text);
}

// "#/components/schemas/Error" -> a link to that schema's section.
function schemaLink(reference) {
    const name = reference.split('/').pop();
    return element('a', {href: '#schema-' + name}, name);
}

function schemaSummary(schema) {
    if (!schema)
        return document.createTextNode('');
    if (schema.$ref)
        return schemaLink(schema.$ref);
    return code(schema.type || 'any');
}

function anchorOf(method, path) {
    return 'op-' + method + path.replace(/[^A-Za-z0-9]+/g, '-');
}

function operationSection(path, method, operation) {
    const section = element('div', {class: 'operation', id: anchorOf(method, path)},
        element('h3', {}, element('span', {class: 'method ' + method}, method), code(path)));
    const facts = [];
    if (operation.operationId)
        facts.push('operationId ' + operation.operationId);
    facts.push(operation.security ? 'needs X-Session-API-Key (when the server has keys)'
                                  : 'open: no key');
    section.append(element('p', {class: 'note'}, facts.join(' · ')));
    if (operation.description)
        section.append(element('p', {}, operation.description));

    if (operation.parameters && operation.parameters.length) {
        const table = element('table', {},
            element('tr', {}, element('th', {}, 'parameter'), element('th', {}, 'in'),
                    element('th', {}, 'description')));
        for (const parameter of operation.parameters)
            table.append(element('tr', {}, element('td', {}, code(parameter.name)),
                                 element('td', {}, parameter.in),
                                 element('td', {}, parameter.description || '')));
        section.append(table);
    }
    const body = operation.requestBody;
    if (body && body.content) {
        for (const [type, media] of Object.entries(body.content))
            section.append(element('p', {}, 'Body (' + type + (body.required ? '' : ', optional') +
                                   '): ', schemaSummary(media.schema)));
    }
    const answers = element('table', {},
        element('tr', {}, element('th', {}, 'answer'), element('th', {}, 'description'),
                element('th', {}, 'schema')));
    for (const [status, answer] of Object.entries(operation.responses || {})) {
        const json = answer.content && answer.content['application/json'];
        answers.append(element('tr', {}, element('td', {}, status),
                               element('td', {}, answer.description || ''),
                               element('td', {}, json ? schemaSummary(json.schema) : '')));
    }
    section.append(answers);
    return section;
}

function render(api) {
    const info = api.info || {};
    document.title = (info.title || 'API') + ' ' + (info.version || '');
    document.getElementById('title').textContent = document.title;
    const summary = document.getElementById('summary');
    summary.replaceChildren(info.description || '', ' OpenAPI ' + api.openapi + ', from ',
                            element('a', {href: '/openapi.json'}, '/openapi.json'), '.');

    const index = element('ul');
    const operations = document.getElementById('operations');
    operations.append(element('h2', {}, 'Operations'));
    for (const path of Object.keys(api.paths || {}).sort()) {
        for (const [method, operation] of Object.entries(api.paths[path])) {
            index.append(element('li', {},
                element('a', {href: '#' + anchorOf(method, path)}, method.toUpperCase() + ' ' + path)));
            operations.append(operationSection(path, method, operation));
        }
    }
    document.getElementById('index').append(element('h2', {}, 'Paths'), index);

    const schemas = document.getElementById('schemas');
    schemas.append(element('h2', {}, 'Schemas'));
    const components = (api.components && api.components.schemas) || {};
    for (const [name, schema] of Object.entries(components))
        schemas.append(element('h3', {id: 'schema-' + name}, name),
                       element('pre', {}, JSON.stringify(schema, null, 2)));
}

fetch('/openapi.json', {headers: {Accept: 'application/json'}})
    .then(answer => {
        if (!answer.ok)
            throw new Error('/openapi.json answered ' + answer.status);
        return answer.json();
    })
    .then(render)
    .catch(error => {
        const summary = document.getElementById('summary');
        summary.className = 'error';
        summary.textContent = 'Could not read the API description: ' + error.message;
    });
