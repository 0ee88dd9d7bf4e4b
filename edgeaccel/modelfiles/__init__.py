"""A model's files and what they declare, before any runtime opens them.

``bundle`` (one logical model as several artifacts: a list of files, a folder or an ``edgeaccel-bundle.yaml``
manifest), ``pipeline`` (how images become the model's inputs and its outputs become answers:
``ModelPipeline``, read from the caller, a YAML beside the model, the manifest and the model's own metadata),
and the parsers of what the files carry: ``labels`` (label files and the labels in ONNX/TFLite metadata) and
``metadata`` (a TFLite model's normalization). Everything here reads files and validates; nothing runs a model,
so the vision tasks, the selection pipeline and the converter build on it.
"""
