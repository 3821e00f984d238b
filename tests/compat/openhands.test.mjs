// AgentDeck driven by the published OpenHands client, @openhands/typescript-client 1.39.0, as its
// users drive an OpenHands agent server: the real binary (AGENTDECK_BINARY), a scripted model.
//
// Cases on EXPECTED_TO_FAIL are part of the contract but not in AgentDeck yet. They run all the
// same and are checked both ways: one of them failing as listed passes the run (reported as
// xfail), one of them passing fails it (XPASS), so the list is kept to what really fails.
// AGENTDECK_COMPAT_STRICT=1 runs every case as a plain one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AgentDeck, ScriptedModel, SESSION_API_KEY, waitFor } from './harness.mjs';

// The client's sockets look for `window.WebSocket`, else call require('ws'); its dist is an ES
// module, where require is not defined, so in Node neither socket ever connects. A global
// require lets it take the Node path it means to.
globalThis.require ??= createRequire(import.meta.url);
const {
    Agent, RemoteConversation, RemoteWorkspace, ConversationManager, HttpClient, HttpError,
    BashWebSocketClient,
} = await import('@openhands/typescript-client');

// Each with the failure it has now (a pattern of its error's message): one failing otherwise is
// a plain failure, so a route that lands but answers wrong is seen, not taken for the missing
// route. Every case of the suite passes now.
const EXPECTED_TO_FAIL = new Map([]);
const strict = process.env.AGENTDECK_COMPAT_STRICT === '1';
const outcomes = [];
const cases = new Set();

function contract(name, fn) {
    cases.add(name);
    test(name, async (t) => {
        const expectedToFail = !strict && EXPECTED_TO_FAIL.has(name);
        let error;
        try {
            await fn(t);
        } catch (e) {
            error = e;
        }
        if (!expectedToFail) {
            outcomes.push([error ? 'FAIL' : 'pass', name]);
            if (error)
                throw error;
            return;
        }
        if (!error) {
            outcomes.push(['XPASS', name]);
            throw new Error(`"${name}" passes now: take it off EXPECTED_TO_FAIL in ${fileURLToPath(import.meta.url)}`);
        }
        const why = error.message.split('\n')[0];
        if (!EXPECTED_TO_FAIL.get(name).test(error.message)) {
            outcomes.push(['FAIL', name, `not the expected failure: ${why}`]);
            throw error;
        }
        outcomes.push(['xfail', name, why]);
        t.diagnostic(`expected to fail: ${why}`);
    });
}

const NIL = '00000000-0000-0000-0000-000000000000';
const server = new AgentDeck();
const model = new ScriptedModel();
let manager;

before(async () => {
    await model.start();
    await server.start();
    manager = new ConversationManager({ host: server.url, apiKey: SESSION_API_KEY });
});

after(async () => {
    await server.stop();
    await model.stop();
    const lines = outcomes.map(([what, name, why]) => `  ${what.padEnd(5)} ${name}${why ? `  (${why})` : ''}`);
    process.stderr.write(`\nOpenHands client compatibility:\n${lines.join('\n')}\n`);
});

// OpenHands' agent spec as `new Agent({llm, tools})` makes it, on the scripted model NAME.
function agentFor(name, tools = [{ name: 'terminal' }, { name: 'file_editor' }]) {
    return new Agent({
        llm: { model: `openai/script-${name}`, base_url: model.baseUrl, api_key: 'sk-compat',
               usage_id: 'agent', timeout: 20 },
        tools,
    });
}

function workspaceFor(dir) {
    return new RemoteWorkspace({ host: server.url, workingDir: dir, apiKey: SESSION_API_KEY });
}

// A started conversation of the scripted model NAME in a working dir of its own.
async function startConversation(name, steps = [], options = {}) {
    model.script(name, steps);
    const dir = server.workingDir(name);
    const conversation = new RemoteConversation(agentFor(name), workspaceFor(dir), options);
    await conversation.start();
    return { conversation, dir };
}

async function waitForStatus(conversation, wanted, timeoutMs = 20000) {
    let last;
    await waitFor(() => `execution_status ${wanted} (last: ${last})`, async () => {
        await conversation.state.refresh();
        last = await conversation.state.getExecutionStatus();
        return last === wanted || last === 'error';
    }, { timeoutMs });
    if (last !== wanted)
        throw new Error(`the run ended in ${last}: ${JSON.stringify(await conversation.state.modelDump())}`);
}

async function runToFinish(conversation, message) {
    await conversation.sendMessage(message);
    await conversation.run();
    await waitForStatus(conversation, 'finished');
}

async function rejectsWithStatus(promise, status) {
    const error = await promise.then(() => null, (e) => e);
    assert.ok(error, `expected HTTP ${status}, the call succeeded`);
    const http = error instanceof HttpError ? error : error.cause;
    assert.ok(http instanceof HttpError, `expected an HttpError, got ${error}`);
    assert.equal(http.status, status, http.message);
    return http;
}

const raw = () => new HttpClient({ baseUrl: server.url, apiKey: SESSION_API_KEY });

contract('server: GET / and /health answer as OpenHands does', async () => {
    assert.equal(await manager.server.getHealth(), 'OK');
    const root = await manager.server.getRoot();
    assert.equal(typeof root.version, 'string');
    assert.ok(root.version.length > 0);
    const alive = await manager.server.getAlive();
    assert.equal(alive.status, 'ok');
    assert.equal((await manager.server.getReady()).status, 'ready');
    assert.equal(typeof (await manager.server.getServerInfo()), 'object');
});

contract('auth: a wrong session API key is 401', async () => {
    const stranger = new ConversationManager({ host: server.url, apiKey: 'not-the-key' });
    await rejectsWithStatus(stranger.searchConversations(), 401);
    const nobody = new ConversationManager({ host: server.url });
    await rejectsWithStatus(nobody.countConversations(), 401);
});

contract('conversations: the agent spec runs a terminal call to finish', async () => {
    const { conversation, dir } = await startConversation('first', [{ shell: 'echo hi > f.txt' }]);
    try {
        assert.match(conversation.id, /^[0-9a-f-]{32,36}$/);
        await runToFinish(conversation, 'write hi to f.txt');
        assert.equal(readFileSync(join(dir, 'f.txt'), 'utf8'), 'hi\n');

        const requests = model.requestsOf('first');
        assert.equal(requests.length, 2);
        assert.equal(requests[0].authorization, 'Bearer sk-compat');
        const offered = requests[0].body.tools.map((t) => t.function.name);
        assert.ok(offered.includes('finish'), offered.join());
        assert.ok(offered.includes('bash') || offered.includes('terminal'), offered.join());
        assert.ok(JSON.stringify(requests[0].body.messages).includes('write hi to f.txt'));

        const agent = await conversation.state.getAgent();
        assert.equal(agent.llm.model, 'script-first');
        assert.notEqual(agent.llm.api_key, 'sk-compat');
        const ws = await conversation.state.getWorkspace();
        assert.equal(ws.working_dir, dir);
    } finally {
        await conversation.close();
    }
});

contract('conversations: an initial message, run, final response, stats, pause and delete', async () => {
    model.script('initial', [{ shell: 'echo started' }, { tool: 'finish', args: { message: 'all done' } }]);
    const conversation = new RemoteConversation(agentFor('initial'),
                                                workspaceFor(server.workingDir('initial')));
    try {
        await conversation.start({ initialMessage: 'the first words', maxIterations: 10 });
        const first = await conversation.state.events.getEvents();
        assert.equal(first.filter((e) => e.kind === 'MessageEvent').length, 1);
        assert.match(JSON.stringify(first), /the first words/);
        await conversation.run();
        await waitForStatus(conversation, 'finished');
        assert.equal(await conversation.getAgentFinalResponse(), 'all done');
        const stats = await conversation.conversationStats();
        assert.equal(typeof stats, 'object');
        await conversation.pause(); // idle: nothing to pause, and no error
        await manager.deleteConversation(conversation.id);
        await rejectsWithStatus(manager.getConversation(conversation.id), 404);
    } finally {
        await conversation.close();
    }
});

contract('conversations: search, count, get, batch get and the nil id', async () => {
    const { conversation } = await startConversation('listed');
    try {
        const page = await manager.searchConversations({ limit: 100 });
        assert.ok(page.items.some((c) => c.id === conversation.id));
        const count = await manager.countConversations();
        assert.ok(count >= 1, String(count));
        const info = await manager.getConversation(conversation.id);
        assert.equal(info.id, conversation.id);
        const all = await manager.getAllConversations();
        assert.ok(all.some((c) => c.id === conversation.id));
        const batch = await manager.getConversations([conversation.id, NIL]);
        assert.equal(batch.length, 2);
        assert.equal(batch[0].id, conversation.id);
        assert.equal(batch[1], null);
        await rejectsWithStatus(manager.getConversation(NIL), 404);
    } finally {
        await conversation.close();
    }
});

contract('conversations: loadConversation and setTitle by id', async () => {
    const { conversation, dir } = await startConversation('loaded');
    try {
        const loaded = await manager.loadConversation(conversation.id, dir);
        assert.equal(loaded.id, conversation.id);
        assert.equal(await loaded.state.getExecutionStatus(), 'idle');
        await loaded.setTitle('compat title');
        const info = await manager.getConversation(conversation.id);
        assert.equal(info.title, 'compat title');
        await loaded.close();
    } finally {
        await conversation.close();
    }
});

contract('conversations: no agent or a tool AgentDeck lacks is 422', async () => {
    const dir = server.workingDir('refused');
    await rejectsWithStatus(raw().post('/api/conversations', {
        max_iterations: 5, workspace: { type: 'local', working_dir: dir } }), 422);
    const refusal = await rejectsWithStatus(raw().post('/api/conversations', {
        agent: agentFor('refused', [{ name: 'terminal' }, { name: 'browser_tool_set' }]),
        workspace: { type: 'local', working_dir: dir } }), 422);
    assert.match(JSON.stringify(refusal.response), /browser_tool_set/);
});

contract('events: search, count, get by id and the whole list', async () => {
    const { conversation } = await startConversation('events', [{ shell: 'echo from-events' }]);
    try {
        await runToFinish(conversation, 'say from-events');
        const events = conversation.state.events;
        const all = await events.getEvents();
        const kinds = all.map((e) => e.kind);
        for (const kind of ['MessageEvent', 'ActionEvent', 'ObservationEvent'])
            assert.ok(kinds.includes(kind), `${kind} not in ${kinds.join()}`);
        const observation = all.find((e) => e.kind === 'ObservationEvent');
        assert.match(JSON.stringify(observation), /from-events/);

        const messages = await events.search({ kind: 'MessageEvent' });
        assert.ok(messages.items.length >= 1);
        assert.ok(messages.items.every((e) => e.kind === 'MessageEvent'));
        assert.match(JSON.stringify(messages.items[0]), /say from-events/);
        assert.equal(await events.count({ kind: 'MessageEvent' }), messages.items.length);
        assert.equal(await events.count(), all.length);

        const one = await events.getEventById(observation.id);
        assert.equal(one.id, observation.id);
        const many = await events.getEventsById([observation.id, randomUUID()]);
        assert.equal(many[0].id, observation.id);
        assert.equal(many[1], null);

        const newest = await events.search({ sort_order: 'TIMESTAMP_DESC', limit: 1 });
        assert.equal(newest.items.length, 1);
        assert.equal(newest.items[0].id, all[all.length - 1].id);
    } finally {
        await conversation.close();
    }
});

contract('socket: the event socket streams a run to the client with the key', async () => {
    const received = [];
    const errors = [];
    const { conversation } = await startConversation('socket', [{ shell: 'echo over-the-socket' }],
        { callback: (e) => received.push(e), onError: (e) => errors.push(e) });
    try {
        await conversation.startWebSocketClient();
        // The client says nothing when its socket is open (nor does the server send anything
        // before the run): its socket's readyState is the one sign, and the run is then live.
        await waitFor('the client socket open', () => conversation.wsClient?.ws?.readyState === 1,
                      { timeoutMs: 10000 });
        await conversation.sendMessage('stream it');
        await conversation.run();
        await waitFor('the run streamed to its finish', () => received.some((e) =>
            e.kind === 'ConversationStateUpdateEvent' &&
            (e.key === 'execution_status' ? e.value : e.value?.execution_status) === 'finished'));
        const observation = received.find((e) => e.kind === 'ObservationEvent');
        assert.ok(observation, received.map((e) => e.kind).join());
        assert.match(JSON.stringify(observation), /over-the-socket/);
        assert.ok(received.some((e) => e.kind === 'MessageEvent'));
        assert.ok(received.some((e) => e.kind === 'ActionEvent'));
        // What the socket gave, the client's state has: the status and the cached events.
        assert.equal(await conversation.state.getExecutionStatus(), 'finished');
        assert.ok(await conversation.state.events.length() >= 3);
        assert.deepEqual(errors, []);
    } finally {
        await conversation.close();
    }
});

contract('archived: a start of an archived id is 409 and the client surfaces it', async () => {
    const { conversation, dir } = await startConversation('archived');
    try {
        await raw().post(`/api/conversations/${conversation.id}/archive`);
        const refused = await rejectsWithStatus(raw().post('/api/conversations', {
            agent: agentFor('archived'), conversation_id: conversation.id, max_iterations: 5,
            workspace: { type: 'local', working_dir: dir } }), 409);
        assert.equal(refused.response?.code, 'conversation_archived');
        await rejectsWithStatus(conversation.run(), 409);
        await raw().post(`/api/conversations/${conversation.id}/unarchive`);
        await raw().post('/api/conversations', {
            agent: agentFor('archived'), conversation_id: conversation.id, max_iterations: 5,
            workspace: { type: 'local', working_dir: dir } });
    } finally {
        await conversation.close();
    }
});

// The remote workspace, on the working dir of a conversation.
contract('workspace: executeCommand runs in the conversation workspace', async () => {
    const { conversation, dir } = await startConversation('exec');
    try {
        const result = await conversation.workspace.executeCommand('echo from-exec; pwd', dir, 10);
        assert.equal(result.exit_code, 0, result.stderr);
        assert.equal(result.stdout, `from-exec\n${dir}\n`);
        const failed = await conversation.workspace.executeCommand('exit 3', dir, 10);
        assert.equal(failed.exit_code, 3);
    } finally {
        await conversation.close();
    }
});

contract('workspace: a file uploaded is downloaded the same', async () => {
    const { conversation, dir } = await startConversation('files');
    try {
        const path = join(dir, 'uploaded.txt');
        const up = await conversation.workspace.uploadText('uploaded by the client\n', path, 'uploaded.txt');
        assert.equal(up.success, true, up.error);
        assert.equal(readFileSync(path, 'utf8'), 'uploaded by the client\n');
        writeFileSync(join(dir, 'host.txt'), 'written on the host\n');
        assert.equal(await conversation.workspace.downloadAsText(join(dir, 'host.txt')),
                     'written on the host\n');
        // Nothing outside the workspaces: a path elsewhere is refused.
        const outside = await conversation.workspace.fileDownload('/etc/passwd').then(() => null, (e) => e);
        assert.ok(outside instanceof HttpError && outside.status >= 400 && outside.status < 500,
                  `a download of /etc/passwd: ${outside}`);
    } finally {
        await conversation.close();
    }
});

contract('workspace: git changes and diff of the conversation workspace', async () => {
    const { conversation, dir } = await startConversation('git');
    try {
        // The workspace is the conversation's (a root server gives the one it made to the
        // conversation's own uid): the host's git is told it is safe.
        const git = (...args) => execFileSync('git', ['-C', dir, '-c', 'safe.directory=*',
                                                      '-c', 'user.name=compat',
                                                      '-c', 'user.email=compat@localhost', ...args]);
        git('init', '-q');
        writeFileSync(join(dir, 'kept.txt'), 'one\n');
        git('add', 'kept.txt');
        git('commit', '-q', '-m', 'first');
        writeFileSync(join(dir, 'kept.txt'), 'two\n');
        writeFileSync(join(dir, 'new.txt'), 'new\n');
        const changes = await conversation.workspace.gitChanges(dir);
        const byPath = Object.fromEntries(changes.map((c) => [c.path.split('/').pop(), c.status]));
        // OpenHands' server says UPDATED and ADDED; the client's types, modified and added.
        assert.match(byPath['kept.txt'] ?? '', /^(updated|modified)$/i, JSON.stringify(changes));
        assert.match(byPath['new.txt'] ?? '', /^added$/i, JSON.stringify(changes));
        const diff = await conversation.workspace.gitDiff(join(dir, 'kept.txt'));
        if (diff.modified !== undefined || diff.original !== undefined) {
            assert.equal(diff.original, 'one\n');
            assert.equal(diff.modified, 'two\n');
        } else {
            assert.match(diff.diff ?? '', /\+two/, JSON.stringify(diff));
        }
    } finally {
        await conversation.close();
    }
});

contract('bash: a started command and its events, by search and by id', async () => {
    const { conversation, dir } = await startConversation('bashevents');
    try {
        const bash = conversation.workspace.bash;
        const command = await bash.startCommand({ command: 'echo from-bash-events', cwd: dir, timeout: 10 });
        assert.ok(command.id, JSON.stringify(command));
        const outputs = await waitFor('the command output with its exit code', async () => {
            const page = await bash.searchEvents({ kind__eq: 'BashOutput', command_id__eq: command.id });
            return page.items.some((o) => o.exit_code !== null && o.exit_code !== undefined) && page.items;
        });
        assert.match(outputs.map((o) => o.stdout ?? '').join(''), /from-bash-events/);
        assert.equal(outputs.find((o) => o.exit_code !== null && o.exit_code !== undefined).exit_code, 0);
        const again = await bash.getEvent(command.id);
        assert.equal(again.command, 'echo from-bash-events');
        const both = await bash.getEvents([command.id, randomUUID()]);
        assert.equal(both[0].id, command.id);
        assert.equal(both[1], null);
    } finally {
        await conversation.close();
    }
});

contract('bash: the bash-events socket streams a command output', async () => {
    const { conversation, dir } = await startConversation('bashsocket');
    const received = [];
    const errors = [];
    const socket = new BashWebSocketClient({ host: server.url, apiKey: SESSION_API_KEY, resendMode: 'all',
                                             callback: (e) => received.push(e),
                                             onError: (e) => errors.push(e) });
    const outputOf = (text) => received.some((e) => e.kind === 'BashOutput' && (e.stdout ?? '').includes(text));
    try {
        // One command before the socket (resend_mode=all gives it), one while it is open.
        await conversation.workspace.bash.startCommand({ command: 'echo before-bash-socket', cwd: dir });
        socket.start();
        await waitFor('the bash socket open', () => socket.ws?.readyState === 1, { timeoutMs: 5000 });
        await conversation.workspace.bash.startCommand({ command: 'echo over-bash-socket', cwd: dir });
        await waitFor('both outputs on the socket',
                      () => outputOf('before-bash-socket') && outputOf('over-bash-socket'));
        assert.ok(received.some((e) => e.kind === 'BashCommand' && e.command === 'echo over-bash-socket'));
        assert.deepEqual(errors, []);
    } finally {
        socket.stop();
        await conversation.close();
    }
});

contract('secrets: updateSecrets is accepted and its value never answered', async () => {
    const { conversation } = await startConversation('secrets');
    try {
        await conversation.updateSecrets({ COMPAT_TOKEN: 'tok-3141-secret', OTHER: () => 'tok-2718-other' });
        const info = JSON.stringify(await manager.getConversation(conversation.id));
        assert.ok(!info.includes('tok-3141-secret') && !info.includes('tok-2718-other'), info);
    } finally {
        await conversation.close();
    }
});

contract('secrets: a command of the terminal sees a secret in its environment', async () => {
    const { conversation, dir } = await startConversation('secretenv',
        [{ shell: 'test "$COMPAT_TOKEN" = "tok-$((3000 + 141))-secret" && echo matched > s.txt; echo "$COMPAT_TOKEN"' }]);
    try {
        await conversation.updateSecrets({ COMPAT_TOKEN: 'tok-3141-secret' });
        await runToFinish(conversation, 'check the token');
        assert.ok(existsSync(join(dir, 's.txt')), 'the command did not see COMPAT_TOKEN');
        // OpenHands masks a secret's value in what the agent and clients see of its output (the
        // command itself names no value: what an action says is stored as it is).
        const events = JSON.stringify(await conversation.state.events.getEvents());
        assert.ok(!events.includes('tok-3141-secret'), 'the secret is in the events');
    } finally {
        await conversation.close();
    }
});

contract('fork: a fork is a new conversation with the parent events', async () => {
    const { conversation } = await startConversation('forked', [{ shell: 'echo before-fork' }]);
    let fork;
    try {
        await runToFinish(conversation, 'run before the fork');
        fork = await conversation.fork({ title: 'the fork' });
        assert.notEqual(fork.id, conversation.id);
        const info = await manager.getConversation(fork.id);
        assert.equal(info.title, 'the fork');
        const parentEvents = await conversation.state.events.getEvents();
        const forkEvents = await fork.state.events.getEvents();
        assert.match(JSON.stringify(forkEvents), /run before the fork/);
        assert.ok(forkEvents.length >= parentEvents.filter((e) => e.kind !== 'ConversationStateUpdateEvent').length - 1);
        // The fork runs on its own; the parent is unchanged.
        model.script('forked', [{ shell: 'echo after-fork' }]);
        await runToFinish(fork, 'run in the fork');
        assert.equal((await conversation.state.events.getEvents()).length, parentEvents.length);
    } finally {
        await fork?.close();
        await conversation.close();
    }
});

test('the expected-to-fail list names only cases of this suite', () => {
    assert.deepEqual([...EXPECTED_TO_FAIL.keys()].filter((name) => !cases.has(name)), []);
});
