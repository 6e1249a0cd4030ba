/**
 * The benchmark's own correctness, not its numbers: the reference loop makes
 * the calls the gate made, the committed results are what docs/performance.md shows,
 * and the targets and the busy-machine warning are judged from the rows.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type Bench, DOC, docWith, evaluateTargets, renderMarkdown, runReference, type ScaleRow, type SingleRow } from '../scripts/bench.js';
import { gate } from '../src/gate.js';
import type { EvalRequest } from '../src/calls.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const dir = mkdtempSync(path.join(os.tmpdir(), 'gatekept-bench-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A verifier written into the temporary directory. */
function verifier(name: string, source: string): string {
  const file = path.join(dir, `${name}.py`);
  writeFileSync(file, source);
  return `${file}:reward`;
}

async function captured(reward: string): Promise<{ file: string; evaluations: number; format: string }> {
  const requests: EvalRequest[] = [];
  const result = await gate({ reward, answer: '1037', python, cwd: PACKAGE_ROOT, workers: 1, onRequests: (batch) => requests.push(...batch) });
  const file = path.join(dir, `${path.basename(reward).replace(/\W/g, '-')}.jsonl`);
  writeFileSync(file, `${requests.map((request) => JSON.stringify(request)).join('\n')}\n`);
  return { file, evaluations: result.record.timing.evaluations, format: result.record.verifier.completion_format };
}

const scaleRow = (overrides: Partial<ScaleRow>): ScaleRow => ({
  verifier: 'trivial',
  target_candidates: 1000,
  rows: 2,
  candidates: 1000,
  evaluations: 1100,
  decision: 'PASS',
  wall_s: 1,
  evaluations_per_s: 1100,
  us_per_evaluation: 900,
  per_call_us: 2,
  ideal_s: 0.001,
  ratio_to_ideal: 900,
  reference_s: 0.5,
  ratio_to_reference: 2,
  peak_tree_mb: 100,
  peak_process_mb: 80,
  phases: null,
  audit_ms: 800,
  ...overrides,
});

const singleRow: SingleRow = {
  verifier: 'trivial',
  evaluations: 578,
  candidates: 523,
  gate_ms: 400,
  reference_ms: 300,
  ratio: 1.33,
  node_start_ms: 40,
  python_import_ms: 30,
  per_call_us: 1.5,
  phases: { start: 50, import: 20, calibration: 5, attack: 100, judging: 10 },
  audit_ms: 200,
};

const bench = (load: number, scale: ScaleRow[]): Bench => ({
  generated: { command: 'npm run bench', quick: false, commit: 'abc', date: '2026-01-01 00:00 UTC' },
  machine: { cpu: 'cpu', cores: 2, memory_gb: 8, os: 'Linux', node: 'v20', python: '3.11.7', workers: 2, load_average: [load, load, load] },
  single: [singleRow],
  scale,
  targets: evaluateTargets([singleRow], scale),
  notes: [],
});

describe('bench', () => {
  it('the reference loop makes exactly the calls the gate counted, the way the gate makes them', async () => {
    const strict = await captured('examples/verifiers/strict.py:reward');
    const reference = runReference(python, 'examples/verifiers/strict.py:reward', strict.file, strict.format);
    expect(reference.calls).toBe(strict.evaluations);
    expect(reference.errors).toBe(0);
    expect(reference.per_call_us).toBeGreaterThan(0);
    expect(reference.process_s).toBeGreaterThan(reference.loop_s);

    // This one raises unless it is given the keyword pool exactly as the gate gives it.
    const pool = verifier(
      'pool',
      [
        'def reward(completion, answer, prompt, info, state, task, parser):',
        '    assert completion[-1]["role"] == "assistant" and parser.parse_answer(completion) == completion[-1]["content"]',
        '    assert prompt == [] and info == {} and state == {"answer": answer} and task == "default"',
        '    return 1.0 if ("{" + answer + "}") in completion[-1]["content"] else 0.0',
        '',
      ].join('\n'),
    );
    const fromPool = await captured(pool);
    expect(runReference(python, pool, fromPool.file, fromPool.format)).toMatchObject({ calls: fromPool.evaluations, errors: 0 });
  }, 120_000);

  it('counts the calls a verifier raises on as calls', async () => {
    const spec = verifier('raises', 'def reward(completion, answer):\n    raise ValueError("no")\n');
    const raises = await captured(spec);
    const reference = runReference(python, spec, raises.file, raises.format);
    expect(reference.calls).toBe(raises.evaluations);
    expect(reference.errors).toBe(reference.calls);
  }, 120_000);

  it('judges the targets from the rows, and says which were not measured', () => {
    const targets = evaluateTargets(
      [singleRow],
      [
        scaleRow({ target_candidates: 100_000, candidates: 100_400, evaluations: 111_000, evaluations_per_s: 120_000, peak_tree_mb: 140 }),
        scaleRow({ target_candidates: 1_000_000, candidates: 1_004_000, evaluations: 1_110_000, evaluations_per_s: 90_000, peak_tree_mb: 260 }),
        scaleRow({ verifier: '1 ms', evaluations: 1155, ratio_to_ideal: 1.4 }),
      ],
    );
    const status = Object.fromEntries(targets.map((target) => [target.target.slice(0, 30), target.status]));
    expect(Object.values(status)).toEqual(['missed', 'not measured', 'met', 'met', 'not measured', 'missed']);
    expect(targets[5]!.measured).toContain('1.86x');
  });

  it('prices the re-scoring of rewarded candidates from the lenient verifier against the strict one', () => {
    const strict = scaleRow({ verifier: '1 ms', rows: 13, evaluations: 6000, wall_s: 3.6, ideal_s: 3 });
    const rescoring = (wallS: number, rows = 13) =>
      evaluateTargets([singleRow], [strict, scaleRow({ verifier: '1 ms, lenient', rows, evaluations: 26_000, wall_s: wallS })]).find((target) =>
        target.target.startsWith('invariance re-scoring'),
      )!;
    // 20,000 added calls in 11.2 s: 0.56 ms each against an ideal 0.5 ms.
    expect(rescoring(14.8)).toMatchObject({ status: 'met', measured: '20,000 calls added on 13 rows: 0.56 ms each, 1.12x the ideal 0.5 ms' });
    expect(rescoring(15.6)).toMatchObject({ status: 'missed' });
    // Not the same rows: nothing to compare.
    expect(rescoring(14.8, 6)).toMatchObject({ status: 'not measured' });
  });

  it('warns in the results themselves when the machine was busy', () => {
    const rows = [scaleRow({})];
    expect(renderMarkdown(bench(7.5, rows))).toContain('The machine was busy while this ran');
    const idle = renderMarkdown(bench(0.2, rows));
    expect(idle).not.toContain('busy');
    expect(idle).toContain('| trivial | one answer | 400 | 200 | start 50, import 20, calibration 5, attack 100, judging 10 |');
  });

  it('docs/performance.md shows the committed results, between its markers, and the README links to it', () => {
    const committed = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.json'), 'utf8')) as Bench;
    const markdown = renderMarkdown(committed);
    const doc = readFileSync(DOC, 'utf8');
    expect(DOC).toBe(path.join(PACKAGE_ROOT, 'docs', 'performance.md'));
    expect(doc).toContain(`<!-- bench:begin -->\n${markdown}<!-- bench:end -->`);
    expect(readFileSync(path.join(PACKAGE_ROOT, 'results', 'bench.md'), 'utf8')).toBe(`# Gate benchmark\n\n${markdown}`);
    expect(docWith(doc, markdown)).toBe(doc);
    expect(readFileSync(path.join(PACKAGE_ROOT, 'README.md'), 'utf8')).toContain('](docs/performance.md)');
  });
});
