#!/usr/bin/env python3
"""What the task endpoints of `edgeaccel serve` add over an app doing the same in-process: an encoded image in,
the task's result out, p50 in alternating blocks (medians over blocks).

    in-process   decode the JPEG/PNG with Pillow, model.predict(rgb), result.to_dict()
    http         POST /v2/models/m/predict with the image as the body (http.client, keep-alive)
    grpc         ModelInfer with one BYTES input (tritonclient.grpc), the 'result' output parsed

    python tools/bench_serve_task.py                    # traffic_model.tflite, detect, traffic_0001.png
    python tools/bench_serve_task.py --model ../shared/models/deeplabv3_mnv2_dm05_pascal_quant.tflite \\
        --task segment --image ../shared/images/dog_segmentation.png --blocks 5 --calls 20
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=SHARED / "models" / "traffic_model.tflite")
    p.add_argument("--task", default="detect")
    p.add_argument("--labels", type=Path, default=None)
    p.add_argument("--image", type=Path, default=SHARED / "images" / "traffic_0001.png")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args()

    import numpy as np
    import tritonclient.grpc as tg
    from PIL import Image

    import edgeaccel
    from edgeaccel.serve.process import ServerProcess

    os.environ.setdefault("EDGEACCEL_CALIBRATE", "off")
    data = args.image.read_bytes()
    folder = Path(tempfile.mkdtemp(prefix="bench-serve-task-"))
    shutil.copy(args.model, folder / f"m{args.model.suffix}")
    extra = ["--labels", f"m={args.labels}"] if args.labels else []
    server = ServerProcess([str(folder), "--port", "0", "--grpc-port", "0", "--task", f"m={args.task}", *extra])
    model = edgeaccel.schedule(args.model, "thermal", task=args.task,
                               task_options=edgeaccel.TaskOptions(labels=args.labels))
    server.start()
    try:
        host, port = server.http.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        grpc = tg.InferenceServerClient(server.grpc)
        tensor = tg.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([data], dtype=object))

        def local():
            with Image.open(io.BytesIO(data)) as image:
                return model.predict(np.asarray(image.convert("RGB"))).to_dict()

        def over_http():
            conn.request("POST", "/v2/models/m/predict?masks=none", body=data,
                         headers={"Content-Type": "application/octet-stream"})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(body.decode()[:300])
            return json.loads(body)

        def over_grpc():
            return json.loads(grpc.infer("m", [tensor], client_timeout=60).as_numpy("result")[0])

        modes = {"in-process": local, "http": over_http, "grpc": over_grpc}
        for call in modes.values():
            for _ in range(3):
                call()
        p50 = {mode: [] for mode in modes}
        for _ in range(args.blocks):
            for mode, call in modes.items():
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                p50[mode].append(statistics.median(times) * 1000)
        answer = over_http()
    finally:
        server.terminate()
        model.close()
        shutil.rmtree(folder, ignore_errors=True)
    med = {mode: statistics.median(v) for mode, v in p50.items()}
    print(f"model {args.model.name}, task {args.task}, image {args.image.name}: {args.blocks} alternating blocks of "
          f"{args.calls} calls (medians of the blocks' p50)")
    print(f"  in-process {med['in-process']:.2f} ms; HTTP /predict {med['http']:.2f} ms "
          f"({med['http'] - med['in-process']:+.2f}); gRPC BYTES {med['grpc']:.2f} ms "
          f"({med['grpc'] - med['in-process']:+.2f}); answered by {answer.get('executor')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
