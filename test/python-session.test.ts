import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import seedrandom from 'seedrandom';
import { execa } from 'execa';
import { GatekeptError } from '../src/errors.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import type { EvalRequest, EvalResult, VerifierSession } from '../src/calls.js';
import { openVerifierSession } from '../src/runtime/python-session.js';
import { checkedSessionOptions, sessionOptionsSchema, type SessionOptions } from '../src/runtime/session-options.js';
import { commonLength, LongTextCodec } from '../src/runtime/text-codec.js';
import { parseVerifierSpec } from '../src/runtime/verifier-spec.js';
import { checkedReadyReply, readyReplySchema } from '../src/runtime/wire.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { WorkerPool } from '../src/runtime/worker-pool.js';

const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';

let dir: string;
let counter = 0;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'gatekept-session-test-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function verifierFile(source: string): Promise<string> {
  counter += 1;
  const file = path.join(dir, `verifier_${counter}.py`);
  await writeFile(file, source);
  return file;
}

function options(file: string, overrides: Partial<SessionOptions> = {}): SessionOptions {
  return {
    python: PYTHON,
    target: { kind: 'file', path: file, fn: 'reward' },
    pythonpath: [],
    completionFormat: 'messages',
    callTimeoutMs: 2000,
    importTimeoutMs: 10_000,
    memoryMb: 2048,
    ...overrides,
  };
}

async function withSession<T>(source: string, body: (session: VerifierSession) => Promise<T>, overrides: Partial<SessionOptions> = {}): Promise<T> {
  const session = await openVerifierSession(options(await verifierFile(source), overrides));
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

async function failure(promise: Promise<unknown>): Promise<GatekeptError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(GatekeptError);
    return error as GatekeptError;
  }
  throw new Error('expected a GatekeptError');
}

function req(completion: string, answer = '42', extra: Partial<EvalRequest> = {}): EvalRequest {
  return { completion, answer, ...extra };
}

/** Without the times a call took (wall clock and CPU), which differ between runs. */
function withoutMs(results: EvalResult[]): Omit<EvalResult, 'ms' | 'cpuMs'>[] {
  return results.map(({ ms: _ms, cpuMs: _cpuMs, ...rest }) => rest);
}

/** Running, that is: a zombie waiting for an init that may never reap it is not. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
}

const STRICT = `
def reward(completion, answer):
    text = completion[-1]["content"]
    return 1.0 if text.strip() == answer else 0.0
`;

// One verifier that misbehaves in whichever way the completion asks for.
const MISCHIEF = `
import os, re, signal, socket, sys

def reward(completion, answer, **kwargs):
    what = completion[-1]["content"]
    if what == "pid":
        return os.getpid()
    if what == "loop":
        while True:
            pass
    if what == "stubborn":
        # Blocking the timer signals leaves only the kill path to end it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF, signal.SIGVTALRM})
        while True:
            pass
    if what == "regex":
        return 1.0 if re.match(r"(a+)+$", "a" * 40 + "b") else 0.0
    if what == "os_exit":
        os._exit(3)
    if what == "sys_exit":
        sys.exit()
    if what == "abort":
        os.abort()
    if what == "self_kill":
        signal.raise_signal(signal.SIGKILL)
    if what == "network":
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    if what == "loopback_bind":
        # What urllib3 does at import to learn whether IPv6 works.
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            probe = socket.socket(family)
            try:
                probe.bind((host, 0))
            except OSError as error:
                if isinstance(error, PermissionError):
                    raise
            finally:
                probe.close()
        return 1.0
    if what == "kill":
        os.kill(os.getppid(), signal.SIGTERM)
    if what == "subprocess":
        import subprocess
        subprocess.run(["true"])
    if what.startswith("write:"):
        with open(what[len("write:"):], "w") as handle:
            handle.write("x")
        return 1.0
    if what == "env_set":
        os.environ["GATEKEPT_TEST_VAR"] = "1"
        return 1.0
    if what == "env_check":
        return 0.0 if "GATEKEPT_TEST_VAR" in os.environ else 1.0
    if what == "make_file":
        with open("scratch.txt", "w") as handle:
            handle.write("x")
        return 1.0 if os.path.exists("scratch.txt") else 0.0
    if what == "file_check":
        return 0.0 if os.path.exists("scratch.txt") else 1.0
    if what == "chdir":
        os.chdir("/")
        return 1.0
    if what == "cwd_check":
        return 1.0 if os.getcwd() == os.path.realpath(os.environ["HOME"]) else 0.0
    if what == "print":
        print("x" * 5_000_000)
        os.write(1, b"y" * 5_000_000)
        sys.stderr.write("z" * 100)
        return 1.0
    if what == "secret":
        return 0.0 if "GATEKEPT_FAKE_SECRET" in os.environ else 1.0
    if what == "home":
        # A home of its own, a separate temp directory, and no gatekept name in either.
        home, tmp, cwd = os.environ.get("HOME"), os.environ.get("TMPDIR"), os.getcwd()
        isolated = os.environ.get("GATEKEPT_EXPECT_NEUTRAL") or home == "/home/user"
        neutral = not isolated or all("gatekept" not in p for p in (home, tmp, cwd))
        return 1.0 if home == cwd and tmp and tmp != home and neutral else 0.0
    return 1.0 if what == answer else 0.0
`;

describe('parseVerifierSpec', () => {
  it('reads module and file specs', async () => {
    expect(parseVerifierSpec('pkg.mod:reward', dir)).toEqual({ kind: 'module', module: 'pkg.mod', fn: 'reward' });
    const file = await verifierFile(STRICT);
    expect(parseVerifierSpec(`${path.basename(file)}:reward`, dir)).toEqual({ kind: 'file', path: file, fn: 'reward' });
    expect(parseVerifierSpec(`${file}:Grader.score`, '/')).toEqual({ kind: 'file', path: file, fn: 'Grader.score' });
  });

  it.each(['reward', 'pkg.mod:', ':reward', 'pkg.mod:1st', 'my pkg:reward', 'dir/file:reward', 'a..b:fn'])(
    'rejects %j as BAD_ARGUMENT naming the spec',
    (spec) => {
      let caught: unknown;
      try {
        parseVerifierSpec(spec, dir);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(GatekeptError);
      expect((caught as GatekeptError).code).toBe('BAD_ARGUMENT');
      expect((caught as GatekeptError).message).toContain('package.module:function');
    },
  );

  it('reports a missing .py file as VERIFIER_NOT_FOUND', () => {
    expect(() => parseVerifierSpec('nope/missing.py:reward', dir)).toThrow(expect.objectContaining({ code: 'VERIFIER_NOT_FOUND' }));
  });
});

describe('scoring', () => {
  it('scores gold and wrong answers in messages mode and describes the verifier', async () => {
    const file = await verifierFile(STRICT);
    const session = await openVerifierSession(options(file));
    try {
      expect(session.info).toMatchObject({
        params: ['completion', 'answer'],
        varKwargs: false,
        isAsync: false,
        sourceFile: file,
      });
      expect(session.info.pythonVersion).toMatch(/^3\.\d+\.\d+$/);
      const results = await session.evaluate([req('42'), req('17'), req(' 42 ')]);
      expect(results.map((r) => [r.status, r.reward, r.rewardType])).toEqual([
        ['ok', 1.0, 'float'],
        ['ok', 0.0, 'float'],
        ['ok', 1.0, 'float'],
      ]);
      expect(results[0]).toMatchObject({ nonFinite: null, error: null, sideEffects: [] });
      expect(await session.evaluate([])).toEqual([]);
    } finally {
      await session.close();
    }
  });

  it('passes plain strings in string mode', async () => {
    const source = `
def reward(completion, answer, prompt):
    assert isinstance(completion, str), type(completion)
    assert prompt == "" or prompt == "Q?", prompt
    return completion == answer
`;
    await withSession(
      source,
      async (session) => {
        const results = await session.evaluate([req('42'), req('41'), req('42', '42', { prompt: 'Q?' })]);
        expect(results.map((r) => [r.status, r.reward, r.rewardType])).toEqual([
          ['ok', 1.0, 'bool'],
          ['ok', 0.0, 'bool'],
          ['ok', 1.0, 'bool'],
        ]);
      },
      { completionFormat: 'string' },
    );
  });

  it('gives **kwargs verifiers the whole keyword pool', async () => {
    const source = `
def reward(**kwargs):
    if kwargs["completion"][-1]["content"] == "names":
        raise ValueError(",".join(sorted(kwargs)))
    assert kwargs["prompt"] == [{"role": "user", "content": "What is 6*7?"}], kwargs["prompt"]
    assert kwargs["state"] == {"answer": "42"}, kwargs["state"]
    assert kwargs["task"] == "default"
    assert kwargs["info"] == {"level": 3}, kwargs["info"]
    assert kwargs["parser"].parse_answer(kwargs["completion"]) == "The answer is 42"
    assert kwargs["parser"].parse("x") == "x"
    return 1.0
`;
    await withSession(source, async (session) => {
      expect(session.info).toMatchObject({ params: [], varKwargs: true });
      const [names, values] = await session.evaluate([req('names'), req('The answer is 42', '42', { prompt: 'What is 6*7?', info: { level: 3 } })]);
      expect(names?.error).toEqual({ type: 'ValueError', message: 'answer,completion,info,parser,prompt,state,task' });
      expect(values).toMatchObject({ status: 'ok', reward: 1.0, error: null });
    });
  });

  it('imports a module target from the python path', async () => {
    const root = path.join(dir, 'pathroot');
    await mkdir(path.join(root, 'graders'), { recursive: true });
    await writeFile(path.join(root, 'graders', '__init__.py'), '');
    await writeFile(path.join(root, 'graders', 'helpers.py'), 'def clean(s):\n    return s.strip()\n');
    await writeFile(
      path.join(root, 'graders', 'math.py'),
      'from graders.helpers import clean\n\ndef reward(completion, answer, *, info=None):\n    return float(clean(completion[-1]["content"]) == answer)\n',
    );
    const session = await openVerifierSession({
      ...options(''),
      target: { kind: 'module', module: 'graders.math', fn: 'reward' },
      pythonpath: [root],
    });
    try {
      expect(session.info.params).toEqual(['completion', 'answer', 'info']);
      expect(session.info.sourceFile).toBe(path.join(root, 'graders', 'math.py'));
      const results = await session.evaluate([req(' 42'), req('4 2')]);
      expect(results.map((r) => r.reward)).toEqual([1, 0]);
    } finally {
      await session.close();
    }
  });

  it('awaits async verifiers', async () => {
    const source = `
import asyncio

async def reward(completion, answer):
    await asyncio.sleep(0)
    return completion[-1]["content"] == answer
`;
    await withSession(source, async (session) => {
      expect(session.info.isAsync).toBe(true);
      const results = await session.evaluate([req('42'), req('7'), req('42')]);
      expect(results.map((r) => r.reward)).toEqual([1, 0, 1]);
    });
  });

  it('normalises what the verifier returns', async () => {
    const source = `
from fractions import Fraction

class Score:
    def __float__(self):
        return 0.25

VALUES = {
    "true": True, "false": False, "none": None, "str": "1.0", "list": [1.0], "tuple": (1.0, "ok"),
    "dict": {"reward": 1}, "int": 1, "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
    "huge": 10 ** 400, "-huge": -(10 ** 400), "fraction": Fraction(1, 2), "score": Score(),
    "complex": 1j,
}

def reward(completion, answer):
    return VALUES[completion[-1]["content"]]
`;
    await withSession(source, async (session) => {
      const keys = ['true', 'false', 'none', 'str', 'list', 'tuple', 'dict', 'int', 'nan', 'inf', '-inf', 'huge', '-huge', 'fraction', 'score', 'complex'];
      const results = await session.evaluate(keys.map((key) => req(key)));
      const table = Object.fromEntries(keys.map((key, i) => [key, [results[i]!.status, results[i]!.reward, results[i]!.rewardType, results[i]!.nonFinite]]));
      expect(table).toEqual({
        true: ['ok', 1, 'bool', null],
        false: ['ok', 0, 'bool', null],
        none: ['ok', null, 'NoneType', null],
        str: ['ok', null, 'str', null],
        list: ['ok', null, 'list', null],
        tuple: ['ok', null, 'tuple', null],
        dict: ['ok', null, 'dict', null],
        int: ['ok', 1, 'int', null],
        nan: ['ok', null, 'float', 'nan'],
        inf: ['ok', null, 'float', 'inf'],
        '-inf': ['ok', null, 'float', '-inf'],
        huge: ['ok', null, 'int', 'inf'],
        '-huge': ['ok', null, 'int', '-inf'],
        fraction: ['ok', 0.5, 'Fraction', null],
        score: ['ok', 0.25, 'Score', null],
        complex: ['ok', null, 'complex', null],
      });
    });
  });

  it('takes float() of a reward once, in the gate and in what packages ship alike', async () => {
    // A value whose __float__ is honest only the first time it is asked.
    const source = `
class TwoFaced:
    def __init__(self, value):
        self.value, self.asked = value, 0
    def __float__(self):
        self.asked += 1
        return self.value if self.asked == 1 else 1.0

def reward(completion, answer):
    return TwoFaced(1.0 if completion[-1]["content"] == answer else 0.0)
`;
    const file = await verifierFile(source);
    const gate = await withSession(source, (session) => session.evaluate([req('42'), req('1421')]));
    expect(gate.map((result) => result.reward)).toEqual([1, 0]);
    const script = [
      'import importlib.util, sys',
      'sys.path.insert(0, sys.argv[1])',
      'import gatekept_reward',
      'spec = importlib.util.spec_from_file_location("v", sys.argv[2]); v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)',
      'print([gatekept_reward.score(v.reward, "messages", text=t, answer="42", question=None, info=None) for t in ("42", "1421")])',
    ].join('\n');
    const { stdout } = await execa(PYTHON, ['-c', script, path.join(PACKAGE_ROOT, 'python'), file]);
    expect(stdout.trim()).toBe('[1.0, 0.0]');
  });

  it('reads signatures and awaitables as inspect does, without importing inspect for a plain function', async () => {
    // Every kind of parameter, defaults, wrapped and partial functions, builtins and callable objects.
    const { stdout } = await execa(PYTHON, [path.join(PACKAGE_ROOT, 'test', 'fixtures', 'signatures.py'), path.join(PACKAGE_ROOT, 'python')]);
    expect(stdout.trim()).toBe('ok 24');
    // A worker's start imports neither inspect nor typing: they are a visible share of it.
    const script =
      'import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules); import gatekept_reward; print(sorted(m for m in ("inspect", "typing") if m in set(sys.modules) - before))';
    const { stdout: loaded } = await execa(PYTHON, ['-c', script, path.join(PACKAGE_ROOT, 'python')]);
    expect(loaded.trim()).toBe('[]');
  });

  it('reports exceptions with their type and a capped message, and survives lone surrogates', async () => {
    const source = `
def reward(completion, answer):
    text = completion[-1]["content"]
    if text == "long":
        raise RuntimeError("x" * 5000)
    raise ValueError("cannot parse %r at %r" % (text, object()))
`;
    await withSession(source, async (session) => {
      const [plain, long, surrogate] = await session.evaluate([req('abc'), req('long'), req('bad \ud800 text')]);
      expect(plain).toMatchObject({ status: 'raised', reward: null, rewardType: '' });
      expect(plain?.error?.type).toBe('ValueError');
      // Object addresses vary between runs, so they are masked.
      expect(plain?.error?.message).toBe("cannot parse 'abc' at <object object at 0x?>");
      expect(long?.error?.message.length).toBeLessThanOrEqual(500);
      expect(surrogate?.status).toBe('raised');
      expect(surrogate?.error?.message).toContain('\\ud800');
    });
  });
});

describe('long completions', () => {
  // Pads like the attack corpus's, rows' golds after or before them, one with
  // non-BMP characters (sent whole), and a short one in between.
  const pad = 'lorem ipsum '.repeat(5000);
  const texts = [
    `${pad}\\boxed{1037}`,
    `${pad}\\boxed{1074}`,
    `\\boxed{1074}\n${pad}`,
    'short',
    `\\boxed{1111}\n${pad}`,
    `🙂${pad}🙂 1037`,
    `${pad.slice(7)}\\boxed{1037}`,
    `${pad}\\boxed{1074}`,
    '9'.repeat(5000),
    '9'.repeat(5001),
    // More long texts than either end keeps, then the first ones again.
    ...Array.from({ length: 300 }, (_, index) => `${index} ${pad.slice(0, 2000)}`),
    `0 ${pad.slice(0, 2000)}`,
    `${pad}\\boxed{1037}`,
    // Golds at both ends: only the padding between them is shared.
    `\\boxed{1037}\n${pad}\n\\boxed{1074}`,
    `\\boxed{2}\n${pad}\n\\boxed{11110}`,
  ];

  // The verifier answers with a digest of what it received, so a completion rebuilt wrong shows.
  const digest = (text: string): number => Number.parseInt(createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 12), 16);
  const digestSource = (...extra: string[]): string =>
    [
      'import hashlib, os',
      'def reward(completion, answer):',
      '    text = completion[-1]["content"]',
      ...extra,
      '    return int(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12], 16)',
    ].join('\n');

  it('are rebuilt exactly by the worker from what the codec sends', async () => {
    const source = digestSource();
    const sent: string[] = [];
    const codec = new LongTextCodec();
    for (const text of texts) {
      const encoded = codec.encode(text);
      sent.push(JSON.stringify(encoded));
    }
    // Most of a long completion that shares its padding is not sent again.
    expect(sent[1]!.length).toBeLessThan(100);
    expect(sent[4]!.length).toBeLessThan(100);
    expect(sent.at(-1)!.length).toBeLessThan(100);
    const results = await withSession(source, (session) => session.evaluate([...texts, ...texts].map((text) => req(text))));
    expect(results.map((result) => result.reward)).toEqual([...texts, ...texts].map(digest));
  });

  it('finds the shared start and end of two texts as a character loop would', () => {
    const loop = (a: string, b: string, limit: number, fromEnd: boolean): number => {
      let same = 0;
      while (same < limit && (fromEnd ? a[a.length - 1 - same] === b[b.length - 1 - same] : a[same] === b[same])) same += 1;
      return same;
    };
    const rng = seedrandom('common-length');
    for (let trial = 0; trial < 500; trial += 1) {
      const base = 'ab'.repeat(Math.floor(rng() * 400));
      const cut = Math.floor(rng() * (base.length + 1));
      const other = base.slice(0, cut) + (rng() < 0.5 ? 'x' : '') + base.slice(Math.floor(rng() * (base.length + 1)));
      const limit = Math.min(base.length, other.length);
      for (const fromEnd of [false, true]) expect(commonLength(base, other, limit, fromEnd)).toBe(loop(base, other, limit, fromEnd));
    }
  });

  it('are rebuilt exactly when batches are sent ahead, and after a crash in the batch before', async () => {
    const source = digestSource('    if text == "abort":', '        os.abort()');
    await withSession(source, async (session) => {
      // Handed over together: the second and third are sent behind the first
      // and encoded before it has run; the second dies halfway, so the third
      // must be encoded again for the fresh worker.
      const first = session.evaluate(texts.map((text) => req(text)));
      const crashing = [...texts.slice(0, 150), 'abort', ...texts.slice(150)];
      const second = session.evaluate(crashing.map((text) => req(text)));
      const third = session.evaluate([...texts].reverse().map((text) => req(text)));
      const [a, b, c] = await Promise.all([first, second, third]);
      expect(a.map((result) => result.reward)).toEqual(texts.map(digest));
      expect(b[150]).toMatchObject({ status: 'crashed' });
      expect(b.filter((_, index) => index !== 150).map((result) => result.reward)).toEqual(texts.map(digest));
      expect(c.map((result) => result.reward)).toEqual([...texts].reverse().map(digest));
    });
  });

  it('are refused with a protocol error when they name what the worker does not hold', async () => {
    const file = await verifierFile(digestSource());
    const text = 'lorem ipsum '.repeat(200);
    const forms: unknown[] = [
      ['k', text],
      [0, '<', 5, 5000, '>'],
      [0, '<', 9, 5, '>'],
      [0, '<', -1, 5, '>'],
      [7, '<', 0, 5, '>'],
      [0, 1, 5, 2, '>'],
      [0, '<', 5, 20, '>'],
    ];
    const input = forms.map((form, index) => JSON.stringify([index + 1, form, '1', null, {}])).join('\n');
    const { stdout } = await execa(PYTHON, [path.join(PACKAGE_ROOT, 'test/fixtures/raw-harness.py'), path.join(PACKAGE_ROOT, 'python/harness.py'), file, dir], {
      input,
    });
    const replies = stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => JSON.parse(line) as unknown[]);
    expect(replies.map((reply) => reply[0])).toEqual([1, 'error', 'error', 'error', 'error', 'error', 7]);
    expect(replies[6]![2]).toBe(digest(`<${text.slice(5, 20)}>`));
  });

  it('decode mirrors encode', () => {
    const encoder = new LongTextCodec();
    const decoder = new LongTextCodec();
    for (const text of [...texts, ...[...texts].reverse()]) expect(decoder.decode(encoder.encode(text))).toBe(text);
  });
});

describe('hangs and crashes', () => {
  it('times out a busy loop in the worker and keeps the same worker', async () => {
    await withSession(
      MISCHIEF,
      async (session) => {
        const [before, loop, after, again] = await session.evaluate([req('pid'), req('loop'), req('pid'), req('42')]);
        expect(loop).toMatchObject({
          status: 'timeout',
          reward: null,
          error: { type: 'Timeout', message: 'the verifier did not return within 300 ms' },
        });
        expect(after?.reward).toBe(before?.reward);
        expect(again?.reward).toBe(1);
      },
      { callTimeoutMs: 300 },
    );
  });

  it('times out catastrophic regex backtracking and carries on', async () => {
    await withSession(
      MISCHIEF,
      async (session) => {
        const [regex, after] = await session.evaluate([req('regex'), req('42')]);
        expect(regex).toMatchObject({ status: 'timeout', reward: null });
        expect(after).toMatchObject({ status: 'ok', reward: 1 });
      },
      { callTimeoutMs: 300 },
    );
  });

  it('kills a worker that will not return and restarts it for the rest of the batch', async () => {
    await withSession(
      MISCHIEF,
      async (session) => {
        // A worker that were not killed would hold the batch for good: the
        // test's timeout, not a stopwatch, is what catches that.
        const [before, stubborn, after, gold] = await session.evaluate([req('pid'), req('stubborn'), req('pid'), req('42')]);
        expect(stubborn).toMatchObject({
          status: 'timeout',
          reward: null,
          error: { type: 'Timeout', message: 'the verifier did not return within 300 ms' },
        });
        expect(after?.status).toBe('ok');
        expect(after?.reward).not.toBe(before?.reward);
        expect(isAlive(before!.reward!)).toBe(false);
        expect(gold?.reward).toBe(1);
      },
      // Host pids: inside the sandbox's PID namespace every worker is pid 2.
      { callTimeoutMs: 300, sandbox: 'none' },
    );
  }, 20_000);

  it('pins a crash on its call when the replies before it were still held in a block', async () => {
    // Fast calls leave in blocks; the ones answered before the crash must
    // still arrive, and the crash must land on the call that caused it.
    for (const sandbox of ['none', 'auto'] as const) {
      await withSession(
        MISCHIEF,
        async (session) => {
          const requests = Array.from({ length: 600 }, (_, index) => req(index === 437 ? 'abort' : index === 599 ? '42' : `x${index}`));
          const results = await session.evaluate(requests);
          expect(results.slice(0, 437).every((result) => result.status === 'ok' && result.reward === 0)).toBe(true);
          expect(results[437]).toMatchObject({ status: 'crashed', error: { message: 'the verifier process was killed by SIGABRT' } });
          expect(results.slice(438).every((result) => result.status === 'ok')).toBe(true);
          expect(results[599]!.reward).toBe(1);
        },
        { sandbox },
      );
    }
  }, 20_000);

  it('turns exits into results and restarts after real crashes', async () => {
    await withSession(
      MISCHIEF,
      async (session) => {
        const results = await session.evaluate([
          req('pid'),
          req('os_exit'),
          req('sys_exit'),
          req('pid'),
          req('abort'),
          req('pid'),
          req('self_kill'),
          req('42'),
        ]);
        const [pid1, osExit, sysExit, pid2, abort, pid3, selfKill, gold] = results;
        expect(osExit).toMatchObject({
          status: 'exit',
          reward: null,
          error: { type: 'SystemExit', message: 'os._exit(3)' },
          sideEffects: [{ kind: 'exit_attempt', detail: 'os._exit(3)' }],
        });
        expect(sysExit).toMatchObject({ status: 'exit', sideEffects: [{ kind: 'exit_attempt', detail: 'sys.exit(None)' }] });
        expect(pid2?.reward).toBe(pid1?.reward);
        expect(abort).toMatchObject({
          status: 'crashed',
          reward: null,
          error: { type: 'ProcessExited', message: 'the verifier process was killed by SIGABRT' },
        });
        expect(pid3?.reward).not.toBe(pid2?.reward);
        expect(selfKill).toMatchObject({ status: 'crashed', error: { message: 'the verifier process was killed by SIGKILL' } });
        expect(gold).toMatchObject({ status: 'ok', reward: 1 });
      },
      { sandbox: 'none' },
    );
  }, 20_000);
});

describe('isolation', () => {
  it('without a sandbox, blocks network, new programs, signals and writes outside the workdir', async () => {
    const outside = path.join(dir, 'outside.txt');
    await withSession(
      MISCHIEF,
      async (session) => {
        expect(session.isolation).toBe('none');
        const [network, subprocess, kill, write, bind] = await session.evaluate([
          req('network'),
          req('subprocess'),
          req('kill'),
          req(`write:${outside}`),
          req('loopback_bind'),
        ]);
        expect(network).toMatchObject({ status: 'raised', error: { type: 'PermissionError' } });
        expect(network?.sideEffects.map((e) => e.kind)).toEqual(['network_blocked']);
        // Outside the sandbox the loopback is the host's: a bind there stays refused.
        expect(bind).toMatchObject({ status: 'raised', sideEffects: [{ kind: 'network_blocked', detail: "socket.bind: ('127.0.0.1', 0)" }] });
        expect(subprocess?.sideEffects).toEqual([{ kind: 'subprocess_blocked', detail: "subprocess.Popen: ['true']" }]);
        expect(kill?.sideEffects).toEqual([{ kind: 'kill_blocked', detail: 'os.kill to its parent (signal 15)' }]);
        expect(write?.sideEffects).toEqual([{ kind: 'file_write_blocked', detail: `open for writing: ${outside}` }]);
        expect(existsSync(outside)).toBe(false);
      },
      { sandbox: 'none' },
    );
  });

  it.skipIf(!HAS_BWRAP)('in the bubblewrap sandbox, allows a child program and still reports network and outside writes', async () => {
    // Not under /tmp: the sandbox has a private /tmp of its own, where a write is
    // contained rather than refused. A checkout under /tmp writes to /var/tmp.
    const underTmp = !path.relative(realpathSync(os.tmpdir()), realpathSync(process.cwd())).startsWith('..');
    const outsideDir = underTmp ? '/var/tmp' : path.join(process.cwd(), 'test');
    const outside = path.join(outsideDir, `outside-sandboxed-${process.pid}.txt`);
    await withSession(
      MISCHIEF,
      async (session) => {
        expect(session.isolation).toBe('bwrap');
        const [network, subprocess, write, bind] = await session.evaluate([req('network'), req('subprocess'), req(`write:${outside}`), req('loopback_bind')]);
        expect(network).toMatchObject({ status: 'raised', error: { type: 'PermissionError' } });
        // The sandbox's loopback is its own network namespace's: a library's bind there (urllib3's IPv6 probe) reaches nothing.
        expect(bind).toMatchObject({ status: 'ok', reward: 1, sideEffects: [] });
        expect(subprocess).toMatchObject({ status: 'ok', sideEffects: [{ kind: 'process', detail: "subprocess.Popen: ['true']" }] });
        expect(write?.sideEffects).toEqual([{ kind: 'file_write_blocked', detail: `open for writing: ${outside}` }]);
        expect(existsSync(outside)).toBe(false);
      },
      { sandbox: 'bwrap' },
    );
  });

  it('reports and undoes env changes, new files and chdir', async () => {
    await withSession(MISCHIEF, async (session) => {
      const results = await session.evaluate([
        req('env_set'),
        req('env_check'),
        req('make_file'),
        req('file_check'),
        req('write:inside.txt'),
        req('chdir'),
        req('cwd_check'),
      ]);
      expect(results.map((r) => r.reward)).toEqual([1, 1, 1, 1, 1, 1, 1]);
      expect(results[0]?.sideEffects).toEqual([{ kind: 'env_changed', detail: 'GATEKEPT_TEST_VAR' }]);
      expect(results[2]?.sideEffects).toEqual([{ kind: 'file_created', detail: 'scratch.txt' }]);
      expect(results[4]?.sideEffects).toEqual([{ kind: 'file_created', detail: 'inside.txt' }]);
      expect(results[1]?.sideEffects).toEqual([]);
    });
  });

  it('drains megabytes of output without blocking', async () => {
    await withSession(MISCHIEF, async (session) => {
      const [loud, quiet] = await session.evaluate([req('print'), req('42')]);
      expect(loud).toMatchObject({ status: 'ok', reward: 1 });
      expect(loud?.sideEffects).toEqual([{ kind: 'output', detail: 'stdout: 5000001 bytes' }]);
      expect(quiet).toMatchObject({ status: 'ok', reward: 1, sideEffects: [] });
    });
  });

  it('hands the verifier a scrubbed environment', async () => {
    process.env.GATEKEPT_FAKE_SECRET = 'hunter2';
    try {
      await withSession(MISCHIEF, async (session) => {
        const results = await session.evaluate([req('secret'), req('home')]);
        expect(results.map((r) => r.reward)).toEqual([1, 1]);
      });
    } finally {
      delete process.env.GATEKEPT_FAKE_SECRET;
    }
  });

  it('gives the same results on every run', async () => {
    const batch = ['42', 'loop', 'network', 'env_set', 'make_file', 'os_exit', 'abc', 'print'].map((c) => req(c));
    const first = await withSession(MISCHIEF, (s) => s.evaluate(batch), { callTimeoutMs: 300 });
    const second = await withSession(MISCHIEF, (s) => s.evaluate(batch), { callTimeoutMs: 300 });
    expect(withoutMs(second)).toEqual(withoutMs(first));
  }, 20_000);
});

describe('load failures', () => {
  it('reports a missing module as VERIFIER_NOT_FOUND', async () => {
    const error = await failure(openVerifierSession({ ...options(''), target: { kind: 'module', module: 'no_such_module_xyz', fn: 'reward' } }));
    expect(error.code).toBe('VERIFIER_NOT_FOUND');
    expect(error.details.join('\n')).toContain('no_such_module_xyz');
  });

  it('reports a missing function as VERIFIER_NOT_FOUND and lists what is there', async () => {
    const file = await verifierFile('def score(completion, answer):\n    return 1.0\n');
    const error = await failure(openVerifierSession(options(file)));
    expect(error.code).toBe('VERIFIER_NOT_FOUND');
    expect(error.details.join('\n')).toContain('score');
  });

  it('reports syntax and import errors as VERIFIER_IMPORT_FAILED', async () => {
    const broken = await failure(openVerifierSession(options(await verifierFile('def reward(:\n    pass\n'))));
    expect(broken.code).toBe('VERIFIER_IMPORT_FAILED');
    expect(broken.details.join('\n')).toContain('SyntaxError');
    const raising = await failure(openVerifierSession(options(await verifierFile('import no_such_dependency_xyz\n\ndef reward(c, a):\n    return 1\n'))));
    expect(raising.code).toBe('VERIFIER_IMPORT_FAILED');
    expect(raising.details.join('\n')).toContain("No module named 'no_such_dependency_xyz'");
  });

  it('reports signatures it cannot fill as VERIFIER_NOT_CALLABLE', async () => {
    const notCallable = await failure(openVerifierSession(options(await verifierFile('reward = 3\n'))));
    expect(notCallable.code).toBe('VERIFIER_NOT_CALLABLE');
    const group = await failure(openVerifierSession(options(await verifierFile('def reward(completions, answers, /):\n    return [1.0]\n'))));
    expect(group.code).toBe('VERIFIER_NOT_CALLABLE');
    expect(group.details.join('\n')).toContain("'completions', 'answers'");
  });

  it('bounds an import by its CPU time, so a busy machine does not stretch it: a busy import stops with VERIFIER_IMPORT_TIMEOUT (could not audit, exit 3)', async () => {
    const file = await verifierFile('while True:\n    pass\n\ndef reward(completion, answer):\n    return 1.0\n');
    const error = await failure(openVerifierSession(options(file, { importTimeoutMs: 1000 })));
    expect(error.code).toBe('VERIFIER_IMPORT_TIMEOUT');
    expect(error.exitCode).toBe(3);
    expect(error.message).toContain('could not audit');
    expect(error.details.join('\n')).toContain('while True');
  });

  it('bounds an import that waits instead of working by the wall clock, at a multiple of timeouts.import_ms', async () => {
    // 0.4 s of sleep uses no CPU: under a 200 ms import limit it loads (the
    // wall clock allows IMPORT_WALL_FACTOR times as much); 60 s does not.
    const loads = await verifierFile('import time\ntime.sleep(0.4)\n\ndef reward(completion, answer):\n    return 1.0\n');
    const session = await openVerifierSession(options(loads, { importTimeoutMs: 200 }));
    await session.close();
    const hangs = await verifierFile('import time\ntime.sleep(60)\n\ndef reward(completion, answer):\n    return 1.0\n');
    const error = await failure(openVerifierSession(options(hangs, { importTimeoutMs: 500 })));
    expect(error.code).toBe('VERIFIER_IMPORT_TIMEOUT');
    expect(error.details.join('\n')).toContain('time.sleep(60)');
  });

  it('reports a missing interpreter as PYTHON_NOT_FOUND', async () => {
    const file = await verifierFile(STRICT);
    const error = await failure(openVerifierSession(options(file, { python: path.join(dir, 'no-such-python') })));
    expect(error.code).toBe('PYTHON_NOT_FOUND');
    expect(error.suggestion).toContain('--python');
  });

  it.skipIf(!process.env.GATEKEPT_OLD_PYTHON)('reports an old interpreter as PYTHON_TOO_OLD', async () => {
    const file = await verifierFile(STRICT);
    const error = await failure(openVerifierSession(options(file, { python: process.env.GATEKEPT_OLD_PYTHON! })));
    expect(error.code).toBe('PYTHON_TOO_OLD');
  });

  it('rejects invalid options as BAD_ARGUMENT', async () => {
    const error = await failure(openVerifierSession(options('x.py', { callTimeoutMs: 0 })));
    expect(error.code).toBe('BAD_ARGUMENT');
    expect(error.details.join('\n')).toContain('callTimeoutMs');
  });

  it("reads a worker's ready reply by hand exactly as the schema does", () => {
    const ready = {
      op: 'ready',
      ok: true,
      params: ['completion', 'answer'],
      var_kwargs: false,
      is_async: false,
      python: '3.11.7',
      source_file: '/v.py',
      import_ms: 1.5,
      // Only `audit --env`'s shim sends it: hex, and absent elsewhere.
      row_digests: '0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978',
    };
    const values = [undefined, null, true, false, 0, -1, 2.5, 'x', '', [], ['a'], [1], {}, 'ready', 'error', 'ABC', 'a1 b2'];
    const variants: unknown[] = [
      ready,
      null,
      'ready',
      [],
      { op: 'ready', ok: false, error: { kind: 'import_error', type: 'E', message: 'm', traceback: 't' } },
      { op: 'error', message: 'm' },
      { ...ready, extra: 1 },
    ];
    for (const key of Object.keys(ready)) for (const value of values) variants.push({ ...ready, [key]: value });
    for (const variant of variants) {
      const parsed = readyReplySchema().safeParse(variant);
      const checked = checkedReadyReply(variant);
      // Null leaves the reply to the schema: only what it accepts as a successful import may be taken by hand.
      if (checked !== null) expect(checked, JSON.stringify(variant)).toEqual(parsed.success ? parsed.data : 'refused by the schema');
      else expect(parsed.success && parsed.data.op === 'ready' && parsed.data.ok === true, JSON.stringify(variant)).toBe(false);
    }
  });

  it('checks options by hand exactly as the schema does, for every field and every kind of value', () => {
    const base = {
      python: 'python3',
      target: { kind: 'file', path: 'v.py', fn: 'reward' },
      pythonpath: ['.'],
      completionFormat: 'messages',
      callTimeoutMs: 1000,
      importTimeoutMs: 1000,
      memoryMb: 0,
      outputCapBytes: 10,
      sandbox: 'none',
      workers: 2,
    };
    const values = [
      '',
      'x',
      'messages',
      'string',
      'auto',
      'bwrap',
      'module',
      'file',
      0,
      1,
      -1,
      1.5,
      2 ** 53,
      -(2 ** 53),
      Number.NaN,
      Number.POSITIVE_INFINITY,
      true,
      null,
      undefined,
      [],
      [''],
      ['a', 'b'],
      [1],
      {},
      { kind: 'module', module: 'm', fn: 'f' },
      { kind: 'module', module: '', fn: 'f' },
      { kind: 'file', path: 'p', fn: '' },
      { kind: 'file', module: 'm', fn: 'f' },
      { kind: 'other', path: 'p', fn: 'f' },
      { kind: 'file', path: 'p', fn: 'f', extra: 1 },
    ];
    const variants: unknown[] = [base, null, 'options', [], {}];
    for (const key of Object.keys(base)) {
      for (const value of values) variants.push({ ...base, [key]: value });
      const without: Record<string, unknown> = { ...base };
      delete without[key];
      variants.push(without);
    }
    for (const variant of variants) {
      const parsed = sessionOptionsSchema().safeParse(variant);
      expect(checkedSessionOptions(variant), JSON.stringify(variant)).toEqual(parsed.success ? parsed.data : null);
    }
    expect(variants.length).toBeGreaterThan(300);
  });
});

describe('lifecycle', () => {
  it('leaves no worker behind after close, and close is idempotent', async () => {
    const session = await openVerifierSession(options(await verifierFile(MISCHIEF), { sandbox: 'none' }));
    const [pid] = await session.evaluate([req('pid')]);
    const workerPid = pid!.reward!;
    expect(isAlive(workerPid)).toBe(true);
    await session.close();
    await session.close();
    // SIGKILLed with its group by close; on a loaded machine the kernel may
    // take a moment to finish it off, but never seconds.
    const deadline = Date.now() + 2000;
    while (isAlive(workerPid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(isAlive(workerPid)).toBe(false);
    await expect(session.evaluate([req('42')])).rejects.toBeInstanceOf(GatekeptError);
  });

  // How fast is for the benchmarks (npm run bench); this checks that a batch
  // of thousands streams through whole and in order. A few seconds on an idle
  // machine; the timeout leaves room for a busy one.
  it('streams thousands of requests', async () => {
    await withSession(STRICT, async (session) => {
      const batch = Array.from({ length: 20_000 }, (_, i) => req(String(i % 100)));
      const results = await session.evaluate(batch);
      expect(results).toHaveLength(batch.length);
      expect(results.filter((r) => r.reward === 1)).toHaveLength(200);
      expect(results.filter((r, i) => r.reward === 1 && i % 100 !== 42)).toEqual([]);
    });
  }, 120_000);
});

describe('worker pool', () => {
  const SLOW = `
import time

def reward(completion, answer, **kwargs):
    time.sleep(0.01)
    return 1.0 if completion[-1]["content"] == answer else 0.0
`;
  const FAST = `
def reward(completion, answer, **kwargs):
    return 1.0 if completion[-1]["content"] == answer else 0.0
`;

  // A second worker costs a Python start and an import: worth it for a few
  // hundred slow calls, not for a few hundred fast ones.
  it.each([
    ['a slow verifier on a few hundred calls', SLOW, 2],
    ['a fast verifier on a few hundred calls', FAST, 1],
  ] as const)('starts workers by the work ahead: %s', async (_name, source, workers) => {
    const pool = await WorkerPool.open({ ...options(await verifierFile(source)), workers: 2 });
    try {
      await pool.evaluate(Array.from({ length: 8 }, () => req('42')));
      const results = await pool.evaluate(Array.from({ length: 300 }, (_, index) => req(String(index))));
      expect(results.filter((result) => result.status === 'ok')).toHaveLength(300);
      expect(pool.size).toBe(workers);
    } finally {
      await pool.close();
    }
  });

  it('shares one queue: a cancelled evaluation ends with its calls skipped, and the ones queued behind it still run', async () => {
    const pool = await WorkerPool.open({ ...options(await verifierFile(FAST)), workers: 1 });
    try {
      let cancelled = false;
      const first = pool.evaluate(
        Array.from({ length: 50 }, (_, index) => req(String(index))),
        { cancelled: () => cancelled },
      );
      const second = pool.evaluate(Array.from({ length: 20 }, (_, index) => req(String(index))));
      cancelled = true;
      const [skipped, run] = await Promise.all([first, second]);
      expect(skipped.every((result) => result.status === 'skipped')).toBe(true);
      expect(run.map((result) => result.status)).toEqual(Array.from({ length: 20 }, () => 'ok'));
    } finally {
      await pool.close();
    }
  });

  it('shares batches between evaluations: a crash cuts its own evaluation only, and the calls of the other it skipped run again', async () => {
    const source = `
import signal
def reward(completion, answer, **kwargs):
    if completion[-1]["content"] == "die":
        signal.raise_signal(signal.SIGKILL)
    return 1.0
`;
    const pool = await WorkerPool.open({ ...options(await verifierFile(source)), workers: 1, batchSize: 100 });
    try {
      const first = pool.evaluate([req('a'), req('b'), req('die'), req('c')], { stopOnTimeout: true });
      const second = pool.evaluate(
        Array.from({ length: 10 }, (_, index) => req(String(index))),
        { stopOnTimeout: true },
      );
      const [cut, whole] = await Promise.all([first, second]);
      expect(cut.map((result) => result.status)).toEqual(['ok', 'ok', 'crashed', 'skipped']);
      expect(whole.map((result) => result.status)).toEqual(Array.from({ length: 10 }, () => 'ok'));
    } finally {
      await pool.close();
    }
  });

  it('hands an evaluation asked to go in one batch to one worker, and splits it otherwise', async () => {
    const source = `
import os, time
# Which worker made the call (pids repeat across sandboxes).
WORKER = int.from_bytes(os.urandom(4), "big")
def reward(completion, answer, **kwargs):
    time.sleep(0.005)
    return WORKER
`;
    const pool = await WorkerPool.open({ ...options(await verifierFile(source)), workers: 2 });
    try {
      pool.reserve(10_000);
      await pool.evaluate(Array.from({ length: 200 }, (_, index) => req(String(index))));
      expect(pool.size).toBe(2);
      const workersOf = (results: EvalResult[]) => new Set(results.map((result) => result.reward)).size;
      const sample = Array.from({ length: 48 }, (_, index) => req(String(index)));
      expect(workersOf(await pool.evaluate(sample))).toBe(2);
      expect(workersOf(await pool.evaluate(sample, { oneBatch: true }))).toBe(1);
    } finally {
      await pool.close();
    }
  });

  // The first worker comes up after close() (its start was already under
  // way): the pool has no worker, so `ready` rejects instead of resolving on
  // a pool whose info nobody can read.
  it('closed before its first worker is up: ready rejects, and info says the pool is closed', async () => {
    const pool = WorkerPool.start({ ...options(await verifierFile(FAST)), workers: 1 });
    await pool.close();
    await expect(pool.ready).rejects.toThrow(/worker pool is closed/);
    expect(() => pool.info).toThrow(/worker pool is closed/);
  });

  it('starts a second worker during an evaluation once its calls are timed, without stopping the first', async () => {
    const pool = await WorkerPool.open({ ...options(await verifierFile(SLOW)), workers: 2 });
    try {
      // Six seconds of calls: a second worker pays off (work ahead worth two
      // starts) even where a busy machine makes a start take over a second.
      const results = await pool.evaluate(Array.from({ length: 600 }, (_, index) => req(String(index))));
      expect(results.filter((result) => result.status === 'ok')).toHaveLength(600);
      expect(pool.size).toBe(2);
    } finally {
      await pool.close();
    }
  });
});
