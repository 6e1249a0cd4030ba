/**
 * The benchmark of `--ray`: rollouts per second of `gatekept scan` on a 1 ms
 * verifier (a busy wait, as scripts/fixtures/slow-strict.py's, on string
 * completions), with the local worker pool and with the same number of
 * actors of a Ray head started here on loopback, and the ratio of the two.
 * Both runs' records are checked equal but for timing and executor.
 *
 * The Ray time includes connecting to the cluster and starting the actors,
 * as a user's run does; the record's own rollouts/s is given beside it.
 *
 *   npm run bench:ray
 *   npx tsx scripts/bench-ray.ts --rollouts 5000 --workers 2 --python python3
 *
 * Prints a Markdown table; writes results/bench-ray.json and results/bench-ray.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeRollouts } from './bench-rollouts.js';
import { prepareRayPython, RAY_LOOPBACK_ENV, startRayHead } from '../test/support/ray-head.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'bin', 'gatekept.js');

const { values } = parseArgs({
  options: {
    rollouts: { type: 'string', default: '5000' },
    workers: { type: 'string', default: '2' },
    python: { type: 'string', default: process.env.GATEKEPT_PYTHON ?? 'python3' },
  },
});

const VERIFIER = `import re, time

BOX = re.compile(r"\\\\boxed\\{([^{}]*)\\}")


def reward(completion, answer, **kwargs):
    deadline = time.perf_counter() + 0.001
    while time.perf_counter() < deadline:
        pass
    return 1.0 if any(b.strip() == answer for b in BOX.findall(completion)) else 0.0
`;

interface Run {
  executor: string;
  seconds: number;
  perSecond: number;
  recordPerSecond: number;
  calls: number;
  record: Record<string, unknown>;
}

function measure(executor: string, args: readonly string[]): Run {
  const started = performance.now();
  let stdout: string;
  try {
    stdout = execFileSync(process.execPath, [BIN, ...args], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...RAY_LOOPBACK_ENV },
    });
  } catch (error) {
    // A REJECT exits 1: the record is still on stdout.
    const failed = error as { status?: number; stdout?: string };
    if (failed.status !== 1) throw error;
    stdout = failed.stdout ?? '';
  }
  const seconds = (performance.now() - started) / 1000;
  const record = JSON.parse(stdout) as Record<string, unknown> & { rollouts: { total: number }; timing: { calls: number; rollouts_per_s: number } };
  return {
    executor,
    seconds: Math.round(seconds * 10) / 10,
    perSecond: Math.round(record.rollouts.total / seconds),
    recordPerSecond: record.timing.rollouts_per_s,
    calls: record.timing.calls,
    record,
  };
}

function comparable(record: Record<string, unknown>): string {
  const { timing: _timing, executor: _executor, ...rest } = record;
  return JSON.stringify(rest);
}

async function main(): Promise<void> {
  const rayPython = prepareRayPython();
  if (!rayPython) throw new Error('the ray virtualenv could not be built: run `bash scripts/setup-python-env.sh ray`');
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-ray-'));
  const head = await startRayHead(rayPython);
  const rollouts = Number(values.rollouts);
  const runs: Run[] = [];
  try {
    const verifier = path.join(scratch, 'one_ms.py');
    writeFileSync(verifier, VERIFIER);
    const results = path.join(scratch, 'rollouts.jsonl');
    await writeRollouts(results, rollouts);
    const args = [
      'scan',
      '--results',
      results,
      '--reward',
      `${verifier}:reward`,
      '--field',
      'completion=response,answer=ground_truth',
      '--completion-format',
      'string',
      '--json',
      '--workers',
      values.workers,
      '--python',
      values.python,
    ];
    runs.push(measure('local pool', args));
    runs.push(measure('ray (loopback head)', [...args, '--ray', head.address, '--ray-python', rayPython]));
  } finally {
    await head.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
  const [local, ray] = runs as [Run, Run];
  if (comparable(local.record) !== comparable(ray.record)) throw new Error("the Ray run's record differs from the local run's");
  const ratio = Math.round((ray.seconds / local.seconds) * 100) / 100;
  const table = [
    '| executor | rollouts | verifier calls | wall (s) | rollouts/s (wall) | rollouts/s (record) |',
    '|---|---:|---:|---:|---:|---:|',
    ...runs.map((run) => `| ${run.executor} | ${rollouts} | ${run.calls} | ${run.seconds} | ${run.perSecond} | ${run.recordPerSecond} |`),
  ].join('\n');
  const commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const machine = `${os.cpus()[0]?.model.split(' ').slice(0, 2).join(' ') ?? 'unknown'}, ${os.availableParallelism()} cores, Node ${process.version}`;
  const markdown = [
    '# Ray benchmark',
    '',
    `Generated by \`npm run bench:ray\` at commit \`${commit}\` on ${when} UTC. Machine: ${machine}; load average ${os
      .loadavg()
      .map((load) => load.toFixed(2))
      .join(', ')} at the end. The Ray head runs on the same machine (loopback, ${values.workers} CPUs), one actor a worker.`,
    '',
    `\`gatekept scan\` of ${rollouts} rollouts on a 1 ms verifier, ${values.workers} workers; records equal but for timing and executor.`,
    '',
    table,
    '',
    `Overhead ratio (Ray wall / local wall): ${ratio}x. The Ray wall time includes connecting the driver and starting the actors.`,
    '',
  ].join('\n');
  console.log(markdown);
  mkdirSync(path.join(ROOT, 'results'), { recursive: true });
  writeFileSync(path.join(ROOT, 'results', 'bench-ray.md'), markdown);
  writeFileSync(
    path.join(ROOT, 'results', 'bench-ray.json'),
    `${JSON.stringify({ commit, when, machine, rollouts, workers: Number(values.workers), ratio, runs: runs.map(({ record: _record, ...run }) => run) }, null, 2)}\n`,
  );
}

await main();
