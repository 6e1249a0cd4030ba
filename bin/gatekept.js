#!/usr/bin/env node
// The only place that ends the process: the library and the CLI module return exit codes.
// The CLI is bundled into one CommonJS file (dist/bundle/run.cjs), loaded with
// the code V8 compiled for it on an earlier run (see src/cli/code-cache.ts):
// start-up neither loads hundreds of files nor compiles them again. This file
// is CommonJS too (bin/package.json), so no ES module loader is started.
'use strict';
const path = require('node:path');

const bundle = path.join(__dirname, '..', 'dist', 'bundle');

// A command lives seconds, beside verifier workers that want every core. At
// V8's default threshold its optimizing compiler also spends background
// threads on code that runs only for a while at start; four times the
// threshold leaves it the code that stays hot. Measured on 2 cores: about
// 0.1 s less CPU on an audit of 6k calls, 0.2 s on one of 75k. Set before
// the bundle is compiled, so its cached code is made under the same flags.
require('node:v8').setFlagsFromString('--interrupt-budget=270336');

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

let loadCli;
try {
  ({ loadCli } = require(path.join(bundle, 'code-cache.cjs')));
} catch (error) {
  if (error && error.code !== 'MODULE_NOT_FOUND') throw error;
  process.stderr.write(`gatekept: the command line is not built (${bundle} is missing); run npm run build\n`);
  process.exit(1);
}
const argv = process.argv.slice(2);
const cli = loadCli(path.join(bundle, 'run.cjs'), argv);
cli.run(argv).then((code) => {
  process.exitCode = code;
  cli.keep();
});
