/**
 * Render a passed environment as an OpenEnv environment for the `openenv`
 * package (0.10; formerly `openenv-core`), in the layout `openenv init`
 * scaffolds: a FastAPI app serving one bundled question per episode and
 * scoring the answer with the gated verifier, with an `openenv.yaml` whose
 * `validation:` block `openenv validate` checks.
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
import type { EnvironmentSpec, PackageFiles } from '../environment-spec.js';
import { renderTemplate } from '../render-template.js';

/**
 * The openenv releases the emitted code is written and tested against. Never
 * `openenv-core`: both install the same `openenv` import package.
 */
export const OPENENV_REQUIREMENT = 'openenv>=0.10,<0.11';

interface OpenEnvNames {
  /** The Python import name: the env id's module plus `_env`, so the verifiers package (named by the module) can share a venv. */
  package: string;
  action: string;
  observation: string;
  environment: string;
  client: string;
  environmentModule: string;
}

function openEnvNames(envId: string): OpenEnvNames {
  const prefix = classPrefix(envId);
  const module = moduleName(envId);
  return {
    package: `${module}_env`,
    action: `${prefix}Action`,
    observation: `${prefix}Observation`,
    environment: `${prefix}Environment`,
    client: `${prefix}Env`,
    environmentModule: `${module}_environment`,
  };
}

/** Paths are relative to `openenv/<envId>/`. */
/**
 * The runtime plan `openenv validate` plays against the built image (see
 * validation.execution in openenv.yaml): a seeded reset and one reply, the
 * first row's gold, which ends the single-turn episode.
 */
function runtimePlan(spec: EnvironmentSpec): string {
  const plan = {
    plan_schema_version: '1',
    reset: { episode_id: 'gatekept-probe', seed: 0 },
    actions: [{ answer: spec.rows[0]?.answer ?? '' }],
  };
  return `${JSON.stringify(plan, null, 2)}\n`;
}

export function renderOpenEnvPackage(spec: EnvironmentSpec): PackageFiles {
  assertRenderableSpec(spec);
  const names = openEnvNames(spec.envId);
  const classes = {
    action_class: names.action,
    observation_class: names.observation,
  };
  const verifierPath = `server/${VERIFIER_FILE_NAME}`;
  return new Map<string, string>([
    // env ids are [a-z][a-z0-9-]* and formats plain words: safe as bare YAML scalars.
    [
      'openenv.yaml',
      renderTemplate('openenv/openenv.yaml', {
        env_id: spec.envId,
        version: PACKAGE_VERSION,
        answer_format: spec.answerFormat,
      }),
    ],
    [
      'pyproject.toml',
      renderTemplate('openenv/pyproject.toml.tmpl', {
        project_name: tomlString(`openenv-${spec.envId}`),
        version: tomlString(PACKAGE_VERSION),
        description: tomlString(spec.description),
        openenv_requirement: tomlString(OPENENV_REQUIREMENT),
        package: names.package,
      }),
    ],
    [
      'README.md',
      renderTemplate('openenv/README.md', {
        env_id: spec.envId,
        description: spec.description,
        openenv_requirement: OPENENV_REQUIREMENT,
        row_count: String(spec.rows.length),
        action_class: names.action,
        client_class: names.client,
        package: names.package,
        answer_format_example: ANSWER_FORMAT_EXAMPLES[spec.answerFormat],
        system_prompt: fenced(spec.systemPrompt, 'text'),
        verifier_function: spec.verifierFunction,
        verifier_path: verifierPath,
        completion_argument: COMPLETION_ARGUMENT[spec.completionFormat],
        audit_section: renderAuditSection(spec, verifierPath),
      }),
    ],
    [
      '__init__.py',
      renderTemplate('openenv/__init__.py.tmpl', {
        description: pyString(spec.description),
        ...classes,
        client_class: names.client,
      }),
    ],
    [
      'models.py',
      renderTemplate('openenv/models.py.tmpl', {
        env_id: spec.envId,
        ...classes,
        answer_format: pyString(spec.answerFormat),
      }),
    ],
    [
      'client.py',
      renderTemplate('openenv/client.py.tmpl', {
        env_id: spec.envId,
        ...classes,
        client_class: names.client,
        answer_format: pyString(spec.answerFormat),
      }),
    ],
    [
      'server/__init__.py',
      renderTemplate('openenv/server-init.py.tmpl', {
        environment_module: names.environmentModule,
        environment_class: names.environment,
      }),
    ],
    [
      `server/${names.environmentModule}.py`,
      renderTemplate('openenv/environment.py.tmpl', {
        env_id: spec.envId,
        env_id_literal: pyString(spec.envId),
        description: pyString(spec.description),
        version: pyString(PACKAGE_VERSION),
        system_prompt: pyString(spec.systemPrompt),
        answer_format: pyString(spec.answerFormat),
        completion_format: pyString(spec.completionFormat),
        verifier_name: pyString(spec.verifierFunction),
        ...classes,
        environment_class: names.environment,
      }),
    ],
    [
      'server/app.py',
      renderTemplate('openenv/app.py.tmpl', {
        env_id: spec.envId,
        env_id_literal: pyString(spec.envId),
        package: names.package,
        ...classes,
        environment_class: names.environment,
        environment_module: names.environmentModule,
      }),
    ],
    ...verifierFiles(spec, 'server'),
    [`server/${DATA_FILE_NAME}`, renderRows(spec.rows)],
    ['server/requirements.txt', `${OPENENV_REQUIREMENT}\n`],
    ['server/Dockerfile', renderTemplate('openenv/Dockerfile', {})],
    ['validation/runtime.json', runtimePlan(spec)],
  ]);
}
