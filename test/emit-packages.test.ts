import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { renderOpenEnvPackage } from '../src/pack/emit/openenv.js';
import { VERIFIER_FILE_NAME, renderVerifiersPackage } from '../src/pack/emit/verifiers-v0.js';
import { REWARD_CALL_FILE_NAME, REWARD_CALL_SOURCE } from '../src/pack/environment-spec.js';
import type { EnvironmentSpec } from '../src/pack/environment-spec.js';
import { isGatekeptError } from '../src/errors.js';
import { pipInstall, pipUninstall, testPython } from './support/test-python.js';

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

// Strict on purpose twice over: exactly one box equal to the gold, and the
// gate's calling convention checked on every call, so a package that calls it
// any other way raises instead of scoring. Positional-only and keyword-only
// parameters exercise the signature matching.
const BOXED_EXACT = String.raw`import re

BOX = re.compile(r"\\boxed\{([^{}]*)\}")


def boxed_exact(completion, /, answer, *, prompt, state, parser):
    if not (isinstance(completion, list) and len(completion) == 1 and type(completion[0]) is dict):
        raise TypeError("completion must be one plain-dict message")
    if not (isinstance(prompt, list) and len(prompt) == 1 and type(prompt[0]) is dict and prompt[0]["role"] == "user"):
        raise TypeError("prompt must be the user message alone")
    if state != {"answer": answer} or parser.parse_answer(completion) != completion[0]["content"]:
        raise TypeError("unexpected state or parser")
    boxes = BOX.findall(completion[0]["content"])
    if len(boxes) != 1:
        return 0.0
    return 1.0 if boxes[0].strip() == answer.strip() else 0.0
`;

// Async, **kwargs and a bool result: the other half of the calling convention.
// It mutates its info, which must not leak into the next call on the row.
const STRING_KWARGS = String.raw`EXPECTED = {"answer", "prompt", "info", "state", "task", "parser"}
INFO = {"What is 2 + 3?": {"source": "probe", "level": 1, "task": "arithmetic"}}


async def graded(completion, **kwargs):
    if not isinstance(completion, str) or set(kwargs) != EXPECTED:
        raise TypeError(f"unexpected call: {type(completion).__name__} {sorted(kwargs)}")
    prompt, info = kwargs["prompt"], kwargs["info"]
    if not isinstance(prompt, str) or kwargs["state"] != {"answer": kwargs["answer"]} or kwargs["task"] != "default":
        raise TypeError("unexpected pool values")
    if info != INFO.get(prompt, {}):
        raise TypeError(f"unexpected info {info!r}")
    info["seen"] = True
    if completion == "raise":
        raise ValueError("verifier failure on purpose")
    return completion.strip() == "\\boxed{" + kwargs["answer"] + "}"
`;

// A `task` key in info is what verifiers would read as a task payload.
const ROWS: EnvironmentSpec['rows'] = [
  { question: 'What is 6 * 7?', answer: '42' },
  { question: 'What is 2 + 3?', answer: '5', info: { source: 'probe', level: 1, task: 'arithmetic' } },
  { question: 'What is 10 - 4?', answer: '6' },
];

function specFor(envId: string, source: string, fn: string, completionFormat: EnvironmentSpec['completionFormat']): EnvironmentSpec {
  return {
    envId,
    description: 'Small arithmetic, answered in a box.',
    systemPrompt: 'Solve the problem. Put only the final answer in \\boxed{}, e.g. \\boxed{12}. Mind "quotes" and ``` fences.',
    answerFormat: 'boxed',
    rows: ROWS,
    verifierSource: source,
    verifierFunction: fn,
    completionFormat,
    audit: {
      decision: 'PASS',
      hackability: 2.5,
      hackRateCiHi: 0.0412,
      seed: 7,
      corpusVersion: '2026.1',
      corpusHash: 'c'.repeat(64),
      verifierSha256: sha256(source),
      budget: { candidates: 1234, rows: 3, confidence: 0.95 },
    },
    toolVersion: '0.1.0',
  };
}

const SPEC = specFor('emit-probe', BOXED_EXACT, 'boxed_exact', 'messages');
const STRING_SPEC = specFor('emit-probe-str', STRING_KWARGS, 'graded', 'string');

interface Case {
  row: number;
  text: string;
}

const CASES: Case[] = [
  { row: 0, text: 'Six sevens: \\boxed{42}' },
  { row: 0, text: '\\boxed{7}\\boxed{42}' },
  { row: 0, text: '\\boxed{421}' },
  { row: 1, text: '\\boxed{5}' },
  { row: 1, text: 'The answer is 5.' },
];
const EXPECTED = [1, 0, 0, 1, 0];

const STRING_CASES: Case[] = [
  { row: 1, text: '\\boxed{5}' },
  { row: 1, text: '\\boxed{5} or \\boxed{6}' },
  { row: 2, text: '\\boxed{6}' },
  { row: 2, text: 'raise' },
];
/** null: the verifier raises. */
const STRING_EXPECTED = [1, 0, 1, null];

async function writePackage(dir: string, files: Map<string, string>): Promise<void> {
  for (const [relative, content] of files) {
    const file = path.join(dir, ...relative.split('/'));
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content, 'utf8');
  }
}

async function runPython(python: string, script: string, args: string[]): Promise<Record<string, any>> {
  const env = { HF_DATASETS_OFFLINE: '1', HF_HUB_OFFLINE: '1', PYTHONDONTWRITEBYTECODE: '1' };
  const result = await execa(python, ['-c', script, ...args], { reject: false, timeout: 150_000, stdin: 'ignore', env });
  const line = result.stdout.split('\n').find((candidate) => candidate.startsWith('RESULT '));
  if (result.exitCode !== 0 || line === undefined) {
    throw new Error(`python exited ${String(result.exitCode)}\n${result.stderr}\n${result.stdout}`);
  }
  return JSON.parse(line.slice('RESULT '.length)) as Record<string, any>;
}

// Rolls each reply out through the environment with a client that answers
// from a script instead of a model, then scores it with the rubric's own
// score_rollout (one rollout) and score_group (a training group).
const VERIFIERS_CHECK = String.raw`
import asyncio, hashlib, importlib, json, logging, sys
from pathlib import Path

import verifiers as vf
from verifiers.clients import Client
from verifiers.scripts.eval import get_env_eval_defaults
from verifiers.types import Response, ResponseMessage

module_name, env_id, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

errors = []


class Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            errors.append(record.getMessage())


# verifiers' logger does not propagate to the root.
logging.getLogger("verifiers").addHandler(Collect())


class Scripted(Client):
    def __init__(self, text):
        super().__init__(None)
        self.text = text
        self.prompts = []

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        self.prompts.append([[m["role"], m["content"]] for m in prompt])
        return self.text

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, response):
        message = ResponseMessage(content=response, finish_reason="stop", is_truncated=False)
        return Response(id="scripted", created=0, model="scripted", message=message)

    async def close(self):
        return None


module = importlib.import_module(module_name)
env = module.load_environment()
dataset = env.get_eval_dataset()
try:
    module.load_environment(rubric=vf.Rubric())
    refused = None
except ValueError as error:
    refused = str(error)


async def rollout(case):
    client = Scripted(case["text"])
    state = await env.rollout(dataset[case["row"]], client, "scripted", {})
    return state, client


async def main():
    scores = []
    for case in cases:
        state, client = await rollout(case)
        await env.rubric.score_rollout(state)
        scores.append({
            "reward": state["reward"],
            "metrics": state["metrics"],
            "message_type": type(state["completion"][-1]).__name__,
            "prompt": client.prompts[0],
        })
    group = [(await rollout(case))[0] for case in cases]
    await env.rubric.score_group(group)
    return scores, [state["reward"] for state in group]


scores, group = asyncio.run(main())
installed = Path(module.__file__).parent
companion = importlib.import_module(module_name + "_env")
companion_server = Path(companion.__file__).parent / "server"
digest = lambda path: hashlib.sha256(path.read_bytes()).hexdigest()
result = {
    "version": vf.__version__,
    "env": type(env).__name__,
    "loaded": type(vf.load_environment(env_id)).__name__,
    "rows": [
        {"question": row["question"], "answer": row["answer"], "info": json.loads(row["gatekept_info"]), "prompt": row["prompt"]}
        for row in dataset
    ],
    "train_rows": len(env.get_dataset()),
    "eval_defaults": get_env_eval_defaults(env_id),
    "refused": refused,
    "scores": scores,
    "group": group,
    "errors": errors,
    "files": {
        "verifiers": [digest(installed / "${VERIFIER_FILE_NAME}"), digest(installed / "${REWARD_CALL_FILE_NAME}")],
        "openenv": [digest(companion_server / "${VERIFIER_FILE_NAME}"), digest(companion_server / "${REWARD_CALL_FILE_NAME}")],
    },
}
print("RESULT " + json.dumps(result))
`;

// Drives the app the way a trainer does (reset then step on one /ws session),
// plus the Environment directly and, optionally, the package's own client over loopback.
const OPENENV_CHECK = String.raw`
import asyncio, importlib, json, sys, threading, time
from pathlib import Path

package_dir, package, prefix, cases, with_client = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5] == "1"
app_module = importlib.import_module(package + ".server.app")
env_module = importlib.import_module(package + ".server." + package.removesuffix("_env") + "_environment")
models = importlib.import_module(package + ".models")

from openenv.cli._validation import validate_multi_mode_deployment
from starlette.testclient import TestClient

out = {}
client = TestClient(app_module.app)
out["health"] = client.get("/health").json()
out["metadata"] = client.get("/metadata").json()
out["schema"] = client.get("/schema").json()
out["http_reset"] = client.post("/reset", json={"seed": 4}).json()
out["http_step"] = client.post("/step", json={"action": {"answer": cases[0]["text"]}, "index": cases[0]["row"]}).json()

episodes = []
with client.websocket_connect("/ws") as ws:
    for case in cases:
        ws.send_json({"type": "reset", "data": {"index": case["row"]}})
        reset = ws.receive_json()
        ws.send_json({"type": "step", "data": {"answer": case["text"]}})
        step = ws.receive_json()
        ws.send_json({"type": "step", "data": {"answer": case["text"]}})
        episodes.append({"reset": reset, "step": step, "again": ws.receive_json()})
    ws.send_json({"type": "state"})
    out["state"] = ws.receive_json()
out["episodes"] = episodes

with client.websocket_connect("/ws") as ws:
    order = []
    for data in [{}, {}, {}, {}, {"seed": 5}]:
        ws.send_json({"type": "reset", "data": data})
        order.append(ws.receive_json()["data"]["observation"]["row_index"])
    out["order"] = order

Environment = getattr(env_module, prefix + "Environment")
Action = getattr(models, prefix + "Action")
direct = []
env = Environment()
for case in cases:
    reset = env.reset(index=case["row"])
    try:
        direct.append({"reset": reset.model_dump(), "step": env.step(Action(answer=case["text"])).model_dump()})
    except Exception as error:
        direct.append({"reset": reset.model_dump(), "raised": f"{type(error).__name__}: {error}"})


async def inside_a_loop():
    looped = Environment()
    looped.reset(index=cases[0]["row"])
    return looped.step(Action(answer=cases[0]["text"])).reward


out["direct"] = direct
out["in_loop"] = asyncio.run(inside_a_loop())
out["validate"] = validate_multi_mode_deployment(Path(package_dir))[1]

if with_client:
    import uvicorn

    Client = getattr(importlib.import_module(package), prefix + "Env")
    server = uvicorn.Server(uvicorn.Config(app_module.app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with Client(base_url=f"http://127.0.0.1:{port}").sync() as remote:
            started = remote.reset(index=cases[0]["row"])
            finished = remote.step(Action(answer=cases[0]["text"]))
        out["client"] = {
            "question": started.observation.question,
            "row_index": started.observation.row_index,
            "reward": finished.reward,
            "done": finished.done,
        }
    finally:
        server.should_exit = True
        thread.join(10)

print("RESULT " + json.dumps(out))
`;

// The README's command end to end: vf-eval against a model that answers from
// a script, served on loopback, with the installed package's eval defaults.
const VF_EVAL_CHECK = String.raw`
import json, os, subprocess, sys, threading, time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

env_id, replies, out_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]


async def chat(request):
    body = await request.json()
    reply = replies.get(body["messages"][-1]["content"], "")
    return JSONResponse({
        "id": "scripted", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    })


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
thread = threading.Thread(target=server.run, daemon=True)
thread.start()
deadline = time.monotonic() + 30
while not server.started and time.monotonic() < deadline:
    time.sleep(0.05)
port = server.servers[0].sockets[0].getsockname()[1]
try:
    command = [str(Path(sys.executable).with_name("vf-eval")), env_id, "-m", "scripted", "-b", f"http://127.0.0.1:{port}/v1",
               "-k", "GATEKEPT_SCRIPTED_KEY", "-s", "-d", "-o", out_dir]
    run = subprocess.run(command, cwd=out_dir, env={**os.environ, "GATEKEPT_SCRIPTED_KEY": "unused"},
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=150)
finally:
    server.should_exit = True
    thread.join(10)
if run.returncode != 0:
    sys.exit(f"vf-eval exited {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
results = next(Path(out_dir).glob("evals/*/*/results.jsonl"))
metadata = json.loads(results.with_name("metadata.json").read_text())
rollouts = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
print("RESULT " + json.dumps({
    "metadata": {key: metadata[key] for key in ("num_examples", "rollouts_per_example", "avg_reward")},
    "rollouts": sorted([r["example_id"], r["reward"], r["metrics"]] for r in rollouts),
}))
`;

// Both packages call the verifier through gatekept_reward.py; the gate calls
// it through the harness. Same pool, same argument binding, or the audit does
// not describe the shipped reward.
const PARITY_CHECK = String.raw`
import json, sys
harness_dir, reward_dir = sys.argv[1], sys.argv[2]
sys.path[:0] = [harness_dir, reward_dir]
import harness
import gatekept_reward as shipped


def plain(completion, answer): pass
def mixed(completion, /, answer, *, prompt, state, parser): pass
def catch_all(completion, **kwargs): pass
def defaults_first(x=1, completion=None, /, *args, info, task="t", **kwargs): pass
def foreign(completion, question): pass


out = {}
for fmt in ("messages", "string"):
    harness.S.messages = fmt == "messages"
    theirs = harness._keyword_pool({"completion": "reply", "answer": "42", "prompt": "q?", "info": {"k": [1]}})
    ours = shipped.keyword_pool(fmt, text="reply", answer="42", question="q?", info={"k": [1]})
    parse = lambda pool: [pool["parser"].parse("x"), pool["parser"].parse_answer(pool["completion"]), repr(pool["parser"])]
    out[fmt] = {
        "pool": [[repr({k: v for k, v in pool.items() if k != "parser"}), parse(pool)] for pool in (theirs, ours)],
        "calls": {},
    }
    for fn in (plain, mixed, catch_all, defaults_first, foreign):
        plan, _ = harness._build_plan(fn, fn.__name__)
        expected = None if plan is None else [
            repr([theirs[item] if is_pool else item for is_pool, item in plan["positional"]]),
            sorted(plan["keywords"]),
        ]
        try:
            args, kwargs = shipped.call_arguments(fn, ours)
            actual = [repr(args), sorted(kwargs)]
        except TypeError:
            actual = None
        out[fmt]["calls"][fn.__name__] = [expected, actual]
print("RESULT " + json.dumps(out))
`;

describe('rendering environment packages', () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'gatekept-render-'));
  });

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('renders the same files every time', () => {
    for (const render of [renderVerifiersPackage, renderOpenEnvPackage]) {
      const first = render(SPEC);
      const second = render(structuredClone(SPEC));
      expect([...second.entries()]).toEqual([...first.entries()]);
    }
  });

  it('lays the packages out under distinct import names', () => {
    expect([...renderVerifiersPackage(SPEC).keys()].sort()).toEqual([
      'README.md',
      'emit_probe/__init__.py',
      'emit_probe/data.jsonl',
      'emit_probe/emit_probe.py',
      `emit_probe/${REWARD_CALL_FILE_NAME}`,
      `emit_probe/${VERIFIER_FILE_NAME}`,
      'pyproject.toml',
    ]);
    const openenv = renderOpenEnvPackage(SPEC);
    expect(openenv.get('pyproject.toml')).toContain('name = "openenv-emit-probe"');
    expect(openenv.get('pyproject.toml')).toContain('server = "emit_probe_env.server.app:main"');
    expect(openenv.get('pyproject.toml')).toContain('packages = ["emit_probe_env", "emit_probe_env.server"]');
  });

  it('ships the audited verifier byte-for-byte in both packages', async () => {
    const verifiersDir = path.join(root, 'bytes', 'verifiers');
    const openenvDir = path.join(root, 'bytes', 'openenv');
    await writePackage(verifiersDir, renderVerifiersPackage(SPEC));
    await writePackage(openenvDir, renderOpenEnvPackage(SPEC));
    for (const file of [
      path.join(verifiersDir, 'emit_probe', VERIFIER_FILE_NAME),
      path.join(openenvDir, 'server', VERIFIER_FILE_NAME),
    ]) {
      expect(sha256(await readFile(file))).toBe(SPEC.audit.verifierSha256);
    }
  });

  it('states the verifiers range, the eval defaults and the audit', () => {
    const files = renderVerifiersPackage(SPEC);
    const pyproject = files.get('pyproject.toml')!;
    expect(pyproject).toContain('requires-python = ">=3.11"');
    expect(pyproject).toContain('dependencies = ["verifiers>=0.3.1,<0.4"]');
    expect(pyproject).toContain('build-backend = "hatchling.build"');
    expect(pyproject).toMatch(/\[tool\.verifiers\.eval\]\nnum_examples = 3\nrollouts_per_example = 3\n/);
    for (const readme of [files.get('README.md')!, renderOpenEnvPackage(SPEC).get('README.md')!]) {
      expect(readme).toContain('| hackability | 2.5 / 100 |');
      expect(readme).toContain('| hack-rate upper bound | 0.041 (upper end of the 95% confidence interval');
      expect(readme).toContain('| budget | 1234 adversarial completions built from 3 dataset rows |');
      expect(readme).toContain('| seed | 7 |');
      expect(readme).toContain('version `2026.1`');
      expect(readme).toContain('PASS means this exact function survived these attacks at this budget and seed.');
    }
    expect(files.get('README.md')).toContain('vf-eval emit-probe -m <model> -n 3 -r 3');
  });

  it('calls the verifier the way the gate harness does', async () => {
    const rewardDir = path.join(root, 'parity');
    await writePackage(rewardDir, new Map([[REWARD_CALL_FILE_NAME, REWARD_CALL_SOURCE]]));
    const harnessDir = fileURLToPath(new URL('../python/', import.meta.url));
    const out = await runPython(testPython(), PARITY_CHECK, [harnessDir, rewardDir]);
    for (const fmt of ['messages', 'string']) {
      const [theirs, ours] = out[fmt].pool;
      expect(ours).toEqual(theirs);
      for (const [name, [expected, actual]] of Object.entries<[unknown, unknown]>(out[fmt].calls)) {
        expect({ name, actual }).toEqual({ name, actual: expected });
      }
      expect(out[fmt].calls.foreign).toEqual([null, null]);
    }
  });

  it('refuses to package a verifier other than the audited one', () => {
    const tampered = { ...SPEC, verifierSource: `${SPEC.verifierSource}\n# edited after the audit\n` };
    const badBudget = { ...SPEC, audit: { ...SPEC.audit, budget: { candidates: -1, rows: 3, confidence: 95 } } };
    for (const spec of [tampered, badBudget]) {
      for (const render of [renderVerifiersPackage, renderOpenEnvPackage]) {
        let caught: unknown;
        try {
          render(spec);
        } catch (error) {
          caught = error;
        }
        expect(isGatekeptError(caught) && caught.code).toBe('BAD_ARGUMENT');
      }
    }
  });
});

describe('emitted packages installed under the real libraries', () => {
  const distributions = [SPEC.envId, STRING_SPEC.envId, `openenv-${SPEC.envId}`, `openenv-${STRING_SPEC.envId}`];
  let python: string;
  let root: string;
  const dirs = { verifiers: '', verifiersStr: '', openenv: '', openenvStr: '' };

  beforeAll(async () => {
    python = testPython();
    root = await mkdtemp(path.join(tmpdir(), 'gatekept-emit-'));
    // Each package in a directory of its own, as from a clean clone, and all
    // four in one venv: the import names must not collide.
    dirs.verifiers = path.join(root, 'verifiers', SPEC.envId);
    dirs.verifiersStr = path.join(root, 'verifiers', STRING_SPEC.envId);
    dirs.openenv = path.join(root, 'openenv', SPEC.envId);
    dirs.openenvStr = path.join(root, 'openenv', STRING_SPEC.envId);
    await writePackage(dirs.verifiers, renderVerifiersPackage(SPEC));
    await writePackage(dirs.verifiersStr, renderVerifiersPackage(STRING_SPEC));
    await writePackage(dirs.openenv, renderOpenEnvPackage(SPEC));
    await writePackage(dirs.openenvStr, renderOpenEnvPackage(STRING_SPEC));
    await pipInstall(python, Object.values(dirs));
  }, 180_000);

  afterAll(async () => {
    if (python) await pipUninstall(python, distributions).catch(() => undefined);
    if (root) await rm(root, { recursive: true, force: true });
  }, 60_000);

  it('loads a SingleTurnEnv offline and scores rollouts through its rubric', async () => {
    const result = await runPython(python, VERIFIERS_CHECK, ['emit_probe', SPEC.envId, JSON.stringify(CASES)]);

    expect(result.version).toBe('0.3.1');
    expect(result.env).toBe('SingleTurnEnv');
    expect(result.loaded).toBe('SingleTurnEnv');
    expect(result.rows).toEqual(
      ROWS.map((row) => ({
        question: row.question,
        answer: row.answer,
        info: row.info ?? {},
        prompt: [
          { role: 'system', content: SPEC.systemPrompt },
          { role: 'user', content: row.question },
        ],
      })),
    );
    expect(result.train_rows).toBe(ROWS.length);
    expect(result.eval_defaults).toEqual({ num_examples: 3, rollouts_per_example: 3 });
    expect(result.refused).toMatch(/rubric cannot be replaced/);

    expect(result.scores.map((score: { reward: number }) => score.reward)).toEqual(EXPECTED);
    expect(result.group).toEqual(EXPECTED);
    expect(result.scores[0].metrics).toEqual({ boxed_exact: 1, num_turns: 1 });
    // The model saw the system prompt; the verifier saw plain dicts all the same.
    expect(result.scores[0].prompt).toEqual([
      ['system', SPEC.systemPrompt],
      ['user', ROWS[0]!.question],
    ]);
    expect(result.scores[0].message_type).toBe('AssistantMessage');
    expect(result.errors).toEqual([]);

    expect(result.files.verifiers[0]).toBe(SPEC.audit.verifierSha256);
    expect(result.files.openenv).toEqual(result.files.verifiers);
  }, 120_000);

  it('calls async string-mode verifiers with the gate pool and scores a raise 0.0 with a logged error', async () => {
    const result = await runPython(python, VERIFIERS_CHECK, ['emit_probe_str', STRING_SPEC.envId, JSON.stringify(STRING_CASES)]);

    const zeroForRaise = STRING_EXPECTED.map((value) => value ?? 0);
    expect(result.scores.map((score: { reward: number }) => score.reward)).toEqual(zeroForRaise);
    expect(result.group).toEqual(zeroForRaise);
    expect(result.errors).toHaveLength(2);
    for (const message of result.errors) {
      expect(message).toBe('Error calling reward function graded: verifier failure on purpose');
    }
    expect(result.files.verifiers[0]).toBe(STRING_SPEC.audit.verifierSha256);
    expect(result.files.openenv).toEqual(result.files.verifiers);
  }, 120_000);

  it('runs under vf-eval with the eval defaults it ships', async () => {
    const replies = { [ROWS[0]!.question]: '\\boxed{42}', [ROWS[1]!.question]: '\\boxed{7}\\boxed{5}', [ROWS[2]!.question]: '\\boxed{6}' };
    const outDir = await mkdtemp(path.join(root, 'vf-eval-'));
    const result = await runPython(python, VF_EVAL_CHECK, [SPEC.envId, JSON.stringify(replies), outDir]);

    expect(result.metadata).toEqual({ num_examples: 3, rollouts_per_example: 3, avg_reward: 2 / 3 });
    const expected = [0, 1, 2].flatMap((row) => Array(3).fill([row, row === 1 ? 0 : 1, { boxed_exact: row === 1 ? 0 : 1, num_turns: 1 }]));
    expect(result.rollouts).toEqual(expected);
  }, 150_000);

  it('serves the OpenEnv package and scores over /ws', async () => {
    const out = await runPython(python, OPENENV_CHECK, [dirs.openenv, 'emit_probe_env', 'EmitProbe', JSON.stringify(CASES), '1']);

    expect(out.health).toEqual({ status: 'healthy' });
    expect(out.metadata).toMatchObject({ name: SPEC.envId, description: SPEC.description, version: '0.1.0' });
    expect(Object.keys(out.schema.action.properties)).toContain('answer');
    expect(out.http_reset.observation.row_index).toBe(1);
    expect(out.http_step).toMatchObject({ reward: 1, done: true });
    const rewards = out.episodes.map((episode: any) => episode.step.data.reward);
    expect(rewards).toEqual(EXPECTED);
    for (const [index, episode] of (out.episodes as any[]).entries()) {
      const row = ROWS[CASES[index]!.row]!;
      expect(episode.reset).toEqual({
        type: 'observation',
        data: {
          observation: { question: row.question, system_prompt: SPEC.systemPrompt, answer_format: 'boxed', row_index: CASES[index]!.row },
          reward: null,
          done: false,
        },
      });
      expect(episode.step.data.done).toBe(true);
      expect(episode.again.type).toBe('error');
    }
    expect(out.state).toMatchObject({ type: 'state', data: { step_count: 1, row_index: 1 } });
    expect(out.order).toEqual([0, 1, 2, 0, 2]);
    expect(out.direct.map((episode: any) => episode.step.reward)).toEqual(EXPECTED);
    expect(out.direct[0].reset).toMatchObject({ question: ROWS[0]!.question, done: false, reward: null });
    expect(JSON.stringify(out.direct[0].reset)).not.toContain('42');
    expect(out.in_loop).toBe(1);
    expect(out.validate).toEqual(["Missing uv.lock - run 'uv lock' to generate it"]);
    expect(out.client).toEqual({ question: ROWS[0]!.question, row_index: 0, reward: 1, done: true });
  }, 120_000);

  it('raises, never rewards, when an OpenEnv verifier fails', async () => {
    const out = await runPython(python, OPENENV_CHECK, [dirs.openenvStr, 'emit_probe_str_env', 'EmitProbeStr', JSON.stringify(STRING_CASES), '0']);

    const steps = out.episodes.map((episode: any) => episode.step);
    expect(steps.slice(0, 3).map((step: any) => step.data.reward)).toEqual(STRING_EXPECTED.slice(0, 3));
    expect(steps[3]).toMatchObject({ type: 'error', data: { message: 'verifier failure on purpose' } });
    // The failed episode is over, like any other.
    expect(out.episodes[3].again).toMatchObject({ type: 'error', data: { message: expect.stringMatching(/episode is over/) } });
    expect(out.direct.slice(0, 3).map((episode: any) => episode.step.reward)).toEqual(STRING_EXPECTED.slice(0, 3));
    expect(out.direct[3].raised).toBe('ValueError: verifier failure on purpose');
    expect(out.in_loop).toBe(1);
  }, 120_000);
});
