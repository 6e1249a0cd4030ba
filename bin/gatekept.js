#!/usr/bin/env node
// The only place that ends the process: the library and the CLI module return exit codes.
import { run } from '../dist/cli.js';

const interrupted = (signal, code) => () => {
  process.stderr.write(`\ngatekept: interrupted by ${signal}\n`);
  process.exit(code);
};
process.once('SIGINT', interrupted('SIGINT', 130));
process.once('SIGTERM', interrupted('SIGTERM', 143));

process.exitCode = await run(process.argv.slice(2));
