"""A worker start-up that takes 3 s (loaded through ``$DGRAD_WORKER_PRELOAD``)."""

import time

time.sleep(3)
