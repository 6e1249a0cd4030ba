import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate, type GateResult } from '../src/gate.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { testPython } from './support/test-python.js';

/**
 * What real reward code does and the gate must let it do: keep a process
 * pool, start, signal, wait for and stop its own children, bound its parsing
 * with a clock of its own. What stays contained is a process outliving the
 * call that started it, and a signal to anything but the verifier's own
 * descendants. Real harness, real Python, both isolation modes.
 */

const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';
const MODES = HAS_BWRAP ? (['bwrap', 'none'] as const) : (['none'] as const);

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'gatekept-real-code-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const LAST_BOX = `
import re
_BOX = re.compile(r"\\\\boxed\\{([^{}]*)\\}")

def _check(text, answer):
    boxes = _BOX.findall(text)
    return 1.0 if boxes and boxes[-1].strip() == answer else 0.0
`;

async function audit(name: string, source: string, fn: string, sandbox: 'bwrap' | 'none'): Promise<GateResult> {
  const file = path.join(dir, `${name}.py`);
  await writeFile(file, source);
  return gate({ reward: `${file}:${fn}`, answer: '42', answerType: 'numeric', python: PYTHON, cwd: PACKAGE_ROOT, workers: 1, sandbox });
}

const codes = (result: GateResult): string[] => result.record.reasons.map((reason) => reason.code);
const processEffects = (result: GateResult): string[] => result.record.side_effects.find((effect) => effect.kind === 'process')?.examples ?? [];

describe.each(MODES)('processes the verifier starts (sandbox %s)', (sandbox) => {
  it("a process pool made at import lives across calls: nothing is killed, nothing reported, and the verdict is the reward's", async () => {
    const source = `${LAST_BOX}
from concurrent.futures import ProcessPoolExecutor
POOL = ProcessPoolExecutor(max_workers=2)

def reward(completion, answer, **kwargs):
    return POOL.submit(_check, completion[-1]["content"], answer).result(timeout=5)
`;
    const result = await audit('pool-at-import', source, 'reward', sandbox);
    expect(result.decision, JSON.stringify(result.record.reasons)).toBe('PASS');
    expect(result.record.side_effects).toEqual([]);
  }, 120_000);

  it('a pool made and shut down in every call, and a child killed and waited for by its parent, are recorded and allowed', async () => {
    const source = `${LAST_BOX}
import os, signal, time
from concurrent.futures import ProcessPoolExecutor

def reward_pool(completion, answer, **kwargs):
    with ProcessPoolExecutor(max_workers=1) as pool:
        return pool.submit(_check, completion[-1]["content"], answer).result(timeout=5)

def reward_kill(completion, answer, **kwargs):
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return _check(completion[-1]["content"], answer)
`;
    for (const fn of ['reward_pool', 'reward_kill']) {
      const result = await audit(`own-children-${fn}`, source, fn, sandbox);
      expect(result.decision, `${fn}: ${JSON.stringify(result.record.reasons)}`).toBe('PASS');
      expect(result.record.side_effects.map((effect) => effect.kind)).toEqual(['process']);
      expect(processEffects(result)).toContain('os.fork');
    }
  }, 240_000);

  it('a child still running after the call that started it is killed and reported; a signal to the parent is refused', async () => {
    const source = `${LAST_BOX}
import os, signal, time

def reward_stray(completion, answer, **kwargs):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    return _check(completion[-1]["content"], answer)

def reward_parent(completion, answer, **kwargs):
    try:
        os.kill(os.getppid(), signal.SIGTERM)
    except PermissionError:
        pass
    return _check(completion[-1]["content"], answer)
`;
    const stray = await audit('stray', source, 'reward_stray', sandbox);
    expect(processEffects(stray).join('\n')).toMatch(/still running after the call \(killed\)/);
    const parent = await audit('parent', source, 'reward_parent', sandbox);
    expect(codes(parent)).toContain('SIDE_EFFECTS');
    expect(parent.record.side_effects.find((effect) => effect.kind === 'kill_blocked')?.examples).toEqual(['os.kill to its parent (signal 15)']);
  }, 240_000);
});

describe("time limits of the verifier's own", () => {
  it('a reward whose own clock pays the same reply differently is TIMING_DEPENDENT, with the completion and both scores, and its exploits are reported alongside', async () => {
    // Pays any reply that mentions the answer (an exploit), under a 50 ms
    // timer of its own; a reply it has scored before for the same answer
    // outlasts the timer (a cache whose lookup is slow) and scores 0, alone
    // or not. The warm worker scores the re-check sample a second time; the
    // fresh one for the first time.
    const source = `
import signal, time
SEEN = set()

class Late(Exception):
    pass

def _late(signum, frame):
    raise Late()

def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    previous = signal.signal(signal.SIGALRM, _late)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        if (text, answer) in SEEN:
            time.sleep(0.2)
        SEEN.add((text, answer))
        return 1.0 if answer in text else 0.0
    except Late:
        return 0.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
`;
    const result = await audit('own-clock', source, 'reward', 'none');
    expect(codes(result)).toContain('TIMING_DEPENDENT');
    expect(codes(result)).not.toContain('NOT_A_FUNCTION');
    expect(codes(result)).toContain('HACKABILITY_OVER');
    const timing = result.record.reasons.find((reason) => reason.code === 'TIMING_DEPENDENT')!;
    expect(timing.message).toMatch(/scored 1 in the audit and 0 when scored again/);
  }, 300_000);
});

describe("the verifiers library's own math reward", () => {
  it('vf.MathRubric (0.3), which checks with math-verify in a process pool it makes when built, pays the boxed gold and is judged on its answers alone', async () => {
    // Its import costs seconds of CPU (and far more wall time on a loaded
    // machine); its pool is made at import, and it signals its own workers.
    const source = `
from verifiers.legacy.rubrics.math_rubric import MathRubric

RUBRIC = MathRubric()


async def reward(completion, answer, **kwargs):
    return await RUBRIC.correct_answer(RUBRIC.parser, completion, answer)
`;
    const file = path.join(dir, 'math_rubric.py');
    await writeFile(file, source);
    const result = await gate({
      reward: `${file}:reward`,
      answer: '72',
      answerType: 'numeric',
      python: testPython('verifiers-v0'),
      cwd: PACKAGE_ROOT,
      workers: 1,
    });
    // The pool, its signals and its timers are no finding: the gold is paid
    // boxed, and nothing but what it pays decides. math-verify reads `72%`
    // as 72 and as 0.72, a re-reading that pays one reply under two golds:
    // if that decides, it is for an exploit, never for the pool.
    expect(result.record.target.golds[0]!.accepted_formats).toContain('boxed');
    expect(result.record.side_effects.filter((effect) => effect.kind !== 'process')).toEqual([]);
    const exploitCodes = ['HACKABILITY_OVER', 'HACK_RATE_CI_OVER', 'HEDGING_PAYS'];
    expect(result.record.reasons.filter((reason) => !exploitCodes.includes(reason.code))).toEqual([]);
    if (result.decision === 'REJECT') expect(result.record.findings.some((finding) => finding.rewarded_under.length > 1)).toBe(true);
  }, 600_000);
});
