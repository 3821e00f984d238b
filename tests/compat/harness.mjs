// The pieces the compatibility suite drives the OpenHands client against: the real agentdeck
// binary, headless on a free loopback port with a throwaway data dir and a session API key, and
// a scripted OpenAI-compatible chat-completions server. Nothing leaves 127.0.0.1.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const SESSION_API_KEY = 'compat-session-key';

export function binaryPath() {
    return resolve(process.env.AGENTDECK_BINARY || join(here, '../../build-tests/app/agentdeck'));
}

// Resolves with the value once check() returns a truthy one; rejects after timeoutMs with what
// it was waiting for (a string, or a function giving one then). Checks every intervalMs (a poll
// of a condition, never a fixed wait).
export async function waitFor(what, check, { timeoutMs = 20000, intervalMs = 50 } = {}) {
    const deadline = Date.now() + timeoutMs;
    let lastError;
    for (;;) {
        try {
            const value = await check();
            if (value)
                return value;
        } catch (error) {
            lastError = error;
        }
        if (Date.now() > deadline)
            throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}` +
                            (lastError ? ` (last error: ${lastError.message})` : ''));
        await new Promise((r) => setTimeout(r, intervalMs));
    }
}

// A chat-completions server that answers from a script per model name: the suite gives each
// conversation its own model ("script-NAME"), and script(NAME, steps) queues what it answers.
// A step is {shell: 'cmd'} (a call to the offered shell tool, `terminal` or `bash`), {tool, args},
// or {text}; when a model's steps run out it calls finish. Requests are kept for inspection.
export class ScriptedModel {
    constructor() {
        this.scripts = new Map();
        this.requests = [];
        this.server = createServer((req, res) => this.#handle(req, res));
        this.callCount = 0;
    }

    async start() {
        await new Promise((r) => this.server.listen(0, '127.0.0.1', r));
        this.baseUrl = `http://127.0.0.1:${this.server.address().port}/v1`;
    }

    async stop() {
        this.server.closeAllConnections?.();
        await new Promise((r) => this.server.close(r));
    }

    script(name, steps) {
        this.scripts.set(`script-${name}`, [...steps]);
    }

    requestsOf(name) {
        return this.requests.filter((r) => r.body.model === `script-${name}`);
    }

    #handle(req, res) {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
                res.writeHead(404, { 'Content-Type': 'application/json' });
                res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
                return;
            }
            let body;
            try {
                body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
                res.writeHead(400);
                res.end();
                return;
            }
            this.requests.push({ authorization: req.headers.authorization, body });
            const steps = this.scripts.get(body.model) || [];
            const step = steps.shift() || { tool: 'finish', args: { message: 'done' } };
            const message = this.#message(step, body);
            if (body.stream)
                this.#stream(res, body.model, message);
            else
                this.#answer(res, body.model, message);
        });
    }

    #message(step, body) {
        if (step.text !== undefined)
            return { role: 'assistant', content: step.text };
        const offered = (body.tools || []).map((t) => t.function?.name);
        let name = step.tool;
        let args = step.args || {};
        if (step.shell !== undefined) {
            name = offered.includes('terminal') ? 'terminal' : 'bash';
            args = { command: step.shell };
        }
        this.callCount += 1;
        return {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: `call_${this.callCount}`, type: 'function',
                           function: { name, arguments: JSON.stringify(args) } }],
        };
    }

    #answer(res, model, message) {
        const answer = {
            id: `chatcmpl-${this.callCount}`, object: 'chat.completion',
            created: Math.floor(Date.now() / 1000), model,
            choices: [{ index: 0, message,
                        finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
            usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        };
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(answer));
    }

    #stream(res, model, message) {
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
        const chunk = (delta, finish) => `data: ${JSON.stringify({
            id: `chatcmpl-${this.callCount}`, object: 'chat.completion.chunk', model,
            choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        const delta = message.tool_calls
            ? { role: 'assistant', tool_calls: message.tool_calls.map((c, index) => ({ index, ...c })) }
            : { role: 'assistant', content: message.content };
        res.write(chunk(delta, null));
        res.write(chunk({}, message.tool_calls ? 'tool_calls' : 'stop'));
        res.end('data: [DONE]\n\n');
    }
}

// The real binary, headless, on 127.0.0.1:0; url once it prints its listening line.
export class AgentDeck {
    constructor() {
        this.root = mkdtempSync(join(tmpdir(), 'agentdeck-compat-'));
        this.dataDir = join(this.root, 'data');
        // Conversations' working dirs, apart from the data dir (the server refuses one in it).
        this.workRoot = mkdtempSync(join(tmpdir(), 'agentdeck-compat-work-'));
        this.stderr = '';
    }

    async start({ timeoutMs = 20000 } = {}) {
        const binary = binaryPath();
        this.process = spawn(binary, ['--headless', '--listen', '127.0.0.1:0',
                                      '--data-dir', this.dataDir,
                                      '--workspace-root', this.workRoot,
                                      '--session-api-key', SESSION_API_KEY],
                             { stdio: ['ignore', 'ignore', 'pipe'] });
        // Not left running when this process ends without stop() (a failure, a signal).
        const orphanGuard = () => {
            this.process.kill('SIGKILL');
            for (const dir of [this.root, this.workRoot])
                rmSync(dir, { recursive: true, force: true });
        };
        process.once('exit', orphanGuard);
        for (const signal of ['SIGINT', 'SIGTERM'])
            process.once(signal, () => { orphanGuard(); process.exit(signal === 'SIGINT' ? 130 : 143); });
        this.process.once('exit', () => process.removeListener('exit', orphanGuard));
        this.process.stderr.setEncoding('utf8');
        this.process.stderr.on('data', (d) => { this.stderr += d; });
        const exited = new Promise((_, reject) => this.process.once('exit', (code, signal) =>
            reject(new Error(`${binary} exited (${code ?? signal}) before listening:\n${this.stderr}`))));
        exited.catch(() => {});
        const listening = waitFor('the listening line', () =>
            this.stderr.match(/agentdeck\.server: listening on (http:\/\/127\.0\.0\.1:\d+)$/m)?.[1], { timeoutMs });
        this.url = await Promise.race([listening, exited]);
        this.process.removeAllListeners('exit');
        await waitFor('/ready', async () => (await fetch(`${this.url}/ready`)).status === 200,
                      { timeoutMs });
    }

    // A fresh working dir for one conversation.
    // Not made here: the server makes it at the create, and a root server gives what it made
    // to the conversation's own uid (a dir it did not make keeps its owner and mode).
    workingDir(name) {
        return join(this.workRoot, name);
    }

    async stop() {
        if (this.process && this.process.exitCode === null && this.process.signalCode === null) {
            const gone = new Promise((r) => this.process.once('exit', r));
            this.process.kill('SIGTERM');
            const timer = setTimeout(() => this.process.kill('SIGKILL'), 10000);
            await gone;
            clearTimeout(timer);
        }
        rmSync(this.root, { recursive: true, force: true, maxRetries: 3 });
        rmSync(this.workRoot, { recursive: true, force: true, maxRetries: 3 });
    }
}
