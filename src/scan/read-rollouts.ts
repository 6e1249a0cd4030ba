import { GatekeptError } from '../errors.js';
import { readInputLines } from '../read-input.js';

/**
 * Rollouts, one at a time, from the files evaluation and training runs
 * write: a verifiers 0.4 `traces.jsonl` (one episode a line), a classic 0.3
 * `results.jsonl` (one rollout a line), or a plain JSONL of prompt,
 * completion and answer as RL trainers dump them, with fields renamed by a
 * mapping. The file is read as a stream, so a file of any length is held one
 * line at a time (up to MAX_LINE_BYTES a line; see read-input.ts).
 */

export type RolloutLayout = 'verifiers-v1' | 'verifiers-v0' | 'plain';

export interface Rollout {
  /** 1-based line of the file. */
  line: number;
  /** The rollout's own id when it has one (`example_id`, a task id, an `id` field), else `line N`. */
  id: string;
  /** The training step, when the file has one (see the `step` field). */
  step: number | null;
  prompt: string | null;
  /** The final assistant text, as the verifier is handed it. */
  completion: string;
  answer: string;
  /** The reward the run recorded, when it did. */
  recorded: number | null;
  info: Record<string, unknown>;
}

/** Where each field of a plain JSONL line lives (dotted paths reach into objects). */
export interface FieldMap {
  completion: string;
  answer: string;
  prompt: string;
  reward: string;
  step: string;
  id: string;
  info: string;
}

const DEFAULT_FIELDS: Readonly<FieldMap> = {
  completion: 'completion',
  answer: 'answer',
  prompt: 'prompt',
  reward: 'reward',
  step: 'step',
  id: 'id',
  info: 'info',
};

const FIELD_NAMES = Object.keys(DEFAULT_FIELDS) as (keyof FieldMap)[];

const FIELD_SUGGESTION = `write --field NAME=KEY with NAME one of ${FIELD_NAMES.join(', ')}, e.g. --field completion=response,answer=ground_truth`;

/** `completion=response,answer=ground_truth` (repeatable) over the defaults. */
export function parseFieldMap(specs: readonly string[]): FieldMap {
  const fields: FieldMap = { ...DEFAULT_FIELDS };
  for (const spec of specs) {
    for (const pair of spec.split(',')) {
      if (pair.trim() === '') continue;
      const [name, key, ...rest] = pair.split('=').map((part) => part.trim());
      if (!name || !key || rest.length > 0 || !(FIELD_NAMES as string[]).includes(name)) {
        throw new GatekeptError('BAD_ARGUMENT', `--field ${JSON.stringify(pair)} is not NAME=KEY with a known NAME`, { suggestion: FIELD_SUGGESTION });
      }
      fields[name as keyof FieldMap] = key;
    }
  }
  return fields;
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

function lookup(record: Json, dotted: string): unknown {
  if (dotted in record) return record[dotted];
  let value: unknown = record;
  for (const part of dotted.split('.')) {
    if (!isObject(value)) return undefined;
    value = value[part];
  }
  return value;
}

function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  // OpenAI content parts: the text parts, in order.
  return content.map((part) => (isObject(part) && typeof part.text === 'string' ? part.text : '')).join('');
}

/** The last assistant message's text of a chat, or the string itself. */
export function assistantText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (isObject(value) && 'content' in value) return contentText(value.content);
  if (!Array.isArray(value)) return null;
  for (let index = value.length - 1; index >= 0; index -= 1) {
    const message = value[index];
    if (isObject(message) && (message.role === 'assistant' || message.role === undefined)) return contentText(message.content) ?? '';
  }
  return null;
}

/** The user's text of a prompt: a string, or the user messages of a chat. */
function promptText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return null;
  const parts = value.filter((message) => isObject(message) && message.role === 'user').map((message) => contentText((message as Json).content) ?? '');
  return parts.length > 0 ? parts.join('\n\n') : null;
}

function finite(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return null;
}

function answerText(value: unknown): string | null {
  if (typeof value === 'string') return value.trim() === '' ? null : value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}

/** A 0.4 episode: its task's answer, the last trace's reply and the weighted sum of every trace's rewards. */
function fromEpisode(record: Json, line: number): Omit<Rollout, 'line'> | string {
  const task = isObject(record.task) ? record.task : {};
  const data = isObject(task.data) ? task.data : {};
  const traces = (record.traces as unknown[]).filter(isObject);
  const first = traces[0] ?? {};
  const traceData = isObject(first.task) && isObject(first.task.data) ? first.task.data : {};
  const answer = answerText(data.answer ?? traceData.answer);
  if (answer === null) return 'its task has no "answer"';
  let completion: string | null = null;
  let recorded: number | null = null;
  for (const trace of traces) {
    const nodes = Array.isArray(trace.nodes) ? trace.nodes : [];
    const messages = nodes.map((node) => (isObject(node) ? node.message : undefined)).filter(isObject);
    const reply =
      typeof trace.root_reply === 'string'
        ? trace.root_reply
        : assistantText(messages.filter((message) => message.role === 'assistant' || message.role === undefined));
    if (reply !== null) completion = reply;
    const rewards = isObject(trace.rewards) ? trace.rewards : {};
    for (const entry of Object.values(rewards)) {
      if (!isObject(entry)) continue;
      const score = finite(entry.score);
      if (score !== null) recorded = (recorded ?? 0) + score * (finite(entry.weight) ?? 1);
    }
    if (Object.keys(rewards).length === 0 && finite(trace.reward) !== null) recorded = finite(trace.reward);
  }
  if (completion === null) return 'no trace has an assistant reply';
  const id = data.id ?? data.idx ?? data.example_id;
  const info = data.info ?? traceData.info;
  return {
    id: id === undefined ? `line ${line}` : String(id),
    step: null,
    prompt: promptText(data.prompt ?? traceData.prompt),
    completion,
    answer,
    recorded,
    info: isObject(info) ? info : {},
  };
}

/** A classic 0.3 rollout (`state_to_output`): completion, answer, reward, example id. */
function fromResult(record: Json, line: number): Omit<Rollout, 'line'> | string {
  const answer = answerText(record.answer);
  if (answer === null) return 'it has no "answer"';
  const completion = assistantText(record.completion);
  if (completion === null) return 'it has no "completion"';
  return {
    id: record.example_id === undefined ? `line ${line}` : String(record.example_id),
    step: null,
    prompt: promptText(record.prompt),
    completion,
    answer,
    recorded: finite(record.reward),
    info: isObject(record.info) ? record.info : {},
  };
}

function fromPlain(record: Json, line: number, fields: FieldMap): Omit<Rollout, 'line'> | string {
  const answer = answerText(lookup(record, fields.answer));
  if (answer === null) return `it has no "${fields.answer}" (the answer; rename it with --field answer=KEY)`;
  const completion = assistantText(lookup(record, fields.completion));
  if (completion === null) return `it has no "${fields.completion}" (the completion; rename it with --field completion=KEY)`;
  const id = lookup(record, fields.id);
  const info = lookup(record, fields.info);
  return {
    id: id === undefined || id === null ? `line ${line}` : String(id),
    step: finite(lookup(record, fields.step)),
    prompt: promptText(lookup(record, fields.prompt)),
    completion,
    answer,
    recorded: finite(lookup(record, fields.reward)),
    info: isObject(info) ? info : {},
  };
}

/** The layout of one line: an episode with traces, a classic rollout, or plain fields. */
export function layoutOf(record: Json, fields: FieldMap): RolloutLayout {
  if (Array.isArray(record.traces)) return 'verifiers-v1';
  const plainRenamed = fields.completion !== DEFAULT_FIELDS.completion || fields.answer !== DEFAULT_FIELDS.answer;
  if (!plainRenamed && 'example_id' in record && 'completion' in record) return 'verifiers-v0';
  return 'plain';
}

export interface RolloutSource {
  file: string;
  /** Set once the first line is read. */
  layout: RolloutLayout | null;
  /** Bytes of the file, for progress. */
  bytes: number;
  /** Bytes read so far (counted by characters: exact for ASCII, close otherwise). */
  read: number;
  rollouts: AsyncGenerator<Rollout>;
  /** Closes the file when the rollouts are not read to the end; reading them all closes it too. */
  close: () => Promise<void>;
}

const SUGGESTION =
  'give the JSONL vf-eval writes (traces.jsonl for verifiers 0.4, results.jsonl for 0.3) or one JSON object per line with completion and answer fields (rename them with --field)';

/** Opens the rollouts file now (a missing file, a device or a FIFO is bad input here); its lines are read as they are asked for. */
export async function openRollouts(file: string, fields: FieldMap = DEFAULT_FIELDS): Promise<RolloutSource> {
  // Read as a text stream reads: a byte that is not UTF-8 becomes U+FFFD.
  const input = await readInputLines(file, { what: 'results file', suggestion: SUGGESTION }, { invalidUtf8: 'replace' });
  const source: RolloutSource = {
    file,
    layout: null,
    bytes: input.size,
    read: 0,
    rollouts: undefined as unknown as AsyncGenerator<Rollout>,
    close: input.close,
  };
  source.rollouts = (async function* () {
    for await (const { line, text: raw } of input.lines) {
      source.read += raw.length + 1;
      if (raw.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch (error) {
        throw new GatekeptError('BAD_DATASET', `results file ${file}: line ${line} is not valid JSON (${(error as Error).message})`, {
          suggestion: SUGGESTION,
        });
      }
      if (!isObject(value)) throw new GatekeptError('BAD_DATASET', `results file ${file}: line ${line} is not a JSON object`, { suggestion: SUGGESTION });
      const here = layoutOf(value, fields);
      source.layout ??= here;
      if (here !== source.layout) {
        throw new GatekeptError('BAD_DATASET', `results file ${file}: line ${line} is in the ${here} layout, earlier lines in the ${source.layout} layout`, {
          suggestion: SUGGESTION,
        });
      }
      const read = here === 'verifiers-v1' ? fromEpisode(value, line) : here === 'verifiers-v0' ? fromResult(value, line) : fromPlain(value, line, fields);
      if (typeof read === 'string')
        throw new GatekeptError('BAD_DATASET', `results file ${file}: line ${line} cannot be scanned: ${read}`, { suggestion: SUGGESTION });
      yield { line, ...read };
    }
  })();
  return source;
}
