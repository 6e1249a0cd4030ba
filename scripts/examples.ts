/**
 * Regenerate the terminal examples in docs/examples/: the built CLI
 * (bin/gatekept.js, so `npm run build` first) run on bundled fixtures, three
 * cases for each of `gate`, `scan` and `audit --env` (a sound one, a
 * gameable one and one that cannot be decided, plus one of bad input for
 * `audit --env`), each written as its command
 * line, what it printed on stdout and stderr, and its exit code.
 *
 * The text is made stable: the repository's path reads `<repo>`, the home
 * directory `~`, the temporary directory `<tmp>`, timings `<t> s`, and the
 * sandbox's warning on a machine without bubblewrap is left out, so two runs
 * anywhere write the same files.
 *
 *   npm run examples                    write docs/examples/
 *   npm run examples -- --check         regenerate into a temporary directory and fail if docs/examples/ differs
 *   npm run examples -- --only gate,scan    just these commands (gate, scan, audit-env)
 *   npm run examples -- --check --against DIR    compare with DIR instead of docs/examples/
 *
 * `audit --env` loads the verifiers library, which takes most of the run:
 * its cases need the classic verifiers venv (scripts/setup-python-env.sh verifiers-v0).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { PACKAGE_ROOT } from '../src/paths.js';
import { normalise } from './normalise-output.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const OUT_DIR = path.join(PACKAGE_ROOT, 'docs', 'examples');

type Command = 'gate' | 'scan' | 'audit-env';
const COMMANDS: readonly Command[] = ['gate', 'scan', 'audit-env'];

interface Case {
  command: Command;
  name: 'sound' | 'gameable' | 'undecided' | 'bad-input';
  what: string;
  args: string[];
  /** A venv of scripts/setup-python-env.sh the case runs in, passed as --python. */
  venv?: 'verifiers-v0';
}

const CASES: readonly Case[] = [
  {
    command: 'gate',
    name: 'sound',
    what: 'a strict verifier: one boxed answer, compared whole (PASS, with the false accepts it allows reported)',
    args: ['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42'],
  },
  {
    command: 'gate',
    name: 'gameable',
    what: 'a verifier that pays any reply containing the gold (REJECT: hedges, answer dumps, 1421 for 42)',
    args: ['gate', '--reward', 'examples/verifiers/substring.py:reward', '--answer', '42'],
  },
  {
    command: 'gate',
    name: 'undecided',
    what: 'a verifier whose import takes longer than its policy allows: the audit cannot finish, so nothing is decided (COULD NOT DECIDE)',
    args: ['gate', '--reward', 'examples/undecided/slow-import.py:reward', '--answer', '42', '--policy', 'examples/undecided/policy.toml'],
  },
  {
    command: 'scan',
    name: 'sound',
    what: '100 honest rollouts (80 right, 20 wrong) under the strict verifier (PASS)',
    args: ['scan', '--results', 'examples/rollouts/sound.jsonl', '--reward', 'examples/verifiers/strict.py:reward'],
  },
  {
    command: 'scan',
    name: 'gameable',
    what: 'rollouts that learn to list numbers from step 40, under the substring verifier (REJECT)',
    args: ['scan', '--results', 'examples/rollouts/gameable.jsonl', '--reward', 'examples/verifiers/substring.py:reward'],
  },
  {
    command: 'scan',
    name: 'undecided',
    what: '12 clean rollouts: no exploit, but too few to bound the exploit rate (COULD NOT DECIDE)',
    args: ['scan', '--results', 'examples/rollouts/short.jsonl', '--reward', 'examples/verifiers/strict.py:reward'],
  },
  {
    command: 'audit-env',
    name: 'sound',
    what: 'a classic (0.3) arithmetic environment with a strict boxed-answer reward (PASS)',
    args: ['audit', '--env', 'test/fixtures/envs/v0-sound', '--rows', '1', '--sandbox', 'auto'],
    venv: 'verifiers-v0',
  },
  {
    command: 'audit-env',
    name: 'gameable',
    what: 'a classic environment whose reward pays any listed number (REJECT on reward design)',
    args: ['audit', '--env', 'test/fixtures/envs/v0-dump', '--rows', '1', '--sandbox', 'auto'],
    venv: 'verifiers-v0',
  },
  {
    command: 'audit-env',
    name: 'undecided',
    what: 'the sound environment with an evaluation of 12 rollouts: too few to judge the reward distribution (COULD NOT DECIDE)',
    args: ['audit', '--env', 'test/fixtures/envs/v0-sound', '--rows', '1', '--sandbox', 'auto', '--results', 'test/fixtures/envs/short-results.jsonl'],
    venv: 'verifiers-v0',
  },
  {
    command: 'audit-env',
    name: 'bad-input',
    what: 'an environment that does not load (it imports a package that is not installed): no verdict (bad input)',
    args: ['audit', '--env', 'test/fixtures/envs/v0-broken', '--rows', '1', '--sandbox', 'auto'],
    venv: 'verifiers-v0',
  },
];

const fileName = (entry: Case): string => `${entry.command}-${entry.name}.txt`;

/** The interpreter of a venv the setup script has built (building it if needed: minutes, once). */
function venvPython(venv: string): string {
  return execFileSync('bash', [path.join(PACKAGE_ROOT, 'scripts', 'setup-python-env.sh'), venv], { encoding: 'utf8' }).trim();
}

const shellWord = (word: string): string => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

async function runCase(entry: Case): Promise<string> {
  const python = entry.venv ? venvPython(entry.venv) : undefined;
  const args = python ? [...entry.args, '--python', python] : entry.args;
  const run = await execa(process.execPath, [BIN, ...args], {
    cwd: PACKAGE_ROOT,
    reject: false,
    stdin: 'ignore',
    all: true,
    env: { FORCE_COLOR: '0', NO_COLOR: '1' },
    timeout: 600_000,
  });
  const shown = ['gatekept', ...entry.args.map(shellWord), ...(entry.venv ? ['--python', `"$(bash scripts/setup-python-env.sh ${entry.venv})"`] : [])].join(
    ' ',
  );
  return `$ ${shown}\n${normalise(run.all ?? '', python)}\n[exit ${run.exitCode ?? 'killed'}]\n`;
}

function indexPage(cases: readonly Case[]): string {
  const rows = cases.map((entry) => `| [${fileName(entry)}](${fileName(entry)}) | \`${entry.args.slice(0, 2).join(' ')}\` | ${entry.what} |`);
  return [
    '# Examples',
    '',
    'What the terminal shows for `gate`, `scan` and `audit --env` on bundled fixtures: a sound case, a gameable one',
    'and one that cannot be decided. Each file holds the command line, what it printed (stdout and stderr) and its exit',
    'code. Paths are shown as `<repo>` (the repository), `<tmp>` and `~`, and timings as `<t> s`; the progress lines',
    "printed every ten seconds while a command works depend on the machine's speed and are left out.",
    '',
    'Generated by `npm run examples` (after `npm run build`); `npm run examples -- --check` fails when the committed',
    'files differ from what the CLI prints now.',
    '',
    '| file | command | case |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

/** Run the cases, two at a time, and write their files and the index into `dir`. */
async function generate(dir: string, cases: readonly Case[]): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const queue = [...cases];
  const worker = async (): Promise<void> => {
    for (let entry = queue.shift(); entry; entry = queue.shift()) {
      const started = Date.now();
      writeFileSync(path.join(dir, fileName(entry)), await runCase(entry));
      process.stderr.write(`examples: ${fileName(entry)} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
    }
  };
  await Promise.all([worker(), worker()]);
  writeFileSync(path.join(dir, 'README.md'), indexPage(CASES));
}

/** The files of `dir` for these cases (and the index) that differ from those in `against`, with a line diff of each. */
function differences(dir: string, against: string, cases: readonly Case[]): string[] {
  const names = [...cases.map(fileName), 'README.md'];
  const found: string[] = [];
  for (const name of names) {
    const fresh = readFileSync(path.join(dir, name), 'utf8');
    let committed: string;
    try {
      committed = readFileSync(path.join(against, name), 'utf8');
    } catch {
      found.push(`${path.join(against, name)}: missing`);
      continue;
    }
    if (fresh === committed) continue;
    const a = committed.split('\n');
    const b = fresh.split('\n');
    const lines: string[] = [];
    for (let index = 0; index < Math.max(a.length, b.length) && lines.length < 20; index++) {
      if (a[index] === b[index]) continue;
      if (a[index] !== undefined) lines.push(`  ${index + 1}- ${a[index]}`);
      if (b[index] !== undefined) lines.push(`  ${index + 1}+ ${b[index]}`);
    }
    found.push(`${path.join(against, name)} differs:\n${lines.join('\n')}`);
  }
  return found;
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { check: { type: 'boolean', default: false }, only: { type: 'string' }, against: { type: 'string' } } });
  const only = values.only?.split(',').map((name) => name.trim());
  for (const name of only ?? []) {
    if (!(COMMANDS as readonly string[]).includes(name)) throw new Error(`--only takes ${COMMANDS.join(', ')}, not ${name}`);
  }
  const cases = CASES.filter((entry) => !only || only.includes(entry.command));
  if (!values.check) {
    await generate(OUT_DIR, cases);
    // Files of cases no longer listed would otherwise linger.
    const known = new Set([...CASES.map(fileName), 'README.md']);
    for (const name of readdirSync(OUT_DIR)) if (!known.has(name)) rmSync(path.join(OUT_DIR, name));
    return 0;
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatekept-examples-'));
  try {
    await generate(dir, cases);
    const against = path.resolve(values.against ?? OUT_DIR);
    const found = differences(dir, against, cases);
    if (found.length === 0) {
      process.stderr.write(`examples: ${against} is up to date (${cases.length} cases)\n`);
      return 0;
    }
    process.stderr.write(`${found.join('\n')}\nexamples: ${against} is out of date; run \`npm run build && npm run examples\`\n`);
    return 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
