"""Regenerate edgeaccel/serve/proto/grpc_service_pb2*.py from grpc_service.proto (run after editing the .proto).

    python tools/gen_serve_proto.py

Needs grpcio-tools. The generated modules embed the protobuf version they were made with and refuse an older
protobuf at import: the `serve` extra's protobuf lower bound in pyproject.toml must be that version's major.minor
(printed below). The imports are made package-relative so the modules load as edgeaccel.serve.proto.*.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parents[1] / "edgeaccel" / "serve" / "proto"


def main() -> int:
    import google.protobuf
    from grpc_tools import protoc

    code = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={PROTO_DIR}",
                        f"--grpc_python_out={PROTO_DIR}", str(PROTO_DIR / "grpc_service.proto")])
    if code:
        return code
    stub = PROTO_DIR / "grpc_service_pb2_grpc.py"
    text = stub.read_text()
    # protoc writes `import grpc_service_pb2`, which only works with the folder on sys.path
    stub.write_text(re.sub(r"^import grpc_service_pb2 as", "from . import grpc_service_pb2 as", text, flags=re.M))
    messages = PROTO_DIR / "grpc_service_pb2.py"
    text = messages.read_text()
    # tritonclient registers the same names (package inference, grpc_service.proto) in protobuf's default pool:
    # ours go into a pool of their own, so that a process may import both (a test, an app that is also a client)
    text = text.replace("_descriptor_pool.Default().AddSerializedFile(",
                        "_descriptor_pool.DescriptorPool().AddSerializedFile(")
    messages.write_text(text)
    made = re.search(r"Protobuf Python Version: (\S+)", text).group(1)
    grpc_made = re.search(r"GRPC_GENERATED_VERSION = '([^']+)'", stub.read_text()).group(1)
    print(f"generated for protobuf {made} (installed: {google.protobuf.__version__}) and grpcio {grpc_made}: "
          f"the serve extra needs protobuf>={made} and grpcio>={grpc_made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
