"""What a frontend pays to import the subscriber SDK (issue 16): the events contract, the keys and
the client, not the worker's fold, the core's machine or the commit scripts. `import
service.subscriber` once loaded 42 modules of the project, the whole core among them, because the
reply helpers it uses imported the partition fold to type one function; it loads 13 now."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Final

NOT_FOR_FRONTENDS: Final = (
    "service.applier",
    "service.commit",
    "service.scripts",
    "service.decoding",
    "statemachines.fold",
    "statemachines.lifecycle",
    "statemachines.table",
)
PROBE: Final = (
    "import json, sys, service.subscriber; "
    "print(json.dumps(sorted(m for m in sys.modules "
    "if m.split('.')[0] in ('service', 'statemachines', 'events'))))"
)


def test_the_subscriber_sdk_loads_no_fold_no_machine_no_scripts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert not set(loaded) & set(NOT_FOR_FRONTENDS), sorted(set(loaded) & set(NOT_FOR_FRONTENDS))
    assert len(loaded) <= 16, loaded  # 13 today; a new import of weight shows here
