/**
 * A real gate on a dataset: hedges pair the gold with another row's real
 * answer, which catches an any() reader that made-up distractor words never
 * reach; and the record says where the alternates came from.
 */
import { describe, expect, it } from 'vitest';
import { gate } from '../src/gate.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const base = { python, cwd: PACKAGE_ROOT, workers: 1, completionFormat: 'string' as const };
const reward = 'test/fixtures/columns/codeword-any.py:reward';
const dataset = 'test/fixtures/columns/codewords.jsonl';

describe('alternates the task really has', () => {
  it("rejects an any() codeword reader through a hedge between two of the dataset's codewords", async () => {
    const result = await gate({ ...base, reward, dataset });
    expect(result.decision).toBe('REJECT');
    expect(result.record.target.alternates).toEqual({ source: 'dataset', dataset: 24, generated: 0 });
    const codewords = new Set(result.record.target.golds.map((gold) => gold.answer));
    for (const gold of result.record.target.golds) {
      expect(gold.alternates).toBe('dataset');
      expect(codewords.has(gold.alternate!)).toBe(true);
    }
    const hedge = result.record.findings.find((finding) => finding.family === 'hedge' && finding.invariant === 'hedge-rewarded');
    expect(hedge).toBeDefined();
    // Paid under the gold and under another row's codeword, both real answers.
    expect(hedge!.rewarded_under[0]).toBe(hedge!.answer);
    expect(hedge!.rewarded_under.slice(1).some((value) => codewords.has(value) && value !== hedge!.answer)).toBe(true);
  });

  it('says the alternates were generated for a single answer, and names no odd row', async () => {
    const result = await gate({ ...base, reward, answer: 'QUARTERMAIN' });
    expect(result.record.target.alternates).toEqual({ source: 'generated', dataset: 0, generated: 4 });
    expect(result.record.target.golds[0]!.alternates).toBe('generated');
    expect(result.record.target.odd_rows).toEqual({ total: 0, rows: [] });
  });
});
