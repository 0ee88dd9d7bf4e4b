"""Where the time goes, per operator, on every runtime: ``edgeaccel profile`` (schema in schema.py)."""
