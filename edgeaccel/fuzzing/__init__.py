"""Seeded mutation fuzzing of model files through ``edgeaccel.load`` + ``run``.

Shipped with the package so that an application can fuzz its own deployment the way our CI does:

- ``mutate_bytes``: format-blind byte mutations (bit flips, interesting integers, truncation, splices);
- ``mutate_tflite``: structure-aware mutations through the TFLite object API (valid flatbuffers with bad
  indices, shapes, buffers, quantization, options, opcodes);
- ``mutate_onnx`` and ``onnx_zoo``: structure-aware ONNX mutations, on small models built here too;
- ``harness``: runs each mutant in a child process so that a crash of the default path is observed, not
  fatal, and classifies every outcome.

Nothing here is imported by ``import edgeaccel``; the structure-aware mutators import ``ai_edge_litert``
(its flatbuffers schema) and ``onnx`` when called.
"""
