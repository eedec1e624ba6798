"""What a frontend pays to import the subscriber SDK (issue 16): the events contract, the keys and
the client, not the worker's fold, the core's machine or the commit scripts. `import
terminus.service.sdk.subscriber` once loaded 42 modules of the project, the whole core among them,
because the reply helpers it uses imported the partition fold to type one function; it loads 11
modules now (packages' `__init__` not counted)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Final

NOT_FOR_FRONTENDS: Final = (
    "terminus.service.fold.applier",
    "terminus.service.fold.commit",
    "terminus.service.redis.scripts",
    "terminus.service.fold.decoding",
    "terminus.statemachines.fold",
    "terminus.statemachines.lifecycle",
    "terminus.statemachines.table",
)
PROBE: Final = (
    "import json, sys, terminus.service.sdk.subscriber; "
    "print(json.dumps(sorted(m for m in sys.modules "
    "if m.startswith('terminus.') and not hasattr(sys.modules[m], '__path__'))))"
)


def test_the_subscriber_sdk_loads_no_fold_no_machine_no_scripts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert not set(loaded) & set(NOT_FOR_FRONTENDS), sorted(set(loaded) & set(NOT_FOR_FRONTENDS))
    assert len(loaded) <= 14, loaded  # 11 today; a new import of weight shows here
