import { readFileSync } from 'node:fs';
import { gate } from '../src/audit/gate.js';
import { testPython } from '../test/support/test-python.js';
const python = testPython('verifiers-v1');
const panel = JSON.parse(readFileSync('test/panel/panel.json', 'utf8'));
const only = process.argv[2];
for (const entry of panel) {
  if (only && !entry.file.startsWith(only)) continue;
  for (const fn of ['reward', 'reward_exploit', 'reward_false_accept']) {
    const r = await gate({ reward: `test/panel/${entry.file}:${fn}`, answer: entry.answer, answerType: entry.answer_type, python, workers: 1 });
    const rec = r.record;
    console.log([entry.file, fn, rec.decision, rec.hackability, `ex=${rec.findings_total}`, `fa=${rec.false_accepts.total}`, `eq=${rec.equivalent_forms.total}`, rec.reasons.map((x) => x.code).join(','), 'EX:' + rec.findings.slice(0, 3).map((f) => f.attack_id + JSON.stringify(f.completion.slice(0, 40)) + JSON.stringify(f.rewarded_under)).join(' ; '), 'FA:' + rec.false_accepts.families.map((f) => f.family + ':' + f.count).join(' '), `${rec.timing.total_ms}ms`].join(' | '));
  }
}
