/**
 * Verifier workers run by the actors of a Ray cluster. One driver process
 * (python/gatekept_ray.py, in the `ray` virtualenv) connects to the cluster
 * and keeps a pool of actors; each worker this side would start is started
 * by an actor on its node instead, from the same launch (the command line,
 * the environment, the sandbox's files and filter, as data), and its
 * protocol pipes are tunnelled through the driver. Everything else (the
 * requests, the replies' checks, the timeouts, the restarts, the judging)
 * stays with PythonSession, so a call's result is the one a local worker
 * gives.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutorInfo } from '../../calls.js';
import { GatekeptError } from '../../errors.js';
import { isRecord } from '../../hand-check.js';
import { PACKAGE_ROOT } from '../../paths.js';
import { pythonEnv } from '../python-env.js';
import { MIN_PYTHON, versionText } from '../python-minimum.js';
import { setupVenvDir } from '../resolve-python.js';
import { launchCommand, LineFramer, PythonProcess, waitFor } from '../python-process.js';
import type { NormalisedOptions } from '../session-options.js';
import type { WorkerLaunch, WorkerLauncher, WorkerProcess } from '../worker.js';
import { RemoteProcess } from './remote-process.js';

export interface RayOptions {
  /** The cluster's address as `ray.init` takes it (HOST:PORT, ray://HOST:PORT); 'auto' or none: the cluster this node belongs to. */
  address?: string;
  /** The interpreter of a virtualenv with Ray (default: the one `scripts/setup-python-env.sh ray` builds). */
  python?: string;
  /** Actors, each running one worker at a time at its full speed (default: the pool's worker count). */
  actors?: number;
  /** How long connecting and placing the actors may take (default: $GATEKEPT_RAY_CONNECT_TIMEOUT_MS, else 30 s). */
  connectTimeoutMs?: number;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
/** Importing Ray and starting the driver's core worker, on top of the connect itself. */
const DRIVER_START_MS = 30_000;
const SHUTDOWN_WAIT_MS = 10_000;
/** What a launch may carry of the work directory's files to a node that lacks them. */
const MAX_SHIPPED_BYTES = 16 * 1024 * 1024;
export const DRIVER_PATH = path.join(PACKAGE_ROOT, 'python', 'gatekept_ray.py');

/** The interpreter of the venv `scripts/setup-python-env.sh ray` builds. */
export function defaultRayPython(): string {
  return path.join(setupVenvDir('ray'), 'bin', 'python');
}

const isText = (value: unknown): value is string => typeof value === 'string';

export class RayBackend implements WorkerLauncher {
  private readonly processes = new Map<number, RemoteProcess>();
  private readonly starting = new Map<number, { resolve: (actor: string) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private holders = 0;
  private closing: Promise<void> | null = null;
  private gone = false;
  /** Where the calls ran, for the record; the pool adds where each gold ran. */
  readonly info: ExecutorInfo;
  /** Told each lost actor as it is lost. */
  onLost: ((actor: string, reason: string) => void) | null = null;

  private constructor(
    private readonly driver: PythonProcess,
    address: string,
    actors: number,
    nodes: number,
  ) {
    this.info = { kind: 'ray', address, actors, nodes, lost: [] };
  }

  /** Start the driver and connect it to the cluster: a clear error within the connect timeout, never a hang. */
  static async connect(options: RayOptions, defaultActors: number): Promise<RayBackend> {
    const python = options.python ?? defaultRayPython();
    if (!existsSync(python)) {
      throw new GatekeptError('PYTHON_PACKAGE_MISSING', `--ray needs a Python with Ray, and there is none at ${python}`, {
        suggestion:
          "build it with `bash scripts/setup-python-env.sh ray`, or pass the interpreter of a virtualenv with Ray (the cluster's version) with --ray-python",
      });
    }
    const address = options.address ?? 'auto';
    const actors = Math.max(1, options.actors ?? defaultActors);
    const fromEnv = Number(process.env.GATEKEPT_RAY_CONNECT_TIMEOUT_MS);
    const connectTimeoutMs = options.connectTimeoutMs ?? (Number.isFinite(fromEnv) && fromEnv > 0 ? fromEnv : DEFAULT_CONNECT_TIMEOUT_MS);
    const driver = await PythonProcess.start({
      python,
      args: [DRIVER_PATH],
      cwd: tmpdir(),
      // Ray's own settings (RAY_*) are the one thing of the caller's environment it gets: a cluster on loopback needs one.
      env: pythonEnv({ home: homedir(), tmp: tmpdir(), pythonpath: [], extra: rayVariables() }),
      protocol: true,
      outputCapBytes: 64 * 1024,
      minimumVersion: versionText(MIN_PYTHON),
    });
    driver.unref();
    driver.replies!.setEncoding('utf8');
    let listen: (chunk: string) => void = () => undefined;
    const connected = await keepingAlive(
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(unreachable(address, `no answer within ${Math.round((connectTimeoutMs + DRIVER_START_MS) / 1000)} s`)),
          connectTimeoutMs + DRIVER_START_MS,
        );
        const framer = new LineFramer((lines) => {
          for (const line of lines) {
            let message: unknown;
            try {
              message = JSON.parse(line);
            } catch {
              clearTimeout(timer);
              return reject(new GatekeptError('HARNESS_PROTOCOL', `the Ray driver wrote something that is not a reply: ${line.slice(0, 200)}`));
            }
            clearTimeout(timer);
            if (isRecord(message) && message.op === 'connected') return resolve(message);
            const said = isRecord(message) && isText(message.message) ? message.message : line.slice(0, 200);
            return reject(unreachable(address, said));
          }
        });
        listen = (chunk: string): void => framer.push(chunk);
        driver.replies!.on('data', listen);
        void driver.exited.then(() => {
          setTimeout(() => {
            clearTimeout(timer);
            const stderr = driver.stderrTail(8);
            const missing = stderr.some((text) => /No module named 'ray'/.test(text));
            reject(
              missing
                ? new GatekeptError('PYTHON_PACKAGE_MISSING', `${python} has no Ray`, {
                    suggestion: 'build the Ray virtualenv with `bash scripts/setup-python-env.sh ray`, or pass one with --ray-python',
                  })
                : unreachable(address, `the driver ${driver.exitDescription()}`, stderr),
            );
          }, 200);
        });
        driver.requests!.write(`${JSON.stringify({ op: 'connect', address, actors, connect_timeout_s: connectTimeoutMs / 1000 })}\n`);
      }),
    ).catch(async (error: unknown) => {
      await driver.stop(0);
      throw error;
    });
    driver.replies!.off('data', listen);
    const names = Array.isArray(connected.actors) ? connected.actors.map((actor) => (isRecord(actor) && isText(actor.name) ? actor.name : '?')) : [];
    const nodes = typeof connected.nodes === 'number' ? connected.nodes : 1;
    const backend = new RayBackend(driver, address, names.length, nodes);
    backend.actors.push(...names);
    backend.listen();
    return backend;
  }

  private listen(): void {
    const framer = new LineFramer((lines) => {
      for (const line of lines) this.receive(line);
    });
    this.driver.replies!.on('data', (chunk: string) => framer.push(chunk));
    void this.driver.exited.then(() => {
      // Without its driver no actor is reachable: every worker is lost.
      this.gone = true;
      for (const [id, waiting] of this.starting) {
        this.starting.delete(id);
        waiting.reject(new GatekeptError('HARNESS_FAILED', `the Ray driver ${this.driver.exitDescription()}`, { details: this.driver.stderrTail(8) }));
      }
      for (const process of this.processes.values()) process.exit({ code: null, signal: null, lost: 'the Ray driver ended' }, '', '');
      this.processes.clear();
    });
  }

  private receive(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      message = null;
    }
    if (!isRecord(message) || !isText(message.op)) {
      // A driver that says what it should not cannot be trusted with the calls.
      this.driver.kill();
      return;
    }
    const id = typeof message.id === 'number' ? message.id : -1;
    switch (message.op) {
      case 'started': {
        const waiting = this.starting.get(id);
        this.starting.delete(id);
        waiting?.resolve(isText(message.actor) ? message.actor : '?');
        return;
      }
      case 'start_failed': {
        const waiting = this.starting.get(id);
        this.starting.delete(id);
        this.processes.delete(id);
        waiting?.reject(
          new GatekeptError(
            'HARNESS_FAILED',
            `no actor of the Ray cluster could start the worker: ${isText(message.message) ? message.message : 'no reason given'}`,
          ),
        );
        return;
      }
      case 'data':
        if (isText(message.data)) this.processes.get(id)?.data(message.data);
        return;
      case 'exit': {
        const process = this.processes.get(id);
        this.processes.delete(id);
        const signal = isText(message.signal) ? (message.signal as NodeJS.Signals) : null;
        const code = typeof message.code === 'number' ? message.code : null;
        const lost = isText(message.lost) ? message.lost : undefined;
        process?.exit({ code, signal, ...(lost ? { lost } : {}) }, isText(message.stdout) ? message.stdout : '', isText(message.stderr) ? message.stderr : '');
        return;
      }
      case 'actor_lost': {
        const actor = isText(message.actor) ? message.actor : '?';
        const reason = isText(message.reason) ? message.reason : 'no reason given';
        this.info.lost.push({ actor, reason });
        if (isText(message.replacement)) this.actors.push(message.replacement);
        this.onLost?.(actor, reason);
        return;
      }
      default:
        return;
    }
  }

  private send(message: Record<string, unknown>): void {
    if (this.gone || this.driver.done) return;
    this.driver.requests!.write(`${JSON.stringify(message)}\n`);
  }

  retain(): void {
    this.holders += 1;
  }

  /** Let go of it; the last holder to let go shuts the driver and its actors down. */
  async release(): Promise<void> {
    this.holders -= 1;
    if (this.holders <= 0) await this.close();
  }

  /** Kill the actors and end the driver. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.send({ op: 'shutdown' });
      await waitFor(this.driver.exited, SHUTDOWN_WAIT_MS);
      // A driver that did not end in time is killed; Ray then ends the actors it owned.
      await this.driver.stop(0);
    })();
    return this.closing;
  }

  /** Kill one actor as a lost node would (the tests' and the benchmark's fault). */
  killActor(actor: string): void {
    this.send({ op: 'kill_actor', actor });
  }

  /** The actors' names, in the order they were made (replacements included). */
  readonly actors: string[] = [];

  /** A launcher that starts each worker on the actor its last one ran on, while that actor lives (see RayPlacement). */
  placement(): RayPlacement {
    return new RayPlacement(this);
  }

  async start(options: NormalisedOptions, launch: WorkerLaunch, placement: RayPlacement | null = null): Promise<WorkerProcess> {
    if (this.gone) throw new GatekeptError('HARNESS_FAILED', 'the Ray driver has ended');
    const spec = await remoteSpec(options, launch);
    const id = this.nextId++;
    const process = new RemoteProcess(
      options.outputCapBytes,
      (data) => this.send({ op: 'write', id, data }),
      () => this.send({ op: 'kill', id }),
    );
    this.processes.set(id, process);
    const actor = await keepingAlive(
      new Promise<string>((resolve, reject) => {
        this.starting.set(id, { resolve, reject });
        this.send({ op: 'start', id, spec, actor: placement?.actor ?? null });
      }),
    );
    placement?.placed(actor);
    return process;
  }
}

/**
 * Where one session's workers run: the actor its first worker was started
 * on, and the same one for every worker started after it (a crash's, a
 * timeout's), until that actor is lost; then the next worker goes to one
 * other actor, and stays there. The pool hands a session the calls of its
 * own golds only, so a gold's calls all run on one node, and a lost node's
 * golds move together.
 */
export class RayPlacement implements WorkerLauncher {
  /** The actors its workers were started on, in order, each once per stay. */
  readonly history: string[] = [];

  constructor(private readonly backend: RayBackend) {}

  get actor(): string | null {
    return this.history.at(-1) ?? null;
  }

  placed(actor: string): void {
    if (actor !== this.actor) this.history.push(actor);
  }

  start(options: NormalisedOptions, launch: WorkerLaunch): Promise<WorkerProcess> {
    return this.backend.start(options, launch, this);
  }

  retain(): void {
    this.backend.retain();
  }

  release(): Promise<void> {
    return this.backend.release();
  }
}

/**
 * The driver is unref'd, as a local worker is, so that an idle pool does not
 * keep Node running; while Node waits on it for an answer, this does.
 */
async function keepingAlive<T>(promise: Promise<T>): Promise<T> {
  const timer = setInterval(() => undefined, 60_000);
  try {
    return await promise;
  } finally {
    clearInterval(timer);
  }
}

function rayVariables(): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (name.startsWith('RAY_') && value !== undefined) variables[name] = value;
  return variables;
}

function unreachable(address: string, reason: string, details: string[] = []): GatekeptError {
  return new GatekeptError('HARNESS_FAILED', `cannot use the Ray cluster at ${address}: ${reason}`, {
    details,
    suggestion:
      address === 'auto'
        ? 'start a cluster on this node (`ray start --head`) or give its address with --ray HOST:PORT'
        : `check that a Ray head runs at ${address} with the same Ray version as --ray-python's (\`ray status --address ${address}\`), or run without --ray`,
  });
}

/**
 * The launch as data. The sandbox is built without the overlays that local
 * launches enter through nsenter: the namespace holding them lives on this
 * machine only, so an actor's worker runs in its node's plain bubblewrap,
 * whose filter then refuses every unix socket (see docs/isolation.md).
 */
async function remoteSpec(options: NormalisedOptions, launch: WorkerLaunch): Promise<Record<string, unknown>> {
  const sandbox = launch.sandbox ? { sandbox: { ...launch.sandbox.sandbox, overlays: false, overlayTools: null }, layout: launch.sandbox.layout } : undefined;
  const command = await launchCommand({ python: options.python, args: [launch.harness], ...(sandbox ? { sandbox } : {}) });
  const seccomp = command.seccompFile ? readFileSync(command.seccompFile).toString('base64') : null;
  return {
    argv: [command.command, ...command.args],
    cwd: launch.cwd,
    env: launch.env,
    seccomp,
    output_cap: options.outputCapBytes,
    files: sandbox ? workDirFiles(sandbox.layout.scratch) : {},
  };
}

/**
 * The files the launch names in the run's work directory (account files,
 * the compiled harness, the harness's neutral copies), for a node that lacks
 * them: written there at the same paths before the worker starts.
 */
function workDirFiles(root: string): Record<string, string> {
  const files: Record<string, string> = {};
  let total = 0;
  const walk = (dir: string, depth: number): void => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      const stats = statSync(full, { throwIfNoEntry: false });
      if (!stats) continue;
      if (stats.isDirectory()) {
        // home/ and tmp/ are the worker's own (in the sandbox, fresh file systems).
        if (depth === 0 && (name === 'home' || name === 'tmp')) continue;
        if (depth < 4) walk(full, depth + 1);
      } else if (stats.isFile() && !name.endsWith('.tmp')) {
        total += stats.size;
        if (total > MAX_SHIPPED_BYTES) return;
        files[full] = readFileSync(full).toString('base64');
      }
    }
  };
  walk(root, 0);
  return files;
}
