"""Measure what the conversion tests assert, and print it: train the tests' models (tests/convert_helpers.py),
convert them with `edgeaccel.convert`, and print `edgeaccel check` on 300 held-out samples.

    .venv/bin/python tools/measure_convert.py            # MLP (ONNX path) and Keras CNN (needs TensorFlow)
    .venv/bin/python tools/measure_convert.py --no-tf    # MLP only

The same numbers come from the command line on any bundle: `edgeaccel check BUNDLE --data held.npy`.
Latency figures are one run on a shared machine: compare them side by side, not across runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from convert_helpers import dataset, mlp_onnx, top1, train_keras_cnn, train_mlp  # noqa: E402

from edgeaccel.convert import check, convert  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-tf", action="store_true", help="skip the Keras model")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    x, y = dataset(500, seed=1)
    held, held_labels = dataset(300, seed=2)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.save(tmp / "calib.npy", x[:200])
        np.save(tmp / "held.npy", held)

        params = train_mlp(x, y)
        path = mlp_onnx(params, tmp / "mlp.onnx")
        convert(path, "onnx-int8,openvino-int8,openvino", tmp / "mlp", calibration=tmp / "calib.npy")
        _show("MLP (numpy-trained, ONNX)", check(tmp / "mlp", data=tmp / "held.npy", runs=args.runs))

        if not args.no_tf:
            model = train_keras_cnn(x, y)
            accuracy = (top1(model.predict(held, verbose=0)) == held_labels).mean()
            print(f"Keras CNN held-out accuracy {accuracy:.1%} ({model.count_params()} weights)")
            model.save(tmp / "cnn.keras")
            convert(tmp / "cnn.keras", "tflite-float,tflite-dynamic,tflite-int8,onnx-int8,openvino-int8,openvino",
                    tmp / "cnn", calibration=tmp / "calib.npy")
            _show("Keras CNN", check(tmp / "cnn", data=tmp / "held.npy", runs=args.runs))
    return 0


def _show(title: str, report) -> None:
    print(f"\n== {title}: {report.samples} held-out samples, reference {report.reference.name} "
          f"on {report.reference_executor}")
    print(report.table())


if __name__ == "__main__":
    sys.exit(main())
