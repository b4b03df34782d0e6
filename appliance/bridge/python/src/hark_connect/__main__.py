"""`python -m hark_connect`, the same as the `hark-connect` command."""

import sys

from hark_connect import main

sys.exit(main())
