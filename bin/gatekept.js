#!/usr/bin/env node
// The only place that ends the process: the library and the CLI module return exit codes.
// The CLI is bundled (dist/bundle) so that start-up loads a few files, not hundreds;
// the library in dist/ is the same code compiled module by module.
import { run } from '../dist/bundle/run.js';

const interrupted = (signal, code) => () => {
  try {
    process.stderr.write(`\ngatekept: interrupted by ${signal}\n`);
  } catch {
    // a hung-up terminal must not stop the cleanup below
  }
  process.exit(code);
};
// Exiting (rather than dying of the signal) runs the exit hooks that stop the
// Python workers and remove staging directories.
process.once('SIGINT', interrupted('SIGINT', 130));
process.once('SIGTERM', interrupted('SIGTERM', 143));
process.once('SIGHUP', interrupted('SIGHUP', 129));

process.exitCode = await run(process.argv.slice(2));
