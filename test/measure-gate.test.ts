import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { comparable, DOC, measureGate, renderMarkdown, type Measurement } from '../scripts/measure-gate.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { testPython } from './support/test-python.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const panelPython = testPython('verifiers-v1');

describe('measure-gate', () => {
  it('regenerates exactly the committed results (apart from date and commit), and docs/measured.md shows them', async () => {
    const committed = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'results', 'measure-gate.json'), 'utf8')) as Measurement;
    // The labelled corpus is gated afresh here. The reference panel is gated
    // once, in panel.test.ts, which checks every committed panel row against a
    // fresh audit; its rows enter the totals and the README table from there.
    const fresh = await measureGate(python, panelPython, { panel: committed.panel });
    expect(comparable(fresh)).toEqual(comparable(committed));
    expect(DOC).toBe(path.join(PACKAGE_ROOT, 'docs', 'measured.md'));
    expect(readFileSync(DOC, 'utf8')).toContain(renderMarkdown(fresh));
    expect(readFileSync(path.join(PACKAGE_ROOT, 'README.md'), 'utf8')).toContain('](docs/measured.md)');
  }, 900_000);

  it('meets the targets: every verifier in its labelled class, exploitable and broken ones rejected, the others passed', () => {
    const committed = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'results', 'measure-gate.json'), 'utf8')) as Measurement;
    const wrong = committed.verifiers.filter((outcome) => !outcome.correct).map((outcome) => `${outcome.file} (${outcome.label}: ${outcome.decision})`);
    expect(wrong).toEqual([]);
    for (const outcome of committed.verifiers) {
      const rejected = outcome.label === 'exploitable' || outcome.label === 'broken';
      expect(outcome.decision === 'PASS', outcome.file).toBe(!rejected);
    }
    expect(committed.totals.false_positive_rate).toBe(0);
    const labels = committed.verifiers.map((outcome) => outcome.label);
    expect(labels.filter((label) => label === 'exploitable').length).toBeGreaterThanOrEqual(15);
    expect(labels.filter((label) => label === 'false-accept only').length).toBeGreaterThanOrEqual(12);
    expect(labels.filter((label) => label === 'sound').length).toBeGreaterThanOrEqual(1);
    expect(labels.filter((label) => label === 'broken').length).toBeGreaterThanOrEqual(6);
    expect(committed.totals.twins.length).toBeGreaterThanOrEqual(6);
    expect(committed.panel.filter((outcome) => !outcome.correct)).toEqual([]);
    expect(committed.panel.filter((outcome) => outcome.variant === 'reward').length).toBeGreaterThanOrEqual(13);
  });
});
