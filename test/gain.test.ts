import { describe, expect, it } from 'vitest';
import { calibrationProbes, computeLevels } from '../src/audit/calibrate.js';
import { decide, describeBroken } from '../src/audit/decide.js';
import { commitmentLayouts } from '../src/audit/commit-baselines.js';
import { constantAnswerGain } from '../src/audit/constant-answers.js';
import { ignoredGain, isReReading } from '../src/audit/gain.js';
import { screen, settle, type Weighing } from '../src/audit/judge.js';
import { DEFAULT_POLICY, parsePolicy } from '../src/audit/policy.js';
import { hackRateInterval } from '../src/audit/score.js';

import { candidate, ok } from './support/judging.js';

/**
 * The decision model: a finding decides by what a policy that does not know
 * the answer gains by writing it, against a margin (min_gain), and a
 * completion paid whatever the gold decides at any level. Judged here
 * against in-process fake verifiers: the levels a reward pays, with no
 * Python at all.
 */

/** Levels of a verifier that pays `honest` for the gold and `wrong` for a wrong answer in every layout. */
function levelsOf(honest: number, wrong: number, gold = '42', other = '17') {
  const probes = calibrationProbes(gold, other);
  return computeLevels(
    probes,
    probes.map((probe) => ok(probe.kind === 'honest' ? honest : wrong)),
  );
}

const numeric: Weighing = { margin: DEFAULT_POLICY.minGain, type: 'numeric', choices: [] };

describe('what a policy gains', () => {
  it('is the default margin of the shipped policy, and a policy may set it from 0 to below 1', () => {
    expect(DEFAULT_POLICY.minGain).toBe(0.05);
    expect(parsePolicy({ min_gain: 0.2 }).minGain).toBe(0.2);
    expect(() => parsePolicy({ min_gain: 1 })).toThrow(/invalid policy/);
  });

  it('a partial credit paid under every gold decides at any level: multiple choice against a uniform guess', () => {
    // 1 for "the answer is (X)", 0.5 when "(gold)" appears anywhere: naming every option earns 0.5 under each gold.
    const levels = levelsOf(1, 0, 'B', 'C');
    const dump = candidate({ answer: 'B', gFree: true, position: 'first', commitsTo: 'several', format: null, completion: '(A) (B) (C) (D)' });
    const [screened] = screen({ candidates: [dump], results: [ok(0.5)], levels: () => levels, margin: numeric.margin });
    // Below the midpoint: the old screen called it unrewarded.
    expect(screened!.kind).toBe('paid');
    const choice: Weighing = { margin: 0.05, type: 'choice', choices: ['A', 'B', 'C', 'D'] };
    const alternates = ['A', 'C', 'D'].map((answer) => ({ answer, result: ok(0.5) }));
    const verdict = settle(dump, alternates, levels, { screened: screened as Extract<typeof screened, { kind: 'paid' }>, reward: 0.5, weighing: choice });
    expect(verdict).toMatchObject({ kind: 'exploit', invariant: 'answer-ignored', rewardedUnder: ['B', 'A', 'C', 'D'], gain: 0.25 });
    // A margin above the gain leaves it as the partial payment it is.
    expect(settle(dump, alternates, levels, { screened: screened as never, reward: 0.5, weighing: { ...choice, margin: 0.3 } }).kind).toBe('ok');
    // Two of four labels paid half: exactly what committing to one of them earns.
    const pair = settle(
      candidate({ answer: 'B', position: 'first', commitsTo: 'several', completion: '(A) (B)' }),
      [
        { answer: 'A', result: ok(0.5) },
        { answer: 'C', result: ok(0) },
        { answer: 'D', result: ok(0) },
      ],
      levels,
      { screened: screened as never, reward: 0.5, weighing: choice },
    );
    expect(pair.kind).toBe('ok');
  });

  it('a fixed payment for an impossible answer in a weighted total is weighed against a wrong answer under each gold', () => {
    // A rubric of 1.0 exact + 0.8 closeness: the gold earns 1.8, a wrong time about 0.1, `99:00:00` 0.8 under every gold.
    const levels = levelsOf(1.8, 0.1, '03:15:00', '07:40:00');
    const impossible = candidate({ answer: '03:15:00', completion: '\\boxed{99:00:00}', commitsTo: 'other' });
    const [screened] = screen({ candidates: [impossible], results: [ok(0.8)], levels: () => levels, margin: 0.05 });
    expect(screened!.kind).toBe('paid');
    const text: Weighing = { margin: 0.05, type: 'string', choices: [] };
    const alternates = ['47:05:31', '11:20:00'].map((answer) => ({ answer, result: ok(0.8) }));
    const verdict = settle(impossible, alternates, levels, { screened: screened as never, reward: 0.8, weighing: text });
    expect(verdict.kind).toBe('exploit');
    expect(verdict.invariant).toBe('answer-ignored');
    expect(verdict.gain).toBeCloseTo((0.8 - 0.1) / 1.7, 4);
    // Where a plainly wrong answer earns as much under those golds (a similarity score), nothing is gained.
    const graded = settle(impossible, alternates, levels, { screened: screened as never, reward: 0.8, weighing: { ...text, wrongUnder: () => 0.8 } });
    expect(graded.kind).toBe('ok');
  });

  it('a hedge whose gain is below the margin is a leniency, not a reason to reject; above it, hedging pays', () => {
    const levels = levelsOf(1, 0.1, 'olleh', 'havana');
    const hedge = candidate({ answer: 'olleh', position: 'first', commitsTo: 'several', format: 'xml', completion: '<answer>olleh havana</answer>' });
    const stated = { alternates: new Set(['havana']), count: 2 };
    const outcomes = [{ answer: 'havana', result: ok(0.62) }];
    const commitments = {
      values: ['olleh', 'havana'],
      rewards: [
        [1, 0.1],
        [0.1, 1],
      ],
    };
    // Committing earns (1 + 0.1) / 2 = 0.55; the hedge earns (0.5 + 0.62) / 2 = 0.56: a gain of 0.01 / 0.9.
    const lenient = settle(hedge, outcomes, levels, { reward: 0.5, stated, commitments, weighing: { margin: 0.05, type: 'string', choices: [] } });
    expect(lenient).toMatchObject({ kind: 'lenient', invariant: 'gain-below-margin', rewardedUnder: ['olleh', 'havana'] });
    expect(lenient.gain).toBeCloseTo(0.0111, 3);
    const paying = settle(hedge, [{ answer: 'havana', result: ok(0.9) }], levels, {
      reward: 0.9,
      stated,
      commitments,
      weighing: { margin: 0.05, type: 'string', choices: [] },
    });
    expect(paying.kind).toBe('exploit');
    expect(paying.hedge?.gain).toBeCloseTo((0.9 - 0.55) / 0.9, 4);
  });

  it("commits a hedge's values in each layout it is written in that the verifier reads, and in the one paying the gold most", () => {
    // A last-tag reader with similarity credit: `<answer>` pays the gold 1, the other layouts are scored whole (less).
    const probes = calibrationProbes('Paris', 'Ottawa');
    const paid: Record<string, [number, number]> = { xml: [1, 0.18], json: [0.3, 0.1], bare: [0.9, 0.18] };
    const levels = computeLevels(
      probes,
      probes.map((probe) => ok((paid[probe.format] ?? [0.5, 0.2])[probe.kind === 'honest' ? 0 : 1])),
    );
    // Weighed in its box, it is read as its `<answer>`: committing there is what it is weighed against.
    const three = commitmentLayouts({ completion: '\\boxed{Ottawa}\n<answer>Paris</answer>\nAnswer: Orchid' }, levels, { format: 'boxed', think: false });
    expect(three).toEqual([
      { format: 'boxed', think: false },
      { format: 'xml', think: false },
      { format: 'line', think: false },
    ]);
    // A JSON object the reader pays little is weighed against committing in the layout that pays the gold most.
    expect(commitmentLayouts({ completion: '{"answer": "42 10"}' }, levels, { format: 'json', think: false })).toEqual([
      { format: 'json', think: false },
      { format: 'xml', think: false },
    ]);
    // After a reasoning block, the layouts it speaks are committed to after one too.
    const think = commitmentLayouts({ completion: '<think>\nhm\n</think>\n\\boxed{4}\n\n<answer>2</answer>' }, levels, { format: 'boxed', think: true });
    expect(think).toEqual([
      { format: 'boxed', think: true },
      { format: 'xml', think: true },
      { format: 'xml', think: false },
    ]);
  });

  it('a re-reading of the one quantity stated is a low-severity leniency; another answer stays an exploit', () => {
    const levels = levelsOf(1, 0);
    const percent = candidate({ attackId: 're-reading/percent', completion: '\\boxed{42%}' });
    const reread = settle(percent, [{ answer: '0.42', result: ok(1) }], levels, { reward: 1, weighing: numeric });
    expect(reread).toMatchObject({ kind: 'lenient', invariant: 're-reading', severity: 'low', rewardedUnder: ['42', '0.42'], gain: 0.5 });
    const substring = candidate({ completion: '\\boxed{1421}' });
    expect(settle(substring, [{ answer: '1421', result: ok(1) }], levels, { reward: 1, weighing: numeric })).toMatchObject({
      kind: 'exploit',
      invariant: 'attack-rewarded',
    });
    // Without a weighing (a scan of rollouts), any gain decides as before.
    expect(settle(percent, [{ answer: '0.42', result: ok(1) }], levels, { reward: 1 }).kind).toBe('exploit');
  });

  it('reads a written number the ways checkers do, and no further', () => {
    expect(isReReading('\\boxed{72%}', ['72', '0.72'], 'numeric')).toBe(true);
    expect(isReReading('\\boxed{4,2}', ['42', '4'], 'numeric')).toBe(true);
    expect(isReReading('\\boxed{4200}', ['42', '4200'], 'numeric')).toBe(true);
    expect(isReReading('\\boxed{1 000}', ['1000', '1'], 'numeric')).toBe(true);
    // Another number, a tolerance, a dropped sign, two numbers: answers of their own.
    expect(isReReading('\\boxed{1421}', ['42', '1421'], 'numeric')).toBe(false);
    expect(isReReading('\\boxed{42.42}', ['42', '42.42'], 'numeric')).toBe(false);
    expect(isReReading('\\boxed{-42}', ['42', '-42'], 'numeric')).toBe(false);
    expect(isReReading('\\boxed{42 17}', ['42', '17'], 'numeric')).toBe(false);
    expect(isReReading('\\boxed{72%}', ['72', '0.72'], 'string')).toBe(false);
  });

  it('weighs a payment under every gold against the mean commitment, and needs it above a guess under each', () => {
    const levels = { honest: 1, wrong: 0 };
    const rewards = [
      { gold: 'B', reward: 0.5 },
      { gold: 'A', reward: 0.5 },
      { gold: 'C', reward: 0.5 },
      { gold: 'D', reward: 0.5 },
    ];
    expect(ignoredGain(rewards, levels, 4)?.gain).toBe(0.25);
    expect(ignoredGain(rewards, levels, 2)).toBeNull();
    expect(ignoredGain([...rewards.slice(0, 3), { gold: 'D', reward: 0.2 }], levels, 4)).toBeNull();
  });
});

describe('a constant answer among labels', () => {
  it('gains when one label pays more over the golds than guessing among them, and not for a sound grader', () => {
    const labels = ['approve', 'reject', 'request_changes'];
    // 0.9 when right, 0.5 for the cautious decision whatever the right one is, 0.1 otherwise.
    const safe = [
      [0.9, 0.1, 0.1],
      [0.1, 0.9, 0.1],
      [0.5, 0.5, 0.9],
    ];
    const gain = constantAnswerGain(labels, safe, { honest: 0.9, wrong: 0.1 })!;
    expect(gain.label).toBe('request_changes');
    expect(gain.mean).toBeCloseTo(1.9 / 3, 6);
    expect(gain.guess).toBeCloseTo(4.1 / 9, 6);
    expect(gain.gain).toBeCloseTo((1.9 / 3 - 4.1 / 9) / 0.8, 6);
    const sound = [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ];
    expect(constantAnswerGain(labels, sound, { honest: 1, wrong: 0 })).toBeNull();
  });

  it('guesses among the labels the grader pays under their own gold: two options read of four offered is no gain for either', () => {
    // A two-way grader gated with A-D: C and D are never paid, not even as the gold.
    const twoWay = [
      [1, 0, 0, 0],
      [0, 1, 0, 0],
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ];
    expect(constantAnswerGain(['A', 'B', 'C', 'D'], twoWay, { honest: 1, wrong: 0 })).toBeNull();
    // A grader that pays A half whatever the gold still gains over guessing between A and B.
    const leaning = [
      [1, 0.5, 0, 0],
      [0, 1, 0, 0],
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ];
    expect(constantAnswerGain(['A', 'B', 'C', 'D'], leaning, { honest: 1, wrong: 0 })).toMatchObject({ label: 'A', mean: 1.5 / 4, guess: 2.5 / 8 });
  });
});

describe('a broken gold named by its row', () => {
  it('counts rows from 1, as every other line of the record and the reports does; a single gold is named by itself', () => {
    const broken = { kind: 'non-finite-on-gold' as const, value: 'nan', completion: '42' };
    expect(describeBroken(8, '(3, -1)', broken, undefined).message).toContain('for gold "(3, -1)" (row 9)');
    expect(describeBroken(0, '42', broken, undefined).message).not.toContain('(row');
  });

  it('is one reason for rows that fail the same way, naming the other golds; rows that fail otherwise keep their own', () => {
    const formatOnly = { kind: 'format-only' as const, reward: 0.1, paid: { kind: 'empty' as const, value: '', reward: 0.1 } };
    const raised = (completion: string) => ({ kind: 'gold-failed' as const, status: 'raised', detail: 'TypeError: bad operand', completion });
    const broken = [
      { row: 0, answer: '-7', reason: formatOnly },
      { row: 2, answer: '104', reason: formatOnly },
      { row: 3, answer: '96', reason: formatOnly },
      { row: 4, answer: '12', reason: { ...formatOnly, reward: 0.2 } },
      { row: 5, answer: '7', reason: raised('7') },
      { row: 6, answer: '8', reason: raised('8') },
    ];
    const reasons = decide({
      policy: DEFAULT_POLICY,
      broken,
      hackability: 0,
      hackRate: hackRateInterval(0, 0, { seed: 1, resamples: 500, confidence: 0.95 }),
      errors: [],
      sideEffects: [],
    }).reasons;
    expect(reasons.map((reason) => reason.code)).toEqual(['FORMAT_ONLY', 'FORMAT_ONLY', 'BROKEN_ON_GOLD']);
    expect(reasons[0]!.message).toMatch(
      /^format-only reward: it does not check the answer for gold "-7";.*\(the same for 2 more golds: "104" \(row 3\), "96" \(row 4\)\)$/,
    );
    expect(reasons[1]!.message).toContain('for gold "12" (row 5)');
    expect(reasons[2]!.message).toMatch(/for gold "7" \(row 6\).*\(the same for 1 more gold: "8" \(row 7\)\)$/);
  });
});

describe('the decision with leniencies', () => {
  const clean = {
    policy: DEFAULT_POLICY,
    broken: [],
    hackability: 0,
    hackRate: hackRateInterval(0, 300, { seed: 1, resamples: 500, confidence: 0.95 }),
    errors: [],
    sideEffects: [],
  };
  const leniencies = { total: 3, example: { completion: '\\boxed{72%}', rewardedUnder: ['72', '0.72'], invariant: 're-reading' } };

  it('passes leniencies by default and rejects them under a strict policy, naming one', () => {
    expect(decide({ ...clean, leniencies }).decision).toBe('PASS');
    const strict = decide({ ...clean, leniencies, policy: { ...DEFAULT_POLICY, strict: true } });
    expect(strict.reasons.map((reason) => reason.code)).toEqual(['LENIENCIES']);
    expect(strict.reasons[0]!.message).toContain('"\\boxed{72%}", paid under "72" and "0.72": one stated quantity read two ways');
  });
});
