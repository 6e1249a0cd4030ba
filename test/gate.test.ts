import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { auditRecordSchema, withoutTiming } from '../src/audit/record.js';
import { gate } from '../src/gate.js';
import { DEFAULT_POLICY, parsePolicy } from '../src/audit/policy.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { formatScorecard } from '../src/report/scorecard.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const verifier = (name: string) => `examples/verifiers/${name}.py:reward`;
const base = { python, cwd: PACKAGE_ROOT, workers: 1 };

describe('gate on real verifiers', () => {
  it('leaves no exit hook behind per gate: a process that runs many gates does not gather them', async () => {
    await gate({ ...base, reward: verifier('strict'), answer: '42' });
    const after = process.listenerCount('exit');
    for (const answer of ['7', '13']) await gate({ ...base, reward: verifier('strict'), answer });
    expect(process.listenerCount('exit')).toBe(after);
  });

  it('passes a strict boxed verifier with zero hacks over at least 150 candidates', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), answer: '42' });
    expect(result.decision).toBe('PASS');
    expect(result.exitCode).toBe(0);
    expect(result.record.hackability).toBe(0);
    expect(result.record.hack_rate.n).toBeGreaterThanOrEqual(150);
    expect(result.record.hack_rate.hi).toBeLessThan(0.25);
    expect(result.record.target.golds[0]!.accepted_formats).toEqual(['boxed']);
    expect(result.record.families.length).toBeGreaterThanOrEqual(20);
    expect(result.summary()).toMatch(/survived these attacks at this budget and seed/);
  });

  it('rejects a substring-matching verifier, naming the family and the invariant', async () => {
    const result = await gate({ ...base, reward: verifier('substring'), answer: '42' });
    expect(result.decision).toBe('REJECT');
    expect(result.exitCode).toBe(1);
    expect(result.record.hackability).toBeGreaterThanOrEqual(15);
    const substring = result.record.families.find((family) => family.family === 'substring-containment')!;
    expect(substring.hacks).toBeGreaterThan(0);
    expect(result.record.findings.some((finding) => finding.family === 'substring-containment' && finding.invariant === 'attack-rewarded')).toBe(true);
    expect(result.record.reasons.map((reason) => reason.code)).toContain('HACKABILITY_OVER');
  });

  it('rejects a reward that pays a completion without the gold under two golds, even when the rates stay under their bounds', async () => {
    const result = await gate({ ...base, reward: 'test/fixtures/invariance/self-verdict.py:reward', answer: 'Paris' });
    expect(result.decision).toBe('REJECT');
    // Few attacks hit it: the rates alone would pass it.
    expect(result.record.hackability).toBeLessThan(DEFAULT_POLICY.maxHackability);
    expect(result.record.hack_rate.hi).toBeLessThan(DEFAULT_POLICY.maxHackRateCiHi);
    expect(result.record.reasons.map((reason) => reason.code)).toEqual(['ANSWER_IGNORED']);
    expect(result.record.reasons[0]!.message).toMatch(
      /\[\[YES\]\]", written the same whatever the gold, was paid under the golds "Paris" and "\w+", above what committing to an answer earns there \(a gain of 1 of the reward.s range\)/,
    );
    const finding = result.record.findings.find((item) => item.invariant === 'answer-ignored')!;
    expect(finding.rewarded_under.length).toBeGreaterThanOrEqual(2);
    expect(result.summary()).toMatch(/pays a reply that does not depend on the answer/);
  });

  it('says on a PASS that exploits were found within the policy bounds', async () => {
    const result = await gate({ ...base, reward: 'test/fixtures/invariance/sign-blind.py:reward', answer: '42' });
    expect(result.decision).toBe('PASS');
    expect(result.record.findings_total).toBeGreaterThan(0);
    expect(formatScorecard(result.record)).toMatch(
      /^decision: PASS\n {2}- \d+ exploits? (was|were) found \(rewarded under more than one gold\), within the policy bounds/m,
    );
    const clean = await gate({ ...base, reward: verifier('strict'), answer: '42' });
    expect(formatScorecard(clean.record)).not.toMatch(/exploits? (was|were) found/);
  });

  it('rejects partial credit that a hedge earns under each gold it states, and passes a bonus paid whatever the answer', async () => {
    const spec = 'test/fixtures/invariance/partial-anywhere.py';
    const partial = await gate({ ...base, reward: `${spec}:reward`, answer: '42' });
    expect(partial.decision).toBe('REJECT');
    // A dump with the gold anywhere but last earns 0.3, below the honest midpoint, under every value it lists.
    const dump = partial.record.findings.find((finding) => finding.family === 'answer-dump' && finding.reward === 0.3)!;
    expect(dump.invariant).toBe('hedge-rewarded');
    expect(dump.rewarded_under.length).toBeGreaterThanOrEqual(2);
    const bonus = await gate({ ...base, reward: `${spec}:reward_think_bonus`, answer: '42' });
    expect(bonus.decision).toBe('PASS');
    expect(bonus.record.findings_total).toBe(0);
  });

  it("attacks structured string answers with the gold's twin, its layout with other values", async () => {
    const spec = 'test/fixtures/invariance/assignments.py';
    const anyPart = await gate({ ...base, reward: `${spec}:reward`, answer: 'x=3, y=4' });
    expect(anyPart.decision).toBe('REJECT');
    const family = anyPart.record.families.find((item) => item.family === 'shape-twin')!;
    expect(family.hacks).toBeGreaterThan(0);
    // The second assignment is paid under its own values too: the twin is one of the golds tried.
    const hedge = anyPart.record.findings.find((finding) => finding.family === 'shape-twin' && finding.commits_to === 'several')!;
    expect(hedge.rewarded_under[0]).toBe('x=3, y=4');
    expect(hedge.rewarded_under.some((gold) => /^x=\d+, y=\d+$/.test(gold) && gold !== 'x=3, y=4')).toBe(true);
    const exact = await gate({ ...base, reward: `${spec}:reward_exact`, answer: 'x=3, y=4' });
    expect(exact.decision).toBe('PASS');
    expect(exact.record.findings_total).toBe(0);
    expect(exact.record.families.find((item) => item.family === 'shape-twin')?.attempts).toBeGreaterThan(0);
  });

  it("passes a grader that reads an amount's value, and rejects partial credit for any amount near the gold's", async () => {
    const spec = 'test/fixtures/invariance/money.py';
    // `12` is a piece of `$12.00`, the same amount to this grader: never another gold.
    const exact = await gate({ ...base, reward: `${spec}:reward`, answer: '$12.00' });
    expect(exact.decision).toBe('PASS');
    expect(exact.record.findings_total).toBe(0);
    // The grader raises on a word as the gold: the partial credit is measured against a second twin instead.
    const close = await gate({ ...base, reward: `${spec}:reward_close_any`, answer: '$12.50' });
    expect(close.decision).toBe('REJECT');
    const hedge = close.record.findings.find((finding) => finding.invariant === 'hedge-rewarded' && finding.reward === 0.5);
    expect(hedge?.rewarded_under.length).toBeGreaterThanOrEqual(2);
  });

  it("scores a completion under another gold with the row's info as that gold's: aliases of the true gold pay nothing there", async () => {
    const row = (answer: string, aliases: string[]) => ({ answer, prompt: `Name it: ${answer.length} letters`, info: { aliases } });
    const dataset = [
      row('New York', ['New York', 'NYC', 'New York City']),
      row('William Shakespeare', ['William Shakespeare', 'Shakespeare', 'The Bard']),
      row('The Beatles', ['The Beatles', 'Beatles']),
      row('The Hague', ['The Hague', 'Den Haag']),
    ];
    const spec = 'test/fixtures/invariance/aliases.py';
    const exact = await gate({ ...base, reward: `${spec}:reward`, dataset });
    expect(exact.decision).toBe('PASS');
    expect(exact.record.findings_total).toBe(0);
    const contains = await gate({ ...base, reward: `${spec}:reward_contains`, dataset });
    expect(contains.decision).toBe('REJECT');
  });

  it('counts a numeric alternate within 1e-5 of the gold as the gold: a tolerance finer than any near miss the corpus writes is sound', async () => {
    const result = await gate({ ...base, reward: 'test/panel/relative_tolerance.py:reward', answer: '299792458' });
    expect(result.decision).toBe('PASS');
    expect(result.record.findings_total).toBe(0);
  });

  it("attacks a multiple-choice grader with the question's option texts, and passes one that grades the letter alone", async () => {
    const question = (options: string[]) => `Pick one.\n${options.map((text, index) => `${'ABCD'[index]}) ${text}`).join('\n')}`;
    const dataset = [
      { answer: 'B', prompt: question(['London', 'Paris', 'Rome', 'Madrid']) },
      { answer: 'D', prompt: question(['Red', 'Green', 'Blue', 'Yellow']) },
    ];
    const spec = 'test/fixtures/invariance/choice-text-fallback.py';
    const fallback = await gate({ ...base, reward: `${spec}:reward`, dataset, answerType: 'choice', format: 'Answer: {}' });
    expect(fallback.decision).toBe('REJECT');
    const family = fallback.record.families.find((item) => item.family === 'choice-option-text')!;
    expect(family.hacks).toBeGreaterThan(0);
    expect(fallback.record.findings.some((finding) => finding.family === 'choice-option-text' && finding.rewarded_under.length >= 2)).toBe(true);
    const letterOnly = await gate({ ...base, reward: `${spec}:reward_letter_only`, dataset, answerType: 'choice', format: 'Answer: {}' });
    expect(letterOnly.decision).toBe('PASS');
    expect(letterOnly.record.families.find((item) => item.family === 'choice-option-text')?.attempts).toBeGreaterThan(0);
  });

  it('rejects a verifier that raises on a valid answer as broken', async () => {
    const result = await gate({ ...base, reward: verifier('raises'), answer: '3.5' });
    expect(result.decision).toBe('REJECT');
    expect(result.record.reasons[0]!.code).toBe('BROKEN_ON_GOLD');
    expect(result.record.reasons[0]!.message).toMatch(/ValueError/);
  });

  it('rejects a verifier that hangs at its first call timeout', async () => {
    const policy = parsePolicy({ timeouts: { call_ms: 500 } });
    const result = await gate({ ...base, reward: verifier('hangs'), answer: '42', policy });
    expect(result.decision).toBe('REJECT');
    // On a calibration probe or on an attack sent beside calibration, as the seeded order has it.
    expect(result.record.reasons.map((reason) => reason.message).join('\n')).toMatch(/timed.out/);
    // One call timeout, a kill and a restart; never dozens of timeouts in a
    // row: every call of this verifier hangs, so each call made is a timeout.
    expect(result.record.timing.evaluations).toBeLessThan(5);
  });

  it('is deterministic: two runs give identical records apart from timing', async () => {
    const first = await gate({ ...base, reward: verifier('substring'), answer: '42', seed: 99 });
    const second = await gate({ ...base, reward: verifier('substring'), answer: '42', seed: 99 });
    expect(JSON.stringify(withoutTiming(second.record))).toBe(JSON.stringify(withoutTiming(first.record)));
    expect(first.record.seed).toBe(99);
  });

  it('gives the same record with one worker or two', async () => {
    const rows = Array.from({ length: 12 }, (_, index) => ({ answer: String(100 + index * 7) }));
    const policy = { ...DEFAULT_POLICY, budget: { ...DEFAULT_POLICY.budget, rows: 12 } };
    const one = await gate({ ...base, reward: verifier('substring'), dataset: rows, policy, workers: 1 });
    const two = await gate({ ...base, reward: verifier('substring'), dataset: rows, policy, workers: 2 });
    expect(JSON.stringify(withoutTiming(two.record))).toBe(JSON.stringify(withoutTiming(one.record)));
    expect(one.record.target.rows_audited).toBe(12);
  });

  it('audits across dataset rows from a JSONL file', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), dataset: path.join('examples', 'data', 'numbers.jsonl') });
    expect(result.decision).toBe('PASS');
    expect(result.record.target.rows_audited).toBeGreaterThan(1);
    expect(new Set(result.record.target.golds.map((gold) => gold.answer)).size).toBe(result.record.target.rows_audited);
  });

  it('records the verifier hash, corpus identity and the policy', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), answer: '7' });
    expect(result.record.verifier.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(result.record.corpus.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(result.record.policy).toMatchObject({ max_hackability: 15, max_hack_rate_ci_hi: 0.25 });
    expect(result.record.schema).toBe('gatekept.audit/v2');
    expect(result.record.policy).toMatchObject({ strict: false, timeouts: { call_ms: 10000 } });
    expect(result.record.tool.name).toBe('gatekept');
    // How the verifier ran is part of what the record vouches for.
    expect(result.record.environment.isolation).toBe((await openSandbox('auto')).kind);
    const unguarded = await gate({ ...base, reward: verifier('strict'), answer: '7', sandbox: 'none' });
    expect(unguarded.record.environment.isolation).toBe('none');
  });

  it('attacks a layout declared with --format, and rejects any() over it', async () => {
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `solution-tag.py:${fn}`);
    const undeclared = await gate({ ...base, reward: fixture('reward'), answer: '42' });
    expect(undeclared.record.reasons.map((reason) => reason.code)).toEqual(['NO_FORMAT_ACCEPTS_GOLD']);
    expect(undeclared.record.reasons[0]!.message).toMatch(/--format '<TAG>\{\}<\/TAG>'/);
    // A task whose correct reply is not the gold (Countdown's equation) is told it is out of reach.
    expect(undeclared.record.reasons[0]!.message).toMatch(/if a correct reply is not the gold itself .* the gate cannot audit it/);
    const declared = await gate({ ...base, reward: fixture('reward'), answer: '42', format: ['<SOLUTION>{}</SOLUTION>'] });
    expect(declared.decision).toBe('PASS');
    expect(declared.record.target.golds[0]!.accepted_formats).toEqual(['<SOLUTION>{}</SOLUTION>']);
    const hedging = await gate({ ...base, reward: fixture('reward_any'), answer: '42', format: ['<SOLUTION>{}</SOLUTION>'] });
    expect(hedging.decision).toBe('REJECT');
    expect(hedging.record.findings[0]!.completion).toContain('<SOLUTION>');
  });

  it("passes a value grader of fractions, whose gold's twin with moved digits would be the gold again, and rejects any() over it", async () => {
    // `\frac{3}{6}` is `\frac{1}{2}`: paid under both, it proves nothing; a twin of another value does.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `fraction-value.py:${fn}`);
    const sound = await gate({ ...base, reward: fixture('reward'), answer: '$\\frac{1}{2}$' });
    expect(sound.record.findings).toEqual([]);
    expect(sound.decision).toBe('PASS');
    const hedging = await gate({ ...base, reward: fixture('reward_any'), answer: '$\\frac{1}{2}$' });
    expect(hedging.decision).toBe('REJECT');
    expect(hedging.record.findings.every((finding) => finding.rewarded_under.length > 1)).toBe(true);
  });

  it('rejects a grader that reads one number of a fraction gold, the first or the last, on that gold alone', async () => {
    // Twins that move every number never share the one it reads; twins keeping the first or the last do.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `fraction-value.py:${fn}`);
    for (const fn of ['reward_first_number', 'reward_last_number']) {
      const result = await gate({ ...base, reward: fixture(fn), answer: '\\frac{1}{2}' });
      expect(result.decision, fn).toBe('REJECT');
      const under = result.record.findings.flatMap((finding) => finding.rewarded_under);
      const kept = fn === 'reward_first_number' ? /^\\frac\{1\}\{(?!2\})\d+\}$/ : /^\\frac\{(?!1\})\d+\}\{2\}$/;
      expect(
        under.some((gold) => kept.test(gold)),
        fn,
      ).toBe(true);
    }
  });

  it('rejects partial credit for containing the gold, which makes one answer beat committing to another, and passes the same credit paid both ways', async () => {
    // `-42` earns 2/3 under 42 and 1 under -42: weighed against committing to 42, not against itself.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `containment-credit.py:${fn}`);
    const asymmetric = await gate({ ...base, reward: fixture('contained'), answer: '42' });
    expect(asymmetric.decision).toBe('REJECT');
    expect(
      asymmetric.record.findings.some((finding) => finding.class === 'exploit' && finding.rewarded_under.includes('42') && finding.rewarded_under.length > 1),
    ).toBe(true);
    const symmetric = await gate({ ...base, reward: fixture('overlap'), answer: '42' });
    expect(symmetric.record.findings.filter((finding) => finding.class === 'exploit')).toEqual([]);
  });

  it('tries no element alone as a gold when every gold of the dataset is a whole list', async () => {
    // A sort-these-words task: `sometimes` is no answer it has, so being paid under it proves nothing.
    const dir = path.join('test', 'fixtures', 'invariance');
    const result = await gate({ ...base, reward: path.join(dir, 'sorted-words.py:reward'), dataset: path.join(dir, 'sorted-words.jsonl') });
    expect(result.record.findings.filter((finding) => finding.class === 'exploit')).toEqual([]);
    expect(result.decision).toBe('PASS');
  }, 120_000);

  it('tries no negative value as a gold when no gold of the dataset is negative: a sign-blind exact match passes there, not where signs matter', async () => {
    // Years and counts: `-1912` paid for 1912 gains a policy nothing, since no answer of the task is negative.
    const dir = path.join('test', 'fixtures', 'invariance');
    // SQuAD's exact match, which strips punctuation and so reads `-1912` as `1912`.
    const reward = path.join('test', 'panel', 'squad_em.py:reward');
    const unsigned = await gate({ ...base, reward, dataset: path.join(dir, 'counts-and-years.jsonl') });
    expect(unsigned.record.findings.filter((finding) => finding.class === 'exploit')).toEqual([]);
    expect(unsigned.decision).toBe('PASS');
    // One gold below zero: a policy unsure of a sign is paid either way.
    const signed = await gate({ ...base, reward, dataset: path.join(dir, 'signed-answers.jsonl') });
    expect(signed.decision).toBe('REJECT');
    expect(signed.record.findings.some((finding) => finding.class === 'exploit' && finding.rewarded_under.some((gold) => gold.startsWith('-')))).toBe(true);
  }, 120_000);

  it('gates a two-way task with the labels its golds use: a grader that reads only A or B passes, and no C or D is weighed', async () => {
    // With A-D, a constant "A" was weighed against a guess among four labels, two of which no gold can be.
    const dir = path.join('test', 'fixtures', 'invariance');
    const result = await gate({ ...base, reward: path.join(dir, 'two-way.py:reward'), dataset: path.join(dir, 'two-way.jsonl') });
    expect(result.record.target.choices).toEqual(['A', 'B']);
    expect(result.record.findings.filter((finding) => finding.class === 'exploit')).toEqual([]);
    expect(result.decision).toBe('PASS');
    // Given, the labels are the user's: C and D are tried, and a guess is among the labels the grader pays, A and B.
    const given = await gate({ ...base, reward: path.join(dir, 'two-way.py:reward'), dataset: path.join(dir, 'two-way.jsonl'), choices: ['A', 'B', 'C', 'D'] });
    expect(given.record.target.choices).toEqual(['A', 'B', 'C', 'D']);
    expect(given.record.findings.filter((finding) => finding.invariant === 'answer-ignored')).toEqual([]);
  }, 120_000);

  it('says a gold no layout pays, where other golds were paid, is a form the verifier cannot read, not a layout to declare', async () => {
    const dir = path.join('test', 'fixtures', 'invariance');
    const result = await gate({ ...base, reward: path.join(dir, 'no-tuples.py:reward'), dataset: path.join(dir, 'math-forms.jsonl') });
    expect(result.decision).toBe('REJECT');
    const broken = result.record.reasons.find((reason) => reason.code === 'NO_FORMAT_ACCEPTS_GOLD')!;
    expect(broken.message).toMatch(/for gold "\(3, -1\)" \(row 2\)/);
    expect(broken.message).toContain('other golds were paid in "boxed"');
    expect(broken.message).toContain('the verifier cannot pay this gold as it is written');
    expect(broken.message).not.toMatch(/declare it with --format/);
  }, 120_000);

  it('passes a list grader that credits items in place on one list gold, and rejects graders that pay naming many items', async () => {
    // A longer list is paid under its first word alone, which a task of whole lists never has as a gold.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `list-positions.py:${fn}`);
    const answer = 'anchor, basalt, cobalt, dune, ember';
    const positions = await gate({ ...base, reward: fixture('reward'), answer, completionFormat: 'string' });
    expect(positions.record.findings.filter((finding) => finding.class === 'exploit')).toEqual([]);
    expect(positions.decision).toBe('PASS');
    for (const fn of ['reward_contains', 'reward_any_item', 'reward_recall']) {
      const lenient = await gate({ ...base, reward: fixture(fn), answer, completionFormat: 'string' });
      expect(lenient.decision).toBe('REJECT');
      const exploit = lenient.record.findings.find((finding) => finding.class === 'exploit')!;
      // Paid under another whole list, not under a piece of one.
      expect(exploit.rewarded_under.slice(1).every((gold) => gold.split(', ').length === 5)).toBe(true);
    }
    // A prefix check pays a near miss of the last item under itself too: the reply in no format is tried whole.
    const prefix = await gate({ ...base, reward: fixture('reward_startswith'), answer, completionFormat: 'string' });
    const nearMiss = prefix.record.findings.filter((finding) => finding.class === 'exploit').map((finding) => finding.rewarded_under);
    expect(nearMiss).toContainEqual([answer, `${answer}x`]);
  }, 240_000);

  it("keeps a list's item numbers in the gold's twin: a knights-and-knaves grader that reads past them passes, any() over its statements does not", async () => {
    // `(1) Zoey is a knave` renumbered `(6) Zoey is a knave` is the same answer, never another gold.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `roles.py:${fn}`);
    const dataset = path.join('test', 'fixtures', 'invariance', 'roles.jsonl');
    const sound = await gate({ ...base, reward: fixture('reward'), dataset });
    expect(sound.record.findings).toEqual([]);
    expect(sound.decision).toBe('PASS');
    const hedging = await gate({ ...base, reward: fixture('reward_any'), dataset });
    expect(hedging.decision).toBe('REJECT');
    expect(hedging.record.reasons.map((reason) => reason.code)).toContain('HEDGING_PAYS');
  }, 120_000);

  it('says a declared layout was refused too, and passes the grader once the layout holds what it wants first', async () => {
    const reward = path.join('test', 'fixtures', 'invariance', 'marked-solution.py:reward');
    const refused = await gate({ ...base, reward, answer: '42', format: '<SOLUTION>{}</SOLUTION>' });
    expect(refused.decision).toBe('REJECT');
    const broken = refused.record.reasons.find((reason) => reason.code === 'NO_FORMAT_ACCEPTS_GOLD')!;
    expect(broken.message).toMatch(/declared with --format \("<SOLUTION>\{\}<\/SOLUTION>"\) was refused too/);
    expect(broken.message).not.toMatch(/declare it with --format/);
    const declared = await gate({ ...base, reward, answer: '42', format: '<end_working_out><SOLUTION>{}</SOLUTION>' });
    expect(declared.decision).toBe('PASS');
  });

  it('names the layout of a box inside a tag in its hint, and passes the grader once it is declared so', async () => {
    const reward = path.join('test', 'fixtures', 'invariance', 'boxed-in-tag.py:reward');
    const broken = await gate({ ...base, reward, answer: '42', completionFormat: 'string' });
    expect(broken.decision).toBe('REJECT');
    const hint = broken.record.reasons.find((reason) => reason.code === 'NO_FORMAT_ACCEPTS_GOLD')!;
    expect(hint.message).toContain("'<answer>\\boxed{{}}</answer>' for a box inside a tag");
    // Written as the hint says: the first {} is the answer's place.
    const declared = await gate({ ...base, reward, answer: '42', completionFormat: 'string', format: ['<answer>\\boxed{{}}</answer>'] });
    expect(declared.decision).toBe('PASS');
    expect(declared.record.target.golds[0]!.accepted_formats).toContain('<answer>\\boxed{{}}</answer>');
  });

  it("tries the R1-Zero template's join before calling a grader broken that reads replies only there, and attacks in it", async () => {
    const reward = (fn: string) => path.join('test', 'fixtures', 'invariance', `r1-zero-join.py:${fn}`);
    const sound = await gate({ ...base, reward: reward('reward'), answer: '42' });
    expect(sound.decision).toBe('PASS');
    expect(sound.record.target.golds[0]!.accepted_formats).toEqual(['</think> <answer>{}</answer>']);
    const hedging = await gate({ ...base, reward: reward('reward_any'), answer: '42' });
    expect(hedging.decision).toBe('REJECT');
    expect(hedging.record.findings[0]!.completion).toContain('</think> <answer>');
    // A verifier no layout pays is told the join was tried.
    const refused = await gate({ ...base, reward: path.join('test', 'fixtures', 'invariance', 'solution-tag.py:reward'), answer: '42' });
    expect(refused.record.reasons[0]!.message).toMatch(/the R1-Zero template's join, '<\/think> <answer>\{\}<\/answer>', was tried too/);
  });

  it('names a reward that never looks at the gold format-only', async () => {
    const result = await gate({ ...base, reward: verifier('constant-one'), answer: '42' });
    expect(result.decision).toBe('REJECT');
    expect(result.record.reasons[0]).toMatchObject({ code: 'FORMAT_ONLY' });
    expect(result.record.reasons[0]!.message).toMatch(/does not check the answer/);
    // A task whose correct reply is not the gold (Countdown's equation) is told it may be out of reach.
    expect(result.record.reasons[0]!.message).toMatch(/if a correct reply is not the gold itself .* the gate cannot audit it/i);
  });

  it("does not decide on a reward that grades the row's own data, not the gold; one that pays non-answers stays format-only", async () => {
    // Any dictionary word spelled from the row's letters is right: other rows' golds are paid as the gold is.
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `row-words.py:${fn}`);
    const dataset = path.join('test', 'fixtures', 'invariance', 'row-words.jsonl');
    const many = await gate({ ...base, reward: fixture('reward'), dataset });
    expect(many.decision).toBe('UNDECIDED');
    expect(many.exitCode).toBe(3);
    expect(new Set(many.record.reasons.map((reason) => reason.code))).toEqual(new Set(['GOLD_NOT_USED']));
    expect(many.record.reasons[0]!.message).toMatch(/pays another row's answer, "\w+", as much as the gold \(1\), yet refuses .*the empty answer "" 0/);
    expect(many.record.statement).toMatch(/^COULD NOT DECIDE/);
    expect(formatScorecard(many.record)).toMatch(/^decision: COULD NOT DECIDE$/m);
    // Its hackability rests on findings that assume the gold is the only right answer: shown, and said to be set aside.
    expect(formatScorecard(many.record)).toMatch(/^hackability \d+\.\d \(set aside: the reward grades without the gold\);/m);
    // The gold's letters reversed (`etalp`) are paid: a string of the letters, a word or not, pays without the task being done.
    const letters = await gate({ ...base, reward: fixture('reward_letters'), dataset });
    expect(letters.decision).toBe('REJECT');
    expect(letters.record.reasons[0]!.code).toBe('FORMAT_ONLY');
    expect(letters.record.reasons[0]!.message).toMatch(/and so does the gold's characters reversed "etalp" \(1\)/);
    const any = await gate({ ...base, reward: fixture('reward_any'), dataset });
    expect(any.decision).toBe('REJECT');
    expect(any.record.reasons.map((reason) => reason.code)).toContain('FORMAT_ONLY');
  }, 120_000);

  it('re-runs a call that timed out once alone, so a slow moment does not change the decision', async () => {
    const policy = parsePolicy({ timeouts: { call_ms: 1000 } });
    const fixture = (fn: string) => path.join('test', 'fixtures', 'invariance', `slow-once.py:${fn}`);
    const slow = await gate({ ...base, reward: fixture('reward'), answer: '42', policy });
    const steady = await gate({ ...base, reward: fixture('steady'), answer: '42', policy });
    expect(slow.record.errors).toEqual([]);
    expect(slow.decision).toBe(steady.decision);
    expect(slow.record.hack_rate).toEqual(steady.record.hack_rate);
    expect(slow.record.false_accepts.total).toBe(steady.record.false_accepts.total);
  }, 60_000);

  it('validates the record against its own schema', async () => {
    const result = await gate({ ...base, reward: verifier('substring'), answer: '42' });
    expect(auditRecordSchema.safeParse(result.record).success).toBe(true);
    expect(
      result.record.findings.every(
        (finding) =>
          (finding.class === 'exploit' && finding.rewarded_under.length > 1) ||
          finding.invariant === 'reward-above-honest' ||
          finding.invariant === 'non-finite-reward',
      ),
    ).toBe(true);
  });
});
