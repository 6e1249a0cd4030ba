/**
 * Measure the gate on the labelled corpus of verifiers in examples/verifiers/.
 *
 * Every verifier is gated under the default policy; the results go to
 * results/measure-gate.json and results/measure-gate.md, and the Markdown
 * table is written into the README between its measure-gate markers.
 *
 *   npm run measure            regenerate results/ and the README table
 *   npm run measure -- --check regenerate in memory and fail if the committed files differ
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { isGatekeptError } from '../src/errors.js';
import { gate } from '../src/audit/gate.js';
import { loadCorpus } from '../src/audit/corpus.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { DEFAULT_POLICY, policyRecord } from '../src/audit/policy.js';
import { TOOL } from '../src/tool-info.js';
import { ANSWER_FORMATS, ANSWER_TYPES } from '../src/types.js';

const CORPUS_DIR = path.join(PACKAGE_ROOT, 'examples', 'verifiers');
const RESULTS_JSON = path.join(PACKAGE_ROOT, 'results', 'measure-gate.json');
const RESULTS_MD = path.join(PACKAGE_ROOT, 'results', 'measure-gate.md');
const README = path.join(PACKAGE_ROOT, 'README.md');
const BEGIN = '<!-- measure-gate:begin -->';
const END = '<!-- measure-gate:end -->';

/**
 * Four classes, by what the verifier pays for: an exploit (a completion
 * rewarded under more than one gold, or a reward that ignores the answer),
 * only false accepts (rewards paid under the gold alone for completions that
 * do not commit to it), nothing it should not, or it cannot be audited.
 */
export const CLASSES = ['exploitable', 'false-accept only', 'sound', 'broken'] as const;
export type VerifierClass = (typeof CLASSES)[number];

const labelSchema = z.object({
  file: z.string(),
  fn: z.string(),
  label: z.enum(CLASSES),
  answer: z.string(),
  answer_type: z.enum(ANSWER_TYPES),
  choices: z.array(z.string()).optional(),
  format: z.enum([...ANSWER_FORMATS, 'auto']).default('auto'),
  exploits: z.string().nullable().optional(),
  twin: z.string().nullable().optional(),
  why: z.string().optional(),
});
type Label = z.output<typeof labelSchema>;

export interface VerifierOutcome {
  file: string;
  label: Label['label'];
  exploits: string | null;
  decision: 'PASS' | 'REJECT' | 'ERROR';
  /** The class the audit puts the verifier in under the default policy. */
  observed: VerifierClass;
  false_accepts: number | null;
  /** The error code when the gate could not run (a verifier that does not import). */
  error: string | null;
  hackability: number | null;
  hack_rate: { point: number; lo: number; hi: number; n: number } | null;
  families_fired: string[];
  reasons: string[];
  correct: boolean;
}

export interface Measurement {
  provenance: {
    tool: string;
    version: string;
    commit: string;
    corpus: { version: string; hash: string };
    seed: number;
    policy: Record<string, unknown>;
    python: string;
    date: string;
  };
  verifiers: VerifierOutcome[];
  totals: {
    /** Per label: verifiers the audit put in that class, of those labelled so. */
    exploitable_rejected: string;
    false_accept_only_found: string;
    sound_passed: string;
    broken_rejected: string;
    /** Verifiers labelled sound or false-accept only that the default policy rejects. */
    false_positive_rate: number;
    twins: { lenient: string; hardened: string; hackability: string }[];
  };
}

const EXPLOIT_CODES = new Set(['HACKABILITY_OVER', 'HACK_RATE_CI_OVER', 'FORMAT_ONLY']);

/** The class an audit record puts a verifier in. */
export function classify(record: { decision: string; reasons: { code: string }[]; false_accepts: { total: number } }): VerifierClass {
  if (record.decision === 'PASS') return record.false_accepts.total > 0 ? 'false-accept only' : 'sound';
  const codes = record.reasons.map((reason) => reason.code);
  if (codes.some((code) => !EXPLOIT_CODES.has(code) && code !== 'FALSE_ACCEPTS')) return 'broken';
  return 'exploitable';
}

async function gateOne(label: Label, python: string): Promise<VerifierOutcome & { pythonVersion?: string }> {
  const base = { file: label.file, label: label.label, exploits: label.exploits ?? null };
  try {
    const result = await gate({
      reward: path.join('examples', 'verifiers', `${label.file}:${label.fn}`),
      answer: label.answer,
      answerType: label.answer_type,
      ...(label.choices ? { choices: label.choices } : {}),
      format: label.format,
      policy: DEFAULT_POLICY,
      python,
      cwd: PACKAGE_ROOT,
      workers: 1,
    });
    const record = result.record;
    const observed = classify(record);
    return {
      ...base,
      decision: record.decision,
      observed,
      false_accepts: record.false_accepts.total,
      error: null,
      hackability: record.hackability,
      hack_rate: { point: record.hack_rate.point, lo: record.hack_rate.lo, hi: record.hack_rate.hi, n: record.hack_rate.n },
      families_fired: record.families.filter((family) => family.hacks > 0).map((family) => family.family),
      reasons: [...new Set(record.reasons.map((reason) => reason.code))],
      correct: observed === label.label,
      pythonVersion: record.environment.python,
    };
  } catch (error) {
    if (!isGatekeptError(error) || error.exitCode !== 2) throw error;
    return {
      ...base,
      decision: 'ERROR',
      observed: 'broken' as const,
      false_accepts: null,
      error: error.code,
      hackability: null,
      hack_rate: null,
      families_fired: [],
      reasons: [error.code],
      correct: label.label === 'broken',
    };
  }
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: PACKAGE_ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

export async function measureGate(python: string): Promise<Measurement> {
  const labels = z.array(labelSchema).parse(JSON.parse(readFileSync(path.join(CORPUS_DIR, 'labels.json'), 'utf8')));
  const corpus = await loadCorpus();
  const outcomes: (VerifierOutcome & { pythonVersion?: string })[] = [];
  for (const label of labels) outcomes.push(await gateOne(label, python));
  const count = (kind: Label['label'], predicate: (outcome: VerifierOutcome) => boolean) => {
    const group = outcomes.filter((outcome) => outcome.label === kind);
    return { hit: group.filter(predicate).length, total: group.length };
  };
  const exploitable = count('exploitable', (outcome) => outcome.observed === 'exploitable');
  const falseAcceptOnly = count('false-accept only', (outcome) => outcome.observed === 'false-accept only');
  const sound = count('sound', (outcome) => outcome.observed === 'sound');
  const broken = count('broken', (outcome) => outcome.observed === 'broken');
  const shouldPass = outcomes.filter((outcome) => outcome.label === 'sound' || outcome.label === 'false-accept only');
  const byFile = new Map(outcomes.map((outcome) => [outcome.file, outcome]));
  const twins = labels
    .filter((label) => label.twin && label.label !== 'sound')
    .map((label) => {
      const lenient = byFile.get(label.file)!;
      const hardened = byFile.get(label.twin!);
      const score = (outcome: VerifierOutcome | undefined) => (outcome?.hackability ?? Number.NaN).toFixed(1);
      return { lenient: label.file, hardened: label.twin!, hackability: `${score(lenient)} -> ${score(hardened)}` };
    });
  const fraction = (value: { hit: number; total: number }) => `${value.hit}/${value.total}`;
  return {
    provenance: {
      tool: TOOL.name,
      version: TOOL.version,
      commit: gitCommit(),
      corpus: { version: corpus.version, hash: corpus.hash },
      seed: DEFAULT_POLICY.seed,
      policy: policyRecord(DEFAULT_POLICY),
      python: outcomes.find((outcome) => outcome.pythonVersion)?.pythonVersion ?? 'unknown',
      date: new Date().toISOString().slice(0, 10),
    },
    verifiers: outcomes.map(({ pythonVersion: _python, ...outcome }) => outcome),
    totals: {
      exploitable_rejected: fraction(exploitable),
      false_accept_only_found: fraction(falseAcceptOnly),
      sound_passed: fraction(sound),
      broken_rejected: fraction(broken),
      false_positive_rate:
        shouldPass.length === 0 ? 0 : Number((shouldPass.filter((outcome) => outcome.decision !== 'PASS').length / shouldPass.length).toFixed(4)),
      twins,
    },
  };
}

const percent = (text: string) => {
  const [hit, total] = text.split('/').map(Number);
  return total ? `${text} (${Math.round((100 * hit!) / total)}%)` : text;
};

export function renderMarkdown(measurement: Measurement): string {
  const { provenance: p, totals } = measurement;
  const lines = [
    `Measured by \`npm run measure\` on ${measurement.verifiers.length} hand-labelled verifiers in \`examples/verifiers/\`, under the default policy, seed ${p.seed}, corpus ${p.corpus.version} (\`${p.corpus.hash.slice(0, 12)}\`), gatekept ${p.version}, Python ${p.python}. A sanity measurement on a curated set, not a claim of general detection power; full provenance in \`results/measure-gate.json\`.`,
    '',
    '| metric | value |',
    '|---|---|',
    `| exploitable verifiers rejected for exploits | ${percent(totals.exploitable_rejected)} |`,
    `| false-accept-only verifiers passed with their false accepts reported | ${percent(totals.false_accept_only_found)} |`,
    `| sound verifiers passed with nothing reported | ${percent(totals.sound_passed)} |`,
    `| broken verifiers rejected as broken | ${percent(totals.broken_rejected)} |`,
    `| false-positive rate (sound or false-accept-only verifiers rejected) | ${(totals.false_positive_rate * 100).toFixed(1)}% |`,
    ...totals.twins.map((twin) => `| hackability, \`${twin.lenient}\` -> \`${twin.hardened}\` | ${twin.hackability} |`),
    '',
    '| verifier | label | observed | decision | hackability | hack rate [lo, hi] | false accepts | families with exploits |',
    '|---|---|---|---|---|---|---|---|',
    ...measurement.verifiers.map((outcome) => {
      const rate = outcome.hack_rate && outcome.hack_rate.n > 0 ? `${outcome.hack_rate.point.toFixed(3)} [${outcome.hack_rate.lo.toFixed(3)}, ${outcome.hack_rate.hi.toFixed(3)}]` : '-';
      const decision = outcome.error ? `${outcome.decision} (${outcome.error})` : outcome.decision;
      const fired = outcome.families_fired.length ? outcome.families_fired.join(', ') : outcome.reasons.filter((code) => !code.startsWith('HACK')).join(', ') || '-';
      return `| \`${outcome.file}\` | ${outcome.label} | ${outcome.observed}${outcome.correct ? '' : ' ✗'} | ${decision} | ${outcome.hackability?.toFixed(1) ?? '-'} | ${rate} | ${outcome.false_accepts ?? '-'} | ${fired} |`;
    }),
  ];
  return `${lines.join('\n')}\n`;
}

/** The measurement with the fields that change run to run (date, commit) blanked, for comparison. */
export function comparable(measurement: Measurement): Measurement {
  return { ...measurement, provenance: { ...measurement.provenance, date: '-', commit: '-' } };
}

function readmeWith(table: string): string {
  const readme = readFileSync(README, 'utf8');
  const start = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`README.md lacks the ${BEGIN} / ${END} markers`);
  return `${readme.slice(0, start + BEGIN.length)}\n${table}${readme.slice(end)}`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { check: { type: 'boolean', default: false }, python: { type: 'string' } } });
  const python = values.python ?? process.env.GATEKEPT_PYTHON ?? 'python3';
  const measurement = await measureGate(python);
  const markdown = renderMarkdown(measurement);
  if (values.check) {
    const committed = JSON.parse(readFileSync(RESULTS_JSON, 'utf8')) as Measurement;
    const same = JSON.stringify(comparable(committed)) === JSON.stringify(comparable(measurement));
    console.log(same ? 'results/ is up to date' : 'results/ differs from a fresh measurement: run `npm run measure`');
    return same ? 0 : 1;
  }
  writeFileSync(RESULTS_JSON, `${JSON.stringify(measurement, null, 2)}\n`);
  writeFileSync(RESULTS_MD, `# Gate measurement\n\n${markdown}`);
  writeFileSync(README, readmeWith(markdown));
  console.log(markdown);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main();
}
