"""`python -m terminus`: the `terminus` command line."""

from terminus.service.cli.main import main

raise SystemExit(main())
