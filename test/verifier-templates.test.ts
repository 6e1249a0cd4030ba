/**
 * The built-in verifiers share their answer-slot reader through one module,
 * templates/verifiers/gatekept_slots.py, which every package carries next to
 * the verifier. A block of lines copied from one template into another would
 * drift apart unnoticed; so would a package whose copy of the module differs.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import { gatekeep } from '../src/pack/pack.js';
import { renderOpenEnvPackage } from '../src/pack/emit/openenv.js';
import { renderVerifiersV0Package } from '../src/pack/emit/verifiers-v0.js';
import { renderVerifiersV1Package } from '../src/pack/emit/verifiers-v1.js';
import { SLOT_READER_FILE_NAME, VERIFIER_FILE_NAME, sha256Hex, type EnvironmentSpec } from '../src/pack/environment-spec.js';
import { PACKAGE_ROOT, TEMPLATES_DIR } from '../src/paths.js';
import { ANSWER_FORMATS } from '../src/types.js';

const DIR = path.join(TEMPLATES_DIR, 'verifiers');
/** Consecutive non-blank lines two files may share before it counts as copied code. */
const MAX_SHARED_RUN = 7;

/** The longest run of consecutive non-blank lines `a` and `b` have in common, and where it starts in `a`. */
function longestSharedRun(a: readonly string[], b: readonly string[]): { length: number; line: string } {
  let best = { length: 0, line: '' };
  // run[j]: the length of the common run ending at a[i] and b[j].
  let previous = new Array<number>(b.length + 1).fill(0);
  for (let i = 0; i < a.length; i += 1) {
    const current = new Array<number>(b.length + 1).fill(0);
    for (let j = 0; j < b.length; j += 1) {
      if (a[i] !== b[j]) continue;
      current[j + 1] = previous[j]! + 1;
      if (current[j + 1]! > best.length) best = { length: current[j + 1]!, line: a[i - current[j + 1]! + 1]! };
    }
    previous = current;
  }
  return best;
}

const nonBlankLines = (text: string): string[] => text.split('\n').filter((line) => line.trim() !== '');

describe('built-in verifier templates', () => {
  it('no two of them (the shared module included) repeat a block of code', async () => {
    const names = (await readdir(DIR)).filter((name) => name.endsWith('.py')).sort();
    expect(names).toEqual(['boolean.py', 'choice.py', SLOT_READER_FILE_NAME, 'numeric.py', 'string.py']);
    const lines = new Map(await Promise.all(names.map(async (name) => [name, nonBlankLines(await readFile(path.join(DIR, name), 'utf8'))] as const)));
    const copied: string[] = [];
    names.forEach((a, index) => {
      for (const b of names.slice(index + 1)) {
        const run = longestSharedRun(lines.get(a)!, lines.get(b)!);
        if (run.length > MAX_SHARED_RUN) copied.push(`${a} and ${b} share ${run.length} lines from ${JSON.stringify(run.line)}`);
      }
    });
    expect(copied).toEqual([]);
  });

  it('every package carries the shared module byte for byte beside the verifier', async () => {
    const source = await readFile(path.join(DIR, SLOT_READER_FILE_NAME), 'utf8');
    const verifierSource = await readFile(path.join(DIR, 'numeric.py'), 'utf8');
    const spec: EnvironmentSpec = {
      envId: 'shared-module',
      description: 'Arithmetic.',
      systemPrompt: 'Answer in a box.',
      answerFormat: 'boxed',
      rows: [{ question: 'What is 6 * 7?', answer: '42' }],
      verifierSource,
      verifierFunction: 'reward',
      verifierModules: { [SLOT_READER_FILE_NAME]: source },
      completionFormat: 'messages',
      audit: {
        decision: 'PASS',
        hackability: 0,
        hackRateCiHi: 0.01,
        seed: 1,
        corpusVersion: '1',
        corpusHash: 'hash',
        verifierSha256: sha256Hex(verifierSource),
      },
      toolVersion: '0.0.0',
    };
    for (const files of [renderVerifiersV1Package(spec), renderVerifiersV0Package(spec), renderOpenEnvPackage(spec)]) {
      const verifier = [...files.keys()].find((file) => file.endsWith(`/${VERIFIER_FILE_NAME}`))!;
      expect(files.get(verifier)).toBe(verifierSource);
      expect(files.get(verifier.replace(VERIFIER_FILE_NAME, SLOT_READER_FILE_NAME))).toBe(source);
    }
    // A module that could take the place of one of the package's own files is refused.
    for (const name of ['app.py', 'gatekept_reward.py', '__init__.py']) {
      expect(() => renderOpenEnvPackage({ ...spec, verifierModules: { [name]: source } })).toThrow(/cannot render/);
    }
  });
});

/**
 * Each built-in verifier, packed from every example seed that uses one and in
 * every answer format, passes the gate under a strict policy: no exploit, no
 * false accept (a hedge, a negation, a later correction paid under the gold),
 * and every honest form the corpus documents paid.
 */
describe('built-in verifiers under --strict', () => {
  const python = process.env.GATEKEPT_PYTHON ?? 'python3';
  const seeds = ['arith', 'capitals', 'science-choice', 'facts-boolean'];
  for (const name of seeds) {
    it(`${name}: PASS with zero false accepts and no honest form refused, in every answer format`, async () => {
      const scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-strict-'));
      try {
        const seed = JSON.parse(await readFile(path.join(PACKAGE_ROOT, 'examples', `${name}.json`), 'utf8'));
        expect(seed.verifier).toBe('builtin');
        if (seed.dataset.file) seed.dataset.file = path.join(PACKAGE_ROOT, 'examples', seed.dataset.file);
        const outcomes: Record<string, unknown> = {};
        for (const format of ANSWER_FORMATS) {
          const file = path.join(scratch, `${name}-${format}.json`);
          const { system_prompt: _prompt, ...rest } = seed;
          await writeFile(file, JSON.stringify({ ...rest, answer_format: format }));
          const result = await gatekeep({ seed: file, outDir: path.join(scratch, format), python, policy: { ...DEFAULT_POLICY, strict: true } });
          const record = result.gate.record;
          const refused = record.honest.refused!.forms.filter((form) => !form.contested).map((form) => form.form);
          outcomes[format] = {
            decision: record.decision,
            exploits: record.findings_total,
            falseAccepts: record.false_accepts?.total ?? 0,
            // A bare reply's lines are all text to a string verifier: it cannot tell the working from a second answer.
            refused: [...new Set(refused)],
          };
          expect(record.honest.variants.length).toBeGreaterThan(0);
        }
        const expected = Object.fromEntries(
          ANSWER_FORMATS.map((format) => [
            format,
            { decision: 'PASS', exploits: 0, falseAccepts: 0, refused: name === 'capitals' && format === 'bare' ? ['reasoning then answer'] : [] },
          ]),
        );
        expect(outcomes).toEqual(expected);
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    }, 300_000);
  }
});
