import sys

from e2e.localcluster.cli import main

sys.exit(main())
