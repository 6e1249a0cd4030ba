/**
 * The rollouts the scan benchmarks read: a vf-eval-like JSONL file of
 * `count` lines over 500 golds, seven in ten answered right, two wrong, and
 * one in ten hedging between a wrong value and the gold (an exploit under a
 * contains-the-gold reader, nothing under a strict one).
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';

export async function writeRollouts(file: string, count: number): Promise<void> {
  const out = createWriteStream(file);
  for (let index = 0; index < count; index += 1) {
    const gold = String(100 + (index % 500));
    const kind = index % 10;
    const response =
      kind < 7 ? `Working it out gives \\boxed{${gold}}.` : kind < 9 ? `\\boxed{${Number(gold) + 1}}` : `\\boxed{${Number(gold) + 7}} or \\boxed{${gold}}`;
    if (!out.write(`${JSON.stringify({ id: `r${index}`, step: Math.floor(index / 1000), response, ground_truth: gold })}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}
