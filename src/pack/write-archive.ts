import { createWriteStream } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ZipArchive } from 'archiver';

/**
 * Zip a directory. Entries are added in sorted order with a fixed date so
 * that packing the same seed twice gives byte-identical archives.
 */
const FIXED_DATE = new Date('2000-01-01T00:00:00Z');

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) files.push(...(await listFiles(dir, relative)));
    else if (entry.isFile()) files.push(relative);
  }
  return files;
}

export async function writeArchive(dir: string, file: string): Promise<void> {
  const files = (await listFiles(dir)).filter((relative) => path.join(dir, relative) !== file);
  const output = createWriteStream(file);
  const zip = new ZipArchive({ zlib: { level: 9 } });
  const finished = new Promise<void>((resolve, reject) => {
    output.on('close', resolve);
    output.on('error', reject);
    zip.on('error', reject);
  });
  zip.pipe(output);
  // Appending contents, not paths, keeps file-system metadata (times, owners) out of the archive.
  for (const relative of files) zip.append(await readFile(path.join(dir, relative)), { name: relative, date: FIXED_DATE, mode: 0o644 });
  await zip.finalize();
  await finished;
}
