"""Drive an emitted OpenEnv package the way a trainer does (reset then step on
one /ws session), plus the Environment directly and, optionally, the
package's own client over loopback.

    python openenv_check.py PACKAGE_DIR PACKAGE CLASS_PREFIX CASES_JSON WITH_CLIENT
"""

import asyncio
import importlib
import json
import sys
import threading
import time

from starlette.testclient import TestClient

_package_dir, package, prefix, cases, with_client = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5] == "1"
app_module = importlib.import_module(package + ".server.app")
env_module = importlib.import_module(package + ".server." + package.removesuffix("_env") + "_environment")
models = importlib.import_module(package + ".models")


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
