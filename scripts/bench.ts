/**
 * Speed and scale benchmark of `gatekept gate`.
 *
 * For a trivial verifier and for one costing about 1 ms per call, at about
 * 1k, 10k and 100k candidates (dataset rows × corpus via --dataset), it runs
 * the real CLI and prints candidates per second, wall time and peak memory,
 * and the ratio to a reference: one plain Python loop in one process calling
 * the same verifier on the same requests. Results go to results/bench.json
 * and results/bench.md with the machine's details.
 *
 *   npm run bench [-- --sizes 1000,10000,100000 --workers 2]
 *
 * Targets on a 2-core machine: ≥ 30k candidates/s end to end for the trivial
 * verifier at 100k; the 1 ms verifier within 1.15× of reference / workers;
 * peak memory at 100k within 1.5× of that at 10k.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { gate } from '../src/audit/gate.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import type { EvalRequest } from '../src/runtime/python-session.js';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000,100000' },
    workers: { type: 'string', default: String(os.availableParallelism()) },
    python: { type: 'string', default: process.env.GATEKEPT_PYTHON ?? 'python3' },
    'dry-run': { type: 'boolean', default: false },
  },
});
const sizes = values.sizes!.split(',').map(Number);
const workers = Number(values.workers);
const python = values.python!;
const dir = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-'));
const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');

const VERIFIERS = [
  { name: 'trivial', spec: 'examples/verifiers/strict.py:reward' },
  { name: '1 ms', spec: 'scripts/fixtures/slow-strict.py:reward' },
] as const;

interface Row {
  verifier: string;
  target: number;
  candidates: number;
  evaluations: number;
  rows: number;
  wall_s: number;
  candidates_per_s: number;
  peak_rss_mb: number;
  reference_s: number;
  ratio_to_reference_per_worker: number;
}

/** Distinct integer golds, so every row is its own audit. */
function writeDataset(rows: number): string {
  const file = path.join(dir, `rows-${rows}.jsonl`);
  const lines = Array.from({ length: rows }, (_, index) => JSON.stringify({ question: `q${index}`, answer: String(1000 + index * 37) }));
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function writePolicy(rows: number): string {
  const file = path.join(dir, `policy-${rows}.toml`);
  writeFileSync(file, `[budget]\nrows = ${rows}\n[timeouts]\ntotal_s = 3600\n`);
  return file;
}

/** Run the CLI under /usr/bin/time for the peak resident set of the largest process. */
function runCli(spec: string, dataset: string, policy: string): { wallS: number; peakMb: number; record: { corpus: { candidates: number }; timing: { evaluations: number } } } {
  const started = performance.now();
  const run = spawnSync('/usr/bin/time', ['-f', 'PEAK_KB %M', process.execPath, BIN, 'gate', '--reward', spec, '--dataset', dataset, '--policy', policy, '--json', '--python', python, '--workers', String(workers)], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024,
  });
  const wallS = (performance.now() - started) / 1000;
  if (run.status !== 0 && run.status !== 1) throw new Error(`gate failed (${run.status}): ${run.stderr}`);
  const peak = /PEAK_KB (\d+)/.exec(run.stderr);
  return { wallS, peakMb: peak ? Number(peak[1]) / 1024 : Number.NaN, record: JSON.parse(run.stdout) };
}

function reference(spec: string, requestsFile: string): number {
  const [file, fn] = [spec.slice(0, spec.lastIndexOf(':')), spec.slice(spec.lastIndexOf(':') + 1)];
  const out = execFileSync(python, [path.join(PACKAGE_ROOT, 'scripts', 'reference-loop.py'), `${path.join(PACKAGE_ROOT, file)}:${fn}`, requestsFile], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return (JSON.parse(out.trim().split('\n').pop()!) as { loop_s: number }).loop_s;
}

// Candidates per row for this corpus and a boxed-only verifier.
const one = await gate({ reward: VERIFIERS[0].spec, answer: '1000', python, cwd: PACKAGE_ROOT, workers: 1 });
const perRow = one.record.corpus.candidates;

const results: Row[] = [];
for (const target of sizes) {
  const rows = Math.max(1, Math.round(target / perRow));
  const dataset = writeDataset(rows);
  const policy = writePolicy(rows);
  // Both verifiers accept exactly \boxed{}, so the gate sends them the same
  // requests; they are captured once, with the fast one.
  const requests: EvalRequest[] = [];
  await gate({
    reward: VERIFIERS[0].spec,
    dataset,
    policy: { ...DEFAULT_POLICY, budget: { ...DEFAULT_POLICY.budget, rows }, timeouts: { ...DEFAULT_POLICY.timeouts, totalS: 3600 } },
    python,
    cwd: PACKAGE_ROOT,
    onRequests: (batch) => {
      for (const request of batch) requests.push(request);
    },
  });
  const requestsFile = path.join(dir, `requests-${rows}.jsonl`);
  writeFileSync(requestsFile, requests.map((request) => JSON.stringify(request)).join('\n') + '\n');
  for (const verifier of VERIFIERS) {
    const cli = runCli(verifier.spec, dataset, policy);
    const referenceS = reference(verifier.spec, requestsFile);
    const row: Row = {
      verifier: verifier.name,
      target,
      candidates: cli.record.corpus.candidates,
      evaluations: cli.record.timing.evaluations,
      rows,
      wall_s: Number(cli.wallS.toFixed(2)),
      candidates_per_s: Math.round(cli.record.corpus.candidates / cli.wallS),
      peak_rss_mb: Number(cli.peakMb.toFixed(1)),
      reference_s: Number(referenceS.toFixed(2)),
      ratio_to_reference_per_worker: Number((cli.wallS / (referenceS / workers)).toFixed(2)),
    };
    results.push(row);
    console.log(JSON.stringify(row));
  }
}

const machine = {
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores: os.availableParallelism(),
  memory_gb: Number((os.totalmem() / 1024 ** 3).toFixed(1)),
  node: process.version,
  python: one.record.environment.python,
  workers,
  date: new Date().toISOString().slice(0, 10),
};
const table = [
  `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memory_gb} GB, Node ${machine.node}, Python ${machine.python}, ${workers} workers (${machine.date}).`,
  '',
  '| verifier | candidates | rows | wall (s) | candidates/s | peak RSS (MB) | reference loop (s) | wall / (reference / workers) |',
  '|---|---|---|---|---|---|---|---|',
  ...results.map((row) => `| ${row.verifier} | ${row.candidates} | ${row.rows} | ${row.wall_s} | ${row.candidates_per_s} | ${row.peak_rss_mb} | ${row.reference_s} | ${row.ratio_to_reference_per_worker} |`),
].join('\n');
console.log(`\n${table}`);
if (!values['dry-run']) {
  writeFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.json'), `${JSON.stringify({ machine, results }, null, 2)}\n`);
  writeFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.md'), `# Gate benchmark\n\nGenerated by \`npm run bench\`.\n\n${table}\n`);
}
