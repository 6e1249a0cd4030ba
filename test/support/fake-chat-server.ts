/**
 * A stand-in for an OpenAI-compatible chat-completions endpoint, for driving
 * `vf-eval` end to end without a model: it listens on 127.0.0.1, answers each
 * request with the canned reply for the last user message, and refuses to
 * answer more than a fixed number of requests so a runaway client cannot loop.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeChatServer {
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  /** The last user message of every request served, in order. */
  prompts: string[];
  close(): Promise<void>;
}

function userText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (part && typeof part === 'object' && 'text' in part ? String(part.text) : '')).join('');
  }
  return '';
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

/** `replies` maps a user message to the assistant's answer; anything else gets `fallback`. */
export async function startFakeChatServer(replies: Readonly<Record<string, string>>, maxRequests: number, fallback = ''): Promise<FakeChatServer> {
  const prompts: string[] = [];
  const server: Server = createServer((request, response) => {
    void (async () => {
      if (request.method !== 'POST' || !request.url?.endsWith('/chat/completions')) {
        send(response, 404, { error: { message: `no route ${request.method} ${request.url}` } });
        return;
      }
      if (prompts.length >= maxRequests) {
        send(response, 429, { error: { message: `more than ${maxRequests} requests` } });
        return;
      }
      const body = JSON.parse(await readBody(request)) as { model?: string; stream?: boolean; messages?: { role: string; content: unknown }[] };
      const users = (body.messages ?? []).filter((message) => message.role === 'user');
      const prompt = userText(users.at(-1)?.content);
      prompts.push(prompt);
      const reply = replies[prompt] ?? fallback;
      const id = `chatcmpl-${prompts.length}`;
      const model = body.model ?? 'fake';
      if (body.stream) {
        // Server-sent events the way OpenAI streams: the content, then the
        // finish reason and usage, then [DONE].
        const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
        const chunk = (delta: object, finish: string | null, extra: object = {}) =>
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
        response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        response.write(chunk({ role: 'assistant', content: reply }, null));
        response.write(chunk({}, 'stop', { usage }));
        response.end('data: [DONE]\n\n');
        return;
      }
      send(response, 200, {
        id,
        object: 'chat.completion',
        created: 0,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    })().catch((error: unknown) => send(response, 500, { error: { message: String(error) } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    prompts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
