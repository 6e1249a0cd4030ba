/**
 * Benchmark of `gatekept gate` against the in-process limit.
 *
 * For a trivial verifier it prints the wall time of the whole CLI command, the
 * time of a bare `node` start plus one plain Python loop calling the same
 * verifier on the same requests, and their ratio (target: under 2x).
 *
 * usage: npm run bench:gate [-- --runs 5 --reward examples/verifiers/strict.py:reward --answer 42]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { gate } from '../src/audit/gate.js';
import type { EvalRequest } from '../src/runtime/python-session.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    reward: { type: 'string', default: 'examples/verifiers/strict.py:reward' },
    answer: { type: 'string', default: '42' },
    python: { type: 'string', default: process.env.GATEKEPT_PYTHON ?? 'python3' },
  },
});
const runs = Number(values.runs);
const python = values.python!;

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function timed(command: string, args: string[]): number {
  const started = performance.now();
  execFileSync(command, args, { cwd: PACKAGE_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  return performance.now() - started;
}

// 1. Capture exactly the requests the gate sends.
const requests: EvalRequest[] = [];
await gate({ reward: values.reward!, answer: values.answer!, python, cwd: PACKAGE_ROOT, onRequests: (batch) => requests.push(...batch) });
const dir = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-'));
const requestsFile = path.join(dir, 'requests.jsonl');
writeFileSync(requestsFile, requests.map((request) => JSON.stringify(request)).join('\n') + '\n');

// 2. Time both sides, alternating, and take medians.
const cli = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const verifierFile = path.resolve(PACKAGE_ROOT, values.reward!.slice(0, values.reward!.lastIndexOf(':')));
const fn = values.reward!.slice(values.reward!.lastIndexOf(':') + 1);
const gateTimes: number[] = [];
const referenceTimes: number[] = [];
for (let run = 0; run < runs; run++) {
  try {
    gateTimes.push(timed(process.execPath, [cli, 'gate', '--reward', values.reward!, '--answer', values.answer!, '--python', python, '--json']));
  } catch (error) {
    // Exit 1 (REJECT) is a valid outcome for timing purposes.
    if ((error as { status?: number }).status !== 1) throw error;
  }
  referenceTimes.push(timed(process.execPath, ['-e', '']) + timed(python, [path.join(PACKAGE_ROOT, 'scripts', 'reference-loop.py'), `${verifierFile}:${fn}`, requestsFile]));
}
const gateMs = median(gateTimes);
const referenceMs = median(referenceTimes);
console.log(`verifier            ${values.reward} (answer ${values.answer})`);
console.log(`requests            ${requests.length}`);
console.log(`machine             ${os.cpus()[0]?.model ?? 'unknown cpu'}, ${os.availableParallelism()} cores, node ${process.version}`);
console.log(`gatekept gate       ${gateMs.toFixed(0)} ms (median of ${gateTimes.length})`);
console.log(`node + python loop  ${referenceMs.toFixed(0)} ms (median of ${referenceTimes.length})`);
console.log(`ratio               ${(gateMs / referenceMs).toFixed(2)}x (target < 2x)`);
