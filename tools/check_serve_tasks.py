#!/usr/bin/env python3
"""Check `edgeaccel serve`'s task endpoints on any folder of models and images, as an outside checker would.

It starts a real server on the folder (``--task`` and ``--labels`` are passed on), finds the models whose metadata
names a vision task, and for each image sends it five ways: the raw body and a multipart form to
``POST /v2/models/{m}/predict`` (curl), a BYTES input through tritonclient HTTP (binary, then base64 JSON) and
tritonclient gRPC; it also fetches the browser page. Every answer must equal the in-process one
(``edgeaccel.load(entry, task=..., executor=<the one that answered>, task_options=TaskOptions(labels=...))``'s
``predict(path)``), all but
the timings. Then bad requests, each of which must be a 4xx / INVALID_ARGUMENT with a message, never a 500, a
hang or a traceback: empty, random, truncated, a 60000x60000 header, a wrong Content-Type, out-of-range and
unknown options, a multipart form without a file, zero images. A model that takes streams (a detector, a model with
recurrent state) also gets the images as the frames of one stream (``stream=``, each image twice, HTTP and gRPC in
turn), whose results and track ids must equal in-process ``watch``'s on the same frames. Last, the server's log must hold no traceback.

Exit 1 on any problem, listing each.

    python tools/check_serve_tasks.py MODELS/ photo.jpg \\
        --task detector=detect --labels detector=MODELS/detector_labels.txt   # a folder of models, images
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import urllib.error
import urllib.request
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

TIMEOUT_S = 120


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("images", nargs="+", type=Path)
    parser.add_argument("--task", action="append", default=[], metavar="MODEL=TASK")
    parser.add_argument("--labels", action="append", default=[], metavar="MODEL=FILE")
    args = parser.parse_args()

    from edgeaccel.serve.process import ServerProcess
    from edgeaccel.serve.repository import ModelRepository

    serve_args = [args.repository, "--port", "0", "--grpc-port", "0"]
    for item in args.task:
        serve_args += ["--task", item]
    for item in args.labels:
        serve_args += ["--labels", item]
    tasks = dict(item.split("=", 1) for item in args.task)
    labels = dict(item.split("=", 1) for item in args.labels)
    problems: list[str] = []
    with ServerProcess(serve_args) as server:
        checker = Checker(server, problems)
        entries = ModelRepository(args.repository).entries()
        for name in sorted(entries):
            parameters = checker.metadata(name).get("parameters", {})
            if "task" not in parameters:
                print(f"{name}: no vision task ({parameters.get('executors', 'not loaded')}); skipped")
                continue
            print(f"{name}: {parameters['task']}")
            for image in args.images:
                checker.same_everywhere(name, image, entries[name].source, tasks.get(name), labels.get(name))
            if "stream=" in parameters.get("images", ""):  # boxes to track, or recurrent state to carry
                checker.tracked(name, args.images, entries[name].source, tasks.get(name), labels.get(name),
                                boxes="track_id" in parameters["images"])
            checker.bad_requests(name, args.images[0])
        log = "".join(server.stderr_lines)
    if "Traceback" in log:
        problems.append("the server's log holds a traceback:\n" + log[log.index("Traceback"):][:2000])
    print(f"\n{len(problems)} problem(s)")
    for problem in problems:
        print(" -", problem)
    return 1 if problems else 0


class Checker:
    def __init__(self, server, problems: list[str]) -> None:
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient

        self.server, self.problems = server, problems
        self.httpclient, self.grpcclient = httpclient, grpcclient
        self.http = httpclient.InferenceServerClient(server.http, network_timeout=TIMEOUT_S)
        self.grpc = grpcclient.InferenceServerClient(server.grpc)

    def metadata(self, name: str) -> dict:
        try:
            return self.http.get_model_metadata(name)
        except self.httpclient.InferenceServerException as exc:
            return {"parameters": {"executors": f"metadata refused: {exc.message()}"}}

    def post(self, path: str, body: bytes, content_type: str) -> tuple[int, dict | str]:
        request = urllib.request.Request(self.server.url + path, data=body, headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text.decode("utf-8", "replace")

    def same_everywhere(self, name: str, image: Path, source, task: str | None, labels: str | None) -> None:
        import edgeaccel
        from edgeaccel.options import TaskOptions

        before = len(self.problems)
        body = image.read_bytes()
        boundary = "edgeaccel-check"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"{image.name}\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + body + f"\r\n--{boundary}--\r\n".encode()
        answers = {}
        for way, (payload, kind) in {"body": (body, "application/octet-stream"),
                                     "multipart": (form, f"multipart/form-data; boundary={boundary}")}.items():
            status, answer = self.post(f"/v2/models/{name}/predict", payload, kind)
            if status != 200:
                self.problems.append(f"{name} {image.name} {way}: {status} {answer}")
                return
            answers[way] = answer
        for binary in (True, False):
            tensor = self.httpclient.InferInput("image", [1], "BYTES")
            data = body if binary else base64.b64encode(body).decode()
            tensor.set_data_from_numpy(np.array([data], dtype=object), binary_data=binary)
            out = self.httpclient.InferRequestedOutput("result", binary_data=binary)
            answers[f"http-{'binary' if binary else 'json'}"] = self._result(
                lambda tensor=tensor, out=out: self.http.infer(name, [tensor], outputs=[out]),
                f"{name} {image.name} http")
        tensor = self.grpcclient.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([body], dtype=object))
        answers["grpc"] = self._result(lambda: self.grpc.infer(name, [tensor], client_timeout=TIMEOUT_S),
                                       f"{name} {image.name} grpc")
        status, page = self.post_get(f"/v2/models/{name}/predict")
        if status != 200 or "<canvas" not in page:
            self.problems.append(f"{name}: the browser page answered {status}")
        executor = answers["body"].get("executor") or ""
        with edgeaccel.load(source, task=task, executor=executor.split(":")[0] or None,
                            task_options=TaskOptions(labels=labels)) as model:
            result = model.predict(image)
        want, mask = _comparable(result.to_dict()), getattr(result, "mask", None)
        for way, answer in answers.items():
            if answer is not None and mask is not None and not np.array_equal(_mask_of(answer.get("mask")), mask):
                self.problems.append(f"{name} {image.name} {way}: the mask differs from in-process on {executor}")
            if answer is not None and _comparable(answer) != want:
                self.problems.append(f"{name} {image.name} {way}: differs from in-process on {executor}:\n"
                                     f"   server     {json.dumps(_comparable(answer))[:400]}\n"
                                     f"   in-process {json.dumps(want)[:400]}")
        print(f"  {image.name}: {len(answers)} ways, {executor}, "
              f"{'same as in-process' if len(self.problems) == before else 'see the problems below'}")

    def tracked(self, name: str, images: list[Path], source, task: str | None, labels: str | None,
                boxes: bool) -> None:
        """The images as frames of one stream (each twice, so that tracks are confirmed), sent over HTTP and gRPC
        in turn: results, track ids and recurrent state must be those of in-process ``watch`` on the same frames."""
        import re

        import edgeaccel
        from edgeaccel.options import TaskOptions
        from edgeaccel.vision.preprocess import as_rgb

        frames = [image for image in images for _ in range(2)]
        stream = "check-" + re.sub(r"[^A-Za-z0-9._-]", "-", name)[:100]
        answers = []
        for i, image in enumerate(frames):
            body, when = image.read_bytes(), i / 10
            if i % 2 == 0:
                status, answer = self.post(f"/v2/models/{name}/predict?stream={stream}&timestamp={when}", body,
                                           "application/octet-stream")
                answers.append(answer if status == 200 else None)
                if status != 200:
                    self.problems.append(f"{name} tracked frame {i} over HTTP: {status} {answer}")
            else:
                tensor = self.grpcclient.InferInput("image", [1], "BYTES")
                tensor.set_data_from_numpy(np.array([body], dtype=object))
                answers.append(self._result(lambda tensor=tensor, when=when: self.grpc.infer(
                    name, [tensor], parameters={"stream": stream, "timestamp": when}, client_timeout=TIMEOUT_S),
                    f"{name} tracked frame {i} over gRPC"))
        executor = next((a.get("executor") for a in answers if a), None) or ""
        # in-process, the same frames through watch at 10 frames a second: the same timestamps, the model's
        # recurrent state (if any) carried from frame to frame as the server carries it per stream
        with edgeaccel.load(source, task=task, executor=executor.split(":")[0] or None,
                            task_options=TaskOptions(labels=labels)) as model:
            local = [frame.result for frame in model.watch([as_rgb(image) for image in frames], track=boxes, fps=10)]
        for i, (result, answer) in enumerate(zip(local, answers, strict=True)):
            want = _comparable(result.to_dict())
            if answer is not None and {k: v for k, v in _comparable(answer).items() if k != "stream"} != want:
                self.problems.append(f"{name} tracked frame {i}: differs from in-process watch(track=True) on "
                                     f"{executor}:\n   server     {json.dumps(_comparable(answer))[:400]}\n"
                                     f"   in-process {json.dumps(want)[:400]}")
        ids = sorted({b["track_id"] for a in answers if a for b in a.get("boxes", a.get("instances", []))
                      if "track_id" in b})
        print(f"  {len(frames)} frames as stream {stream} (HTTP and gRPC in turn): track ids {ids[:12]}")

    def post_get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.server.url + path, timeout=TIMEOUT_S) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def _result(self, call, where: str) -> dict | None:
        try:
            return json.loads(call().as_numpy("result")[0])
        except Exception as exc:  # noqa: BLE001 - any failure is a problem to list, not a crash of the check
            self.problems.append(f"{where}: {type(exc).__name__}: {exc}")
            return None

    def bad_requests(self, name: str, image: Path) -> None:
        good = image.read_bytes()
        path = f"/v2/models/{name}/predict"
        cases = [("empty body", path, b"", "image/jpeg"),
                 ("random bytes", path, bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8)), "image/png"),
                 ("truncated image", path, good[:len(good) // 3], "image/png"),
                 ("60000x60000 header", path, _png_header(60_000, 60_000), "image/png"),
                 ("text/plain body", path, good, "text/plain"),
                 ("JSON body", path, b'{"inputs": []}', "application/json"),
                 ("multipart without a file", path, b"--x\r\nContent-Disposition: form-data; name=\"masks\"\r\n\r\n"
                                                    b"png\r\n--x--\r\n", "multipart/form-data; boundary=x"),
                 ("conf=2", path + "?conf=2", good, "image/png"),
                 ("top_k=-1", path + "?top_k=-1", good, "image/png"),
                 ("unknown option", path + "?colour=red", good, "image/png")]
        for label, where, body, kind in cases:
            status, answer = self.post(where, body, kind)
            message = answer.get("error") if isinstance(answer, dict) else None
            if not 400 <= status < 500 or not message:
                self.problems.append(f"{name} {label}: {status} {answer}")
        tensor = self.httpclient.InferInput("image", [0], "BYTES")
        self._refused(lambda: self.http.infer(name, [tensor]), f"{name} zero images over HTTP", "400")
        tensor = self.grpcclient.InferInput("image", [2], "BYTES")
        tensor.set_data_from_numpy(np.array([good, b"not an image"], dtype=object))
        self._refused(lambda: self.grpc.infer(name, [tensor], client_timeout=TIMEOUT_S),
                      f"{name} a batch with a bad image over gRPC", "StatusCode.INVALID_ARGUMENT")
        print(f"  {len(cases) + 2} bad requests sent")

    def _refused(self, call, where: str, status: str) -> None:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - tritonclient's exception types differ by protocol
            got = exc.status() if hasattr(exc, "status") else type(exc).__name__
            if got != status:
                self.problems.append(f"{where}: {got} {exc}")
            return
        self.problems.append(f"{where}: answered, not refused")


def _comparable(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in ("timing_ms", "executor", "mask")}


def _mask_of(mask: dict | None) -> np.ndarray | None:
    """A served mask (PNG, the default) as the class-id array in-process predict gives (-1 where no instance)."""
    if not mask or mask.get("format") != "png":
        return None
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(mask["data"]))) as decoded:
        values = np.asarray(decoded).astype(np.int64)
    return values - mask["offset"]


def _png_header(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IEND", b"")


if __name__ == "__main__":
    sys.exit(main())
