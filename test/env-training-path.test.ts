/**
 * `gatekept audit --env` scores an environment on the path training takes:
 * a classic environment through its own rollout and rubric, re-read at every
 * call; a 0.4 taskset through `Task.score` on a trace that records the model
 * call. Each fixture here passes a shim that snapshots the rubric at load or
 * scores a state no rollout has, and is exploitable in a real rollout.
 */
import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import { auditEnv } from '../src/env-audit/env-audit.js';
import { ENV_LOADER_PATH } from '../src/env-audit/inspect-env.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { testPython } from './support/test-python.js';

const ENVS = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'envs');
const V1 = () => testPython('verifiers-v1');
const V0 = () => testPython('verifiers-v0');
const ROWS = 2;
const WORKERS = 2;
/** Loading verifiers takes tens of seconds on a busy machine: the import limit is not what these tests are about. */
const POLICY = { ...DEFAULT_POLICY, timeouts: { ...DEFAULT_POLICY.timeouts, importMs: 120_000 } };
/** Each audit runs the gate once per reward and once on the total. */
const SLOW = 400_000;

/** Runs Python against the loader: `env` is the opened environment. */
function loaderScript(body: string[]): string {
  return [
    'import asyncio, sys',
    `sys.path.insert(0, ${JSON.stringify(path.dirname(ENV_LOADER_PATH))})`,
    'import env_loader',
    'env, _ = env_loader.open_env(sys.argv[1])',
    ...body,
  ].join('\n');
}

describe('classic environments are scored through their own rollout and rubric', () => {
  it(
    'a weight changed on the first scoring is not a function of the inputs, and the new weights are what is gated',
    async () => {
      const result = await auditEnv({ env: path.join(ENVS, 'v0-reweight'), python: V0(), rows: ROWS, workers: WORKERS, policy: POLICY });
      expect(result.decision).toBe('REJECT');
      expect(result.exitCode).toBe(1);
      const total = result.record.total!;
      expect(total.decision).toBe('REJECT');
      const codes = total.reasons.map((reason) => reason.code);
      expect(codes).toContain('NOT_A_FUNCTION');
      // The first call of each process finds the change and raises (its message is checked below, on the loader).
      expect(codes.some((code) => code.startsWith('BROKEN_ON_') || code === 'ERRORS_ON_ATTACKS')).toBe(true);
      // Loaded, the weights were 1 and 0.1: that is what the record declares.
      const integrity = result.record.checks.find((entry) => entry.name === 'integrity')!;
      expect((integrity.evidence.rewards as { name: string; weight: number }[]).map((reward) => [reward.name, reward.weight])).toEqual([
        ['correct', 1],
        ['formatted', 0.1],
      ]);
    },
    SLOW,
  );

  it(
    "a reward strict only while the trajectory is empty sees the rollout's trajectory and is rejected",
    async () => {
      const result = await auditEnv({ env: path.join(ENVS, 'v0-trajectory'), python: V0(), rows: ROWS, workers: WORKERS, policy: POLICY });
      expect(result.decision).toBe('REJECT');
      expect(result.record.total!.decision).toBe('REJECT');
      expect(result.record.total!.reasons.map((reason) => reason.code)).not.toContain('NOT_A_FUNCTION');
    },
    SLOW,
  );

  it("the state a reward sees is a rollout's, its errors are raised, and the change is reported once per change", async () => {
    const script = loaderScript([
      'async def main():',
      '    print(await env.score(0, "42", "\\\\boxed{42}", None, track=False))',
      '    try:',
      '        await env.score(0, "42", "\\\\boxed{42}")',
      '    except env_loader.RewardsChanged as error:',
      '        print("changed:", error)',
      '    print(await env.score(0, "42", "\\\\boxed{42}"), await env.score(0, "42", "\\\\boxed{7}"), await env.score(0, "42", "\\\\boxed{42}", "correct"))',
      'asyncio.run(main())',
    ]);
    const run = await execa(V0(), ['-c', script, path.join(ENVS, 'v0-reweight')], { env: { HF_DATASETS_OFFLINE: '1' } });
    const lines = run.stdout.trim().split('\n');
    // The library reads the weights after calling the rewards: the first scoring already pays the format reward alone.
    expect(lines.at(-3)).toBe('1.0');
    expect(lines.at(-2)).toMatch(
      /^changed: .*weight of correct \(Rubric #0\) 1\.0 -> 0\.0; weight of formatted \(Rubric #1\) 0\.1 -> 1\.0, found before scoring this completion/,
    );
    expect(lines.at(-1)).toBe('1.0 1.0 1.0');

    const state = loaderScript([
      'import verifiers as vf',
      'seen = {}',
      'def probe(completion, state, prompt, answer):',
      '    seen.update(turns=len(state["trajectory"]), completion=completion[-1]["content"], prompt=[m["role"] for m in prompt], answer=answer, model=state["model"], stop=state.get("stop_condition"), timing=state["timing"].generation.start > 0)',
      '    return 1.0',
      'def broken(completion):',
      '    raise ValueError("no luck")',
      'env.env.rubric.rubrics[0].funcs.append(probe)',
      'env.env.rubric.rubrics[0].weights.append(1.0)',
      'env.watch.expected = env.reward_config()',
      'print(asyncio.run(env.score(1, "72", "\\\\boxed{72}")))',
      'print(sorted(seen.items()))',
      'env.env.rubric.rubrics[0].funcs.append(broken)',
      'env.env.rubric.rubrics[0].weights.append(1.0)',
      'env.watch.expected = env.reward_config()',
      'try:',
      '    asyncio.run(env.score(1, "72", "\\\\boxed{72}"))',
      'except RuntimeError as error:',
      '    print("raised:", error)',
    ]);
    const probed = await execa(V0(), ['-c', state, path.join(ENVS, 'v0-sound')], { env: { HF_DATASETS_OFFLINE: '1' } });
    const out = probed.stdout.trim().split('\n');
    expect(out.at(-3)).toBe('2.1');
    expect(out.at(-2)).toBe(
      "[('answer', '72'), ('completion', '\\\\boxed{72}'), ('model', 'Qwen/Qwen3-8B'), ('prompt', ['system', 'user']), ('stop', 'max_turns_reached'), ('timing', True), ('turns', 1)]",
    );
    expect(out.at(-1)).toMatch(/^raised: Error calling reward function broken: no luck/);
  });
});

describe('0.4 tasksets are scored on a trace that records the model call', () => {
  it(
    'a reward strict only when the trace has no model call is rejected',
    async () => {
      const result = await auditEnv({ env: path.join(ENVS, 'v1-calls'), python: V1(), rows: ROWS, workers: WORKERS, policy: POLICY });
      expect(result.decision).toBe('REJECT');
      expect(result.record.total!.decision).toBe('REJECT');
    },
    SLOW,
  );

  it('the trace holds the prompt, the reply and its call; a weight changed while scoring is reported', async () => {
    const script = loaderScript([
      'async def main():',
      '    task = env.tasks[0]',
      '    trace = await env.rollout_trace(task, "\\\\boxed{42}")',
      '    print([(node.message.role, node.sampled) for node in trace.nodes], [(call.node, call.endpoint, call.finish_reason) for call in trace.calls], trace.stop_condition, trace.num_turns, trace.last_reply)',
      '    print(await env.score(0, "42", "\\\\boxed{42}"))',
      '    type(task).formatted._vf_weight = 0.5',
      '    try:',
      '        await env.score(0, "42", "\\\\boxed{42}")',
      '    except env_loader.RewardsChanged as error:',
      '        print("changed:", error)',
      '    print(await env.score(0, "42", "\\\\boxed{42}"))',
      'asyncio.run(main())',
    ]);
    const run = await execa(V1(), ['-c', script, path.join(ENVS, 'v1-sound')]);
    const lines = run.stdout.trim().split('\n');
    expect(lines.at(-4)).toBe("[('system', False), ('user', False), ('assistant', True)] [(2, '/chat/completions', 'stop')] agent_completed 1 \\boxed{42}");
    expect(lines.at(-3)).toBe('1.1');
    expect(lines.at(-2)).toMatch(/^changed: .*weight of formatted \(ArithTask #1\) 0\.1 -> 0\.5, found before scoring/);
    expect(lines.at(-1)).toBe('1.5');
  });
});
