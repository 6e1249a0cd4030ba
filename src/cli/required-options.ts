import type { Command } from 'commander';

/**
 * Commander checks that required options are there before it looks for
 * unknown ones, so `gate --rewards x` would hear that --reward is missing
 * rather than that --rewards is unknown (with the --reward it meant). Here
 * the required options are checked once commander has refused any unknown
 * option: each command's required options become plain ones, and a
 * preAction hook on the program, which runs after that refusal and before
 * any action, says what is missing in commander's own words.
 */
export function requireAfterUnknownOptions(program: Command): void {
  const required = new Map<Command, string[]>();
  const visit = (command: Command): void => {
    const flags: string[] = [];
    for (const option of command.options) {
      if (!option.mandatory) continue;
      option.makeOptionMandatory(false);
      flags.push(option.flags);
    }
    if (flags.length > 0) required.set(command, flags);
    for (const sub of command.commands) visit(sub);
  };
  visit(program);
  program.hook('preAction', (_hooked, action) => {
    for (let command: Command | null = action; command; command = command.parent) {
      for (const flags of required.get(command) ?? []) {
        const option = command.options.find((entry) => entry.flags === flags);
        if (option && command.getOptionValue(option.attributeName()) === undefined) {
          command.error(`error: required option '${flags}' not specified`, { code: 'commander.missingMandatoryOptionValue', exitCode: 1 });
        }
      }
    }
  });
}
