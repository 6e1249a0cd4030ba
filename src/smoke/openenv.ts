import { GatekeptError } from '../errors.js';
import type { Probe } from './audit.js';
import { Helper, helperFailure, scrubbedEnv, type HelperPlace, type SmokeEvent } from './helper.js';
import type { DataRow } from './package.js';
import { brief, type SmokeCheck } from './report.js';
import { nextEvent, probesInput, TIMED_OUT, type Observed, type RunContext } from './run-context.js';

/**
 * The OpenEnv package for real: its server under uvicorn and a player in one
 * helper process (python/smoke.py's `openenv` mode), so both share one
 * sandbox and meet on its own loopback; the package never has the host's
 * network. The helper reports the HTTP routes' answers and the episodes,
 * played over one WebSocket session; they are judged here.
 */

/** Keys that would hand the agent its answer. */
const GOLD_KEYS = new Set(['answer', 'gold', 'solution', 'ground_truth', 'target', 'expected']);

/** A route's answer as the helper saw it. */
type RouteAnswer = { status: number; body: unknown } | { error: string };

export async function runOpenEnv(context: RunContext): Promise<Observed[]> {
  const { pkg, probes, rows, python, workdir, deadline, checks } = context;
  const cpuS = Math.ceil(deadline.seconds * 2);
  const place: HelperPlace = { sandbox: context.sandbox, workdir, readable: [pkg.dir, ...context.pythonPaths] };
  const timeoutS = Math.max(1, Math.ceil(deadline.remainingMs / 1000));
  const helper = await Helper.start(
    python,
    ['openenv', pkg.dir, pkg.app, '--memory-mb', String(context.memoryMb), '--cpu-s', String(cpuS), '--timeout-s', String(timeoutS)],
    pkg.dir,
    scrubbedEnv(context.home, []),
    place,
    probesInput(probes),
  );
  context.pids.push(helper.pid);
  try {
    const listening = await nextEvent(context, helper, ['listening', 'missing', 'too_old', 'server_exit', 'start_timeout']);
    if (listening === TIMED_OUT || listening?.event === 'start_timeout') {
      throw new GatekeptError('ENV_START_FAILED', `the server did not start within --timeout-s ${deadline.seconds}`, { details: helper.stderrTail() });
    }
    if (listening?.event === 'server_exit') {
      throw new GatekeptError('ENV_START_FAILED', `the server did not start: the Python process ${String(listening.exit)}`, { details: helper.stderrTail() });
    }
    if (listening?.event !== 'listening') throw helperFailure(helper, listening, python, 'openenv', 'the server did not start');

    // 1. Health: the app imported and uvicorn serves it.
    const health = await nextEvent(context, helper, ['health']);
    if (health === TIMED_OUT || (health !== null && health.ok !== true && typeof health.exit !== 'string')) {
      throw new GatekeptError('ENV_START_FAILED', `GET /health did not answer {"status": "healthy"} within --timeout-s ${deadline.seconds}`, {
        details: [`last answer: ${brief(health === TIMED_OUT ? null : health.last)}`, ...helper.stderrTail()],
      });
    }
    if (health === null) throw helperFailure(helper, null, python, 'openenv', 'the server did not start');
    if (health.ok !== true) {
      throw new GatekeptError('ENV_START_FAILED', `the server ${String(health.exit)} before /health answered`, { details: helper.stderrTail() });
    }
    checks.push({ name: 'health', ok: true, detail: 'GET /health answered {"status": "healthy"}' });

    // 2. Schema and metadata.
    const routes = await nextEvent(context, helper, ['routes']);
    if (routes === TIMED_OUT)
      throw new GatekeptError('HARNESS_FAILED', `the routes did not answer within --timeout-s ${deadline.seconds}`, { details: helper.stderrTail() });
    if (routes === null) throw harnessFailure(helper, null, python, 'checking the routes failed');
    checks.push(...judgeRoutes(routes.schema as RouteAnswer, routes.metadata as RouteAnswer, pkg.envId));

    // 3. Episodes over one WebSocket session, as a trainer plays them.
    const played = await nextEvent(context, helper, ['played', 'play_failed']);
    if (played === TIMED_OUT) {
      throw new GatekeptError('HARNESS_FAILED', `the episodes did not finish within --timeout-s ${deadline.seconds}`, { details: helper.stderrTail() });
    }
    if (played?.event !== 'played') {
      throw played === null
        ? harnessFailure(helper, null, python, 'playing the episodes failed')
        : new GatekeptError('HARNESS_FAILED', `playing the episodes failed: ${String(played.message)}`, { details: helper.stderrTail() });
    }
    const results = (played.results as EpisodeWire[] | undefined) ?? [];
    const observed = probes.map((probe, index) => judgeEpisode(probe, results[index], rows));
    const serverExit = typeof played.exit === 'string' ? played.exit : null;
    if (observed.some((episode) => episode.problems.length > 0) || serverExit !== null) context.log.push(...helper.stderrTail());
    if (serverExit !== null) checks.push({ name: 'server', ok: false, detail: `the server ${serverExit} during the episodes` });
    return observed;
  } finally {
    await helper.stop();
  }
}

/** A helper that ended without its answer after the server started: gatekept's side failed, not the package's start. */
function harnessFailure(helper: Helper, event: SmokeEvent | null, python: string, what: string): GatekeptError {
  const failure = helperFailure(helper, event, python, 'openenv', what);
  return failure.code === 'ENV_START_FAILED' ? new GatekeptError('HARNESS_FAILED', failure.message, { details: failure.details }) : failure;
}

function judgeRoutes(schema: RouteAnswer, metadata: RouteAnswer, envId: string): SmokeCheck[] {
  const schemaBody =
    'error' in schema
      ? null
      : (schema.body as { action?: { properties?: Record<string, unknown> }; observation?: { properties?: Record<string, unknown> } } | null);
  const actionFields = Object.keys(schemaBody?.action?.properties ?? {});
  const observationFields = Object.keys(schemaBody?.observation?.properties ?? {});
  const schemaOk = actionFields.includes('answer') && observationFields.length > 0 && !observationFields.some((field) => GOLD_KEYS.has(field));
  const name = 'error' in metadata ? undefined : (metadata.body as { name?: unknown } | null)?.name;
  return [
    {
      name: 'schema',
      ok: schemaOk,
      detail:
        'error' in schema
          ? `GET /schema failed: ${schema.error}`
          : `action fields: ${actionFields.join(', ') || 'none'}; observation fields: ${observationFields.join(', ') || 'none'}`,
    },
    {
      name: 'metadata',
      ok: name === envId,
      detail: 'error' in metadata ? `GET /metadata failed: ${metadata.error}` : `name: ${brief(name)}${name === envId ? '' : ` (expected ${envId})`}`,
    },
  ];
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
