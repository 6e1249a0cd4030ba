/**
 * Render a passed environment as a verifiers 0.4 package (`verifiers.v1`):
 * a module whose `__all__` exports one `Taskset` subclass over the bundled
 * rows, each task single-turn and scored by one async reward that hands the
 * final reply to the gated verifier file, unchanged.
 */
import {
  ANSWER_FORMAT_EXAMPLES,
  COMPLETION_ARGUMENT,
  DATA_FILE_NAME,
  PACKAGE_VERSION,
  VERIFIER_FILE_NAME,
  assertRenderableSpec,
  classPrefix,
  fenced,
  moduleName,
  pyString,
  renderAuditSection,
  renderRows,
  verifierFiles,
  tomlString,
} from '../environment-spec.js';
import { evalPlan, type EnvironmentSpec, type PackageFiles } from '../environment-spec.js';
import { renderTemplate } from '../render-template.js';

/** The verifiers releases the emitted code is written and tested against. */
export const VERIFIERS_V1_REQUIREMENT = 'verifiers>=0.4,<0.5';

interface TasksetNames {
  module: string;
  taskset: string;
  task: string;
  data: string;
  config: string;
}

function tasksetNames(envId: string): TasksetNames {
  const prefix = classPrefix(envId);
  return {
    module: moduleName(envId),
    taskset: `${prefix}Taskset`,
    task: `${prefix}Task`,
    data: `${prefix}Data`,
    config: `${prefix}Config`,
  };
}

/** Paths are relative to `verifiers/<envId>/`. */
export function renderVerifiersV1Package(spec: EnvironmentSpec): PackageFiles {
  assertRenderableSpec(spec);
  const names = tasksetNames(spec.envId);
  const { module } = names;
  return new Map<string, string>([
    [
      'pyproject.toml',
      renderTemplate('verifiers-v1/pyproject.toml.tmpl', {
        env_id: tomlString(spec.envId),
        version: tomlString(PACKAGE_VERSION),
        description: tomlString(spec.description),
        answer_format: tomlString(spec.answerFormat),
        verifiers_requirement: tomlString(VERIFIERS_V1_REQUIREMENT),
        module,
      }),
    ],
    ['README.md', renderReadme(spec, names)],
    [
      `${module}/__init__.py`,
      renderTemplate('verifiers-v1/__init__.py.tmpl', {
        description: pyString(spec.description),
        taskset_class: names.taskset,
      }),
    ],
    [
      `${module}/taskset.py`,
      renderTemplate('verifiers-v1/taskset.py.tmpl', {
        env_id: spec.envId,
        env_id_literal: pyString(spec.envId),
        system_prompt: pyString(spec.systemPrompt),
        answer_format: pyString(spec.answerFormat),
        completion_format: pyString(spec.completionFormat),
        verifier_name: pyString(spec.verifierFunction),
        data_class: names.data,
        task_class: names.task,
        config_class: names.config,
        taskset_class: names.taskset,
      }),
    ],
    ...verifierFiles(spec, module),
    [`${module}/${DATA_FILE_NAME}`, renderRows(spec.rows)],
  ]);
}

function renderReadme(spec: EnvironmentSpec, names: TasksetNames): string {
  const verifierPath = `${names.module}/${VERIFIER_FILE_NAME}`;
  return renderTemplate('verifiers-v1/README.md', {
    env_id: spec.envId,
    description: spec.description,
    verifiers_requirement: VERIFIERS_V1_REQUIREMENT,
    row_count: String(spec.rows.length),
    module: names.module,
    system_prompt: fenced(spec.systemPrompt, 'text'),
    answer_format_example: ANSWER_FORMAT_EXAMPLES[spec.answerFormat],
    verifier_function: spec.verifierFunction,
    verifier_path: verifierPath,
    completion_argument: COMPLETION_ARGUMENT[spec.completionFormat],
    audit_section: renderAuditSection(spec, verifierPath),
    eval_examples: String(evalPlan(spec.rows.length).examples),
    eval_rollouts: String(evalPlan(spec.rows.length).rollouts),
    taskset_class: names.taskset,
  });
}
