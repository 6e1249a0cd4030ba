import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { gate, type GateResult } from '../src/gate.js';
import { DEFAULT_POLICY, type GatePolicy } from '../src/audit/policy.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import {
  loadPanel,
  PANEL_VARIANTS,
  panelGateOptions,
  panelOutcome,
  panelVariants,
  type Measurement,
  type PanelEntry,
  type PanelVariant,
} from '../scripts/measure-gate.js';
import { testPython } from './support/test-python.js';

/**
 * The reference panel: sound verifiers written from public descriptions of
 * widely used reward code, each with one injected exploit-class bug and one
 * false-accept-class bug. Nothing in the gate knows them; they check the
 * rule, not the other way round. Their outcomes are also what `npm run
 * measure` commits to results/measure-gate.json; this file checks those rows.
 */

const PANEL_DIR = path.join(PACKAGE_ROOT, 'test', 'panel');
const panel: PanelEntry[] = loadPanel();
/** The panel's rows in the committed measurement (npm run measure); measure-gate.test.ts takes them from here. */
const committed = (JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'results', 'measure-gate.json'), 'utf8')) as Measurement).panel;
// verifiers 0.4's venv holds math-verify, pinned for the panel.
const python = testPython('verifiers-v1');

/** Whether the entry's file holds a false-accept-class bug too (the newer entries hold an exploit bug only). */
const hasFalseAccept = (entry: PanelEntry): boolean => readFileSync(path.join(PANEL_DIR, entry.file), 'utf8').includes('def reward_false_accept(');

/** Whether the entry's file holds a leniency variant: a reward that reads one stated quantity two ways. */
const hasReReading = (entry: PanelEntry): boolean => readFileSync(path.join(PANEL_DIR, entry.file), 'utf8').includes('def reward_rereading(');

/** Reasons a verifier with an exploit is rejected for. */
const EXPLOIT_REASONS = ['HACKABILITY_OVER', 'HACK_RATE_CI_OVER', 'HEDGING_PAYS', 'ANSWER_IGNORED'];

/**
 * Gates under the default policy, as `npm run measure` does, are made once
 * and shared by the tests that look at the same audit: the audit is
 * deterministic, so a second gate would only repeat the first.
 */
const audits = new Map<string, Promise<GateResult>>();

function run(entry: PanelEntry, fn: string, strict = false, policy?: GatePolicy): Promise<GateResult> {
  const options = { ...panelGateOptions(entry, fn, python), strict, ...(policy ? { policy } : {}) };
  if (policy) return gate(options);
  const key = `${entry.file}:${fn}:${strict}`;
  let audit = audits.get(key);
  if (!audit) {
    audit = gate(options);
    audits.set(key, audit);
  }
  return audit;
}

function withTimeouts(timeouts: Partial<GatePolicy['timeouts']>): GatePolicy {
  return { ...DEFAULT_POLICY, timeouts: { ...DEFAULT_POLICY.timeouts, ...timeouts } };
}

const entryOf = (file: string): PanelEntry => panel.find((item) => item.file === file)!;
const variant = (fn: string): PanelVariant => PANEL_VARIANTS.find((item) => item.fn === fn)!;

describe('reference panel', () => {
  it('has at least 20 verifiers in common styles, plus math-verify, a process pool, a signal.alarm parse timeout and a reward slow on huge inputs', () => {
    expect(panel.length).toBeGreaterThanOrEqual(23);
    for (const file of ['module_pool.py', 'alarm_parse.py', 'slow_on_huge.py']) expect(panel.some((entry) => entry.file === file)).toBe(true);
    expect(panel.some((entry) => entry.file === 'math_verify_reward.py')).toBe(true);
  });

  it('the committed measurement has one row per entry and variant, in order, each checked against a fresh audit below', () => {
    expect(committed.map((outcome) => `${outcome.file}:${outcome.variant}`)).toEqual(
      panel.flatMap((entry) => panelVariants(entry).map((item) => `${entry.file}:${item.fn}`)),
    );
  });

  for (const entry of panel) {
    it(`${entry.file} (${entry.style}): sound passes with zero exploits; an exploit bug rejects; a false-accept bug, where there is one, passes, reported, and its record rejects under --strict`, async () => {
      const sound = await run(entry, 'reward');
      const outcomes = [panelOutcome(entry, variant('reward'), sound.record)];
      expect(sound.decision, JSON.stringify(sound.record.reasons)).toBe('PASS');
      expect(sound.record.findings_total).toBe(0);
      expect(sound.record.hackability).toBe(0);

      const exploit = await run(entry, 'reward_exploit');
      expect(exploit.decision).toBe('REJECT');
      expect(exploit.record.findings_total).toBeGreaterThan(0);
      expect(exploit.record.reasons.map((reason) => reason.code).filter((code) => EXPLOIT_REASONS.includes(code)).length).toBeGreaterThan(0);
      const finding = exploit.record.findings[0]!;
      expect(finding.class).toBe('exploit');
      // Checkable by hand: the same completion is paid under the gold and another answer.
      expect(finding.rewarded_under[0]).toBe(entry.answer);
      expect(finding.rewarded_under.length).toBeGreaterThan(1);
      outcomes.push(panelOutcome(entry, variant('reward_exploit'), exploit.record));

      if (hasFalseAccept(entry)) {
        const falseAccept = await run(entry, 'reward_false_accept');
        outcomes.push(panelOutcome(entry, variant('reward_false_accept'), falseAccept.record));
        expect(falseAccept.decision, JSON.stringify(falseAccept.record.reasons)).toBe('PASS');
        expect(falseAccept.record.findings_total).toBe(0);
        // The bug adds false accepts the sound reader does not have, in at least one family.
        const before = new Map(sound.record.false_accepts.families.map((family) => [family.family, family.count]));
        const added = falseAccept.record.false_accepts.families.filter((family) => family.count > (before.get(family.family) ?? 0));
        expect(added.length).toBeGreaterThan(0);
        expect(falseAccept.record.false_accepts.examples.every((example) => example.class === 'false_accept' && example.rewarded_under.length === 1)).toBe(
          true,
        );
        // --strict changes the decision alone, not a call of the audit (see
        // the strict gate below): this record rejects under it.
        expect(outcomes.at(-1)!.strict_decision).toBe('REJECT');
      }
      if (hasReReading(entry)) {
        // One stated quantity read two ways (math-verify's percentages): reported as a leniency, never an exploit.
        const lenient = await run(entry, 'reward_rereading');
        outcomes.push(panelOutcome(entry, variant('reward_rereading'), lenient.record));
        expect(lenient.decision, JSON.stringify(lenient.record.reasons)).toBe('PASS');
        expect(lenient.record.findings_total).toBe(0);
        expect(lenient.record.leniencies?.total).toBeGreaterThan(0);
        expect(lenient.record.leniencies?.examples.every((example) => example.invariant === 're-reading' && example.severity === 'low')).toBe(true);
        expect(lenient.record.leniencies?.examples[0]?.rewarded_under.length).toBe(2);
        expect(outcomes.at(-1)!.strict_decision).toBe('REJECT');
      }
      // What npm run measure committed for this entry is what a fresh audit gives.
      expect(outcomes).toEqual(committed.filter((outcome) => outcome.file === entry.file));
      // Three audits; a reward slow on huge inputs spends seconds on each long padding, more on a loaded machine.
    }, 480_000);
  }

  it('--strict rejects a false-accept bug for its false accepts alone, on the same audit', async () => {
    const entry = panel.find(hasFalseAccept)!;
    const lenient = await run(entry, 'reward_false_accept');
    const strict = await run(entry, 'reward_false_accept', true);
    expect(strict.decision).toBe('REJECT');
    expect(strict.record.reasons.map((reason) => reason.code)).toEqual(['FALSE_ACCEPTS']);
    expect(strict.record.policy.strict).toBe(true);
    // Everything the audit found is the same: strictness weighs it, never changes what is called.
    const found = (result: GateResult) => {
      const { decision: _decision, reasons: _reasons, policy: _policy, statement: _statement, timing: _timing, ...rest } = result.record;
      return rest;
    };
    expect(found(strict)).toEqual(found(lenient));
  });

  it('reaches a verifier that reads only after </think>, and rejects it when it hedges with any()', async () => {
    const entry = panel.find((item) => item.file === 'think_then_box.py')!;
    const result = await run(entry, 'reward_exploit');
    expect(result.record.target.golds[0]!.accepted_formats).toEqual(['boxed']);
    expect(result.decision).toBe('REJECT');
    expect(result.record.findings.some((finding) => finding.family === 'hedge' && finding.completion.startsWith('<think>'))).toBe(true);
  }, 60_000);

  it("keeps a module-level process pool alive across calls: its processes are the verifier's own, nothing is killed or reported", async () => {
    const result = await run(entryOf('module_pool.py'), 'reward');
    expect(result.decision, JSON.stringify(result.record.reasons)).toBe('PASS');
    expect(result.record.side_effects).toEqual([]);
    expect(result.record.errors).toEqual([]);
  }, 120_000);

  it("reports a reward slow only on huge inputs with the input's size and time, and passes it under the default max_call_ms", async () => {
    const result = await run(entryOf('slow_on_huge.py'), 'reward');
    expect(result.decision, JSON.stringify(result.record.reasons)).toBe('PASS');
    // Its filter costs over a second of CPU on the 50,000-character paddings, so their wall time is at least that.
    const slow = result.record.timing.slow_calls;
    expect(slow).toBeDefined();
    expect(slow!.count).toBeGreaterThan(0);
    expect(slow!.over_limit).toBe(0);
    expect(slow!.examples[0]!.chars).toBeGreaterThanOrEqual(50_000);
    expect(slow!.examples[0]!.cpu_ms).toBeGreaterThanOrEqual(500);
  }, 240_000);

  it('rejects a reward slower than timeouts.max_call_ms for that alone, and one cut at the call timeout too, while the audit goes on to find the exploit', async () => {
    const entry = entryOf('slow_on_huge.py');
    // Well below the filter's CPU time on 50,000 characters, far above its cost on anything a tenth as long.
    const sound = await run(entry, 'reward', false, withTimeouts({ maxCallMs: 500 }));
    expect(sound.record.reasons.map((reason) => reason.code)).toEqual(['SLOW_CALL']);
    expect(sound.record.reasons[0]!.message).toMatch(/on a 5\d{4}-character completion/);
    // Cut by the call timeout (CPU time, which load does not stretch) on every long padding, twice:
    // slow inputs, left unjudged; every other candidate is judged, and the exploit found. The
    // filter takes 1.1 to 2 s of CPU on those paddings as the machine's speed varies, so the
    // limit stays well under that.
    const cut = await run(entry, 'reward_exploit', false, withTimeouts({ callMs: 500, maxCallMs: 500 }));
    const codes = cut.record.reasons.map((reason) => reason.code);
    expect(codes).toContain('SLOW_CALL');
    expect(codes).toContain('HACKABILITY_OVER');
    expect(codes).not.toContain('ERRORS_ON_ATTACKS');
    // Calls of half a second or more are reported too, and on a loaded
    // machine some are: what must hold is that the timeout cut some, and
    // only slow inputs (2,000 characters or more).
    const examples = cut.record.timing.slow_calls?.examples ?? [];
    expect(examples.some((example) => example.cut)).toBe(true);
    expect(examples.filter((example) => example.cut).every((example) => example.chars >= 2_000)).toBe(true);
    expect(cut.record.findings[0]!.rewarded_under.length).toBeGreaterThan(1);
  }, 480_000);

  it('counts re-spellings of the gold as equivalent forms, never as exploits', async () => {
    const entry = panel.find((item) => item.file === 'last_boxed_int.py')!;
    const result = await run(entry, 'reward');
    const forms = result.record.equivalent_forms.examples.map((example) => example.completion);
    expect(forms).toEqual(expect.arrayContaining(['\\boxed{4,2}', '\\boxed{\u0664\u0662}']));
  }, 60_000);
});
