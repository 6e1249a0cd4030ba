import { GatekeptError } from '../errors.js';
import { readJsonlValues } from '../rows.js';

/**
 * The local files the optional checks read: `--against` question files for
 * contamination, and a `vf-eval` results file for the reward distribution.
 * Both are JSONL; a line that cannot be used is an error naming the line.
 */

export interface AgainstRow {
  file: string;
  line: number;
  text: string;
}

export interface RewardSample {
  line: number;
  reward: number | null;
  malformed: boolean;
}

function messagesText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return null;
  const parts = value
    .filter((message): message is { role?: unknown; content?: unknown } => typeof message === 'object' && message !== null)
    .filter((message) => message.role === undefined || message.role === 'user')
    .map((message) => (typeof message.content === 'string' ? message.content : ''))
    .filter(Boolean);
  return parts.length > 0 ? parts.join('\n\n') : null;
}

export async function loadAgainstFile(file: string): Promise<AgainstRow[]> {
  const suggestion = 'give a JSONL file with one {"question": ...} or {"prompt": ...} object per line';
  const lines = await readJsonlValues(file, { what: 'contamination file', suggestion });
  return lines.map(({ line, value }) => {
    const record = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
    const text = messagesText(record.question) ?? messagesText(record.prompt);
    if (text === null) throw new GatekeptError('BAD_DATASET', `${file}: line ${line} has no "question" or "prompt" text`, { suggestion });
    return { file, line, text };
  });
}

function assistantText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return null;
  for (let i = value.length - 1; i >= 0; i--) {
    const message = value[i] as { role?: unknown; content?: unknown } | null;
    if (message && message.role === 'assistant') return typeof message.content === 'string' ? message.content : '';
  }
  return null;
}

function finite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** One episode of a verifiers 0.4 `traces.jsonl`: the sum of its traces' weighted rewards. */
function sampleV1(record: Record<string, unknown>, line: number): RewardSample {
  const traces = record.traces as unknown[];
  let reward: number | null = null;
  let reply: string | null = null;
  let failed = record.ok === false || (Array.isArray(record.errors) && record.errors.length > 0);
  for (const trace of traces) {
    if (typeof trace !== 'object' || trace === null) continue;
    const t = trace as Record<string, unknown>;
    if (t.ok === false || (Array.isArray(t.errors) && t.errors.length > 0)) failed = true;
    for (const entry of Object.values((t.rewards as Record<string, unknown>) ?? {})) {
      if (typeof entry !== 'object' || entry === null) continue;
      const { score, weight } = entry as { score?: unknown; weight?: unknown };
      const s = finite(score);
      if (s === null) continue;
      reward = (reward ?? 0) + s * (finite(weight) ?? 1);
    }
    const nodes = Array.isArray(t.nodes) ? t.nodes : [];
    const text = typeof t.root_reply === 'string' ? t.root_reply : assistantText(nodes.map((node) => (node as { message?: unknown })?.message));
    if (text !== null) reply = text;
  }
  return { line, reward, malformed: failed || reward === null || reply === null || reply.trim() === '' };
}

/** One rollout of a classic (0.3) `results.jsonl`: its `reward` and `completion`. */
function sampleV0(record: Record<string, unknown>, line: number): RewardSample {
  const reward = finite(record.reward);
  const text = assistantText(record.completion);
  const failed = record.error !== undefined && record.error !== null;
  return { line, reward, malformed: failed || reward === null || text === null || text.trim() === '' };
}

export async function loadResultsFile(file: string): Promise<{ layout: 'verifiers-v1' | 'verifiers-v0'; samples: RewardSample[] }> {
  const suggestion = 'give the results JSONL that vf-eval writes (traces.jsonl for verifiers 0.4, results.jsonl for 0.3)';
  const lines = await readJsonlValues(file, { what: 'results file', suggestion });
  let layout: 'verifiers-v1' | 'verifiers-v0' | null = null;
  const samples = lines.map(({ line, value }) => {
    const record = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
    const here = Array.isArray(record.traces) ? 'verifiers-v1' : 'reward' in record ? 'verifiers-v0' : null;
    if (here === null) throw new GatekeptError('BAD_DATASET', `${file}: line ${line} has neither "traces" (verifiers 0.4) nor "reward" (0.3)`, { suggestion });
    if (layout !== null && here !== layout) throw new GatekeptError('BAD_DATASET', `${file}: line ${line} mixes the 0.4 and 0.3 layouts`, { suggestion });
    layout = here;
    return here === 'verifiers-v1' ? sampleV1(record, line) : sampleV0(record, line);
  });
  return { layout: layout ?? 'verifiers-v0', samples };
}
