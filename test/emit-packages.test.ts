import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { OPENENV_REQUIREMENT, renderOpenEnvPackage } from '../src/pack/emit/openenv.js';
import { VERIFIERS_REQUIREMENT, renderVerifiersV0Package } from '../src/pack/emit/verifiers-v0.js';
import { VERIFIERS_V1_REQUIREMENT, renderVerifiersV1Package } from '../src/pack/emit/verifiers-v1.js';
import { REWARD_CALL_FILE_NAME, VERIFIER_FILE_NAME } from '../src/pack/environment-spec.js';
import type { EnvironmentSpec } from '../src/pack/environment-spec.js';
import { isGatekeptError } from '../src/errors.js';
import { renderTemplate } from '../src/pack/render-template.js';
import { once } from './support/env-audit.js';
import { startFakeChatServer } from './support/fake-chat-server.js';
import { testPython } from './support/test-python.js';

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

// Strict on purpose twice over: exactly one box equal to the gold, and the
// gate's calling convention checked on every call, so a package that calls it
// any other way raises instead of scoring. Positional-only and keyword-only
// parameters exercise the signature matching.
const BOXED_EXACT = String.raw`import re

BOX = re.compile(r"\\boxed\{([^{}]*)\}")


def boxed_exact(completion, /, answer, *, prompt, state, parser):
    if not (isinstance(completion, list) and len(completion) == 1 and type(completion[0]) is dict):
        raise TypeError("completion must be one plain-dict message")
    if not (isinstance(prompt, list) and len(prompt) == 1 and type(prompt[0]) is dict and prompt[0]["role"] == "user"):
        raise TypeError("prompt must be the user message alone")
    if state != {"answer": answer} or parser.parse_answer(completion) != completion[0]["content"]:
        raise TypeError("unexpected state or parser")
    boxes = BOX.findall(completion[0]["content"])
    if len(boxes) != 1:
        return 0.0
    return 1.0 if boxes[0].strip() == answer.strip() else 0.0
`;

// Async, **kwargs and a bool result: the other half of the calling convention.
// It mutates its info, which must not leak into the next call on the row.
const STRING_KWARGS = String.raw`EXPECTED = {"answer", "prompt", "info", "state", "task", "parser"}
INFO = {"What is 2 + 3?": {"source": "probe", "level": 1, "task": "arithmetic"}}


async def graded(completion, **kwargs):
    if not isinstance(completion, str) or set(kwargs) != EXPECTED:
        raise TypeError(f"unexpected call: {type(completion).__name__} {sorted(kwargs)}")
    prompt, info = kwargs["prompt"], kwargs["info"]
    if not isinstance(prompt, str) or kwargs["state"] != {"answer": kwargs["answer"]} or kwargs["task"] != "default":
        raise TypeError("unexpected pool values")
    if info != INFO.get(prompt, {}):
        raise TypeError(f"unexpected info {info!r}")
    info["seen"] = True
    if completion == "raise":
        raise ValueError("verifier failure on purpose")
    return completion.strip() == "\\boxed{" + kwargs["answer"] + "}"
`;

// A `task` key in info is what verifiers would read as a task payload.
// Rows 0 and 1 carry the gold as a gate would have scored it; row 2 does not.
const ROWS: EnvironmentSpec['rows'] = [
  { question: 'What is 6 * 7?', answer: '42', gold: { reply: '\\boxed{42}', reward: 1 } },
  { question: 'What is 2 + 3?', answer: '5', info: { source: 'probe', level: 1, task: 'arithmetic' }, gold: { reply: '\\boxed{5}', reward: 1 } },
  { question: 'What is 10 - 4?', answer: '6' },
];

function specFor(envId: string, source: string, fn: string, completionFormat: EnvironmentSpec['completionFormat']): EnvironmentSpec {
  return {
    envId,
    description: 'Small arithmetic, answered in a box.',
    systemPrompt: 'Solve the problem. Put only the final answer in \\boxed{}, e.g. \\boxed{12}. Mind "quotes" and ``` fences.',
    answerFormat: 'boxed',
    rows: ROWS,
    verifierSource: source,
    verifierFunction: fn,
    completionFormat,
    audit: {
      decision: 'PASS',
      hackability: 2.5,
      hackRateCiHi: 0.0412,
      seed: 7,
      corpusVersion: '2026.1',
      corpusHash: 'c'.repeat(64),
      verifierSha256: sha256(source),
      budget: { candidates: 1234, rows: 3, confidence: 0.95 },
    },
    toolVersion: '0.1.0',
  };
}

const SPEC = specFor('emit-probe', BOXED_EXACT, 'boxed_exact', 'messages');
const STRING_SPEC = specFor('emit-probe-str', STRING_KWARGS, 'graded', 'string');

interface Case {
  row: number;
  text: string;
}

const CASES: Case[] = [
  { row: 0, text: 'Six sevens: \\boxed{42}' },
  { row: 0, text: '\\boxed{7}\\boxed{42}' },
  { row: 0, text: '\\boxed{421}' },
  { row: 1, text: '\\boxed{5}' },
  { row: 1, text: 'The answer is 5.' },
];
const EXPECTED = [1, 0, 0, 1, 0];

const STRING_CASES: Case[] = [
  { row: 1, text: '\\boxed{5}' },
  { row: 1, text: '\\boxed{5} or \\boxed{6}' },
  { row: 2, text: '\\boxed{6}' },
  { row: 2, text: 'raise' },
];
/** null: the verifier raises. */
const STRING_EXPECTED = [1, 0, 1, null];

async function writePackage(dir: string, files: Map<string, string>): Promise<void> {
  for (const [relative, content] of files) {
    const file = path.join(dir, ...relative.split('/'));
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content, 'utf8');
  }
}

const CHECKS_DIR = fileURLToPath(new URL('./emit/', import.meta.url));
const REWARD_MODULE = fileURLToPath(new URL(`../python/${REWARD_CALL_FILE_NAME}`, import.meta.url));
const HARNESS = fileURLToPath(new URL('../python/harness.py', import.meta.url));

/** Where a test's Python runs: its own HOME and cache, offline, nothing written beside the sources. */
function pythonEnv(home: string, pythonpath: string): NodeJS.ProcessEnv {
  return {
    HOME: home,
    XDG_CACHE_HOME: path.join(home, '.cache'),
    HF_DATASETS_OFFLINE: '1',
    HF_HUB_OFFLINE: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONPATH: pythonpath,
  };
}

/** What a check script printed: JSON whose shape each test asserts. */
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, asserted field by field
type Check = Record<string, any>;

/**
 * Run one of the check scripts in test/emit/ and return what it printed after
 * each `RESULT `: one result per package its arguments name, in order.
 */
async function runChecks(python: string, script: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Check[]> {
  const result = await execa(python, [path.join(CHECKS_DIR, script), ...args], { reject: false, timeout: 150_000, stdin: 'ignore', env, cwd });
  const lines = result.stdout.split('\n').filter((candidate) => candidate.startsWith('RESULT '));
  if (result.exitCode !== 0 || lines.length === 0) {
    throw new Error(`${script} exited ${String(result.exitCode)}\n${result.stderr}\n${result.stdout}`);
  }
  return lines.map((line) => JSON.parse(line.slice('RESULT '.length)) as Check);
}

/** A check script's one result. */
async function runCheck(python: string, script: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Check> {
  return (await runChecks(python, script, args, env, cwd))[0]!;
}

/**
 * Install package directories into `target` with the venv's pip, the way a
 * user's pip would build them (their own build backend, already in the venv),
 * but into a directory of the test's: the shared venv is never touched.
 */
async function installInto(python: string, target: string, dirs: readonly string[]): Promise<void> {
  const args = [
    '-m',
    'pip',
    'install',
    '--no-deps',
    '--no-index',
    '--no-build-isolation',
    '--target',
    target,
    '--no-cache-dir',
    '--disable-pip-version-check',
    '--no-input',
    '--quiet',
    ...dirs,
  ];
  const result = await execa(python, args, { reject: false, timeout: 180_000, stdin: 'ignore', env: { PYTHONDONTWRITEBYTECODE: '1' } });
  if (result.exitCode !== 0) throw new Error(`pip install --target failed (exit ${String(result.exitCode)}):\n${result.stderr || result.stdout}`);
}

/** A console script of a test venv (vf-eval, openenv, ...). */
function venvTool(python: string, name: string): string {
  return path.join(path.dirname(python), name);
}

const RENDERERS = {
  'verifiers-v1': renderVerifiersV1Package,
  'verifiers-v0': renderVerifiersV0Package,
  openenv: renderOpenEnvPackage,
} as const;

describe('rendering environment packages', () => {
  it('renders the same files every time', () => {
    for (const render of Object.values(RENDERERS)) {
      const first = render(SPEC);
      const second = render(structuredClone(SPEC));
      expect([...second.entries()]).toEqual([...first.entries()]);
    }
  });

  it('lays the packages out under distinct import names', () => {
    expect([...renderVerifiersV1Package(SPEC).keys()].sort()).toEqual([
      'README.md',
      'emit_probe/__init__.py',
      'emit_probe/data.jsonl',
      `emit_probe/${REWARD_CALL_FILE_NAME}`,
      `emit_probe/${VERIFIER_FILE_NAME}`,
      'emit_probe/taskset.py',
      'pyproject.toml',
    ]);
    expect([...renderVerifiersV0Package(SPEC).keys()].sort()).toEqual([
      'README.md',
      'emit_probe/__init__.py',
      'emit_probe/data.jsonl',
      'emit_probe/emit_probe.py',
      `emit_probe/${REWARD_CALL_FILE_NAME}`,
      `emit_probe/${VERIFIER_FILE_NAME}`,
      'pyproject.toml',
    ]);
    const openenv = renderOpenEnvPackage(SPEC);
    expect(openenv.get('pyproject.toml')).toContain('name = "openenv-emit-probe"');
    expect(openenv.get('pyproject.toml')).toContain('server = "emit_probe_env.server.app:main"');
    expect(openenv.get('pyproject.toml')).toContain('packages = ["emit_probe_env", "emit_probe_env.server"]');
  });

  it('ships the audited verifier and the one reward-calling module byte for byte', async () => {
    const shipped = await readFile(REWARD_MODULE, 'utf8');
    for (const [target, render] of Object.entries(RENDERERS)) {
      const files = render(SPEC);
      const prefix = target === 'openenv' ? 'server' : 'emit_probe';
      expect({ target, bytes: files.get(`${prefix}/${REWARD_CALL_FILE_NAME}`) === shipped }).toEqual({ target, bytes: true });
      expect(sha256(files.get(`${prefix}/${VERIFIER_FILE_NAME}`)!)).toBe(SPEC.audit.verifierSha256);
    }
    // The gate calls verifiers through the same module, not a copy of it.
    const harness = await readFile(HARNESS, 'utf8');
    expect(harness).toMatch(/^import gatekept_reward as _reward$/m);
    expect(harness).not.toMatch(/def keyword_pool|class _?Parser|def _?to_reward/);
  });

  it('pins verifiers 0.4 for the Taskset package, with nothing it does not use', () => {
    const files = renderVerifiersV1Package(SPEC);
    const pyproject = files.get('pyproject.toml')!;
    expect(VERIFIERS_V1_REQUIREMENT).toBe('verifiers>=0.4,<0.5');
    expect(pyproject).toContain('dependencies = ["verifiers>=0.4,<0.5"]');
    expect(pyproject).toContain('tags = ["gatekept", "single-turn", "boxed"]');
    expect(pyproject).toContain('build-backend = "hatchling.build"');
    expect(pyproject).not.toContain('tool.verifiers');
    for (const [file, text] of files) {
      if (file.endsWith('.py') && !file.endsWith(REWARD_CALL_FILE_NAME))
        expect({ file, datasets: /\bdatasets\b/.test(text) }).toEqual({ file, datasets: false });
    }
    const init = files.get('emit_probe/__init__.py')!;
    expect(init).toContain('__all__ = ["EmitProbeTaskset"]');
    expect(files.get('README.md')).toContain('prime env push');
    // Enough rollouts for the 20 samples audit --env --results needs: 3 rows, 7 rollouts each.
    expect(files.get('README.md')).toContain('vf-eval emit-probe -m <model> -n 3 -r 7 ');
  });

  it('keeps the classic package on verifiers 0.3 and says to push it with --runtime v0', () => {
    const files = renderVerifiersV0Package(SPEC);
    expect(VERIFIERS_REQUIREMENT).toBe('verifiers>=0.3.1,<0.4');
    expect(files.get('pyproject.toml')).toContain('dependencies = ["verifiers>=0.3.1,<0.4", "datasets"]');
    expect(files.get('pyproject.toml')).toMatch(/\[tool\.verifiers\.eval\]\nnum_examples = 3\nrollouts_per_example = 7\n/);
    expect(files.get('README.md')).toContain('prime env push --runtime v0');
    expect(files.get('README.md')).toContain('vf-eval emit-probe -m <model> -n 3 -r 7');
  });

  it('depends on openenv only and declares what openenv validate checks', () => {
    const files = renderOpenEnvPackage(SPEC);
    expect(OPENENV_REQUIREMENT).toBe('openenv>=0.10,<0.11');
    expect(files.get('pyproject.toml')).toContain('dependencies = ["openenv>=0.10,<0.11"]');
    expect(files.get('server/requirements.txt')).toBe('openenv>=0.10,<0.11\n');
    for (const [file, text] of files) {
      if (file !== 'README.md') expect({ file, old: text.includes('openenv-core') || text.includes('meta-pytorch') }).toEqual({ file, old: false });
    }
    const manifest = files.get('openenv.yaml')!;
    for (const line of [
      'spec_version: 1',
      'name: emit-probe',
      'version: 0.1.0',
      'type: space',
      'runtime: fastapi',
      'app: server.app:app',
      'port: 8000',
      'validation:',
      '    oracle_tolerance: 0.0',
      '    floor_margin: 0.1',
      '      kind: reward_channel',
      '    tags: [gatekept, single-turn, boxed]',
    ]) {
      expect(manifest).toContain(`${line}\n`);
    }
    const app = files.get('server/app.py')!;
    expect(app).toContain('env_name="emit-probe"');
    expect(app).toContain('parser.add_argument("--host", default="127.0.0.1"');
    expect(files.get('server/Dockerfile')).toContain('--host 0.0.0.0 --port 8000');
    expect(files.get(`server/emit_probe_environment.py`)).toMatch(
      /def reset\(\n\s+self,\n\s+seed: int \| None = None,\n\s+episode_id: str \| None = None,\n\s+\*\*kwargs: Any,\n/,
    );
  });

  it('states the audit in every README', () => {
    for (const render of Object.values(RENDERERS)) {
      const readme = render(SPEC).get('README.md')!;
      expect(readme).toContain('| hackability | 2.5 / 100 |');
      expect(readme).toContain('| hack-rate upper bound | 0.041 (upper end of the 95% confidence interval');
      expect(readme).toContain('| budget | 1234 adversarial completions built from 3 dataset rows |');
      expect(readme).toContain('| seed | 7 |');
      expect(readme).toContain('version `2026.1`');
      expect(readme).toContain('PASS means this exact function survived these attacks at this budget and seed.');
      // The system prompt holds a ``` run, so its fence is longer.
      expect(readme).toContain('````text\n');
      expect(readme).not.toMatch(/\{\{[a-z_]+\}\}/);
    }
  });

  it('fills every placeholder of a template and uses every value, or throws', () => {
    const values = { candidates: '3', rows: '1', row_word: 'row' };
    expect(renderTemplate('common/audit-budget-row.md', values)).toBe('| budget | 3 adversarial completions built from 1 dataset row |\n');
    for (const bad of [
      { candidates: '3', rows: '1' },
      { ...values, extra: 'x' },
    ]) {
      let caught: unknown;
      try {
        renderTemplate('common/audit-budget-row.md', bad);
      } catch (error) {
        caught = error;
      }
      expect(isGatekeptError(caught) && caught.code).toBe('INTERNAL');
    }
  });

  it('refuses to package a verifier other than the audited one', () => {
    const tampered = { ...SPEC, verifierSource: `${SPEC.verifierSource}\n# edited after the audit\n` };
    const badBudget = { ...SPEC, audit: { ...SPEC.audit, budget: { candidates: -1, rows: 3, confidence: 95 } } };
    for (const spec of [tampered, badBudget]) {
      for (const render of Object.values(RENDERERS)) {
        let caught: unknown;
        try {
          render(spec);
        } catch (error) {
          caught = error;
        }
        expect(isGatekeptError(caught) && caught.code).toBe('BAD_ARGUMENT');
      }
    }
  });
});

// Each target under its own library, in its own cached venv (they cannot share
// one); packages are installed into the test's temporary directory, never the venv.
describe('the verifiers 0.4 package under verifiers 0.4.0 (venv verifiers-v1)', () => {
  let python: string;
  let root: string;
  let site: string;
  let home: string;
  const dirs = { probe: '', str: '' };

  beforeAll(async () => {
    python = testPython('verifiers-v1');
    root = await mkdtemp(path.join(tmpdir(), 'gatekept-emit-v1-'));
    site = path.join(root, 'site');
    home = path.join(root, 'home');
    await mkdir(home);
    dirs.probe = path.join(root, 'src', SPEC.envId);
    dirs.str = path.join(root, 'src', STRING_SPEC.envId);
    await writePackage(dirs.probe, renderVerifiersV1Package(SPEC));
    await writePackage(dirs.str, renderVerifiersV1Package(STRING_SPEC));
    await installInto(python, site, Object.values(dirs));
  }, 180_000);

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  // Both packages in one process: each import of verifiers costs seconds of CPU.
  const checked = once(() =>
    runChecks(python, 'taskset_check.py', [SPEC.envId, JSON.stringify(CASES), STRING_SPEC.envId, JSON.stringify(STRING_CASES)], pythonEnv(home, site), home),
  );

  it('loads the Taskset by id and scores through Task.score what the gate saw', async () => {
    const result = (await checked())[0]!;
    expect(result.version).toBe('0.4.0');
    expect(result.taskset).toBe('EmitProbeTaskset');
    expect(result.class).toBe('EmitProbeTaskset');
    expect(result.all).toEqual(['EmitProbeTaskset']);
    expect(result.installed).toBe(path.join(site, 'emit_probe'));
    expect(result.tasks).toEqual(
      ROWS.map((row, index) => ({
        id: `emit-probe-${index}`,
        prompt: row.question,
        system_prompt: SPEC.systemPrompt,
        answer: row.answer,
        info: row.info ?? {},
        gold: row.gold ? [row.gold.reply, row.gold.reward] : [null, null],
      })),
    );
    expect(result.scores).toEqual(EXPECTED.map((reward) => ({ reward, rewards: { boxed_exact: [reward, 1] } })));
    expect(result.files).toEqual([SPEC.audit.verifierSha256, sha256(await readFile(REWARD_MODULE))]);
  }, 120_000);

  it('calls async string-mode verifiers with the gate pool and fails the scoring when one raises', async () => {
    const result = (await checked())[1]!;
    expect(result.scores.slice(0, 3)).toEqual(STRING_EXPECTED.slice(0, 3).map((reward) => ({ reward, rewards: { graded: [reward, 1] } })));
    expect(result.scores[3]).toEqual({ error: 'ValueError: verifier failure on purpose' });
  }, 120_000);

  it('runs end to end under vf-eval against a chat server on 127.0.0.1', async () => {
    // Gold for rows 0 and 2, a hedge for row 1; two rollouts each, and a bound
    // on requests so a retrying client cannot loop.
    const replies = { [ROWS[0]!.question]: 'Six sevens: \\boxed{42}', [ROWS[1]!.question]: '\\boxed{7}\\boxed{5}', [ROWS[2]!.question]: '\\boxed{6}' };
    const server = await startFakeChatServer(replies, 12);
    const out = path.join(root, 'vf-eval');
    let run: Awaited<ReturnType<typeof execa>>;
    try {
      run = await execa(
        venvTool(python, 'vf-eval'),
        [
          SPEC.envId,
          '-m',
          'fake',
          '-r',
          '2',
          '--client.base-url',
          server.baseUrl,
          '--client.api-key-var',
          'GATEKEPT_FAKE_KEY',
          '--env.agent.runtime.type',
          'subprocess',
          '--env.agent.harness.id',
          'null',
          '--no-push',
          '-o',
          out,
        ],
        { reject: false, timeout: 150_000, stdin: 'ignore', cwd: home, env: { ...pythonEnv(home, site), GATEKEPT_FAKE_KEY: 'unused' } },
      );
    } finally {
      await server.close();
    }
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect([...server.prompts].sort()).toEqual(ROWS.flatMap((row) => [row.question, row.question]).sort());
    const [runDir] = await readdir(out);
    const episodes = (await readFile(path.join(out, runDir!, 'traces.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const rewards = episodes.map((episode) => [episode.task.data.idx, episode.ok, episode.traces[0].rewards]).sort((a, b) => a[0] - b[0]);
    expect(rewards).toEqual([0, 0, 1, 1, 2, 2].map((row) => [row, true, { boxed_exact: { score: row === 1 ? 0 : 1, weight: 1 } }]));
  }, 150_000);

  it('passes vf-validate: the gold earns what the gate saw, an untouched trace nothing', async () => {
    const run = await execa(venvTool(python, 'vf-validate'), [SPEC.envId, '--runtime.type', 'subprocess'], {
      reject: false,
      timeout: 120_000,
      stdin: 'ignore',
      cwd: home,
      env: pythonEnv(home, site),
    });
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('\n{') + 1));
    expect(report.checks.gold).toMatchObject({ valid: 2, unchecked: 1, invalid: 0, error: 0 });
    expect(report.checks.noop).toMatchObject({ valid: 3, invalid: 0, error: 0 });
    expect(report.outcomes).toMatchObject({ error: 0, invalid: 0 });
  }, 120_000);

  it('builds a wheel the way prime env push does, with the metadata the Hub reads', async () => {
    const wheels = path.join(root, 'wheels');
    const build = await execa(python, ['-m', 'build', '--no-isolation', '--wheel', '--outdir', wheels, dirs.probe], {
      reject: false,
      timeout: 120_000,
      stdin: 'ignore',
      env: pythonEnv(home, ''),
    });
    expect(build.exitCode, build.stderr).toBe(0);
    const [wheel] = await readdir(wheels);
    expect(wheel).toBe('emit_probe-0.1.0-py3-none-any.whl');
    const { fields, files } = await runCheck(python, 'wheel_metadata.py', [path.join(wheels, wheel!)], pythonEnv(home, ''), home);
    expect(fields.Name).toEqual(['emit-probe']);
    expect(fields.Summary).toEqual([SPEC.description]);
    expect(fields['Requires-Python']).toEqual(['>=3.11']);
    expect(fields['Requires-Dist']).toEqual(['verifiers<0.5,>=0.4']);
    for (const file of ['__init__.py', 'taskset.py', 'data.jsonl', VERIFIER_FILE_NAME, REWARD_CALL_FILE_NAME]) {
      expect(files).toContain(`emit_probe/${file}`);
    }
  }, 120_000);
});

describe('the classic package under verifiers 0.3.1 (venv verifiers-v0)', () => {
  let python: string;
  let root: string;
  let site: string;
  let home: string;

  beforeAll(async () => {
    python = testPython('verifiers-v0');
    root = await mkdtemp(path.join(tmpdir(), 'gatekept-emit-v0-'));
    site = path.join(root, 'site');
    home = path.join(root, 'home');
    await mkdir(home);
    const dirs = [path.join(root, 'src', SPEC.envId), path.join(root, 'src', STRING_SPEC.envId)];
    await writePackage(dirs[0]!, renderVerifiersV0Package(SPEC));
    await writePackage(dirs[1]!, renderVerifiersV0Package(STRING_SPEC));
    await installInto(python, site, dirs);
  }, 180_000);

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  // Both packages in one process, as for 0.4.
  const checked = once(() =>
    runChecks(
      python,
      'classic_check.py',
      ['emit_probe', SPEC.envId, JSON.stringify(CASES), 'emit_probe_str', STRING_SPEC.envId, JSON.stringify(STRING_CASES)],
      pythonEnv(home, site),
      home,
    ),
  );

  it('loads a SingleTurnEnv offline and scores rollouts through its rubric', async () => {
    const result = (await checked())[0]!;

    expect(result.version).toBe('0.3.1');
    expect(result.env).toBe('SingleTurnEnv');
    expect(result.loaded).toBe('SingleTurnEnv');
    expect(result.rows).toEqual(
      ROWS.map((row) => ({
        question: row.question,
        answer: row.answer,
        info: row.info ?? {},
        prompt: [
          { role: 'system', content: SPEC.systemPrompt },
          { role: 'user', content: row.question },
        ],
      })),
    );
    expect(result.train_rows).toBe(ROWS.length);
    expect(result.eval_defaults).toEqual({ num_examples: 3, rollouts_per_example: 7 });
    expect(result.refused).toMatch(/rubric cannot be replaced/);

    expect(result.scores.map((score: { reward: number }) => score.reward)).toEqual(EXPECTED);
    expect(result.group).toEqual(EXPECTED);
    expect(result.scores[0].metrics).toEqual({ boxed_exact: 1, num_turns: 1 });
    expect(result.scores[0].prompt).toEqual([
      ['system', SPEC.systemPrompt],
      ['user', ROWS[0]!.question],
    ]);
    expect(result.scores[0].message_type).toBe('AssistantMessage');
    expect(result.errors).toEqual([]);
    expect(result.files).toEqual([SPEC.audit.verifierSha256, sha256(await readFile(REWARD_MODULE))]);
  }, 120_000);

  it('calls async string-mode verifiers with the gate pool and scores a raise 0.0 with a logged error', async () => {
    const result = (await checked())[1]!;
    const zeroForRaise = STRING_EXPECTED.map((value) => value ?? 0);
    expect(result.scores.map((score: { reward: number }) => score.reward)).toEqual(zeroForRaise);
    expect(result.group).toEqual(zeroForRaise);
    expect(result.errors).toHaveLength(2);
    for (const message of result.errors) {
      expect(message).toBe('Error calling reward function graded: verifier failure on purpose');
    }
  }, 120_000);
});

/** Start the package's `server` script on 127.0.0.1, port chosen by the kernel; resolves once uvicorn says where. */
async function startServer(script: string, env: NodeJS.ProcessEnv, cwd: string): Promise<{ url: string; process: ResultPromise }> {
  const child = execa(script, ['--port', '0'], { reject: false, stdin: 'ignore', env, cwd, detached: true, timeout: 120_000 });
  let seen = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${seen}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      seen += chunk.toString('utf8');
      const match = /Uvicorn running on (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void child.then(() => {
      clearTimeout(timer);
      reject(new Error(`server exited:\n${seen}`));
    });
  });
  return { url, process: child };
}

async function stopServer(child: ResultPromise): Promise<void> {
  if (child.pid !== undefined) {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  await child;
}

describe('the OpenEnv package under openenv 0.10.0 (venv openenv)', () => {
  let python: string;
  let root: string;
  let site: string;
  let home: string;
  const dirs = { probe: '', str: '' };

  beforeAll(async () => {
    python = testPython('openenv');
    root = await mkdtemp(path.join(tmpdir(), 'gatekept-emit-openenv-'));
    site = path.join(root, 'site');
    home = path.join(root, 'home');
    await mkdir(home);
    dirs.probe = path.join(root, 'src', SPEC.envId);
    dirs.str = path.join(root, 'src', STRING_SPEC.envId);
    await writePackage(dirs.probe, renderOpenEnvPackage(SPEC));
    await writePackage(dirs.str, renderOpenEnvPackage(STRING_SPEC));
    await installInto(python, site, Object.values(dirs));
  }, 180_000);

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('passes openenv validate --level static', async () => {
    const run = await execa(venvTool(python, 'openenv'), ['validate', '--level', 'static', dirs.probe], {
      reject: false,
      timeout: 60_000,
      stdin: 'ignore',
      cwd: home,
      env: pythonEnv(home, ''),
    });
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/PASS\s+static\.manifest/);
    expect(run.stdout).toMatch(/Verdict: PASS/);
  }, 60_000);

  it('serves with its own server script on 127.0.0.1 and passes openenv validate --url', async () => {
    const server = await startServer(path.join(site, 'bin', 'server'), pythonEnv(home, site), home);
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const run = await execa(venvTool(python, 'openenv'), ['validate', '--url', server.url], {
        reject: false,
        timeout: 60_000,
        stdin: 'ignore',
        cwd: home,
        env: pythonEnv(home, ''),
      });
      expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
      for (const check of ['health_endpoint', 'metadata_endpoint', 'schema_endpoint', 'mode_endpoint_consistency']) {
        expect(run.stdout).toMatch(new RegExp(`PASS\\s+${check}`));
      }
      expect(run.stdout).toMatch(/Verdict: PASS/);
    } finally {
      await stopServer(server.process);
    }
  }, 120_000);

  it('serves the package and scores over /ws', async () => {
    const out = await runCheck(
      python,
      'openenv_check.py',
      [dirs.probe, 'emit_probe_env', 'EmitProbe', JSON.stringify(CASES), '1'],
      pythonEnv(home, site),
      home,
    );

    expect(out.health).toEqual({ status: 'healthy' });
    expect(out.metadata).toMatchObject({ name: SPEC.envId, description: SPEC.description, version: '0.1.0' });
    expect(Object.keys(out.schema.action.properties)).toContain('answer');
    expect(out.http_reset.observation.row_index).toBe(1);
    expect(out.http_step).toMatchObject({ reward: 1, done: true });
    const rewards = out.episodes.map((episode: Check) => episode.step.data.reward);
    expect(rewards).toEqual(EXPECTED);
    for (const [index, episode] of (out.episodes as Check[]).entries()) {
      const row = ROWS[CASES[index]!.row]!;
      expect(episode.reset).toEqual({
        type: 'observation',
        data: {
          observation: { question: row.question, system_prompt: SPEC.systemPrompt, answer_format: 'boxed', row_index: CASES[index]!.row, metadata: {} },
          reward: null,
          done: false,
        },
      });
      expect(episode.step.data.done).toBe(true);
      expect(episode.again.type).toBe('error');
    }
    expect(out.state).toMatchObject({ type: 'state', data: { step_count: 1, row_index: 1 } });
    expect(out.order).toEqual([0, 1, 2, 0, 2]);
    expect(out.direct.map((episode: Check) => episode.step.reward)).toEqual(EXPECTED);
    expect(out.direct[0].reset).toMatchObject({ question: ROWS[0]!.question, done: false, reward: null });
    expect(JSON.stringify(out.direct[0].reset)).not.toContain('42');
    expect(out.in_loop).toBe(1);
    expect(out.client).toEqual({ question: ROWS[0]!.question, row_index: 0, reward: 1, done: true });
  }, 120_000);

  it('raises, never rewards, when a verifier fails', async () => {
    const out = await runCheck(
      python,
      'openenv_check.py',
      [dirs.str, 'emit_probe_str_env', 'EmitProbeStr', JSON.stringify(STRING_CASES), '0'],
      pythonEnv(home, site),
      home,
    );

    const steps = out.episodes.map((episode: Check) => episode.step);
    expect(steps.slice(0, 3).map((step: Check) => step.data.reward)).toEqual(STRING_EXPECTED.slice(0, 3));
    expect(steps[3]).toMatchObject({ type: 'error', data: { message: 'verifier failure on purpose' } });
    expect(out.episodes[3].again).toMatchObject({ type: 'error', data: { message: expect.stringMatching(/episode is over/) } });
    expect(out.direct.slice(0, 3).map((episode: Check) => episode.step.reward)).toEqual(STRING_EXPECTED.slice(0, 3));
    expect(out.direct[3].raised).toBe('ValueError: verifier failure on purpose');
    expect(out.in_loop).toBe(1);
  }, 120_000);
});
