"""The harness's child process: reads one JSON request per line on stdin, answers one JSON line per trial.

Answers go to a private copy of stdout; fd 1 itself is pointed at stderr so that whatever native code prints
cannot corrupt the protocol. Before each trial a "start" line says which mutant is in flight, so that a death
is attributed to the right file.
"""

from __future__ import annotations

import json
import os
import resource
import sys


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing mutant must not fill the disk with cores
    limit = int(os.environ.get("EDGEACCEL_FUZZ_RLIMIT_AS", "0"))
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from .trial import run_raw_trial, run_trial, run_unchecked_isolated_trial

    for line in sys.stdin:
        request = json.loads(line)
        out.write(json.dumps({"start": request["path"]}) + "\n")
        if request.get("unchecked"):
            result = run_unchecked_isolated_trial(request["path"], request["seed_model"], request["unchecked"],
                                                  request.get("seed", 0), request.get("limits"))
        elif request.get("raw"):
            result = run_raw_trial(request["path"], request["raw"], request.get("seed", 0))
        else:
            result = run_trial(request["path"], request.get("isolate", False), request.get("seed", 0),
                               request.get("limits"))
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
