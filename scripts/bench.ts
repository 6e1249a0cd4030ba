/**
 * The speed benchmark of `gatekept gate`, written to be read by people who
 * want to know where an audit's time goes.
 *
 * Every measurement puts the real CLI next to a reference making the SAME
 * verifier calls: a bare `node` start plus one plain Python process that
 * imports the verifier and calls it in a loop (scripts/reference-loop.py).
 * The calls are captured from the gate itself, so calibration, honest
 * variants and alternates are counted, as `timing.evaluations` counts them.
 * Three verifiers: a trivial one, one that costs 1 ms per call, and one built
 * on the real math-verify package (its import time included: users pay it);
 * and a lenient 1 ms one, which rewards most candidates, for what re-scoring
 * them under other golds costs next to the strict one.
 *
 * Two parts:
 * - one answer: the whole `gatekept gate --answer` command against the
 *   reference (medians of --runs, alternating), the start-up cost of an audit;
 * - scale: a dataset sized to about N candidates per verifier, reporting
 *   evaluations per second, the cost of one evaluation end to end against one
 *   Python call, the ratio to the ideal (evaluations × per-call cost /
 *   workers) and to the reference, and peak memory of the process tree.
 *
 * Results go to results/bench.json and results/bench.md, and the tables in
 * docs/performance.md between its bench markers are regenerated from them.
 *
 *   npm run bench                  the full run (several minutes on 2 cores)
 *   npm run bench -- --quick       small sizes, under a minute
 *   npm run bench -- --python "$(bash scripts/setup-python-env.sh verifiers-v1)"
 *   options: --verifiers trivial,1ms,math-verify,1ms-lenient  --trivial 1000,100000
 *            --slow 1000,5000  --math 1000  --lenient 5000  --workers 2  --runs 9
 *            --single-only (one answer only; prints, writes nothing)
 *            --dry-run (print, write nothing)
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gate } from '../src/gate.js';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import type { AuditRecord } from '../src/audit/record.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const VERIFIERS = {
  trivial: { label: 'trivial', spec: 'examples/verifiers/strict.py:reward' },
  '1ms': { label: '1 ms', spec: 'scripts/fixtures/slow-strict.py:reward' },
  'math-verify': { label: 'math-verify', spec: 'scripts/fixtures/math-verify.py:reward' },
  // Audited on the 1 ms verifier's rows (when that one runs too), so that the two differ only in what they reward.
  '1ms-lenient': { label: '1 ms, lenient', spec: 'scripts/fixtures/slow-lenient.py:reward', rowsOf: '1ms' },
} as const satisfies Record<string, { label: string; spec: string; rowsOf?: string }>;
type VerifierKey = keyof typeof VERIFIERS;

const FULL = { trivial: '1000,10000,100000,1000000', slow: '1000,5000,20000', math: '1000,5000,20000', lenient: '5000', runs: '9' };
const QUICK = { trivial: '1000,10000', slow: '1000', math: '', lenient: '1000', runs: '3' };
const GOLD = '1037';
/** The page that shows the results. */
export const DOC = path.join(PACKAGE_ROOT, 'docs', 'performance.md');
const BEGIN = '<!-- bench:begin -->';
const END = '<!-- bench:end -->';
const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const REFERENCE = path.join(PACKAGE_ROOT, 'scripts', 'reference-loop.py');
/**
 * Generous limits, so a call slowed down by a busy machine (math-verify's
 * first parse builds its grammar) does not stop an audit early and leave the
 * gate and the reference making different calls.
 */
const BENCH_TIMEOUTS = { callMs: 30_000, totalS: 3600 };
const policyToml = (rows: number) => `[budget]\nrows = ${rows}\n[timeouts]\ncall_ms = ${BENCH_TIMEOUTS.callMs}\ntotal_s = ${BENCH_TIMEOUTS.totalS}\n`;

type Phases = Record<string, number>;
/** The record as the CLI prints it; `phases` appears once the gate reports per-phase times. */
type CliRecord = AuditRecord & { timing: AuditRecord['timing'] & { phases?: Phases } };

interface Measured {
  wallS: number;
  status: number | null;
  stdout: string;
  stderr: string;
  /** Peak of the summed resident sets of the command and all its descendants (sampled). */
  treeMb: number;
  /** Peak resident set of the largest single process among them (sampled). */
  processMb: number;
}

interface Reference {
  calls: number;
  import_s: number;
  loop_s: number;
  per_call_us: number;
  errors: number;
  /** Time spent repeating a short loop for a steadier per-call cost; not part of the reference. */
  repeated_s: number;
  /** Time spent reading the requests file; not part of the reference either. */
  read_s: number;
  /** The whole Python process, start to exit, without the repeats and the reading. */
  process_s: number;
}

export interface SingleRow {
  verifier: string;
  evaluations: number;
  candidates: number;
  gate_ms: number;
  reference_ms: number;
  ratio: number;
  node_start_ms: number;
  python_import_ms: number;
  per_call_us: number;
  phases: Phases | null;
  /** `timing.total_ms` of the record: the audit inside the command. */
  audit_ms: number;
}

export interface ScaleRow {
  verifier: string;
  target_candidates: number;
  rows: number;
  candidates: number;
  evaluations: number;
  decision: string;
  wall_s: number;
  evaluations_per_s: number;
  us_per_evaluation: number;
  per_call_us: number;
  ideal_s: number;
  ratio_to_ideal: number;
  reference_s: number;
  ratio_to_reference: number;
  peak_tree_mb: number;
  peak_process_mb: number;
  phases: Phases | null;
  audit_ms: number;
  /** Runs made of it (see medianGate); the reported one is the median. */
  runs?: number;
}

export interface Target {
  target: string;
  measured: string;
  status: 'met' | 'missed' | 'not measured';
}

export interface Bench {
  generated: { command: string; quick: boolean; commit: string; date: string };
  machine: { cpu: string; cores: number; memory_gb: number; os: string; node: string; python: string; workers: number; load_average: number[] };
  single: SingleRow[];
  scale: ScaleRow[];
  targets: Target[];
  /** Runs whose numbers do not mean what the tables say. */
  notes: string[];
}

// ------------------------------------------------------------------ measuring

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function rssKb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** The process and its descendants, from /proc (Linux); just the process elsewhere. */
function processTree(root: number): number[] {
  const seen: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    seen.push(pid);
    try {
      for (const task of readdirSync(`/proc/${pid}/task`)) {
        const children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
        if (children) queue.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // The process is gone, or /proc is not there: its memory is not counted.
    }
  }
  return seen;
}

/** Run a command to completion, sampling the memory of its process tree every 50 ms. */
function measure(command: string, args: string[]): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    let treeKb = 0;
    let processKb = 0;
    const sample = () => {
      if (child.pid === undefined) return;
      const sizes = processTree(child.pid).map(rssKb);
      treeKb = Math.max(
        treeKb,
        sizes.reduce((sum, size) => sum + size, 0),
      );
      processKb = Math.max(processKb, ...sizes);
    };
    const timer = setInterval(sample, 50);
    child.on('error', (error) => {
      clearInterval(timer);
      reject(error);
    });
    child.on('close', (status) => {
      clearInterval(timer);
      resolve({
        wallS: (performance.now() - started) / 1000,
        status,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        treeMb: treeKb / 1024,
        processMb: processKb / 1024,
      });
    });
  });
}

async function runGate(spec: string, python: string, workers: number, input: string[]): Promise<Measured & { record: CliRecord }> {
  const run = await measure(process.execPath, [BIN, 'gate', '--reward', spec, ...input, '--json', '--python', python, '--workers', String(workers)]);
  // Exit 1 is a REJECT, a valid outcome for timing; anything else is a failure of the run.
  if (run.status !== 0 && run.status !== 1) throw new Error(`gatekept gate ${spec} exited ${run.status}:\n${run.stderr}`);
  return { ...run, record: JSON.parse(run.stdout) as CliRecord };
}

/** Scale runs shorter than this are made SCALE_RUNS times, and the one with the median wall time is reported. */
const SCALE_REPEAT_UNDER_S = 10;
const SCALE_RUNS = 3;

/**
 * A short audit's wall time moves by several percent between runs on a
 * shared machine (a bare `node` start alone varies by 20 ms), as much as
 * the targets' margins: those are run SCALE_RUNS times and the median run
 * is reported whole (its record, phases and memory), not a mix of runs.
 */
async function medianGate(spec: string, python: string, workers: number, input: string[]): Promise<Measured & { record: CliRecord; runs: number }> {
  const first = await runGate(spec, python, workers, input);
  if (first.wallS >= SCALE_REPEAT_UNDER_S) return { ...first, runs: 1 };
  const all = [first];
  for (let run = 1; run < SCALE_RUNS; run++) all.push(await runGate(spec, python, workers, input));
  all.sort((a, b) => a.wallS - b.wallS);
  return { ...all[Math.floor(all.length / 2)]!, runs: all.length };
}

export function runReference(python: string, spec: string, requestsFile: string, completionFormat: string): Reference {
  const file = path.resolve(PACKAGE_ROOT, spec.slice(0, spec.lastIndexOf(':')));
  const fn = spec.slice(spec.lastIndexOf(':') + 1);
  const started = performance.now();
  const out = execFileSync(python, [REFERENCE, `${file}:${fn}`, requestsFile, completionFormat], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const result = JSON.parse(out.trim().split('\n').pop()!) as Omit<Reference, 'process_s'>;
  return { ...result, process_s: (performance.now() - started) / 1000 - result.repeated_s - result.read_s };
}

function nodeStartMs(): number {
  const started = performance.now();
  execFileSync(process.execPath, ['-e', '']);
  return performance.now() - started;
}

/**
 * The requests the gate sends for these inputs, written to a JSONL file by an
 * in-process run with the same seed: the audit is deterministic, so the CLI
 * sends the same ones (checked against its `timing.evaluations`).
 */
async function captureRequests(
  file: string,
  spec: string,
  python: string,
  workers: number,
  input: { answer: string } | { dataset: string; rows: number },
): Promise<{ count: number; record: AuditRecord }> {
  const fd = openSync(file, 'w');
  let count = 0;
  try {
    const result = await gate({
      reward: spec,
      ...('answer' in input ? { answer: input.answer } : { dataset: input.dataset }),
      policy: {
        ...DEFAULT_POLICY,
        budget: { ...DEFAULT_POLICY.budget, rows: 'rows' in input ? input.rows : DEFAULT_POLICY.budget.rows },
        timeouts: { ...DEFAULT_POLICY.timeouts, ...BENCH_TIMEOUTS },
      },
      python,
      cwd: PACKAGE_ROOT,
      workers,
      onRequests: (batch) => {
        count += batch.length;
        writeSync(fd, `${batch.map((request) => JSON.stringify(request)).join('\n')}\n`);
      },
    });
    return { count, record: result.record };
  } finally {
    closeSync(fd);
  }
}

// ------------------------------------------------------------------ rendering

const round = (value: number, digits = 2) => Number(value.toFixed(digits));
const phasesText = (phases: Phases | null) =>
  phases
    ? Object.entries(phases)
        .map(([name, ms]) => `${name} ${Math.round(ms)}`)
        .join(', ')
    : '-';

export function evaluateTargets(single: SingleRow[], scale: ScaleRow[]): Target[] {
  const targets: Target[] = [];
  const trivial = scale.filter((row) => row.verifier === 'trivial');
  const big = trivial.filter((row) => row.candidates >= 100_000);
  targets.push({
    target: 'trivial verifier, ≥ 100k candidates: ≥ 100,000 evaluations/s end to end',
    measured: big.length ? big.map((row) => `${row.evaluations_per_s.toLocaleString('en-US')}/s at ${row.candidates.toLocaleString('en-US')}`).join('; ') : '-',
    status: big.length === 0 ? 'not measured' : big.every((row) => row.evaluations_per_s >= 100_000) ? 'met' : 'missed',
  });
  const slow = scale.filter((row) => row.verifier === '1 ms');
  const slowBig = slow.filter((row) => row.evaluations >= 5000);
  targets.push({
    target: '1 ms verifier: within 1.15x of the ideal at ≥ 5k evaluations',
    measured: slowBig.length ? slowBig.map((row) => `${row.ratio_to_ideal}x at ${row.evaluations}`).join('; ') : '-',
    status: slowBig.length === 0 ? 'not measured' : slowBig.every((row) => row.ratio_to_ideal <= 1.15) ? 'met' : 'missed',
  });
  const slowSmall = slow.filter((row) => row.evaluations < 5000);
  targets.push({
    target: '1 ms verifier: within 1.5x of the ideal at 1k',
    measured: slowSmall.length ? slowSmall.map((row) => `${row.ratio_to_ideal}x at ${row.evaluations}`).join('; ') : '-',
    status: slowSmall.length === 0 ? 'not measured' : slowSmall.every((row) => row.ratio_to_ideal <= 1.5) ? 'met' : 'missed',
  });
  const one = single.find((row) => row.verifier === 'trivial');
  targets.push({
    target: 'one `gate` on one answer (trivial verifier): under 1.5x of a bare node start + the Python loop',
    measured: one ? `${one.ratio}x` : '-',
    status: !one ? 'not measured' : one.ratio < 1.5 ? 'met' : 'missed',
  });
  targets.push(
    rescoringTarget(
      slow,
      scale.filter((row) => row.verifier === '1 ms, lenient'),
    ),
  );
  const hundredK = trivial.find((row) => row.target_candidates === 100_000);
  const million = trivial.find((row) => row.target_candidates === 1_000_000);
  const memoryRatio = hundredK && million ? round(million.peak_tree_mb / hundredK.peak_tree_mb) : null;
  targets.push({
    target: 'peak memory at 1M candidates within 1.5x of that at 100k',
    measured: memoryRatio === null ? '-' : `${million!.peak_tree_mb} MB / ${hundredK!.peak_tree_mb} MB = ${memoryRatio}x`,
    status: memoryRatio === null ? 'not measured' : memoryRatio <= 1.5 ? 'met' : 'missed',
  });
  return targets;
}

/**
 * What re-scoring rewarded candidates adds: the lenient 1 ms verifier
 * rewards most candidates, the strict one few, on the same rows, so the
 * lenient audit makes more calls (mostly the invariance test's, re-scoring
 * each rewarded candidate under other golds). The wall time it adds, per call
 * it adds, against the ideal cost of a call (per-call cost / workers), held
 * to the same bar as the 1 ms verifier's other calls at ≥ 5k evaluations.
 */
function rescoringTarget(strict: readonly ScaleRow[], lenient: readonly ScaleRow[]): Target {
  const target = 'invariance re-scoring: the calls it adds cost no more than other calls (within the 1.15x of the ideal set for ≥ 5k evaluations)';
  const pairs = lenient.flatMap((row) => {
    const base = strict.find((other) => other.rows === row.rows);
    return base && row.evaluations > base.evaluations ? [{ base, row }] : [];
  });
  if (pairs.length === 0) return { target, measured: '-', status: 'not measured' };
  const measured = pairs.map(({ base, row }) => {
    const added = row.evaluations - base.evaluations;
    const perAddedMs = ((row.wall_s - base.wall_s) * 1000) / added;
    const idealMs = (base.ideal_s * 1000) / base.evaluations;
    return { added, perAddedMs, ratio: round(perAddedMs / idealMs), idealMs, base };
  });
  return {
    target,
    measured: measured
      .map(
        ({ added, perAddedMs, ratio, idealMs, base }) =>
          `${added.toLocaleString('en-US')} calls added on ${base.rows} rows: ${round(perAddedMs, 3)} ms each, ${ratio}x the ideal ${round(idealMs, 3)} ms`,
      )
      .join('; '),
    status: measured.every(({ ratio }) => ratio <= 1.15) ? 'met' : 'missed',
  };
}

export function renderMarkdown(bench: Bench): string {
  const { machine: m, generated: g } = bench;
  const busy = m.load_average[0]! > m.cores / 2;
  const lines = [
    `Generated by \`${g.command}\`${g.quick ? ' (a quick run: small sizes)' : ''} at commit \`${g.commit}\` on ${g.date}. Machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gb} GB, ${m.os}, Node ${m.node}, Python ${m.python}, ${m.workers} workers; load average ${m.load_average.map((load) => load.toFixed(2)).join(', ')} at the start.`,
    ...(busy
      ? [
          '',
          `**The machine was busy while this ran (load average ${m.load_average[0]!.toFixed(2)} on ${m.cores} cores): these numbers are not representative. Regenerate them on an idle machine with \`npm run bench\`.**`,
        ]
      : []),
    '',
    'The reference is what the same verifier calls cost without gatekept: a bare `node` start plus one Python process that imports the verifier and calls it in a loop on exactly the requests the gate sent (calibration, honest variants, alternates and the re-scored sample included). The ideal is evaluations × the per-call cost of that loop / workers (a loop shorter than 0.2 s is repeated for a steadier per-call cost; the reference time is one pass).',
    '',
    'One answer (`gatekept gate --answer`, the whole command; medians):',
    '',
    '| verifier | evaluations | gate (ms) | node + Python loop (ms) | ratio | node start (ms) | Python start + import (ms) | per call (µs) |',
    '|---|---|---|---|---|---|---|---|',
    ...bench.single.map(
      (row) =>
        `| ${row.verifier} | ${row.evaluations} | ${Math.round(row.gate_ms)} | ${Math.round(row.reference_ms)} | ${row.ratio}x | ${Math.round(row.node_start_ms)} | ${Math.round(row.python_import_ms)} | ${row.per_call_us} |`,
    ),
  ];
  if (bench.scale.length > 0) {
    lines.push(
      '',
      `Scale (\`gatekept gate --dataset\`, rows sized to about the target number of candidates, ${m.workers} workers; a run under ${SCALE_REPEAT_UNDER_S} s is made ${SCALE_RUNS} times and the median one reported):`,
      '',
      '| verifier | candidates | evaluations | wall (s) | evaluations/s | µs per evaluation | µs per Python call | ideal (s) | wall / ideal | reference (s) | wall / reference | peak memory, all processes (MB) | largest process (MB) |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...bench.scale.map(
        (row) =>
          `| ${row.verifier} | ${row.candidates} | ${row.evaluations} | ${row.wall_s} | ${row.evaluations_per_s} | ${row.us_per_evaluation} | ${row.per_call_us} | ${row.ideal_s} | ${row.ratio_to_ideal}x | ${row.reference_s} | ${row.ratio_to_reference}x | ${row.peak_tree_mb} | ${row.peak_process_mb} |`,
      ),
    );
  }
  const withPhases = [
    ...bench.single.map((row) => ({ ...row, where: 'one answer', wall_ms: row.gate_ms })),
    ...bench.scale.map((row) => ({ ...row, where: `${row.candidates} candidates`, wall_ms: row.wall_s * 1000 })),
  ].filter((row) => row.phases);
  if (withPhases.length > 0) {
    lines.push(
      '',
      'Where the time goes: the command, the audit inside it (`timing.total_ms`), and its phases (`timing.phases`), in ms; what the audit does not cover is Node loading the CLI and the processes starting and stopping.',
      '',
      '| verifier | run | command | audit | phases |',
      '|---|---|---|---|---|',
    );
    for (const row of withPhases) lines.push(`| ${row.verifier} | ${row.where} | ${Math.round(row.wall_ms)} | ${row.audit_ms} | ${phasesText(row.phases)} |`);
  }
  lines.push(
    '',
    'Targets (set for a 2-core machine and 2 workers):',
    '',
    '| target | measured | status |',
    '|---|---|---|',
    ...bench.targets.map((target) => `| ${target.target} | ${target.measured} | ${target.status} |`),
  );
  if (bench.notes.length > 0) lines.push('', ...bench.notes.map((note) => `Note: ${note}`));
  return `${lines.join('\n')}\n`;
}

/** The page with the tables between its bench markers replaced. */
export function docWith(doc: string, table: string): string {
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${path.relative(PACKAGE_ROOT, DOC)} lacks the ${BEGIN} / ${END} markers`);
  return `${doc.slice(0, start + BEGIN.length)}\n${table}${doc.slice(end)}`;
}

// ------------------------------------------------------------------ main

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: PACKAGE_ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const sizesOf = (text: string) =>
  text
    .split(',')
    .filter(Boolean)
    .map((size) => {
      const value = Number(size);
      if (!Number.isInteger(value) || value <= 0) throw new Error(`not a size: ${size} (give numbers of candidates, e.g. 1000,10000)`);
      return value;
    });

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      verifiers: { type: 'string', default: Object.keys(VERIFIERS).join(',') },
      trivial: { type: 'string' },
      slow: { type: 'string' },
      math: { type: 'string' },
      lenient: { type: 'string' },
      workers: { type: 'string', default: String(os.availableParallelism()) },
      runs: { type: 'string' },
      python: { type: 'string', default: process.env.GATEKEPT_PYTHON ?? 'python3' },
      'single-only': { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
    },
  });
  const preset = values.quick ? QUICK : FULL;
  const python = values.python!;
  const workers = Number(values.workers);
  const runs = Number(values.runs ?? preset.runs);
  const keys = values.verifiers!.split(',').filter(Boolean) as VerifierKey[];
  const unknown = keys.filter((key) => !(key in VERIFIERS));
  if (unknown.length > 0) throw new Error(`unknown verifier ${unknown.join(', ')}: choose from ${Object.keys(VERIFIERS).join(', ')}`);
  const sizes: Record<VerifierKey, number[]> = values['single-only']
    ? { trivial: [], '1ms': [], 'math-verify': [], '1ms-lenient': [] }
    : {
        trivial: sizesOf(values.trivial ?? preset.trivial),
        '1ms': sizesOf(values.slow ?? preset.slow),
        'math-verify': sizesOf(values.math ?? preset.math),
        '1ms-lenient': sizesOf(values.lenient ?? preset.lenient),
      };
  if (keys.includes('math-verify') && spawnSync(python, ['-c', 'import math_verify']).status !== 0) {
    console.error(
      `${python} cannot import math_verify. Run with --python "$(bash scripts/setup-python-env.sh verifiers-v1)", or leave it out with --verifiers trivial,1ms.`,
    );
    return 2;
  }

  const loadAverage = os.loadavg().map((load) => round(load));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-'));
  const single: SingleRow[] = [];
  const scale: ScaleRow[] = [];
  const notes: string[] = [];
  let pythonVersion = 'unknown';
  /** Candidates one row brings, per verifier: a dataset's rows are sized by it. */
  const perRowOf = new Map<string, number>();
  try {
    const nodeStarts = Array.from({ length: runs }, nodeStartMs);
    const nodeMs = median(nodeStarts);
    for (const key of keys) {
      const verifier = VERIFIERS[key];
      // One answer: the start-up cost, and the candidates one row brings for this verifier.
      const requestsFile = path.join(dir, `${key}-one.jsonl`);
      const onePolicy = path.join(dir, 'policy-one.toml');
      writeFileSync(onePolicy, policyToml(DEFAULT_POLICY.budget.rows));
      const captured = await captureRequests(requestsFile, verifier.spec, python, workers, { answer: GOLD });
      pythonVersion = captured.record.environment.python;
      const format = captured.record.verifier.completion_format;
      const gateMs: number[] = [];
      const referenceMs: number[] = [];
      const importMs: number[] = [];
      let lastReference: Reference | undefined;
      let lastRecord: CliRecord | undefined;
      for (let run = 0; run < runs; run++) {
        const cli = await runGate(verifier.spec, python, workers, ['--answer', GOLD, '--policy', onePolicy]);
        gateMs.push(cli.wallS * 1000);
        lastRecord = cli.record;
        const node = nodeStartMs();
        lastReference = runReference(python, verifier.spec, requestsFile, format);
        referenceMs.push(node + lastReference.process_s * 1000);
        importMs.push((lastReference.process_s - lastReference.loop_s) * 1000);
      }
      if (lastRecord!.timing.evaluations !== captured.count) {
        notes.push(
          `${verifier.label}, one answer: the gate stopped after ${lastRecord!.timing.evaluations} of ${captured.count} calls (a call timed out or failed), so the reference made more calls than it.`,
        );
      }
      const row: SingleRow = {
        verifier: verifier.label,
        evaluations: lastRecord!.timing.evaluations,
        candidates: lastRecord!.corpus.candidates,
        gate_ms: round(median(gateMs), 0),
        reference_ms: round(median(referenceMs), 0),
        ratio: round(median(gateMs) / median(referenceMs)),
        node_start_ms: round(nodeMs, 0),
        python_import_ms: round(median(importMs), 0),
        per_call_us: round(lastReference!.per_call_us, 1),
        phases: lastRecord!.timing.phases ?? null,
        audit_ms: lastRecord!.timing.total_ms,
      };
      single.push(row);
      console.log(JSON.stringify({ single: row }));

      const own = Math.max(1, captured.record.corpus.candidates);
      perRowOf.set(key, own);
      const perRow = ('rowsOf' in verifier ? perRowOf.get(verifier.rowsOf) : undefined) ?? own;
      for (const target of sizes[key]) {
        const rows = Math.max(1, Math.round(target / perRow));
        const dataset = path.join(dir, `rows-${rows}.jsonl`);
        writeFileSync(
          dataset,
          `${Array.from({ length: rows }, (_, index) => JSON.stringify({ question: `q${index}`, answer: String(1000 + index * 37) })).join('\n')}\n`,
        );
        const policy = path.join(dir, `policy-${rows}.toml`);
        writeFileSync(policy, policyToml(rows));
        const scaleRequests = path.join(dir, `${key}-${rows}.jsonl`);
        const scaleCaptured = await captureRequests(scaleRequests, verifier.spec, python, workers, { dataset, rows });
        const cli = await medianGate(verifier.spec, python, workers, ['--dataset', dataset, '--policy', policy]);
        const node = nodeStartMs();
        const reference = runReference(python, verifier.spec, scaleRequests, scaleCaptured.record.verifier.completion_format);
        rmSync(scaleRequests, { force: true });
        const evaluations = cli.record.timing.evaluations;
        if (evaluations !== scaleCaptured.count) {
          notes.push(
            `${verifier.label}, ${target} candidates: the gate stopped after ${evaluations} of ${scaleCaptured.count} calls (a call timed out or failed), so the reference made more calls than it.`,
          );
        }
        const idealS = (evaluations * reference.per_call_us) / 1e6 / workers;
        const referenceS = node / 1000 + reference.process_s;
        const scaleRow: ScaleRow = {
          verifier: verifier.label,
          target_candidates: target,
          rows,
          candidates: cli.record.corpus.candidates,
          evaluations,
          decision: cli.record.decision,
          wall_s: round(cli.wallS),
          evaluations_per_s: Math.round(evaluations / cli.wallS),
          us_per_evaluation: round((cli.wallS * 1e6) / evaluations, 1),
          per_call_us: round(reference.per_call_us, 1),
          ideal_s: round(idealS, 3),
          ratio_to_ideal: round(cli.wallS / idealS),
          reference_s: round(referenceS),
          ratio_to_reference: round(cli.wallS / referenceS),
          peak_tree_mb: round(cli.treeMb, 1),
          peak_process_mb: round(cli.processMb, 1),
          phases: cli.record.timing.phases ?? null,
          audit_ms: cli.record.timing.total_ms,
          runs: cli.runs,
        };
        scale.push(scaleRow);
        console.log(JSON.stringify({ scale: scaleRow }));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const argv = process.argv.slice(2).filter((arg) => arg !== '--dry-run');
  const bench: Bench = {
    generated: {
      // The interpreter is named by what it is, never by a path on this machine.
      command: ['npm run bench', ...(argv.length ? ['--', ...argv.map((arg, index) => (argv[index - 1] === '--python' ? 'PYTHON' : arg))] : [])].join(' '),
      quick: values.quick!,
      commit: gitCommit(),
      date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    },
    machine: {
      cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
      cores: os.availableParallelism(),
      memory_gb: round(os.totalmem() / 1024 ** 3, 1),
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      python: pythonVersion,
      workers,
      load_average: loadAverage,
    },
    single,
    scale,
    targets: evaluateTargets(single, scale),
    notes,
  };
  for (const note of notes) console.warn(`note: ${note}`);
  const markdown = renderMarkdown(bench);
  console.log(`\n${markdown}`);
  // The one-answer part alone would replace the committed tables with half of them.
  if (!values['dry-run'] && !values['single-only']) {
    writeFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.json'), `${JSON.stringify(bench, null, 2)}\n`);
    writeFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.md'), `# Gate benchmark\n\n${markdown}`);
    writeFileSync(DOC, docWith(readFileSync(DOC, 'utf8'), markdown));
  }
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main();
}
