/**
 * Render a passed environment as a package for the `verifiers` library's
 * classic API (`import verifiers as vf`, 0.3.x): a module whose
 * `load_environment()` builds a `vf.SingleTurnEnv` from the bundled rows,
 * scored by a `vf.Rubric` around the gated verifier. Kept for users still on
 * that runtime; verifiers 0.4 removed the API (see verifiers-v1.ts).
 */
import {
  ANSWER_FORMAT_EXAMPLES,
  COMPLETION_ARGUMENT,
  DATA_FILE_NAME,
  PACKAGE_VERSION,
  VERIFIER_FILE_NAME,
  assertRenderableSpec,
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
export const VERIFIERS_REQUIREMENT = 'verifiers>=0.3.1,<0.4';

/** The package builds its dataset with `datasets` directly. */
const DATASETS_REQUIREMENT = 'datasets';

/** Paths are relative to `verifiers-v0/<envId>/`. */
export function renderVerifiersV0Package(spec: EnvironmentSpec): PackageFiles {
  assertRenderableSpec(spec);
  const module = moduleName(spec.envId);
  const plan = evalPlan(spec.rows.length);
  const evalExamples = String(plan.examples);
  const verifierPath = `${module}/${VERIFIER_FILE_NAME}`;
  return new Map<string, string>([
    [
      'pyproject.toml',
      renderTemplate('verifiers-v0/pyproject.toml.tmpl', {
        env_id: tomlString(spec.envId),
        version: tomlString(PACKAGE_VERSION),
        description: tomlString(spec.description),
        answer_format: tomlString(spec.answerFormat),
        verifiers_requirement: tomlString(VERIFIERS_REQUIREMENT),
        datasets_requirement: tomlString(DATASETS_REQUIREMENT),
        module,
        eval_examples: evalExamples,
        eval_rollouts: String(plan.rollouts),
      }),
    ],
    [
      'README.md',
      renderTemplate('verifiers-v0/README.md', {
        env_id: spec.envId,
        description: spec.description,
        verifiers_requirement: VERIFIERS_REQUIREMENT,
        row_count: String(spec.rows.length),
        module,
        system_prompt: fenced(spec.systemPrompt, 'text'),
        answer_format_example: ANSWER_FORMAT_EXAMPLES[spec.answerFormat],
        verifier_function: spec.verifierFunction,
        verifier_path: verifierPath,
        completion_argument: COMPLETION_ARGUMENT[spec.completionFormat],
        audit_section: renderAuditSection(spec, verifierPath),
        eval_examples: evalExamples,
        eval_rollouts: String(plan.rollouts),
      }),
    ],
    [
      `${module}/__init__.py`,
      renderTemplate('verifiers-v0/__init__.py.tmpl', {
        description: pyString(spec.description),
        module,
      }),
    ],
    [
      `${module}/${module}.py`,
      renderTemplate('verifiers-v0/environment.py.tmpl', {
        env_id: spec.envId,
        env_id_literal: pyString(spec.envId),
        system_prompt: pyString(spec.systemPrompt),
        answer_format: pyString(spec.answerFormat),
        completion_format: pyString(spec.completionFormat),
        verifier_name: pyString(spec.verifierFunction),
      }),
    ],
    ...verifierFiles(spec, module),
    [`${module}/${DATA_FILE_NAME}`, renderRows(spec.rows)],
  ]);
}
