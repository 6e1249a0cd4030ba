import { GatekeptError } from '../errors.js';
import type { Probe } from './audit.js';
import { Helper, helperFailure, scrubbedEnv, type HelperPlace, type SmokeEvent } from './helper.js';
import type { DataRow } from './package.js';
import { brief } from './report.js';
import { nextEvent, probesInput, TIMED_OUT, type Deadline, type Observed, type RunContext } from './run-context.js';

/**
 * The OpenEnv package for real: its server under uvicorn on loopback, checked
 * over HTTP, and the probes played as episodes over one WebSocket session.
 */

const HEALTH_POLL_MS = 250;
/** Keys that would hand the agent its answer. */
const GOLD_KEYS = new Set(['answer', 'gold', 'solution', 'ground_truth', 'target', 'expected']);

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function fetchJson(url: string, deadline: Deadline): Promise<{ status: number; body: unknown } | { error: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(Math.max(1, Math.min(5000, deadline.remainingMs))) });
    const text = await response.text();
    try {
      return { status: response.status, body: JSON.parse(text) as unknown };
    } catch {
      return { status: response.status, body: text };
    }
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

export async function runOpenEnv(context: RunContext): Promise<Observed[]> {
  const { pkg, probes, rows, python, workdir, deadline, checks } = context;
  const env = scrubbedEnv(context.home, [pkg.dir]);
  const cpuS = Math.ceil(deadline.seconds * 2);
  const place: HelperPlace = { sandbox: context.sandbox, workdir, readable: [pkg.dir, ...context.pythonPaths], shareNet: true };
  const server = await Helper.start(python, ['serve', pkg.dir, pkg.app, '--memory-mb', String(context.memoryMb), '--cpu-s', String(cpuS)], pkg.dir, env, place);
  context.pids.push(server.pid);
  try {
    const listening = await nextEvent(context, server, ['listening', 'missing', 'too_old']);
    if (listening === TIMED_OUT) {
      throw new GatekeptError('ENV_START_FAILED', `the server did not start within --timeout-s ${deadline.seconds}`, { details: server.stderrTail() });
    }
    if (listening?.event !== 'listening') throw helperFailure(server, listening, python, 'openenv', 'the server did not start');
    const base = `http://127.0.0.1:${String(listening.port)}`;

    // 1. Health: the app imported and uvicorn serves it.
    let health: unknown = null;
    for (;;) {
      if (server.done) {
        throw new GatekeptError('ENV_START_FAILED', `the server ${server.exitDescription()} before /health answered`, { details: server.stderrTail() });
      }
      if (deadline.remainingMs === 0) {
        throw new GatekeptError('ENV_START_FAILED', `GET /health did not answer {"status": "healthy"} within --timeout-s ${deadline.seconds}`, {
          details: [`last answer: ${brief(health)}`, ...server.stderrTail()],
        });
      }
      const answer = await Promise.race([fetchJson(`${base}/health`, deadline), context.interruption]);
      health = 'error' in answer ? answer.error : answer.body;
      if (!('error' in answer) && answer.status === 200 && (answer.body as { status?: unknown } | null)?.status === 'healthy') break;
      await Promise.race([delay(HEALTH_POLL_MS), context.interruption]);
    }
    checks.push({ name: 'health', ok: true, detail: 'GET /health answered {"status": "healthy"}' });

    // 2. Schema and metadata.
    const schema = await fetchJson(`${base}/schema`, deadline);
    const schemaBody =
      'error' in schema
        ? null
        : (schema.body as { action?: { properties?: Record<string, unknown> }; observation?: { properties?: Record<string, unknown> } } | null);
    const actionFields = Object.keys(schemaBody?.action?.properties ?? {});
    const observationFields = Object.keys(schemaBody?.observation?.properties ?? {});
    const schemaOk = actionFields.includes('answer') && observationFields.length > 0 && !observationFields.some((field) => GOLD_KEYS.has(field));
    checks.push({
      name: 'schema',
      ok: schemaOk,
      detail:
        'error' in schema
          ? `GET /schema failed: ${schema.error}`
          : `action fields: ${actionFields.join(', ') || 'none'}; observation fields: ${observationFields.join(', ') || 'none'}`,
    });
    const metadata = await fetchJson(`${base}/metadata`, deadline);
    const name = 'error' in metadata ? undefined : (metadata.body as { name?: unknown } | null)?.name;
    checks.push({
      name: 'metadata',
      ok: name === pkg.envId,
      detail: 'error' in metadata ? `GET /metadata failed: ${metadata.error}` : `name: ${brief(name)}${name === pkg.envId ? '' : ` (expected ${pkg.envId})`}`,
    });

    // 3. Episodes over one WebSocket session, as a trainer plays them.
    const input = probesInput(probes);
    const messageTimeoutS = Math.max(1, Math.min(30, Math.floor(deadline.remainingMs / 1000)));
    const player = await Helper.start(
      python,
      ['play', `ws://127.0.0.1:${String(listening.port)}/ws`, '--message-timeout-s', String(messageTimeoutS)],
      workdir,
      scrubbedEnv(context.home, []),
      place,
      input,
    );
    context.pids.push(player.pid);
    let played: SmokeEvent | null | typeof TIMED_OUT;
    try {
      played = await nextEvent(context, player, ['played', 'missing', 'too_old']);
    } finally {
      await player.stop();
    }
    if (played === TIMED_OUT) {
      throw new GatekeptError('HARNESS_FAILED', `the episodes did not finish within --timeout-s ${deadline.seconds}`, { details: server.stderrTail() });
    }
    if (played?.event !== 'played') {
      const failure = helperFailure(player, played, python, 'openenv', 'playing the episodes failed');
      throw failure.code === 'ENV_START_FAILED'
        ? new GatekeptError('HARNESS_FAILED', failure.message, { details: [...failure.details, ...server.stderrTail()] })
        : failure;
    }
    const results = (played.results as EpisodeWire[] | undefined) ?? [];
    const observed = probes.map((probe, index) => judgeEpisode(probe, results[index], rows));
    if (observed.some((episode) => episode.problems.length > 0) || server.done) context.log.push(...server.stderrTail());
    if (server.done) checks.push({ name: 'server', ok: false, detail: `the server ${server.exitDescription()} during the episodes` });
    return observed;
  } finally {
    await server.stop();
  }
}

interface EpisodeWire {
  reset: { type: string; keys: string[]; question: unknown; row_index: unknown; done: unknown; reward: unknown; message: unknown } | null;
  step: { type: string; keys: string[]; done: unknown; reward: unknown } | null;
  error: string | null;
}

function judgeEpisode(probe: Probe, wire: EpisodeWire | undefined, rows: readonly DataRow[]): Observed {
  if (!wire) return { reward: null, problems: ['not played: the session ended before this episode'] };
  const problems: string[] = [];
  if (wire.reset?.type === 'observation') {
    if (wire.reset.row_index !== probe.row) problems.push(`reset(index=${probe.row}) served row ${brief(wire.reset.row_index)}`);
    const question = rows[probe.row]?.question;
    if (question !== undefined && wire.reset.question !== question)
      problems.push(`reset served the question ${brief(wire.reset.question)}, not row ${probe.row}'s`);
    if (wire.reset.done !== false) problems.push('the episode was over right after reset');
    const leaked = wire.reset.keys.filter((key) => GOLD_KEYS.has(key));
    if (leaked.length > 0) problems.push(`the observation carries ${leaked.join(', ')}`);
  }
  if (wire.error) problems.push(wire.error);
  let reward: number | null = null;
  if (wire.step?.type === 'observation') {
    if (typeof wire.step.reward === 'number') reward = wire.step.reward;
    else problems.push(`step returned reward ${brief(wire.step.reward)}`);
    if (wire.step.done !== true) problems.push('the episode did not end after its one step');
  }
  return { reward, problems };
}
