"""The HTTP side of the task endpoints (tasks.py):

- ``POST /v2/models/{name}/predict``: the image as the body (``Content-Type: image/jpeg``, ``image/png`` or
  ``application/octet-stream``) or as the file of a ``multipart/form-data`` form; the answer is the result JSON.
  ``?masks=png|rle|none`` chooses how a segmentation mask comes back (a form field ``masks`` works too).
- ``GET /v2/models/{name}/predict``: a small HTML page that posts an image and draws the result (a browser
  is a client too).
- ``POST /v2/models/{name}/infer`` with ``BYTES`` inputs: KServe v2 tensors holding encoded images; the answer
  is the ``result`` BYTES output (image_tensors.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs

from .errors import ServeError
from .image_tensors import RESULT, check_count, declared_count, from_json_strings, join_bytes, result_bytes, split_bytes
from .images import multipart_file
from .task_options import from_parameters, from_predict
from .tasks import TaskService

# a body so labelled is an image (or raw bytes whose content decides): curl --data-binary and urllib call any
# body x-www-form-urlencoded, browsers send a file's own type or none
IMAGE_BODY_TYPES = (b"image/", b"application/octet-stream", b"application/x-www-form-urlencoded")


def query_options(query_string: bytes) -> dict[str, str]:
    parsed = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)  # "?conf=" is a mistake to say
    return {k: v[-1] for k, v in parsed.items()}


def image_of(body: bytes, headers: dict) -> tuple[bytes, dict[str, str]]:
    """The image bytes of a /predict body and any form fields."""
    content_type = headers.get(b"content-type", b"")
    if content_type.lower().startswith(b"multipart/form-data"):
        return multipart_file(body, content_type)
    kind = content_type.split(b";")[0].strip().lower()
    if kind and not kind.startswith(IMAGE_BODY_TYPES):
        where = "; tensors in JSON go to /infer" if kind == b"application/json" else ""
        raise ServeError(415, f"POST /predict takes an image, not {kind.decode('latin-1')}: send its bytes with "
                              "Content-Type image/jpeg, image/png or application/octet-stream, or as the file of "
                              f"a multipart/form-data form (curl -F image=@photo.jpg){where}")
    return body, {}


async def predict(tasks: TaskService, name: str, version: str, body: bytes, headers: dict,
                  query: dict[str, str]) -> bytes:
    image, fields = image_of(body, headers)
    values = {**fields, **query}
    options = from_predict(values)
    result = await tasks.predict_async(name, version, image, options, _timeout(values))
    return json.dumps(result, separators=(",", ":")).encode()


def _timeout(options: dict) -> float | None:
    value = options.get("timeout")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ServeError(400, f"timeout is a positive number of seconds, not {value!r}")
    return seconds


def bytes_inputs(request: dict, binary: memoryview) -> list[bytes] | None:
    """The images of an /infer request whose input is BYTES (None when no input is: a tensor request)."""
    given = request.get("inputs")
    if not isinstance(given, list) or not any(isinstance(t, dict) and t.get("datatype") == "BYTES" for t in given):
        return None
    if len(given) != 1:
        raise ServeError(400, "an image request has one BYTES input (the encoded images); the model's other inputs "
                              "are the task's to fill")
    tensor = given[0]
    where = f"input '{tensor.get('name')}'"
    parameters = tensor.get("parameters") if isinstance(tensor.get("parameters"), dict) else {}
    size = parameters.get("binary_data_size")
    if declared_count(tensor.get("shape")) == 0:  # tritonclient sends no data for a [0] tensor
        raise ServeError(400, f"{where} holds no image (shape {tensor.get('shape')}): send one or more encoded images")
    if size is not None:
        if not isinstance(size, int) or size < 0 or size != len(binary):
            raise ServeError(400, f"{where}: binary_data_size {size!r} is not the {len(binary)} bytes after the "
                                  "JSON header")
        images = split_bytes(binary, where)
    elif "data" in tensor:
        images = from_json_strings(tensor["data"], where)
    else:
        raise ServeError(400, f"{where} has neither 'data' nor a 'binary_data_size' parameter")
    return check_count(images, tensor.get("shape"), where)


async def infer_images(tasks: TaskService, name: str, version: str, request: dict, images: list[bytes],
                       timeout_s: float | None) -> tuple[bytes, list]:
    """The /infer answer for image inputs: the ``result`` output, one JSON string per image."""
    parameters = request.get("parameters") if isinstance(request.get("parameters"), dict) else {}
    options = from_parameters(parameters)
    options.check_images(len(images))
    binary = _binary_result(request.get("outputs"), bool(parameters.get("binary_data_output", False)))
    results = await asyncio.gather(*(tasks.predict_async(name, version, image, options, timeout_s,
                                                         f"image {i} of the request")
                                     for i, image in enumerate(images)))
    encoded = result_bytes(list(results))
    tensor = {"name": RESULT, "datatype": "BYTES", "shape": [len(encoded)]}
    if binary:
        blob = join_bytes(encoded)
        tensor["parameters"] = {"binary_data_size": len(blob)}
    else:
        tensor["data"] = [e.decode() for e in encoded]
    reply = {"model_name": name, "model_version": "1", "outputs": [tensor]}
    if request.get("id") is not None:
        reply["id"] = request["id"]
    head = json.dumps(reply, separators=(",", ":")).encode()
    if not binary:
        return head, [b"application/json"]
    return head + blob, [b"application/octet-stream", [(b"inference-header-content-length", str(len(head)).encode())]]


PAGE = """<!doctype html><meta charset="utf-8"><title>edgeaccel: {name}</title>
<style>body{{font-family:sans-serif;margin:2em}}canvas{{max-width:100%;border:1px solid #ccc}}
pre{{background:#f4f4f4;padding:1em;max-height:20em;overflow:auto}}</style>
<h1>{name}</h1><p>Choose an image: it is posted to <code>/v2/models/{name}/predict</code> and the result is
drawn on it.</p><input type="file" id="file" accept="image/*"><p id="status"></p><canvas id="view"></canvas>
<pre id="json"></pre><script>
const file = document.getElementById('file'), view = document.getElementById('view'), ctx = view.getContext('2d');
file.onchange = async () => {{
  const image = file.files[0]; if (!image) return;
  document.getElementById('status').textContent = 'running...';
  const bitmap = await createImageBitmap(image, {{imageOrientation: 'from-image'}});
  const reply = await fetch('predict', {{method: 'POST', body: image,
    headers: {{'Content-Type': image.type || 'application/octet-stream'}}}});
  const result = await reply.json();
  document.getElementById('json').textContent = JSON.stringify(result, null, 2);
  document.getElementById('status').textContent = reply.ok ? (result.task + ' by ' + result.executor) : 'error';
  view.width = bitmap.width; view.height = bitmap.height; ctx.drawImage(bitmap, 0, 0);
  if (!reply.ok) return;
  if (result.mask && result.mask.format === 'png') {{
    const mask = new Image(); mask.src = 'data:image/png;base64,' + result.mask.data; await mask.decode();
    const off = new OffscreenCanvas(mask.width, mask.height), m = off.getContext('2d'); m.drawImage(mask, 0, 0);
    const px = m.getImageData(0, 0, mask.width, mask.height), over = ctx.getImageData(0, 0, view.width, view.height);
    for (let i = 0; i < px.data.length; i += 4) if (px.data[i]) {{
      const h = px.data[i] * 47; over.data[i] = (over.data[i] + (h * 3) % 256) / 2;
      over.data[i + 1] = (over.data[i + 1] + (h * 7) % 256) / 2; over.data[i + 2] = (over.data[i + 2] + h % 256) / 2; }}
    ctx.putImageData(over, 0, 0);
  }}
  ctx.lineWidth = Math.max(2, view.width / 300); ctx.font = (12 + view.width / 60) + 'px sans-serif';
  for (const box of (result.boxes || result.instances || [])) {{
    const [x1, y1, x2, y2] = box.xyxy; ctx.strokeStyle = ctx.fillStyle = 'lime';
    ctx.strokeRect(x1, y1, x2 - x1, y2 - y1); ctx.fillText(box.label + ' ' + box.score.toFixed(2), x1, y1 - 4);
  }}
  for (const pose of (result.poses || [])) for (const k of pose.keypoints) if (k.score > 0.2) {{
    ctx.fillStyle = 'red'; ctx.beginPath(); ctx.arc(k.x, k.y, ctx.lineWidth * 2, 0, 7); ctx.fill(); }}
  if (result.classes && result.task === 'classify') ctx.fillText(result.classes.map(
    c => c.label + ' ' + c.score.toFixed(2)).join(', '), 10, 30);
}};
</script>"""


def page(name: str) -> bytes:
    import html

    return PAGE.format(name=html.escape(name)).encode()


def _binary_result(outputs: Any, binary: bool) -> bool:
    """Whether the ``result`` output goes as binary data; checked before any image is decoded or run."""
    if outputs is None:
        return binary
    if not isinstance(outputs, list):
        raise ServeError(400, "'outputs' must be a list of {name, parameters}")
    for item in outputs:
        if not isinstance(item, dict) or item.get("name") != RESULT:
            name = item.get("name") if isinstance(item, dict) else item
            raise ServeError(400, f"an image request answers one output, '{RESULT}', not {name!r}")
        parameters = item.get("parameters", {})
        if not isinstance(parameters, dict):
            raise ServeError(400, f"output '{RESULT}': 'parameters' must be a JSON object, not "
                                  f"{type(parameters).__name__}")
        binary = bool(parameters.get("binary_data", binary))
    return binary
