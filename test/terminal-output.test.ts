/**
 * Text from outside reaches the terminal only escaped, in every command:
 * rollout ids and completions, verifier file names, paths in error messages.
 * ESC could redraw the screen (a fake PASS), BEL rings, the 8-bit CSI U+009B
 * starts a sequence on terminals that take C1 controls, and U+202E reverses
 * the rest of a line. The tool's own layout (newlines, tabs) and the
 * progress line's controls go out as they are.
 */
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { terminalIo, type Io } from '../src/cli/io.js';
import { createProgress } from '../src/cli/progress.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { cli, cliInProcess } from './support/cli.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const GAMEABLE = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'scan', 'gameable.py');

/** ESC with a colour, BEL, the 8-bit CSI, RIGHT-TO-LEFT OVERRIDE, and a C0 carriage return. */
const HOSTILE = '\u001b[31m\u0007\u009b2J\u202e\r';
const RAW = ['\u001b', '\u0007', '\u009b', '\u202e', '\r'];

function expectNoRawControls(text: string): void {
  for (const raw of RAW) expect(text.includes(raw), `raw ${JSON.stringify(raw)} in ${JSON.stringify(text)}`).toBe(false);
  // No control character at all but the tool's own newlines and tabs.
  const controls = [...text].filter((char) => {
    const code = char.charCodeAt(0);
    return (
      (code < 0x20 && char !== '\n' && char !== '\t') ||
      (code >= 0x7f && code <= 0x9f) ||
      [0x061c, 0x200e, 0x200f].includes(code) ||
      (code >= 0x202a && code <= 0x202e) ||
      (code >= 0x2066 && code <= 0x2069)
    );
  });
  expect(controls).toEqual([]);
}

let scratch: string;
/** A copy of a gameable verifier whose file name holds every hostile character (legal in a Linux file name). */
let hostileVerifier: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-terminal-'));
  hostileVerifier = path.join(scratch, `verifier${HOSTILE}.py`);
  await copyFile(GAMEABLE, hostileVerifier);
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('scan', () => {
  it("prints a rollout's id and completion escaped, and its --json still parses to the text as written", async () => {
    const id = `r1${HOSTILE}evil`;
    // The gameable verifier pays any completion that says "correct": an exploit, shown with its id and completion.
    const completion = `${HOSTILE} 42 correct ${HOSTILE}`;
    const rows = [
      { id, completion, answer: '42', reward: 1 },
      { id: 'r2', completion: '\\boxed{17}', answer: '17', reward: 1 },
    ];
    const results = path.join(scratch, 'rollouts.jsonl');
    await writeFile(results, `${rows.map((row) => JSON.stringify(row)).join('\n')}\n`);
    const run = await cli(['scan', '--results', results, '--reward', `${hostileVerifier}:reward`, '--python', python, '--workers', '1']);
    expect(run.exitCode, run.stderr).toBe(1);
    const shown = `${run.stdout}\n${run.stderr}`;
    expectNoRawControls(shown);
    // The id and the completion are there, escaped.
    expect(run.stdout).toContain('(r1\\u001b[31m\\u0007\\u009b2J\\u202e\\u000devil)');
    expect(run.stdout).toMatch(/\\x1b\[31m\\x07\\x9b2J\\u202e\\r 42 correct/);

    const json = await cli(['scan', '--results', results, '--reward', `${hostileVerifier}:reward`, '--python', python, '--workers', '1', '--json']);
    expectNoRawControls(json.stdout);
    const record = JSON.parse(json.stdout) as { top: { exploit: { id: string }[] } };
    expect(record.top.exploit.map((example) => example.id)).toContain(id);
  });

  it('escapes a path in an error message', async () => {
    const results = path.join(scratch, `bad${HOSTILE}.jsonl`);
    await writeFile(results, 'not json\n');
    const run = await cliInProcess(['scan', '--results', results, '--reward', `${GAMEABLE}:reward`, '--python', python]);
    expect(run.exitCode).toBe(2);
    expectNoRawControls(run.stderr);
    expect(run.stderr).toContain('bad\\u001b[31m\\u0007\\u009b2J\\u202e\\u000d.jsonl: line 1 is not valid JSON');
  });
});

describe('gate', () => {
  it("prints the verifier's file name escaped", async () => {
    const run = await cli(['gate', '--reward', `${hostileVerifier}:reward`, '--answer', '42', '--python', python, '--workers', '1']);
    expect(run.exitCode, run.stderr).toBe(1);
    expectNoRawControls(`${run.stdout}\n${run.stderr}`);
    expect(run.stdout).toMatch(/^gatekept gate: .*verifier\\u001b\[31m\\u0007\\u009b2J\\u202e\\u000d\.py:reward$/m);
  });

  it('a verifier name in an error is escaped on stderr, and the JSON error keeps it as written', async () => {
    const missing = path.join(scratch, `missing${HOSTILE}.py`);
    const run = await cliInProcess(['gate', '--reward', `${missing}:reward`, '--answer', '42', '--json']);
    expect(run.exitCode).toBe(2);
    expectNoRawControls(`${run.stdout}\n${run.stderr}`);
    expect(run.stderr).toContain('missing\\u001b[31m\\u0007\\u009b2J\\u202e\\u000d.py does not exist');
    const error = JSON.parse(run.stdout) as { error: { message: string } };
    expect(error.error.message).toContain(`missing${HOSTILE}.py`);
  });
});

describe('the progress line', () => {
  it('draws with its own controls raw and a label from outside escaped', () => {
    const raw: string[] = [];
    const text: string[] = [];
    const terminal: Io = {
      stdout: () => undefined,
      stderr: (chunk) => text.push(chunk),
      stderrControl: (chunk) => raw.push(chunk),
      stderrIsTty: true,
    };
    const realNow = Date.now;
    let now = realNow();
    Date.now = () => now;
    try {
      const progress = createProgress(terminalIo(terminal), 'auditing')!;
      now += 5000;
      progress.phase(`gating reward ${HOSTILE}`);
      progress.update(1, 2);
      progress.done();
    } finally {
      Date.now = realNow;
    }
    expect(raw.length).toBeGreaterThan(0);
    for (const control of raw) expect(control).toBe('\r\u001b[K');
    expectNoRawControls(text.join(''));
    expect(text.join('')).toContain('gating reward \\u001b[31m\\u0007\\u009b2J\\u202e\\u000d');
  });
});
