import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { renderHtml } from './html.js';
import { renderMarkdown } from './markdown.js';
import type { ReportRecord } from './report-view.js';

/**
 * One entry point for reports, whatever the record (a verifier's audit, a
 * packed audit, an environment audit) and whatever the format, so every
 * command that takes `--report FILE` behaves the same way.
 */

export const REPORT_FORMATS = ['html', 'md'] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];

/** The file `pack` writes beside `gatekept_audit.json` on PASS. */
export const REPORT_FILE_NAME = 'gatekept_report.html';

/** The format a report file asks for by its extension; a clear error for anything else. */
export function reportFormatFor(file: string): ReportFormat {
  const extension = path.extname(file).toLowerCase();
  // Exactly the two names the documentation gives: a report is found by its extension.
  if (extension === '.html') return 'html';
  if (extension === '.md') return 'md';
  throw new GatekeptError('BAD_ARGUMENT', `cannot tell the report format of ${file}`, {
    suggestion: 'end the --report file name in .html (a self-contained page) or .md (Markdown for a pull request)',
  });
}

/** The report as text; the same record always gives the same bytes. */
export function renderReport(record: ReportRecord, format: ReportFormat): string {
  return format === 'html' ? renderHtml(record) : renderMarkdown(record);
}

/**
 * Write a report, its format chosen by the file's extension. Written beside
 * the target and renamed into place, so a reader never sees half a report.
 */
export async function writeReport(record: ReportRecord, file: string): Promise<string> {
  const format = reportFormatFor(file);
  return writeWhole(file, renderReport(record, format), { what: 'report', option: '--report' });
}

/**
 * Write `text` to `file` whole or not at all (beside it, then renamed into
 * place); its absolute path. `what` and `option` name the file in the error.
 */
export async function writeWhole(file: string, text: string, names: { what: string; option: string }): Promise<string> {
  const target = path.resolve(file);
  const partial = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.partial`);
  try {
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(partial, text);
    await rename(partial, target);
  } catch (error) {
    await rm(partial, { force: true });
    throw new GatekeptError('OUT_DIR_UNWRITABLE', `cannot write the ${names.what} ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {
      suggestion: `choose a ${names.option} path in a directory you can write to`,
      cause: error,
    });
  }
  return target;
}

export type { ReportRecord, ReportAudit, ReportEnvAudit } from './report-view.js';
