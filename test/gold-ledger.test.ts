/**
 * Where golds ran on a Ray cluster (see runtime/ray/gold-ledger.ts): the
 * slot of a gold is the same for every call under it, and the ledger's
 * account does not depend on the order batches come back in.
 */
import { describe, expect, it } from 'vitest';
import { Evaluation } from '../src/runtime/pool-evaluation.js';
import { GoldLedger, slotOfGold } from '../src/runtime/ray/gold-ledger.js';

describe('gold slots', () => {
  it('hands out each slot the calls of its own golds only, in order, and all of them', () => {
    const golds = ['42', '17', '256', '9', 'x', '\\frac{1}{2}'];
    const requests = Array.from({ length: 60 }, (_, index) => ({ completion: `c${index}`, answer: golds[index % golds.length]! }));
    const evaluation = new Evaluation(requests, {});
    evaluation.split(3);
    const handed: number[] = [];
    for (let slot = 0; slot < 3; slot += 1) {
      const indices = [...evaluation.handOut(slot, 7), ...evaluation.handOut(slot, 100)];
      expect(indices).toEqual([...indices].sort((a, b) => a - b));
      expect(new Set(indices.map((index) => slotOfGold(requests[index]!.answer, 3)))).toEqual(new Set(indices.length > 0 ? [slot] : []));
      handed.push(...indices);
    }
    expect(handed.sort((a, b) => a - b)).toEqual(requests.map((_, index) => index));
    expect(evaluation.waiting).toBe(0);
  });

  it('hands a request given back to its own slot, and none past the cut', () => {
    const requests = Array.from({ length: 20 }, (_, index) => ({ completion: `c${index}`, answer: `g${index % 4}` }));
    const evaluation = new Evaluation(requests, {});
    evaluation.split(2);
    const slot = slotOfGold('g1', 2);
    const first = evaluation.handOut(slot, 100);
    evaluation.handBack(first[1]!);
    expect(evaluation.waitingIn(1 - slot)).toBe(requests.filter((request) => slotOfGold(request.answer, 2) !== slot).length);
    expect(evaluation.handOut(slot, 100)).toEqual([first[1]]);
    evaluation.cut = 10;
    evaluation.dropAgain();
    expect(evaluation.handOut(1 - slot, 100).every((index) => index < 10)).toBe(true);
  });
});

describe('the gold ledger', () => {
  it('counts a gold once on its actor, and the golds of a lost actor as moved to the one that followed it, whatever order batches come back in', () => {
    const ledger = new GoldLedger();
    const history = ['a0'];
    // Handed out before the loss, and back after a batch handed out since.
    const before = history.length;
    history.push('a1');
    ledger.ran(['g1'], history, history.length);
    ledger.ran(['g1', 'g2'], history, before);
    ledger.ran(['g3'], ['b0'], 1);
    expect(ledger.evidence()).toEqual({
      golds: [
        { actor: 'a0', golds: 2 },
        { actor: 'a1', golds: 2 },
        { actor: 'b0', golds: 1 },
      ],
      moved: [{ from: 'a0', to: ['a1'], golds: 2 }],
    });
  });
});
