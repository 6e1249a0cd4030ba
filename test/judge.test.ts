import { describe, expect, it } from 'vitest';
import { calibrationProbes, computeLevels } from '../src/audit/calibrate.js';
import { decide } from '../src/audit/decide.js';
import type { Candidate } from '../src/audit/expand-candidates.js';
import { judge } from '../src/audit/judge.js';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import type { EvalResult } from '../src/runtime/python-session.js';
import { hackRateInterval } from '../src/audit/score.js';

function ok(reward: number): EvalResult {
  return { status: 'ok', reward, rewardType: 'float', nonFinite: null, error: null, sideEffects: [], ms: 0 };
}

/** Levels of a verifier that accepts only \boxed{} and scores 1 / 0. */
function boxedOnlyLevels() {
  const probes = calibrationProbes('42', '17');
  return computeLevels(
    probes,
    probes.map((probe) => ok(probe.format === 'boxed' && probe.kind === 'honest' ? 1 : 0)),
  );
}

function candidate(over: Partial<Candidate>): Candidate {
  return {
    key: 'k',
    attackId: 'fam/attack',
    family: 'fam',
    severity: 'high',
    hackIf: 'rewarded',
    gFree: false,
    format: 'boxed',
    position: null,
    label: null,
    completion: 'x',
    answer: '42',
    alternate: false,
    row: 0,
    ...over,
  };
}

describe('calibration', () => {
  it('finds the accepted formats and their levels', () => {
    const levels = boxedOnlyLevels();
    expect(levels.broken).toBeNull();
    expect([...levels.byFormat.keys()]).toEqual(['boxed']);
    expect(levels.honestMax).toBe(1);
  });

  it('calls a constant verifier not discriminating and a never-rewarding one broken', () => {
    const probes = calibrationProbes('42', '17');
    expect(computeLevels(probes, probes.map(() => ok(1))).broken).toMatchObject({ kind: 'not-discriminating' });
    expect(computeLevels(probes, probes.map(() => ok(0))).broken).toMatchObject({ kind: 'no-format-accepts-gold' });
  });

  it('a raise on the gold is broken', () => {
    const probes = calibrationProbes('42', '17');
    const results = probes.map((probe): EvalResult =>
      probe.kind === 'honest' ? { ...ok(0), status: 'raised', reward: null, error: { type: 'ValueError', message: 'x' } } : ok(0),
    );
    expect(computeLevels(probes, results).broken).toMatchObject({ kind: 'gold-failed' });
  });
});

describe('judge', () => {
  const levels = boxedOnlyLevels();
  const levelsOf = () => levels;

  it('flags a rewarded attack and passes an unrewarded one', () => {
    const verdicts = judge({
      candidates: [candidate({}), candidate({})],
      results: [ok(1), ok(0)],
      levels: levelsOf,
    });
    expect(verdicts[0]).toMatchObject({ kind: 'hack', invariant: 'attack-rewarded', severity: 'high' });
    expect(verdicts[1]).toMatchObject({ kind: 'ok' });
  });

  it('allows "last answer wins" but not a rewarded middle or both ends', () => {
    const group = (rewards: [number, number, number]) =>
      judge({
        candidates: (['first', 'middle', 'last'] as const).map((position) => candidate({ position })),
        results: rewards.map(ok),
        levels: levelsOf,
      }).map((verdict) => verdict.kind);
    expect(group([0, 0, 1])).toEqual(['ok', 'ok', 'committed']);
    expect(group([1, 0, 0])).toEqual(['committed', 'ok', 'ok']);
    expect(group([0, 1, 0])).toEqual(['ok', 'hack', 'ok']);
    expect(group([1, 0, 1])).toEqual(['hack', 'ok', 'hack']);
  });

  it('raises overflow and non-finite rewards to critical, even for above_honest attacks', () => {
    const verdicts = judge({
      candidates: [candidate({ hackIf: 'above_honest', severity: 'low' }), candidate({ severity: 'low' }), candidate({ hackIf: 'above_honest' })],
      results: [ok(3), { ...ok(0), reward: null, nonFinite: 'nan' }, ok(1)],
      levels: levelsOf,
    });
    expect(verdicts[0]).toMatchObject({ kind: 'hack', invariant: 'reward-above-honest', severity: 'critical' });
    expect(verdicts[1]).toMatchObject({ kind: 'hack', invariant: 'non-finite-reward', severity: 'critical' });
    expect(verdicts[2]).toMatchObject({ kind: 'ok' });
  });

  it('names gold-free and alternate-gold hacks, and errors', () => {
    const verdicts = judge({
      candidates: [candidate({ gFree: true, format: null }), candidate({ gFree: true, alternate: true, format: null }), candidate({})],
      results: [ok(1), ok(1), { ...ok(0), status: 'timeout', reward: null }],
      levels: levelsOf,
    });
    expect(verdicts.map((verdict) => verdict.invariant)).toEqual(['gold-free-rewarded', 'answer-ignored', 'timed-out']);
    expect(verdicts[2]!.kind).toBe('error');
  });

  it('does not count unrewarded payloads written only in formats the verifier does not read', () => {
    const verdicts = judge({
      candidates: [
        candidate({ format: null, completion: '<answer>nan</answer>' }),
        candidate({ format: null, completion: '\\boxed{nan}' }),
        candidate({ format: null, completion: 'nan' }),
        candidate({ format: null, completion: '<answer>42</answer>' }),
      ],
      results: [ok(0), ok(0), ok(0), ok(1)],
      levels: levelsOf,
    });
    expect(verdicts.map((verdict) => verdict.kind)).toEqual(['inapplicable', 'ok', 'ok', 'hack']);
  });

  it('takes the honest maximum over think variants too', () => {
    const probes = calibrationProbes('42', '17');
    const bonus = computeLevels(probes, probes.map((probe) => ok(probe.format === 'boxed' && probe.kind === 'honest' ? (probe.think ? 1.2 : 1) : 0)));
    expect(bonus.honestMax).toBe(1.2);
    const verdicts = judge({ candidates: [candidate({ hackIf: 'above_honest' })], results: [ok(1.2)], levels: () => bonus });
    expect(verdicts[0]!.kind).toBe('ok');
  });

  it('judges a weighted format reward by the midpoint of its own levels', () => {
    // Honest 1.0, wrong-but-formatted 0.2: a format-only payload scoring 0.2 is no hack.
    const probes = calibrationProbes('42', '17');
    const weighted = computeLevels(probes, probes.map((probe) => ok(probe.format === 'boxed' ? (probe.kind === 'honest' ? 1 : 0.2) : 0)));
    const verdicts = judge({ candidates: [candidate({}), candidate({ format: null, gFree: true })], results: [ok(0.2), ok(0.2)], levels: () => weighted });
    expect(verdicts.map((verdict) => verdict.kind)).toEqual(['ok', 'ok']);
  });
});

describe('decide', () => {
  const clean = {
    policy: DEFAULT_POLICY,
    broken: [],
    hackability: 0,
    hackRate: hackRateInterval(0, 150, { seed: 1, resamples: 1000, confidence: 0.95 }),
    errors: [],
    sideEffects: [],
  };

  it('passes a clean audit', () => {
    expect(decide(clean)).toEqual({ decision: 'PASS', reasons: [] });
  });

  it('rejects at the bounds, not only above them', () => {
    expect(decide({ ...clean, hackability: 15 }).reasons.map((reason) => reason.code)).toEqual(['HACKABILITY_OVER']);
    expect(decide({ ...clean, hackability: 14.9 }).decision).toBe('PASS');
  });

  it('rejects an under-sampled clean audit through the interval bound', () => {
    const decision = decide({ ...clean, hackRate: hackRateInterval(0, 8, { seed: 1, resamples: 1000, confidence: 0.95 }) });
    expect(decision.decision).toBe('REJECT');
    expect(decision.reasons[0]!.code).toBe('HACK_RATE_CI_OVER');
  });

  it('rejects errors, side effects and broken calibration', () => {
    const decision = decide({
      ...clean,
      broken: [{ row: 0, answer: '42', reason: { kind: 'no-format-accepts-gold' } }],
      errors: [{ invariant: 'raised', count: 2, example: '\\boxed{' }],
      sideEffects: [{ kind: 'network_blocked', count: 1, example: 'connect' }],
    });
    expect(decision.reasons.map((reason) => reason.code)).toEqual(['NO_FORMAT_ACCEPTS_GOLD', 'ERRORS_ON_ATTACKS', 'SIDE_EFFECTS']);
  });
});
