/**
 * The benchmark of `gatekept scan`: rollouts per second on a trivial and a
 * 1 ms verifier, and the peak memory of the scanning process as the file
 * grows (the scan streams, so it should stay flat).
 *
 * Each size is a generated plain JSONL over 500 golds: 70% honest boxed
 * answers, 20% wrong ones, 10% hedges (which the lenient reader pays under
 * both golds, so they cost the invariance test's extra calls). The real CLI
 * scans it (`--json`), under /usr/bin/time for the peak resident memory of
 * the Node process; the Python workers are a constant apart from it.
 *
 *   npx tsx scripts/bench-scan.ts                           100k and 1M on the trivial verifier, 20k on the 1 ms one
 *   npx tsx scripts/bench-scan.ts --sizes 10000,100000 --slow 5000 --workers 2 --python python3
 *
 * Prints a Markdown table; writes results/bench-scan.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeRollouts } from './bench-rollouts.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'bin', 'gatekept.js');

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '100000,1000000' },
    slow: { type: 'string', default: '20000' },
    workers: { type: 'string', default: String(os.availableParallelism()) },
    python: { type: 'string', default: process.env.GATEKEPT_PYTHON ?? 'python3' },
  },
});

const VERIFIERS = {
  trivial: `import re\n\ndef reward(completion, answer, **kwargs):\n    boxes = re.findall(r"\\\\boxed\\{([^{}]*)\\}", completion)\n    return 1.0 if any(b.strip() == answer for b in boxes) else 0.0\n`,
  '1ms': `import re, time\n\ndef reward(completion, answer, **kwargs):\n    time.sleep(0.001)\n    boxes = re.findall(r"\\\\boxed\\{([^{}]*)\\}", completion)\n    return 1.0 if any(b.strip() == answer for b in boxes) else 0.0\n`,
};

interface Row {
  verifier: string;
  rollouts: number;
  seconds: number;
  perSecond: number;
  peakMb: number;
  calls: number;
  exploits: number;
}

function measure(file: string, results: string, workers: string, python: string): Omit<Row, 'verifier' | 'rollouts'> {
  const started = performance.now();
  let stdout = '';
  let stderr = '';
  try {
    stdout = execFileSync(
      '/usr/bin/time',
      [
        '-f',
        'PEAK_KB %M',
        process.execPath,
        BIN,
        'scan',
        '--results',
        results,
        '--reward',
        `${file}:reward`,
        '--field',
        'completion=response,answer=ground_truth',
        '--completion-format',
        'string',
        '--json',
        '--workers',
        workers,
        '--python',
        python,
      ],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (error) {
    // A REJECT exits 1: the record is still on stdout.
    const failed = error as { status?: number; stdout?: string; stderr?: string };
    if (failed.status !== 1) throw error;
    stdout = failed.stdout ?? '';
    stderr = failed.stderr ?? '';
  }
  const seconds = (performance.now() - started) / 1000;
  const record = JSON.parse(stdout) as { rollouts: { total: number; exploit: number }; timing: { calls: number } };
  const peak = /PEAK_KB (\d+)/.exec(stderr)?.[1];
  return {
    seconds: Math.round(seconds * 10) / 10,
    perSecond: Math.round(record.rollouts.total / seconds),
    peakMb: peak ? Math.round(Number(peak) / 1024) : Number.NaN,
    calls: record.timing.calls,
    exploits: record.rollouts.exploit,
  };
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-scan-'));
  const rows: Row[] = [];
  try {
    const plan: [keyof typeof VERIFIERS, number][] = [
      ...values.sizes.split(',').map((size): [keyof typeof VERIFIERS, number] => ['trivial', Number(size)]),
      ...values.slow
        .split(',')
        .filter(Boolean)
        .map((size): [keyof typeof VERIFIERS, number] => ['1ms', Number(size)]),
    ];
    for (const [name, size] of plan) {
      const verifier = path.join(scratch, `${name.replace(/\W/g, '_')}.py`);
      writeFileSync(verifier, VERIFIERS[name]);
      const results = path.join(scratch, `rollouts-${size}.jsonl`);
      await writeRollouts(results, size);
      const row = { verifier: name, rollouts: size, ...measure(verifier, results, values.workers, values.python) };
      rows.push(row);
      console.error(`${name} ${size}: ${row.perSecond} rollouts/s, peak ${row.peakMb} MB`);
      rmSync(results, { force: true });
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const table = [
    `| verifier | rollouts | seconds | rollouts/s | verifier calls | peak RSS of node (MB) |`,
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map((row) => `| ${row.verifier} | ${row.rollouts} | ${row.seconds} | ${row.perSecond} | ${row.calls} | ${row.peakMb} |`),
  ].join('\n');
  console.log(`${table}\n\n${values.workers} workers, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'})`);
  mkdirSync(path.join(ROOT, 'results'), { recursive: true });
  writeFileSync(
    path.join(ROOT, 'results', 'bench-scan.json'),
    `${JSON.stringify({ workers: Number(values.workers), cores: os.cpus().length, rows }, null, 2)}\n`,
  );
}

await main();
