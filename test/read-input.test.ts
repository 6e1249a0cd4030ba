/**
 * The reader under every input file: lines split on \n (a \r before it
 * dropped), read a chunk at a time, a line at the cap kept and one byte past
 * it refused as soon as it is seen, whatever chunk it spans.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatekeptError } from '../src/errors.js';
import { type LineOptions, readInputFile, readInputLines } from '../src/read-input.js';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-read-input-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function linesOf(content: string | Buffer, options: LineOptions | number = {}): Promise<[number, string][]> {
  const file = path.join(scratch, `f-${Math.random().toString(36).slice(2)}`);
  await writeFile(file, content);
  const { lines } = await readInputLines(file, { what: 'test file' }, typeof options === 'number' ? { cap: options } : options);
  const out: [number, string][] = [];
  for await (const { line, text } of lines) out.push([line, text]);
  return out;
}

describe('readInputLines', () => {
  it('numbers lines as a text editor does, with CRLF, a BOM and no final newline', async () => {
    expect(await linesOf('\ufeffa\r\n\nb\r\nc')).toEqual([
      [1, 'a'],
      [2, ''],
      [3, 'b'],
      [4, 'c'],
    ]);
    expect(await linesOf('a\n')).toEqual([[1, 'a']]);
    expect(await linesOf('')).toEqual([]);
  });

  it('keeps lines whole across chunks (1 MiB each)', async () => {
    const long = 'y'.repeat(3 * 1024 * 1024 + 17);
    const lines = await linesOf(`short\n${long}\nlast\n`);
    expect(lines.map(([line, text]) => [line, text.length])).toEqual([
      [1, 5],
      [2, long.length],
      [3, 4],
    ]);
    expect(lines[1]![1]).toBe(long);
  });

  it('keeps a line at the cap, with or without a \\r, and refuses one byte more naming the line', async () => {
    expect(await linesOf('12345\nabc\n', 5)).toEqual([
      [1, '12345'],
      [2, 'abc'],
    ]);
    expect(await linesOf('abc\r\n12345\r\n', 5)).toEqual([
      [1, 'abc'],
      [2, '12345'],
    ]);
    await expect(linesOf('abc\n123456\n', 5)).rejects.toThrow(/^test file .*: line 2 is longer than 5 bytes, the most gatekept reads$/);
    await expect(linesOf('abc\n1234\r5\r\n', 5)).rejects.toThrow(/line 2 is longer than/);
    // A line with no end is refused once past the cap, not read to its end.
    await expect(linesOf(`ok\n${'z'.repeat(3 * 1024 * 1024)}`, 1024 * 1024)).rejects.toThrow(/line 2 is longer than 1 MiB/);
  });

  it('names the line of a byte that is not UTF-8, or reads it as U+FFFD when asked', async () => {
    const bad = Buffer.concat([Buffer.from('a\nb\nc'), Buffer.from([0xff]), Buffer.from('\nd\n')]);
    await expect(linesOf(bad)).rejects.toThrow(/^test file .*: line 3 is not valid UTF-8$/);
    // Past a chunk's worth of lines too.
    const far = Buffer.concat([Buffer.from('x\n'.repeat(700_000)), Buffer.from([0xc3, 0x0a])]);
    await expect(linesOf(far)).rejects.toThrow(/: line 700001 is not valid UTF-8$/);
    expect(await linesOf(bad, { invalidUtf8: 'replace' })).toEqual([
      [1, 'a'],
      [2, 'b'],
      [3, 'c\ufffd'],
      [4, 'd'],
    ]);
  });

  it('refuses a directory with fstat, before reading', async () => {
    const error = await readInputLines(scratch, { what: 'test file' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(GatekeptError);
    expect((error as GatekeptError).code).toBe('NOT_A_REGULAR_FILE');
    expect((error as GatekeptError).exitCode).toBe(2);
    expect((error as GatekeptError).message).toBe(`test file ${scratch} is a directory: it must be a regular file`);
  });
});

describe('readInputFile', () => {
  it('reads a file up to the cap and refuses one byte more', async () => {
    const file = path.join(scratch, 'whole.txt');
    await writeFile(file, '12345');
    expect((await readInputFile(file, { what: 'test file' }, 5)).toString()).toBe('12345');
    await expect(readInputFile(file, { what: 'test file' }, 4)).rejects.toThrow(/^test file .*whole\.txt: the file is longer than 4 bytes/);
  });

  it('names a missing file with its errno', async () => {
    await expect(readInputFile(path.join(scratch, 'nope'), { what: 'test file', shownAs: 'nope' })).rejects.toThrow(/^cannot read test file nope: ENOENT$/);
  });
});
