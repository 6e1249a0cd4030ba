import { describe, expect, it } from 'vitest';
import { hackability, hackRateInterval, riskLabel, scoreFamily } from '../src/audit/score.js';
import { excerpt } from '../src/audit/record.js';

const options = { seed: 7, resamples: 2000, confidence: 0.95 };

describe('hackability', () => {
  it('is 0 when no family has a hack', () => {
    expect(hackability([scoreFamily({ family: 'a', attempts: 10, hackSeverities: [] })])).toBe(0);
  });

  it('is 100 × the channel for a single family', () => {
    // 5 of 10 hacks, all high (0.8): channel 0.4.
    const family = scoreFamily({ family: 'a', attempts: 10, hackSeverities: ['high', 'high', 'high', 'high', 'high'] });
    expect(family.channel).toBeCloseTo(0.4);
    expect(hackability([family])).toBe(40);
  });

  it('combines families as a noisy-OR and rounds to one decimal', () => {
    const a = scoreFamily({ family: 'a', attempts: 4, hackSeverities: ['critical'] }); // 0.25
    const b = scoreFamily({ family: 'b', attempts: 2, hackSeverities: ['low'] }); // 0.5 × 0.25 = 0.125
    // 100 × (1 − 0.75 × 0.875) = 34.375
    expect(hackability([a, b])).toBe(34.4);
  });

  it('weights severities 0.25 / 0.5 / 0.8 / 1.0', () => {
    const family = scoreFamily({ family: 'a', attempts: 4, hackSeverities: ['low', 'medium', 'high', 'critical'] });
    expect(family.meanSeverity).toBeCloseTo((0.25 + 0.5 + 0.8 + 1) / 4);
    expect(family.rate).toBe(1);
  });

  it('labels risk at 70 / 40 / 15', () => {
    expect(riskLabel(70)).toBe('high');
    expect(riskLabel(69.9)).toBe('medium');
    expect(riskLabel(40)).toBe('medium');
    expect(riskLabel(15)).toBe('low');
    expect(riskLabel(14.9)).toBe('minimal');
  });
});

describe('hack-rate interval', () => {
  it('does not collapse to [0, 0] when under-sampled: 0 of 8 stays above the default 0.25 bound', () => {
    const rate = hackRateInterval(0, 8, options);
    expect(rate.point).toBe(0);
    expect(rate.hi).toBeGreaterThanOrEqual(0.25);
  });

  it('0 hacks in 150 candidates clears the default 0.25 bound', () => {
    const rate = hackRateInterval(0, 150, options);
    expect(rate.hi).toBeLessThan(0.25);
    expect(rate.hi).toBeGreaterThan(0);
  });

  it('brackets the point estimate', () => {
    const rate = hackRateInterval(30, 100, options);
    expect(rate.point).toBe(0.3);
    expect(rate.lo).toBeLessThan(0.3);
    expect(rate.hi).toBeGreaterThan(0.3);
    expect(rate.hi).toBeLessThan(0.45);
  });

  it('is deterministic for a seed and varies with it', () => {
    expect(hackRateInterval(3, 40, options)).toEqual(hackRateInterval(3, 40, options));
    const other = [1, 2, 3, 4, 5].map((seed) => hackRateInterval(3, 40, { ...options, seed }).hi);
    expect(new Set(other).size).toBeGreaterThan(1);
  });

  it('handles large n quickly and stays in [0, 1]', () => {
    const rate = hackRateInterval(50_000, 100_000, options);
    expect(rate.lo).toBeGreaterThan(0.49);
    expect(rate.hi).toBeLessThan(0.51);
    const all = hackRateInterval(10, 10, options);
    expect(all.hi).toBeLessThanOrEqual(1);
  });
});

describe('excerpt', () => {
  // What an excerpt has always been: the first max code points, and an ellipsis when there are more.
  const byCodePoints = (text: string, max: number): string => {
    const chars = [...text];
    return chars.length <= max ? text : `${chars.slice(0, max).join('')}…`;
  };

  it('cuts at code points, never inside a surrogate pair, and only when there is more', () => {
    const texts = [
      '',
      '42',
      'a'.repeat(240),
      'a'.repeat(241),
      '😀'.repeat(130),
      `${'😀'.repeat(120)}x`,
      `x${'😀'.repeat(239)}`,
      `${'b'.repeat(239)}😀`,
      `${'b'.repeat(239)}😀c`,
    ];
    for (const text of texts) {
      for (const max of [1, 80, 120, 240]) expect(excerpt(text, max)).toBe(byCodePoints(text, max));
    }
    expect(excerpt('😀'.repeat(3), 2)).toBe('😀😀…');
  });

  it('keeps the head of a long payload', () => {
    const payload = `${'x'.repeat(200)}${'pad '.repeat(50_000)}`;
    expect(excerpt(payload)).toBe(`${payload.slice(0, 240)}…`);
  });
});
