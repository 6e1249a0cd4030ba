/**
 * What the pure judging tests share: a verifier's reply as the harness
 * returns it, and an attack candidate with every field but the ones a test
 * cares about filled in.
 */
import type { Candidate } from '../../src/audit/expand-candidates.js';
import type { EvalResult } from '../../src/calls.js';

export function ok(reward: number): EvalResult {
  return { status: 'ok', reward, rewardType: 'float', nonFinite: null, error: null, sideEffects: [], ms: 0 };
}

export function candidate(over: Partial<Candidate>): Candidate {
  return {
    attackId: 'fam/attack',
    family: 'fam',
    severity: 'high',
    hackIf: 'rewarded',
    gFree: false,
    commitsTo: 'other',
    format: 'boxed',
    position: null,
    label: null,
    completion: 'x',
    literal: '',
    answer: '42',
    row: 0,
    ...over,
  };
}
